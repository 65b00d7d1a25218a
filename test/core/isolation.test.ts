import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomBytes, randomUUID } from 'node:crypto';
import type { OperationListing } from '../../core/rpc/registry.ts';
import type { Refusal, Who } from '../support/caller.ts';
import { startTestApp, uniqueName, type TestApp } from '../support/harness.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';
import { type Schema, idParams, PASSWORD, type Session, type Tenant, type Params, PAGE, EXPECTATIONS } from './isolation-cases.ts';
import { SEEDS } from './isolation-seeds.ts';

/**
 * Tenant isolation, generated from the registry (as test/core/security.test.ts
 * and test/core/fuzz.test.ts walk it): every operation whose params name a
 * record by an id is called by tenant B's admin with tenant A's real id, and
 * must answer exactly as it answers for an id that exists nowhere: NOT_FOUND
 * for a record, nothing of A's for a list filtered by it. An operation added
 * later with an id-like param fails the first test until this file says what
 * it must answer, so none can skip the check.
 *
 * Which params are id-like (the rule, read off the params' JSON Schemas, at
 * any depth, in arrays of objects too): a property named `id`, `_id`, `ids`,
 * `_ids`, or ending in `Id` or `Ids` (`instanceId`, `planIds`, `threadId`,
 * `partnerContactId`), named `identifier` or ending in `Identifier`
 * (`workflowIdentifier`), named `hash` or ending in `Hash` (checkpoints),
 * named `uploadKey` (an upload key names the files of its uploader), and
 * any property of format uuid whatever its name (a cursor such as
 * MemoryRpc.listMemories' `offset`).
 *
 * The lookups are made twice: by B's admin with a session, and by an app B's
 * admin authorised with OAuth, with its access token (plugins/oauth-server).
 */

describe('tenant isolation of every operation that takes an id', () => {
  let t: TestApp;
  let hooks: Awaited<ReturnType<typeof startHttpReceiver>>;
  const a = { label: 'alpha', ids: {} } as Tenant;
  const b = { label: 'bravo', ids: {} } as Tenant;
  /** Ids of the same forms as A's that exist nowhere. */
  let nobody: Record<string, string>;
  /** A's records, as A's admin and member read them after seeding. */
  let seen: Record<string, unknown>;

  /** Seeds the webhook last, so that its one failed delivery is the only one. */
  async function webhook(x: Tenant) {
    const key = await t.as(x.admin).ApiKeyRpc.create({ description: 'hooks' });
    x.ids.apiKey = key._id;
    await t
      .as({ apiKey: key.fullKey })
      .ApiManagementRpc.registerWebhook({ webhookUrl: `${hooks.url}/${x.label}`, webhookSecret: 'whsec-isolation-0123456789' });
    await t.as(x.admin).SecretsRpc.create({ zone: 'hooks', key: 'FIRE', value: 'x' });
    const [failed] = await eventually(async () => {
      const { data } = await t.as(x.admin).ApiManagementRpc.getDeliveries({ apiKeyId: key._id, state: 'failed' });
      return data.length > 0 ? data : undefined;
    });
    x.ids.delivery = failed._id;
  }

  before(async () => {
    // Pages for ingestUrl; webhook tests pass (2xx), events fail (500): each tenant gets one failed delivery.
    hooks = await startHttpReceiver((request) =>
      request.path.endsWith('.html')
        ? { status: 200, headers: { 'content-type': 'text/html' }, body: '<html><body><p>Opening hours.</p></body></html>' }
        : { status: request.body.includes('"webhook.test"') ? 200 : 500 },
    );
    t = await startTestApp({
      env: {
        PROCESS_ALLOWED_COMMANDS: '/bin/cat',
        TELEPHONY_PROVIDER: 'local',
        TELEPHONY_EXTENSIONS: '100-109',
        PUSH_VAPID_SUBJECT: 'mailto:push@example.com',
        OUTBOUND_ALLOWED_HOSTS: `127.0.0.1:${hooks.port}`,
        WEBHOOK_RETRY_SCHEDULE: '0,200ms',
        JOBS_POLL_MS: '500',
      },
    });
    for (const x of [a, b]) {
      x.page = `${hooks.url}/${x.label}/page.html`;
      x.admin = await t.signup(uniqueName(`${x.label}admin`), PASSWORD);
      x.ids.admin = x.admin.user._id;
      x.ids.subscription = x.admin.subscriptionId;
      for (const seed of Object.values(SEEDS)) await seed(t, x);
      await webhook(x);
    }
    nobody = madeUp(a);
    seen = await snapshot(t, a);
  });
  after(async () => {
    await t?.close();
    await hooks?.close();
  });

  it('has an expectation for every id-like param of every operation, and none for params that are gone', () => {
    const missing: string[] = [];
    const listed = new Set<string>();
    for (const operation of t.app.registry.listing() as OperationListing[]) {
      for (const field of idParams(operation.params as Schema)) {
        listed.add(`${operation.method} ${field}`);
        if (!EXPECTATIONS[operation.method]?.[field]) missing.push(`add a seed/expectation for ${operation.method} (${field}) to test/core/isolation-cases.ts`);
      }
    }
    assert.deepEqual(missing, []);
    const stale = Object.entries(EXPECTATIONS)
      .flatMap(([method, fields]) => Object.keys(fields).map((field) => `${method} ${field}`))
      .filter((entry) => !listed.has(entry));
    assert.deepEqual(stale, [], 'expectations for params no operation has');
  });

  /**
   * The failures of calling, as `who` of tenant B, each checked operation with
   * A's ids and with ids that exist nowhere; `lookupsOnly` leaves out the
   * calls that write a record of B's (naming A's ids inside it), which a
   * second pass would find as B's own.
   */
  async function crossTenantFailures(who: Who, lookupsOnly: boolean): Promise<{ failures: string[]; checked: number }> {
    const failures: string[] = [];
    let checked = 0;
    // Calls that make records of B's come last: B may name its own records as A named theirs (a board "alpha-board"), and the reads before must not see them.
    const cases = Object.entries(EXPECTATIONS)
      .flatMap(([method, fields]) =>
        Object.entries(fields).flatMap(([field, expectation]) => ('exempt' in expectation ? [] : [{ method, field, expectation }])),
      )
      .filter(({ expectation }) => !lookupsOnly || expectation.answer === 'NOT_FOUND')
      .sort((x, y) => Number(Boolean(x.expectation.creates)) - Number(Boolean(y.expectation.creates)));
    for (const { method, field, expectation } of cases) {
      const label = `${method} (${field})`;
      const unknown = await answerOf(t, method, await expectation.params(nobody, b, t), who);
      const params = await expectation.params(a.ids, b, t);
      const answer = await answerOf(t, method, params, who);
      checked++;
      const code = answer.code ?? 'OK';
      // An app's token is refused what needs a person present before any lookup: alike for A's ids and unknown ones (compared below).
      const refusedApp = code === 'STEP_UP_REQUIRED' && 'accessToken' in (who ?? {});
      if (code !== expectation.answer && !refusedApp)
        failures.push(`${label}: ${code} (expected ${expectation.answer}): ${JSON.stringify(answer).slice(0, 300)}`);
      const comparable = (reply: Answer) => normalised(expectation.creates ? { code: reply.code } : reply, a.ids, nobody);
      if (JSON.stringify(comparable(answer)) !== JSON.stringify(comparable(unknown))) {
        failures.push(
          `${label}: answers A's id otherwise than an unknown one:\n  A's:     ${JSON.stringify(comparable(answer)).slice(0, 400)}\n  unknown: ${JSON.stringify(comparable(unknown)).slice(0, 400)}`,
        );
      }
      const sent = JSON.stringify(params);
      const leaked = Object.entries(a.ids).filter(([, value]) => JSON.stringify(answer).includes(value) && !sent.includes(value));
      if (leaked.length > 0) failures.push(`${label}: the answer holds A's ${leaked.map(([key]) => key).join(', ')}: ${JSON.stringify(answer).slice(0, 300)}`);
    }
    return { failures, checked };
  }

  // Lookups of A's records, before the admin's pass writes records of B's naming A's ids (a memory with A's memory's id).
  it("answers an app tenant B's admin authorised (an OAuth access token) for each of A's ids as for one that exists nowhere", async () => {
    const { failures, checked } = await crossTenantFailures({ accessToken: b.appToken }, true);
    assert.ok(checked >= 80, `only ${checked} checks`);
    assert.deepEqual(failures, []);
  });

  it("answers tenant B's admin for each of A's ids as for an id that exists nowhere: NOT_FOUND, or nothing of A's", async () => {
    const { failures, checked } = await crossTenantFailures(b.admin, false);
    assert.ok(checked >= 100, `only ${checked} checks`);
    assert.deepEqual(failures, []);
  });

  it("leaves tenant A's records as they were", async () => {
    assert.deepEqual(await snapshot(t, a), seen);
  });
});

interface Answer {
  code?: string;
  message?: string;
  data?: unknown;
}

/** The data of the call, or the code and message it was refused with (the code stands for its HTTP status). */
async function answerOf(t: TestApp, method: string, params: Params, who: Who): Promise<Answer> {
  return t
    .as(who)
    .call(method, params)
    .then(
      (data) => ({ data }),
      (error: Refusal) => ({ code: error.code, message: error.message }),
    );
}

/** The answer with A's ids and the made-up ones written as <name>, and times as <time>: what is left must be the same. */
function normalised(value: unknown, ...idSets: Record<string, string>[]): unknown {
  let text = JSON.stringify(value);
  const pairs = idSets.flatMap((ids) => Object.entries(ids)).sort(([, x], [, y]) => y.length - x.length);
  for (const [key, id] of pairs) text = text.replaceAll(id, `<${key}>`);
  return JSON.parse(text.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '<time>'));
}

/** Values of the same forms as the tenant's ids that exist nowhere: uuids, hashes, keys, and free text with "nobody" for the tenant's label. */
function madeUp(x: Tenant): Record<string, string> {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const token = (length: number) => randomBytes(length).toString('base64url').slice(0, length);
  return Object.fromEntries(
    Object.entries(x.ids).map(([key, value]) => {
      if (uuid.test(value)) return [key, randomUUID()];
      if (/^[0-9a-f]{40}$/.test(value)) return [key, randomBytes(20).toString('hex')];
      if (value.toLowerCase().includes(x.label)) return [key, value.replaceAll(x.label, 'nobody').replaceAll(x.label.toUpperCase(), 'NOBODY')];
      return [key, token(value.length)];
    }),
  );
}

/** What A's admin and member read of A's records. */
async function snapshot(t: TestApp, x: Tenant): Promise<Record<string, unknown>> {
  const reads: [string, Params, Session?][] = [
    ['AdminUserRpc.getData', { pageSize: 100 }],
    ['AdminUserRpc.listInviteCodes', {}],
    ['AgentConfigRpc.getData', {}],
    ['AITelemetryRpc.listThreads', {}],
    ['ApiKeyRpc.getData', {}],
    ['ApiManagementRpc.getDeliveries', {}],
    ['BillingPlanRpc.getData', PAGE],
    ['DiscountRpc.getData', PAGE],
    ['CheckpointRpc.listCheckpoints', { scope: 'notes' }],
    ['CheckpointRpc.listFiles', { scope: 'notes' }],
    ['DocumentRpc.getAllDocuments', { documentInstanceId: x.ids.docInstance }],
    ['KnowledgeBaseAdminRpc.listDocuments', {}],
    ['KnowledgeBaseAdminRpc.getChunks', { docId: x.ids.kbDocument }],
    ['KnowledgeBaseAdminRpc.listJobs', {}],
    ['MemoryRpc.listMemories', { scope: 'user' }],
    ['MemoryRpc.listMemories', { scope: 'user', targetUserId: x.ids.member }],
    ['NoteRpc.list', {}],
    ['NotificationRpc.getData', {}, x.member],
    ['PlaybookRpc.findById', { _id: x.ids.playbook }],
    ['ProcessExecutorRpc.getProcessStatus', { instanceId: x.ids.process }],
    ['ProcessExecutorRpc.getProcessLogs', { instanceId: x.ids.process }],
    ['SchedulerRpc.getData', {}],
    ['SchedulerRpc.listRuns', {}],
    ['SecretsRpc.getData', {}],
    ['SecretsRpc.getAuditLog', {}],
    ['SecretsManagerRpc.getData', {}],
    ['TaskRpc.getData', { taskInstanceId: x.ids.taskInstance }],
    ['TelephonyManagerRpc.getAvailableExtensions', {}],
    ['TelephonyManagerRpc.getExtensionsForUser', { appUserId: x.ids.member }],
    ['TelephonyManagerRpc.getExtensionsForAgent', { agentContactId: x.ids.contact }],
    ['WorkflowRpc.getData', {}],
    ['WorkflowRpc.getInstance', { instanceId: x.ids.run }],
    ['UserProfileRpc.getUserProfile', {}, x.member],
  ];
  const read: Record<string, unknown> = {};
  for (const [method, params, session] of reads) read[`${method} ${JSON.stringify(params)}`] = await t.as(session ?? x.admin).call(method, params);
  return read;
}
