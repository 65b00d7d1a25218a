import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import WebSocket from 'ws';
import { createScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

/** API keys narrowed to groups or operations, to reading, or to a rate: the same on every door. */
describe('ApiKeyRpc: scopes and limits', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<TestApp['signup']>>;
  const clients: Client[] = [];

  before(async () => {
    t = await startTestApp();
    owner = await t.signup();
  });
  after(async () => {
    for (const client of clients) await client.close();
    await t.close();
  });

  const keyWith = async (limits: Record<string, unknown>) =>
    (await t.ok('ApiKeyRpc.create', { description: 'limited', ...limits }, { token: owner.token })).fullKey as string;
  const jsonRpc = async (key: string, method: string, params: unknown = {}) =>
    (
      await fetch(`${t.url}/api/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      })
    ).json();
  async function mcp(key: string): Promise<Client> {
    const client = new Client({ name: 'scoped-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { 'x-api-key': key } } }));
    clients.push(client);
    return client;
  }

  it('keeps a key scoped to a group to that group on the spec envelope, JSON-RPC, MCP and the listings', async () => {
    const key = await keyWith({ scopes: ['NoteRpc'] });
    assert.equal((await t.ok('NoteRpc.add', { text: 'in scope' }, { apiKey: key })).text, 'in scope');
    const outside = await t.call('ApiKeyRpc.getData', {}, { apiKey: key });
    assert.equal(outside.status, 403);
    assert.equal(outside.body.data.code, 'FORBIDDEN');
    assert.match(outside.body.data.error, /may not call ApiKeyRpc\.getData: its scopes are NoteRpc/);
    assert.equal((await jsonRpc(key, 'ApiKeyRpc.getData')).error.code, -32003);
    assert.ok(Array.isArray((await jsonRpc(key, 'NoteRpc.list')).result.data));

    const client = await mcp(key);
    const { tools } = await client.listTools();
    const noteTools = t.app.registry.all().filter((operation) => operation.group === 'NoteRpc').length;
    assert.equal(tools.length, noteTools);
    assert.ok(tools.every((tool) => tool.name.startsWith('NoteRpc_')));
    const refused = await client.callTool({ name: 'ApiKeyRpc_getData', arguments: {} });
    assert.equal(refused.isError, true);
    assert.equal(JSON.parse((refused.content as { text: string }[])[0]!.text).code, 'FORBIDDEN');

    // The listings show the caller what they may call, and their limits.
    const listing = await (await fetch(`${t.url}/api/rpc`, { headers: { 'x-api-key': key } })).json();
    assert.ok(listing.data.operations.every((operation: { method: string }) => operation.method.startsWith('NoteRpc.')));
    assert.deepEqual(listing.data.caller.limits, { scopes: ['NoteRpc'], readOnly: false, perMinute: null });
    const document = await (await fetch(`${t.url}/openrpc.json`, { headers: { 'x-api-key': key } })).json();
    assert.equal(document.methods.length, noteTools);
    assert.ok((await (await fetch(`${t.url}/openrpc.json`)).json()).methods.length > noteTools, 'without a credential, every method');
  });

  it('allows single operations, and takes a change of scopes at once', async () => {
    const key = await keyWith({ scopes: ['NoteRpc.list'] });
    assert.equal((await t.call('NoteRpc.list', {}, { apiKey: key })).status, 200);
    assert.equal((await t.call('NoteRpc.add', { text: 'no' }, { apiKey: key })).status, 403);
    const [record] = (await t.ok('ApiKeyRpc.getData', {}, { token: owner.token })).data.filter((entry: { scopes: string[] | null }) =>
      entry.scopes?.includes('NoteRpc.list'),
    );
    assert.deepEqual(record.scopes, ['NoteRpc.list']);
    const widened = await t.ok('ApiKeyRpc.update', { _id: record._id, scopes: null }, { token: owner.token });
    assert.equal(widened.scopes, null);
    assert.equal((await t.call('NoteRpc.add', { text: 'now allowed' }, { apiKey: key })).status, 200);
  });

  it('keeps a read-only key to operations that change nothing: no write call, no write tool, no upload', async () => {
    const key = await keyWith({ readOnly: true });
    assert.equal((await t.call('NoteRpc.list', {}, { apiKey: key })).status, 200);
    const write = await t.call('NoteRpc.add', { text: 'no' }, { apiKey: key });
    assert.equal(write.status, 403);
    assert.match(write.body.data.error, /read-only, and NoteRpc\.add changes data/);
    const { tools } = await (await mcp(key)).listTools();
    assert.ok(tools.length > 0);
    assert.ok(
      tools.every((tool) => tool.annotations?.readOnlyHint === true),
      'only read tools',
    );
    // An upload key issued to the owner's session, then sent with the read-only key.
    const { uploadUrl } = await t.ok('UserProfileRpc.getUploadKeyForProfilePicture', {}, { token: owner.token });
    const upload = await fetch(uploadUrl.replace(/^https?:\/\/[^/]+/, t.url), {
      method: 'PUT',
      headers: { 'x-api-key': key, 'content-type': 'image/png' },
      body: Buffer.from('89504e470d0a1a0a', 'hex'),
    });
    assert.equal(upload.status, 403);
  });

  it('refuses calls past the rate limit with RATE_LIMITED and Retry-After, counting every door', async () => {
    const key = await keyWith({ rateLimitPerMinute: 4 });
    for (let call = 0; call < 3; call++) assert.equal((await t.call('NoteRpc.list', {}, { apiKey: key })).status, 200);
    assert.ok(Array.isArray((await jsonRpc(key, 'NoteRpc.list')).result.data), 'the fourth, over JSON-RPC');
    const limited = await t.call('NoteRpc.list', {}, { apiKey: key });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.data.code, 'RATE_LIMITED');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
    assert.equal((await jsonRpc(key, 'NoteRpc.list')).error.code, -32029);
    // Other keys of the same user are not slowed.
    assert.equal((await t.call('NoteRpc.list', {}, { token: owner.token })).status, 200);
  });

  /** Opens /ws with a key: its messages as they come, and a round trip that flushes what the server sent before it. */
  async function socket(key: string) {
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws`, { headers: { 'x-api-key': key } });
    const messages: any[] = [];
    const waiters: ((message: any) => void)[] = [];
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      messages.push(message);
      for (const waiter of waiters.splice(0)) waiter(message);
    });
    const status = await new Promise<number>((resolve) => {
      ws.once('open', () => resolve(101));
      ws.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      ws.once('error', () => undefined);
    });
    const next = (match: (message: any) => boolean) =>
      new Promise<any>((resolve) => {
        const found = messages.find(match);
        if (found) return resolve(found);
        const wait = (message: any) => (match(message) ? resolve(message) : waiters.push(wait));
        waiters.push(wait);
      });
    return { ws, status, messages, next, flush: () => (ws.send('{"type":"ping"}'), next((message) => message.type === 'pong')) };
  }

  it('keeps a scoped key to its groups’ events on the WebSocket, and counts an opening against its rate', async () => {
    const scoped = await socket(await keyWith({ scopes: ['ApiKeyRpc'] }));
    const notes = await socket(await keyWith({ scopes: ['NoteRpc.list'] }));
    const everything = await socket(await keyWith({}));
    for (const open of [scoped, notes, everything]) assert.equal(open.status, 101);
    await t.ok('NoteRpc.add', { text: 'heard by some' }, { token: owner.token });
    await everything.next((message) => message.event === 'note.added');
    await notes.next((message) => message.event === 'note.added');
    await scoped.flush();
    assert.ok(!scoped.messages.some((message) => message.event === 'note.added'), 'a key scoped to ApiKeyRpc hears no NoteRpc event');
    for (const open of [scoped, notes, everything]) open.ws.close();

    const limitedKey = await keyWith({ rateLimitPerMinute: 1 });
    const first = await socket(limitedKey);
    assert.equal(first.status, 101);
    const second = await socket(limitedKey);
    assert.equal(second.status, 429);
    first.ws.close();
  });

  it('refuses scopes that name no group or operation, and limits out of range', async () => {
    for (const bad of [{ scopes: ['notes'] }, { scopes: [] }, { scopes: ['NoteRpc.Add'] }, { rateLimitPerMinute: 0 }, { rateLimitPerMinute: 1.5 }]) {
      const response = await t.call('ApiKeyRpc.create', { description: 'bad', ...bad }, { token: owner.token });
      assert.equal(response.status, 400, JSON.stringify(bad));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR');
    }
  });

  it('holds the rate limit across two nodes on one PostgreSQL', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL' }, async () => {
    const shared = await createScratchDatabase(TEST_DATABASE_URL!);
    const nodes = [await startTestApp({ databaseUrl: shared.url }), await startTestApp({ databaseUrl: shared.url })];
    try {
      const user = await nodes[0]!.signup();
      const key = (await nodes[0]!.ok('ApiKeyRpc.create', { description: 'burst', rateLimitPerMinute: 8 }, { token: user.token })).fullKey;
      // A burst of 20 calls spread over both nodes at once: exactly the limit gets through.
      const statuses = await Promise.all(Array.from({ length: 20 }, (_, index) => nodes[index % 2]!.call('NoteRpc.list', {}, { apiKey: key })));
      const allowed = statuses.filter((response) => response.status === 200).length;
      assert.equal(allowed, 8);
      assert.ok(statuses.every((response) => response.status === 200 || response.status === 429));
    } finally {
      for (const node of nodes) await node.close();
      await shared.drop();
    }
  });
});
