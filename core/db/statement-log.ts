import { AsyncLocalStorage } from 'node:async_hooks';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../base/paths.ts';

/**
 * The statement log of the tenant-key check (test/tenant-keys/check.ts): with
 * `RPC_STATEMENT_LOG` naming a folder when the process starts, each distinct
 * SQL text the process sends (placeholders, never values) is written once, as
 * a JSON line `{"sql", "origin"?}`, to `<folder>/<pid>.jsonl`. Each line is
 * written synchronously when the statement is first seen, so a test process
 * that exits abruptly has logged what it sent. Unset, nothing is kept and the
 * hook is one comparison.
 */
const folder = process.env.RPC_STATEMENT_LOG || undefined;
const root = PACKAGE_ROOT;

let file: number | undefined;
const seen = new Set<string>();
/** Only with the log on: which statements a migration sends, a context a check can tell apart. */
const origins = folder ? new AsyncLocalStorage<string>() : undefined;

export const statementLogOn = folder !== undefined;

/** Records one statement's text, the first time this process sends it. */
export function recordStatement(sql: string): void {
  if (folder === undefined) return;
  const given = origins?.getStore();
  // Logged already as the service's: the stack need not be read again.
  if (given === undefined && seen.has(sql)) return;
  const origin = given ?? (sentByTest() ? 'test' : undefined);
  const key = origin === undefined ? sql : `${origin}\0${sql}`;
  if (seen.has(key)) return;
  seen.add(key);
  if (file === undefined) {
    mkdirSync(folder, { recursive: true });
    file = openSync(path.join(folder, `${process.pid}.jsonl`), 'a');
    process.once('exit', () => closeSync(file!));
  }
  writeSync(file, `${JSON.stringify(origin === undefined ? { sql } : { sql, origin })}\n`);
}

/** A test's file, from the repository's root: under test/, or under a plugin's own test/ folder. */
const TEST_FILE = /^(test|plugins\/[^/]+\/test)\//;

/**
 * Whether a test wrote the statement: the first frame of the call's stack
 * (awaiting callers included) that is the repository's own code, past the
 * database layer, is a test's file (TEST_FILE). A service method a test calls
 * is the service's.
 */
function sentByTest(): boolean {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 40;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  for (const line of stack.split('\n').slice(1)) {
    const at = line.indexOf(root);
    if (at === -1) continue;
    // The built service's files are named as their sources are.
    const file = line.slice(at + root.length + 1).replace(/^dist\/js\//, '');
    if (file.startsWith('node_modules/') || file.startsWith('core/db/')) continue;
    return TEST_FILE.test(file);
  }
  return false;
}

/**
 * Runs `run` with its statements logged as sent by `origin` (a migration, say,
 * which changes every tenant's rows by design). Without the log it only runs it.
 */
export function withStatementOrigin<T>(origin: string, run: () => T): T {
  return origins ? origins.run(origin, run) : run();
}
