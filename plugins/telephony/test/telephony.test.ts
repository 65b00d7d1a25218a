import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { parsePool, telephonySettings } from '../config.ts';
import { refused, type Credential, type Refusal } from '../../../test/support/caller.ts';
import { startTestApp, type Session, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

const PLUGINS = ['auth', 'admin-user', 'telephony'];
const OPERATIONS = [
  'getAvailableExtensions',
  'assignAgentExtension',
  'assignUserExtension',
  'disassociateUserExtension',
  'disassociateAgentExtension',
  'getExtensionsForUser',
  'getExtensionsForAgent',
] as const;

/** TelephonyManagerRpc of one app: an operation named in a table (its params as the table gives them), and the three reads. */
function telephony(t: TestApp) {
  const call = (method: (typeof OPERATIONS)[number], params: Record<string, unknown>, who: Credential) =>
    t.as(who).call(`TelephonyManagerRpc.${method}`, params);
  return {
    call,
    available: (who: Credential) => t.as(who).TelephonyManagerRpc.getAvailableExtensions(),
    ofUser: (who: Credential, appUserId: string) => t.as(who).TelephonyManagerRpc.getExtensionsForUser({ appUserId }),
    ofAgent: (who: Credential, agentContactId: string) => t.as(who).TelephonyManagerRpc.getExtensionsForAgent({ agentContactId }),
  };
}

describe('TelephonyManagerRpc with the local provider', () => {
  let t: TestApp;
  let api: ReturnType<typeof telephony>;
  let admin: Session;
  let member: Member;
  let colleague: Member;
  let stranger: Session;
  const POOL = ['100', '101', '102', '103', '104', '0200'];

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: PLUGINS, env: { TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '100-104, 0200,101' } });
    api = telephony(t);
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    colleague = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('assigns an extension to a user, lists it, keeps it out of the available ones and gives it back when disassociated', async () => {
    assert.deepEqual(await api.available(member), POOL, 'the configured pool, duplicates dropped');
    assert.deepEqual(await api.call('assignUserExtension', { appUserId: member.user._id, extension: '102' }, admin), {
      success: true,
      extension: '102',
      appUserId: member.user._id,
    });
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '0200' }, admin);
    assert.deepEqual(await api.ofUser(member, member.user._id), ['102', '0200'], 'numeric order');
    assert.deepEqual(await api.ofUser(colleague, member.user._id), ['102', '0200'], 'any user of the subscription reads them');
    assert.deepEqual(await api.ofUser(member, colleague.user._id), []);
    assert.deepEqual(await api.available(member), ['100', '101', '103', '104']);

    await refused(api.call('disassociateAgentExtension', { extension: '102' }, admin), 'NOT_FOUND', 'no agent holds it');
    assert.deepEqual(await api.ofUser(member, member.user._id), ['102', '0200'], 'still the user’s');

    assert.deepEqual(await api.call('disassociateUserExtension', { extension: '102' }, admin), { success: true, extension: '102' });
    assert.deepEqual(await api.ofUser(member, member.user._id), ['0200']);
    assert.deepEqual(await api.available(member), ['100', '101', '102', '103', '104']);
    const again = await refused(api.call('disassociateUserExtension', { extension: '102' }, admin), 'NOT_FOUND');
    assert.equal(again.message, 'Extension 102 is not assigned to a user');
    await api.call('disassociateUserExtension', { extension: '0200' }, admin);
  });

  it('refuses a second assignment of an extension with CONFLICT naming its holder, whoever asks for it', async () => {
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '103' }, admin);
    const toUser = await refused(api.call('assignUserExtension', { appUserId: colleague.user._id, extension: '103' }, admin), 'CONFLICT');
    assert.equal(toUser.message, `Extension 103 is already assigned to user ${member.user._id}`);
    await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '103' }, admin), 'CONFLICT');
    await refused(api.call('assignAgentExtension', { extension: '103', agentConfigId: 'agent-7' }, admin), 'CONFLICT');
    assert.deepEqual(await api.ofUser(member, colleague.user._id), []);
    assert.deepEqual(await api.ofAgent(member, 'agent-7'), []);
    await api.call('disassociateUserExtension', { extension: '103' }, admin);
  });

  it('gives an extension assigned by several admins at once to exactly one of them', async () => {
    const admins = [admin, await addUser(t, admin.subscriptionId, 'admin'), await addUser(t, admin.subscriptionId, 'admin')];
    const answers = await Promise.allSettled([
      ...admins.map((session) => api.call('assignUserExtension', { appUserId: member.user._id, extension: '104' }, session)),
      ...admins.map((session, n) => api.call('assignAgentExtension', { extension: '104', agentConfigId: `racer-${n}` }, session)),
    ]);
    const outcomes = answers.map((answer) => (answer.status === 'fulfilled' ? 'assigned' : (answer.reason as Refusal).code)).sort();
    assert.deepEqual(outcomes, ['CONFLICT', 'CONFLICT', 'CONFLICT', 'CONFLICT', 'CONFLICT', 'assigned']);
    const holders = [
      ...(await api.ofUser(member, member.user._id)),
      ...(await api.ofAgent(member, 'racer-0')),
      ...(await api.ofAgent(member, 'racer-1')),
      ...(await api.ofAgent(member, 'racer-2')),
    ];
    assert.deepEqual(holders, ['104'], 'one holder, the one that was answered success');
    assert.ok(!(await api.available(member)).includes('104'));
    const winner = answers.findIndex((answer) => answer.status === 'fulfilled');
    await api.call(winner < 3 ? 'disassociateUserExtension' : 'disassociateAgentExtension', { extension: '104' }, admin);
  });

  it('assigns extensions to agents, found by their contact id or their platform id', async () => {
    assert.deepEqual(await api.call('assignAgentExtension', { extension: '100', agentConfigId: 'agent-1' }, admin), {
      success: true,
      extension: '100',
      agentConfigId: 'agent-1',
      agentContactId: null,
    });
    await api.call('assignAgentExtension', { extension: '101', agentConfigId: 'agent-2', agentContactId: 'contact-2' }, admin);
    assert.deepEqual(await api.ofAgent(member, 'agent-1'), ['100']);
    assert.deepEqual(await api.ofAgent(member, 'contact-2'), ['101']);
    assert.deepEqual(await api.ofAgent(member, 'agent-2'), ['101'], 'either id finds it');
    assert.deepEqual(await api.ofAgent(member, 'nobody'), []);
    assert.deepEqual(await api.available(member), ['102', '103', '104', '0200']);

    const userHeld = await refused(api.call('disassociateUserExtension', { extension: '100' }, admin), 'NOT_FOUND');
    assert.equal(userHeld.message, 'Extension 100 is not assigned to a user');
    assert.deepEqual(await api.call('disassociateAgentExtension', { extension: '100' }, admin), { success: true, extension: '100' });
    await api.call('disassociateAgentExtension', { extension: '101' }, admin);
    assert.deepEqual(await api.ofAgent(member, 'contact-2'), []);
  });

  it('refuses bad params, extensions outside the pool and users it does not know, changing nothing', async () => {
    const before = await api.available(member);
    for (const [method, params, path] of [
      ['assignUserExtension', { appUserId: member.user._id, extension: '999' }, 'extension'],
      ['assignAgentExtension', { extension: '999', agentConfigId: 'agent-1' }, 'extension'],
      ['assignUserExtension', { appUserId: member.user._id, extension: '10a' }, 'extension'],
      ['assignUserExtension', { appUserId: member.user._id, extension: 100 }, 'extension'],
      ['assignUserExtension', { appUserId: member.user._id, extension: '1'.repeat(16) }, 'extension'],
      ['assignUserExtension', { appUserId: 'not-a-uuid', extension: '100' }, 'appUserId'],
      ['assignUserExtension', { extension: '100' }, 'appUserId'],
      ['assignAgentExtension', { extension: '100' }, 'agentConfigId'],
      ['assignAgentExtension', { extension: '100', agentConfigId: '  ' }, 'agentConfigId'],
      ['assignAgentExtension', { extension: '100', agentConfigId: 'a'.repeat(201) }, 'agentConfigId'],
      ['assignAgentExtension', { extension: '100', agentConfigId: 'agent-1', agentContactId: 5 }, 'agentContactId'],
      ['disassociateUserExtension', { extension: '' }, 'extension'],
      ['getExtensionsForUser', { appUserId: '' }, 'appUserId'],
      ['getExtensionsForAgent', { agentContactId: '' }, 'agentContactId'],
    ] as const) {
      const label = `${method} ${JSON.stringify(params).slice(0, 80)}`;
      assert.equal((await refused(api.call(method, params, admin), 'VALIDATION_ERROR', label)).issues?.[0]?.path, path, label);
    }
    const outside = await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '999' }, admin), 'VALIDATION_ERROR');
    assert.match(outside.message, /extension 999 is not in the numbering plan \(TELEPHONY_EXTENSIONS\)/);

    for (const appUserId of [randomUUID(), stranger.user._id]) {
      const assign = await refused(api.call('assignUserExtension', { appUserId, extension: '100' }, admin), 'NOT_FOUND');
      assert.equal(assign.message, `User ${appUserId} not found`);
      await refused(api.call('getExtensionsForUser', { appUserId }, member), 'NOT_FOUND');
    }
    assert.deepEqual(await api.available(member), before);
  });

  it('lets any user of the subscription read, and only admins change', async () => {
    const staff = await addUser(t, admin.subscriptionId, 'staff');
    for (const session of [member, staff]) {
      for (const [method, params] of [
        ['assignUserExtension', { appUserId: session.user._id, extension: '100' }],
        ['assignAgentExtension', { extension: '100', agentConfigId: 'agent-1' }],
        ['disassociateUserExtension', { extension: '100' }],
        ['disassociateAgentExtension', { extension: '100' }],
      ] as const) {
        await refused(api.call(method, params, session), 'FORBIDDEN', method);
      }
      assert.deepEqual(await api.available(session), ['100', '101', '102', '103', '104', '0200']);
    }
  });

  it('keeps each subscription to its own numbering plan: another one neither sees, changes nor takes its assignments', async () => {
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '100' }, admin);
    await api.call('assignAgentExtension', { extension: '101', agentConfigId: 'agent-x', agentContactId: 'contact-x' }, admin);

    assert.deepEqual(await api.available(stranger), POOL, 'the whole pool, its own');
    assert.deepEqual(await api.ofAgent(stranger, 'contact-x'), []);
    assert.deepEqual(await api.ofAgent(stranger, 'agent-x'), []);
    await refused(api.call('getExtensionsForUser', { appUserId: member.user._id }, stranger), 'NOT_FOUND');
    await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '102' }, stranger), 'NOT_FOUND');
    await refused(api.call('disassociateUserExtension', { extension: '100' }, stranger), 'NOT_FOUND');
    await refused(api.call('disassociateAgentExtension', { extension: '101' }, stranger), 'NOT_FOUND');

    // The same extensions, assigned in the other subscription: its own plan.
    await api.call('assignUserExtension', { appUserId: stranger.user._id, extension: '100' }, stranger);
    await api.call('assignAgentExtension', { extension: '101', agentConfigId: 'agent-x', agentContactId: 'contact-x' }, stranger);
    assert.deepEqual(await api.ofUser(stranger, stranger.user._id), ['100']);

    assert.deepEqual(await api.ofUser(member, member.user._id), ['100'], 'the first subscription’s assignments are as they were');
    assert.deepEqual(await api.ofAgent(member, 'contact-x'), ['101']);
    await api.call('disassociateUserExtension', { extension: '100' }, stranger);
    assert.deepEqual(await api.ofUser(member, member.user._id), ['100']);
    await api.call('disassociateUserExtension', { extension: '100' }, admin);
    await api.call('disassociateAgentExtension', { extension: '101' }, admin);
    await api.call('disassociateAgentExtension', { extension: '101' }, stranger);
  });

  it('gives a removed user’s extensions back to the pool', async () => {
    const leaving = await addUser(t, admin.subscriptionId, 'user');
    await api.call('assignUserExtension', { appUserId: leaving.user._id, extension: '103' }, admin);
    await api.call('assignUserExtension', { appUserId: leaving.user._id, extension: '104' }, admin);
    await t.as(admin).AdminUserRpc.delete({ _id: leaving.user._id });
    assert.deepEqual(await api.available(member), POOL);
    await refused(api.call('getExtensionsForUser', { appUserId: leaving.user._id }, member), 'NOT_FOUND');
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '103' }, admin);
    await api.call('disassociateUserExtension', { extension: '103' }, admin);
  });
});

const API_KEY = 'tel_test_key_0123456789abcdef';
const httpEnv = (url: string) => ({ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: url, TELEPHONY_API_KEY: API_KEY, OUTBOUND_ALLOW_PRIVATE: 'true' });

/** Runs `use` against an app of its own (auth and telephony, with `env`), closed afterwards. */
async function withApp(env: Record<string, string>, use: (t: TestApp) => Promise<void>): Promise<void> {
  const t = await startTestApp({ withNotes: false, plugins: ['auth', 'telephony'], env });
  try {
    await use(t);
  } finally {
    await t.close();
  }
}

interface PlatformRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

type Assignment = { type: 'user'; userId: string; contactId: string | null } | { type: 'agent'; agentConfigId: string; agentContactId: string | null };

/**
 * A telephony platform on loopback speaking the API of plugins/telephony/README.md:
 * extensions 500-503 for every tenant (X-Tenant-Id), assignments kept per tenant.
 * `answer` makes the next requests answer something else (errors, bad JSON, silence).
 */
async function startPlatform() {
  const requests: PlatformRequest[] = [];
  const tenants = new Map<string, Map<string, Assignment>>();
  const state = { key: API_KEY, answer: null as null | ((res: ServerResponse) => void) };
  const json = (res: ServerResponse, status: number, body?: unknown) => {
    res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' }).end(body === undefined ? undefined : JSON.stringify(body));
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://platform');
      const text = Buffer.concat(chunks).toString();
      requests.push({ method: req.method ?? '', path: `${url.pathname}${url.search}`, headers: req.headers, body: text ? JSON.parse(text) : undefined });
      if (state.answer) return state.answer(res);
      if (req.headers.authorization !== `Bearer ${state.key}`) return json(res, 401, { error: 'invalid credential' });
      const tenant = req.headers['x-tenant-id'];
      if (typeof tenant !== 'string' || !tenant) return json(res, 400, { error: 'X-Tenant-Id is required' });
      if (!tenants.has(tenant)) tenants.set(tenant, new Map());
      const assignments = tenants.get(tenant)!;
      const pool = ['500', '501', '502', '503'];
      const extensionsWhere = (match: (assignment: Assignment) => boolean) =>
        [...assignments].filter(([, assignment]) => match(assignment)).map(([extension]) => extension);
      const path = url.pathname.replace(/^\/api\/v1/, '');
      let match: RegExpExecArray | null;
      if (req.method === 'GET' && path === '/extensions/available')
        return json(res, 200, { extensions: pool.filter((extension) => !assignments.has(extension)) });
      if ((match = /^\/extensions\/(\d+)\/assignment$/.exec(path))) {
        const extension = match[1]!;
        if (!pool.includes(extension)) return json(res, 404, { error: `Extension ${extension} does not exist` });
        if (req.method === 'POST') {
          const body = JSON.parse(text) as Assignment;
          if (body.type !== 'user' && body.type !== 'agent') return json(res, 422, { error: 'type must be user or agent' });
          if (assignments.has(extension)) return json(res, 409, { error: `Extension ${extension} is taken` });
          assignments.set(extension, body);
          return json(res, 201, { extension });
        }
        if (req.method === 'DELETE') {
          const held = assignments.get(extension);
          if (!held || held.type !== url.searchParams.get('type'))
            return json(res, 404, { error: `Extension ${extension} has no ${url.searchParams.get('type')} assignment` });
          assignments.delete(extension);
          return json(res, 204);
        }
      }
      if (req.method === 'GET' && path === '/extensions') {
        const userId = url.searchParams.get('userId');
        const agent = url.searchParams.get('agentContactId');
        if (userId) return json(res, 200, { extensions: extensionsWhere((a) => a.type === 'user' && a.userId === userId) });
        if (agent)
          return json(res, 200, { extensions: extensionsWhere((a) => a.type === 'agent' && (a.agentContactId === agent || a.agentConfigId === agent)) });
      }
      json(res, 404, { error: 'no such route' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/api/v1`,
    requests,
    state,
    json,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

describe('TelephonyManagerRpc with the http provider', () => {
  let t: TestApp;
  let api: ReturnType<typeof telephony>;
  let platform: Awaited<ReturnType<typeof startPlatform>>;
  let admin: Session;
  let member: Member;
  let stranger: Session;

  before(async () => {
    platform = await startPlatform();
    t = await startTestApp({
      withNotes: false,
      plugins: PLUGINS,
      env: httpEnv(`${platform.url}/`),
    });
    api = telephony(t);
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(async () => {
    await t.close();
    await platform.close();
  });

  it('assigns, lists and disassociates through the platform, with the credential and the tenant on every request', async () => {
    await t.as(admin).AdminUserRpc.update({ _id: member.user._id, partnerContactId: 'pbx-contact-9' });
    const first = platform.requests.length;
    assert.deepEqual(await api.available(member), ['500', '501', '502', '503']);
    assert.deepEqual(await api.call('assignUserExtension', { appUserId: member.user._id, extension: '501' }, admin), {
      success: true,
      extension: '501',
      appUserId: member.user._id,
    });
    await api.call('assignAgentExtension', { extension: '502', agentConfigId: 'agent/1', agentContactId: 'contact-1' }, admin);
    assert.deepEqual(await api.ofUser(member, member.user._id), ['501']);
    assert.deepEqual(await api.ofAgent(member, 'contact-1'), ['502']);
    assert.deepEqual(await api.ofAgent(member, 'agent/1'), ['502']);
    assert.deepEqual(await api.ofAgent(member, '..'), [], 'an id is a query value, never a path segment');
    assert.deepEqual(await api.available(member), ['500', '503']);
    assert.deepEqual(await api.call('disassociateUserExtension', { extension: '501' }, admin), { success: true, extension: '501' });
    await api.call('disassociateAgentExtension', { extension: '502' }, admin);
    assert.deepEqual(await api.available(member), ['500', '501', '502', '503']);

    const sent = platform.requests.slice(first);
    assert.deepEqual(
      sent.map((request) => `${request.method} ${request.path}`),
      [
        'GET /api/v1/extensions/available',
        'POST /api/v1/extensions/501/assignment',
        'POST /api/v1/extensions/502/assignment',
        `GET /api/v1/extensions?userId=${member.user._id}`,
        'GET /api/v1/extensions?agentContactId=contact-1',
        'GET /api/v1/extensions?agentContactId=agent%2F1',
        'GET /api/v1/extensions?agentContactId=..',
        'GET /api/v1/extensions/available',
        'DELETE /api/v1/extensions/501/assignment?type=user',
        'DELETE /api/v1/extensions/502/assignment?type=agent',
        'GET /api/v1/extensions/available',
      ],
    );
    for (const request of sent) {
      assert.equal(request.headers.authorization, `Bearer ${API_KEY}`);
      assert.equal(request.headers['x-tenant-id'], admin.subscriptionId);
    }
    assert.deepEqual(sent[1]!.body, { type: 'user', userId: member.user._id, contactId: 'pbx-contact-9' }, 'the user’s partnerContactId goes along');
    assert.deepEqual(sent[2]!.body, { type: 'agent', agentConfigId: 'agent/1', agentContactId: 'contact-1' });
  });

  it('names each subscription as its own tenant, and checks users against the caller’s subscription', async () => {
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '500' }, admin);
    assert.deepEqual(await api.available(stranger), ['500', '501', '502', '503'], 'the platform keeps tenants apart');
    assert.equal(platform.requests.at(-1)!.headers['x-tenant-id'], stranger.subscriptionId);
    const sentBefore = platform.requests.length;
    await refused(api.call('getExtensionsForUser', { appUserId: member.user._id }, stranger), 'NOT_FOUND');
    await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '501' }, stranger), 'NOT_FOUND');
    assert.equal(platform.requests.length, sentBefore, 'another subscription’s user never reaches the platform');
    await refused(api.call('disassociateUserExtension', { extension: '500' }, stranger), 'NOT_FOUND');
    assert.deepEqual(await api.ofUser(member, member.user._id), ['500']);
    await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '500' }, member), 'FORBIDDEN');
    await api.call('disassociateUserExtension', { extension: '500' }, admin);
  });

  it('maps the platform’s refusals: 404 NOT_FOUND, 409 CONFLICT, 422 VALIDATION_ERROR with its message when short', async () => {
    await api.call('assignUserExtension', { appUserId: member.user._id, extension: '503' }, admin);
    const taken = await refused(api.call('assignAgentExtension', { extension: '503', agentConfigId: 'agent-2' }, admin), 'CONFLICT');
    assert.equal(taken.message, 'Extension 503 is taken');
    const unknown = await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '777' }, admin), 'NOT_FOUND');
    assert.equal(unknown.message, 'Extension 777 does not exist');
    const notHeld = await refused(api.call('disassociateAgentExtension', { extension: '503' }, admin), 'NOT_FOUND');
    assert.equal(notHeld.message, 'Extension 503 has no agent assignment');
    await api.call('disassociateUserExtension', { extension: '503' }, admin);

    platform.state.answer = (res) => platform.json(res, 422, { error: 'agent-3 has no line licence' });
    const licence = await refused(api.call('assignAgentExtension', { extension: '500', agentConfigId: 'agent-3' }, admin), 'VALIDATION_ERROR');
    assert.equal(licence.message, 'Invalid params: the telephony platform refused it: agent-3 has no line licence');
    platform.state.answer = (res) => platform.json(res, 400, { error: `${'x'.repeat(500)}` });
    const long = await refused(api.call('assignAgentExtension', { extension: '500', agentConfigId: 'agent-3' }, admin), 'VALIDATION_ERROR');
    assert.equal(long.message, 'Invalid params: the telephony platform refused it: HTTP 400', 'a long message is not passed on');
    platform.state.answer = (res) => platform.json(res, 404, 'not an object');
    const plain = await refused(api.call('getExtensionsForAgent', { agentContactId: 'ghost' }, member), 'NOT_FOUND', 'the service’s own message without one');
    assert.equal(plain.message, 'Agent ghost is not known to the telephony platform', 'the service’s own message without one');
    platform.state.answer = null;
  });

  it('answers UPSTREAM_ERROR for a refused credential, a failing platform, unreadable answers and no answer, never a 500', async () => {
    platform.state.key = 'the platform rotated it';
    const credential = await refused(api.call('getAvailableExtensions', {}, member), 'UPSTREAM_ERROR');
    assert.match(credential.message, /refused the service's credential \(HTTP 401\); the operator checks TELEPHONY_API_KEY/);
    platform.state.key = API_KEY;

    const cases: [string, (res: ServerResponse) => void, RegExp][] = [
      ['500', (res) => platform.json(res, 500, { error: 'database on fire' }), /^The telephony platform failed \(HTTP 500\)$/],
      ['503', (res) => platform.json(res, 503), /failed \(HTTP 503\)/],
      ['a redirect', (res) => res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end(), /redirect \(HTTP 302\), which is not followed/],
      [
        'malformed JSON',
        (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"extensions": ["500",'),
        /gave an answer this service cannot read/,
      ],
      ['the wrong shape', (res) => platform.json(res, 200, { extensions: '500' }), /cannot read/],
      ['a bad extension', (res) => platform.json(res, 200, { extensions: ['500', 'DROP TABLE'] }), /cannot read/],
      ['an empty body', (res) => res.writeHead(200).end(), /cannot read/],
      ['an oversized answer', (res) => platform.json(res, 200, { extensions: ['5'.repeat(15)], padding: 'x'.repeat(2 * 1024 * 1024) }), /cannot read/],
    ];
    for (const [label, answer, message] of cases) {
      platform.state.answer = answer;
      const error = await refused(api.call('getAvailableExtensions', {}, member), 'UPSTREAM_ERROR', label);
      assert.match(error.message, message, label);
    }
    platform.state.answer = (res) => platform.json(res, 500);
    await refused(api.call('assignUserExtension', { appUserId: member.user._id, extension: '500' }, admin), 'UPSTREAM_ERROR');
    platform.state.answer = null;

    const everything = JSON.stringify(t.logs);
    assert.ok(!everything.includes(API_KEY), 'the key is never logged');
    assert.ok(
      t.logs.some((line) => line.includes('telephony platform request failed')),
      'failures are logged for the operator',
    );
  });

  it('answers UPSTREAM_ERROR when the platform does not answer in time', async () => {
    // An app of its own with the smallest timeout, so the app above keeps a budget a loaded machine's answers fit in.
    platform.state.answer = () => undefined;
    await withApp({ ...httpEnv(platform.url), TELEPHONY_TIMEOUT_MS: '100' }, async (silent) => {
      const error = await refused(telephony(silent).call('getAvailableExtensions', {}, await silent.signup()), 'UPSTREAM_ERROR');
      assert.equal(error.message, 'The telephony platform did not answer within 100 ms');
    }).finally(() => (platform.state.answer = null));
  });

  it('answers UPSTREAM_ERROR when the platform cannot be reached', async () => {
    await platform.close();
    const error = await refused(api.call('getExtensionsForAgent', { agentContactId: 'contact-1' }, member), 'UPSTREAM_ERROR');
    assert.equal(error.message, 'The telephony platform could not be reached');
  });
});

describe('TelephonyManagerRpc without a provider', () => {
  it('answers FEATURE_UNAVAILABLE, naming the setting, to all seven operations', () =>
    withApp({}, async (t) => {
      const admin = await t.signup();
      const api = telephony(t);
      const params: Record<(typeof OPERATIONS)[number], Record<string, unknown>> = {
        getAvailableExtensions: {},
        assignAgentExtension: { extension: '100', agentConfigId: 'agent-1' },
        assignUserExtension: { appUserId: admin.user._id, extension: '100' },
        disassociateUserExtension: { extension: '100' },
        disassociateAgentExtension: { extension: '100' },
        getExtensionsForUser: { appUserId: admin.user._id },
        getExtensionsForAgent: { agentContactId: 'contact-1' },
      };
      for (const method of OPERATIONS) {
        const error = await refused(api.call(method, params[method], admin), 'FEATURE_UNAVAILABLE', method);
        assert.match(error.message, /TELEPHONY_PROVIDER/, method);
      }
    }));

  it('answers FEATURE_UNAVAILABLE when the outbound guard refuses the platform’s address', () =>
    withApp({ ...httpEnv('http://127.0.0.1:9/api'), OUTBOUND_ALLOW_PRIVATE: 'false' }, async (t) => {
      const error = await refused(telephony(t).call('getAvailableExtensions', {}, await t.signup()), 'FEATURE_UNAVAILABLE');
      assert.match(error.message, /OUTBOUND_ALLOWED_HOSTS/);
    }));
});

describe('TelephonyManagerRpc settings', () => {
  const parse = (env: Record<string, string>) => v.safeParse(telephonySettings, env);
  const problem = (env: Record<string, string>) => {
    const result = parse(env);
    assert.equal(result.success, false, JSON.stringify(env));
    return result.issues!.map((issue) => issue.message).join('; ');
  };

  it('reads extension pools with ranges, keeping leading zeros and dropping duplicates', () => {
    assert.deepEqual(parsePool('100-103, 300,101'), { extensions: ['100', '101', '102', '103', '300'] });
    assert.deepEqual(parsePool('0098-0101'), { extensions: ['0098', '0099', '0100', '0101'] });
    assert.deepEqual(parsePool('8-11'), { extensions: ['8', '9', '10', '11'] });
    assert.deepEqual(parse({ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '7' }).output, { provider: 'local', extensions: ['7'] });
    assert.deepEqual(parse({}).output, { provider: null });
    assert.deepEqual(parse({ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com/api/', TELEPHONY_API_KEY: 'k' }).output, {
      provider: 'http',
      apiUrl: 'https://pbx.example.com/api',
      apiKey: 'k',
      timeoutMs: 10_000,
    });
  });

  it('refuses bad pools and combinations with a message naming the setting, never the key', () => {
    for (const [env, message] of [
      [{ TELEPHONY_PROVIDER: 'sip' }, /TELEPHONY_PROVIDER must be local or http/],
      [{ TELEPHONY_PROVIDER: 'local' }, /TELEPHONY_PROVIDER=local needs TELEPHONY_EXTENSIONS/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '100-x' }, /"100-x" is neither an extension/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '1-2-3' }, /"1-2-3" is neither/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '1'.repeat(16) }, /1 to 15 digits/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '200-100' }, /the range 200-100 ends before it starts/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '1-999999999999999' }, /more than 10000 extensions/],
      [{ TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: ' , ' }, /names no extension/],
      [{ TELEPHONY_EXTENSIONS: '100' }, /TELEPHONY_EXTENSIONS is a setting of the local provider, but TELEPHONY_PROVIDER is unset/],
      [
        { TELEPHONY_PROVIDER: 'local', TELEPHONY_EXTENSIONS: '100', TELEPHONY_API_URL: 'https://pbx.example.com' },
        /TELEPHONY_API_URL is a setting of the http provider, but TELEPHONY_PROVIDER is local/,
      ],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com' }, /TELEPHONY_PROVIDER=http needs TELEPHONY_API_KEY/],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_KEY: 'secret-key' }, /TELEPHONY_PROVIDER=http needs TELEPHONY_API_URL/],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'pbx.example.com', TELEPHONY_API_KEY: 'secret-key' }, /must be an http or https URL/],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'ftp://pbx.example.com', TELEPHONY_API_KEY: 'secret-key' }, /must be an http or https URL/],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://u:p@pbx.example.com', TELEPHONY_API_KEY: 'secret-key' }, /must not hold credentials/],
      [{ TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com/?tenant=1', TELEPHONY_API_KEY: 'secret-key' }, /without a query/],
      [
        { TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com', TELEPHONY_API_KEY: 'secret key\nX-Evil: 1' },
        /printable ASCII without spaces/,
      ],
      [
        { TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com', TELEPHONY_API_KEY: 'k', TELEPHONY_TIMEOUT_MS: '5' },
        /TELEPHONY_TIMEOUT_MS must be at least 100/,
      ],
    ] as const) {
      const found = problem(env);
      assert.match(found, message, JSON.stringify(env));
      assert.ok(!found.includes('secret'), 'the key is not repeated');
    }
  });

  it('stops start-up with a clear message', async () => {
    await assert.rejects(
      startTestApp({ withNotes: false, plugins: ['auth', 'telephony'], env: { TELEPHONY_PROVIDER: 'http', TELEPHONY_API_URL: 'https://pbx.example.com' } }),
      (error: Error) => error.name === 'ConfigError' && /TELEPHONY_PROVIDER=http needs TELEPHONY_API_KEY/.test(error.message),
    );
  });
});
