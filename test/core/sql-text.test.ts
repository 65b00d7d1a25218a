import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { refused, type Caller } from '../support/caller.ts';
import { startTestApp, uniqueName, type TestApp } from '../support/harness.ts';
import { PEER_CHAT_MODEL, startModelPeer } from '../support/model-peer.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';
import { completedRun } from '../support/workflows.ts';

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
  /** The owner's calls. */
  let caller: Caller;
  let ownerName: string;

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
    const owner = await t.as(null).AuthRpc.signup({
      email: `${ownerName}@example.com`,
      username: ownerName,
      password: 'correct horse battery',
      firstName: HOSTILE,
      lastName: HOSTILE,
    });
    assert.deepEqual([owner.user.firstName, owner.user.lastName], [HOSTILE, HOSTILE]);
    caller = t.as(owner);
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
    await peer?.close();
  });

  it('AuthRpc: the names given at signup are the session’s; a login with it is refused', async () => {
    const { user } = await caller.AuthRpc.getSession();
    assert.deepEqual([user.firstName, user.lastName], [HOSTILE, HOSTILE]);
    await refused(t.as(null).AuthRpc.login({ identifier: HOSTILE, password: HOSTILE }), 'UNAUTHENTICATED');
  });

  it('ApiKeyRpc: description and initial context; an update and a delete take effect', async () => {
    const initialContext = JSON.stringify({ [HOSTILE]: HOSTILE, nested: { note: HOSTILE } });
    const key = await caller.ApiKeyRpc.create({ description: HOSTILE, initialContext });
    const listed = async () => (await caller.ApiKeyRpc.getData()).data.find((row: { _id: string }) => row._id === key._id);
    assert.deepEqual([(await listed())?.description, (await listed())?.initialContext], [HOSTILE, JSON.parse(initialContext)]);
    await caller.ApiKeyRpc.update({ _id: key._id, description: `${HOSTILE} 2`, initialContext: JSON.stringify({ note: `${HOSTILE} 2` }) });
    assert.deepEqual([(await listed())?.description, (await listed())?.initialContext], [`${HOSTILE} 2`, { note: `${HOSTILE} 2` }]);
    await caller.ApiKeyRpc.delete({ _id: key._id });
    assert.equal(await listed(), undefined);
    await refused(t.as({ apiKey: key.fullKey }).call('NoteRpc.list'), 'UNAUTHENTICATED');
  });

  it('AdminUserRpc: a user created, found, filtered, updated and deleted', async () => {
    const name = uniqueName('sqlmember');
    const created = await caller.AdminUserRpc.create({
      email: `${name}@example.com`,
      username: name,
      password: 'a long enough password',
      role: 'user',
      firstName: HOSTILE,
      lastName: HOSTILE,
      partnerContactId: HOSTILE,
    });
    const found = await caller.AdminUserRpc.findById({ id: created._id });
    assert.deepEqual([found.firstName, found.lastName, found.partnerContactId], [HOSTILE, HOSTILE, HOSTILE]);
    // Provider accounts are compared with the user's links, never stored from here (plugins/auth/user.service.ts).
    await refused(caller.AdminUserRpc.update({ _id: created._id, oauthProfiles: [{ provider: HOSTILE, id: HOSTILE }] }), 'VALIDATION_ERROR');
    // The owner signed up with it as a last name too.
    const filtered = await caller.AdminUserRpc.getData({ filter: { lastName: HOSTILE } });
    assert.deepEqual(filtered.docs.map((user: { username: string }) => user.username).sort(), [name, ownerName].sort());
    await caller.AdminUserRpc.update({ _id: created._id, lastName: `${HOSTILE} 2` });
    assert.equal((await caller.AdminUserRpc.findById({ id: created._id })).lastName, `${HOSTILE} 2`);
    await caller.AdminUserRpc.delete({ _id: created._id });
    await refused(caller.AdminUserRpc.findById({ id: created._id }), 'NOT_FOUND');
  });

  it('UserProfileRpc: the profile fields', async () => {
    const changes = { firstName: HOSTILE, lastName: `${HOSTILE} L`, jobTitle: `${HOSTILE} J`, department: `${HOSTILE} D` };
    await caller.UserProfileRpc.updateUserProfile(changes);
    const profile = await caller.UserProfileRpc.getUserProfile();
    assert.deepEqual({ firstName: profile.firstName, lastName: profile.lastName, jobTitle: profile.jobTitle, department: profile.department }, changes);
  });

  it('SecretsRpc: zone, key, value and description; the value read back, updated, and the secret really deleted', async () => {
    const zone = HOSTILE_WORD;
    const _id = `${zone}:${HOSTILE}`;
    await caller.SecretsRpc.create({ zone, key: HOSTILE, value: HOSTILE, description: HOSTILE });
    await caller.SecretsRpc.create({ zone: 'z', key: 'k;1', value: 'v' });
    assert.equal((await caller.SecretsRpc.getSecretValue({ zone, key: HOSTILE })).value, HOSTILE);
    assert.equal((await caller.SecretsRpc.getSecretValue({ zone: 'z', key: 'k;1' })).value, 'v');
    const listed = await caller.SecretsRpc.getData({ filter: { zone, key: HOSTILE } });
    assert.deepEqual(
      listed.data.map((row: { _id: string; zone: string; key: string; description: string }) => [row._id, row.zone, row.key, row.description]),
      [[_id, zone, HOSTILE, HOSTILE]],
    );
    await caller.SecretsRpc.update({ _id, value: `${HOSTILE} 2`, description: `${HOSTILE} 2` });
    assert.equal((await caller.SecretsRpc.getSecretValue({ zone, key: HOSTILE })).value, `${HOSTILE} 2`);
    assert.equal((await caller.SecretsRpc.getData({ filter: { description: `${HOSTILE} 2` } })).totalCount, 1);
    for (const id of [_id, 'z:k;1']) assert.equal((await caller.SecretsRpc.delete({ _id: id })).success, true);
    await refused(caller.SecretsRpc.getSecretValue({ zone, key: HOSTILE }), 'NOT_FOUND');
    await refused(caller.SecretsRpc.getSecretValue({ zone: 'z', key: 'k;1' }), 'NOT_FOUND');
    assert.equal((await caller.SecretsRpc.getData({ filter: { zone } })).totalCount, 0);
    const audit = (await caller.SecretsRpc.getAuditLog({ pageSize: 100 })).data.filter((entry: { targetId: string }) => entry.targetId === _id);
    assert.deepEqual(audit.map((entry: { action: string }) => entry.action).sort(), ['create', 'delete', 'read', 'read', 'update']);
  });

  it('SecretsManagerRpc: a scoped secret with its project, agent, key, value, label and description', async () => {
    const created = await caller.SecretsManagerRpc.create({
      scope: 'project',
      projectId: HOSTILE,
      key: HOSTILE,
      value: HOSTILE,
      label: HOSTILE,
      description: HOSTILE,
    });
    const agent = await caller.SecretsManagerRpc.create({ scope: 'agent', agentName: HOSTILE, key: HOSTILE, value: `${HOSTILE} A` });
    const listed = await caller.SecretsManagerRpc.getData({ scope: 'project', projectId: HOSTILE });
    assert.deepEqual(
      listed.data.map((row: Record<string, unknown>) => [row._id, row.projectId, row.key, row.label, row.description]),
      [[created._id, HOSTILE, HOSTILE, HOSTILE, HOSTILE]],
    );
    assert.deepEqual(
      (await caller.SecretsManagerRpc.getData({ scope: 'agent', agentName: HOSTILE })).data.map((row: { _id: string }) => row._id),
      [agent._id],
    );
    assert.equal((await caller.SecretsManagerRpc.getSecretValue({ _id: created._id })).value, HOSTILE);
    assert.equal((await caller.SecretsManagerRpc.getSecretValue({ _id: agent._id })).value, `${HOSTILE} A`);
    await caller.SecretsManagerRpc.update({ _id: created._id, value: `${HOSTILE} 2`, description: `${HOSTILE} 2` });
    assert.equal((await caller.SecretsManagerRpc.getSecretValue({ _id: created._id })).value, `${HOSTILE} 2`);
    for (const { _id } of [created, agent]) await caller.SecretsManagerRpc.delete({ _id });
    assert.equal((await caller.SecretsManagerRpc.getData({ scope: 'project', projectId: HOSTILE })).totalCount, 0);
    await refused(caller.SecretsManagerRpc.getSecretValue({ _id: created._id }), 'NOT_FOUND');
  });

  it('ApiManagementRpc: a webhook URL and secret, used as stored; the key description as the label', async () => {
    const key = await caller.ApiKeyRpc.create({ description: HOSTILE });
    const webhookUrl = `${receiver.url}/hook;x$$--y;select%201?q=${encodeURIComponent(HOSTILE)}`;
    assert.deepEqual(await t.as({ apiKey: key.fullKey }).ApiManagementRpc.registerWebhook({ webhookUrl, webhookSecret: HOSTILE }), {
      success: true,
      status: 'verified',
    });
    const test = receiver.requests.at(-1)!;
    const url = new URL(webhookUrl);
    assert.equal(test.path, `${url.pathname}${url.search}`);
    assert.equal(new URLSearchParams(url.search).get('q'), HOSTILE);
    assert.equal(test.headers['x-webhook-secret'], HOSTILE);
    assert.deepEqual(await caller.ApiManagementRpc.listApiKeysForWebhook(), [{ value: key._id, label: HOSTILE }]);
    // An event of the subscription is delivered to the stored URL, with the stored secret.
    const before = receiver.requests.length;
    await caller.call('NoteRpc.add', { text: 'for the webhook' });
    const delivered = await eventually(() => receiver.requests.slice(before).find((request) => request.body.includes('note.added')));
    assert.equal(delivered.path, test.path);
    assert.equal(delivered.headers['x-webhook-secret'], HOSTILE);
    await caller.ApiKeyRpc.delete({ _id: key._id });
    assert.deepEqual(await caller.ApiManagementRpc.listApiKeysForWebhook(), []);
  });

  it('MemoryRpc: content and metadata saved, recalled by a metadata filter, updated and deleted', async () => {
    const metadata = { topic: HOSTILE, nested: { [HOSTILE]: HOSTILE } };
    const { memoryId } = await caller.MemoryRpc.saveMemory({ scope: 'user', memory: { content: HOSTILE, metadata } });
    const listed = (await caller.MemoryRpc.listMemories({ scope: 'user', limit: 200 })).memories.filter((memory: { id: string }) => memory.id === memoryId);
    assert.deepEqual(
      listed.map((memory: { content: string; metadata: unknown }) => [memory.content, memory.metadata]),
      [[HOSTILE, metadata]],
    );
    const recalled = await caller.MemoryRpc.recallMemories({ scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } });
    assert.deepEqual(
      recalled.memories.map((memory: { id: string; content: string }) => [memory.id, memory.content]),
      [[memoryId, HOSTILE]],
    );
    await caller.MemoryRpc.saveMemory({ scope: 'user', memory: { id: memoryId, content: `${HOSTILE} 2`, metadata } });
    const updated = await caller.MemoryRpc.recallMemories({ scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } });
    assert.deepEqual(
      updated.memories.map((memory: { id: string; content: string }) => [memory.id, memory.content]),
      [[memoryId, `${HOSTILE} 2`]],
    );
    await caller.MemoryRpc.deleteMemory({ scope: 'user', memoryId });
    assert.deepEqual((await caller.MemoryRpc.recallMemories({ scope: 'user', queryText: HOSTILE, filter: { topic: HOSTILE } })).memories, []);
  });

  it('AIConfigRpc (it stores nothing): a provider, model type or task named with it is one it does not know', async () => {
    await refused(caller.AIConfigRpc.getProviderSettings({ providerName: HOSTILE }), 'NOT_FOUND');
    await refused(caller.AIConfigRpc.getModels({ provider: HOSTILE, type: HOSTILE, capabilities: [HOSTILE] }), 'VALIDATION_ERROR');
    await refused(caller.AIConfigRpc.getTaskRecommendations({ taskName: HOSTILE }), 'NOT_FOUND');
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
    const workflow = await caller.WorkflowRpc.create({
      name: HOSTILE,
      description: HOSTILE,
      tags: [HOSTILE],
      variables: { [HOSTILE]: HOSTILE },
      contextId: HOSTILE,
      ...graph,
    });
    const found = await caller.WorkflowRpc.findById({ id: workflow._id });
    assert.deepEqual(
      [found.name, found.description, found.tags, found.variables, found.contextId, (found.nodes as { name: string }[])[1].name],
      [HOSTILE, HOSTILE, [HOSTILE], { [HOSTILE]: HOSTILE }, HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await caller.WorkflowRpc.getData({ filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [workflow._id],
    );
    assert.deepEqual(await caller.WorkflowRpc.getWorkflowTags(), [{ value: HOSTILE, label: HOSTILE }]);

    const result = completedRun(await caller.WorkflowRpc.executeWorkflow({ workflowIdentifier: HOSTILE, workflowArgs: { topic: HOSTILE } }));
    assert.equal(result.output, `You said: ${HOSTILE}`);
    const instance = await caller.WorkflowRpc.getInstance({ instanceId: result.instanceId });
    assert.deepEqual([instance.workflowName, instance.output], [HOSTILE, `You said: ${HOSTILE}`]);

    // The model call is traced with the workflow's name as the caller's, found by it.
    const threads = await caller.AITelemetryRpc.listThreads({ filter: { callerName: HOSTILE } });
    assert.deepEqual(
      threads.data.map((thread: { threadId: string; callerName: string }) => [thread.threadId, thread.callerName]),
      [[result.instanceId, HOSTILE]],
    );
    const [trace] = await caller.AITelemetryRpc.getThread({ threadId: result.instanceId });
    assert.equal(trace.callerName, HOSTILE);
    assert.equal((await caller.AITelemetryRpc.getStats({ filter: { callerName: HOSTILE } })).totalTraces, 1);
    assert.deepEqual(await caller.AITelemetryRpc.getThread({ threadId: HOSTILE }), []);

    await caller.WorkflowRpc.update({ _id: workflow._id, description: `${HOSTILE} 2` });
    assert.equal((await caller.WorkflowRpc.findById({ id: workflow._id })).description, `${HOSTILE} 2`);
    await caller.WorkflowRpc.delete({ _id: workflow._id });
    await refused(caller.WorkflowRpc.findById({ id: workflow._id }), 'NOT_FOUND');
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
    const agent = await caller.AgentConfigRpc.create({ ...text, model: PEER_CHAT_MODEL, messagingContactId: HOSTILE, projectId: HOSTILE });
    const found = await caller.AgentConfigRpc.findById({ _id: agent._id });
    assert.deepEqual(
      [
        found.name,
        found.description,
        found.promptText,
        found.role,
        found.fileContext,
        found.personality?.profession,
        found.personality?.style,
        found.personality?.notes,
        found.messagingContactId,
        found.projectId,
      ],
      [HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await caller.AgentConfigRpc.getData({ filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [agent._id],
    );
    await caller.AgentConfigRpc.update({ _id: agent._id, promptText: `${HOSTILE} 2` });
    assert.equal((await caller.AgentConfigRpc.findById({ _id: agent._id })).promptText, `${HOSTILE} 2`);
    await caller.AgentConfigRpc.delete({ _id: agent._id });
    await refused(caller.AgentConfigRpc.findById({ _id: agent._id }), 'NOT_FOUND');
  });

  it('KnowledgeBaseAdminRpc: a text ingested with it as name, description, collection, tag and content; found, updated and deleted', async () => {
    const content = `${HOSTILE}\n\nThe harbour ferry leaves at seven.`;
    const { document } = await caller.KnowledgeBaseAdminRpc.ingestText({
      name: HOSTILE,
      content,
      description: HOSTILE,
      collection: HOSTILE,
      tags: [HOSTILE],
      contactId: HOSTILE,
      projectId: HOSTILE,
    });
    const ready = await eventually(async () => {
      const current = await caller.KnowledgeBaseAdminRpc.getDocument({ docId: document._id });
      return current.status === 'pending' || current.status === 'processing' ? undefined : current;
    });
    assert.equal(ready.status, 'ready', ready.error ?? undefined);
    assert.deepEqual(
      [ready.name, ready.description, ready.collection, ready.tags, ready.content, ready.contactId, ready.projectId],
      [HOSTILE, HOSTILE, HOSTILE, [HOSTILE], content, HOSTILE, HOSTILE],
    );
    const listed = await caller.KnowledgeBaseAdminRpc.listDocuments({
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
    const hits = await caller.KnowledgeBaseAdminRpc.search({ queryText: HOSTILE, collection: HOSTILE });
    assert.ok(hits.length > 0);
    assert.deepEqual(
      hits.map((hit) => [hit.documentId, hit.name, hit.collection]),
      hits.map(() => [document._id, HOSTILE, HOSTILE]),
    );
    assert.ok(hits[0].text.includes(HOSTILE));
    const [chunk] = await caller.KnowledgeBaseAdminRpc.getChunks({ docId: document._id });
    await caller.KnowledgeBaseAdminRpc.updateChunk({ docId: document._id, chunkId: chunk.chunkId, text: `${HOSTILE} chunk` });
    assert.equal((await caller.KnowledgeBaseAdminRpc.getChunks({ docId: document._id }))[0].text, `${HOSTILE} chunk`);
    await caller.KnowledgeBaseAdminRpc.updateDocument({ docId: document._id, updates: { name: `${HOSTILE} 2`, description: `${HOSTILE} 2` } });
    const updated = await caller.KnowledgeBaseAdminRpc.getDocument({ docId: document._id });
    assert.deepEqual([updated.name, updated.description], [`${HOSTILE} 2`, `${HOSTILE} 2`]);
    await caller.KnowledgeBaseAdminRpc.deleteDocument({ docId: document._id });
    assert.equal((await caller.KnowledgeBaseAdminRpc.listDocuments({ collection: HOSTILE })).totalCount, 0);
  });

  it('DocumentRpc: two pages titled with a ";", no false conflict; read by title, searched, updated and deleted', async () => {
    const documentInstanceId = HOSTILE;
    const first = await caller.DocumentRpc.create({ title: 'T;1', documentInstanceId, content: HOSTILE, tags: [HOSTILE] });
    const second = await caller.DocumentRpc.create({ title: HOSTILE, documentInstanceId, content: `${HOSTILE} 2` });
    assert.deepEqual([first.title, first.content, first.tags, first.documentInstanceId], ['T;1', HOSTILE, [HOSTILE], HOSTILE]);
    assert.equal((await caller.DocumentRpc.getByTitle({ documentInstanceId, title: HOSTILE }))._id, second._id);
    assert.equal((await caller.DocumentRpc.getByTitle({ documentInstanceId, title: 'T;1' })).content, HOSTILE);
    const all = await caller.DocumentRpc.getAllDocuments({ documentInstanceId });
    assert.deepEqual(all.data.map((page: { title: string }) => page.title).sort(), [HOSTILE, 'T;1'].sort());
    const hits = await caller.DocumentRpc.search({ documentInstanceId, queryText: HOSTILE });
    assert.ok(hits.some((hit: { payload: { metadata: { recordId: string } } }) => hit.payload.metadata.recordId === first._id));
    await refused(caller.DocumentRpc.create({ title: HOSTILE, documentInstanceId }), 'CONFLICT');
    await caller.DocumentRpc.update({ _id: first._id, title: `${HOSTILE} 3`, content: `${HOSTILE} 3` });
    const versions = await caller.DocumentRpc.getVersions({ docId: first._id });
    assert.deepEqual(
      versions.map((version: { title: string; content: string }) => [version.title, version.content]).sort(),
      [
        ['T;1', HOSTILE],
        [`${HOSTILE} 3`, `${HOSTILE} 3`],
      ].sort(),
    );
    for (const { _id } of [first, second]) await caller.DocumentRpc.delete({ _id });
    assert.equal((await caller.DocumentRpc.getAllDocuments({ documentInstanceId })).totalCount, 0);
  });

  it('SchedulerRpc: a task with it as name, description, tag, context and event name', async () => {
    const taskConfig = {
      name: HOSTILE,
      description: HOSTILE,
      schedule: `once:${new Date(Date.now() + 86_400_000).toISOString()}`,
      actionType: 'event' as const,
      actionConfig: { eventName: HOSTILE, eventData: { [HOSTILE]: HOSTILE } },
      context: { serviceCode: HOSTILE, projectId: HOSTILE },
      tags: [HOSTILE],
    };
    const taskId = await caller.SchedulerRpc.create({ taskConfig });
    const found = await caller.SchedulerRpc.findById({ taskId });
    assert.deepEqual(
      [found.name, found.description, found.actionConfig, found.tags, found.context.serviceCode, found.context.projectId],
      [HOSTILE, HOSTILE, taskConfig.actionConfig, [HOSTILE], HOSTILE, HOSTILE],
    );
    assert.deepEqual(
      (await caller.SchedulerRpc.getData({ filter: { name: HOSTILE } })).data.map((row: { _id: string }) => row._id),
      [taskId],
    );
    await caller.SchedulerRpc.update({ taskId, updatedConfig: { description: `${HOSTILE} 2` } });
    assert.equal((await caller.SchedulerRpc.findById({ taskId })).description, `${HOSTILE} 2`);
    await caller.SchedulerRpc.delete({ taskId });
    await refused(caller.SchedulerRpc.findById({ taskId }), 'NOT_FOUND');
  });

  it('TaskRpc: a task in a board named with it, its title, description, tags, assignees and comments', async () => {
    const taskInstanceId = HOSTILE;
    const task = await caller.TaskRpc.create({
      taskInstanceId,
      title: HOSTILE,
      description: HOSTILE,
      tags: [HOSTILE],
      assignees: [HOSTILE],
      comments: [{ content: HOSTILE, authorContactId: HOSTILE }],
    });
    const comment = await caller.TaskRpc.addComment({ taskId: task._id, content: `${HOSTILE} 2` });
    const found = await caller.TaskRpc.findById({ _id: task._id });
    assert.deepEqual([found.taskInstanceId, found.title, found.description, found.tags, found.assignees], [HOSTILE, HOSTILE, HOSTILE, [HOSTILE], [HOSTILE]]);
    assert.deepEqual(
      found.comments.map((row: { content: string }) => row.content),
      [HOSTILE, `${HOSTILE} 2`],
    );
    assert.equal(found.comments[0].authorContactId, HOSTILE);
    assert.equal(found.comments[1].commentId, comment.commentId);
    const board = await caller.TaskRpc.getData({ taskInstanceId });
    assert.deepEqual(
      board.data.map((row: { _id: string }) => row._id),
      [task._id],
    );
    assert.equal((await caller.TaskRpc.getData({ taskInstanceId: 'semi;colon' })).totalCount, 0);
    await caller.TaskRpc.createTaskTree({ taskInstanceId, tasks: [{ title: `${HOSTILE} tree`, subtasks: [{ title: `${HOSTILE} leaf` }] }] });
    const titles = (await caller.TaskRpc.getData({ taskInstanceId })).data.map((row: { title: string }) => row.title);
    assert.deepEqual(titles.sort(), [HOSTILE, `${HOSTILE} leaf`, `${HOSTILE} tree`].sort());
    await caller.TaskRpc.update({ _id: task._id, title: `${HOSTILE} 3` });
    assert.equal((await caller.TaskRpc.findById({ _id: task._id })).title, `${HOSTILE} 3`);
    await caller.TaskRpc.delete({ _id: task._id });
    await refused(caller.TaskRpc.findById({ _id: task._id }), 'NOT_FOUND');
  });

  it('PlaybookRpc: name, description, content, category and tags; listed by tag, searched, updated and deleted', async () => {
    const playbook = await caller.PlaybookRpc.create({ name: HOSTILE, description: HOSTILE, content: HOSTILE, category: HOSTILE, tags: [HOSTILE] });
    const found = await caller.PlaybookRpc.findById({ _id: playbook._id });
    assert.deepEqual([found.name, found.description, found.content, found.category, found.tags], [HOSTILE, HOSTILE, HOSTILE, HOSTILE, [HOSTILE]]);
    assert.deepEqual(
      (await caller.PlaybookRpc.list({ tags: [HOSTILE] })).data.map((row: { _id: string }) => row._id),
      [playbook._id],
    );
    assert.deepEqual(
      (await caller.PlaybookRpc.search({ query: HOSTILE })).data.map((row: { _id: string }) => row._id),
      [playbook._id],
    );
    await caller.PlaybookRpc.update({ _id: playbook._id, data: { content: `${HOSTILE} 2` } });
    assert.equal((await caller.PlaybookRpc.findById({ _id: playbook._id })).content, `${HOSTILE} 2`);
    await caller.PlaybookRpc.delete({ _id: playbook._id });
    await refused(caller.PlaybookRpc.findById({ _id: playbook._id }), 'NOT_FOUND');
    await refused(caller.PlaybookRpc.findById({ _id: HOSTILE }), 'NOT_FOUND');
  });

  it('ProcessExecutorRpc: an argument reaches the process and its log line is read back', async () => {
    const { instanceId } = await caller.ProcessExecutorRpc.startProcess({ command: '/bin/echo', args: [HOSTILE] });
    const ended = await eventually(async () => {
      const status = await caller.ProcessExecutorRpc.getProcessStatus({ instanceId });
      return status.status === 'running' ? undefined : status;
    });
    assert.deepEqual([ended.status, ended.args], ['exited', [HOSTILE]]);
    assert.deepEqual((await caller.ProcessExecutorRpc.getProcessLogs({ instanceId })).logs, [HOSTILE]);
    await refused(caller.ProcessExecutorRpc.getProcessLogs({ instanceId: randomUUID() }), 'NOT_FOUND');
    await refused(caller.ProcessExecutorRpc.getProcessStatus({ instanceId: HOSTILE }), 'VALIDATION_ERROR');
  });

  it('PushNotificationRpc, PushSenderRpc and NotificationRpc: a device on channels named with it gets a broadcast with it as title and body', async () => {
    const subscriptionObject = { endpoint: `${receiver.url}/push;x$$--y`, keys: { p256dh: P256DH, auth: 'tBHItJI5svbpez7KI4CCXg' } };
    await caller.PushNotificationRpc.subscribe({ subscriptionObject, channels: [HOSTILE, HOSTILE_WORD] });
    const sent = await caller.PushSenderRpc.sendBroadcast({
      targetType: 'channels',
      targetIds: [HOSTILE],
      payload: { title: HOSTILE, body: `${HOSTILE} body` },
    });
    assert.match(sent.message, /1 user reached on 1 device/);
    // The push goes to the endpoint as it was stored.
    await eventually(() => receiver.requests.find((request) => request.path === '/push;x$$--y'));
    const notification = await eventually(async () => (await caller.NotificationRpc.getData({ filter: { title: HOSTILE } })).data[0]);
    assert.deepEqual([notification.title, notification.message], [HOSTILE, `${HOSTILE} body`]);
    await caller.NotificationRpc.markAsRead({ _id: notification._id });
    const read = await caller.NotificationRpc.findById({ _id: notification._id });
    assert.deepEqual([read.message, read.read], [`${HOSTILE} body`, true]);
    await caller.NotificationRpc.delete({ _id: notification._id });
    await refused(caller.NotificationRpc.findById({ _id: notification._id }), 'NOT_FOUND');

    await caller.PushNotificationRpc.unsubscribe({ subscriptionObject });
    assert.match(
      (await caller.PushSenderRpc.sendBroadcast({ targetType: 'channels', targetIds: [HOSTILE], payload: { title: HOSTILE, body: HOSTILE } })).message,
      /0 users reached on 0 devices/,
    );
  });

  it('CheckpointRpc: a file path and content, a checkpoint message and a tag message', async () => {
    const scope = 'sql-text';
    await caller.CheckpointRpc.writeFile({ scope, path: HOSTILE_PATH, content: HOSTILE });
    assert.equal((await caller.CheckpointRpc.readFile({ scope, path: HOSTILE_PATH })).content, HOSTILE);
    assert.deepEqual(await caller.CheckpointRpc.listFiles({ scope }), [{ path: HOSTILE_PATH, size: Buffer.byteLength(HOSTILE) }]);
    const { commitHash } = await caller.CheckpointRpc.createCheckpoint({ scope, message: HOSTILE });
    await caller.CheckpointRpc.tagRelease({ scope, commitHash, tagName: 'v1', message: HOSTILE });
    const [checkpoint] = await caller.CheckpointRpc.listCheckpoints({ scope });
    assert.deepEqual([checkpoint.hash, checkpoint.message, checkpoint.tags], [commitHash, HOSTILE, ['v1']]);
    await caller.CheckpointRpc.deleteFile({ scope, path: HOSTILE_PATH });
    await refused(caller.CheckpointRpc.readFile({ scope, path: HOSTILE_PATH }), 'NOT_FOUND');
    assert.equal((await caller.CheckpointRpc.readFile({ scope, path: HOSTILE_PATH, hash: commitHash })).content, HOSTILE);
  });

  it('BillingPlanRpc and DiscountRpc: a plan and a discount named and described with it', async () => {
    const plan = await caller.BillingPlanRpc.create({
      planId: 'sql-text',
      name: HOSTILE,
      currency: 'EUR',
      description: HOSTILE,
      recurringCost: 900,
      billingCycle: 'monthly',
      features: [{ key: 'seats', name: HOSTILE, limit: 3 }],
    });
    const foundPlan = await caller.BillingPlanRpc.findById({ _id: plan._id });
    assert.deepEqual([foundPlan.name, foundPlan.description, foundPlan.features[0].name], [HOSTILE, HOSTILE, HOSTILE]);
    const plans = await caller.BillingPlanRpc.getData({ filter: { name: HOSTILE }, sort: {}, page: 1, pageSize: 10 });
    assert.deepEqual(
      plans.docs.map((row: { _id: string }) => row._id),
      [plan._id],
    );
    await caller.BillingPlanRpc.update({ _id: plan._id, description: `${HOSTILE} 2` });
    assert.equal((await caller.BillingPlanRpc.findById({ _id: plan._id })).description, `${HOSTILE} 2`);

    const discount = await caller.DiscountRpc.create({
      code: 'SQL-TEXT',
      name: HOSTILE,
      kind: 'percent',
      value: 10,
      description: HOSTILE,
      planIds: ['sql-text'],
    });
    const foundDiscount = await caller.DiscountRpc.findById({ _id: discount._id });
    assert.deepEqual([foundDiscount.name, foundDiscount.description], [HOSTILE, HOSTILE]);
    const discounts = await caller.DiscountRpc.getData({ filter: { name: HOSTILE }, sort: {}, page: 1, pageSize: 10 });
    assert.deepEqual(
      discounts.docs.map((row: { _id: string }) => row._id),
      [discount._id],
    );
    assert.equal((await caller.DiscountRpc.redeem({ code: 'SQL-TEXT', planId: 'sql-text' })).currentRedemptions, 1);
    await refused(caller.DiscountRpc.redeem({ code: 'SQL-TEXT', planId: HOSTILE }), 'VALIDATION_ERROR');
    await caller.DiscountRpc.update({ _id: discount._id, description: `${HOSTILE} 2` });
    assert.equal((await caller.DiscountRpc.findById({ _id: discount._id })).description, `${HOSTILE} 2`);
    // Deleting a discount deactivates it (it stays readable).
    await caller.DiscountRpc.delete({ _id: discount._id });
    assert.equal((await caller.DiscountRpc.findById({ _id: discount._id })).isActive, false);
    await refused(caller.DiscountRpc.redeem({ code: 'SQL-TEXT', planId: 'sql-text' }), 'CONFLICT');
    // Deleting a plan archives it.
    await caller.BillingPlanRpc.delete({ _id: plan._id });
    assert.equal((await caller.BillingPlanRpc.findById({ _id: plan._id })).isArchived, true);
  });

  it('TelephonyManagerRpc: an extension assigned to an agent whose ids are it', async () => {
    assert.deepEqual(await caller.TelephonyManagerRpc.assignAgentExtension({ extension: '100', agentConfigId: HOSTILE, agentContactId: HOSTILE }), {
      success: true,
      extension: '100',
      agentConfigId: HOSTILE,
      agentContactId: HOSTILE,
    });
    assert.deepEqual(await caller.TelephonyManagerRpc.getExtensionsForAgent({ agentContactId: HOSTILE }), ['100']);
    assert.deepEqual(await caller.TelephonyManagerRpc.getAvailableExtensions(), ['101']);
    await caller.TelephonyManagerRpc.disassociateAgentExtension({ extension: '100' });
    assert.deepEqual(await caller.TelephonyManagerRpc.getExtensionsForAgent({ agentContactId: HOSTILE }), []);
  });

  it('NoteRpc (the example plugin): a note added, listed and removed', async () => {
    const note = await caller.call<{ _id: string }>('NoteRpc.add', { text: HOSTILE });
    const texts = async () =>
      (await caller.call<{ data: { _id: string; text: string }[] }>('NoteRpc.list')).data.filter((row) => row._id === note._id).map((row) => row.text);
    assert.deepEqual(await texts(), [HOSTILE]);
    await caller.call('NoteRpc.remove', { _id: note._id });
    assert.deepEqual(await texts(), []);
  });
});
