import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, HTTPTransport, JSONRPCError, RequestManager } from '@open-rpc/client-js';
import { createRequire } from 'node:module';
import { startTestApp, type TestApp } from '../support/harness.ts';

// Required rather than imported: its type declarations pull in a package's TypeScript source that this project's strict tsconfig would check.
const { validateOpenRPCDocument } = createRequire(import.meta.url)('@open-rpc/schema-utils-js') as { validateOpenRPCDocument(document: unknown): true | Error };

/** What the tokens of a JSON pointer (without its `#/`) reach in `document`: undefined where it lands on nothing. */
const reach = (document: unknown, pointer: string): unknown =>
  pointer.split('/').reduce<unknown>((node, token) => (node === null || node === undefined ? undefined : (node as Record<string, unknown>)[token]), document);

/** The OpenRPC document at GET /openrpc.json and rpc.discover, judged by the OpenRPC project's own validator and client. */
describe('OpenRPC', () => {
  let t: TestApp;
  let apiKey: string;

  before(async () => {
    t = await startTestApp();
    const owner = await t.signup();
    apiKey = (await t.ok('ApiKeyRpc.create', { description: 'open-rpc client' }, { token: owner.token })).fullKey;
  });
  after(() => t.close());

  const fetchDocument = async () => (await fetch(`${t.url}/openrpc.json`)).json();
  const clientWith = (headers: Record<string, string>) => new Client(new RequestManager([new HTTPTransport(`${t.url}/api/rpc`, { headers })]));

  it('serves a valid OpenRPC 1.3 document of every operation, params by name, results, access, kind, errors and events', async () => {
    const document = await fetchDocument();
    assert.equal(validateOpenRPCDocument(document), true);
    assert.match(document.openrpc, /^1\.3\./);
    assert.deepEqual(document.servers, [{ name: 'this service', url: `${t.url}/api/rpc` }]);
    assert.deepEqual(
      document.methods.map((method: { name: string }) => method.name),
      t.app.registry.all().map((operation) => operation.method),
    );
    const create = document.methods.find((method: { name: string }) => method.name === 'ApiKeyRpc.create');
    assert.equal(create.paramStructure, 'by-name');
    assert.deepEqual(
      create.params.find((param: { name: string }) => param.name === 'description'),
      {
        name: 'description',
        required: true,
        schema: { type: 'string', minLength: 1, maxLength: 500 },
      },
    );
    assert.equal(create['x-access'], 'user');
    assert.equal(create['x-kind'], 'write');
    // Params refuse keys they do not declare, nested objects included; a map of the caller's keys stays open.
    const memory = document.methods
      .find((method: { name: string }) => method.name === 'MemoryRpc.saveMemory')
      .params.find((param: { name: string }) => param.name === 'memory');
    assert.equal(memory.schema.additionalProperties, false);
    assert.deepEqual(memory.schema.properties.metadata.additionalProperties, {});
    const add = document.methods.find((method: { name: string }) => method.name === 'NoteRpc.add');
    assert.equal(add.result.schema.type, 'object');
    assert.ok(add.result.schema.properties._id, 'the record schema reaches the document');
    const refs = add.errors.map((error: { $ref: string }) => error.$ref);
    assert.ok(refs.includes('#/components/errors/UNAUTHENTICATED'));
    assert.deepEqual(document.components.errors.UNAUTHENTICATED, { code: -32001, message: 'UNAUTHENTICATED', data: { code: 'UNAUTHENTICATED', status: 401 } });
    assert.equal(document.components.errors.WORKFLOW_FAILED.code, -32022, "a plugin's own code, numbered by its status");
    const signup = document.methods.find((method: { name: string }) => method.name === 'AuthRpc.signup');
    assert.equal(signup['x-access'], 'public');
    assert.ok(!signup.errors.some((error: { $ref: string }) => error.$ref.endsWith('/UNAUTHENTICATED')));
    assert.ok(document['x-events'].some((event: { name: string }) => event.name === 'note.added'));
    const taskCreated = document['x-events'].find((event: { name: string }) => event.name === 'task.created');
    assert.equal(taskCreated.description, 'A task was created: {task}.');
    assert.deepEqual(taskCreated.schema.required, ['task'], "the declared payload's JSON Schema");
    assert.equal(taskCreated.schema.properties.task.properties.createdAt.format, 'date-time', 'dates as clients receive them');
    // A recursive schema (a task tree) refers to its definitions in the document's shared schemas, and every reference lands.
    const tree = document.methods.find((method: { name: string }) => method.name === 'TaskRpc.createTaskTree');
    assert.match(JSON.stringify(tree.params), /"#\/components\/schemas\/TaskRpc\.createTaskTree\.params\.\w+"/);
    const dangling = [...JSON.stringify(document).matchAll(/"\$ref":"#\/([^"]+)"/g)]
      .map(([, pointer]) => pointer!)
      .filter((pointer) => reach(document, pointer) === undefined);
    assert.deepEqual(dangling, []);
  });

  it('answers rpc.discover with the same document', async () => {
    const discovered = await clientWith({}).request({ method: 'rpc.discover', params: {} });
    assert.deepEqual(discovered, await fetchDocument());
  });

  it('is called by the OpenRPC client with an API key: ApiKeyRpc.getData, MemoryRpc.saveMemory and recallMemories', async () => {
    const client = clientWith({ 'x-api-key': apiKey });
    const keys = await client.request({ method: 'ApiKeyRpc.getData', params: {} });
    assert.equal(keys.totalCount, 1);
    assert.equal(keys.data[0].description, 'open-rpc client');
    const saved = await client.request({
      method: 'MemoryRpc.saveMemory',
      params: { scope: 'user', memory: { content: 'The deploy window is Tuesday at 14:00 UTC.' } },
    });
    assert.equal(saved.success, true);
    const recalled = await client.request({ method: 'MemoryRpc.recallMemories', params: { scope: 'user', queryText: 'when can we deploy?' } });
    assert.equal(recalled.memories[0].id, saved.memoryId);
    assert.equal(recalled.memories[0].content, 'The deploy window is Tuesday at 14:00 UTC.');
  });

  it('gives the client JSON-RPC errors carrying our code and issues', async () => {
    await assert.rejects(clientWith({}).request({ method: 'ApiKeyRpc.getData', params: {} }), (error: unknown) => {
      assert.ok(error instanceof JSONRPCError);
      assert.equal(error.code, -32001);
      assert.equal((error.data as { code: string }).code, 'UNAUTHENTICATED');
      return true;
    });
    await assert.rejects(clientWith({ 'x-api-key': apiKey }).request({ method: 'MemoryRpc.recallMemories', params: { scope: 'user' } }), (error: unknown) => {
      assert.ok(error instanceof JSONRPCError);
      assert.equal(error.code, -32602);
      assert.deepEqual(
        (error.data as { issues: { path: string }[] }).issues.map((issue) => issue.path),
        ['queryText'],
      );
      return true;
    });
  });
});
