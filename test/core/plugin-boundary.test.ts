import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
const PACKAGES = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})]);
const BUILTINS = new Set(builtinModules);

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
const packageOf = (specifier: string) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

/**
 * Every import of a plugin folder that is not the SDK, an npm package the
 * project depends on, a Node built-in, or a file of the same folder.
 */
export function forbiddenImports(pluginFolder: string): string[] {
  const offending: string[] = [];
  for (const file of readdirSync(pluginFolder, { recursive: true }) as string[]) {
    if (!/\.(ts|js|mjs)$/.test(file)) continue;
    const absolute = path.join(pluginFolder, file);
    const { importedFiles } = ts.preProcessFile(readFileSync(absolute, 'utf8'), true, true);
    for (const { fileName: specifier } of importedFiles) {
      const allowed = specifier.startsWith('.')
        ? !path.relative(pluginFolder, path.resolve(path.dirname(absolute), specifier)).startsWith('..')
        : specifier === 'rpc-service/plugin' || specifier.startsWith('node:') || BUILTINS.has(specifier) || PACKAGES.has(packageOf(specifier));
      if (!allowed) offending.push(`${path.relative(ROOT, absolute)}: ${specifier}`);
    }
  }
  return offending;
}

const pluginFolders = () => [
  ...readdirSync(path.join(ROOT, 'plugins'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => path.join(ROOT, 'plugins', entry.name)),
  path.join(ROOT, 'test/fixtures/notes-plugin'),
];

describe('plugin boundary', () => {
  it('plugins import only rpc-service/plugin, npm packages, Node built-ins and their own folder', () => {
    const folders = pluginFolders();
    assert.ok(folders.length >= 5, `found ${folders.length} plugin folders`);
    const offending = folders.flatMap(forbiddenImports);
    assert.deepEqual(offending, [], `imports that reach past the SDK:\n${offending.join('\n')}`);
  });

  it('names every kind of forbidden import: core files, other plugins, unknown packages, dynamic imports', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rpc-boundary-'));
    try {
      const folder = path.join(dir, 'plugins', 'rogue');
      mkdirSync(path.join(folder, 'sub'), { recursive: true });
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
          "const later = () => import('../../core/app.ts');",
        ].join('\n'),
      );
      writeFileSync(path.join(folder, 'sub', 'helper.ts'), "import { x } from '../index.ts';\nexport const helper = x;\n");
      assert.deepEqual(
        forbiddenImports(folder).map((line) => line.slice(line.indexOf(': ') + 2)),
        ['../../core/credentials/authenticator.ts', '../auth/user.service.ts', 'left-pad', '../../core/app.ts'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
