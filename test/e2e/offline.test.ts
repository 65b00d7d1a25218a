import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** A network namespace of its own, with loopback up and nothing else: the machine with its network unplugged. */
const UNPLUGGED = ['unshare', '--net', 'sh', '-c', 'ip link set lo up && exec node --import tsx test/fixtures/offline-retrieval.ts'];
const canUnplug = spawnSync('unshare', ['--net', 'true']).status === 0;

/**
 * The embedding model and everything search needs come with the package:
 * a new embedded service, with no network but loopback, ingests, embeds and
 * searches documents and saves and recalls memories in every mode.
 */
describe('retrieval with the network unplugged', () => {
  it(
    'ingests, embeds and finds documents and memories by meaning and by words',
    { skip: canUnplug ? false : 'unshare --net is not permitted here (it needs root or user namespaces)' },
    () => {
      const run = spawnSync(UNPLUGGED[0]!, UNPLUGGED.slice(1), {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, TEST_DATABASE_URL: '' },
      });
      assert.equal(run.status, 0, run.stderr);
      const found = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as {
        outside: string;
        model: string;
        search: Record<string, string>;
        recall: Record<string, string>;
      };
      assert.match(found.outside, /^unreachable/, 'the namespace reaches no address outside the machine');
      assert.equal(found.model, 'local-lexical-384', 'the default embedding model');
      assert.deepEqual(found.search, { hybrid: 'tides', semantic: 'tides', text: 'tides' });
      const ferry = 'The ferry leaves at seven on weekdays';
      assert.deepEqual(found.recall, { hybrid: ferry, semantic: ferry, text: ferry });
    },
  );
});
