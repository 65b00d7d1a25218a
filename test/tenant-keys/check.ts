import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadModule, parseSync } from 'libpg-query';
import { ALLOW_LIST, type Allowed } from './allow-list.ts';

/**
 * The tenant-key check (issue 28, docs/scaling.md): every statement on a
 * table holding tenant data names its tenant. The statements come from the
 * statement log the whole suite writes (core/db/statement-log.ts); each is
 * parsed by PostgreSQL's own parser (libpg-query) and every reference to a
 * tenant table, in any select, update, delete, join, CTE or subquery, must be
 * tied to a subscription by its own conditions: its key column equal to a
 * parameter or constant, `= any(...)`, `in (...)`, or equal to the key column
 * of another reference that is tied (a join on subscription_id, a correlated
 * subquery). An insert into a tenant table names the key column; an
 * `insert ... select` is checked as a select.
 */

/** Tenant tables and the column that holds each one's subscription (`subscription_id`; `id` for the subscriptions themselves). */
export type TenantTables = ReadonlyMap<string, string>;

export interface Statement {
  sql: string;
  /** Set when the statement log knew who sent it: `migration`, `test`. */
  origin?: string;
}

export interface Violation extends Statement {
  /** The tenant tables the statement reaches without their key. */
  tables: string[];
  /** Why, when not a missing key: the statement could not be parsed. */
  error?: string;
}

export interface Report {
  statements: number;
  /** By origin: statements a migration or a test sent are not the service's, and are only counted. */
  skipped: Record<string, number>;
  violations: Violation[];
  allowed: { violation: Violation; entry: Allowed }[];
  /** Violations no allow-list entry covers: the check fails on these. */
  failures: Violation[];
  /** Allow-list entries that matched nothing (stale ones are reported, not failed: a partial run does not reach every statement). */
  unused: Allowed[];
}

// ---------------------------------------------------------------- placeholders

/**
 * The statement with MikroORM's and knex's `?` placeholders as PostgreSQL's
 * `$n`, outside quotes and comments: `\?` is the jsonb operator `?`, `??` an
 * identifier binding. A statement sent without values keeps `?` as written.
 */
export function numberedPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    const skipTo = (end: number) => {
      out += sql.slice(i, end);
      i = end - 1;
    };
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === c && sql[j + 1] !== c)) j += sql[j] === c ? 2 : 1;
      skipTo(j + 1);
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      skipTo(end === -1 ? sql.length : end);
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      skipTo(end === -1 ? sql.length : end + 2);
    } else if (c === '$' && /^\$[A-Za-z_]?\w*\$/.test(sql.slice(i))) {
      const tag = /^\$[A-Za-z_]?\w*\$/.exec(sql.slice(i))![0];
      if (/^\$\d+$/.test(tag.slice(0, -1))) {
        out += c;
        continue;
      }
      const end = sql.indexOf(tag, i + tag.length);
      skipTo(end === -1 ? sql.length : end + tag.length);
    } else if (c === '\\' && sql[i + 1] === '?') {
      out += '?';
      i++;
    } else if (c === '?' && sql[i + 1] === '?') {
      out += `"identifier_${++n}"`;
      i++;
    } else if (c === '?') out += `$${++n}`;
    else out += c;
  }
  return out;
}

// ---------------------------------------------------------------- the AST walk

type Node = Record<string, unknown>;
const isObject = (value: unknown): value is Node => typeof value === 'object' && value !== null;
/** The one key of a wrapped node (`{SelectStmt: {...}}`) and its body. */
const unwrap = (value: unknown): [string, Node] | undefined => {
  if (!isObject(value)) return undefined;
  const keys = Object.keys(value);
  return keys.length === 1 && /^[A-Z]/.test(keys[0]!) && isObject(value[keys[0]!]) ? [keys[0]!, value[keys[0]!] as Node] : undefined;
};
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : value === undefined ? [] : [value]);
const str = (value: unknown): string | undefined => unwrap(value)?.[1].sval as string | undefined;

interface Range {
  /** The base table; undefined for a CTE, a subquery or a function. */
  table?: string;
  alias: string;
  /** The column that names the row's subscription: a tenant table's key, or a CTE's or subquery's `subscription_id`. */
  key?: string;
  keyed: boolean;
  /** A CTE or subquery: its columns are its query's, so it may have any column. A function (`unnest(?::uuid[])`) yields parameters. */
  derived?: 'query' | 'function';
}

interface Scope {
  ranges: Range[];
  parent?: Scope;
}

class Walk {
  readonly unkeyed = new Set<string>();
  constructor(private readonly tenants: TenantTables) {}

  statement(node: unknown, parent: Scope | undefined, ctes: ReadonlySet<string>): void {
    const wrapped = unwrap(node);
    if (!wrapped) return;
    const [kind, body] = wrapped;
    if (kind === 'SelectStmt') this.select(body, parent, ctes);
    else if (kind === 'UpdateStmt' || kind === 'DeleteStmt' || kind === 'InsertStmt') this.write(kind, body, parent, ctes);
    else if (kind === 'ExplainStmt') this.statement(body.query, parent, ctes);
    else if (kind === 'PrepareStmt') this.statement(body.query, parent, ctes);
    // Schema changes, settings, transactions, locks and notifications hold no tenant rows.
  }

  /** The CTE names a WITH adds; each CTE's query is checked as a statement of its own. */
  private with(body: Node, parent: Scope | undefined, ctes: ReadonlySet<string>): ReadonlySet<string> {
    const clause = unwrap({ WithClause: body.withClause })?.[1];
    if (!clause) return ctes;
    const names = new Set(ctes);
    const defined = list(clause.ctes).map((cte) => unwrap(cte)![1]);
    for (const cte of defined) names.add(cte.ctename as string);
    for (const cte of defined) this.statement(cte.ctequery, parent, names);
    return names;
  }

  private select(body: Node, parent: Scope | undefined, outer: ReadonlySet<string>): void {
    const ctes = this.with(body, parent, outer);
    if (body.op && body.op !== 'SETOP_NONE') {
      this.select(body.larg as Node, parent, ctes);
      this.select(body.rarg as Node, parent, ctes);
      return;
    }
    const scope: Scope = { ranges: [], parent };
    const conditions: unknown[] = [body.whereClause];
    const later: (() => void)[] = [];
    for (const item of list(body.fromClause)) this.from(item, scope, ctes, conditions, later);
    this.key(scope, conditions);
    for (const run of later) run();
    for (const part of [body.targetList, body.whereClause, body.havingClause, body.valuesLists, body.groupClause, body.sortClause, conditions.slice(1)])
      this.expressions(part, scope, ctes);
  }

  private write(kind: string, body: Node, parent: Scope | undefined, outer: ReadonlySet<string>): void {
    const ctes = this.with(body, parent, outer);
    const scope: Scope = { ranges: [], parent };
    const conditions: unknown[] = [body.whereClause];
    const later: (() => void)[] = [];
    const target = this.range(unwrap({ RangeVar: body.relation })![1], ctes);
    if (kind === 'InsertStmt') {
      // The row inserted names its tenant; what it is selected from is checked as any select.
      const columns = list(body.cols).map((column) => unwrap(column)![1].name as string);
      if (target.key && !columns.includes(target.key)) this.unkeyed.add(target.table!);
      this.statement(body.selectStmt, parent, ctes);
      target.keyed = true;
      scope.ranges.push(target);
      const conflict = unwrap({ OnConflictClause: body.onConflictClause })?.[1];
      this.expressions([conflict?.targetList, conflict?.whereClause, body.returningList], scope, ctes);
      return;
    }
    scope.ranges.push(target);
    for (const item of list(kind === 'UpdateStmt' ? body.fromClause : body.usingClause)) this.from(item, scope, ctes, conditions, later);
    this.key(scope, conditions);
    for (const run of later) run();
    this.expressions([body.targetList, body.whereClause, body.returningList, conditions.slice(1)], scope, ctes);
  }

  private range(relation: Node, ctes: ReadonlySet<string>): Range {
    const name = relation.relname as string;
    const alias = (unwrap({ Alias: relation.alias })?.[1].aliasname as string | undefined) ?? name;
    // A CTE is checked as a query of its own: its subscription_id, tied there, ties what joins it.
    if (!relation.schemaname && ctes.has(name)) return { alias, key: 'subscription_id', keyed: true, derived: 'query' };
    const key = relation.schemaname && relation.schemaname !== 'public' ? undefined : this.tenants.get(name);
    return { table: name, alias, key, keyed: key === undefined };
  }

  /** Adds a FROM item's ranges to the scope and its join conditions to the list; subqueries are checked once the scope is keyed. */
  private from(item: unknown, scope: Scope, ctes: ReadonlySet<string>, conditions: unknown[], later: (() => void)[]): void {
    const [kind, body] = unwrap(item) ?? ['', {}];
    if (kind === 'RangeVar') scope.ranges.push(this.range(body, ctes));
    else if (kind === 'JoinExpr') {
      this.from(body.larg, scope, ctes, conditions, later);
      this.from(body.rarg, scope, ctes, conditions, later);
      // `join ... on` keys both sides only for an inner join; the keyed side of an outer join keeps the other's rows to its own tenant too.
      conditions.push(body.quals);
      for (const column of list(body.usingClause).map(str)) conditions.push({ usingColumn: column });
    } else if (kind === 'RangeSubselect') {
      const alias = unwrap({ Alias: body.alias })?.[1].aliasname as string | undefined;
      scope.ranges.push({ alias: alias ?? '', key: 'subscription_id', keyed: true, derived: 'query' });
      // A lateral subquery sees the scope; a plain one only the scopes around it.
      later.push(() => this.statement(body.subquery, body.lateral ? scope : scope.parent, ctes));
    } else if (kind === 'RangeFunction') {
      const alias = unwrap({ Alias: body.alias })?.[1].aliasname as string | undefined;
      scope.ranges.push({ alias: alias ?? '', key: 'subscription_id', keyed: true, derived: 'function' });
      later.push(() => this.expressions(body.functions, scope, ctes));
    }
  }

  /** Marks the ranges the conditions tie to a subscription, repeating while a join passes a key on. */
  private key(scope: Scope, conditions: unknown[]): void {
    const conjuncts = conditions.flatMap((condition) => this.conjuncts(condition));
    for (let changed = true; changed;) {
      changed = false;
      for (const conjunct of conjuncts)
        for (const range of this.tied(conjunct, scope))
          if (!range.keyed) {
            range.keyed = true;
            changed = true;
          }
    }
    for (const range of scope.ranges) if (!range.keyed && range.table) this.unkeyed.add(range.table);
  }

  private conjuncts(condition: unknown): unknown[] {
    const wrapped = unwrap(condition);
    if (wrapped?.[0] === 'BoolExpr' && wrapped[1].boolop === 'AND_EXPR') return list(wrapped[1].args).flatMap((arg) => this.conjuncts(arg));
    return condition === undefined ? [] : [condition];
  }

  /** The ranges one conjunct ties to a subscription. */
  private tied(conjunct: unknown, scope: Scope): Range[] {
    if (isObject(conjunct) && 'usingColumn' in conjunct) {
      const keyed = scope.ranges.filter((range) => range.key === conjunct.usingColumn);
      return keyed.some((range) => range.keyed) ? keyed : [];
    }
    const [kind, body] = unwrap(conjunct) ?? ['', {}];
    const operator = list(body.name).map(str).join('.');
    if (kind === 'A_Expr' && operator === '=' && (body.kind === 'AEXPR_OP' || body.kind === 'AEXPR_OP_ANY' || body.kind === 'AEXPR_IN')) {
      const right = body.kind === 'AEXPR_IN' ? list(unwrap(body.rexpr)?.[0] === 'List' ? unwrap(body.rexpr)![1].items : body.rexpr) : [body.rexpr];
      return [...this.pair(body.lexpr, right, scope), ...(body.kind === 'AEXPR_OP' ? this.pair(body.rexpr, [body.lexpr], scope) : [])];
    }
    if (kind === 'SubLink' && body.subLinkType === 'ANY_SUBLINK' && (!body.operName || list(body.operName).map(str).join('.') === '=')) {
      // `key in (select ...)`: the subquery is checked for its own tables.
      return this.pair(body.testexpr, [{ SubLink: {} }], scope);
    }
    return [];
  }

  /** `left = every one of rights` (or a row of them, position by position): the ranges whose key is on the left and anchored on the right. */
  private pair(left: unknown, rights: unknown[], scope: Scope): Range[] {
    const [kind, body] = unwrap(left) ?? ['', {}];
    if (kind === 'RowExpr') {
      const rows = rights.map((right) => unwrap(right));
      if (!rows.every((row) => row?.[0] === 'RowExpr')) return [];
      return list(body.args).flatMap((arg, index) =>
        this.pair(
          arg,
          rows.map((row) => list(row![1].args)[index]),
          scope,
        ),
      );
    }
    const range = this.keyOf(left, scope);
    return range && rights.every((right) => this.anchored(right, scope)) ? [range] : [];
  }

  /** A value that names one subscription for the row: a parameter, a constant, a subquery's answer, or a tied key. */
  private anchored(value: unknown, scope: Scope): boolean {
    const [kind, body] = unwrap(value) ?? ['', {}];
    if (kind === 'ParamRef' || kind === 'A_Const' || kind === 'SubLink') return true;
    if (kind === 'TypeCast') return this.anchored(body.arg, scope);
    if (kind === 'A_ArrayExpr') return list(body.elements).every((element) => this.anchored(element, scope));
    if (kind === 'ColumnRef') return this.keyOf(value, scope)?.keyed ?? false;
    return false;
  }

  /** The range whose key column this is, in this scope or one around it. */
  private keyOf(value: unknown, scope: Scope): Range | undefined {
    const [kind, body] = unwrap(value) ?? ['', {}];
    if (kind === 'TypeCast') return this.keyOf(body.arg, scope);
    if (kind !== 'ColumnRef') return undefined;
    const fields = list(body.fields).map(str);
    const column = fields.at(-1);
    if (!column) return undefined;
    const qualifier = fields.at(-2);
    for (let at: Scope | undefined = scope; at; at = at.parent) {
      if (qualifier !== undefined) {
        const range = at.ranges.find((candidate) => candidate.alias === qualifier);
        if (range) return range.key === column ? range : undefined;
        continue;
      }
      // A function's columns are named by its alias: it has none the query does not name.
      const tenants = at.ranges.filter((range) => range.key === column && range.derived !== 'function');
      // Unqualified: PostgreSQL takes the innermost scope that has the column; only a tenant table's key column is sure to be there.
      if (tenants.length === 1 && (column === 'subscription_id' || at.ranges.length === 1)) return tenants[0];
      if (tenants.length > 0 || at.ranges.some((range) => range.derived === 'query')) return undefined;
    }
    return undefined;
  }

  /** Walks expressions for the subqueries in them. */
  private expressions(node: unknown, scope: Scope, ctes: ReadonlySet<string>): void {
    if (Array.isArray(node)) for (const item of node) this.expressions(item, scope, ctes);
    else if (isObject(node)) {
      const wrapped = unwrap(node);
      if (wrapped?.[0] === 'SubLink') {
        this.statement(wrapped[1].subselect, scope, ctes);
        this.expressions(wrapped[1].testexpr, scope, ctes);
      } else if (wrapped && /Stmt$/.test(wrapped[0])) this.statement(node, scope, ctes);
      else for (const value of Object.values(node)) this.expressions(value, scope, ctes);
    }
  }
}

let loaded: Promise<void> | undefined;
/** Loads the parser (WebAssembly) once. */
export const parserReady = (): Promise<void> => (loaded ??= loadModule());

/** The tenant tables a statement reaches without their key; throws when it cannot be parsed. Call after `parserReady()`. */
export function unkeyedTables(sql: string, tenants: TenantTables): string[] {
  let tree;
  try {
    tree = parseSync(numberedPlaceholders(sql));
  } catch (error) {
    // Sent without values: a `?` is the jsonb operator as written.
    if (!sql.includes('?')) throw error;
    tree = parseSync(sql);
  }
  const walk = new Walk(tenants);
  for (const { stmt } of tree.stmts ?? []) walk.statement(stmt, undefined, new Set());
  return [...walk.unkeyed].sort();
}

// ---------------------------------------------------------------- the run

/** Every distinct statement of a statement-log folder, with the origins it was sent from. */
export function readStatementLog(folder: string): Statement[] {
  const distinct = new Map<string, Statement>();
  for (const file of readdirSync(folder).filter((name) => name.endsWith('.jsonl'))) {
    for (const line of readFileSync(path.join(folder, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let entry: Statement;
      try {
        entry = JSON.parse(line) as Statement;
      } catch {
        continue; // a line cut by a process killed while writing it
      }
      const known = distinct.get(entry.sql);
      // Sent by the service anywhere: checked as the service's.
      if (!known) distinct.set(entry.sql, entry);
      else if (known.origin !== undefined && known.origin !== entry.origin) distinct.set(entry.sql, { sql: entry.sql });
    }
  }
  return [...distinct.values()];
}

const normalized = (sql: string): string => sql.replace(/\s+/g, ' ').trim();

export function allowedBy(violation: Violation, allowList: readonly Allowed[]): Allowed | undefined {
  const text = normalized(violation.sql);
  return allowList.find((entry) => violation.tables.every((table) => entry.tables.includes(table)) && entry.match.test(text));
}

export async function checkStatements(statements: readonly Statement[], tenants: TenantTables, allowList: readonly Allowed[] = ALLOW_LIST): Promise<Report> {
  await parserReady();
  const report: Report = { statements: statements.length, skipped: {}, violations: [], allowed: [], failures: [], unused: [] };
  const used = new Set<Allowed>();
  for (const statement of statements) {
    if (statement.origin !== undefined) {
      report.skipped[statement.origin] = (report.skipped[statement.origin] ?? 0) + 1;
      continue;
    }
    let violation: Violation | undefined;
    try {
      const tables = unkeyedTables(statement.sql, tenants);
      if (tables.length > 0) violation = { ...statement, tables };
    } catch (error) {
      violation = { ...statement, tables: [], error: `not parsed: ${(error as Error).message}` };
    }
    if (!violation) continue;
    report.violations.push(violation);
    const entry = violation.error ? undefined : allowedBy(violation, allowList);
    if (entry) {
      used.add(entry);
      report.allowed.push({ violation, entry });
    } else report.failures.push(violation);
  }
  report.unused = allowList.filter((entry) => !used.has(entry));
  return report;
}

/** The report as text: the failures in full, then what was allowed and why. */
export function describe(report: Report): string {
  const lines = [
    `tenant keys: ${report.statements} distinct statements, ${Object.entries(report.skipped)
      .map(([origin, count]) => `${count} from ${origin}s`)
      .join(', ')} not checked; ${report.violations.length} without a subscription_id condition, ${report.allowed.length} of them allowed`,
  ];
  if (report.failures.length > 0) {
    lines.push('', `${report.failures.length} statements reach a tenant table without its subscription_id condition:`);
    for (const failure of report.failures) lines.push(`  [${failure.error ?? failure.tables.join(', ')}] ${normalized(failure.sql)}`);
  }
  if (report.allowed.length > 0) {
    lines.push('', 'allowed:');
    for (const { violation, entry } of report.allowed)
      lines.push(`  [${violation.tables.join(', ')}] ${entry.reason}: ${normalized(violation.sql).slice(0, 160)}`);
  }
  if (report.unused.length > 0)
    lines.push('', `allow-list entries no statement of this run matched: ${report.unused.map((entry) => entry.match.source).join('; ')}`);
  return lines.join('\n');
}

/** The subscriptions themselves: their key is their id. */
const SUBSCRIPTIONS = 'auth_subscription';

/** The tenant tables of the schema every built-in plugin migrates: those with a subscription_id column, and the subscriptions. */
export async function tenantTablesOfSchema(): Promise<Map<string, string>> {
  const { startTestService } = await import('../../core/cli/testing.ts');
  const service = await startTestService();
  try {
    const rows = await service.app.deps.db.execute<{ table_name: string }>(
      "select table_name from information_schema.columns where table_schema = current_schema() and column_name = 'subscription_id' order by table_name",
    );
    return new Map([...rows.map((row) => [row.table_name, 'subscription_id'] as const), [SUBSCRIPTIONS, 'id']]);
  } finally {
    await service.close();
  }
}

/** `node --import tsx test/tenant-keys/check.ts <statement-log folder>`: prints the report, exits 1 on a failure. */
async function main(folder: string | undefined): Promise<number> {
  if (!folder) {
    console.error('usage: check.ts <folder of the statement log (RPC_STATEMENT_LOG)>');
    return 2;
  }
  const statements = readStatementLog(folder);
  if (statements.length === 0) {
    console.error(`tenant keys: no statement logged in ${folder}`);
    return 1;
  }
  const report = await checkStatements(statements, await tenantTablesOfSchema());
  console.log(describe(report));
  return report.failures.length > 0 ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main(process.argv[2]);
