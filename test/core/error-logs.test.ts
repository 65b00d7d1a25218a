import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { defineEntity, defineJob, definePlugin, type JobView, type Jobs } from 'rpc-service/plugin';
import { defineOperation } from '../../core/rpc/operation.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { logLines } from '../support/wire.ts';

/** A record holding a sealed value, as the secrets plugins keep them; `name` is required and left out, so flushing it fails. */
const LeakProbeSecret = defineEntity({
  name: 'LeakProbeSecret',
  tableName: 'leak_probe_secret',
  properties: (p) => ({
    id: p.uuid().primary(),
    name: p.text(),
    encryptedValue: p.text(),
  }),
});

/** Flushes a record without its required name: MikroORM refuses it with a ValidationError that holds the record (and quotes it in its message). */
async function persistWithout(em: EntityManager, encryptedValue: string): Promise<never> {
  em.create(LeakProbeSecret, { id: randomUUID(), encryptedValue } as never);
  await em.flush();
  throw new Error('the flush was expected to fail');
}

let lastError: unknown;

const leakProbe = definePlugin({
  id: 'leak-probe',
  group: 'LeakProbeRpc',
  coreVersion: '^2.0.0',
  deps: ['jobs'],
  entities: [LeakProbeSecret],
  operations: {
    persist: defineOperation({
      access: 'user',
      describe: 'Fails in the ORM with a record holding the value given.',
      params: v.object({ encryptedValue: v.string() }),
      handler: ({ params, ctx }) =>
        persistWithout(ctx.em, params.encryptedValue).catch((error: unknown) => {
          lastError = error;
          throw error;
        }),
    }),
  },
  jobs: {
    persist: defineJob({
      describe: 'The same failure in a background job.',
      data: v.object({ encryptedValue: v.string() }),
      retry: { limit: 0 },
      handler: ({ data, ctx }) => persistWithout(ctx.em, data.encryptedValue),
    }),
  },
});

describe('an unexpected error holding a record', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'leak-probe'], extraPlugins: [leakProbe], env: { JOBS_POLL_MS: '500' } });
  });
  after(() => t?.close());

  it('is logged with its class, message shape and stack, never the record nor its values (RPC, logged alone or as a cause, jobs)', async () => {
    const sealed = `k1.${randomBytes(24).toString('base64url')}`;
    const admin = await t.signup();
    const logged = t.logs.length;

    const failed = await t.call('LeakProbeRpc.persist', { encryptedValue: sealed }, { token: admin.token });
    assert.equal(failed.status, 500);
    assert.equal(JSON.stringify(failed.body).includes(sealed), false);
    assert.equal(lastError?.constructor.name, 'ValidationError', String(lastError));
    assert.ok((lastError as Error).message.includes(sealed), 'the error itself quotes the record: the log must not');
    // The same error as plain code might log it: alone, and as the cause of another.
    t.app.logger.error(lastError);
    t.app.logger.warn({ err: new Error('wrapped', { cause: lastError }) }, 'a wrapped ORM error');

    const jobs: Jobs = t.app.depsOf('leak-probe').jobs;
    const jobId = (await jobs.enqueue('persist', { encryptedValue: sealed }))!;
    let job: JobView | null = null;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline && job?.state !== 'dead';) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      job = await jobs.get('persist', jobId);
    }
    assert.equal(job?.state, 'dead');
    assert.match(job!.lastError!, /^Value for LeakProbeSecret\.name is required/);
    assert.equal(job!.lastError!.includes(sealed), false, 'the stored job error quotes the record');

    const lines = t.logs.slice(logged);
    const text = lines.join('\n');
    assert.equal(text.includes(sealed.slice(3, 27)), false, `the log holds the sealed value:\n${text}`);
    assert.doesNotMatch(text, /"entity"|encryptedValue/);

    const entries = logLines(lines);
    const failure = entries.find((entry) => entry.msg === 'operation failed' && entry.errorId === failed.body.data.errorId);
    assert.equal(failure?.err?.type, 'ValidationError');
    assert.match(failure!.err!.message, /^Value for LeakProbeSecret\.name is required/);
    assert.match(failure!.err!.stack, /^ValidationError: Value for LeakProbeSecret\.name is required.*\n\s+at /);
    assert.ok(
      entries.some((entry) => entry.msg.startsWith('Value for LeakProbeSecret.name is required')),
      'an error logged alone is its own message, without values',
    );
    assert.equal(entries.find((entry) => entry.msg === 'a wrapped ORM error')?.err?.cause?.type, 'ValidationError');
    assert.equal(entries.find((entry) => entry.msg === 'job attempt failed' && entry.job === 'leak-probe.persist')?.err?.type, 'ValidationError');
  });

  it('keeps what an error says of itself, and names, without contents, the objects it carries', () => {
    const error = Object.assign(new Error('request failed'), {
      code: 'E_PROBE',
      status: 503,
      retryable: true,
      request: { headers: { authorization: 'Bearer abc' } },
      rows: [1, 2],
    });
    const logged = t.logs.length;
    t.app.logger.error({ err: error }, 'probe');
    const [line] = t.logs.slice(logged).map((text) => JSON.parse(text) as { err: Record<string, unknown> });
    assert.deepEqual(
      { ...line!.err, stack: undefined },
      { type: 'Error', message: 'request failed', stack: undefined, code: 'E_PROBE', status: 503, retryable: true, request: '[Object]', rows: '[Array]' },
    );
  });
});
