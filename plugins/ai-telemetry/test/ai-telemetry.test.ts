import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser } from '../../../test/support/users.ts';

describe('AITelemetryRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  const as = (token: string) => ({ token });
  const base = Date.parse('2026-11-01T10:00:00Z');
  const ids: Record<string, string> = {};

  /** A trace as the AI client writes it, at a chosen moment. */
  const insert = async (
    name: string,
    fields: {
      minutes: number;
      threadId?: string | null;
      userId?: string;
      status?: string;
      caller?: string;
      input?: number;
      output?: number;
      cached?: number;
      /** US dollars; null for a model without a price. */
      cost?: number | null;
      subscriptionId?: string;
    },
  ) => {
    ids[name] = randomUUID();
    const input = fields.input ?? 100;
    const output = fields.output ?? 20;
    await t.app.deps.db.execute(
      `insert into ai_telemetry_trace (trace_id, subscription_id, user_id, thread_id, request_timestamp, duration_ms, status, provider, model, operation,
        caller_type, caller_name, input_tokens, output_tokens, cached_tokens, total_tokens, cost_usd, attempts, error)
       values (?, ?, ?, ?, ?, ?, ?, 'openai', 'gpt-4o-mini', 'chat', ?, ?, ?, ?, ?, ?, ?, 1, ?)`,
      [
        ids[name],
        fields.subscriptionId ?? admin.subscriptionId,
        fields.userId ?? admin.user._id,
        fields.threadId ?? null,
        new Date(base + fields.minutes * 60_000),
        100 + fields.minutes,
        fields.status ?? 'success',
        fields.caller === 'workflow' ? 'workflow' : 'agent',
        fields.caller ?? 'support-bot',
        input,
        output,
        fields.cached ?? 0,
        input + output,
        fields.cost === undefined ? 0.25 : fields.cost,
        fields.status === 'error' ? 'the provider answered 500' : null,
      ],
    );
  };

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-telemetry', 'memory'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    await insert('a1', { minutes: 0, threadId: 'thread-a', cached: 40 });
    await insert('a2', { minutes: 10, threadId: 'thread-a', status: 'error' });
    await insert('a3', { minutes: 20, threadId: 'thread-a', cached: 60 });
    await insert('b1', { minutes: 5, threadId: 'thread-b', caller: 'workflow', userId: member.user._id });
    await insert('solo', { minutes: 15, threadId: null });
    const other = await t.signup();
    await insert('foreign', { minutes: 30, threadId: 'thread-a', subscriptionId: other.subscriptionId, userId: other.user._id });
  });
  after(() => t.close());

  it('groups traces by thread (a trace without one by its id), latest first, with the summary fields', async () => {
    const { data, totalCount } = await t.ok('AITelemetryRpc.listThreads', {}, as(admin.token));
    assert.equal(totalCount, 3);
    assert.deepEqual(
      data.map((thread: { threadId: string }) => thread.threadId),
      ['thread-a', ids.solo, 'thread-b'],
    );
    const [a] = data;
    assert.deepEqual(a, {
      threadId: 'thread-a',
      latestTimestamp: new Date(base + 20 * 60_000).toISOString(),
      earliestTimestamp: new Date(base).toISOString(),
      turnCount: 3,
      totalTokens: 360,
      cachedTokens: 100,
      callerType: 'agent',
      callerName: 'support-bot',
      subscriptionId: admin.subscriptionId,
      hasErrors: true,
    });
    const oldest = await t.ok('AITelemetryRpc.listThreads', { sort: { direction: 'asc' } }, as(admin.token));
    assert.deepEqual(
      oldest.data.map((thread: { threadId: string }) => thread.threadId),
      ['thread-b', ids.solo, 'thread-a'],
    );
    const other = await t.ok('AITelemetryRpc.listThreads', { sort: { direction: 'sideways' } }, as(admin.token));
    assert.equal(other.data[0].threadId, 'thread-a', 'anything but asc is newest first');
    const paged = await t.ok('AITelemetryRpc.listThreads', { page: 2, pageSize: 2 }, as(admin.token));
    assert.deepEqual([paged.data.length, paged.totalCount], [1, 3]);
  });

  it('filters by caller, thread, subscription, status and dates', async () => {
    const threadsOf = async (filter: object) =>
      ((await t.ok('AITelemetryRpc.listThreads', { filter }, as(admin.token))).data as { threadId: string }[]).map((thread) => thread.threadId);
    assert.deepEqual(await threadsOf({ callerType: 'workflow' }), ['thread-b']);
    assert.deepEqual(await threadsOf({ callerName: 'support-bot' }), ['thread-a', ids.solo]);
    assert.deepEqual(await threadsOf({ threadId: 'thread-b' }), ['thread-b']);
    assert.deepEqual(await threadsOf({ threadId: ids.solo }), [ids.solo]);
    assert.deepEqual(await threadsOf({ status: 'error' }), ['thread-a']);
    assert.deepEqual(await threadsOf({ subscriptionId: admin.subscriptionId }), ['thread-a', ids.solo, 'thread-b']);
    assert.deepEqual(await threadsOf({ subscriptionId: randomUUID() }), []);
    assert.deepEqual(await threadsOf({ dateFrom: new Date(base + 12 * 60_000).toISOString(), dateTo: new Date(base + 16 * 60_000).toISOString() }), [ids.solo]);
    for (const filter of [{ model: 'x' }, { dateFrom: 'yesterday' }, { status: 1 }]) {
      assert.equal((await t.call('AITelemetryRpc.listThreads', { filter }, as(admin.token))).status, 400, JSON.stringify(filter));
    }
    for (const params of [{ pageSize: 201 }, { pageSize: 0 }, { page: 0 }]) {
      assert.equal((await t.call('AITelemetryRpc.listThreads', params, as(admin.token))).status, 400, JSON.stringify(params));
    }
  });

  it('returns a thread ascending, a lone trace by its id, and a trace or NOT_FOUND', async () => {
    const thread = await t.ok('AITelemetryRpc.getThread', { threadId: 'thread-a' }, as(admin.token));
    assert.deepEqual(
      thread.map((trace: { traceId: string }) => trace.traceId),
      [ids.a1, ids.a2, ids.a3],
    );
    assert.equal(thread[1].status, 'error');
    assert.equal(thread[1].error, 'the provider answered 500');
    assert.deepEqual([thread[0].inputTokens, thread[0].outputTokens, thread[0].cachedTokens, thread[0].totalTokens], [100, 20, 40, 120]);
    const lone = await t.ok('AITelemetryRpc.getThread', { threadId: ids.solo }, as(admin.token));
    assert.deepEqual(
      lone.map((trace: { traceId: string }) => trace.traceId),
      [ids.solo],
    );
    assert.deepEqual(await t.ok('AITelemetryRpc.getThread', { threadId: 'nothing' }, as(admin.token)), []);

    const trace = await t.ok('AITelemetryRpc.getTrace', { traceId: ids.b1 }, as(admin.token));
    assert.equal(trace.threadId, 'thread-b');
    assert.equal(trace.callerType, 'workflow');
    assert.equal(trace.costUsd, 0.25);
    const missing = await t.call('AITelemetryRpc.getTrace', { traceId: ids.foreign }, as(admin.token));
    assert.equal(missing.status, 404);
    assert.match(missing.body.data.error, /Trace .* not found/);
    assert.equal((await t.call('AITelemetryRpc.getTrace', { traceId: 'nope' }, as(admin.token))).status, 400);
  });

  it('totals the matching traces, all zeros when none match', async () => {
    assert.deepEqual(await t.ok('AITelemetryRpc.getStats', {}, as(admin.token)), {
      totalTraces: 5,
      totalTokens: 600,
      totalCachedTokens: 100,
      errorCount: 1,
      avgDurationMs: 110,
      uniqueThreadCount: 3,
      cacheHitRate: 0.2,
    });
    assert.deepEqual(await t.ok('AITelemetryRpc.getStats', { filter: { callerName: 'nobody' } }, as(admin.token)), {
      totalTraces: 0,
      totalTokens: 0,
      totalCachedTokens: 0,
      errorCount: 0,
      avgDurationMs: 0,
      uniqueThreadCount: 0,
      cacheHitRate: 0,
    });
  });

  it('sums calls and tokens per day and model, and gives duration percentiles per model', async () => {
    await insert('next-day', { minutes: 24 * 60, threadId: 'thread-c', input: 10, output: 5, cost: null });
    try {
      assert.deepEqual(await t.ok('AITelemetryRpc.getUsage', {}, as(admin.token)), {
        daily: [
          { day: '2026-11-01', model: 'gpt-4o-mini', calls: 5, errors: 1, inputTokens: 500, outputTokens: 100, totalTokens: 600, costUsd: 1.25 },
          // No call of that day was priced: no cost rather than a cost of 0.
          { day: '2026-11-02', model: 'gpt-4o-mini', calls: 1, errors: 0, inputTokens: 10, outputTokens: 5, totalTokens: 15, costUsd: null },
        ],
        // Durations 100, 105, 110, 115, 120 and 1540 ms (100 + minutes).
        latency: [{ model: 'gpt-4o-mini', calls: 6, p50Ms: 112.5, p90Ms: 830, p99Ms: 1469 }],
      });
      assert.deepEqual(await t.ok('AITelemetryRpc.getUsage', { filter: { callerName: 'nobody' } }, as(admin.token)), { daily: [], latency: [] });
      const mine = await t.ok('AITelemetryRpc.getUsage', {}, as(member.token));
      assert.deepEqual(
        mine.daily.map((row: { calls: number }) => row.calls),
        [1],
      );
      const refused = await t.call('AITelemetryRpc.getUsage', { filter: { threadId: 'thread-a' } }, as(admin.token));
      assert.equal(refused.body.data.code, 'VALIDATION_ERROR');
    } finally {
      await t.app.deps.db.execute('delete from ai_telemetry_trace where trace_id = ?', [ids['next-day']]);
    }
  });

  it("shows other roles only their own calls, and another subscription's to no one", async () => {
    const mine = await t.ok('AITelemetryRpc.listThreads', {}, as(member.token));
    assert.deepEqual(
      mine.data.map((thread: { threadId: string }) => thread.threadId),
      ['thread-b'],
    );
    assert.equal((await t.call('AITelemetryRpc.getTrace', { traceId: ids.a1 }, as(member.token))).status, 404);
    assert.equal((await t.ok('AITelemetryRpc.getStats', {}, as(member.token))).totalTraces, 1);
  });

  it('lists the traces the AI client records for real calls', async () => {
    const fresh = await t.signup();
    await t.ok('MemoryRpc.saveMemory', { scope: 'user', memory: { content: 'remember the milk' } }, as(fresh.token));
    await t.ok('MemoryRpc.recallMemories', { scope: 'user', queryText: 'milk' }, as(fresh.token));
    const { data } = await t.ok('AITelemetryRpc.listThreads', {}, as(fresh.token));
    assert.equal(data.length, 2);
    for (const thread of data) {
      assert.deepEqual([thread.callerType, thread.callerName, thread.turnCount, thread.hasErrors], ['plugin', 'memory', 1, false]);
      const trace = await t.ok('AITelemetryRpc.getTrace', { traceId: thread.threadId }, as(fresh.token));
      assert.equal(trace.operation, 'embedding');
      assert.equal(trace.provider, 'local');
      assert.equal(trace.userId, fresh.user._id);
      assert.ok(trace.inputTokens >= 1);
      assert.equal(trace.costUsd, 0, 'the local embedder is priced at 0');
    }
  });
});

describe('AITelemetryRpc: the traces of the core table', () => {
  it('keeps the rows of core_ai_trace when the plugin takes the table over', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-ai-trace-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const traceId = randomUUID();
    try {
      // Before this plugin is loaded the core's own migrations have made core_ai_trace, as they did when the core wrote it.
      const before = await startTestApp({ withNotes: false, plugins: ['auth'], dataDir, persistent: true, databaseUrl: scratch?.url });
      const admin = await before.signup();
      await before.app.deps.db.execute(
        `insert into core_ai_trace (trace_id, subscription_id, user_id, thread_id, request_timestamp, duration_ms, status, provider, model, operation,
          caller_type, caller_name, input_tokens, output_tokens, cached_tokens, total_tokens, attempts, error)
         values (?, ?, ?, 'kept', now(), 12, 'success', 'local', 'local-lexical-384', 'embedding', 'plugin', 'memory', 7, 0, 0, 7, 1, null)`,
        [traceId, admin.subscriptionId, admin.user._id],
      );
      await before.close();
      const after = await startTestApp({ withNotes: false, plugins: ['auth', 'ai-telemetry'], dataDir, persistent: true, databaseUrl: scratch?.url });
      try {
        const trace = await after.ok('AITelemetryRpc.getTrace', { traceId }, { token: admin.token });
        assert.deepEqual([trace.threadId, trace.callerName, trace.inputTokens], ['kept', 'memory', 7]);
      } finally {
        await after.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
