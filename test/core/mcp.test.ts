import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { JSON_RPC_BATCH_LIMIT } from '../../core/doors/json-rpc.ts';
import { toolName } from '../../core/doors/mcp.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';
import { errorOf, jsonRpcAnswer, jsonRpcAnswers, resultOf, type WireError } from '../support/wire.ts';
import type { ApiKeyRpcGetDataResult } from '../../clients/typescript/src/operations.ts';

/** The result of tools/list, as far as these tests read it. */
interface ToolList {
  tools: { name: string }[];
}

/** The MCP server at /mcp, spoken to by the official SDK's client over Streamable HTTP. */
describe('MCP at /mcp', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let apiKey: string;
  const clients: Client[] = [];

  before(async () => {
    t = await startTestApp();
    admin = await t.signup();
    apiKey = (await t.ok('ApiKeyRpc.create', { description: 'agent' }, { token: admin.token })).fullKey;
  });
  after(async () => {
    for (const client of clients) await client.close();
    await t.close();
  });

  async function connect(headers: Record<string, string>): Promise<Client> {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers } }));
    clients.push(client);
    return client;
  }

  /** The operations a role may call, as the registry has them. */
  const operationsFor = (roles: string[]) =>
    t.app.registry
      .all()
      .filter((operation) => operation.access === 'public' || roles.includes(operation.access))
      .map((operation) => toolName(operation.method))
      .sort();

  it('initializes and lists a tool for every operation the key may call, with schemas and hints', async () => {
    const client = await connect({ 'x-api-key': apiKey });
    assert.equal(client.getServerVersion()?.name, 'rpc-service');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((tool) => tool.name).sort(), operationsFor(['user', 'staff', 'admin']));
    const getData = tools.find((tool) => tool.name === 'ApiKeyRpc_getData')!;
    assert.equal(getData.title, 'ApiKeyRpc.getData');
    assert.equal(getData.annotations?.readOnlyHint, true);
    assert.equal(getData.annotations?.destructiveHint, false);
    assert.equal(getData.outputSchema?.type, 'object');
    const add = tools.find((tool) => tool.name === 'NoteRpc_add')!;
    assert.equal(add.annotations?.readOnlyHint, false);
    assert.deepEqual(add.inputSchema.required, ['text']);
  });

  it('calls a read and a write as the key, with structured results', async () => {
    const client = await connect({ 'x-api-key': apiKey });
    const added = await client.callTool({ name: 'NoteRpc_add', arguments: { text: 'written by an agent' } });
    assert.equal(added.isError, undefined);
    assert.equal((added.structuredContent as { text: string }).text, 'written by an agent');
    const listed = await client.callTool({ name: 'NoteRpc_list', arguments: {} });
    const notes = (listed.structuredContent as { data: { text: string; userId: string }[] }).data;
    assert.deepEqual(
      notes.map((note) => note.text),
      ['written by an agent'],
    );
    assert.equal(notes[0]!.userId, admin.user._id, 'the note is the key owner’s');
    const keys = await client.callTool({ name: 'ApiKeyRpc_getData', arguments: {} });
    assert.equal((JSON.parse((keys.content as { text: string }[])[0]!.text) as ApiKeyRpcGetDataResult).totalCount, 1);
  });

  it('answers a refused call as a tool error carrying our code, and bad arguments with the issues', async () => {
    const member = await addUser(t, admin.subscriptionId, 'user');
    const client = await connect({ authorization: `Bearer ${member.token}` });
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((tool) => tool.name).sort(), operationsFor(['user']), 'a member sees no staff or admin tools');
    const refused = await client.callTool({ name: 'AdminUserRpc_getData', arguments: {} });
    assert.equal(refused.isError, true);
    assert.equal((JSON.parse((refused.content as { text: string }[])[0]!.text) as WireError).code, 'FORBIDDEN');
    const bad = await client.callTool({ name: 'NoteRpc_add', arguments: { text: '' } });
    assert.equal(bad.isError, true);
    const body = JSON.parse((bad.content as { text: string }[])[0]!.text) as WireError;
    assert.equal(body.code, 'VALIDATION_ERROR');
    assert.deepEqual(
      body.issues?.map((issue) => issue.path),
      ['text'],
    );
    await assert.rejects(client.callTool({ name: 'NopeRpc_nothing', arguments: {} }), /Unknown tool/);
    // An argument the tool does not declare is refused, naming it, and nothing is written.
    const typo = await client.callTool({ name: 'NoteRpc_add', arguments: { text: 'with a typo', colour: 'red' } });
    assert.equal(typo.isError, true);
    const typoError = JSON.parse((typo.content as { text: string }[])[0]!.text) as WireError;
    assert.deepEqual([typoError.code, typoError.issues], ['VALIDATION_ERROR', [{ path: 'colour', message: 'Received unknown parameter: colour' }]]);
    const notes = await t.ok('NoteRpc.list', {}, { token: admin.token });
    assert.ok(!notes.data.some((note: { text: string }) => note.text === 'with a typo'));
  });

  /** Posts raw JSON-RPC to /mcp as a Streamable HTTP client would, with the given credential. */
  async function post(body: unknown, headers: Record<string, string>) {
    const response = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...headers },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    const json: unknown = text ? JSON.parse(text) : undefined;
    return { status: response.status, text, json };
  }
  /** The answer of a single call, and the answers of a batch: the MCP door's errors carry data of their own. */
  const answerOf = (response: { json: unknown }) => jsonRpcAnswer<unknown>(response.json);
  const answersOf = (response: { json: unknown }) => jsonRpcAnswers<unknown>(response.json);
  const listTools = (id: number) => ({ jsonrpc: '2.0', method: 'tools/list', params: {}, id });

  it('lists the tools once per request: a batch of tools/list answers one list and refuses the others', async () => {
    const single = await post(listTools(1), { 'x-api-key': apiKey });
    assert.ok(resultOf<ToolList>(answerOf(single)).tools.length > 10);
    const batch = await post(
      Array.from({ length: JSON_RPC_BATCH_LIMIT }, (_, index) => listTools(index)),
      { 'x-api-key': apiKey },
    );
    const answers = answersOf(batch);
    assert.equal(answers.length, JSON_RPC_BATCH_LIMIT);
    const listed = answers.filter((answer) => answer.result);
    assert.equal(listed.length, 1);
    assert.deepEqual(listed[0]!.result, answerOf(single).result);
    for (const answer of answers.filter((answer) => answer.error)) assert.match(errorOf(answer).message, /tools\/list is answered once per request/);
    assert.ok(batch.text.length < 2 * single.text.length, `a batch of tools/list answers ${batch.text.length} bytes`);

    const tooMany = await post(
      Array.from({ length: JSON_RPC_BATCH_LIMIT + 1 }, (_, index) => listTools(index)),
      { 'x-api-key': apiKey },
    );
    assert.equal(errorOf(answerOf(tooMany)).code, -32600);
    assert.match(errorOf(answerOf(tooMany)).message, new RegExp(`at most ${JSON_RPC_BATCH_LIMIT}`));
  });

  it("meters tools/list by the key's rate, as its tool calls", async () => {
    const { fullKey } = await t.ok('ApiKeyRpc.create', { description: 'lists tools', rateLimitPerMinute: 2 }, { token: admin.token });
    const outcomes = [];
    for (let round = 0; round < 3; round++) outcomes.push(answerOf(await post(listTools(round), { 'x-api-key': fullKey })));
    assert.ok(outcomes[0]!.result && outcomes[1]!.result);
    assert.match(errorOf(outcomes[2]).message, /Rate limit of 2 calls a minute reached/);
  });

  it('refuses a client without a valid credential', async () => {
    await assert.rejects(connect({}), /401|Authentication required/);
    await assert.rejects(connect({ 'x-api-key': 'ak0000000000000_not-a-key' }), /401|Authentication|Invalid/);
    const response = await fetch(`${t.url}/mcp`, { method: 'GET', headers: { 'x-api-key': apiKey } });
    assert.equal(response.status, 405);
  });
});
