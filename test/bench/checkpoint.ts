import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createApp, type App } from '../../core/app/app.ts';
import { loadConfig } from '../../core/base/config.ts';
import { TEST_MASTER_KEY } from '../support/harness.ts';
import { createScratchDatabase } from '../support/database.ts';
import type { AuthRpcSignupResult } from '../../clients/typescript/src/operations.ts';

/**
 * `npm run bench` (sixth part), checkpoints: a file scope of BENCH_SCOPE_FILES
 * (1,000) files of about 1 kB in 10 folders; each round changes one file and
 * checkpoints. Measured: (1a) the `git` CLI doing the same in a repository on
 * disk holding the same files (`git add -A`, `git commit`), the baseline; (1b)
 * writeFile and createCheckpoint through the in-process caller, as the service
 * runs them (the repository in the database, the scope's lock); (1c) getStatus
 * of a clean scope. On the embedded database, or with BENCH_DATABASE_URL on a
 * scratch database of that PostgreSQL.
 */
const FILES = Number(process.env.BENCH_SCOPE_FILES ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 40);
const DATABASE_URL = process.env.BENCH_DATABASE_URL || undefined;

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;
const content = (index: number, round: number) => `# File ${index}\n\n${`line of file ${index} in round ${round}\n`.repeat(30)}`;

async function timed(work: () => Promise<unknown> | unknown): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-bench-'));
  const scratch = DATABASE_URL ? await createScratchDatabase(DATABASE_URL) : undefined;
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...(scratch ? { DATABASE_URL: scratch.url, MASTER_KEY: TEST_MASTER_KEY } : {}) });
  const app: App = await createApp({ config, inMemoryDatabase: !scratch, only: ['auth', 'checkpoint'] });
  const cliCopy = mkdtempSync(path.join(tmpdir(), 'rpc-bench-git-'));
  try {
    const name = `bench${randomUUID().slice(0, 8)}`;
    const { user, subscriptionId } = await app
      .createCaller(null)
      .call<AuthRpcSignupResult>('AuthRpc.signup', { email: `${name}@example.com`, username: name, password: 'correct horse battery' });
    const caller = app.createCaller({ subscriptionId, userId: user._id, role: 'admin', apiKeyId: null, sessionId: null, initialContext: null });
    const scope = 'bench';
    for (let index = 0; index < FILES; index++) {
      await caller.call('CheckpointRpc.writeFile', { scope, path: `folder-${index % 10}/file-${index}.md`, content: content(index, 0) });
    }
    await caller.call('CheckpointRpc.createCheckpoint', { scope, message: 'Initial' });

    const git = (...args: string[]) => execFileSync('git', ['-C', cliCopy, '-c', 'user.name=Bench', '-c', 'user.email=bench@example.com', ...args]);
    git('init', '-q', '-b', 'main');
    for (let index = 0; index < FILES; index++) {
      mkdirSync(path.join(cliCopy, `folder-${index % 10}`), { recursive: true });
      writeFileSync(path.join(cliCopy, `folder-${index % 10}`, `file-${index}.md`), content(index, 0));
    }
    git('add', '-A');
    git('commit', '-q', '-m', 'Initial');
    git('status', '--porcelain');
    const cli: number[] = [];
    const service: number[] = [];
    const status: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const index = (round * 37) % FILES;
      const file = `folder-${index % 10}/file-${index}.md`;
      cli.push(
        await timed(() => {
          writeFileSync(path.join(cliCopy, file), content(index, round));
          git('add', '-A');
          git('commit', '-q', '-m', `Round ${round}`);
        }),
      );
      service.push(
        await timed(async () => {
          await caller.call('CheckpointRpc.writeFile', { scope, path: file, content: content(index, round) });
          await caller.call('CheckpointRpc.createCheckpoint', { scope, message: `Round ${round}` });
        }),
      );
      status.push(await timed(() => caller.call('CheckpointRpc.getStatus', { scope })));
    }
    const [cliP50, serviceP50] = [percentile(cli, 50), percentile(service, 50)];
    console.log(
      `\ncheckpoints on ${scratch ? 'PostgreSQL' : 'the embedded database'}, a file scope of ${FILES} files (about 1 kB each, 10 folders), ${ROUNDS} rounds of one changed file`,
    );
    console.log(`(1a) git CLI: write, add -A, commit        p50 ${cliP50.toFixed(1).padStart(7)} ms   p95 ${percentile(cli, 95).toFixed(1).padStart(7)} ms`);
    console.log(
      `(1b) writeFile + createCheckpoint         p50 ${serviceP50.toFixed(1).padStart(7)} ms   p95 ${percentile(service, 95).toFixed(1).padStart(7)} ms`,
    );
    console.log(
      `(1c) getStatus of a clean scope           p50 ${percentile(status, 50).toFixed(1).padStart(7)} ms   p95 ${percentile(status, 95).toFixed(1).padStart(7)} ms`,
    );
    console.log(`1b/1a = ${(serviceP50 / cliP50).toFixed(2)}   (the service's checkpoint against the git CLI's)`);
  } finally {
    await app.close();
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(cliCopy, { recursive: true, force: true });
  }
}

await main();
