import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { SUPPORTED_NODE } from '../support/runtimes.ts';

/**
 * The Node.js majors the service supports are the ranges of package.json's `engines.node`, one per major
 * (README.md says which part of the suite CI runs on each). npm warns (EBADENGINE) when a package's own range leaves out the Node
 * it installs on: each installed package must admit the lowest version of every supported major.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const readJson = (file: string) => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8'));

const manifest = readJson('package.json') as { engines: { node: string } };

describe('supported Node.js majors', () => {
  it('engines names 20, 22 and 24, each from a release of its own line', () => {
    assert.deepEqual(
      SUPPORTED_NODE.map((version) => semver.major(version)),
      [20, 22, 24],
    );
    assert.ok(!semver.satisfies('26.0.0', manifest.engines.node), 'an untested major is not promised');
  });

  it('no installed package declares an engine range that leaves one of them out', () => {
    const lock = readJson('package-lock.json') as { packages: Record<string, { engines?: { node?: string } | string[] }> };
    const refused: string[] = [];
    for (const [where, entry] of Object.entries(lock.packages)) {
      const range = entry.engines && !Array.isArray(entry.engines) ? entry.engines.node : undefined;
      if (!where || !range) continue;
      for (const version of SUPPORTED_NODE) if (!semver.satisfies(version, range)) refused.push(`${where} (${range}) refuses ${version}`);
    }
    assert.deepEqual(refused, []);
  });

  it('the typed client promises what the service does', () => {
    assert.equal(readJson('clients/typescript/package.json').engines.node, manifest.engines.node);
  });
});
