import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { SHARED_TABLES } from 'rpc-service/plugin';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
const PACKAGES = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})]);
const BUILTINS = new Set(builtinModules);

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

/** The database drivers, the ORM and the web framework: what plugins need of them, the SDK re-exports (EntityManager, LockMode, Router, RouteContext). */
const CORE_PACKAGES = /^(pg|@electric-sql\/pglite|koa|@koa\/router|@mikro-orm\/.+)$/;

/** Whether a file of a plugin folder (its path from the folder) is one of the plugin's tests, kept in its `test/` folder. */
const isTestFile = (file: string) => file.split(path.sep)[0] === 'test';

/**
 * Every import of a plugin folder (type imports included) that is not the
 * SDK, an npm package the project depends on other than those the core
 * wraps, a Node built-in, or a file of the same folder. The plugin's tests
 * (its `test/` folder) may also import `rpc-service/testing` and the shared
 * harness and fixtures of the repository (`test/support/`, `test/fixtures/`
 * under `root`): nothing else of the core, nor another plugin's files.
 */
export function forbiddenImports(pluginFolder: string, root = ROOT): string[] {
  const shared = ['support', 'fixtures'].map((folder) => path.join(root, 'test', folder));
  const inside = (folder: string, file: string) => !path.relative(folder, file).startsWith('..');
  const offending: string[] = [];
  for (const file of readdirSync(pluginFolder, { recursive: true }) as string[]) {
    if (!/\.(ts|js|mjs)$/.test(file)) continue;
    const absolute = path.join(pluginFolder, file);
    const test = isTestFile(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(absolute, 'utf8'), true, true);
    for (const { fileName: specifier } of importedFiles) {
      const target = path.resolve(path.dirname(absolute), specifier);
      const allowed = specifier.startsWith('.')
        ? inside(pluginFolder, target) || (test && shared.some((folder) => inside(folder, target)))
        : specifier === 'rpc-service/plugin' ||
          (test && specifier === 'rpc-service/testing') ||
          specifier.startsWith('node:') ||
          BUILTINS.has(specifier) ||
          (PACKAGES.has(packageOf(specifier)) && !CORE_PACKAGES.test(packageOf(specifier)));
      if (!allowed) offending.push(`${path.relative(root, absolute)}: ${specifier}`);
    }
  }
  return offending;
}

/** Calls whose string arguments are SQL, wherever the text is written. */
const SQL_CALLS = new Set(['execute', 'raw', 'sql', 'read', 'preparedRead']);
/** A literal that starts like a statement is SQL wherever it is (constants, concatenations). Keywords are lower-case in this code base. */
const STATEMENT = /^\s*\(?\s*(select|insert into|update|delete from|with|create|alter table|drop|truncate|lock table)\s/;
/** A name after from, join, into, update or table; not `is distinct from`, `do update`, `for update`, `extract(x from`, `join lateral (`, nor a function such as `unnest(`. */
const NAMED =
  /(?<!\bdistinct\s|\bdo\s|\bfor\s|\bextract\(\w+\s)\b(from|join|into|update|table)\s+(?!lateral\b)("?)([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)?)\2(?![\w.(])/gi;
/** The names of a statement's common table expressions, which are not tables. */
const CTE = /(?:\bwith|,)\s*(?:recursive\s+)?([a-z_][a-z0-9_]*)\s+as\s+(?:not\s+)?(?:materialized\s+)?\(/gi;

/** The text of a string or template literal, or of a `+` of them; an interpolation or other operand reads as `?`. */
function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return node.head.text + node.templateSpans.map((span) => ` ? ${span.literal.text}`).join('');
  if (ts.isParenthesizedExpression(node)) return literalText(node.expression);
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    const [left, right] = [literalText(node.left), literalText(node.right)];
    return left === undefined && right === undefined ? undefined : `${left ?? ' ? '}${right ?? ' ? '}`;
  }
  return undefined;
}

/** The SQL texts of a source file: literals passed to execute, raw, sql, read or preparedRead, and literals that start like a statement. */
export function sqlTexts(source: string): string[] {
  const texts: string[] = [];
  const visit = (node: ts.Node, inSqlCall: boolean): void => {
    const text = literalText(node);
    if (text !== undefined) {
      if (inSqlCall || STATEMENT.test(text)) texts.push(text);
      return;
    }
    if (ts.isCallExpression(node)) {
      const callee = ts.isPropertyAccessExpression(node.expression) ? node.expression.name.text : ts.isIdentifier(node.expression) ? node.expression.text : '';
      if (SQL_CALLS.has(callee)) {
        visit(node.expression, inSqlCall);
        for (const argument of node.arguments) visit(argument, true);
        return;
      }
    }
    ts.forEachChild(node, (child) => visit(child, inSqlCall));
  };
  visit(ts.createSourceFile('source.ts', source, ts.ScriptTarget.Latest, true), false);
  return texts;
}

/** The tables (and views) a SQL text names. */
export function tablesNamed(sql: string): string[] {
  const ctes = new Set([...sql.matchAll(CTE)].map((match) => match[1]!.toLowerCase()));
  return [...sql.matchAll(NAMED)].map((match) => match[3]!.toLowerCase()).filter((name) => !ctes.has(name));
}

/**
 * The plugin a table belongs to: the one whose id (`-` as `_`) is the table's
 * name or, followed by `_`, its longest prefix (`push_sender_job` is
 * push-sender's, not push's).
 */
export function ownerOf(table: string, pluginIds: readonly string[]): string | undefined {
  const owners = pluginIds.filter((id) => {
    const prefix = id.replaceAll('-', '_');
    return table === prefix || table.startsWith(`${prefix}_`);
  });
  return owners.sort((a, b) => b.length - a.length)[0];
}

/**
 * Tables a plugin's SQL names that are neither its own (ownerOf) nor in the
 * SDK's SHARED_TABLES. Migrations are left out: they record the schema's
 * history, moves of a table or of data from one owner to another included;
 * so are the plugin's tests, which may look at any table to check an answer.
 */
export function foreignTables(pluginFolder: string, pluginId: string, pluginIds: readonly string[] = [pluginId]): string[] {
  const offending: string[] = [];
  for (const file of readdirSync(pluginFolder, { recursive: true }) as string[]) {
    if (!/\.(ts|js|mjs)$/.test(file) || file.split(path.sep).includes('migrations') || isTestFile(file)) continue;
    const absolute = path.join(pluginFolder, file);
    for (const table of sqlTexts(readFileSync(absolute, 'utf8')).flatMap(tablesNamed)) {
      if (ownerOf(table, pluginIds) !== pluginId && !SHARED_TABLES.includes(table)) offending.push(`${path.relative(ROOT, absolute)}: ${table}`);
    }
  }
  return [...new Set(offending)];
}

/**
 * Services a plugin names in its DEPS (deps.ts or index.ts) that no other line
 * of its source (its tests aside) mentions: it would receive them for nothing,
 * and be ordered after their exporters for nothing.
 */
export function unusedDeps(pluginFolder: string): string[] {
  const sources = (readdirSync(pluginFolder, { recursive: true }) as string[])
    .filter((file) => /\.ts$/.test(file) && !file.split(path.sep).includes('migrations') && !isTestFile(file))
    .map((file) => readFileSync(path.join(pluginFolder, file), 'utf8'));
  const declaration = sources.map((text) => /export const DEPS = \[([^\]]*)\]/.exec(text)).find(Boolean);
  if (!declaration) return [];
  const names = [...declaration[1]!.matchAll(/'(\w+)'/g)].map((match) => match[1]!);
  const rest = sources.join('\n').replace(declaration[0], '');
  return names.filter((name) => !new RegExp(`\\b${name}\\b`).test(rest)).map((name) => `${path.relative(ROOT, pluginFolder)}: ${name}`);
}

/** A plugin's id, as its index.ts declares it. */
const pluginIdOf = (folder: string) => /\bid: '([a-z][a-z0-9-]*)'/.exec(readFileSync(path.join(folder, 'index.ts'), 'utf8'))![1]!;

const pluginFolders = () => [
  ...readdirSync(path.join(ROOT, 'plugins'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => path.join(ROOT, 'plugins', entry.name)),
  path.join(ROOT, 'test/fixtures/notes-plugin'),
];

describe('plugin boundary', () => {
  it("plugins import only rpc-service/plugin, npm packages, Node built-ins and their own folder; their tests also rpc-service/testing and test/'s support and fixtures", () => {
    const folders = pluginFolders();
    assert.ok(folders.length >= 5, `found ${folders.length} plugin folders`);
    const offending = folders.flatMap((folder) => forbiddenImports(folder));
    assert.deepEqual(offending, [], `imports that reach past the SDK:\n${offending.join('\n')}`);
  });

  it('plugins use every service they name in their deps', () => {
    const unused = pluginFolders().flatMap(unusedDeps);
    assert.deepEqual(unused, [], `deps named but never used:\n${unused.join('\n')}`);
  });

  it("plugins' SQL names only their own tables and the core's SHARED_TABLES", () => {
    const ids = pluginFolders().map(pluginIdOf);
    assert.equal(ownerOf('push_sender_job', ids), 'push-sender');
    assert.equal(ownerOf('push_subscription', ids), 'push');
    const offending = pluginFolders().flatMap((folder) => foreignTables(folder, pluginIdOf(folder), ids));
    assert.deepEqual(offending, [], `SQL naming another owner's table:\n${offending.join('\n')}`);
  });

  it('finds the tables of SQL texts, and only those', () => {
    const source = [
      "const COLUMNS = 'id, name';",
      'await em.execute(`select ${COLUMNS} from notes n join notes_tag t on t.note_id = n.id where n.id = ?`, [id]);',
      'db.execute(\'insert into "other_table" (id) values (?) on conflict (id) do update set id = excluded.id\');',
      "const LIST = preparedRead('list', 'select id from auth_user ' + 'where subscription_id = $1');",
      'const UPDATE = `update notes set title = v.title from unnest(?::uuid[]) as v(id, title) where notes.id = v.id`;',
      'const CTE = `with recent as (select id from notes) select id from recent where a is distinct from b for update`;',
      'const EPOCH = `select extract(epoch from created_at) from auth_outbox`;',
      'const HELD = `select n.id from notes n cross join lateral (select 1 from unnest(n.tags)) t`;',
      "throw badRequest('Choose a title from the list, or update the table first');",
      "describe: 'Create notes from a template';",
    ].join('\n');
    assert.deepEqual(sqlTexts(source).flatMap(tablesNamed), ['notes', 'notes_tag', 'other_table', 'auth_user', 'notes', 'notes', 'auth_outbox', 'notes']);
  });

  it("names every kind of forbidden import: core files, other plugins, unknown packages, dynamic imports, and in the plugin's tests what is not their harness", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rpc-boundary-'));
    try {
      const folder = path.join(dir, 'plugins', 'rogue');
      mkdirSync(path.join(folder, 'sub'), { recursive: true });
      mkdirSync(path.join(folder, 'test'), { recursive: true });
      writeFileSync(
        path.join(folder, 'index.ts'),
        [
          "import { definePlugin } from 'rpc-service/plugin';",
          "import * as v from 'valibot';",
          "import { readFileSync } from 'node:fs';",
          "import path from 'path';",
          "import { helper } from './sub/helper.ts';",
          "import { Authenticator } from '../../core/credentials/authenticator.ts';",
          "export { UserService } from '../auth/user.service.ts';",
          "import leftpad from 'left-pad';",
          "const later = () => import('../../core/app/app.ts');",
          "import pg from 'pg';",
          "import type { Context } from 'koa';",
          "import type Router from '@koa/router';",
          "import { LockMode } from '@mikro-orm/core';",
          "import type { PGlite } from '@electric-sql/pglite';",
          // The test harness is for the plugin's tests, not for its source.
          "import { startTestService } from 'rpc-service/testing';",
          "import { startTestApp } from '../../test/support/harness.ts';",
        ].join('\n'),
      );
      writeFileSync(path.join(folder, 'sub', 'helper.ts'), "import { x } from '../index.ts';\nexport const helper = x;\n");
      writeFileSync(
        path.join(folder, 'test', 'rogue.test.ts'),
        [
          "import { startTestService } from 'rpc-service/testing';",
          "import { startTestApp } from '../../../test/support/harness.ts';",
          "import { HANDBOOK } from '../../../test/fixtures/handbook.ts';",
          "import { helper } from '../sub/helper.ts';",
          "import { ws } from 'ws';",
          "import { UserService } from '../../auth/user.service.ts';",
          "import { createApp } from '../../../core/app/app.ts';",
          "import { check } from '../../../test/tenant-keys/check.ts';",
          "import pg from 'pg';",
        ].join('\n'),
      );
      assert.deepEqual(forbiddenImports(folder, dir).sort(), [
        'plugins/rogue/index.ts: ../../core/app/app.ts',
        'plugins/rogue/index.ts: ../../core/credentials/authenticator.ts',
        'plugins/rogue/index.ts: ../../test/support/harness.ts',
        'plugins/rogue/index.ts: ../auth/user.service.ts',
        'plugins/rogue/index.ts: @electric-sql/pglite',
        'plugins/rogue/index.ts: @koa/router',
        'plugins/rogue/index.ts: @mikro-orm/core',
        'plugins/rogue/index.ts: koa',
        'plugins/rogue/index.ts: left-pad',
        'plugins/rogue/index.ts: pg',
        'plugins/rogue/index.ts: rpc-service/testing',
        'plugins/rogue/test/rogue.test.ts: ../../../core/app/app.ts',
        'plugins/rogue/test/rogue.test.ts: ../../../test/tenant-keys/check.ts',
        'plugins/rogue/test/rogue.test.ts: ../../auth/user.service.ts',
        'plugins/rogue/test/rogue.test.ts: pg',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
