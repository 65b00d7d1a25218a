import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The lowest version of each Node.js major package.json's `engines.node` admits, one per range of it (README.md). */
export const SUPPORTED_NODE: readonly string[] = new semver.Range(JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).engines.node).set.map(
  (comparators) => semver.minVersion(new semver.Range(comparators.map(String).join(' ')))!.version,
);

export interface Runtime {
  major: number;
  version: string;
  /** The node binary. */
  node: string;
}

/**
 * A node binary for each supported major: this process's own for its major, the others installed beside it
 * from the npm registry by .ci/ensure-node.sh, as CI does. `majors` picks some (a list such as "24,20").
 */
export function supportedRuntimes(majors?: string): Runtime[] {
  const wanted = majors ? majors.split(',').map(Number) : SUPPORTED_NODE.map((version) => semver.major(version));
  return wanted.map((major) => {
    if (major === semver.major(process.version)) return { major, version: process.version, node: process.execPath };
    const installed = spawnSync('bash', [path.join(ROOT, '.ci/ensure-node.sh'), String(major)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (installed.status !== 0) throw new Error(`Node.js ${major} could not be installed (.ci/ensure-node.sh ${major})`);
    const node = path.join(installed.stdout.trim(), 'node');
    return { major, version: spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim(), node };
  });
}
