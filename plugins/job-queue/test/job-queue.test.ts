import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { queueProbePlugin } from '../../../test/fixtures/queue-probe-plugin.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

describe('JobQueueRpc', () => {
  const failing = new Set(['broken']);
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let other: Awaited<ReturnType<TestApp['signup']>>;
  let staff: Member;
  let member: Member;
  const ids: Record<string, string> = {};
  const jobOf = async (who: Who, id: string) => {
    const job = (await t.as(who).JobQueueRpc.listJobs({ queue: 'queue-probe.work', pageSize: 100 })).docs.find((listed) => listed.id === id);
    assert.ok(job, `job ${id} is listed`);
    return job;
  };
  /** QueueProbeRpc is the test plugin's (test/fixtures/queue-probe-plugin.ts): the typed client does not know it. */
  const enqueue = (who: Who, params: { label: string; bare?: boolean }) => t.as(who).call<{ jobId: string }>('QueueProbeRpc.enqueue', params);

  before(async () => {
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'job-queue', 'queue-probe'],
      extraPlugins: [queueProbePlugin(failing)],
      env: { JOBS_POLL_MS: '500' },
    });
    admin = await t.signup();
    other = await t.signup();
    staff = await addUser(t, admin.subscriptionId, 'staff');
    member = await addUser(t, admin.subscriptionId, 'user');
    ids.done = (await enqueue(member, { label: 'fine' })).jobId;
    ids.dead = (await enqueue(member, { label: 'broken' })).jobId;
    ids.bare = (await enqueue(member, { label: 'bare', bare: true })).jobId;
    ids.foreign = (await enqueue(other, { label: 'broken' })).jobId;
    await eventually(async () => {
      const states = await Promise.all(Object.values(ids).map(async (id) => (await t.app.deps.jobs.get('queue-probe.work', id))?.state));
      return states.every((state) => state === 'done' || state === 'dead') || undefined;
    });
  });
  after(() => t.close());

  it("counts the subscription's jobs per queue and state, and none of another subscription's", async () => {
    assert.deepEqual(await t.as(staff).JobQueueRpc.getCounts({}), [
      { queue: 'queue-probe.work', states: { waiting: 0, retrying: 0, running: 0, done: 2, dead: 1, cancelled: 0 } },
    ]);
    assert.deepEqual(await t.as(other).JobQueueRpc.getCounts({}), [
      { queue: 'queue-probe.work', states: { waiting: 0, retrying: 0, running: 0, done: 0, dead: 1, cancelled: 0 } },
    ]);
    const fresh = await t.signup();
    assert.deepEqual(await t.as(fresh).JobQueueRpc.getCounts({}), []);
  });

  it('lists jobs newest first with attempts, last error and times, never their data', async () => {
    const page = await t.as(staff).JobQueueRpc.listJobs({});
    assert.deepEqual(
      page.docs.map((job) => job.id),
      [ids.bare, ids.dead, ids.done],
    );
    assert.equal(page.totalDocs, 3);
    const dead = page.docs[1];
    assert.deepEqual(Object.keys(dead).sort(), ['attempts', 'createdAt', 'finishedAt', 'id', 'lastError', 'queue', 'runAt', 'startedAt', 'state']);
    assert.deepEqual([dead.queue, dead.state, dead.attempts, dead.lastError], ['queue-probe.work', 'dead', 1, 'broken could not reach its peer']);
    assert.ok(dead.startedAt && dead.finishedAt && dead.createdAt <= dead.startedAt);
    assert.equal(page.docs[2].lastError, null);
    assert.ok(!JSON.stringify(page).includes('stays inside'), 'no job data');
    const deadOnly = await t.as(admin).JobQueueRpc.listJobs({ state: 'dead' });
    assert.deepEqual(
      deadOnly.docs.map((job) => job.id),
      [ids.dead],
    );
    const second = await t.as(admin).JobQueueRpc.listJobs({ page: 2, pageSize: 2 });
    assert.deepEqual(
      [second.docs.map((job) => job.id), second.totalDocs, second.totalPages, second.hasPrevPage, second.hasNextPage],
      [[ids.done], 3, 2, true, false],
    );
    assert.equal((await t.as(admin).JobQueueRpc.listJobs({ queue: 'other.queue' })).totalDocs, 0);
  });

  it('refuses bad params with the field named', async () => {
    for (const [params, field] of [
      [{ state: 'failed' }, 'state'],
      [{ queue: "x'; drop table" }, 'queue'],
      [{ pageSize: 101 }, 'pageSize'],
      [{ page: 0 }, 'page'],
    ] as const) {
      const error = await refused(t.as(admin).call('JobQueueRpc.listJobs', params), 'VALIDATION_ERROR', JSON.stringify(params));
      // The refusal as a client reads it: its message and its issues.
      assert.match(JSON.stringify({ error: error.message, issues: error.issues }), new RegExp(field));
    }
    await refused(t.as(admin).JobQueueRpc.retryJob({ jobId: 'nope' }), 'VALIDATION_ERROR');
  });

  it('is for staff and admins; retrying is for admins', async () => {
    await refused(t.as(member).JobQueueRpc.getCounts({}), 'FORBIDDEN');
    await refused(t.as(member).JobQueueRpc.listJobs({}), 'FORBIDDEN');
    await refused(t.as(staff).JobQueueRpc.retryJob({ jobId: ids.dead }), 'FORBIDDEN');
    assert.equal((await jobOf(admin, ids.dead)).state, 'dead');
  });

  it("does not retry another subscription's dead job, or a job that is not dead", async () => {
    for (const jobId of [ids.foreign, ids.done]) {
      await refused(t.as(admin).JobQueueRpc.retryJob({ jobId }), 'NOT_FOUND', jobId);
    }
    assert.equal((await jobOf(other, ids.foreign)).state, 'dead');
  });

  it('puts a dead job back to run at once, and it runs', async () => {
    failing.delete('broken');
    assert.deepEqual(await t.as(admin).JobQueueRpc.retryJob({ jobId: ids.dead }), { retried: true });
    const done = await eventually(async () => {
      const job = await jobOf(admin, ids.dead);
      return job.state === 'done' ? job : undefined;
    });
    assert.deepEqual([done.attempts, done.lastError], [2, null]);
    await refused(t.as(admin).JobQueueRpc.retryJob({ jobId: ids.dead }), 'NOT_FOUND', 'a job retried and done is not dead any more');
  });
});
