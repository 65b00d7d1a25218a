import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { defineOperation, definePlugin } from 'rpc-service/plugin';
import type { AfterLogin, AfterSignup } from '../lifecycle.ts';
import type { AuthRpcRequestVerificationCodeResult } from '../../../test/support/caller.ts';
import { refused } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, uniqueName, type TestApp } from '../../../test/support/harness.ts';
import { codeIn, eventually, startHttpReceiver, startSmtpServer, startTextProvider } from '../../../test/support/peers.ts';

const mailText = (raw: string) => raw.replace(/=\r?\n/g, '');

/** A span as the OTLP/HTTP JSON export carries it. */
interface ExportedSpan {
  spanId: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
}
interface TraceExport {
  resourceSpans: { scopeSpans: { spans: ExportedSpan[] }[] }[];
}

describe('one-time codes by e-mail, and signup with e-mail verification', () => {
  let t: TestApp;
  let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
  const signups: AfterSignup[] = [];
  const logins: AfterLogin[] = [];
  const hooks = definePlugin({
    id: 'hook-probe',
    group: 'HookProbeRpc',
    coreVersion: '^2.0.0',
    operations: { ping: defineOperation({ access: 'user', describe: 'Nothing.', params: v.object({}), handler: () => true }) },
    extends: {
      'auth.lifecycle': [
        {
          afterSignup: (event: AfterSignup) => void signups.push(event),
          afterLogin: (event: AfterLogin) => {
            logins.push(event);
            throw new Error('a broken hook must not break login');
          },
        },
      ],
    },
  });

  before(async () => {
    smtp = await startSmtpServer();
    t = await startTestApp({
      extraPlugins: [hooks],
      env: { SMTP_URL: smtp.url, MAIL_FROM: 'Service <service@example.com>', SIGNUP_REQUIRE_EMAIL_VERIFICATION: 'true', OTP_REQUEST_LIMIT: '3' },
    });
  });
  after(async () => {
    await t.close();
    await smtp.close();
  });

  /** Asks for a code and reads it from the mail the SMTP server received. */
  const mailCode = async (address: string) => {
    const before = smtp.mails.length;
    const requested = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: address });
    const mail = await eventually(() => smtp.mails.slice(before).find((item) => item.to.includes(address.toLowerCase())));
    return { requested, code: codeIn(mailText(mail.raw)), mail };
  };

  it('mails a code that never appears in the answer, then signs up with it', async () => {
    const name = uniqueName('mailed');
    const address = `${name}@example.com`;
    const { requested, code, mail } = await mailCode(address);
    assert.match(requested.otpRequestId, /^[0-9a-f-]{36}$/);
    assert.equal(requested.channelType, 'email');
    assert.equal(requested.destination, `${name[0]}***@example.com`);
    assert.ok(Date.parse(requested.expiresAt) - Date.now() > 9 * 60_000);
    assert.ok(!JSON.stringify(requested).includes(code));
    assert.match(mail.raw, /From: Service <service@example.com>/);

    const without = await refused(t.as(null).AuthRpc.signup({ email: address, username: name, password: 'long password' }), 'VALIDATION_ERROR');
    assert.deepEqual(
      without.issues?.map((issue) => issue.path),
      ['verifications.email'],
    );

    const wrong = await refused(
      t.as(null).AuthRpc.signup({
        email: address,
        username: name,
        password: 'long password',
        verifications: { email: { otpRequestId: requested.otpRequestId, code: code === '000000' ? '111111' : '000000' } },
      }),
      'VALIDATION_ERROR',
    );
    assert.equal(wrong.issues?.[0]?.path, 'verifications.email.code');

    const created = await t.as(null).AuthRpc.signup({
      email: address,
      username: name,
      password: 'long password',
      verifications: { email: { otpRequestId: requested.otpRequestId, code } },
    });
    assert.equal(created.user.isVerified, true);
    assert.equal(created.user.role, 'admin');
    assert.equal(signups.at(-1)?.user._id, created.user._id);
    assert.equal(signups.at(-1)?.joinedExisting, false);

    const again = await refused(
      t.as(null).AuthRpc.signup({
        email: `${uniqueName()}@example.com`,
        username: uniqueName(),
        verifications: { email: { otpRequestId: requested.otpRequestId, code } },
      }),
      'BAD_REQUEST',
    );
    assert.match(again.message, /already used/);
  });

  it('refuses a code that was sent to another address', async () => {
    const { requested, code } = await mailCode(`${uniqueName('other')}@example.com`);
    const name = uniqueName();
    const error = await refused(
      t.as(null).AuthRpc.signup({
        email: `${name}@example.com`,
        username: name,
        verifications: { email: { otpRequestId: requested.otpRequestId, code } },
      }),
      'VALIDATION_ERROR',
    );
    assert.equal(error.issues?.[0]?.path, 'verifications.email.otpRequestId');
  });

  it('verifyCode checks without consuming, finalize consumes', async () => {
    const { requested, code } = await mailCode(`${uniqueName('verify')}@example.com`);
    const { otpRequestId } = requested;
    const anonymous = t.as(null).AuthRpc;
    const wrong = await refused(anonymous.verifyCode({ otpRequestId, code: code === '123456' ? '654321' : '123456' }), 'VALIDATION_ERROR');
    assert.deepEqual(wrong.issues, [{ path: 'code', message: 'Wrong code; 4 attempt(s) left' }]);
    assert.deepEqual(await anonymous.verifyCode({ otpRequestId, code }), { verified: true, otpRequestId, finalized: false });
    assert.deepEqual(await anonymous.verifyCode({ otpRequestId, code, finalize: true }), { verified: true, otpRequestId, finalized: true });
    await refused(anonymous.verifyCode({ otpRequestId, code }), 'BAD_REQUEST');
    await refused(anonymous.verifyCode({ otpRequestId: '00000000-0000-4000-8000-000000000000', code }), 'NOT_FOUND');
    const empty = await refused(anonymous.verifyCode({ otpRequestId: '', code: '1' }), 'VALIDATION_ERROR');
    assert.equal(empty.issues?.[0]?.path, 'otpRequestId');
  });

  it('the sixth attempt is RATE_LIMITED even with the right code, with Retry-After', async () => {
    const { requested, code } = await mailCode(`${uniqueName('brute')}@example.com`);
    const wrongCode = code === '999999' ? '000000' : '999999';
    for (let attempt = 1; attempt <= 5; attempt++) {
      await refused(t.as(null).AuthRpc.verifyCode({ otpRequestId: requested.otpRequestId, code: wrongCode }), 'VALIDATION_ERROR', `attempt ${attempt}`);
    }
    // Over HTTP: the status and the Retry-After header are what a client sees.
    const right = await t.call('AuthRpc.verifyCode', { otpRequestId: requested.otpRequestId, code });
    assert.equal(right.status, 429);
    assert.equal(right.body.data.code, 'RATE_LIMITED');
    assert.match(right.body.data.error, /Too many wrong codes; request a new one/);
    const retryAfter = Number(right.headers.get('retry-after'));
    assert.ok(retryAfter > 0 && retryAfter <= 600, `Retry-After ${retryAfter}`);
  });

  it('limits code requests per address with 429 and Retry-After', async () => {
    const address = `${uniqueName('flood')}@example.com`;
    for (let index = 0; index < 3; index++) await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: address });
    // Over HTTP: the status and the Retry-After header are what a client sees.
    const limited = await t.call('AuthRpc.requestVerificationCode', { channelType: 'email', identifier: address.toUpperCase() });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.data.code, 'RATE_LIMITED');
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
  });

  it('validates the identifier for its channel', async () => {
    const anonymous = t.as(null);
    const email = await refused(anonymous.AuthRpc.requestVerificationCode({ channelType: 'email', identifier: 'not-an-address' }), 'VALIDATION_ERROR');
    assert.equal(email.issues?.[0]?.path, 'identifier');
    const phone = await refused(anonymous.AuthRpc.requestVerificationCode({ channelType: 'sms', identifier: '12345' }), 'VALIDATION_ERROR');
    assert.equal(phone.issues?.[0]?.path, 'identifier');
    const channel = await refused(anonymous.call('AuthRpc.requestVerificationCode', { channelType: 'pigeon', identifier: 'x' }), 'VALIDATION_ERROR');
    assert.equal(channel.issues?.[0]?.path, 'channelType');
  });

  it('logs an existing user in with a mailed code, and runs the after-login hooks', async () => {
    const name = uniqueName('codelogin');
    const address = `${name}@example.com`;
    const first = await mailCode(address);
    await t.as(null).AuthRpc.signup({
      email: address,
      username: name,
      verifications: { email: { otpRequestId: first.requested.otpRequestId, code: first.code } },
    });
    const { requested, code } = await mailCode(address);
    const session = await t.as(null).AuthRpc.login({ otpRequestId: requested.otpRequestId, code });
    assert.equal(session.user.username, name);
    assert.equal((await t.as(session).AuthRpc.getSession()).user.email, address);
    assert.deepEqual(logins.at(-1), { user: session.user, method: 'code' });
    await refused(t.as(null).AuthRpc.login({ otpRequestId: requested.otpRequestId, code }), 'BAD_REQUEST');

    const stranger = await mailCode(`${uniqueName('nobody')}@example.com`);
    await refused(t.as(null).AuthRpc.login({ otpRequestId: stranger.requested.otpRequestId, code: stranger.code }), 'UNAUTHENTICATED');
    const mixed = await refused(t.as(null).AuthRpc.login({ identifier: name, code: '123456' }), 'VALIDATION_ERROR');
    assert.match(mixed.message, /identifier and password, or otpRequestId and code/);
  });
});

/** The settings of a Twilio-style SMS provider at `url`. */
const smsProvider = (url: string) => ({ SMS_API_URL: url, SMS_ACCOUNT_SID: 'AC123', SMS_AUTH_TOKEN: 'token-xyz', SMS_FROM: '+15550000000' });

describe('one-time codes by SMS and WhatsApp through a Twilio-style provider', () => {
  let t: TestApp;
  let provider: Awaited<ReturnType<typeof startTextProvider>>;

  before(async () => {
    provider = await startTextProvider();
    t = await startTestApp({
      env: {
        ...smsProvider(provider.url),
        WHATSAPP_FROM: '+15550000001',
        SIGNUP_REQUIRE_PHONE_VERIFICATION: 'true',
      },
    });
  });
  after(async () => {
    await t.close();
    await provider.close();
  });

  it('sends the code over the provider API and signs up with a verified phone', async () => {
    const requested = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'sms', identifier: '+1 (555) 123-4567' });
    assert.equal(requested.destination, '***567');
    const text = provider.texts.at(-1)!;
    assert.equal(text.path, '/2010-04-01/Accounts/AC123/Messages.json');
    assert.equal(text.authorization, `Basic ${Buffer.from('AC123:token-xyz').toString('base64')}`);
    assert.equal(text.form.get('To'), '+15551234567');
    assert.equal(text.form.get('From'), '+15550000000');
    const name = uniqueName('phone');
    const created = await t.as(null).AuthRpc.signup({
      email: `${name}@example.com`,
      username: name,
      verifications: { phone: { otpRequestId: requested.otpRequestId, code: codeIn(text.form.get('Body')!) } },
    });
    assert.equal(created.user.phoneNumber, '+15551234567');
    assert.equal(created.user.isPhoneVerified, true);
    assert.equal(created.user.isVerified, false);
  });

  it('prefixes WhatsApp numbers as the provider expects', async () => {
    await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'whatsapp', identifier: '+447700900123' });
    const text = provider.texts.at(-1)!;
    assert.equal(text.form.get('To'), 'whatsapp:+447700900123');
    assert.equal(text.form.get('From'), 'whatsapp:+15550000001');
  });

  it('tells clients which verifications signup needs', async () => {
    const config = await t.as(null).AuthRpc.getClientConfig();
    assert.deepEqual(config.requiredVerifications, { email: false, phone: true });
  });
});

describe('the SMS request with tracing on', () => {
  let t: TestApp;
  let collector: Awaited<ReturnType<typeof startHttpReceiver>>;
  let provider: Awaited<ReturnType<typeof startHttpReceiver>>;

  before(async () => {
    collector = await startHttpReceiver();
    provider = await startHttpReceiver(() => ({ status: 201, json: { sid: 'SM1' } }));
    t = await startTestApp({
      env: {
        ...smsProvider(provider.url),
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
    });
  });
  after(async () => {
    await t.close();
    await Promise.all([collector.close(), provider.close()]);
  });

  it("is a client span of the call's trace, named to the provider by its traceparent, without its path", async () => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const traceparent = `00-${traceId}-${callerSpanId}-01`;
    // Over HTTP: the caller's trace comes in its traceparent header.
    await t.ok('AuthRpc.requestVerificationCode', { channelType: 'sms', identifier: '+15551234567' }, { headers: { traceparent } });
    const sent = provider.requests.at(-1)!;
    assert.equal(sent.path, '/2010-04-01/Accounts/AC123/Messages.json');
    const [, spanId] = new RegExp(`^00-${traceId}-([0-9a-f]{16})-01$`).exec(sent.headers.traceparent ?? '') ?? [];
    assert.ok(spanId && spanId !== callerSpanId, `the provider is sent the request's own span: ${sent.headers.traceparent}`);
    const spans = () =>
      collector.requests.flatMap((request) =>
        (JSON.parse(request.body) as TraceExport).resourceSpans.flatMap((resource) => resource.scopeSpans.flatMap((scope) => scope.spans)),
      );
    const span = await eventually(() => spans().find((each) => each.spanId === spanId));
    assert.equal(span.kind, 3, 'a client span');
    const attributes = Object.fromEntries(span.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
    assert.equal(attributes['server.port'], provider.port);
    assert.equal(attributes['http.response.status_code'], 201);
    assert.ok(!JSON.stringify(spans()).includes('AC123'), 'no span holds the path, which names the account');
  });
});

describe('invite-only signup, signup rules, and the embedded outbox', () => {
  let t: TestApp;
  let founder: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp({
      env: {
        SIGNUP_MODE: 'invite',
        SIGNUP_BLOCKED_EMAIL_DOMAINS: 'spam.test',
        SIGNUP_BLOCKED_EMAIL_PATTERNS: '^bot[0-9]+@',
        OTP_VERIFY_FAILURE_LIMIT: '6',
        TRUST_PROXY: 'true',
      },
    });
  });
  after(() => t.close());

  it('lets the first user in without a code, then requires one, which joins the inviting subscription', async () => {
    founder = await t.signup();
    assert.equal(founder.user.role, 'admin');
    const name = uniqueName('joiner');
    const anonymous = t.as(null).AuthRpc;
    const uninvited = await refused(anonymous.signup({ email: `${name}@example.com`, username: name, password: 'long password' }), 'VALIDATION_ERROR');
    assert.equal(uninvited.issues?.[0]?.path, 'inviteCode');

    const invite = await t.as(founder).AdminUserRpc.createInviteCode({ role: 'staff', maxUses: 1 });
    // Over HTTP: an answer without data is the envelope's success and message.
    const pre = await t.call('AuthRpc.preSignupValidate', { email: `${name}@example.com`, username: name, inviteCode: invite.code });
    assert.deepEqual(pre.body, { success: true, message: 'The signup details are valid' });
    const joined = await anonymous.signup({ email: `${name}@example.com`, username: name, password: 'long password', inviteCode: invite.code });
    assert.equal(joined.subscriptionId, founder.subscriptionId);
    assert.equal(joined.user.role, 'staff');
    const members = await t.as(founder).AdminUserRpc.getData();
    assert.ok(members.docs.some((doc) => doc._id === joined.user._id));
    const listed = await t.as(founder).AdminUserRpc.listInviteCodes();
    assert.deepEqual([listed.data[0].uses, listed.data[0].status], [1, 'exhausted']);

    const late = uniqueName('late');
    const usedUp = await refused(anonymous.signup({ email: `${late}@example.com`, username: late, inviteCode: invite.code }), 'VALIDATION_ERROR');
    assert.equal(usedUp.issues?.[0]?.path, 'inviteCode');
    const bogus = await refused(anonymous.preSignupValidate({ email: `${late}@example.com`, username: late, inviteCode: 'inv_nope' }), 'VALIDATION_ERROR');
    assert.equal(bogus.issues?.[0]?.path, 'inviteCode');
  });

  it('applies the blocked domains, blocked patterns and reserved usernames, creating nothing', async () => {
    const invite = await t.as(founder).AdminUserRpc.createInviteCode({ maxUses: 10 });
    for (const [params, path] of [
      [{ email: 'someone@spam.test', username: uniqueName() }, 'email'],
      [{ email: 'someone@mail.spam.test', username: uniqueName() }, 'email'],
      [{ email: 'bot42@example.com', username: uniqueName() }, 'email'],
      [{ email: `${uniqueName()}@example.com`, username: 'Admin' }, 'username'],
    ] as const) {
      for (const method of ['preSignupValidate', 'signup'] as const) {
        const error = await refused(
          t.as(null).AuthRpc[method]({ ...params, inviteCode: invite.code }),
          'VALIDATION_ERROR',
          `${method} ${JSON.stringify(params)}`,
        );
        assert.equal(error.issues?.[0]?.path, path);
      }
    }
    await refused(t.as(null).AuthRpc.preSignupValidate({ email: founder.user.email, username: uniqueName(), inviteCode: invite.code }), 'CONFLICT');
    const listed = await t.as(founder).AdminUserRpc.listInviteCodes();
    assert.equal(listed.data.find((record) => record._id === invite._id)?.uses, 0);
  });

  it('writes codes to the outbox when no channel is configured, never to the log', async () => {
    const address = `${uniqueName('outbox')}@example.com`;
    const requested = await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: address });
    const [row] = await t.app.deps.db.execute<{ recipient: string; body: string }>('select recipient, body from auth_outbox where recipient = ?', [address]);
    assert.ok(row, 'the message is in the outbox');
    const code = codeIn(row.body);
    assert.ok(!t.logs.some((line) => line.includes(code)), 'the code is not in the log');
    assert.ok(t.logs.some((line) => line.includes('written to the outbox')));
    assert.deepEqual(await t.as(null).AuthRpc.verifyCode({ otpRequestId: requested.otpRequestId, code }), {
      verified: true,
      otpRequestId: requested.otpRequestId,
      finalized: false,
    });
  });

  it('keeps the messages of a database made while the outbox was the core’s (core_outbox)', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-outbox-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const options = { dataDir, persistent: true, databaseUrl: scratch?.url, withNotes: false };
    try {
      // Without the plugin its migration does not run: the core's migrations leave the table as the core made it.
      const old = await startTestApp({ ...options, plugins: [] });
      const message = { id: randomUUID(), channel: 'sms', recipient: '+15550001111', subject: 'Your code', body: 'Your code is 123456' };
      await old.app.deps.db.execute(
        'insert into core_outbox (id, channel, recipient, subject, body, created_at) values (?, ?, ?, ?, ?, now())',
        Object.values(message),
      );
      await old.close();
      const moved = await startTestApp({ ...options, plugins: ['auth'] });
      try {
        assert.deepEqual(await moved.app.deps.db.execute('select id, channel, recipient, subject, body from auth_outbox'), [message]);
      } finally {
        await moved.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('limits wrong codes per client address across requests with 429 and Retry-After', async () => {
    const codes: AuthRpcRequestVerificationCodeResult[] = [];
    for (let index = 0; index < 2; index++) {
      codes.push(await t.as(null).AuthRpc.requestVerificationCode({ channelType: 'email', identifier: `${uniqueName('guess')}@example.com` }));
    }
    // Three wrong guesses on each of two requests: six failures from this address.
    for (const { otpRequestId } of codes) {
      for (let attempt = 0; attempt < 3; attempt++) {
        await refused(t.as(null).AuthRpc.verifyCode({ otpRequestId, code: '000000' }), 'VALIDATION_ERROR');
      }
    }
    // Over HTTP: the status and the Retry-After header are what a client sees.
    const limited = await t.call('AuthRpc.verifyCode', { otpRequestId: codes[0]!.otpRequestId, code: '000000' });
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
  });

  it('limits wrong codes per address across requests and client addresses', async () => {
    const address = `${uniqueName('target')}@example.com`;
    // Over HTTP: each client's address is the one X-Forwarded-For names (TRUST_PROXY is on).
    const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
    for (const ip of ['10.9.0.1', '10.9.0.2']) {
      const { otpRequestId } = await t.ok<AuthRpcRequestVerificationCodeResult>(
        'AuthRpc.requestVerificationCode',
        { channelType: 'email', identifier: address },
        from(ip),
      );
      for (let attempt = 0; attempt < 3; attempt++) {
        assert.equal((await t.call('AuthRpc.verifyCode', { otpRequestId, code: '000000' }, from(ip))).status, 400);
      }
    }
    const { otpRequestId } = await t.ok<AuthRpcRequestVerificationCodeResult>(
      'AuthRpc.requestVerificationCode',
      { channelType: 'email', identifier: address },
      from('10.9.0.3'),
    );
    const limited = await t.call('AuthRpc.verifyCode', { otpRequestId, code: '000000' }, from('10.9.0.3'));
    assert.equal(limited.status, 429);
    const elsewhere = await t.ok<AuthRpcRequestVerificationCodeResult>(
      'AuthRpc.requestVerificationCode',
      { channelType: 'email', identifier: `${uniqueName()}@example.com` },
      from('10.9.0.3'),
    );
    assert.equal((await t.call('AuthRpc.verifyCode', { otpRequestId: elsewhere.otpRequestId, code: '000000' }, from('10.9.0.3'))).status, 400);
  });
});
