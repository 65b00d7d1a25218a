import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { getFile, putUpload, tinyPng } from '../../../test/support/uploads.ts';
import { addUser } from '../../../test/support/users.ts';

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
  let member: Awaited<ReturnType<typeof addUser>>;
  const as = (token: string) => ({ token });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'api-key', 'agent-config', 'memory'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
  });
  after(() => t.close());

  it('creates an agent with every field of its record, defaults for those not given', async () => {
    const agent = await t.ok(
      'AgentConfigRpc.create',
      { name: 'support-bot', model: 'gpt-4o-mini', personality: { style: 'friendly', adaptMood: true } },
      as(member.token),
    );
    assert.deepEqual(Object.keys(agent).sort(), RECORD_FIELDS);
    assert.equal(agent.agentClass, 'AIAgent');
    assert.equal(agent.promptSource, 'text');
    assert.equal(agent.saveChatHistory, true);
    assert.deepEqual(agent.communicationModes, ['direct']);
    assert.equal(agent.personality.style, 'friendly');
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
    const taken = await t.call('AgentConfigRpc.create', { name: 'support-bot', model: 'gpt-4o' }, as(admin.token));
    assert.equal(taken.status, 409);
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
      const response = await t.call('AgentConfigRpc.create', params, as(admin.token));
      assert.equal(response.status, 400, JSON.stringify(params));
      assert.equal(response.body.data.issues[0].path, path, JSON.stringify(response.body.data));
    }
  });

  it('keeps any tool names, those its client runs as well as the server’s, and says which the server runs', async () => {
    const tools = ['search', 'memory.recall', 'browser.open', ' crm lookup ', 't'.repeat(100), ...Array.from({ length: 45 }, (_, i) => `client.tool${i}`)];
    const agent = await t.ok('AgentConfigRpc.create', { name: 'client-tools-bot', model: 'gpt-4o', tools }, as(member.token));
    const kept = ['search', 'memory.recall', 'browser.open', 'crm lookup', ...tools.slice(4)];
    assert.deepEqual(agent.tools, kept, 'names kept in order, trimmed');
    assert.deepEqual((await t.ok('AgentConfigRpc.findById', { _id: agent._id }, as(member.token))).tools, kept);
    const updated = await t.ok('AgentConfigRpc.update', { _id: agent._id, tools: ['search'] }, as(member.token));
    assert.deepEqual(updated.tools, ['search']);
    const available = await t.ok('AgentConfigRpc.getAvailableTools', {}, as(member.token));
    assert.equal(
      available.some((tool: { name: string }) => tool.name === 'search'),
      false,
      'search is a client tool, not one the server runs',
    );
    const listing = await (await fetch(`${t.url}/api/rpc`)).json();
    const description = listing.data.operations.find((operation: { method: string }) => operation.method === 'AgentConfigRpc.getAvailableTools').description;
    assert.match(description, /tools the server runs.*client runs itself/s);
    await t.ok('AgentConfigRpc.delete', { _id: agent._id }, as(member.token));
  });

  it('takes the projectId of the context when omitted, and "" as explicitly global', async () => {
    const key = await t.ok('ApiKeyRpc.create', { description: 'crm', initialContext: '{"projectId":"crm"}' }, as(admin.token));
    const scoped = await t.ok('AgentConfigRpc.create', { name: 'crm-bot', model: 'gpt-4o' }, { apiKey: key.fullKey });
    assert.equal(scoped.projectId, 'crm');
    const global = await t.ok('AgentConfigRpc.create', { name: 'global-bot', model: 'gpt-4o', projectId: '' }, { apiKey: key.fullKey });
    assert.equal(global.projectId, null);
    const explicit = await t.ok('AgentConfigRpc.create', { name: 'sales-bot', model: 'gpt-4o', projectId: 'sales' }, { apiKey: key.fullKey });
    assert.equal(explicit.projectId, 'sales');
  });

  it('updates the fields name through fileContext, merging capabilities, and never projectId', async () => {
    const { data } = await t.ok('AgentConfigRpc.getData', { filter: { name: 'support-bot' } }, as(member.token));
    const updated = await t.ok(
      'AgentConfigRpc.update',
      {
        _id: data[0]._id,
        name: 'helpdesk-bot',
        promptText: 'You help customers.',
        tools: ['memory.recall', 'memory.save'],
        capabilities: { search: { enabled: true, connectors: ['web'] } },
        voiceEnabled: true,
        ttsModel: 'gpt-4o-mini-tts',
      },
      as(member.token),
    );
    assert.equal(updated.name, 'helpdesk-bot');
    assert.equal(updated.promptText, 'You help customers.');
    assert.deepEqual(updated.tools, ['memory.recall', 'memory.save']);
    assert.deepEqual(updated.capabilities.search, { enabled: true, connectors: ['web'] });
    assert.deepEqual(updated.capabilities.computer, { browserAccess: false, terminalAccess: false });
    assert.equal(updated.personality.style, 'friendly', 'fields not given stay');
    assert.equal(updated.projectId, null);
    const moved = await t.call('AgentConfigRpc.update', { _id: data[0]._id, projectId: 'sales' }, as(member.token));
    assert.deepEqual(moved.body.data.issues, [{ path: 'projectId', message: 'Received unknown parameter: projectId' }]);
    assert.ok(Date.parse(updated.updatedAt) >= Date.parse(updated.createdAt));
    const again = await t.ok('AgentConfigRpc.update', { _id: data[0]._id, capabilities: { computer: { browserAccess: true } } }, as(member.token));
    assert.deepEqual(again.capabilities.search, { enabled: true, connectors: ['web'] });
    assert.equal(again.capabilities.computer.browserAccess, true);
    assert.deepEqual(await t.ok('AgentConfigRpc.findById', { _id: data[0]._id }, as(admin.token)), again);
  });

  it('lists with filters, sorts and paging; everyone reads, creators, admins and staff change', async () => {
    const all = await t.ok('AgentConfigRpc.getData', {}, as(member.token));
    assert.deepEqual(
      all.data.map((agent: { name: string }) => agent.name),
      ['crm-bot', 'global-bot', 'helpdesk-bot', 'sales-bot'],
    );
    assert.equal((await t.ok('AgentConfigRpc.getData', { filter: { projectId: 'crm' } }, as(member.token))).totalCount, 1);
    assert.equal((await t.ok('AgentConfigRpc.getData', { filter: { name: { $regex: '^s' } } }, as(member.token))).totalCount, 1);
    assert.equal((await t.ok('AgentConfigRpc.getData', { filter: { userId: member.user._id } }, as(member.token))).totalCount, 1);
    const sorted = await t.ok('AgentConfigRpc.getData', { sort: { name: -1 }, pageSize: 2, page: 2 }, as(member.token));
    assert.deepEqual(
      sorted.data.map((agent: { name: string }) => agent.name),
      ['global-bot', 'crm-bot'],
    );
    assert.equal((await t.call('AgentConfigRpc.getData', { filter: { secret: 1 } }, as(member.token))).status, 400);

    const crm = all.data.find((agent: { name: string }) => agent.name === 'crm-bot');
    const refused = await t.call('AgentConfigRpc.update', { _id: crm._id, description: 'mine now' }, as(member.token));
    assert.equal(refused.status, 403);
    assert.equal((await t.call('AgentConfigRpc.delete', { _id: crm._id }, as(member.token))).status, 403);
    assert.deepEqual(await t.ok('AgentConfigRpc.delete', { _id: crm._id }, as(admin.token)), { success: true });
    assert.equal((await t.call('AgentConfigRpc.findById', { _id: crm._id }, as(admin.token))).status, 404);
  });

  it('keeps agents to their subscription', async () => {
    const other = await t.signup();
    const [agent] = (await t.ok('AgentConfigRpc.getData', {}, as(admin.token))).data;
    assert.equal((await t.ok('AgentConfigRpc.getData', {}, as(other.token))).totalCount, 0);
    for (const [method, params] of [
      ['AgentConfigRpc.findById', { _id: agent._id }],
      ['AgentConfigRpc.update', { _id: agent._id, description: 'x' }],
      ['AgentConfigRpc.delete', { _id: agent._id }],
      ['AgentConfigRpc.getUploadKeyForAvatar', { _id: agent._id }],
    ] as const) {
      assert.equal((await t.call(method, params, as(other.token))).status, 404, method);
    }
    assert.equal(
      (await t.ok('AgentConfigRpc.create', { name: agent.name, model: 'gpt-4o' }, as(other.token))).name,
      agent.name,
      'names are unique per subscription',
    );
  });

  it('sets an avatar through an upload key, replacing the previous one', async () => {
    const agent = await t.ok('AgentConfigRpc.create', { name: 'avatar-bot', model: 'gpt-4o' }, as(member.token));
    const upload = async (colour: [number, number, number, number]) => {
      const { uploadKey, uploadUrl } = await t.ok('AgentConfigRpc.getUploadKeyForAvatar', { _id: agent._id }, as(member.token));
      assert.ok(uploadUrl.endsWith(`/api/uploads/${uploadKey}`));
      assert.equal((await putUpload(t, uploadKey, tinyPng(2, colour), 'image/png', as(member.token))).status, 200);
      return t.ok('AgentConfigRpc.updateAvatar', { _id: agent._id, uploadKey }, as(member.token));
    };
    const first = await upload([1, 2, 3, 255]);
    assert.match(first.avatarUrl, /^\/api\/files\/[0-9a-f-]{36}$/);
    const served = await getFile(t, first.avatarUrl, as(admin.token));
    assert.equal(served.status, 200);
    assert.deepEqual(served.bytes, tinyPng(2, [1, 2, 3, 255]));
    const second = await upload([9, 9, 9, 255]);
    assert.notEqual(second.avatarUrl, first.avatarUrl);
    assert.equal((await getFile(t, first.avatarUrl, as(admin.token))).status, 404, 'the replaced avatar is deleted');
    const { uploadKey } = await t.ok('AgentConfigRpc.getUploadKeyForAvatar', { _id: agent._id }, as(member.token));
    assert.equal((await putUpload(t, uploadKey, Buffer.from('not an image'), 'image/png', as(member.token))).status, 400);
  });

  it('lists the available tools with the operation each calls and its params schema', async () => {
    const tools = await t.ok('AgentConfigRpc.getAvailableTools', {}, as(member.token));
    const recall = tools.find((tool: { name: string }) => tool.name === 'memory.recall');
    assert.equal(recall.method, 'MemoryRpc.recallMemories');
    assert.equal(recall.access, 'user');
    assert.ok(recall.describe.length > 0);
    assert.ok('queryText' in recall.params.properties);
  });
});
