import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AITelemetryRpcListThreadsParams } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

describe('AITelemetryRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
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
    const { data, totalCount } = await t.as(admin).AITelemetryRpc.listThreads({});
    assert.equal(totalCount, 3);
    assert.deepEqual(
      data.map((thread) => thread.threadId),
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
    const oldest = await t.as(admin).AITelemetryRpc.listThreads({ sort: { direction: 'asc' } });
    assert.deepEqual(
      oldest.data.map((thread) => thread.threadId),
      ['thread-b', ids.solo, 'thread-a'],
    );
    const other = await t.as(admin).AITelemetryRpc.listThreads({ sort: { direction: 'sideways' } });
    assert.equal(other.data[0].threadId, 'thread-a', 'anything but asc is newest first');
    const paged = await t.as(admin).AITelemetryRpc.listThreads({ page: 2, pageSize: 2 });
    assert.deepEqual([paged.data.length, paged.totalCount], [1, 3]);
  });

  it('filters by caller, thread, subscription, status and dates', async () => {
    const threadsOf = async (filter: AITelemetryRpcListThreadsParams['filter']) =>
      (await t.as(admin).AITelemetryRpc.listThreads({ filter })).data.map((thread) => thread.threadId);
    assert.deepEqual(await threadsOf({ callerType: 'workflow' }), ['thread-b']);
    assert.deepEqual(await threadsOf({ callerName: 'support-bot' }), ['thread-a', ids.solo]);
    assert.deepEqual(await threadsOf({ threadId: 'thread-b' }), ['thread-b']);
    assert.deepEqual(await threadsOf({ threadId: ids.solo }), [ids.solo]);
    assert.deepEqual(await threadsOf({ status: 'error' }), ['thread-a']);
    assert.deepEqual(await threadsOf({ subscriptionId: admin.subscriptionId }), ['thread-a', ids.solo, 'thread-b']);
    assert.deepEqual(await threadsOf({ subscriptionId: randomUUID() }), []);
    assert.deepEqual(await threadsOf({ dateFrom: new Date(base + 12 * 60_000).toISOString(), dateTo: new Date(base + 16 * 60_000).toISOString() }), [ids.solo]);
    for (const filter of [{ model: 'x' }, { dateFrom: 'yesterday' }, { status: 1 }]) {
      await refused(t.as(admin).call('AITelemetryRpc.listThreads', { filter }), 'VALIDATION_ERROR', JSON.stringify(filter));
    }
    for (const params of [{ pageSize: 201 }, { pageSize: 0 }, { page: 0 }]) {
      await refused(t.as(admin).AITelemetryRpc.listThreads(params), 'VALIDATION_ERROR', JSON.stringify(params));
    }
  });

  it('returns a thread ascending, a lone trace by its id, and a trace or NOT_FOUND', async () => {
    const thread = await t.as(admin).AITelemetryRpc.getThread({ threadId: 'thread-a' });
    assert.deepEqual(
      thread.map((trace) => trace.traceId),
      [ids.a1, ids.a2, ids.a3],
    );
    assert.equal(thread[1].status, 'error');
    assert.equal(thread[1].error, 'the provider answered 500');
    assert.deepEqual([thread[0].inputTokens, thread[0].outputTokens, thread[0].cachedTokens, thread[0].totalTokens], [100, 20, 40, 120]);
    const lone = await t.as(admin).AITelemetryRpc.getThread({ threadId: ids.solo });
    assert.deepEqual(
      lone.map((trace) => trace.traceId),
      [ids.solo],
    );
    assert.deepEqual(await t.as(admin).AITelemetryRpc.getThread({ threadId: 'nothing' }), []);

    const trace = await t.as(admin).AITelemetryRpc.getTrace({ traceId: ids.b1 });
    assert.equal(trace.threadId, 'thread-b');
    assert.equal(trace.callerType, 'workflow');
    assert.equal(trace.costUsd, 0.25);
    const missing = await refused(t.as(admin).AITelemetryRpc.getTrace({ traceId: ids.foreign }), 'NOT_FOUND');
    assert.match(missing.message, /Trace .* not found/);
    await refused(t.as(admin).AITelemetryRpc.getTrace({ traceId: 'nope' }), 'VALIDATION_ERROR');
  });

  it('totals the matching traces, all zeros when none match', async () => {
    assert.deepEqual(await t.as(admin).AITelemetryRpc.getStats({}), {
      totalTraces: 5,
      totalTokens: 600,
      totalCachedTokens: 100,
      errorCount: 1,
      avgDurationMs: 110,
      uniqueThreadCount: 3,
      cacheHitRate: 0.2,
    });
    assert.deepEqual(await t.as(admin).AITelemetryRpc.getStats({ filter: { callerName: 'nobody' } }), {
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
      assert.deepEqual(await t.as(admin).AITelemetryRpc.getUsage({}), {
        daily: [
          { day: '2026-11-01', model: 'gpt-4o-mini', calls: 5, errors: 1, inputTokens: 500, outputTokens: 100, totalTokens: 600, costUsd: 1.25 },
          // No call of that day was priced: no cost rather than a cost of 0.
          { day: '2026-11-02', model: 'gpt-4o-mini', calls: 1, errors: 0, inputTokens: 10, outputTokens: 5, totalTokens: 15, costUsd: null },
        ],
        // Durations 100, 105, 110, 115, 120 and 1540 ms (100 + minutes).
        latency: [{ model: 'gpt-4o-mini', calls: 6, p50Ms: 112.5, p90Ms: 830, p99Ms: 1469 }],
      });
      assert.deepEqual(await t.as(admin).AITelemetryRpc.getUsage({ filter: { callerName: 'nobody' } }), { daily: [], latency: [] });
      const mine = await t.as(member).AITelemetryRpc.getUsage({});
      assert.deepEqual(
        mine.daily.map((row) => row.calls),
        [1],
      );
      await refused(t.as(admin).call('AITelemetryRpc.getUsage', { filter: { threadId: 'thread-a' } }), 'VALIDATION_ERROR');
    } finally {
      await t.app.deps.db.execute('delete from ai_telemetry_trace where trace_id = ?', [ids['next-day']]);
    }
  });

  it("shows other roles only their own calls, and another subscription's to no one", async () => {
    const mine = await t.as(member).AITelemetryRpc.listThreads({});
    assert.deepEqual(
      mine.data.map((thread) => thread.threadId),
      ['thread-b'],
    );
    await refused(t.as(member).AITelemetryRpc.getTrace({ traceId: ids.a1 }), 'NOT_FOUND');
    assert.equal((await t.as(member).AITelemetryRpc.getStats({})).totalTraces, 1);
  });

  it('lists the traces the AI client records for real calls', async () => {
    const fresh = await t.signup();
    await t.as(fresh).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'remember the milk' } });
    await t.as(fresh).MemoryRpc.recallMemories({ scope: 'user', queryText: 'milk' });
    const { data } = await t.as(fresh).AITelemetryRpc.listThreads({});
    assert.equal(data.length, 2);
    for (const thread of data) {
      assert.deepEqual([thread.callerType, thread.callerName, thread.turnCount, thread.hasErrors], ['plugin', 'memory', 1, false]);
      const trace = await t.as(fresh).AITelemetryRpc.getTrace({ traceId: thread.threadId });
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
        const trace = await after.as(admin).AITelemetryRpc.getTrace({ traceId });
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
