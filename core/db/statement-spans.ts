import type { Connection, LogContext } from '@mikro-orm/core';
import { AbstractSqlDriver, PostgreSqlConnection, PostgreSqlPlatform, type Configuration } from '@mikro-orm/postgresql';
import { inSpan, inTrace, SpanKind, tracingOn } from '../base/tracing.ts';
import { recordStatement } from './statement-log.ts';

/**
 * A statement in a span of its own, child of the span it runs in (an RPC
 * call, a job), with its SQL as written: placeholders, never values. Outside
 * a trace (the job queue polling, start-up) it runs untraced. Both databases
 * are PostgreSQL to a reader of the trace, PGlite being PostgreSQL in WASM.
 * With RPC_STATEMENT_LOG set, the statement is also logged for the tenant-key
 * check (core/db/statement-log.ts).
 */
export function inStatementSpan<T>(sql: string, run: () => Promise<T>): Promise<T> {
  recordStatement(sql);
  if (!tracingOn() || !inTrace()) return run();
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  const attributes = { 'db.system.name': 'postgresql', 'db.operation.name': operation, 'db.query.text': sql };
  return inSpan({ name: operation, kind: SpanKind.CLIENT, attributes }, run);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a mixin's base takes `...args: any[]`, TypeScript's rule for mixins
type ConnectionClass = abstract new (...args: any[]) => Connection;

/**
 * A MikroORM connection whose statements each run in a span: every query the
 * ORM makes, found or flushed, passes through `executeQuery` with its SQL
 * before values are inlined (`context.query`).
 */
export function withStatementSpans<C extends ConnectionClass>(Base: C): C {
  abstract class Traced extends Base {
    protected override executeQuery<T>(query: string, cb: () => Promise<T>, context?: LogContext): Promise<T> {
      return inStatementSpan(context?.query ?? query, () => super.executeQuery(query, cb, context));
    }
  }
  // Typed as its base: the SDK's declarations (npm run build:types) cannot describe a class expression with protected members.
  return Traced;
}

/** MikroORM's PostgreSQL driver, with the statement spans above. */
export class TracedPostgreSqlDriver extends AbstractSqlDriver<PostgreSqlConnection> {
  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), withStatementSpans(PostgreSqlConnection), ['knex', 'pg']);
  }
}
