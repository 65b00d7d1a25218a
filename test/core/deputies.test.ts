import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Role } from 'rpc-service/plugin';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { addUser, type Member } from '../support/users.ts';
import { linearGraph, waitingRun } from '../support/workflows.ts';
import { refused } from '../support/caller.ts';

/**
 * Rights travel with the work (docs/decisions/0056-rights-travel-with-the-work.md):
 * whatever is stored to act later acts with at most the rights of the
 * weakest person who shaped it. Generated over every kind of stored action
 * (a scheduled rpc task, a workflow run, a workflow run by a scheduled task),
 * every role as its creator, as its editor and as whoever starts it, and
 * probes that need different rights. The oracle is independent of the
 * service's code: a probe may take effect only when every person in the chain
 * holds its right on their own.
 */

type Probe = 'promote' | 'secret' | 'staffRead' | 'actFor';
const PROBES: readonly Probe[] = ['promote', 'secret', 'staffRead', 'actFor'];
const ROLES: readonly Role[] = ['admin', 'staff', 'user', 'agent'];

/** What each role may do alone: AdminUserRpc and SecretsRpc.getSecretValue are admin's, JobQueueRpc staff's, acting for another user's memories agents' and admins'. */
const RIGHTS: Record<Role, ReadonlySet<Probe>> = {
  admin: new Set(PROBES),
  staff: new Set(['staffRead']),
  agent: new Set(['actFor']),
  user: new Set(),
};
const allowedFor = (probe: Probe, roles: readonly Role[]) => roles.every((role) => RIGHTS[role].has(probe));

type Session = { token: string; user: { _id: string } };

describe('Deputies: a stored action acts with at most the rights of the weakest person who shaped it', () => {
  let t: TestApp;
  /** Two people of each role, so a creator and an editor of the same role are different people. */
  const people = {} as Record<Role, [Session, Session]>;
  let pawn: Session;

  /** The operation and params of each probe. */
  const probe = (kind: Probe): { method: string; params: Record<string, unknown> } =>
    ({
      promote: { method: 'AdminUserRpc.update', params: { _id: pawn.user._id, role: 'staff' } },
      secret: { method: 'SecretsRpc.getSecretValue', params: { zone: 'vault', key: 'root' } },
      staffRead: { method: 'JobQueueRpc.getCounts', params: {} },
      actFor: { method: 'MemoryRpc.listMemories', params: { scope: 'user', targetUserId: pawn.user._id } },
    })[kind];

  /** Creator and editor pairs: the creator alone, and each role that may change another's record (admins and staff) editing it. */
  const pairs: { creator: Role; editor: Role | null }[] = ROLES.flatMap((creator) => [
    { creator, editor: null },
    ...(['admin', 'staff'] as const).map((editor) => ({ creator, editor })),
  ]);
  const editorOf = (creator: Role, editor: Role) => people[editor][creator === editor ? 1 : 0];

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'admin-user', 'scheduler', 'workflow', 'secrets', 'job-queue', 'memory'],
      env: { SCHEDULER_POLL_MS: '100' },
    });
    const owner = await t.signup();
    const second = await addUser(t, owner.subscriptionId, 'admin');
    people.admin = [owner, { ...second, user: { _id: second.user._id } }] as [Session, Session];
    for (const role of ['staff', 'user', 'agent'] as const) {
      people[role] = [await addUser(t, owner.subscriptionId, role), await addUser(t, owner.subscriptionId, role)] as unknown as [Session, Session];
    }
    pawn = (await addUser(t, owner.subscriptionId, 'user')) as unknown as Session;
    await t.as(owner).SecretsRpc.create({ zone: 'vault', key: 'root', value: 'admin-only-value' });
  });
  after(() => t.close());

  it('scheduled rpc tasks: every creator and editor role × every probe', async () => {
    const cases: { label: string; taskId: string; expected: boolean }[] = [];
    for (const { creator, editor } of pairs) {
      for (const kind of PROBES) {
        const author = people[creator][0];
        const { method, params } = probe(kind);
        const later = `once:${new Date(Date.now() + 60 * 60_000).toISOString()}`;
        const taskId: string = await t.as(author).SchedulerRpc.create({
          taskConfig: { name: `${creator}-${editor}-${kind}`, schedule: later, actionType: 'event', actionConfig: { eventName: 'harmless.tick' } },
        });
        // What it does is set by its editor (or its creator alone), as in the reproduction: an admin's task turned into a promotion.
        await t
          .as(editor ? editorOf(creator, editor) : author)
          .SchedulerRpc.update({ taskId, updatedConfig: { actionType: 'rpc', actionConfig: { method, params } } });
        cases.push({
          label: `${kind}: created by ${creator}, edited by ${editor ?? 'nobody'}`,
          taskId,
          expected: allowedFor(kind, [creator, ...(editor ? [editor] : [])]),
        });
      }
    }
    await fireAndCheck(cases);
  });

  it('workflow runs: every creator, editor and starter role × every probe', async () => {
    let failures = 0;
    for (const { creator, editor } of pairs) {
      const names = new Map<Probe, string>();
      for (const kind of PROBES) {
        const name = `wf-${creator}-${editor}-${kind}-${Math.random().toString(36).slice(2, 8)}`;
        names.set(kind, name);
        const created = await t.as(people[creator][0]).WorkflowRpc.create({ name, ...linearGraph([]) });
        const { method, params } = probe(kind);
        await t
          .as(editor ? editorOf(creator, editor) : people[creator][0])
          .WorkflowRpc.update({ _id: created._id, ...linearGraph([{ id: 'probe', type: 'rpc', config: { method, params, saveAs: 'answer' } }], '"done"') });
      }
      // Every role starts what its creator alone shaped; an edited one is started by an admin, who lends it nothing.
      for (const starter of editor ? (['admin'] as const) : ROLES) {
        const starting = people[starter][1];
        await Promise.all(
          PROBES.map(async (kind) => {
            const expected = allowedFor(kind, [creator, ...(editor ? [editor] : []), starter]);
            const answer = await t.call('WorkflowRpc.executeWorkflow', { workflowIdentifier: names.get(kind) }, { token: starting.token });
            const label = `${kind}: created by ${creator}, edited by ${editor ?? 'nobody'}, run by ${starter}`;
            const succeeded = answer.body.success === true && answer.body.data.result?.status === 'completed';
            if (succeeded !== expected) {
              failures += 1;
              assert.fail(`${label}: expected ${expected ? 'success' : 'refusal'}, got ${JSON.stringify(answer.body.data)}`);
            }
            if (!expected) assert.match(answer.body.data.error, /FORBIDDEN|may not call/, label);
          }),
        );
      }
    }
    assert.equal(failures, 0);
  });

  it('a workflow run by a scheduled task: the task’s chain and the workflow’s authors together', async () => {
    const cases: { label: string; taskId: string; expected: boolean }[] = [];
    const scheduler = people.admin[0];
    for (const { creator, editor } of pairs) {
      for (const kind of PROBES) {
        const name = `sched-${creator}-${editor}-${kind}-${Math.random().toString(36).slice(2, 8)}`;
        const created = await t.as(people[creator][0]).WorkflowRpc.create({ name, ...linearGraph([]) });
        const { method, params } = probe(kind);
        // An admin schedules the workflow; who shaped the workflow (its creator, then its editor) bounds each run.
        const taskId: string = await t.as(scheduler).SchedulerRpc.create({
          taskConfig: {
            name,
            schedule: `once:${new Date(Date.now() + 60 * 60_000).toISOString()}`,
            actionType: 'workflow',
            actionConfig: { workflowIdentifier: name },
          },
        });
        await t
          .as(editor ? editorOf(creator, editor) : people[creator][0])
          .WorkflowRpc.update({ _id: created._id, ...linearGraph([{ id: 'probe', type: 'rpc', config: { method, params, saveAs: 'answer' } }], '"done"') });
        cases.push({
          label: `${kind}: workflow created by ${creator}, edited by ${editor ?? 'nobody'}, scheduled by admin`,
          taskId,
          expected: allowedFor(kind, [creator, ...(editor ? [editor] : [])]),
        });
      }
    }
    await fireAndCheck(cases);
  });

  /**
   * Makes the tasks due, a dozen at a time (fewer than a user's queued workflow runs may be), waits for one finished run of
   * each and checks it succeeded exactly when expected.
   */
  async function fireAndCheck(cases: { label: string; taskId: string; expected: boolean }[]): Promise<void> {
    const admin = people.admin[0];
    const runs = new Map<string, { status: string; error: string | null }>();
    for (let start = 0; start < cases.length; start += 12) {
      const batch = cases.slice(start, start + 12);
      await t.app.deps.db.execute(`update scheduler_task set next_run = now() where id = any(?::uuid[])`, [`{${batch.map((c) => c.taskId).join(',')}}`]);
      const finished = await eventually(async () => {
        const listed = await t.as(admin).SchedulerRpc.listRuns({ pageSize: 200 });
        const byTask = new Map<string, { status: string; error: string | null }>(listed.data.map((run) => [run.taskId, run]));
        return batch.every((c) => byTask.get(c.taskId) && byTask.get(c.taskId)!.status !== 'running') ? byTask : undefined;
      }, 60_000);
      for (const c of batch) runs.set(c.taskId, finished.get(c.taskId)!);
    }
    checkRuns(cases, runs);
  }

  function checkRuns(cases: { label: string; taskId: string; expected: boolean }[], runs: Map<string, { status: string; error: string | null }>): void {
    const wrong = cases
      .map((c) => ({ ...c, run: runs.get(c.taskId)! }))
      .filter((c) => (c.run.status === 'succeeded') !== c.expected || (!c.expected && !/FORBIDDEN|may not call|WORKFLOW_FAILED/.test(c.run.error ?? '')))
      .map((c) => `${c.label}: expected ${c.expected ? 'success' : 'refusal'}, got ${c.run.status} ${c.run.error ?? ''}`);
    assert.deepEqual(wrong, []);
    assert.ok(
      cases.some((c) => c.expected) && cases.some((c) => !c.expected),
      'the generated cases hold both actions that must run and actions that must be refused',
    );
  }
});

describe('Deputies: the reproductions of the hostile run', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let staff: Member;
  let member: Member;

  const runOf = (taskId: string) =>
    eventually(async () => {
      const [run] = (await t.as(admin).SchedulerRpc.listRuns({ taskId })).data;
      return run && run.status !== 'running' ? (run as { status: string; error: string | null }) : undefined;
    }, 30_000);
  const dueNow = (taskId: string) => t.app.deps.db.execute('update scheduler_task set next_run = now() where id = ?', [taskId]);
  const roleOf = async (userId: string) => (await t.as(admin).AdminUserRpc.findById({ id: userId })).role;
  const secretRead = { id: 'read', type: 'rpc', config: { method: 'SecretsRpc.getSecretValue', params: { zone: 'ops', key: 'token' }, saveAs: 'secret' } };

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'admin-user', 'api-key', 'scheduler', 'workflow', 'secrets', 'task', 'job-queue'],
      env: { SCHEDULER_POLL_MS: '100' },
    });
    admin = await t.signup();
    staff = await addUser(t, admin.subscriptionId, 'staff');
    member = await addUser(t, admin.subscriptionId, 'user');
    await t.as(admin).SecretsRpc.create({ zone: 'ops', key: 'token', value: 'admin-only-value' });
  });
  after(() => t.close());

  it("a staff member who edits an admin's task to make themselves admin stays staff", async () => {
    const taskId: string = await t
      .as(admin)
      .SchedulerRpc.create({ taskConfig: { name: 'Nightly', schedule: '0 3 * * *', actionType: 'event', actionConfig: { eventName: 'nightly.tick' } } });
    await t.as(staff).SchedulerRpc.update({
      taskId,
      updatedConfig: { actionType: 'rpc', actionConfig: { method: 'AdminUserRpc.update', params: { _id: staff.user._id, role: 'admin' } } },
    });
    await dueNow(taskId);
    const run = await runOf(taskId);
    assert.equal(run.status, 'failed');
    assert.match(run.error!, /^FORBIDDEN: AdminUserRpc\.update requires the admin role/);
    assert.equal(await roleOf(staff.user._id), 'staff');
    // Saved again by the admin alone, it is still the staff member's work: it stays within their rights.
    await t.as(admin).SchedulerRpc.update({ taskId, updatedConfig: { name: 'Nightly (checked)' } });
    await dueNow(taskId);
    await eventually(async () => ((await t.as(admin).SchedulerRpc.listRuns({ taskId })).data.length === 2 ? true : undefined), 30_000);
    assert.equal(await roleOf(staff.user._id), 'staff');
  });

  it("a member's workflow run by an admin does not copy an admin-only secret into a task the member reads", async () => {
    const graph = linearGraph(
      [
        secretRead,
        { id: 'leak', type: 'rpc', config: { method: 'TaskRpc.create', params: '{"taskInstanceId": "board", "title": "notes", "description": secret.value}' } },
      ],
      '"done"',
    );
    await t.as(member).WorkflowRpc.create({ name: 'Copy', ...graph });
    const byAdmin = await refused(t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Copy' }), 'WORKFLOW_FAILED');
    assert.match(byAdmin.message, /FORBIDDEN: SecretsRpc\.getSecretValue requires the admin role/);
    const tasks = await t.as(member).TaskRpc.getData({ taskInstanceId: 'board', pageSize: 200 });
    assert.equal(tasks.totalCount, 0);
    // Run by the member, the same workflow gets no further either.
    await refused(t.as(member).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Copy' }), 'WORKFLOW_FAILED');
  });

  it('a workflow an admin scheduled, edited afterwards by staff or by the member who owns it, runs within their rights', async () => {
    for (const [owner, editor] of [
      [admin, staff],
      [member, member],
    ] as const) {
      const name = `Report ${editor.user._id.slice(0, 8)}`;
      const created = await t.as(owner).WorkflowRpc.create({ name, ...linearGraph([], '"nothing yet"') });
      const taskId: string = await t
        .as(admin)
        .SchedulerRpc.create({ taskConfig: { name, schedule: '0 3 * * *', actionType: 'workflow', actionConfig: { workflowIdentifier: name } } });
      await t.as(editor).WorkflowRpc.update({ _id: created._id, ...linearGraph([secretRead], 'secret') });
      await dueNow(taskId);
      const run = await runOf(taskId);
      assert.equal(run.status, 'failed');
      assert.match(run.error!, /FORBIDDEN: SecretsRpc\.getSecretValue requires the admin role/);
    }
  });

  it("an event's sender bounds the rest of the run it resumes", async () => {
    const graph = {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'approval', type: 'wait', config: { event: 'approved', saveAs: 'approval' } },
        secretRead,
        { id: 'done', type: 'end', config: { output: 'secret' } },
      ],
      edges: [
        { source: 'start', target: 'approval' },
        { source: 'approval', target: 'read' },
        { source: 'read', target: 'done' },
      ],
    };
    await t.as(admin).WorkflowRpc.create({ name: 'Gate', ...graph });
    const waiting = waitingRun(await t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Gate' }));
    await t.as(member).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Gate', eventName: 'approved', eventData: {}, context: { id: waiting } });
    const ended = await eventually(async () => {
      const run = await t.as(admin).WorkflowRpc.getInstance({ instanceId: waiting });
      return run.status === 'failed' || run.status === 'completed' ? run : undefined;
    }, 30_000);
    assert.equal(ended.status, 'failed');
    assert.match(ended.error!, /FORBIDDEN: SecretsRpc\.getSecretValue requires the admin role/);
    // Approved by an admin, the same workflow reads it.
    const again = waitingRun(await t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Gate' }));
    await t.as(admin).WorkflowRpc.sendEventToWorkflow({ workflowName: 'Gate', eventName: 'approved', eventData: {}, context: { id: again } });
    const completed = await eventually(async () => {
      const run = await t.as(admin).WorkflowRpc.getInstance({ instanceId: again });
      return run.status === 'completed' ? run : undefined;
    }, 30_000);
    assert.deepEqual(completed.output, { value: 'admin-only-value' });
  });

  it('a role cut by one stored action stays cut in what it starts: a workflow it runs, a task it saves', async () => {
    const agent = await addUser(t, admin.subscriptionId, 'agent');
    const staffRead = { id: 'counts', type: 'rpc', config: { method: 'JobQueueRpc.getCounts', params: {}, saveAs: 'counts' } };
    await t.as(admin).WorkflowRpc.create({ name: 'Counts', ...linearGraph([staffRead], '"read"') });
    // An agent's task, edited by staff: it acts as the staff member with a member's rights (staff and agent each lack a right of the other).
    const later = '0 3 * * *';
    const runs: string = await t
      .as(agent)
      .SchedulerRpc.create({ taskConfig: { name: 'Runs counts', schedule: later, actionType: 'event', actionConfig: { eventName: 'agent.tick' } } });
    await t.as(staff).SchedulerRpc.update({ taskId: runs, updatedConfig: { actionType: 'workflow', actionConfig: { workflowIdentifier: 'Counts' } } });
    const saves: string = await t
      .as(agent)
      .SchedulerRpc.create({ taskConfig: { name: 'Saves a task', schedule: later, actionType: 'event', actionConfig: { eventName: 'agent.tick' } } });
    const inner = { name: 'Saved by a task', schedule: later, actionType: 'rpc', actionConfig: { method: 'JobQueueRpc.getCounts', params: {} } };
    await t.as(staff).SchedulerRpc.update({
      taskId: saves,
      updatedConfig: { actionType: 'rpc', actionConfig: { method: 'SchedulerRpc.create', params: { taskConfig: inner } } },
    });
    await dueNow(runs);
    await dueNow(saves);
    const ran = await runOf(runs);
    assert.equal(ran.status, 'failed');
    assert.match(ran.error!, /FORBIDDEN: JobQueueRpc\.getCounts requires the staff role/);
    const saved = await runOf(saves);
    assert.equal(saved.status, 'succeeded', saved.error ?? '');
    const innerId = (saved as unknown as { result: string }).result;
    await dueNow(innerId);
    const innerRun = await runOf(innerId);
    assert.equal(innerRun.status, 'failed');
    assert.match(innerRun.error!, /FORBIDDEN: JobQueueRpc\.getCounts requires the staff role/);
  });

  it("what an API key saves acts within the key's scopes, whoever holds it", async () => {
    const { fullKey } = await t.as(admin).ApiKeyRpc.create({ description: 'scheduler only', scopes: ['SchedulerRpc'] });
    const taskId: string = await t.as({ apiKey: fullKey }).SchedulerRpc.create({
      taskConfig: {
        name: 'Key task',
        schedule: '0 3 * * *',
        actionType: 'rpc',
        actionConfig: { method: 'SecretsRpc.getSecretValue', params: { zone: 'ops', key: 'token' } },
      },
    });
    await dueNow(taskId);
    const run = await runOf(taskId);
    assert.equal(run.status, 'failed');
    assert.match(run.error!, /^FORBIDDEN: This API key may not call SecretsRpc\.getSecretValue/);
    // The same task saved by the admin's session is the admin's alone again only if the key's part is gone: the key stays an author.
    const workflowKey = (await t.as(admin).ApiKeyRpc.create({ description: 'workflows only', scopes: ['WorkflowRpc'] })).fullKey;
    await t.as({ apiKey: workflowKey }).WorkflowRpc.create({ name: 'Key flow', ...linearGraph([secretRead], 'secret') });
    const byKey = await refused(t.as({ apiKey: workflowKey }).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Key flow' }), 'WORKFLOW_FAILED');
    assert.match(byKey.message, /This API key may not call SecretsRpc\.getSecretValue/);
  });
});
