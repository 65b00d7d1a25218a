import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createClient, GROUPS, RpcError, type Client, type EventMessage } from '../../clients/typescript/src/index.ts';
import { startTestApp, uniqueName, type TestApp } from '../support/harness.ts';

/** The smallest PNG there is: a 1×1 transparent pixel. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

/** Rejects unless `promise` settles within `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function refusal(promise: Promise<unknown>): Promise<RpcError> {
  const error = await promise.then(
    () => assert.fail('expected the call to be refused'),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof RpcError, `expected an RpcError, got ${String(error)}`);
  return error;
}

describe('the generated TypeScript client (clients/typescript) against a live service', () => {
  let t: TestApp;
  let client: Client;
  let owner: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    // A short login-failure window, so the real service's 429 (with its Retry-After) passes within the test, yet long
    // enough that the failed logins and the refused one fall inside it on a loaded machine.
    t = await startTestApp({
      withNotes: false,
      env: {
        LOGIN_FAILURE_LIMIT: '2',
        LOGIN_FAILURE_WINDOW_SECONDS: '10',
        PUSH_VAPID_SUBJECT: 'mailto:ops@example.com',
        TELEPHONY_PROVIDER: 'local',
        TELEPHONY_EXTENSIONS: '100-102',
      },
    });
    owner = await t.signup();
    const withSession = createClient({ baseUrl: t.url, token: owner.token });
    const { fullKey } = await withSession.ApiKeyRpc.create({ description: 'typed client' });
    client = createClient({ baseUrl: `${t.url}/`, apiKey: fullKey });
  });
  after(() => t?.close());

  it('round-trips an operation of every group with the declared result types', async () => {
    const called = new Set<string>();
    const track = <T>(group: string, promise: Promise<T>): Promise<T> => {
      called.add(group);
      return promise;
    };
    // With a key, none of the owner's sessions is the calling one.
    const sessions = await track('AccountSecurityRpc', client.AccountSecurityRpc.listSessions());
    assert.deepEqual(
      sessions.items.map((session) => [session.current, session.amr]),
      [[false, ['pwd']]],
    );
    assert.ok((await track('AdminUserRpc', client.AdminUserRpc.getAvailableRoles())).includes('admin'));
    assert.ok(Array.isArray(await track('AgentConfigRpc', client.AgentConfigRpc.getAvailableTools())));
    assert.ok(Array.isArray(await track('AIConfigRpc', client.AIConfigRpc.getModelCategories())));
    assert.equal((await track('AITelemetryRpc', client.AITelemetryRpc.getStats())).totalTraces, 0);
    assert.equal((await track('ApiKeyRpc', client.ApiKeyRpc.getData())).data[0]?.description, 'typed client');
    assert.deepEqual(await track('ApiManagementRpc', client.ApiManagementRpc.listApiKeysForWebhook()), []);
    assert.equal((await track('AuthRpc', client.AuthRpc.getSession())).user.email, owner.user.email);
    assert.ok(Array.isArray(await track('BillingPlanRpc', client.BillingPlanRpc.listPublicPlans())));
    assert.ok(Array.isArray(await track('CheckpointRpc', client.CheckpointRpc.listScopes())));
    const code = `SPRING${Date.now() % 100000}`;
    const discount = await track('DiscountRpc', client.DiscountRpc.create({ code, name: 'Spring', kind: 'percent', value: 10 }));
    assert.equal((await client.DiscountRpc.findById({ _id: discount._id })).code, code);
    const document = await track('DocumentRpc', client.DocumentRpc.create({ documentInstanceId: 'handbook', title: 'Welcome', content: 'Hello' }));
    assert.equal((await client.DocumentRpc.getById({ docId: document._id })).content, 'Hello');
    assert.ok(Array.isArray(await track('JobQueueRpc', client.JobQueueRpc.getCounts())));
    assert.equal(typeof (await track('KnowledgeBaseAdminRpc', client.KnowledgeBaseAdminRpc.getQuota())).documents.limit, 'number');
    assert.ok(Array.isArray((await track('MemoryRpc', client.MemoryRpc.listMemories({ scope: 'user' }))).memories));
    assert.equal((await track('NotificationRpc', client.NotificationRpc.getData())).totalCount, 0);
    assert.deepEqual(await track('OAuthServerRpc', client.OAuthServerRpc.listApps()), []);
    assert.equal((await track('PlaybookRpc', client.PlaybookRpc.list())).totalCount, 0);
    const unknownProcess = await refusal(track('ProcessExecutorRpc', client.ProcessExecutorRpc.getProcessStatus({ instanceId: randomUUID() })));
    assert.ok(['NOT_FOUND', 'FEATURE_UNAVAILABLE'].includes(unknownProcess.code), unknownProcess.message);
    assert.equal(typeof (await track('PushNotificationRpc', client.PushNotificationRpc.getVapidPublicKey())).publicKey, 'string');
    const broadcast = await track('PushSenderRpc', client.PushSenderRpc.sendBroadcast({ targetType: 'all', payload: { title: 'Hi', body: 'All of you' } }));
    assert.equal(typeof broadcast.message, 'string');
    assert.equal((await track('SchedulerRpc', client.SchedulerRpc.getData())).totalCount, 0);
    assert.ok(Array.isArray(await track('SecretsManagerRpc', client.SecretsManagerRpc.getScopeOptions())));
    assert.equal((await track('SecretsRpc', client.SecretsRpc.getData())).totalCount, 0);
    const task = await track('TaskRpc', client.TaskRpc.create({ taskInstanceId: 'board', title: 'Write the client' }));
    assert.equal((await client.TaskRpc.findById({ _id: task._id })).title, 'Write the client');
    assert.ok((await track('TelephonyManagerRpc', client.TelephonyManagerRpc.getAvailableExtensions())).length > 0);
    assert.equal((await track('UserProfileRpc', client.UserProfileRpc.getUserProfile())).email, owner.user.email);
    assert.ok(Array.isArray(await track('WorkflowRpc', client.WorkflowRpc.getWorkflowTags())));
    assert.deepEqual([...called].sort(), Object.keys(GROUPS).sort(), 'every group of the client was called');
  });

  it('answers a refusal as a typed RpcError with the code, the issues and the request id', async () => {
    const error = await refusal(client.TaskRpc.create({ taskInstanceId: 'board', title: '' }));
    assert.equal(error.code, 'VALIDATION_ERROR');
    assert.equal(error.status, 400);
    assert.ok(error.issues?.some((issue) => issue.path === 'title'));
    assert.match(error.requestId ?? '', /\S/);
    const stranger = await refusal(createClient({ baseUrl: t.url, apiKey: 'sk_not_a_key' }).AuthRpc.getSession());
    assert.equal(stranger.code, 'UNAUTHENTICATED');
    const unreachable = await refusal(createClient({ baseUrl: 'http://127.0.0.1:9' }).AuthRpc.getClientConfig());
    assert.equal(unreachable.code, 'NETWORK_ERROR');
  });

  it('types params and results at compile time', () => {
    // Never run: `npm run lint` (tsc) fails when the generated types stop refusing these.
    const unused = () => {
      // @ts-expect-error title is a string
      void client.TaskRpc.create({ taskInstanceId: 'board', title: 5 });
      // @ts-expect-error taskInstanceId is required
      void client.TaskRpc.create({ title: 'no board' });
      // @ts-expect-error no such operation
      void client.TaskRpc.explode();
      void client.TaskRpc.findById({ _id: 'x' }).then((found) => {
        // @ts-expect-error the result has no such field
        void found.notAField;
      });
    };
    assert.equal(typeof unused, 'function');
  });

  it('tries a 429 again after the Retry-After the service gave, and gives up past maxRetryDelayMs', async () => {
    const username = uniqueName('retry');
    const member = createClient({ baseUrl: t.url });
    const password = 'a long enough password';
    await member.AuthRpc.signup({ email: `${username}@example.com`, username, password });
    for (let i = 0; i < 2; i++) assert.equal((await refusal(member.AuthRpc.login({ identifier: username, password: 'wrong' }))).code, 'UNAUTHENTICATED');
    const impatient = await refusal(createClient({ baseUrl: t.url, maxRetryDelayMs: 100 }).AuthRpc.login({ identifier: username, password }));
    assert.equal(impatient.code, 'RATE_LIMITED');
    assert.equal(impatient.status, 429);
    assert.ok(impatient.retryAfter !== undefined && impatient.retryAfter >= 1, `Retry-After given: ${impatient.retryAfter}`);
    const started = Date.now();
    const session = await member.AuthRpc.login({ identifier: username, password });
    assert.match(session.token, /\S/);
    assert.ok(Date.now() - started >= 900, 'the client waited for the window to pass before trying again');
  });

  it('hears the events of the catalogue over the WebSocket, typed by name', async () => {
    const stream = client.events();
    try {
      const ready = await within(stream.ready, 10_000, 'the stream to open');
      assert.equal(ready.userId, owner.user._id);
      const heard = new Promise<EventMessage<'task.created'>>((resolve) => stream.on('task.created', (_payload, message) => resolve(message)));
      const created = await client.TaskRpc.create({ taskInstanceId: 'board', title: 'Heard over the socket' });
      const message = await within(heard, 10_000, 'task.created');
      assert.equal(message.event, 'task.created');
      assert.equal(message.payload.task._id, created._id);
    } finally {
      stream.close();
    }
    const refused = createClient({ baseUrl: t.url, apiKey: 'sk_not_a_key' }).events();
    const error = await refusal(within(refused.ready, 10_000, 'the refusal'));
    assert.equal(error.code, 'UNAUTHENTICATED');
  });

  it('uploads a file to an upload key and finalizes it with its operation', async () => {
    const { uploadUrl, uploadKey } = await client.UserProfileRpc.getUploadKeyForProfilePicture();
    const [file] = await client.upload(uploadUrl, { content: PNG, mimeType: 'image/png', fileName: 'me.png' });
    assert.equal(file?.fileName, 'me.png');
    assert.equal(file?.size, PNG.length);
    const profile = await client.UserProfileRpc.updateProfilePicture({ uploadKey });
    assert.ok(profile.profilePicture?.includes(file!.fileId));
    const wrongType = await refusal(
      (async () =>
        client.upload((await client.UserProfileRpc.getUploadKeyForProfilePicture()).uploadUrl, { content: 'not a picture', mimeType: 'image/png' }))(),
    );
    assert.equal(wrongType.code, 'VALIDATION_ERROR');
  });
});
