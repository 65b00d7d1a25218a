import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ApiKeyRpcCreateParams } from '../../../test/support/caller.ts';
import { refused, type Refusal } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';

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

  const keyWith = async (limits: Omit<ApiKeyRpcCreateParams, 'description'>) =>
    (await t.as(owner).ApiKeyRpc.create({ description: 'limited', ...limits })).fullKey;
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
    // The spec envelope over HTTP is one of the doors this test checks.
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
    const outsideTool = await client.callTool({ name: 'ApiKeyRpc_getData', arguments: {} });
    assert.equal(outsideTool.isError, true);
    assert.equal(JSON.parse((outsideTool.content as { text: string }[])[0]!.text).code, 'FORBIDDEN');

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
    const viaKey = t.as({ apiKey: key });
    await viaKey.call('NoteRpc.list');
    await refused(viaKey.call('NoteRpc.add', { text: 'no' }), 'FORBIDDEN');
    const [record] = (await t.as(owner).ApiKeyRpc.getData()).data.filter((entry) => entry.scopes?.includes('NoteRpc.list'));
    assert.deepEqual(record!.scopes, ['NoteRpc.list']);
    const widened = await t.as(owner).ApiKeyRpc.update({ _id: record!._id, scopes: null });
    assert.equal(widened.scopes, null);
    await viaKey.call('NoteRpc.add', { text: 'now allowed' });
  });

  // What each door admits for a scoped, read-only or rate-limited key is test/core/doors.test.ts's; MCP's listing is here.
  it('lists a read-only key only the tools that change nothing', async () => {
    const key = await keyWith({ readOnly: true });
    const { tools } = await (await mcp(key)).listTools();
    assert.ok(tools.length > 0);
    assert.ok(
      tools.every((tool) => tool.annotations?.readOnlyHint === true),
      'only read tools',
    );
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

  it('never lets a key grant or lift beyond itself: no wider scopes, no lost read-only flag, no higher or absent rate', async () => {
    const scoped = await t.as(owner).ApiKeyRpc.create({ description: 'scoped', scopes: ['ApiKeyRpc', 'NoteRpc.list'] });
    const forbidden = async (call: Promise<unknown>, pattern: RegExp) => assert.match((await refused(call, 'FORBIDDEN', String(pattern))).message, pattern);
    const viaScoped = t.as({ apiKey: scoped.fullKey }).ApiKeyRpc;
    await forbidden(viaScoped.create({ description: 'all' }), /beyond its own scopes .*every group/);
    await forbidden(viaScoped.create({ description: 'notes', scopes: ['NoteRpc'] }), /NoteRpc is wider/);
    await forbidden(viaScoped.update({ _id: scoped._id, scopes: null }), /beyond its own scopes/);
    const narrower = await viaScoped.create({ description: 'narrower', scopes: ['ApiKeyRpc.getData', 'NoteRpc.list'] });
    assert.deepEqual(narrower.scopes, ['ApiKeyRpc.getData', 'NoteRpc.list']);

    const reader = await t.as(owner).ApiKeyRpc.create({ description: 'reader', readOnly: true, scopes: ['ApiKeyRpc'] });
    // A read-only key cannot call ApiKeyRpc.create at all; the rule holds for an update that a session lets through to it too.
    await forbidden(
      t.as({ apiKey: reader.fullKey }).ApiKeyRpc.create({ description: 'writer', readOnly: true }),
      /read-only, and ApiKeyRpc\.create changes data/,
    );

    const limited = await t.as(owner).ApiKeyRpc.create({ description: 'limited', rateLimitPerMinute: 50 });
    const viaLimited = t.as({ apiKey: limited.fullKey }).ApiKeyRpc;
    await forbidden(viaLimited.update({ _id: limited._id, rateLimitPerMinute: null }), /at most that/);
    await forbidden(viaLimited.create({ description: 'unlimited' }), /limited to 50 calls a minute/);
    await forbidden(viaLimited.create({ description: 'faster', rateLimitPerMinute: 51 }), /at most that/);
    // Nothing changed by a refusal.
    const stored = (await t.as(owner).ApiKeyRpc.getData()).data.find((key) => key._id === limited._id);
    assert.equal(stored?.rateLimitPerMinute, 50);
    assert.equal((await viaLimited.create({ description: 'slower', rateLimitPerMinute: 10 })).rateLimitPerMinute, 10);
    // A read-only flag kept, and scopes within the caller's, pass the same way; a session is bounded by its role alone.
    assert.equal((await t.as(owner).ApiKeyRpc.update({ _id: limited._id, rateLimitPerMinute: null })).rateLimitPerMinute, null);
  });

  it('refuses scopes that name no group or operation, and limits out of range', async () => {
    for (const bad of [{ scopes: ['notes'] }, { scopes: [] }, { scopes: ['NoteRpc.Add'] }, { rateLimitPerMinute: 0 }, { rateLimitPerMinute: 1.5 }]) {
      await refused(t.as(owner).call('ApiKeyRpc.create', { description: 'bad', ...bad }), 'VALIDATION_ERROR', JSON.stringify(bad));
    }
  });

  it('holds the rate limit across two nodes on one PostgreSQL', { skip: !TEST_DATABASE_URL && 'needs TEST_DATABASE_URL' }, async () => {
    const shared = await createScratchDatabase(TEST_DATABASE_URL!);
    const nodes = [await startTestApp({ databaseUrl: shared.url }), await startTestApp({ databaseUrl: shared.url })];
    try {
      const user = await nodes[0]!.signup();
      const key = (await nodes[0]!.as(user).ApiKeyRpc.create({ description: 'burst', rateLimitPerMinute: 8 })).fullKey;
      // A burst of 20 calls spread over both nodes at once: exactly the limit gets through.
      const answers = await Promise.allSettled(Array.from({ length: 20 }, (_, index) => nodes[index % 2]!.as({ apiKey: key }).call('NoteRpc.list')));
      const allowed = answers.filter((answer) => answer.status === 'fulfilled').length;
      assert.equal(allowed, 8);
      assert.ok(answers.every((answer) => answer.status === 'fulfilled' || (answer.reason as Refusal).code === 'RATE_LIMITED'));
    } finally {
      for (const node of nodes) await node.close();
      await shared.drop();
    }
  });
});
