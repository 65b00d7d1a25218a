import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startTestApp, type Session, type TestApp } from '../support/harness.ts';
import { authorizeApp } from '../support/oauth.ts';
import { eventually } from '../support/peers.ts';
import { addUser } from '../support/users.ts';

/** A PNG's first bytes: a file that is not text, read back as a blob. */
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 3]);

/** Memories, knowledge-base documents, documentation pages and data scope files as MCP resources, read with the caller's rights. */
describe('MCP resources', () => {
  let t: TestApp;
  let admin: Session;
  let other: Session;
  const clients: Client[] = [];
  const ids = { memories: [] as string[], global: '', theirs: '', document: '', page: '', otherDocument: '', otherGlobal: '' };

  async function connect(headers: Record<string, string>): Promise<Client> {
    const client = new Client({ name: 'resource-reader', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers } }));
    clients.push(client);
    return client;
  }
  const asAdmin = () => connect({ authorization: `Bearer ${admin.token}` });
  /** Every resource of every page, following nextCursor; the number of pages too. */
  async function listAll(client: Client) {
    const resources: { uri: string; name: string; mimeType?: string }[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listResources(cursor ? { cursor } : {});
      resources.push(...page.resources);
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 20);
    return { resources, pages };
  }
  const codeOf = (promise: Promise<unknown>) =>
    promise.then(
      () => assert.fail('expected a refusal'),
      (error: unknown) => {
        assert.ok(error instanceof McpError, String(error));
        return error.code;
      },
    );

  before(async () => {
    t = await startTestApp({ plugins: ['auth', 'api-key', 'oauth-server', 'memory', 'knowledge-base', 'documents', 'checkpoint'], withNotes: false });
    admin = await t.signup();
    other = await t.signup();
    const me = t.as(admin);
    for (let index = 0; index < 55; index++) {
      ids.memories.push((await me.MemoryRpc.saveMemory({ scope: 'user', memory: { content: `Fact number ${index} about the garden` } })).memoryId);
    }
    ids.global = (await me.MemoryRpc.saveMemory({ scope: 'global', memory: { content: 'The office opens at nine' } })).memoryId;
    const member = await addUser(t, admin.subscriptionId, 'user');
    ids.theirs = (await t.as(member).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'A member keeps this to themselves' } })).memoryId;
    ids.document = (await me.KnowledgeBaseAdminRpc.ingestText({ name: 'Opening hours', content: '# Opening hours\n\nWe open at nine.' })).document._id;
    ids.otherDocument = (await t.as(other).KnowledgeBaseAdminRpc.ingestText({ name: 'Secret plans', content: '# Plans\n\nNot yours.' })).document._id;
    ids.otherGlobal = (await t.as(other).MemoryRpc.saveMemory({ scope: 'global', memory: { content: 'Only the team’s, none of mine' } })).memoryId;
    await eventually(async () => ((await me.KnowledgeBaseAdminRpc.getDocument({ docId: ids.document })).content ? true : undefined));
    ids.page = (await me.DocumentRpc.create({ documentInstanceId: 'handbook', title: 'Holidays', content: 'Take them.' }))._id;
    await me.CheckpointRpc.writeFile({ scope: 'notes', path: 'guide/readme.md', content: '# Guide' });
    await me.CheckpointRpc.writeFile({ scope: 'notes', path: 'logo.png', content: PNG.toString('base64'), encoding: 'base64' });
  });
  after(async () => {
    for (const client of clients) await client.close();
    await t?.close();
  });

  it('offers a template for each kind of resource', async () => {
    const { resourceTemplates } = await (await asAdmin()).listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((template) => template.uriTemplate).sort(), [
      'checkpoint://{scope}/{+path}',
      'docs://pages/{docId}',
      'kb://documents/{docId}',
      'memory://{scope}/{memoryId}',
    ]);
  });

  it("lists the caller's resources a page at a time, each once, and nobody else's", async () => {
    const { resources, pages } = await listAll(await asAdmin());
    const uris = resources.map((resource) => resource.uri);
    assert.equal(new Set(uris).size, uris.length, 'no resource twice');
    assert.ok(pages >= 3, `${pages} pages: 55 memories do not fit one`);
    for (const id of ids.memories) assert.ok(uris.includes(`memory://user/${id}`), id);
    assert.ok(uris.includes(`memory://global/${ids.global}`));
    assert.ok(uris.includes(`kb://documents/${ids.document}`));
    assert.ok(uris.includes('checkpoint://notes/guide/readme.md'));
    assert.ok(uris.includes('checkpoint://notes/logo.png'));
    assert.equal(uris.includes(`memory://user/${ids.theirs}`), false, "a member's own memory is theirs");
    assert.equal(uris.includes(`kb://documents/${ids.otherDocument}`), false, "another subscription's document");
    assert.equal(resources.find((resource) => resource.uri === `kb://documents/${ids.document}`)?.mimeType, 'text/markdown');
  });

  it('reads each kind: text as text, other files as bytes', async () => {
    const client = await asAdmin();
    const text = async (uri: string) => ((await client.readResource({ uri })).contents[0] as { text: string }).text;
    assert.equal(await text(`memory://user/${ids.memories[3]}`), 'Fact number 3 about the garden');
    assert.equal(await text(`memory://global/${ids.global}`), 'The office opens at nine');
    assert.match(await text(`kb://documents/${ids.document}`), /We open at nine/);
    assert.equal(await text(`docs://pages/${ids.page}`), 'Take them.');
    assert.equal(await text('checkpoint://notes/guide/readme.md'), '# Guide');
    const [logo] = (await client.readResource({ uri: 'checkpoint://notes/logo.png' })).contents as { blob: string; mimeType: string }[];
    assert.equal(logo!.mimeType, 'application/octet-stream');
    assert.deepEqual(Buffer.from(logo!.blob, 'base64'), PNG);
  });

  it("answers another user's, another tenant's or an unknown resource as not found, and a bad cursor as invalid", async () => {
    const client = await asAdmin();
    assert.equal(await codeOf(client.readResource({ uri: `memory://user/${ids.theirs}` })), -32002);
    assert.equal(await codeOf(client.readResource({ uri: `kb://documents/${ids.otherDocument}` })), -32002);
    assert.equal(await codeOf(client.readResource({ uri: 'gopher://nothing/here' })), -32002);
    assert.equal(await codeOf(client.listResources({ cursor: 'not-a-cursor' })), -32602);
    const outsider = await connect({ authorization: `Bearer ${other.token}` });
    assert.equal(await codeOf(outsider.readResource({ uri: `memory://global/${ids.global}` })), -32002);
    // A caller with no memories of their own still finds the subscription's, past the empty page of theirs.
    const { resources } = await listAll(outsider);
    assert.ok(
      resources.some((resource) => resource.uri === `memory://global/${ids.otherGlobal}`),
      JSON.stringify(resources),
    );
  });

  it("holds an app to what it was granted: only its groups' resources are offered, listed and read", async () => {
    const app = await authorizeApp(t, admin, { door: 'mcp', scope: 'MemoryRpc' });
    const client = await connect({ authorization: `Bearer ${app.accessToken}` });
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(
      resourceTemplates.map((template) => template.name),
      ['memories'],
    );
    const { resources } = await listAll(client);
    assert.ok(resources.length >= 56);
    assert.ok(resources.every((resource) => resource.uri.startsWith('memory://')));
    assert.equal(await codeOf(client.readResource({ uri: `kb://documents/${ids.document}` })), -32003, 'FORBIDDEN: not granted');
  });
});
