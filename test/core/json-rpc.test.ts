import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DISCOVER_PER_MINUTE, JSON_RPC_BATCH_LIMIT } from '../../core/doors/json-rpc.ts';
import { BATCH_ANSWER_FACTOR } from '../../core/doors/rpc-reply.ts';
import { probePlugin } from '../fixtures/probe-plugin.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser } from '../support/users.ts';
import { errorOf, jsonRpcAnswer, jsonRpcAnswers, resultOf, type WireError } from '../support/wire.ts';
import type { AuthRpcLoginResult } from '../../clients/typescript/src/operations.ts';

/** A note of the notes plugin as an answer holds it (the plugin is a test's, unknown to the generated client). */
interface Note {
  _id: string;
  text: string;
}

/** JSON-RPC 2.0 at POST /api/rpc, beside the spec's envelope (whose own tests are rpc-envelope.test.ts, unchanged). */
describe('JSON-RPC 2.0 at /api/rpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp({ extraPlugins: [probePlugin], env: { LOGIN_FAILURE_LIMIT: '3' } });
    admin = await t.signup();
  });
  after(() => t.close());

  /** Posts a JSON-RPC body (an object or a batch, or raw text) with the admin's session unless other headers are given. */
  async function rpc(body: unknown, headers: Record<string, string> = { authorization: `Bearer ${admin.token}` }) {
    const response = await fetch(`${t.url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    const json: unknown = text ? JSON.parse(text) : undefined;
    return { status: response.status, headers: response.headers, text, json };
  }
  type Answered = Awaited<ReturnType<typeof rpc>>;
  /** The answer of a single call; the answers of a batch. */
  const answerOf = (response: Answered) => jsonRpcAnswer(response.json);
  const answersOf = (response: Answered) => jsonRpcAnswers(response.json);
  const call = (method: string, params: unknown, id: string | number | null = 1) => ({ jsonrpc: '2.0', method, params, id });

  it('answers a call with its id and the operation data as result, ids of either kind echoed', async () => {
    const params = { person: { name: 'Ann', age: 3 }, tags: ['x'], mode: 'a' };
    const numbered = await rpc(call('ProbeRpc.nested', params, 7));
    assert.equal(numbered.status, 200);
    assert.deepEqual(numbered.json, { jsonrpc: '2.0', id: 7, result: params });
    assert.deepEqual((await rpc(call('ProbeRpc.nested', params, 'abc'))).json, { jsonrpc: '2.0', id: 'abc', result: params });
    assert.deepEqual((await rpc(call('ProbeRpc.nested', params, null))).json, { jsonrpc: '2.0', id: null, result: params });
    // Operations answering beside data in the spec's envelope answer those fields.
    assert.deepEqual(answerOf(await rpc(call('ProbeRpc.withMessage', {}))).result, { message: 'done' });
    assert.deepEqual(answerOf(await rpc(call('ProbeRpc.bare', {}))).result, {});
    // No params is {}.
    assert.deepEqual((await rpc({ jsonrpc: '2.0', method: 'ProbeRpc.bare', id: 2 })).json, { jsonrpc: '2.0', id: 2, result: {} });
  });

  it('runs a notification and answers 204 with no body', async () => {
    const response = await rpc({ jsonrpc: '2.0', method: 'NoteRpc.add', params: { text: 'told, not asked' } });
    assert.equal(response.status, 204);
    assert.equal(response.text, '');
    const notes = await t.ok('NoteRpc.list', {}, { token: admin.token });
    assert.ok(
      notes.data.some((note: { text: string }) => note.text === 'told, not asked'),
      'the notification ran',
    );
  });

  it('answers a batch in order, each call on its own: successes, failures, a forbidden one, and nothing for notifications', async () => {
    const member = await addUser(t, admin.subscriptionId, 'user');
    const response = await rpc(
      [
        call('ProbeRpc.staffOnly', {}, 1),
        call('NoteRpc.add', { text: 'in a batch' }, 2),
        { jsonrpc: '2.0', method: 'NoteRpc.add', params: { text: 'a notification in a batch' } },
        call('ProbeRpc.nope', {}, 3),
        call('NoteRpc.add', { text: '' }, 4),
        call('NoteRpc.list', {}, 5),
      ],
      { authorization: `Bearer ${member.token}` },
    );
    assert.equal(response.status, 200);
    const answers = answersOf(response);
    assert.deepEqual(
      answers.map((answer) => answer.id),
      [1, 2, 3, 4, 5],
    );
    assert.equal(errorOf(answers[0]).code, -32003);
    assert.equal(errorOf(answers[0]).data.code, 'FORBIDDEN');
    assert.equal(resultOf<Note>(answers[1]).text, 'in a batch');
    assert.equal(errorOf(answers[2]).code, -32601);
    assert.equal(errorOf(answers[2]).data.code, 'METHOD_NOT_FOUND');
    assert.equal(errorOf(answers[3]).code, -32602);
    assert.deepEqual(
      errorOf(answers[3]).data.issues?.map((issue) => issue.path),
      ['text'],
    );
    // The calls ran one after another: the list sees the notification before it.
    assert.deepEqual(
      resultOf<{ data: Note[] }>(answers[4])
        .data.map((note) => note.text)
        .filter((text) => text.includes('batch')),
      ['in a batch', 'a notification in a batch'],
    );
    // Each call has its own request id, under the request's.
    const requestId = response.headers.get('x-request-id')!;
    assert.equal(errorOf(answers[0]).data.requestId, `${requestId}.1`);
    assert.ok(t.logs.some((line) => line.includes(`"requestId":"${requestId}.4"`) && line.includes('"code":"METHOD_NOT_FOUND"')));
  });

  it('answers 204 for a batch of notifications only', async () => {
    const response = await rpc([
      { jsonrpc: '2.0', method: 'ProbeRpc.bare' },
      { jsonrpc: '2.0', method: 'ProbeRpc.nope' },
    ]);
    assert.equal(response.status, 204);
    assert.equal(response.text, '');
  });

  it('answers -32600 for malformed requests, with the id when it is readable', async () => {
    const cases: [unknown, unknown][] = [
      [{ jsonrpc: '1.0', method: 'ProbeRpc.bare', id: 1 }, 1],
      [{ jsonrpc: '2.0', id: 2 }, 2],
      [{ jsonrpc: '2.0', method: 5, id: 3 }, 3],
      [{ jsonrpc: '2.0', method: '', id: 4 }, 4],
      [{ jsonrpc: '2.0', method: 'ProbeRpc.bare', id: { not: 'an id' } }, null],
      [{ jsonrpc: '2.0', method: 'ProbeRpc.bare', params: 'x', id: 5 }, 5],
    ];
    for (const [body, id] of cases) {
      const response = await rpc(body);
      assert.equal(response.status, 200, JSON.stringify(body));
      const answer = answerOf(response);
      assert.equal(answer.id, id, JSON.stringify(body));
      assert.equal(errorOf(answer).code, -32600, JSON.stringify(body));
      assert.equal(errorOf(answer).data.code, 'BAD_REQUEST');
      assert.equal(typeof errorOf(answer).message, 'string');
    }
    // In a batch, items that are no request at all are answered one by one.
    const batch = await rpc([1, call('ProbeRpc.bare', {}, 9), 'text']);
    assert.deepEqual(
      answersOf(batch).map((answer) => [answer.id, answer.error?.code ?? 'ok']),
      [
        [null, -32600],
        [9, 'ok'],
        [null, -32600],
      ],
    );
  });

  it(`refuses a batch of more than ${JSON_RPC_BATCH_LIMIT} calls whole, running none`, async () => {
    const before = (await t.ok('NoteRpc.list', {}, { token: admin.token })).totalCount;
    const response = await rpc(Array.from({ length: JSON_RPC_BATCH_LIMIT + 1 }, (_, index) => call('NoteRpc.add', { text: `n${index}` }, index)));
    assert.equal(response.status, 200);
    assert.equal(answerOf(response).id, null);
    assert.equal(errorOf(answerOf(response)).code, -32600);
    assert.match(errorOf(answerOf(response)).message, new RegExp(`at most ${JSON_RPC_BATCH_LIMIT}`));
    assert.equal((await t.ok('NoteRpc.list', {}, { token: admin.token })).totalCount, before);
    const full = await rpc(Array.from({ length: JSON_RPC_BATCH_LIMIT }, (_, index) => call('ProbeRpc.bare', {}, index)));
    assert.equal(answersOf(full).length, JSON_RPC_BATCH_LIMIT);
  });

  it('answers a body that is not JSON, meant as JSON-RPC, with 400 and the parse error', async () => {
    const response = await rpc('{"jsonrpc": "2.0", "method": ');
    assert.equal(response.status, 400);
    const answer = answerOf(response);
    assert.equal(answer.jsonrpc, '2.0');
    assert.equal(answer.id, null);
    assert.equal(errorOf(answer).code, -32700);
  });

  it('answers unknown methods with -32601 and bad params with -32602 carrying our issues', async () => {
    const unknown = await rpc(call('NopeRpc.nothing', {}));
    assert.deepEqual(errorOf(answerOf(unknown)).code, -32601);
    assert.equal(errorOf(answerOf(unknown)).data.code, 'METHOD_NOT_FOUND');
    const bad = await rpc(call('ProbeRpc.nested', { person: { name: '', age: 'old' }, tags: [1], mode: 'c' }));
    const badError = errorOf(answerOf(bad));
    assert.equal(badError.code, -32602);
    assert.equal(badError.data.code, 'VALIDATION_ERROR');
    assert.deepEqual(badError.data.issues?.map((issue) => issue.path).sort(), ['mode', 'person.age', 'person.name', 'tags.0']);
    const positional = await rpc(call('ProbeRpc.bare', [1, 2]));
    assert.equal(errorOf(answerOf(positional)).code, -32602);
    assert.match(errorOf(answerOf(positional)).message, /by name/);
  });

  it('refuses unknown params with -32602 naming them, as the spec envelope does', async () => {
    const response = await rpc(call('ProbeRpc.nested', { person: { name: 'Ann', age: 3, nick: 'A' }, tags: [], mode: 'a', colour: 'red' }, 5));
    assert.equal(errorOf(answerOf(response)).code, -32602);
    assert.deepEqual(errorOf(answerOf(response)).data.issues, [
      { path: 'person.nick', message: 'Received unknown parameter: nick' },
      { path: 'colour', message: 'Received unknown parameter: colour' },
    ]);
  });

  it('authenticates as the spec envelope does: no credential, a bad key, a role too low', async () => {
    const none = await rpc(call('NoteRpc.list', {}), {});
    assert.equal(none.status, 200);
    assert.equal(errorOf(answerOf(none)).code, -32001);
    assert.equal(errorOf(answerOf(none)).data.code, 'UNAUTHENTICATED');
    const badKey = await rpc(call('NoteRpc.list', {}), { 'x-api-key': 'ak0000000000000_not-a-key' });
    assert.equal(errorOf(answerOf(badKey)).data.code, 'UNAUTHENTICATED');
    const key = await t.ok('ApiKeyRpc.create', { description: 'json-rpc' }, { token: admin.token });
    assert.ok(Array.isArray(resultOf<{ data: unknown }>(answerOf(await rpc(call('NoteRpc.list', {}), { 'x-api-key': key.fullKey }))).data));
    const member = await addUser(t, admin.subscriptionId, 'user');
    const low = await rpc(call('ProbeRpc.adminOnly', {}), { authorization: `Bearer ${member.token}` });
    assert.equal(errorOf(answerOf(low)).code, -32003);
  });

  it('maps the other codes by their HTTP status, keeping ours in data: internal errors with an error id, rate limits with retryAfter', async () => {
    const internal = await rpc(call('ProbeRpc.boom', {}));
    assert.equal(errorOf(answerOf(internal)).code, -32603);
    assert.match(errorOf(answerOf(internal)).data.errorId ?? '', /^[0-9a-f-]{36}$/);
    assert.ok(!internal.text.includes('hunter2'));
    assert.equal(errorOf(answerOf(await rpc(call('ProbeRpc.unavailable', {})))).code, -32503);
    // A result that cannot be sent is still a JSON-RPC answer.
    const unsendable = await rpc(call('ProbeRpc.unsendable', {}));
    assert.equal(unsendable.status, 200);
    assert.equal(errorOf(answerOf(unsendable)).code, -32603);
    assert.match(errorOf(answerOf(unsendable)).data.errorId ?? '', /^[0-9a-f-]{36}$/);

    // Limits count each call of a batch: four logins with a wrong password, the last refused as the spec envelope would.
    const victim = await t.signup();
    const wrong = { identifier: victim.user.username, password: 'wrong password' };
    const response = await rpc(
      [1, 2, 3, 4].map((id) => call('AuthRpc.login', wrong, id)),
      {},
    );
    const codes = answersOf(response).map((answer) => errorOf(answer).data.code);
    assert.deepEqual(codes, ['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED', 'RATE_LIMITED']);
    const limited = errorOf(answersOf(response)[3]);
    assert.equal(limited.code, -32029);
    assert.ok((limited.data.retryAfter ?? 0) > 0);
    assert.equal(Number(response.headers.get('retry-after')), limited.data.retryAfter);
  });

  it('sets the session cookie of a login made over JSON-RPC', async () => {
    const user = await t.signup();
    const response = await rpc(call('AuthRpc.login', { identifier: user.user.username, password: user.password }), {});
    assert.equal(typeof resultOf<AuthRpcLoginResult>(answerOf(response)).token, 'string');
    assert.match(response.headers.get('set-cookie') ?? '', /^session=/);
  });

  it('answers rpc.discover once per request: a batch of them answers one document and refuses the others without describing again', async () => {
    const single = await rpc(call('rpc.discover', {}), {});
    assert.equal(resultOf<{ openrpc: string }>(answerOf(single)).openrpc, '1.3.2');
    const batch = await rpc(
      Array.from({ length: JSON_RPC_BATCH_LIMIT }, (_, index) => call('rpc.discover', {}, index)),
      {},
    );
    const answers = answersOf(batch);
    assert.equal(answers.length, JSON_RPC_BATCH_LIMIT);
    assert.deepEqual(answers[0]!.result, answerOf(single).result);
    for (const answer of answers.slice(1)) {
      const error = errorOf(answer);
      assert.deepEqual([error.code, error.data.code], [-32600, 'BAD_REQUEST']);
      assert.match(error.message, /rpc\.discover is answered once per request/);
    }
    assert.ok(batch.text.length < 2 * single.text.length, `a batch of discovers answers ${batch.text.length} bytes`);
  });

  it('meters rpc.discover: by the rate of the key that asks, and per address without a credential', async () => {
    const { fullKey } = await t.ok('ApiKeyRpc.create', { description: 'discovers', rateLimitPerMinute: 2 }, { token: admin.token });
    const codes = [];
    for (let round = 0; round < 3; round++) codes.push(answerOf(await rpc(call('rpc.discover', {}), { 'x-api-key': fullKey })).error?.data.code ?? 'ok');
    assert.deepEqual(codes, ['ok', 'ok', 'RATE_LIMITED']);

    // The address's count is shared with the other tests' anonymous discovers: the limit is reached at the latest after that many more.
    let limited: Answered | undefined;
    for (let round = 0; round <= DISCOVER_PER_MINUTE && !limited; round++) {
      const answer = await rpc(call('rpc.discover', {}), {});
      if (answerOf(answer).error) limited = answer;
    }
    assert.ok(limited, `anonymous discovers are limited to ${DISCOVER_PER_MINUTE} a minute per address`);
    const error = errorOf(answerOf(limited));
    assert.equal(error.code, -32029);
    assert.ok((error.data.retryAfter ?? 0) > 0);
    assert.equal(Number(limited.headers.get('retry-after')), error.data.retryAfter);
  });

  it('meters GET /openrpc.json and GET /api/rpc as rpc.discover: by the rate of the key that asks, and per address without a credential', async () => {
    const { fullKey } = await t.ok('ApiKeyRpc.create', { description: 'documents', rateLimitPerMinute: 2 }, { token: admin.token });
    const statuses = [];
    for (const path of ['/openrpc.json', '/api/rpc', '/openrpc.json'])
      statuses.push((await fetch(`${t.url}${path}`, { headers: { 'x-api-key': fullKey } })).status);
    assert.deepEqual(statuses, [200, 200, 429]);

    // One count per address for all three: reached at the latest after that many more, whichever is asked.
    let limited: Response | undefined;
    for (let round = 0; round <= DISCOVER_PER_MINUTE && !limited; round++) {
      const answer = await fetch(`${t.url}${round % 2 ? '/api/rpc' : '/openrpc.json'}`);
      if (answer.status !== 200) limited = answer;
      else await answer.body?.cancel();
    }
    assert.ok(limited, `anonymous documents are limited to ${DISCOVER_PER_MINUTE} a minute per address`);
    assert.equal(limited.status, 429);
    assert.equal(((await limited.json()) as { data: WireError }).data.code, 'RATE_LIMITED');
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(errorOf(answerOf(await rpc(call('rpc.discover', {}), {}))).data.code, 'RATE_LIMITED', 'rpc.discover shares the count');
  });

  it('keeps the spec envelope for bodies without a jsonrpc member, arrays of them included', async () => {
    const spec = await rpc({ method: 'ProbeRpc.bare', params: {} });
    assert.deepEqual(spec.json, { success: true });
    const array = await rpc([{ method: 'ProbeRpc.bare' }]);
    assert.equal(array.status, 400);
    assert.equal((array.json as { data: WireError }).data.code, 'BAD_REQUEST');
  });
});

describe('JSON-RPC 2.0 batches at /api/rpc: the size of an answer', () => {
  const BODY_LIMIT = 16 * 1024;
  const cap = BATCH_ANSWER_FACTOR * BODY_LIMIT;
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp({ env: { BODY_LIMIT_BYTES: String(BODY_LIMIT), NOTES_MAX_LENGTH: '10000' } });
    admin = await t.signup();
    for (let index = 0; index < 4; index++) await t.ok('NoteRpc.add', { text: `${index} ${'x'.repeat(8000)}` }, { token: admin.token });
  });
  after(() => t.close());

  it(`stops a batch whose answers reach ${BATCH_ANSWER_FACTOR} times the body limit, answering the rest with an error and running none of it`, async () => {
    const call = (method: string, params: unknown, id: number) => ({ jsonrpc: '2.0', method, params, id });
    const batch = [
      call('NoteRpc.add', { text: 'before the cap' }, 0),
      ...Array.from({ length: 10 }, (_, index) => call('NoteRpc.list', {}, index + 1)),
      call('NoteRpc.add', { text: 'after the cap' }, 11),
    ];
    const response = await fetch(`${t.url}/api/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token}` },
      body: JSON.stringify(batch),
    });
    const text = await response.text();
    assert.equal(response.status, 200);
    assert.ok(Buffer.byteLength(text) < cap + BODY_LIMIT, `the answer holds ${Buffer.byteLength(text)} bytes, the cap is ${cap}`);
    const answers = jsonRpcAnswers(JSON.parse(text));
    assert.deepEqual(
      answers.map((answer) => answer.id),
      batch.map((item) => item.id),
    );
    assert.equal(resultOf<Note>(answers[0]).text, 'before the cap');
    const refused = answers.findIndex((answer) => answer.error);
    assert.ok(refused > 1, 'the lists that fit are answered');
    const cut = errorOf(answers[refused]);
    assert.deepEqual([cut.code, cut.data.code], [-32013, 'PAYLOAD_TOO_LARGE']);
    assert.match(cut.message, new RegExp(`^The answers of this batch would exceed ${cap} bytes: this call ran, but its answer is left out`));
    for (const answer of answers.slice(refused + 1)) {
      assert.equal(errorOf(answer).data.code, 'PAYLOAD_TOO_LARGE');
      assert.match(errorOf(answer).message, /not run/);
    }
    const notes = await t.ok('NoteRpc.list', {}, { token: admin.token });
    assert.deepEqual(
      notes.data.map((note: { text: string }) => note.text).filter((text: string) => text.endsWith('the cap')),
      ['before the cap'],
    );
  });
});
