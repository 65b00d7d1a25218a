import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { createScratchDatabase, databaseEnv, type ScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { NOTES_PLUGIN, TEST_MASTER_KEY } from '../support/harness.ts';
import { killLeftoverProcesses, runInProject, runServer, START_ARGS } from '../support/process.ts';
import { dataOf, type Envelope } from '../support/wire.ts';
import type { AuthRpcSignupResult } from '../../clients/typescript/src/operations.ts';

/**
 * Starting the service as a user does: `npm start`, and the server process
 * itself for the settings that must stop start-up with one plain line.
 */
/** One worker thread, and the log lines the checks read. */
const QUIET = { LOG_LEVEL: 'info', WORKERS: '1' };

const dirs: string[] = [];
const scratches: ScratchDatabase[] = [];
after(async () => {
  killLeftoverProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  for (const scratch of scratches) await scratch.drop();
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-start-'));
  dirs.push(dir);
  return dir;
}

/** Holds a TCP port on 127.0.0.1 until closed. */
async function holdPort(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}

const portOf = (server: Server) => (server.address() as { port: number }).port;

async function freePort(): Promise<number> {
  const server = await holdPort();
  const port = portOf(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The embedded database in a fresh DATA_DIR, or a scratch database on TEST_DATABASE_URL's server. */
async function installationEnv(): Promise<Record<string, string>> {
  if (!TEST_DATABASE_URL) return { DATA_DIR: tempDir() };
  const scratch = await createScratchDatabase(TEST_DATABASE_URL);
  scratches.push(scratch);
  return { DATA_DIR: tempDir(), ...databaseEnv(scratch.url), MASTER_KEY: TEST_MASTER_KEY };
}

const answers = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(1000) })
    .then((response) => response.status === 200)
    .catch(() => false);

/** Process ids whose parent is `pid`, from /proc/<id>/stat (its fourth field, after the name in parentheses). */
function childPids(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

const commandLine = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
const isNode = (argv: string[]) => path.basename(argv[0] ?? '') === 'node' || argv[0] === process.execPath;

describe('npm start', () => {
  it(
    'runs the built server as the one process npm spawned, with a plugin and its worker written in TypeScript, and it stops cleanly on SIGTERM',
    { skip: process.platform !== 'linux' && 'finds processes through /proc' },
    async () => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const npm = runInProject('npm', ['start'], { ...(await installationEnv()), ...QUIET, PORT: String(port), HOST: '127.0.0.1', PLUGINS: NOTES_PLUGIN });
      const output = () => `stdout:\n${npm.stdout()}\nstderr:\n${npm.stderr()}`;

      const deadline = Date.now() + 120_000;
      while (!(await answers(`${base}/health`))) {
        assert.equal(npm.child.exitCode, null, `npm start exited early:\n${output()}`);
        assert.ok(Date.now() < deadline, `no /health within 120 s:\n${output()}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }

      const spawned = childPids(npm.child.pid!);
      assert.equal(spawned.length, 1, `npm spawned ${spawned.length} processes`);
      const server = spawned[0]!;
      const argv = commandLine(server);
      assert.ok(isNode(argv), `npm spawned ${argv.join(' ')}, not node`);
      assert.deepEqual(argv.slice(1), START_ARGS);
      const nodeChildren = childPids(server).map(commandLine).filter(isNode);
      assert.deepEqual(nodeChildren, [], 'the server runs in that process, not in a node child of it');
      assert.ok(argv.includes('dist/js/core/cli/main.js'), 'the JavaScript of dist/js runs');

      // The notes plugin is TypeScript, and so is the worker its stats run in: the built service loads both through tsx's loader.
      const call = async <T = unknown>(method: string, params: object, token?: string) => {
        const response = await fetch(`${base}/api/rpc`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
          body: JSON.stringify({ method, params }),
        });
        return dataOf((await response.json()) as Envelope<T>);
      };
      const { token } = await call<AuthRpcSignupResult>('AuthRpc.signup', {
        email: 'starter@example.com',
        username: 'starter',
        password: 'correct horse battery',
      });
      await call('NoteRpc.add', { text: 'tide tide harbour' }, token);
      assert.deepEqual(await call('NoteRpc.stats', {}, token), {
        notes: 1,
        words: 3,
        topWords: [
          { word: 'tide', count: 2 },
          { word: 'harbour', count: 1 },
        ],
      });

      process.kill(server, 'SIGTERM');
      const { code, signal } = await npm.exited(15_000);
      // npm passes on the exit code of the script: 0 means the server exited by itself with 0.
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, output());
      assert.equal(existsSync(`/proc/${server}`), false, 'the server process is gone');
      assert.equal(await answers(`${base}/health`), false, 'the port no longer answers');

      const lines = npm
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string; signal?: string });
      const listening = lines.findIndex((line) => line.msg === 'listening');
      const shutdown = lines.findIndex((line) => line.msg === 'shutting down');
      assert.ok(listening >= 0 && shutdown > listening, output());
      assert.equal(lines[shutdown]!.signal, 'SIGTERM');
    },
  );
});

describe('settings that stop start-up', { concurrency: true }, () => {
  /** A DATA_DIR inside a regular file: no user, root included, can make it. */
  const dataDirUnderAFile = () => {
    const file = path.join(tempDir(), 'a-file');
    writeFileSync(file, 'not a folder\n');
    return path.join(file, 'data');
  };
  let held: Server | undefined;
  after(() => held?.close());

  // HOST and PORT are checked before anything opens: DATA_DIR stays empty.
  const cases: [title: string, env: () => Promise<Record<string, string>>, setting: string][] = [
    ['a HOST that is not an address', async () => ({ DATA_DIR: tempDir(), HOST: '999.1.1.1' }), 'HOST'],
    [
      'a PORT already in use',
      async () => {
        held = await holdPort();
        return { DATA_DIR: tempDir(), HOST: '127.0.0.1', PORT: String(portOf(held)) };
      },
      'PORT',
    ],
    ['a DATA_DIR that cannot hold the generated master key', async () => ({ DATA_DIR: dataDirUnderAFile() }), 'DATA_DIR'],
    [
      'a DATABASE_DIRECT_URL without DATABASE_URL',
      async () => ({ DATA_DIR: tempDir(), DATABASE_DIRECT_URL: 'postgres://postgres@127.0.0.1/test' }),
      'DATABASE_DIRECT_URL',
    ],
    [
      'a DATA_DIR that cannot hold the embedded database',
      async () => {
        // DATA_DIR itself is fine, but its db folder is taken by a file.
        const dataDir = tempDir();
        writeFileSync(path.join(dataDir, 'db'), '');
        return { DATA_DIR: dataDir, MASTER_KEY: TEST_MASTER_KEY };
      },
      'DATA_DIR',
    ],
  ];
  if (TEST_DATABASE_URL) {
    cases.push([
      'a DATA_DIR that cannot hold uploaded files (DATABASE_URL)',
      async () => ({ ...(await installationEnv()), DATA_DIR: dataDirUnderAFile() }),
      'DATA_DIR',
    ]);
  }

  for (const [title, env, setting] of cases) {
    it(`refuses ${title} with one line naming ${setting}`, async () => {
      const settings: Record<string, string> = { PORT: '0', ...(await env()) };
      const server = runServer({ ...QUIET, ...settings });
      const { code } = await server.exited(120_000);
      assert.equal(code, 1, server.stderr());
      const lines = server.stderr().trimEnd().split('\n');
      assert.equal(lines.length, 1, `one line, not a stack trace:\n${server.stderr()}`);
      assert.match(lines[0]!, new RegExp(`^Cannot start: ${setting}\\b`));
      assert.doesNotMatch(server.stdout(), /"msg":"listening"/);
      if (setting !== 'DATA_DIR') assert.deepEqual(readdirSync(settings.DATA_DIR!), [], 'the database was not opened');
    });
  }
});
