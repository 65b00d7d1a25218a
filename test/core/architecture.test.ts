import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A cycle written from its smallest file name, so that each one reads the same whichever file it was found from. */
function ring(files: readonly string[]): string {
  const start = files.indexOf([...files].sort()[0]!);
  const rotated = [...files.slice(start), ...files.slice(0, start)];
  return [...rotated, rotated[0]].join(' → ');
}

/**
 * The core's layers, bottom-up, each as the folders of core/ it is made of (core/README.md reads them out).
 * A file may import its own layer and those below, never one above: the rule the cruise below enforces.
 */
export const CORE_LAYERS: readonly (readonly [name: string, folders: readonly string[]])[] = [
  ['base', ['base']],
  ['data', ['db']],
  ['services', ['records', 'ai', 'audit', 'credentials', 'events', 'jobs', 'pool', 'uploads', 'rate-limits']],
  ['pipeline', ['rpc']],
  ['doors', ['doors']],
  ['host', ['plugin', 'app']],
  ['commands', ['cli', 'operator', 'scaffold']],
];

/**
 * Imports that point up a layer and stay, each with its reason. Empty: none is needed today; one added here
 * must say why moving a file cannot remove it.
 */
const UPWARD_EXCEPTIONS: readonly { from: string; to: string; reason: string }[] = [];

const folders = (layers: typeof CORE_LAYERS): string => layers.flatMap(([, names]) => names).join('|');

/** One dependency-cruiser rule per layer: nothing of it imports a folder of a higher layer. */
function layerRules(): IForbiddenRuleType[] {
  return CORE_LAYERS.slice(0, -1).map(([name], index) => ({
    name: `layer-${name}`,
    severity: 'error',
    from: { path: `^core/(${folders(CORE_LAYERS.slice(index, index + 1))})/` },
    to: {
      path: `^core/(${folders(CORE_LAYERS.slice(index + 1))})/`,
      pathNot: UPWARD_EXCEPTIONS.map((exception) => `^${exception.to.replace(/[.]/g, '\\.')}$`),
    },
  }));
}

export interface ImportProblems {
  cycles: string[];
  coreToPlugins: string[];
  upward: string[];
  unresolved: string[];
}

/**
 * The import graph of core/, plugins/, workers/, clients/ and the example plugin (as tsconfig.json resolves
 * it, so `rpc-service/plugin` is core/plugin/sdk.ts), checked for cycles, for core files importing plugin
 * files and for imports pointing up the core's layers. `import type` counts: a cycle or an upward import of
 * types alone still ties two files together, so that neither can be read, moved or layered without the
 * other (core/README.md).
 */
export async function importProblems(root: string): Promise<ImportProblems> {
  const cwd = process.cwd();
  const scanned = ['core', 'plugins', 'workers', 'clients', 'test/fixtures/notes-plugin'].filter((folder) => existsSync(path.join(root, folder)));
  // dependency-cruiser reads paths and tsconfig.json relative to the working directory.
  process.chdir(root);
  try {
    const { output } = await cruise(
      scanned,
      {
        includeOnly: `^(${scanned.join('|')})/`,
        exclude: 'node_modules',
        tsPreCompilationDeps: true,
        validate: true,
        ruleSet: {
          forbidden: [
            { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
            { name: 'core-imports-plugin', severity: 'error', from: { path: '^core/' }, to: { path: '^plugins/' } },
            ...layerRules(),
          ],
        },
      },
      undefined,
      { tsConfig: { fileName: path.join(root, 'tsconfig.json') } },
    );
    const result = output as ICruiseResult;
    const violations = result.summary.violations;
    const named = (prefix: string) => violations.filter((v) => v.rule.name.startsWith(prefix)).map((v) => `${v.from} → ${v.to}`);
    return {
      // Each cycle is reported once per edge on it; `cycle` runs from `to` back to `from`.
      cycles: [...new Set(violations.filter((v) => v.rule.name === 'no-circular').map((v) => ring(v.cycle!.map((step) => step.name))))].sort(),
      coreToPlugins: named('core-imports-plugin'),
      upward: named('layer-').sort(),
      unresolved: result.modules.flatMap((m) => m.dependencies.filter((d) => d.couldNotResolve).map((d) => `${m.source}: ${d.module}`)),
    };
  } finally {
    process.chdir(cwd);
  }
}

/** Files of core/ outside the folders of its layers (a file at core/'s root belongs to no layer). */
export function unlayeredFiles(root: string): string[] {
  const layered = new Set(CORE_LAYERS.flatMap(([, names]) => names));
  return (readdirSync(path.join(root, 'core'), { recursive: true }) as string[])
    .filter((file) => /\.[cm]?[jt]s$/.test(file) && !layered.has(file.split(path.sep)[0]!))
    .map((file) => path.join('core', file));
}

/**
 * Files of core/, plugins/ and the example plugin that define entities other than as the one entity of a
 * `<name>.entity.ts`. A plugin's tests (its test/ folder) are left out: they define their probe plugins' entities where they use them.
 */
export function misplacedEntities(root: string): string[] {
  const folders = ['core', 'plugins', 'test/fixtures/notes-plugin'];
  return folders.flatMap((folder) =>
    (readdirSync(path.join(root, folder), { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts') && !file.split(path.sep).includes('test'))
      .map((file) => path.join(folder, file))
      .flatMap((file) => {
        const count = readFileSync(path.join(root, file), 'utf8').match(/\bdefineEntity\(/g)?.length ?? 0;
        const isEntityFile = file.endsWith('.entity.ts');
        return (isEntityFile && count !== 1) || (!isEntityFile && count > 0) ? [`${file}: ${count}`] : [];
      }),
  );
}

describe('architecture', () => {
  it('defines each entity once, alone in a <name>.entity.ts file', () => {
    const misplaced = misplacedEntities(ROOT);
    assert.deepEqual(misplaced, [], `files with defineEntity calls outside the one-entity-per-file rule:\n${misplaced.join('\n')}`);
  });

  it("has no import cycle in core/, plugins/, workers/, clients/ or the example plugin, no import from core/ into plugins/, and no import up the core's layers", async () => {
    const { cycles, coreToPlugins, upward, unresolved } = await importProblems(ROOT);
    // An import the tool cannot resolve would leave its edge out of the graph unseen.
    assert.deepEqual(unresolved, [], `imports that could not be resolved:\n${unresolved.join('\n')}`);
    assert.deepEqual(cycles, [], `${cycles.length} import cycle(s):\n${cycles.join('\n')}`);
    assert.deepEqual(coreToPlugins, [], `core imports plugin files:\n${coreToPlugins.join('\n')}`);
    assert.deepEqual(upward, [], `imports pointing up a layer (core/README.md):\n${upward.join('\n')}`);
  });

  it('keeps every file of core/ in a folder of a layer', () => {
    assert.deepEqual(unlayeredFiles(ROOT), []);
  });

  it('finds an import that points up a layer, and a file outside the layers', async () => {
    // A small house of the same shape: a leaf importing the pipeline, as a careless edit would.
    const house = mkdtempSync(path.join(tmpdir(), 'layers-'));
    try {
      mkdirSync(path.join(house, 'core', 'base'), { recursive: true });
      mkdirSync(path.join(house, 'core', 'rpc'), { recursive: true });
      writeFileSync(path.join(house, 'tsconfig.json'), readFileSync(path.join(ROOT, 'tsconfig.json')));
      writeFileSync(path.join(house, 'core', 'base', 'errors.ts'), "import { dispatch } from '../rpc/dispatch.ts';\nexport const used = dispatch;\n");
      writeFileSync(path.join(house, 'core', 'rpc', 'dispatch.ts'), 'export const dispatch = 1;\n');
      writeFileSync(path.join(house, 'core', 'loose.ts'), 'export const loose = 1;\n');
      const { upward } = await importProblems(house);
      assert.deepEqual(upward, ['core/base/errors.ts → core/rpc/dispatch.ts']);
      assert.deepEqual(unlayeredFiles(house), [path.join('core', 'loose.ts')]);
    } finally {
      rmSync(house, { recursive: true, force: true });
    }
  });
});
