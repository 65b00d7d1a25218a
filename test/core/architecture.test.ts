import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult } from 'dependency-cruiser';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A cycle written from its smallest file name, so that each one reads the same whichever file it was found from. */
function ring(files: readonly string[]): string {
  const start = files.indexOf([...files].sort()[0]!);
  const rotated = [...files.slice(start), ...files.slice(0, start)];
  return [...rotated, rotated[0]].join(' → ');
}

/**
 * The import graph of core/, plugins/, workers/ and the example plugin (as tsconfig.json resolves
 * it, so `rpc-service/plugin` is core/plugin/sdk.ts), checked for cycles and
 * for core files importing plugin files. `import type` counts: a cycle of types
 * alone still ties two files together, so that neither can be read, moved or
 * layered without the other (core/README.md).
 */
export async function importProblems(root: string): Promise<{ cycles: string[]; coreToPlugins: string[]; unresolved: string[] }> {
  const cwd = process.cwd();
  // dependency-cruiser reads paths and tsconfig.json relative to the working directory.
  process.chdir(root);
  try {
    const { output } = await cruise(
      ['core', 'plugins', 'workers', 'test/fixtures/notes-plugin'],
      {
        includeOnly: '^(core|plugins|workers|test/fixtures/notes-plugin)/',
        tsPreCompilationDeps: true,
        validate: true,
        ruleSet: {
          forbidden: [
            { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
            { name: 'core-imports-plugin', severity: 'error', from: { path: '^core/' }, to: { path: '^plugins/' } },
          ],
        },
      },
      undefined,
      { tsConfig: { fileName: path.join(root, 'tsconfig.json') } },
    );
    const result = output as ICruiseResult;
    const violations = result.summary.violations;
    return {
      // Each cycle is reported once per edge on it; `cycle` runs from `to` back to `from`.
      cycles: [...new Set(violations.filter((v) => v.rule.name === 'no-circular').map((v) => ring(v.cycle!.map((step) => step.name))))].sort(),
      coreToPlugins: violations.filter((v) => v.rule.name === 'core-imports-plugin').map((v) => `${v.from} → ${v.to}`),
      unresolved: result.modules.flatMap((m) => m.dependencies.filter((d) => d.couldNotResolve).map((d) => `${m.source}: ${d.module}`)),
    };
  } finally {
    process.chdir(cwd);
  }
}

/** Files of core/, plugins/ and the example plugin that define entities other than as the one entity of a `<name>.entity.ts`. */
export function misplacedEntities(root: string): string[] {
  const folders = ['core', 'plugins', 'test/fixtures/notes-plugin'];
  return folders.flatMap((folder) =>
    (readdirSync(path.join(root, folder), { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts'))
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

  it('has no import cycle in core/, plugins/, workers/ or the example plugin, and no import from core/ into plugins/', async () => {
    const { cycles, coreToPlugins, unresolved } = await importProblems(ROOT);
    // An import the tool cannot resolve would leave its edge out of the graph unseen.
    assert.deepEqual(unresolved, [], `imports that could not be resolved:\n${unresolved.join('\n')}`);
    assert.deepEqual(cycles, [], `${cycles.length} import cycle(s):\n${cycles.join('\n')}`);
    assert.deepEqual(coreToPlugins, [], `core imports plugin files:\n${coreToPlugins.join('\n')}`);
  });
});
