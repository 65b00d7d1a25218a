import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { queueProbePlugin } from '../../../test/fixtures/queue-probe-plugin.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser } from '../../../test/support/users.ts';

describe('JobQueueRpc', () => {
  const failing = new Set(['broken']);
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let other: Awaited<ReturnType<TestApp['signup']>>;
  let staff: Awaited<ReturnType<typeof addUser>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  const ids: Record<string, string> = {};
  const as = (token: string) => ({ token });
  const jobOf = async (token: string, id: string) =>
    (await t.ok('JobQueueRpc.listJobs', { queue: 'queue-probe.work', pageSize: 100 }, as(token))).docs.find((job: { id: string }) => job.id === id);

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
    ids.done = (await t.ok('QueueProbeRpc.enqueue', { label: 'fine' }, as(member.token))).jobId;
    ids.dead = (await t.ok('QueueProbeRpc.enqueue', { label: 'broken' }, as(member.token))).jobId;
    ids.bare = (await t.ok('QueueProbeRpc.enqueue', { label: 'bare', bare: true }, as(member.token))).jobId;
    ids.foreign = (await t.ok('QueueProbeRpc.enqueue', { label: 'broken' }, as(other.token))).jobId;
    await eventually(async () => {
      const states = await Promise.all(Object.values(ids).map(async (id) => (await t.app.deps.jobs.get('queue-probe.work', id))?.state));
      return states.every((state) => state === 'done' || state === 'dead') || undefined;
    });
  });
  after(() => t.close());

  it("counts the subscription's jobs per queue and state, and none of another subscription's", async () => {
    assert.deepEqual(await t.ok('JobQueueRpc.getCounts', {}, as(staff.token)), [
      { queue: 'queue-probe.work', states: { waiting: 0, retrying: 0, running: 0, done: 2, dead: 1, cancelled: 0 } },
    ]);
    assert.deepEqual(await t.ok('JobQueueRpc.getCounts', {}, as(other.token)), [
      { queue: 'queue-probe.work', states: { waiting: 0, retrying: 0, running: 0, done: 0, dead: 1, cancelled: 0 } },
    ]);
    const fresh = await t.signup();
    assert.deepEqual(await t.ok('JobQueueRpc.getCounts', {}, as(fresh.token)), []);
  });

  it('lists jobs newest first with attempts, last error and times, never their data', async () => {
    const page = await t.ok('JobQueueRpc.listJobs', {}, as(staff.token));
    assert.deepEqual(
      page.docs.map((job: { id: string }) => job.id),
      [ids.bare, ids.dead, ids.done],
    );
    assert.equal(page.totalDocs, 3);
    const dead = page.docs[1];
    assert.deepEqual(Object.keys(dead).sort(), ['attempts', 'createdAt', 'finishedAt', 'id', 'lastError', 'queue', 'runAt', 'startedAt', 'state']);
    assert.deepEqual([dead.queue, dead.state, dead.attempts, dead.lastError], ['queue-probe.work', 'dead', 1, 'broken could not reach its peer']);
    assert.ok(dead.startedAt && dead.finishedAt && dead.createdAt <= dead.startedAt);
    assert.equal(page.docs[2].lastError, null);
    assert.ok(!JSON.stringify(page).includes('stays inside'), 'no job data');
    const deadOnly = await t.ok('JobQueueRpc.listJobs', { state: 'dead' }, as(admin.token));
    assert.deepEqual(
      deadOnly.docs.map((job: { id: string }) => job.id),
      [ids.dead],
    );
    const second = await t.ok('JobQueueRpc.listJobs', { page: 2, pageSize: 2 }, as(admin.token));
    assert.deepEqual(
      [second.docs.map((job: { id: string }) => job.id), second.totalDocs, second.totalPages, second.hasPrevPage, second.hasNextPage],
      [[ids.done], 3, 2, true, false],
    );
    assert.equal((await t.ok('JobQueueRpc.listJobs', { queue: 'other.queue' }, as(admin.token))).totalDocs, 0);
  });

  it('refuses bad params with the field named', async () => {
    for (const [params, field] of [
      [{ state: 'failed' }, 'state'],
      [{ queue: "x'; drop table" }, 'queue'],
      [{ pageSize: 101 }, 'pageSize'],
      [{ page: 0 }, 'page'],
    ] as const) {
      const refused = await t.call('JobQueueRpc.listJobs', params, as(admin.token));
      assert.equal(refused.body.data.code, 'VALIDATION_ERROR', JSON.stringify(params));
      assert.match(JSON.stringify(refused.body.data), new RegExp(field));
    }
    assert.equal((await t.call('JobQueueRpc.retryJob', { jobId: 'nope' }, as(admin.token))).body.data.code, 'VALIDATION_ERROR');
  });

  it('is for staff and admins; retrying is for admins', async () => {
    assert.equal((await t.call('JobQueueRpc.getCounts', {}, as(member.token))).body.data.code, 'FORBIDDEN');
    assert.equal((await t.call('JobQueueRpc.listJobs', {}, as(member.token))).body.data.code, 'FORBIDDEN');
    assert.equal((await t.call('JobQueueRpc.retryJob', { jobId: ids.dead }, as(staff.token))).body.data.code, 'FORBIDDEN');
    assert.equal((await jobOf(admin.token, ids.dead)).state, 'dead');
  });

  it("does not retry another subscription's dead job, or a job that is not dead", async () => {
    for (const jobId of [ids.foreign, ids.done]) {
      const refused = await t.call('JobQueueRpc.retryJob', { jobId }, as(admin.token));
      assert.equal(refused.status, 404);
      assert.equal(refused.body.data.code, 'NOT_FOUND');
    }
    assert.equal((await jobOf(other.token, ids.foreign)).state, 'dead');
  });

  it('puts a dead job back to run at once, and it runs', async () => {
    failing.delete('broken');
    assert.deepEqual(await t.ok('JobQueueRpc.retryJob', { jobId: ids.dead }, as(admin.token)), { retried: true });
    const done = await eventually(async () => {
      const job = await jobOf(admin.token, ids.dead);
      return job.state === 'done' ? job : undefined;
    });
    assert.deepEqual([done.attempts, done.lastError], [2, null]);
    const again = await t.call('JobQueueRpc.retryJob', { jobId: ids.dead }, as(admin.token));
    assert.equal(again.body.data.code, 'NOT_FOUND', 'a job retried and done is not dead any more');
  });
});
