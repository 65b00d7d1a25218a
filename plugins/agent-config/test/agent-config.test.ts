import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { getFile, putUpload, tinyPng } from '../../../test/support/uploads.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const RECORD_FIELDS = [
  '_id',
  'name',
  'model',
  'description',
  'agentClass',
  'promptSource',
  'promptText',
  'promptFile',
  'saveChatHistory',
  'communicationModes',
  'personalityEnabled',
  'personality',
  'voiceEnabled',
  'ttsModel',
  'selectedVoice',
  'transcriptionModel',
  'speakFirstOutgoing',
  'allowOutgoingCalls',
  'allowIncomingCalls',
  'allowGroupParticipation',
  'forkNewInstanceForCalls',
  'enableDeepWork',
  'capabilities',
  'role',
  'tools',
  'fileContext',
  'messagingContactId',
  'avatarUrl',
  'realtime',
  'projectId',
  'userId',
  'subscriptionId',
  'createdAt',
  'updatedAt',
].sort();

describe('AgentConfigRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'api-key', 'agent-config', 'memory'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
  });
  after(() => t.close());

  it('creates an agent with every field of its record, defaults for those not given', async () => {
    const agent = await t.as(member).AgentConfigRpc.create({ name: 'support-bot', model: 'gpt-4o-mini', personality: { style: 'friendly', adaptMood: true } });
    assert.deepEqual(Object.keys(agent).sort(), RECORD_FIELDS);
    assert.equal(agent.agentClass, 'AIAgent');
    assert.equal(agent.promptSource, 'text');
    assert.equal(agent.saveChatHistory, true);
    assert.deepEqual(agent.communicationModes, ['direct']);
    assert.equal(agent.personality?.style, 'friendly');
    assert.deepEqual(agent.capabilities, {
      computer: { browserAccess: false, terminalAccess: false },
      search: { enabled: false, connectors: [] },
      documentation: { accessWorkspace: false, modifyWorkspace: false, createOwn: false },
      tasks: { accessWorkspace: false, modifyWorkspace: false, createOwn: false },
    });
    assert.deepEqual(agent.tools, []);
    assert.equal(agent.userId, member.user._id);
    assert.equal(agent.subscriptionId, admin.subscriptionId);
    assert.equal(agent.projectId, null);
    assert.equal(agent.realtime, false);
  });

  it('refuses a taken name, a model not in the catalogue, speech models of the wrong kind and lists of names out of bounds', async () => {
    await refused(t.as(admin).AgentConfigRpc.create({ name: 'support-bot', model: 'gpt-4o' }), 'CONFLICT');
    for (const [params, path] of [
      [{ name: 'x1', model: 'no-such-model' }, 'model'],
      [{ name: 'x2', model: 'gpt-4o', tools: ['memory.recall', ''] }, 'tools.1'],
      [{ name: 'x2', model: 'gpt-4o', tools: ['search', '   '] }, 'tools.1'],
      [{ name: 'x2', model: 'gpt-4o', tools: ['search', 't'.repeat(101)] }, 'tools.1'],
      [{ name: 'x2', model: 'gpt-4o', tools: Array.from({ length: 51 }, (_, i) => `tool${i}`) }, 'tools'],
      [{ name: 'x2', model: 'gpt-4o', tools: 'search' }, 'tools'],
      [{ name: 'x2', model: 'gpt-4o', tools: ['search', 7] }, 'tools.1'],
      [{ name: 'x2', model: 'gpt-4o', capabilities: { search: { connectors: [''] } } }, 'capabilities.search.connectors.0'],
      [{ name: 'x3', model: 'gpt-4o', ttsModel: 'gpt-4o' }, 'ttsModel'],
      [{ name: '', model: 'gpt-4o' }, 'name'],
      [{ model: 'gpt-4o' }, 'name'],
      [{ name: 'x4', model: 'gpt-4o', saveChatHistory: 'yes' }, 'saveChatHistory'],
    ] as const) {
      const error = await refused(t.as(admin).call('AgentConfigRpc.create', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues?.[0]?.path, path, JSON.stringify(error));
    }
  });

  it('keeps any tool names, those its client runs as well as the server’s, and says which the server runs', async () => {
    const tools = ['search', 'memory.recall', 'browser.open', ' crm lookup ', 't'.repeat(100), ...Array.from({ length: 45 }, (_, i) => `client.tool${i}`)];
    const agent = await t.as(member).AgentConfigRpc.create({ name: 'client-tools-bot', model: 'gpt-4o', tools });
    const kept = ['search', 'memory.recall', 'browser.open', 'crm lookup', ...tools.slice(4)];
    assert.deepEqual(agent.tools, kept, 'names kept in order, trimmed');
    assert.deepEqual((await t.as(member).AgentConfigRpc.findById({ _id: agent._id })).tools, kept);
    const updated = await t.as(member).AgentConfigRpc.update({ _id: agent._id, tools: ['search'] });
    assert.deepEqual(updated.tools, ['search']);
    const available = await t.as(member).AgentConfigRpc.getAvailableTools();
    assert.equal(
      available.some((tool) => tool.name === 'search'),
      false,
      'search is a client tool, not one the server runs',
    );
    const listing = await (await fetch(`${t.url}/api/rpc`)).json();
    const description = listing.data.operations.find((operation: { method: string }) => operation.method === 'AgentConfigRpc.getAvailableTools').description;
    assert.match(description, /tools the server runs.*client runs itself/s);
    await t.as(member).AgentConfigRpc.delete({ _id: agent._id });
  });

  it('takes the projectId of the context when omitted, and "" as explicitly global', async () => {
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'crm', initialContext: '{"projectId":"crm"}' });
    const scoped = await t.as({ apiKey: key.fullKey }).AgentConfigRpc.create({ name: 'crm-bot', model: 'gpt-4o' });
    assert.equal(scoped.projectId, 'crm');
    const global = await t.as({ apiKey: key.fullKey }).AgentConfigRpc.create({ name: 'global-bot', model: 'gpt-4o', projectId: '' });
    assert.equal(global.projectId, null);
    const explicit = await t.as({ apiKey: key.fullKey }).AgentConfigRpc.create({ name: 'sales-bot', model: 'gpt-4o', projectId: 'sales' });
    assert.equal(explicit.projectId, 'sales');
  });

  it('updates the fields name through fileContext, merging capabilities, and never projectId', async () => {
    const { data } = await t.as(member).AgentConfigRpc.getData({ filter: { name: 'support-bot' } });
    const updated = await t.as(member).AgentConfigRpc.update({
      _id: data[0]._id,
      name: 'helpdesk-bot',
      promptText: 'You help customers.',
      tools: ['memory.recall', 'memory.save'],
      capabilities: { search: { enabled: true, connectors: ['web'] } },
      voiceEnabled: true,
      ttsModel: 'gpt-4o-mini-tts',
    });
    assert.equal(updated.name, 'helpdesk-bot');
    assert.equal(updated.promptText, 'You help customers.');
    assert.deepEqual(updated.tools, ['memory.recall', 'memory.save']);
    assert.deepEqual(updated.capabilities.search, { enabled: true, connectors: ['web'] });
    assert.deepEqual(updated.capabilities.computer, { browserAccess: false, terminalAccess: false });
    assert.equal(updated.personality?.style, 'friendly', 'fields not given stay');
    assert.equal(updated.projectId, null);
    const moved = await refused(t.as(member).call('AgentConfigRpc.update', { _id: data[0]._id, projectId: 'sales' }), 'VALIDATION_ERROR');
    assert.deepEqual(moved.issues, [{ path: 'projectId', message: 'Received unknown parameter: projectId' }]);
    assert.ok(Date.parse(updated.updatedAt) >= Date.parse(updated.createdAt));
    const again = await t.as(member).AgentConfigRpc.update({ _id: data[0]._id, capabilities: { computer: { browserAccess: true } } });
    assert.deepEqual(again.capabilities.search, { enabled: true, connectors: ['web'] });
    assert.equal(again.capabilities.computer.browserAccess, true);
    assert.deepEqual(await t.as(admin).AgentConfigRpc.findById({ _id: data[0]._id }), again);
  });

  it('lists with filters, sorts and paging; everyone reads, creators, admins and staff change', async () => {
    const all = await t.as(member).AgentConfigRpc.getData();
    assert.deepEqual(
      all.data.map((agent) => agent.name),
      ['crm-bot', 'global-bot', 'helpdesk-bot', 'sales-bot'],
    );
    assert.equal((await t.as(member).AgentConfigRpc.getData({ filter: { projectId: 'crm' } })).totalCount, 1);
    assert.equal((await t.as(member).AgentConfigRpc.getData({ filter: { name: { $regex: '^s' } } })).totalCount, 1);
    assert.equal((await t.as(member).AgentConfigRpc.getData({ filter: { userId: member.user._id } })).totalCount, 1);
    const sorted = await t.as(member).AgentConfigRpc.getData({ sort: { name: -1 }, pageSize: 2, page: 2 });
    assert.deepEqual(
      sorted.data.map((agent) => agent.name),
      ['global-bot', 'crm-bot'],
    );
    await refused(t.as(member).AgentConfigRpc.getData({ filter: { secret: 1 } }), 'VALIDATION_ERROR');

    const crm = all.data.find((agent) => agent.name === 'crm-bot')!;
    await refused(t.as(member).AgentConfigRpc.update({ _id: crm._id, description: 'mine now' }), 'FORBIDDEN');
    await refused(t.as(member).AgentConfigRpc.delete({ _id: crm._id }), 'FORBIDDEN');
    assert.deepEqual(await t.as(admin).AgentConfigRpc.delete({ _id: crm._id }), { success: true });
    await refused(t.as(admin).AgentConfigRpc.findById({ _id: crm._id }), 'NOT_FOUND');
  });

  it('keeps agents to their subscription', async () => {
    const other = await t.signup();
    const [agent] = (await t.as(admin).AgentConfigRpc.getData()).data;
    assert.equal((await t.as(other).AgentConfigRpc.getData()).totalCount, 0);
    const asOther = t.as(other).AgentConfigRpc;
    for (const [method, call] of [
      ['findById', () => asOther.findById({ _id: agent._id })],
      ['update', () => asOther.update({ _id: agent._id, description: 'x' })],
      ['delete', () => asOther.delete({ _id: agent._id })],
      ['getUploadKeyForAvatar', () => asOther.getUploadKeyForAvatar({ _id: agent._id })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    assert.equal((await t.as(other).AgentConfigRpc.create({ name: agent.name, model: 'gpt-4o' })).name, agent.name, 'names are unique per subscription');
  });

  it('sets an avatar through an upload key, replacing the previous one', async () => {
    const agent = await t.as(member).AgentConfigRpc.create({ name: 'avatar-bot', model: 'gpt-4o' });
    const upload = async (colour: [number, number, number, number]) => {
      const { uploadKey, uploadUrl } = await t.as(member).AgentConfigRpc.getUploadKeyForAvatar({ _id: agent._id });
      assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
      assert.equal((await putUpload(t, uploadKey, tinyPng(2, colour), 'image/png', { token: member.token })).status, 200);
      const { avatarUrl } = await t.as(member).AgentConfigRpc.updateAvatar({ _id: agent._id, uploadKey });
      assert.ok(avatarUrl, 'an avatar is set');
      return { avatarUrl };
    };
    const first = await upload([1, 2, 3, 255]);
    assert.match(first.avatarUrl, /^\/api\/files\/[0-9a-f-]{36}$/);
    const served = await getFile(t, first.avatarUrl, { token: admin.token });
    assert.equal(served.status, 200);
    assert.deepEqual(served.bytes, tinyPng(2, [1, 2, 3, 255]));
    const second = await upload([9, 9, 9, 255]);
    assert.notEqual(second.avatarUrl, first.avatarUrl);
    assert.equal((await getFile(t, first.avatarUrl, { token: admin.token })).status, 404, 'the replaced avatar is deleted');
    const { uploadKey } = await t.as(member).AgentConfigRpc.getUploadKeyForAvatar({ _id: agent._id });
    assert.equal((await putUpload(t, uploadKey, Buffer.from('not an image'), 'image/png', { token: member.token })).status, 400);
  });

  it('lists the available tools with the operation each calls and its params schema', async () => {
    const tools = await t.as(member).AgentConfigRpc.getAvailableTools();
    const recall = tools.find((tool) => tool.name === 'memory.recall')!;
    assert.equal(recall.method, 'MemoryRpc.recallMemories');
    assert.equal(recall.access, 'user');
    assert.ok(recall.describe.length > 0);
    assert.ok('queryText' in (recall.params.properties as object));
  });
});
