import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { runIn } from '../support/process.ts';

/**
 * "A typed TypeScript client" of docs/endpoint.md, as a user follows it: the client
 * installed from the repository path into a new project, the document's example
 * type-checked and compiled there with TypeScript, and run against a live
 * service with an API key. npm installs `ws` from the registry (or its cache).
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const EXAMPLE_URL = 'http://127.0.0.1:3000';
const STEP_MS = 180_000;

/** The docs/endpoint.md block after the client-example marker. */
function documentedExample(): string {
  const doc = readFileSync(path.join(ROOT, 'docs', 'endpoint.md'), 'utf8');
  const block = /<!-- client-example[^>]*-->\n```ts\n([\s\S]*?)```/.exec(doc);
  assert.ok(block, 'docs/endpoint.md holds the client example');
  return block[1]!;
}

describe('the typed client installed from the repository path', { timeout: 10 * 60_000 }, () => {
  const project = mkdtempSync(path.join(tmpdir(), 'rpc-client-user-'));
  let t: TestApp;

  async function run(command: string, args: string[], env: Record<string, string> = {}): Promise<string> {
    const child = runIn(project, command, args, env);
    const { code } = await child.exited(STEP_MS);
    const output = `${child.stdout()}\n${child.stderr()}`;
    assert.equal(code, 0, `${command} ${args.join(' ')} ended with ${code}:\n${output}`);
    return child.stdout();
  }

  before(async () => {
    t = await startTestApp({ withNotes: false });
  });
  after(async () => {
    await t?.close();
    rmSync(project, { recursive: true, force: true });
  });

  it('installs, type-checks and runs the documented example against the service', async () => {
    await run('npm', ['init', '-y']);
    await run('npm', ['pkg', 'set', 'type=module']);
    await run('npm', ['install', '--install-links', '--no-audit', '--no-fund', path.join(ROOT, 'clients/typescript')]);
    const example = documentedExample();
    assert.ok(example.includes(EXAMPLE_URL), `the example calls ${EXAMPLE_URL}`);
    assert.equal(example.trim().split('\n').length, 5, 'the example is five lines');
    writeFileSync(path.join(project, 'example.ts'), example.replace(EXAMPLE_URL, t.url));
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          strict: true,
          outDir: 'out',
          // The user's own @types/node; here the repository's, so nothing else is fetched.
          typeRoots: [path.join(ROOT, 'node_modules/@types')],
          types: ['node'],
        },
        files: ['example.ts'],
      }),
    );
    await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', '.']);

    const owner = await t.signup();
    const { fullKey } = await t.as(owner).ApiKeyRpc.create({ description: 'documented example' });
    const output = await run(process.execPath, ['out/example.js'], { RPC_API_KEY: fullKey });
    assert.match(output, /^created [0-9a-f-]{36}; the inbox holds 1$/m);
    const tasks = await t.as(owner).TaskRpc.getData({ taskInstanceId: 'inbox' });
    assert.equal(tasks.data[0].title, 'Try the typed client');
  });
});
