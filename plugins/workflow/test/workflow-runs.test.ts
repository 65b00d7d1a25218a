import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { defineOperation, definePlugin, type BusEvent } from 'rpc-service/plugin';
import type { WorkflowRpcCreateParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { startModelPeer } from '../../../test/support/model-peer.ts';
import { eventually, startHttpReceiver } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';
import { completedRun, linearGraph, waitingRun } from '../../../test/support/workflows.ts';

type Graph = Required<Pick<WorkflowRpcCreateParams, 'nodes' | 'edges'>>;

/** A plugin that adds a node type (`math.square` squares the variable its config names) and a tool (`math.double`, MathRpc.double). */
const mathPlugin = definePlugin({
  id: 'math',
  group: 'MathRpc',
  coreVersion: '^2.0.0',
  extends: {
    'core.tools': [{ name: 'math.double', describe: 'Doubles a number.', method: 'MathRpc.double' }],
    'workflow.nodeTypes': [
      {
        type: 'math.square',
        describe: 'Squares the variable named by config.variable.',
        config: v.object({ variable: v.string(), saveAs: v.optional(v.string()) }),
        run: async (_ctx, { config, variables }) => (variables[config.variable as string] as number) ** 2,
      },
    ],
  },
  operations: {
    double: defineOperation({
      access: 'user',
      describe: 'Doubles a number.',
      params: v.object({ value: v.number() }),
      handler: ({ params }) => ({ doubled: params.value * 2 }),
    }),
  },
});

/** start → tags (rpc) → check (condition) → greet (set) → approval (wait) → done (end), with a path past greet when the caller is not named. */
const approvalGraph = (): Graph => ({
  nodes: [
    { id: 'start', type: 'start' },
    { id: 'tags', type: 'rpc', config: { method: 'WorkflowRpc.getWorkflowTags', saveAs: 'tags' } },
    { id: 'check', type: 'condition', config: { expression: '$exists($args.name)' } },
    { id: 'greet', type: 'set', config: { values: { greeting: '"Hello " & $args.name', tagCount: '$count(tags)' } } },
    { id: 'approval', type: 'wait', config: { event: 'approved', saveAs: 'approval' } },
    { id: 'done', type: 'end', config: { output: '{"greeting": greeting, "tagCount": tagCount, "approvedBy": approval.by}' } },
  ],
  edges: [
    { source: 'start', target: 'tags' },
    { source: 'tags', target: 'check' },
    { source: 'check', target: 'greet', condition: '$result' },
    { source: 'check', target: 'approval' },
    { source: 'greet', target: 'approval' },
    { source: 'approval', target: 'done' },
  ],
});

const instanceOf = (t: TestApp, session: Who, instanceId: string) => t.as(session).WorkflowRpc.getInstance({ instanceId });
const ended = (t: TestApp, session: Who, instanceId: string) =>
  eventually(async () => {
    const instance = await instanceOf(t, session, instanceId);
    return ['completed', 'failed', 'cancelled'].includes(instance.status) ? instance : undefined;
  });

describe('WorkflowRpc: runs', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  let web: Awaited<ReturnType<typeof startHttpReceiver>>;
  const save = (session: Who, name: string, graph: Graph, extra: Partial<WorkflowRpcCreateParams> = {}) =>
    t.as(session).WorkflowRpc.create({ name, ...graph, ...extra });
  const execute = (session: Who, workflowIdentifier: string, workflowArgs: Record<string, unknown> = {}) =>
    t.as(session).WorkflowRpc.executeWorkflow({ workflowIdentifier, workflowArgs });

  before(async () => {
    web = await startHttpReceiver((request) =>
      request.path === '/slow'
        ? { status: 200, delayMs: 800, json: { slow: true } }
        : { status: 201, json: { echoed: JSON.parse(request.body || 'null'), path: request.path } },
    );
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'workflow', 'math', 'secrets'],
      extraPlugins: [mathPlugin],
      // executeWorkflow waits its default 30 s, so what it answers (completed, or waiting at a wait) is where each run
      // got to, and what the tests read of a run afterwards is its state then, however slowly a loaded machine runs it.
      env: { JOBS_POLL_MS: '500', WORKFLOW_MAX_STEPS: '200', OUTBOUND_ALLOWED_HOSTS: `127.0.0.1:${web.port}` },
    });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(async () => {
    await t.close();
    await web.close();
  });

  it('runs a condition, an rpc node and a wait: execute answers waiting, the event resumes it, it completes with the output', async () => {
    const workflow = await save(member, 'Approval', approvalGraph(), { tags: ['a', 'b'] });
    const instanceId = waitingRun(await execute(member, 'approval', { name: 'Ada' }));
    const waiting = await instanceOf(t, member, instanceId);
    assert.deepEqual([waiting.status, waiting.waitingFor, waiting.cursor, waiting.workflowId], ['waiting', 'approved', 'approval', workflow._id]);
    assert.deepEqual((waiting.variables as Record<string, unknown>).greeting, 'Hello Ada');
    assert.deepEqual(
      (waiting.history as { node: string; status: string }[]).map((step) => `${step.node}:${step.status}`),
      ['start:done', 'tags:done', 'check:done', 'greet:done', 'approval:waiting'],
    );

    const sent = await t.as(member).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Approval', eventName: 'approved', eventData: { by: 'Grace' } });
    assert.deepEqual(sent, {}, 'nothing beside success (a bare `{success: true}` on the wire)');
    const done = await ended(t, member, instanceId);
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.output, { greeting: 'Hello Ada', tagCount: 2, approvedBy: 'Grace' });
    assert.ok(done.finishedAt);

    // No run waits any more.
    const none = await refused(t.as(member).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Approval', eventName: 'approved', eventData: {} }), 'NOT_FOUND');
    assert.match(none.message, /No run of workflow Approval is waiting for event approved/);
  });

  it('answers the output of a run that completes at once, and routes by edge conditions', async () => {
    await save(member, 'Classify', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'size', type: 'condition', config: { expression: '$args.amount' } },
        { id: 'big', type: 'end', config: { output: '{"size": "big", "amount": $args.amount}' } },
        { id: 'small', type: 'end', config: { output: '{"size": "small"}' } },
      ],
      edges: [
        { source: 'start', target: 'size' },
        { source: 'size', target: 'big', condition: '$result > 100' },
        { source: 'size', target: 'small' },
      ],
    });
    const big = completedRun(await execute(member, 'Classify', { amount: 250 }));
    assert.deepEqual(big.status, 'completed');
    assert.deepEqual(big.output, { size: 'big', amount: 250 });
    assert.deepEqual(completedRun(await execute(member, 'classify', { amount: 3 })).output, { size: 'small' });
    const missing = await refused(execute(member, 'No such workflow'), 'NOT_FOUND');
    assert.match(missing.message, /Workflow No such workflow not found/);
  });

  it('makes HTTP requests through the outbound guard, and fails a run whose node fails, naming it', async () => {
    await save(member, 'Post it', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'post', type: 'http', config: { url: `${web.url}/items/{{ $args.id }}`, method: 'POST', body: '{"qty": $args.qty}', saveAs: 'response' } },
        { id: 'done', type: 'end', config: { output: 'response' } },
      ],
      edges: [
        { source: 'start', target: 'post' },
        { source: 'post', target: 'done' },
      ],
    });
    const posted = completedRun(await execute(member, 'Post it', { id: 42, qty: 3 })).output as { status: number; body: unknown };
    assert.equal(posted.status, 201);
    assert.deepEqual(posted.body, { echoed: { qty: 3 }, path: '/items/42' });

    await save(member, 'Private', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'peek', type: 'http', config: { url: 'http://10.0.0.1/admin' } },
        { id: 'done', type: 'end' },
      ],
      edges: [
        { source: 'start', target: 'peek' },
        { source: 'peek', target: 'done' },
      ],
    });
    // On the wire: the workflow plugin's own error code reaches a client with the HTTP status the plugin declares for it.
    const failedRun = await t.call<{ code: string; error: string }>('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'Private', workflowArgs: {} }, member);
    assert.deepEqual([failedRun.status, failedRun.body.success, failedRun.body.data.code], [422, false, 'WORKFLOW_FAILED']);
    assert.match(failedRun.body.data.error, /node "peek": 10\.0\.0\.1 is not a public address/);

    // An rpc node acts as the run's user: a member may not delete the admin's workflow.
    const theirs = await save(admin, 'Admin only', approvalGraph());
    await save(member, 'Vandal', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'remove', type: 'rpc', config: { method: 'WorkflowRpc.delete', params: { _id: theirs._id } } },
        { id: 'done', type: 'end' },
      ],
      edges: [
        { source: 'start', target: 'remove' },
        { source: 'remove', target: 'done' },
      ],
    });
    const vandal = await refused(execute(member, 'Vandal'), 'WORKFLOW_FAILED');
    assert.match(vandal.message, /node "remove": FORBIDDEN/);
    assert.equal((await t.as(admin).WorkflowRpc.findById({ id: theirs._id })).name, 'Admin only');
    const failed = (await t.as(member).WorkflowRpc.listInstances({ status: 'failed' })).data;
    assert.ok(failed.some((instance) => instance.workflowName === 'Vandal' && /FORBIDDEN/.test(instance.error ?? '')));
  });

  it('runs node types other plugins add, and refuses their bad configs when saving', async () => {
    const graph = (config: Record<string, unknown>): Graph => ({
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'seed', type: 'set', config: { values: { n: '$args.n' } } },
        { id: 'square', type: 'math.square', config },
        { id: 'done', type: 'end', config: { output: 'squared' } },
      ],
      edges: [
        { source: 'start', target: 'seed' },
        { source: 'seed', target: 'square' },
        { source: 'square', target: 'done' },
      ],
    });
    await save(member, 'Square', graph({ variable: 'n', saveAs: 'squared' }));
    assert.equal(completedRun(await execute(member, 'Square', { n: 12 })).output, 144);
    // A tool node calls the tool's operation as the run's user.
    await save(
      member,
      'Double',
      linearGraph([{ id: 'twice', type: 'tool', config: { tool: 'math.double', params: '{"value": $args.n}', saveAs: 'twice' } }], 'twice.doubled'),
    );
    assert.equal(completedRun(await execute(member, 'Double', { n: 21 })).output, 42);
    const badSquare = await refused(t.as(member).WorkflowRpc.create({ name: 'Bad square', ...graph({ saveAs: 'squared' }) }), 'VALIDATION_ERROR');
    assert.equal(badSquare.issues?.[0]?.path, 'nodes.2.config.variable');
  });

  it('stops a runaway loop at the step limit, and an expression at its guardrails', async () => {
    await save(member, 'Forever', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'count', type: 'set', config: { values: { n: '$exists(n) ? n + 1 : 1' } } },
        { id: 'enough', type: 'condition', config: { expression: 'n > 1000000' } },
        { id: 'done', type: 'end' },
      ],
      edges: [
        { source: 'start', target: 'count' },
        { source: 'count', target: 'enough' },
        { source: 'enough', target: 'done', condition: '$result' },
        { source: 'enough', target: 'count' },
      ],
    });
    const runaway = await refused(execute(member, 'Forever'), 'WORKFLOW_FAILED');
    assert.match(runaway.message, /it ran 200 nodes, the most a run may/);

    // An expression is held to JSONata's guardrails (time, nesting, sequence length).
    await save(member, 'Huge', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'huge', type: 'set', config: { values: { n: '$count([1..10000000])' } } },
        { id: 'done', type: 'end' },
      ],
      edges: [
        { source: 'start', target: 'huge' },
        { source: 'huge', target: 'done' },
      ],
    });
    const huge = await refused(execute(member, 'Huge'), 'WORKFLOW_FAILED');
    assert.match(huge.message, /node "huge": an expression failed: The maximum sequence length/);
  });

  it('keeps an event that comes while the run is still on its way to its wait', async () => {
    await save(member, 'Slow then wait', {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'slow', type: 'http', config: { url: `${web.url}/slow` } },
        { id: 'gate', type: 'wait', config: { event: 'go', saveAs: 'go' } },
        { id: 'done', type: 'end', config: { output: 'go' } },
      ],
      edges: [
        { source: 'start', target: 'slow' },
        { source: 'slow', target: 'gate' },
        { source: 'gate', target: 'done' },
      ],
    });
    // The run is in its slow HTTP request when the event comes: the event is kept, and the wait takes it.
    const run = t.as(member).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Slow then wait' });
    const instanceId = await eventually(async () => {
      const [running] = (await t.as(member).WorkflowRpc.listInstances({ status: 'running' })).data;
      return running?.workflowName === 'Slow then wait' ? running._id : undefined;
    });
    const sent = await t
      .as(member)
      .WorkflowRpc.sendEventToWorkflow({ workflowName: 'Slow then wait', eventName: 'go', eventData: { early: true }, context: { id: instanceId } });
    assert.deepEqual(sent, {}, 'nothing beside success (a bare `{success: true}` on the wire)');
    assert.deepEqual(completedRun(await run), { status: 'completed', output: { early: true }, instanceId });
  });

  it('takes over a run whose node stopped (its lease ran out), from its last state', async () => {
    await save(member, 'Orphan', approvalGraph());
    const instanceId = waitingRun(await execute(member, 'Orphan', { name: 'Kim' }));
    // As if the node running it had died after its last checkpoint: running, at the wait's next node, lease run out.
    await t.app.deps.db.execute(
      `update workflow_instance set status = 'running', cursor = 'done', waiting_for = null, lease_until = now() - interval '1 minute' where id = ?`,
      [instanceId],
    );
    const { recovered } = await t.app.depsOf('workflow').workflowRunner.recover();
    assert.ok(recovered >= 1);
    const done = await ended(t, member, instanceId);
    const output = done.output as Record<string, unknown>;
    assert.deepEqual([done.status, output.greeting, 'approvedBy' in output], ['completed', 'Hello Kim', false]);
  });

  it("shows a run's variables and output only to whoever started it and to admins", async () => {
    await t.as(admin).SecretsRpc.create({ zone: 'ops', key: 'token', value: 'admin-only-value' });
    await save(
      admin,
      'Peek',
      linearGraph(
        [{ id: 'read', type: 'rpc', config: { method: 'SecretsRpc.getSecretValue', params: '{"zone": "ops", "key": "token"}', saveAs: 'secret' } }],
        'secret',
      ),
    );
    // A member's run of it has the member's rights (test/core/deputies.test.ts: an admin's run of a member's workflow has the member's).
    const own = await refused(execute(member, 'Peek'), 'WORKFLOW_FAILED');
    assert.match(own.message, /FORBIDDEN/);
    // The admin's run of the admin's workflow reads the secret, for the admin alone.
    const announced: BusEvent[] = [];
    const unsubscribe = t.app.deps.bus.subscribe('workflow.completed', (event) => void announced.push(event));
    const byAdmin = completedRun(await execute(admin, 'Peek'));
    assert.deepEqual(byAdmin.output, { value: 'admin-only-value' });
    const { instanceId } = byAdmin;
    const completed = await eventually(() => announced.find((event) => (event.payload as { instanceId: string }).instanceId === instanceId));
    unsubscribe();
    assert.deepEqual(completed.userIds, [admin.user._id], 'its event goes to the admin alone (WebSocket and webhooks)');
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    for (const reader of [member, staff]) {
      const theirs = t.as(reader).WorkflowRpc;
      for (const [method, call] of [
        ['WorkflowRpc.getInstance', () => theirs.getInstance({ instanceId })],
        ['WorkflowRpc.cancelInstance', () => theirs.cancelInstance({ instanceId })],
      ] as const) {
        await refused(call(), 'NOT_FOUND', method);
      }
      const listed = await t.as(reader).WorkflowRpc.listInstances({ pageSize: 200 });
      assert.ok(
        listed.data.every((run) => run.userId === reader.user._id),
        'only their own runs',
      );
      assert.doesNotMatch(JSON.stringify(listed), /admin-only-value/);
    }
    assert.equal(((await instanceOf(t, admin, instanceId)).output as { value: string }).value, 'admin-only-value');
    // Admins read every run of the subscription.
    const memberRun = own.message.match(/run ([0-9a-f-]{36})/)?.[1];
    assert.ok(memberRun, own.message);
    assert.equal((await instanceOf(t, admin, memberRun)).status, 'failed');
    const all = await t.as(admin).WorkflowRpc.listInstances({ pageSize: 200 });
    assert.ok(all.data.some((run) => run._id === memberRun));
  });

  it('cancels a waiting run; keeps runs and events to their subscription', async () => {
    await save(member, 'Parked', approvalGraph());
    const instanceId = waitingRun(await execute(member, 'Parked', { name: 'Lin' }));
    const strangers = t.as(stranger).WorkflowRpc;
    for (const [method, call] of [
      ['WorkflowRpc.getInstance', () => strangers.getInstance({ instanceId })],
      ['WorkflowRpc.cancelInstance', () => strangers.cancelInstance({ instanceId })],
      [
        'WorkflowRpc.sendEventToWorkflow',
        () => strangers.sendEventToWorkflow({ workflowName: 'Parked', eventName: 'approved', eventData: {}, context: { id: instanceId } }),
      ],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.equal((await t.as(stranger).WorkflowRpc.listInstances({})).totalCount, 0);

    const cancelled = await t.as(member).WorkflowRpc.cancelInstance({ instanceId });
    assert.equal(cancelled.status, 'cancelled');
    await refused(t.as(member).WorkflowRpc.cancelInstance({ instanceId }), 'CONFLICT');
    const late = await refused(
      t.as(member).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Parked', eventName: 'approved', eventData: {}, context: { id: instanceId } }),
      'NOT_FOUND',
    );
    assert.match(late.message, /has ended \(cancelled\)/);
  });
});

const askGraph = (): Graph => ({
  nodes: [
    { id: 'start', type: 'start' },
    { id: 'ask', type: 'ai', config: { prompt: 'Summarise {{ $args.topic }}', system: 'Be brief', saveAs: 'answer' } },
    { id: 'done', type: 'end', config: { output: 'answer' } },
  ],
  edges: [
    { source: 'start', target: 'ask' },
    { source: 'ask', target: 'done' },
  ],
});

describe('WorkflowRpc: ai nodes', () => {
  it('asks the chat model through the AI client, and fails the run naming the node when no provider is configured', async () => {
    const peer = await startModelPeer();
    const configured = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'workflow', 'ai-telemetry'],
      env: { AI_CATALOGUE_FILE: peer.catalogueFile, OUTBOUND_ALLOW_PRIVATE: 'true' },
    });
    const unconfigured = await startTestApp({ withNotes: false, plugins: ['auth', 'workflow'] });
    try {
      const user = await configured.signup();
      await configured.as(user).WorkflowRpc.create({ name: 'Ask', ...askGraph() });
      const answered = await configured.as(user).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Ask', workflowArgs: { topic: 'the tides' } });
      assert.equal(completedRun(answered).output, 'You said: Summarise the tides');
      assert.deepEqual(peer.chats.at(-1), [
        { role: 'system', content: 'Be brief' },
        { role: 'user', content: 'Summarise the tides' },
      ]);
      // The call is a trace of the AI client, in the run's thread.
      const thread = await configured.as(user).AITelemetryRpc.getThread({ threadId: completedRun(answered).instanceId });
      assert.deepEqual(
        thread.map((trace) => [trace.callerType, trace.callerName, trace.status]),
        [['workflow', 'Ask', 'success']],
      );

      const other = await unconfigured.signup();
      await unconfigured.as(other).WorkflowRpc.create({ name: 'Ask', ...askGraph() });
      const failed = await refused(
        unconfigured.as(other).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Ask', workflowArgs: { topic: 'x' } }),
        'WORKFLOW_FAILED',
      );
      assert.match(failed.message, /node "ask": FEATURE_UNAVAILABLE/);
    } finally {
      await configured.close();
      await unconfigured.close();
      await peer.close();
    }
  });
});

describe('WorkflowRpc: runs across a restart', () => {
  it('resumes a waiting run by its event, and fires a delay, after the app restarts', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'rpc-workflow-restart-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = {
      withNotes: false,
      plugins: ['auth', 'workflow'],
      dataDir: path.join(dir, 'data'),
      persistent: true,
      databaseUrl: scratch?.url,
      env: { JOBS_POLL_MS: '500' },
    };
    try {
      const first = await startTestApp(options);
      const user = await first.signup();
      await first.as(user).WorkflowRpc.create({ name: 'Approval', ...approvalGraph() });
      await first.as(user).WorkflowRpc.create({
        name: 'Nap',
        nodes: [
          { id: 'start', type: 'start' },
          { id: 'nap', type: 'delay', config: { seconds: 2 } },
          { id: 'done', type: 'end', config: { output: '"rested"' } },
        ],
        edges: [
          { source: 'start', target: 'nap' },
          { source: 'nap', target: 'done' },
        ],
      });
      const waiting = waitingRun(await first.as(user).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Approval', workflowArgs: { name: 'Bo' } }));
      const napping = waitingRun(await first.as(user).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Nap' }));
      assert.ok((await instanceOf(first, user, napping)).wakeAt);
      await first.close();

      const second = await startTestApp(options);
      try {
        const session = await second.as(null).AuthRpc.login({ identifier: user.user.username, password: user.password });
        const napped = await ended(second, session, napping);
        assert.deepEqual([napped.status, napped.output], ['completed', 'rested']);
        await second.as(session).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Approval', eventName: 'approved', eventData: { by: 'Ops' } });
        const resumed = await ended(second, session, waiting);
        assert.deepEqual([resumed.status, resumed.output], ['completed', { greeting: 'Hello Bo', tagCount: 0, approvedBy: 'Ops' }]);
      } finally {
        await second.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
