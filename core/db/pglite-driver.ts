import type { PGliteInterface } from '@electric-sql/pglite';
import { AbstractSqlDriver, PostgreSqlPlatform, type Configuration } from '@mikro-orm/postgresql';
import { PGliteConnection, PGliteDialectDataSource, PGliteKnexDialect, type QueryObject } from 'mikro-orm-pglite';
import { withStatementSpans } from './statement-spans.ts';

/**
 * Sends every statement to PGlite whole. The dialect of mikro-orm-pglite
 * guesses that raw SQL holding a `;` is several statements and runs it with
 * `exec`, whose answer is a list of results; as MikroORM inlines every value,
 * a quoted `'k;1'` made an insert answer the wrong shape and a delete report
 * nothing deleted. Here a statement with bindings goes through `query`; one
 * without goes to the connection as it is, which hands it to PostgreSQL's own
 * parser (`simpleProtocolWhenUnbound` in core/db/orm.ts), as `pg` sends
 * MikroORM's SQL to a real server.
 */
class WholeStatementDialect extends PGliteKnexDialect {
  override async _query(connection: PGliteInterface, obj: QueryObject): Promise<QueryObject> {
    if (!obj.sql) throw new Error('The query is empty');
    obj.response = await connection.query(obj.sql, obj.bindings ?? []);
    return obj;
  }
}

/**
 * mikro-orm-pglite's connection with the dialect above. It is set as the
 * knex client's class, not on the client object: knex makes each transaction's
 * client from the class's prototype.
 */
class WholeStatementConnection extends PGliteConnection {
  override createKnex(): void {
    // createKnexClient is typed for knex's built-in dialect names; a dialect class is what knex takes at run time.
    this.client = this.createKnexClient(WholeStatementDialect as never);
    const dialect = this.getKnex().client as WholeStatementDialect & { ormConfig: Configuration };
    dialect.ormConfig = this.config;
    dialect.driver = new PGliteDialectDataSource();
    this.connected = true;
  }
}

/** mikro-orm-pglite's driver with the connection above, its statements traced as on PostgreSQL (core/db/statement-spans.ts). */
export class PgliteDriver extends AbstractSqlDriver<WholeStatementConnection> {
  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), withStatementSpans(WholeStatementConnection), ['knex', '@electric-sql/pglite', '@harryplusplus/knex-pglite']);
  }
}
