import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startTestApp, uniqueName, type CallOptions, type TestApp } from '../support/harness.ts';
import { PEER_CHAT_MODEL, startModelPeer } from '../support/model-peer.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';

/**
 * Text that looks like SQL is only text: every group stores a value full of
 * what splits, ends or comments out a statement, and reads it back exactly.
 * MikroORM inlines values into its SQL, so a statement splitter that takes a
 * quoted `;` for the end of a statement (the embedded database's driver once
 * did, core/db/pglite-driver.ts) loses or alters such a value.
 */
const HOSTILE = `semi;colon 'quote' "double" $$;$$ -- x \\ back; select 1; delete from core_user; --`;
/** The same where spaces are refused (a secret's zone) or backslashes (a file path). */
const HOSTILE_WORD = `z;'q'"d"$$;$$--x\\;select;1`;
const HOSTILE_PATH = `d;'q'"$$;$$--x/${HOSTILE.replaceAll('\\', '')}.txt`;

/** A browser's push subscription (a real P-256 key, so a push can be encrypted for it). */
const P256DH = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM';

describe('text that looks like SQL, stored and read back by every group', () => {
  let t: TestApp;
  let peer: Awaited<ReturnType<typeof startModelPeer>>;
  let receiver: Awaited<ReturnType<typeof startHttpReceiver>>;
  let as: CallOptions;
  let ownerName: string;
  const ok = <T = any>(method: string, params: unknown = {}, options: CallOptions = as) => t.ok<T>(method, params, options);
  /** The error code of a refused call; never INTERNAL. */
  const refused = async (method: string, params: unknown, options: CallOptions = as) => {
    const response = await t.call(method, params, options);
    assert.equal(response.body.success, false, `${method} was refused: ${JSON.stringify(response.body).slice(0, 300)}`);
    assert.ok(response.status < 500, `${method}: ${JSON.stringify(response.body)}`);
    return response.body.data.code as string;
  };

  before(async () => {
    peer = await startModelPeer();
    receiver = await startHttpReceiver();
    t = await startTestApp({
      env: {
        AI_CATALOGUE_FILE: peer.catalogueFile,
        OUTBOUND_ALLOW_PRIVATE: 'true',
        JOBS_POLL_MS: '500',
        PROCESS_ALLOWED_COMMANDS: '/bin/echo',
        TELEPHONY_PROVIDER: 'local',
        TELEPHONY_EXTENSIONS: '100-101',
        PUSH_VAPID_SUBJECT: 'mailto:push@example.com',
      },
    });
    // The one signup, with it as the owner's names.
    ownerName = uniqueName('sqltext');
    const owner = await t.ok('AuthRpc.signup', {
      email: `${ownerName}@example.com`,
      username: ownerName,
      password: 'correct horse battery',
      firstName: HOSTILE,
      lastName: HOSTILE,
    });
    assert.deepEqual([owner.user.firstName, owner.user.lastName], [HOSTILE, HOSTILE]);
    as = { token: owner.token };
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
    await peer?.close();
  });

  it('AuthRpc: the names given at signup are the session’s; a login with it is refused', async () => {
    const { user } = await ok('AuthRpc.getSession');
    assert.deepEqual([user.firstName, user.lastName], [HOSTILE, HOSTILE]);
    assert.equal(await refused('AuthRpc.login', { identifier: HOSTILE, password: HOSTILE }, {}), 'UNAUTHENTICATED');
  });

  it('ApiKeyRpc: description and initial context; an update and a delete take effect', async () => {
    const initialContext = JSON.stringify({ [HOSTILE]: HOSTILE, nested: { note: HOSTILE } });
    const key = await ok('ApiKeyRpc.create', { description: HOSTILE, initialContext });
    const listed = async () => (await ok('ApiKeyRpc.getData')).data.find((row: { _id: string }) => row._id === key._id);
    assert.deepEqual([(await listed()).description, (await listed()).initialContext], [HOSTILE, JSON.parse(initialContext)]);
    await ok('ApiKeyRpc.update', { _id: key._id, description: `${HOSTILE} 2`, initialContext: JSON.stringify({ note: `${HOSTILE} 2` }) });
    assert.deepEqual([(await listed()).description, (await listed()).initialContext], [`${HOSTILE} 2`, { note: `${HOSTILE} 2` }]);
    await ok('ApiKeyRpc.delete', { _id: key._id });
    assert.equal(await listed(), undefined);
    assert.equal(await refused('NoteRpc.list', {}, { apiKey: key.fullKey }), 'UNAUTHENTICATED');
  });

  it('AdminUserRpc: a user created, found, filtered, updated and deleted', async () => {
    const name = uniqueName('sqlmember');
    const created = await ok('AdminUserRpc.create', {
      email: `${name}@example.com`,
      username: name,
      password: 'a long enough password',
      role: 'user',
      firstName: HOSTILE,
      lastName: HOSTILE,
      partnerContactId: HOSTILE,
    });
    const found = await ok('AdminUserRpc.findById', { id: created._id });
    assert.deepEqual([found.firstName, found.lastName, found.partnerContactId], [HOSTILE, HOSTILE, HOSTILE]);
    // Provider accounts are compared with the user's links, never stored from here (plugins/auth/user.service.ts).
    assert.equal(await refused('AdminUserRpc.update', { _id: created._id, oauthProfiles: [{ provider: HOSTILE, id: HOSTILE }] }), 'VALIDATION_ERROR');
    // The owner signed up with it as a last name too.
    const filtered = await ok('AdminUserRpc.getData', { filter: { lastName: HOSTILE } });
    assert.deepEqual(filtered.docs.map((user: { username: string }) => user.username).sort(), [name, ownerName].sort());
    await ok('AdminUserRpc.update', { _id: created._id, lastName: `${HOSTILE} 2` });
    assert.equal((await ok('AdminUserRpc.findById', { id: created._id })).lastName, `${HOSTILE} 2`);
    await ok('AdminUserRpc.delete', { _id: created._id });
    assert.equal(await refused('AdminUserRpc.findById', { id: created._id }), 'NOT_FOUND');
  });

  it('UserProfileRpc: the profile fields', async () => {
    const changes = { firstName: HOSTILE, lastName: `${HOSTILE} L`, jobTitle: `${HOSTILE} J`, department: `${HOSTILE} D` };
    await ok('UserProfileRpc.updateUserProfile', changes);
    const profile = await ok('UserProfileRpc.getUserProfile');
    assert.deepEqual({ firstName: profile.firstName, lastName: profile.lastName, jobTitle: profile.jobTitle, department: profile.department }, changes);
  });

  it('SecretsRpc: zone, key, value and description; the value read back, updated, and the secret really deleted', async () => {
    const zone = HOSTILE_WORD;
    const _id = `${zone}:${HOSTILE}`;
    await ok('SecretsRpc.create', { zone, key: HOSTILE, value: HOSTILE, description: HOSTILE });
    await ok('SecretsRpc.create', { zone: 'z', key: 'k;1', value: 'v' });
    assert.equal((await ok('SecretsRpc.getSecretValue', { zone, key: HOSTILE })).value, HOSTILE);
    assert.equal((await ok('SecretsRpc.getSecretValue', { zone: 'z', key: 'k;1' })).value, 'v');
    const listed = await ok('SecretsRpc.getData', { filter: { zone, key: HOSTILE } });
    assert.deepEqual(
      listed.data.map((row: { _id: string; zone: string; key: string; description: string }) => [row._id, row.zone, row.key, row.description]),
      [[_id, zone, HOSTILE, HOSTILE]],
    );
    await ok('SecretsRpc.update', { _id, value: `${HOSTILE} 2`, description: `${HOSTILE} 2` });
    assert.equal((await ok('SecretsRpc.getSecretValue', { zone, key: HOSTILE })).value, `${HOSTILE} 2`);
    assert.equal((await ok('SecretsRpc.getData', { filter: { description: `${HOSTILE} 2` } })).totalCount, 1);
    for (const id of [_id, 'z:k;1']) assert.equal((await ok('SecretsRpc.delete', { _id: id })).success, true);
    assert.equal(await refused('SecretsRpc.getSecretValue', { zone, key: HOSTILE }), 'NOT_FOUND');
    assert.equal(await refused('SecretsRpc.getSecretValue', { zone: 'z', key: 'k;1' }), 'NOT_FOUND');
    assert.equal((await ok('SecretsRpc.getData', { filter: { zone } })).totalCount, 0);
    const audit = (await ok('SecretsRpc.getAuditLog', { pageSize: 100 })).data.filter((entry: { targetId: string }) => entry.targetId === _id);
    assert.deepEqual(audit.map((entry: { action: string }) => entry.action).sort(), ['create', 'delete', 'read', 'read', 'update']);
  });

  it('SecretsManagerRpc: a scoped secret with its project, agent, key, value, label and description', async () => {
    const created = await ok('SecretsManagerRpc.create', {
      scope: 'project',
      projectId: HOSTILE,
      key: HOSTILE,
      value: HOSTILE,
      label: HOSTILE,
      description: HOSTILE,
    });
    const agent = await ok('SecretsManagerRpc.create', { scope: 'agent', agentName: HOSTILE, key: HOSTILE, value: `${HOSTILE} A` });
    const listed = await ok('SecretsManagerRpc.getData', { scope: 'project', projectId: HOSTILE });
    assert.deepEqual(
      listed.data.map((row: Record<string, unknown>) => [row._id, row.projectId, row.key, row.label, row.description]),
      [[created._id, HOSTILE, HOSTILE, HOSTILE, HOSTILE]],
    );
    assert.deepEqual(
      (await ok('SecretsManagerRpc.getData', { scope: 'agent', agentName: HOSTILE })).data.map((row: { _id: string }) => row._id),
      [agent._id],
    );
    assert.equal((await ok('SecretsManagerRpc.getSecretValue', { _id: created._id })).value, HOSTILE);
    assert.equal((await ok('SecretsManagerRpc.getSecretValue', { _id: agent._id })).value, `${HOSTILE} A`);
    await ok('SecretsManagerRpc.update', { _id: created._id, value: `${HOSTILE} 2`, description: `${HOSTILE} 2` });
    assert.equal((await ok('SecretsManagerRpc.getSecretValue', { _id: created._id })).value, `${HOSTILE} 2`);
    for (const { _id } of [created, agent]) await ok('SecretsManagerRpc.delete', { _id });
    assert.equal((await ok('SecretsManagerRpc.getData', { scope: 'project', projectId: HOSTILE })).totalCount, 0);
    assert.equal(await refused('SecretsManagerRpc.getSecretValue', { _id: created._id }), 'NOT_FOUND');
  });

  it('ApiManagementRpc: a webhook URL and secret, used as stored; the key description as the label', async () => {
    const key = await ok('ApiKeyRpc.create', { description: HOSTILE });
    const webhookUrl = `${receiver.url}/hook;x$$--y;select%201?q=${encodeURIComponent(HOSTILE)}`;
    assert.deepEqual(await ok('ApiManagementRpc.registerWebhook', { webhookUrl, webhookSecret: HOSTILE }, { apiKey: key.fullKey }), {
      success: true,
      status: 'verified',
    });
    const test = receiver.requests.at(-1)!;
    const url = new URL(webhookUrl);
    assert.equal(test.path, `${url.pathname}${url.search}`);
    assert.equal(new URLSearchParams(url.search).get('q'), HOSTILE);
    assert.equal(test.headers['x-webhook-secret'], HOSTILE);
    assert.deepEqual(await ok('ApiManagementRpc.listApiKeysForWebhook'), [{ value: key._id, label: HOSTILE }]);
    // An event of the subscription is delivered to the stored URL, with the stored secret.
    const before = receiver.requests.length;
    await ok('NoteRpc.add', { text: 'for the webhook' });
    const delivered = await eventually(() => receiver.requests.slice(before).find((request) => request.body.includes('note.added')));
    assert.equal(delivered.path, test.path);
    assert.equal(delivered.headers['x-webhook-secret'], HOSTILE);
    await ok('ApiKeyRpc.delete', { _id: key._id });
    assert.deepEqual(await ok('ApiManagementRpc.listApiKeysForWebhook'), []);
  });

  it('MemoryRpc: content and metadata saved, recalled by a metadata filter, updated and deleted', async () => {
    const metadata = { topic: HOSTILE, nested: { [HOSTILE]: HOSTILE } };
    const { memoryId } = await ok('MemoryRpc.saveMemory', { scope: 'user', memory: { content: HOSTILE, metadata } });
    const listed = (await ok('MemoryRpc.listMemories', { scope: 'user', limit: 200 })).memories.filter((memory: { id: string }) => memory.id === memoryId);
    assert.deepEqual(
      listed.map((memory: { content: string; metadata: unknown }) => [memory.content, memory.metadata]),
      [[HOSTILE, metadata]],
    );
    const recalled = await ok('MemoryRpc.recallMemories', { scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } });
    assert.deepEqual(
      recalled.memories.map((memory: { id: string; content: string }) => [memory.id, memory.content]),
      [[memoryId, HOSTILE]],
    );
    await ok('MemoryRpc.saveMemory', { scope: 'user', memory: { id: memoryId, content: `${HOSTILE} 2`, metadata } });
    const updated = await ok('MemoryRpc.recallMemories', { scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } });
    assert.deepEqual(
      updated.memories.map((memory: { id: string; content: string }) => [memory.id, memory.content]),
      [[memoryId, `${HOSTILE} 2`]],
    );
    await ok('MemoryRpc.deleteMemory', { scope: 'user', memoryId });
    assert.deepEqual((await ok('MemoryRpc.recallMemories', { scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } })).memories, []);
  });

  it('AIConfigRpc (it stores nothing): a provider, model type or task named with it is one it does not know', async () => {
    assert.equal(await refused('AIConfigRpc.getProviderSettings', { providerName: HOSTILE }), 'NOT_FOUND');
    assert.equal(await refused('AIConfigRpc.getModels', { provider: HOSTILE, type: HOSTILE, capabilities: [HOSTILE] }), 'VALIDATION_ERROR');
    assert.equal(await refused('AIConfigRpc.getTaskRecommendations', { taskName: HOSTILE }), 'NOT_FOUND');
  });

  it('WorkflowRpc and AITelemetryRpc: a workflow with it everywhere runs, asks the model, and is traced under its name', async () => {
    const graph = {
      nodes: [
        { id: 'start', type: 'start', name: HOSTILE },
        { id: 'ask', type: 'ai', name: HOSTILE, config: { prompt: '{{ $args.topic }}', saveAs: 'answer' } },
        { id: 'done', type: 'end', config: { output: 'answer' } },
      ],
      edges: [
        { source: 'start', target: 'ask' },
        { source: 'ask', target: 'done' },
      ],
    };
    const workflow = await ok('WorkflowRpc.create', {
      name: HOSTILE,
      description: HOSTILE,
      tags: [HOSTILE],
      variables: { [HOSTILE]: HOSTILE },
      contextId: HOSTILE,
      ...graph,
    });
    const found = await ok('WorkflowRpc.findById', { id: workflow._id });
    assert.deepEqual(
      [found.name, found.description, found.tags, found.variables, found.contextId, found.nodes[1].name],
      [HOSTILE, HOSTILE, [HOSTILE], { [HOSTILE]: HOSTILE }, HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await ok('WorkflowRpc.getData', { filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [workflow._id],
    );
    assert.deepEqual(await ok('WorkflowRpc.getWorkflowTags'), [{ value: HOSTILE, label: HOSTILE }]);

    const { result } = await ok('WorkflowRpc.executeWorkflow', { workflowIdentifier: HOSTILE, workflowArgs: { topic: HOSTILE } });
    assert.equal(result.output, `You said: ${HOSTILE}`);
    const instance = await ok('WorkflowRpc.getInstance', { instanceId: result.instanceId });
    assert.deepEqual([instance.workflowName, instance.output], [HOSTILE, `You said: ${HOSTILE}`]);

    // The model call is traced with the workflow's name as the caller's, found by it.
    const threads = await ok('AITelemetryRpc.listThreads', { filter: { callerName: HOSTILE } });
    assert.deepEqual(
      threads.data.map((thread: { threadId: string; callerName: string }) => [thread.threadId, thread.callerName]),
      [[result.instanceId, HOSTILE]],
    );
    const [trace] = await ok('AITelemetryRpc.getThread', { threadId: result.instanceId });
    assert.equal(trace.callerName, HOSTILE);
    assert.equal((await ok('AITelemetryRpc.getStats', { filter: { callerName: HOSTILE } })).totalTraces, 1);
    assert.deepEqual(await ok('AITelemetryRpc.getThread', { threadId: HOSTILE }), []);

    await ok('WorkflowRpc.update', { _id: workflow._id, description: `${HOSTILE} 2` });
    assert.equal((await ok('WorkflowRpc.findById', { id: workflow._id })).description, `${HOSTILE} 2`);
    await ok('WorkflowRpc.delete', { _id: workflow._id });
    assert.equal(await refused('WorkflowRpc.findById', { id: workflow._id }), 'NOT_FOUND');
  });

  it('AgentConfigRpc: an agent with it in every text field', async () => {
    const text = {
      name: HOSTILE,
      description: HOSTILE,
      promptText: HOSTILE,
      role: HOSTILE,
      fileContext: HOSTILE,
      personality: { profession: HOSTILE, style: HOSTILE, notes: HOSTILE },
    };
    const agent = await ok('AgentConfigRpc.create', { ...text, model: PEER_CHAT_MODEL, messagingContactId: HOSTILE, projectId: HOSTILE });
    const found = await ok('AgentConfigRpc.findById', { _id: agent._id });
    assert.deepEqual(
      [
        found.name,
        found.description,
        found.promptText,
        found.role,
        found.fileContext,
        found.personality.profession,
        found.personality.style,
        found.personality.notes,
        found.messagingContactId,
        found.projectId,
      ],
      [HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await ok('AgentConfigRpc.getData', { filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [agent._id],
    );
    await ok('AgentConfigRpc.update', { _id: agent._id, promptText: `${HOSTILE} 2` });
    assert.equal((await ok('AgentConfigRpc.findById', { _id: agent._id })).promptText, `${HOSTILE} 2`);
    await ok('AgentConfigRpc.delete', { _id: agent._id });
    assert.equal(await refused('AgentConfigRpc.findById', { _id: agent._id }), 'NOT_FOUND');
  });

  it('KnowledgeBaseAdminRpc: a text ingested with it as name, description, collection, tag and content; found, updated and deleted', async () => {
    const content = `${HOSTILE}\n\nThe harbour ferry leaves at seven.`;
    const { document } = await ok('KnowledgeBaseAdminRpc.ingestText', {
      name: HOSTILE,
      content,
      description: HOSTILE,
      collection: HOSTILE,
      tags: [HOSTILE],
      contactId: HOSTILE,
      projectId: HOSTILE,
    });
    const ready = await eventually(async () => {
      const current = await ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id });
      return current.status === 'pending' || current.status === 'processing' ? undefined : current;
    });
    assert.equal(ready.status, 'ready', ready.error);
    assert.deepEqual(
      [ready.name, ready.description, ready.collection, ready.tags, ready.content, ready.contactId, ready.projectId],
      [HOSTILE, HOSTILE, HOSTILE, [HOSTILE], content, HOSTILE, HOSTILE],
    );
    const listed = await ok('KnowledgeBaseAdminRpc.listDocuments', {
      collection: HOSTILE,
      tags: [HOSTILE],
      search: HOSTILE,
      contactId: HOSTILE,
      projectId: HOSTILE,
    });
    assert.deepEqual(
      listed.data.map((row: { _id: string }) => row._id),
      [document._id],
    );
    const hits = await ok('KnowledgeBaseAdminRpc.search', { queryText: HOSTILE, collection: HOSTILE });
    assert.ok(hits.length > 0);
    assert.deepEqual(
      hits.map((hit: { documentId: string; name: string; collection: string }) => [hit.documentId, hit.name, hit.collection]),
      hits.map(() => [document._id, HOSTILE, HOSTILE]),
    );
    assert.ok(hits[0].text.includes(HOSTILE));
    const [chunk] = await ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id });
    await ok('KnowledgeBaseAdminRpc.updateChunk', { docId: document._id, chunkId: chunk.chunkId, text: `${HOSTILE} chunk` });
    assert.equal((await ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }))[0].text, `${HOSTILE} chunk`);
    await ok('KnowledgeBaseAdminRpc.updateDocument', { docId: document._id, updates: { name: `${HOSTILE} 2`, description: `${HOSTILE} 2` } });
    const updated = await ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id });
    assert.deepEqual([updated.name, updated.description], [`${HOSTILE} 2`, `${HOSTILE} 2`]);
    await ok('KnowledgeBaseAdminRpc.deleteDocument', { docId: document._id });
    assert.equal((await ok('KnowledgeBaseAdminRpc.listDocuments', { collection: HOSTILE })).totalCount, 0);
  });

  it('DocumentRpc: two pages titled with a ";", no false conflict; read by title, searched, updated and deleted', async () => {
    const documentInstanceId = HOSTILE;
    const first = await ok('DocumentRpc.create', { title: 'T;1', documentInstanceId, content: HOSTILE, tags: [HOSTILE] });
    const second = await ok('DocumentRpc.create', { title: HOSTILE, documentInstanceId, content: `${HOSTILE} 2` });
    assert.deepEqual([first.title, first.content, first.tags, first.documentInstanceId], ['T;1', HOSTILE, [HOSTILE], HOSTILE]);
    assert.equal((await ok('DocumentRpc.getByTitle', { documentInstanceId, title: HOSTILE }))._id, second._id);
    assert.equal((await ok('DocumentRpc.getByTitle', { documentInstanceId, title: 'T;1' })).content, HOSTILE);
    const all = await ok('DocumentRpc.getAllDocuments', { documentInstanceId });
    assert.deepEqual(all.data.map((page: { title: string }) => page.title).sort(), [HOSTILE, 'T;1'].sort());
    const hits = await ok('DocumentRpc.search', { documentInstanceId, queryText: HOSTILE });
    assert.ok(hits.some((hit: { payload: { metadata: { recordId: string } } }) => hit.payload.metadata.recordId === first._id));
    assert.equal(await refused('DocumentRpc.create', { title: HOSTILE, documentInstanceId }), 'CONFLICT');
    await ok('DocumentRpc.update', { _id: first._id, title: `${HOSTILE} 3`, content: `${HOSTILE} 3` });
    const versions = await ok('DocumentRpc.getVersions', { docId: first._id });
    assert.deepEqual(
      versions.map((version: { title: string; content: string }) => [version.title, version.content]).sort(),
      [
        ['T;1', HOSTILE],
        [`${HOSTILE} 3`, `${HOSTILE} 3`],
      ].sort(),
    );
    for (const { _id } of [first, second]) await ok('DocumentRpc.delete', { _id });
    assert.equal((await ok('DocumentRpc.getAllDocuments', { documentInstanceId })).totalCount, 0);
  });

  it('SchedulerRpc: a task with it as name, description, tag, context and event name', async () => {
    const taskConfig = {
      name: HOSTILE,
      description: HOSTILE,
      schedule: `once:${new Date(Date.now() + 86_400_000).toISOString()}`,
      actionType: 'event',
      actionConfig: { eventName: HOSTILE, eventData: { [HOSTILE]: HOSTILE } },
      context: { serviceCode: HOSTILE, projectId: HOSTILE },
      tags: [HOSTILE],
    };
    const taskId = await ok('SchedulerRpc.create', { taskConfig });
    const found = await ok('SchedulerRpc.findById', { taskId });
    assert.deepEqual(
      [found.name, found.description, found.actionConfig, found.tags, found.context.serviceCode, found.context.projectId],
      [HOSTILE, HOSTILE, taskConfig.actionConfig, [HOSTILE], HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await ok('SchedulerRpc.getData', { filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [taskId],
    );
    await ok('SchedulerRpc.update', { taskId, updatedConfig: { description: `${HOSTILE} 2` } });
    assert.equal((await ok('SchedulerRpc.findById', { taskId })).description, `${HOSTILE} 2`);
    await ok('SchedulerRpc.delete', { taskId });
    assert.equal(await refused('SchedulerRpc.findById', { taskId }), 'NOT_FOUND');
  });

  it('TaskRpc: a task in a board named with it, its title, description, tags, assignees and comments', async () => {
    const taskInstanceId = HOSTILE;
    const task = await ok('TaskRpc.create', {
      taskInstanceId,
      title: HOSTILE,
      description: HOSTILE,
      tags: [HOSTILE],
      assignees: [HOSTILE],
      comments: [{ content: HOSTILE, authorContactId: HOSTILE }],
    });
    const comment = await ok('TaskRpc.addComment', { taskId: task._id, content: `${HOSTILE} 2` });
    const found = await ok('TaskRpc.findById', { _id: task._id });
    assert.deepEqual([found.taskInstanceId, found.title, found.description, found.tags, found.assignees], [HOSTILE, HOSTILE, HOSTILE, [HOSTILE], [HOSTILE]]);
    assert.deepEqual(
      found.comments.map((row: { content: string }) => row.content),
      [HOSTILE, `${HOSTILE} 2`],
    );
    assert.equal(found.comments[0].authorContactId, HOSTILE);
    assert.equal(found.comments[1].commentId, comment.commentId);
    const board = await ok('TaskRpc.getData', { taskInstanceId });
    assert.deepEqual(
      board.data.map((row: { _id: string }) => row._id),
      [task._id],
    );
    assert.equal((await ok('TaskRpc.getData', { taskInstanceId: 'semi;colon' })).totalCount, 0);
    await ok('TaskRpc.createTaskTree', { taskInstanceId, tasks: [{ title: `${HOSTILE} tree`, subtasks: [{ title: `${HOSTILE} leaf` }] }] });
    const titles = (await ok('TaskRpc.getData', { taskInstanceId })).data.map((row: { title: string }) => row.title);
    assert.deepEqual(titles.sort(), [HOSTILE, `${HOSTILE} leaf`, `${HOSTILE} tree`].sort());
    await ok('TaskRpc.update', { _id: task._id, title: `${HOSTILE} 3` });
    assert.equal((await ok('TaskRpc.findById', { _id: task._id })).title, `${HOSTILE} 3`);
    await ok('TaskRpc.delete', { _id: task._id });
    assert.equal(await refused('TaskRpc.findById', { _id: task._id }), 'NOT_FOUND');
  });

  it('PlaybookRpc: name, description, content, category and tags; listed by tag, searched, updated and deleted', async () => {
    const playbook = await ok('PlaybookRpc.create', { name: HOSTILE, description: HOSTILE, content: HOSTILE, category: HOSTILE, tags: [HOSTILE] });
    const found = await ok('PlaybookRpc.findById', { _id: playbook._id });
    assert.deepEqual([found.name, found.description, found.content, found.category, found.tags], [HOSTILE, HOSTILE, HOSTILE, HOSTILE, [HOSTILE]]);
    assert.deepEqual(
      (await ok('PlaybookRpc.list', { tags: [HOSTILE] })).data.map((row: { _id: string }) => row._id),
      [playbook._id],
    );
    assert.deepEqual(
      (await ok('PlaybookRpc.search', { query: HOSTILE })).data.map((row: { _id: string }) => row._id),
      [playbook._id],
    );
    await ok('PlaybookRpc.update', { _id: playbook._id, data: { content: `${HOSTILE} 2` } });
    assert.equal((await ok('PlaybookRpc.findById', { _id: playbook._id })).content, `${HOSTILE} 2`);
    await ok('PlaybookRpc.delete', { _id: playbook._id });
    assert.equal(await refused('PlaybookRpc.findById', { _id: playbook._id }), 'NOT_FOUND');
    assert.equal(await refused('PlaybookRpc.findById', { _id: HOSTILE }), 'NOT_FOUND');
  });

  it('ProcessExecutorRpc: an argument reaches the process and its log line is read back', async () => {
    const { instanceId } = await ok('ProcessExecutorRpc.startProcess', { command: '/bin/echo', args: [HOSTILE] });
    const ended = await eventually(async () => {
      const status = await ok('ProcessExecutorRpc.getProcessStatus', { instanceId });
      return status.status === 'running' ? undefined : status;
    });
    assert.deepEqual([ended.status, ended.args], ['exited', [HOSTILE]]);
    assert.deepEqual((await ok('ProcessExecutorRpc.getProcessLogs', { instanceId })).logs, [HOSTILE]);
    assert.equal(await refused('ProcessExecutorRpc.getProcessLogs', { instanceId: randomUUID() }), 'NOT_FOUND');
    assert.equal(await refused('ProcessExecutorRpc.getProcessStatus', { instanceId: HOSTILE }), 'VALIDATION_ERROR');
  });

  it('PushNotificationRpc, PushSenderRpc and NotificationRpc: a device on channels named with it gets a broadcast with it as title and body', async () => {
    const subscriptionObject = { endpoint: `${receiver.url}/push;x$$--y`, keys: { p256dh: P256DH, auth: 'tBHItJI5svbpez7KI4CCXg' } };
    await ok('PushNotificationRpc.subscribe', { subscriptionObject, channels: [HOSTILE, HOSTILE_WORD] });
    const sent = await ok('PushSenderRpc.sendBroadcast', {
      targetType: 'channels',
      targetIds: [HOSTILE],
      payload: { title: HOSTILE, body: `${HOSTILE} body` },
    });
    assert.match(sent.message, /1 user reached on 1 device/);
    // The push goes to the endpoint as it was stored.
    await eventually(() => receiver.requests.find((request) => request.path === '/push;x$$--y'));
    const notification = await eventually(async () => (await ok('NotificationRpc.getData', { filter: { title: HOSTILE } })).data[0]);
    assert.deepEqual([notification.title, notification.message], [HOSTILE, `${HOSTILE} body`]);
    await ok('NotificationRpc.markAsRead', { _id: notification._id });
    const read = await ok('NotificationRpc.findById', { _id: notification._id });
    assert.deepEqual([read.message, read.read], [`${HOSTILE} body`, true]);
    await ok('NotificationRpc.delete', { _id: notification._id });
    assert.equal(await refused('NotificationRpc.findById', { _id: notification._id }), 'NOT_FOUND');

    await ok('PushNotificationRpc.unsubscribe', { subscriptionObject });
    assert.match(
      (await ok('PushSenderRpc.sendBroadcast', { targetType: 'channels', targetIds: [HOSTILE], payload: { title: HOSTILE, body: HOSTILE } })).message,
      /0 users reached on 0 devices/,
    );
  });

  it('CheckpointRpc: a file path and content, a checkpoint message and a tag message', async () => {
    const scope = 'sql-text';
    await ok('CheckpointRpc.writeFile', { scope, path: HOSTILE_PATH, content: HOSTILE });
    assert.equal((await ok('CheckpointRpc.readFile', { scope, path: HOSTILE_PATH })).content, HOSTILE);
    assert.deepEqual(await ok('CheckpointRpc.listFiles', { scope }), [{ path: HOSTILE_PATH, size: Buffer.byteLength(HOSTILE) }]);
    const { commitHash } = await ok('CheckpointRpc.createCheckpoint', { scope, message: HOSTILE });
    await ok('CheckpointRpc.tagRelease', { scope, commitHash, tagName: 'v1', message: HOSTILE });
    const [checkpoint] = await ok('CheckpointRpc.listCheckpoints', { scope });
    assert.deepEqual([checkpoint.hash, checkpoint.message, checkpoint.tags], [commitHash, HOSTILE, ['v1']]);
    await ok('CheckpointRpc.deleteFile', { scope, path: HOSTILE_PATH });
    assert.equal(await refused('CheckpointRpc.readFile', { scope, path: HOSTILE_PATH }), 'NOT_FOUND');
    assert.equal((await ok('CheckpointRpc.readFile', { scope, path: HOSTILE_PATH, hash: commitHash })).content, HOSTILE);
  });

  it('BillingPlanRpc and DiscountRpc: a plan and a discount named and described with it', async () => {
    const plan = await ok('BillingPlanRpc.create', {
      planId: 'sql-text',
      name: HOSTILE,
      currency: 'EUR',
      description: HOSTILE,
      recurringCost: 900,
      billingCycle: 'monthly',
      features: [{ key: 'seats', name: HOSTILE, limit: 3 }],
    });
    const foundPlan = await ok('BillingPlanRpc.findById', { _id: plan._id });
    assert.deepEqual([foundPlan.name, foundPlan.description, foundPlan.features[0].name], [HOSTILE, HOSTILE, HOSTILE]);
    const plans = await ok('BillingPlanRpc.getData', { filter: { name: HOSTILE }, sort: {}, page: 1, pageSize: 10 });
    assert.deepEqual(
      plans.docs.map((row: { _id: string }) => row._id),
      [plan._id],
    );
    await ok('BillingPlanRpc.update', { _id: plan._id, description: `${HOSTILE} 2` });
    assert.equal((await ok('BillingPlanRpc.findById', { _id: plan._id })).description, `${HOSTILE} 2`);

    const discount = await ok('DiscountRpc.create', {
      code: 'SQL-TEXT',
      name: HOSTILE,
      kind: 'percent',
      value: 10,
      description: HOSTILE,
      planIds: ['sql-text'],
    });
    const foundDiscount = await ok('DiscountRpc.findById', { _id: discount._id });
    assert.deepEqual([foundDiscount.name, foundDiscount.description], [HOSTILE, HOSTILE]);
    const discounts = await ok('DiscountRpc.getData', { filter: { name: HOSTILE }, sort: {}, page: 1, pageSize: 10 });
    assert.deepEqual(
      discounts.docs.map((row: { _id: string }) => row._id),
      [discount._id],
    );
    assert.equal((await ok('DiscountRpc.redeem', { code: 'SQL-TEXT', planId: 'sql-text' })).currentRedemptions, 1);
    assert.equal(await refused('DiscountRpc.redeem', { code: 'SQL-TEXT', planId: HOSTILE }), 'VALIDATION_ERROR');
    await ok('DiscountRpc.update', { _id: discount._id, description: `${HOSTILE} 2` });
    assert.equal((await ok('DiscountRpc.findById', { _id: discount._id })).description, `${HOSTILE} 2`);
    // Deleting a discount deactivates it (it stays readable).
    await ok('DiscountRpc.delete', { _id: discount._id });
    assert.equal((await ok('DiscountRpc.findById', { _id: discount._id })).isActive, false);
    assert.equal(await refused('DiscountRpc.redeem', { code: 'SQL-TEXT', planId: 'sql-text' }), 'CONFLICT');
    // Deleting a plan archives it.
    await ok('BillingPlanRpc.delete', { _id: plan._id });
    assert.equal((await ok('BillingPlanRpc.findById', { _id: plan._id })).isArchived, true);
  });

  it('TelephonyManagerRpc: an extension assigned to an agent whose ids are it', async () => {
    assert.deepEqual(await ok('TelephonyManagerRpc.assignAgentExtension', { extension: '100', agentConfigId: HOSTILE, agentContactId: HOSTILE }), {
      success: true,
      extension: '100',
      agentConfigId: HOSTILE,
      agentContactId: HOSTILE,
    });
    assert.deepEqual(await ok('TelephonyManagerRpc.getExtensionsForAgent', { agentContactId: HOSTILE }), ['100']);
    assert.deepEqual(await ok('TelephonyManagerRpc.getAvailableExtensions'), ['101']);
    await ok('TelephonyManagerRpc.disassociateAgentExtension', { extension: '100' });
    assert.deepEqual(await ok('TelephonyManagerRpc.getExtensionsForAgent', { agentContactId: HOSTILE }), []);
  });

  it('NoteRpc (the example plugin): a note added, listed and removed', async () => {
    const note = await ok('NoteRpc.add', { text: HOSTILE });
    const texts = async () => (await ok('NoteRpc.list')).data.filter((row: { _id: string }) => row._id === note._id).map((row: { text: string }) => row.text);
    assert.deepEqual(await texts(), [HOSTILE]);
    await ok('NoteRpc.remove', { _id: note._id });
    assert.deepEqual(await texts(), []);
  });
});
