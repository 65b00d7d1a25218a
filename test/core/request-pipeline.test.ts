import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { definePlugin, defineOperation, type Deps, type RequestContext } from '../../core/plugin/sdk.ts';
import { Note } from '../fixtures/notes-plugin/note.entity.ts';
import { routeJson, startTestApp, type TestApp } from '../support/harness.ts';
import { putUpload } from '../support/uploads.ts';
import { addUser, type Member } from '../support/users.ts';
import { logLines, refusalOf } from '../support/wire.ts';

/** Writes the same note twice: the second insert breaks the notes table's primary key, as a real duplicate would. */
async function insertTwice(ctx: RequestContext, id: string): Promise<never> {
  const row = { id, subscriptionId: ctx.subscriptionId!, userId: ctx.userId!, text: 'twice', createdAt: new Date() };
  await ctx.em.insert(Note, row);
  await ctx.em.insert(Note, row);
  throw new Error('the second insert was expected to fail');
}

const DEPS = ['http'] as const;
type ProbeDeps = Deps<typeof DEPS>;

/** The same failures behind an operation and behind a plugin route made with the SDK's route helper. */
const probePlugin = definePlugin<ProbeDeps>({
  id: 'pipeline-probe',
  group: 'PipelineProbeRpc',
  coreVersion: '^2.0.0',
  dependsOn: ['notes'],
  deps: DEPS,
  operations: {
    duplicate: defineOperation({
      access: 'user',
      describe: 'Insert one note twice.',
      params: v.object({ id: v.string() }),
      handler: ({ params, ctx }) => insertTwice(ctx, params.id),
    }),
    explode: defineOperation({
      access: 'user',
      describe: 'Throw a plain Error.',
      params: v.object({}),
      handler: () => Promise.reject(new Error('probe exploded')),
    }),
    adminOnly: defineOperation({ access: 'admin', describe: 'Answer admins.', params: v.object({}), handler: () => ({ fine: true }) }),
  },
  routes(router, { http }) {
    router.put(
      '/probe/duplicate/:id',
      http.route({ access: 'user', serves: 'PipelineProbeRpc', kind: 'write' }, ({ ctx, http: exchange }) => insertTwice(ctx, exchange.params.id!)),
    );
    router.get(
      '/probe/explode',
      http.route({ access: 'user', serves: 'PipelineProbeRpc', kind: 'read' }, () => Promise.reject(new Error('probe exploded'))),
    );
    router.get(
      '/probe/admin-only',
      http.route(
        { access: 'admin', serves: 'PipelineProbeRpc', kind: 'read' },
        ({ http: exchange }) => void (exchange.body = { success: true, data: { fine: true } }),
      ),
    );
    router.get(
      '/probe/public',
      http.route(
        { access: 'public', serves: 'PipelineProbeRpc', kind: 'read' },
        ({ ctx, http: exchange }) => void (exchange.body = { success: true, data: { userId: ctx.userId } }),
      ),
    );
  },
});

describe('one request pipeline for RPC calls, uploads, downloads and plugin routes', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;

  before(async () => {
    t = await startTestApp({ plugins: ['auth', 'notes', 'pipeline-probe'], extraPlugins: [probePlugin] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
  });
  after(() => t.close());

  const route = (method: string, path: string, token?: string) => routeJson(t, method, path, token);
  const rpc = async (method: string, params: object, token?: string) => {
    const answer = await t.call(method, params, token ? { token } : {});
    return { status: answer.status, body: answer.body };
  };

  it('answers a unique violation as CONFLICT on a route as on an RPC call', async () => {
    const viaRpc = await rpc('PipelineProbeRpc.duplicate', { id: randomUUID() }, admin.token);
    const viaRoute = await route('PUT', `/probe/duplicate/${randomUUID()}`, admin.token);
    assert.deepEqual(viaRpc, {
      status: 409,
      body: { success: false, data: { code: 'CONFLICT', error: 'A record with the same unique values already exists' } },
    });
    assert.deepEqual(viaRoute, viaRpc);
  });

  it('answers an unexpected error as INTERNAL with an error id, logged with its cause, on both doors', async () => {
    const viaRpc = await rpc('PipelineProbeRpc.explode', {}, admin.token);
    const viaRoute = await route('GET', '/probe/explode', admin.token);
    for (const answer of [viaRpc, viaRoute]) {
      assert.equal(answer.status, 500);
      assert.equal(answer.body.data.code, 'INTERNAL');
      assert.match(answer.body.data.error, new RegExp(`^Internal error \\(error id ${answer.body.data.errorId}\\)$`));
      assert.doesNotMatch(JSON.stringify(answer.body), /probe exploded/);
    }
    const logged = logLines(t.logs);
    const rpcLine = logged.find((line) => line.errorId === viaRpc.body.data.errorId);
    const routeLine = logged.find((line) => line.errorId === refusalOf(viaRoute.body).errorId);
    assert.deepEqual([rpcLine?.msg, rpcLine?.method], ['operation failed', 'PipelineProbeRpc.explode']);
    assert.deepEqual([routeLine?.msg, routeLine?.route], ['route failed', '/probe/explode']);
    assert.match(JSON.stringify(routeLine?.err), /probe exploded/);
  });

  it('refuses a missing credential and a role too low alike, and runs a public route anonymously', async () => {
    const anonymousRpc = await rpc('PipelineProbeRpc.explode', {});
    const anonymousRoute = await route('GET', '/probe/explode');
    const anonymousUpload = await putUpload(t, 'any-key', Buffer.from('x'), 'text/plain');
    for (const answer of [anonymousRpc, anonymousRoute, { status: anonymousUpload.status, body: anonymousUpload.body }]) {
      assert.deepEqual(answer, {
        status: 401,
        body: { success: false, data: { code: 'UNAUTHENTICATED', error: 'Authentication required: send X-API-Key or a session token' } },
      });
    }

    const forbiddenRpc = await rpc('PipelineProbeRpc.adminOnly', {}, member.token);
    const forbiddenRoute = await route('GET', '/probe/admin-only', member.token);
    assert.deepEqual([forbiddenRpc.status, forbiddenRpc.body.data.code], [403, 'FORBIDDEN']);
    assert.deepEqual([forbiddenRoute.status, refusalOf(forbiddenRoute.body).code], [403, 'FORBIDDEN']);
    assert.equal(refusalOf(forbiddenRoute.body).error, 'GET /probe/admin-only requires the admin role');
    assert.deepEqual((await route('GET', '/probe/admin-only', admin.token)).body, { success: true, data: { fine: true } });

    assert.deepEqual(await route('GET', '/probe/public', 'not-a-token'), { status: 200, body: { success: true, data: { userId: null } } });
    assert.deepEqual((await route('GET', '/probe/public', member.token)).body.data, { userId: member.user._id });
  });

  it('lets a route a browser opens answer with a page: the OAuth routes, with the status the pipeline gives', async () => {
    const response = await fetch(`${t.url}/auth/no-such-provider`, { redirect: 'manual' });
    assert.equal(response.status, 404);
    assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(await response.text(), /<h1>Login failed<\/h1><p>OAuth provider &quot;no-such-provider&quot; is not configured<\/p>/);
  });

  it('gives uploads and downloads the answers RPC calls get: an unknown upload key or file is NOT_FOUND', async () => {
    const download = await route('GET', `/api/files/${randomUUID()}`, member.token);
    assert.deepEqual(download, {
      status: 404,
      body: { success: false, data: { code: 'NOT_FOUND', error: `File ${refusalOf(download.body).error.split(' ')[1]} not found` } },
    });
    const upload = await putUpload(t, 'no-such-key', Buffer.from('x'), 'text/plain', { token: member.token });
    assert.deepEqual([upload.status, upload.body], [404, { success: false, data: { code: 'NOT_FOUND', error: 'Upload key not found' } }]);
  });
});
