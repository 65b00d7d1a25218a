import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { DEFAULT_CATALOGUE_FILE } from '../../core/ai/catalogue.ts';
import { queueProbePlugin } from '../fixtures/queue-probe-plugin.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { addUser, type Member } from '../support/users.ts';

/** Debian's chromium, installed by .ci/ensure-chromium.sh; playwright-core downloads no browser. */
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = 'test-results/console';
const PLUGINS = [
  'auth',
  'admin-user',
  'api-key',
  'api-management',
  'secrets',
  'scheduler',
  'workflow',
  'knowledge-base',
  'ai-telemetry',
  'memory',
  'job-queue',
  'queue-probe',
  'oauth-server',
  'account-security',
  'console',
];
// The webhook receiver listens on 127.0.0.1, which the outbound guard refuses unless told.
const ENV = { OUTBOUND_ALLOW_PRIVATE: 'true', WEBHOOK_TEST_TIMEOUT_MS: '3000', WEBHOOK_RETRY_SCHEDULE: '0,300ms,300ms', JOBS_POLL_MS: '500' };

/** The local embedder, which the real calls below use, as the shipped catalogue has it but without a price: its calls are the unpriced series. */
const EMBEDDER = 'local-lexical-384';

/** Polls `check` until it holds (a delivery sent by a job, a table refreshed by a click). */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('console in a browser', () => {
  let t: TestApp;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Server;
  let hookUrl: string;
  const received: { type: string }[] = [];
  /** While set, the receiver answers 500: deliveries fail until re-sent. */
  let failing = false;
  /** Labels of the probe's jobs that fail (and, with no retries, die). */
  const failingJobs = new Set(['nightly-export']);
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let staff: Member;
  let member: Member;
  /** A user whose role and active flag the admin changes in the users page. */
  let changed: Member;
  const catalogueDir = mkdtempSync(path.join(tmpdir(), 'console-catalogue-'));

  /** Runs a step of the scenario; on failure, keeps a screenshot of every open page under test-results/console/. */
  const step = (name: string, body: () => Promise<void>): void => {
    it(name, async () => {
      try {
        await body();
      } catch (error) {
        mkdirSync(SCREENSHOTS, { recursive: true });
        const slug = name.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
        for (const [index, open] of (browser?.contexts().flatMap((each) => each.pages()) ?? []).entries()) {
          await open.screenshot({ path: `${SCREENSHOTS}/${slug}-${index}.png`, fullPage: true }).catch(() => undefined);
        }
        throw error;
      }
    });
  };

  const signIn = async (on: Page, identifier: string, password: string) => {
    await on.goto(`${t.url}/console`);
    await on.getByLabel('E-mail or username').fill(identifier);
    await on.getByLabel('Password').fill(password);
    // By keyboard: Enter in the last field submits the form.
    await on.getByLabel('Password').press('Enter');
  };

  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        if (failing) return res.writeHead(500).end();
        received.push(JSON.parse(body));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const catalogue = JSON.parse(readFileSync(DEFAULT_CATALOGUE_FILE, 'utf8'));
    delete catalogue.models.find((model: { id: string }) => model.id === EMBEDDER).costPerMillionTokens;
    const catalogueFile = path.join(catalogueDir, 'ai-catalogue.json');
    writeFileSync(catalogueFile, JSON.stringify(catalogue));
    t = await startTestApp({
      withNotes: false,
      plugins: PLUGINS,
      env: { ...ENV, AI_CATALOGUE_FILE: catalogueFile },
      extraPlugins: [queueProbePlugin(failingJobs)],
    });
    admin = await t.signup();
    staff = await addUser(t, admin.subscriptionId, 'staff');
    member = await addUser(t, admin.subscriptionId, 'user');
    changed = await addUser(t, admin.subscriptionId, 'user');
    // Real AI calls, today: the service embeds 7 words, then 5, with the local embedder, and the AI client records their traces.
    await t.as(admin).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'the quarterly report is due on friday' } });
    await t.as(admin).MemoryRpc.recallMemories({ scope: 'user', queryText: 'when is the report due' });
    // The priced series: no provider with a price answers here, so these traces are recorded as the AI client reports a call, yesterday and today.
    const { telemetryService } = t.app.depsOf('ai-telemetry') as { telemetryService: { record(call: object): Promise<void> } };
    const day = 86_400_000;
    for (const [ago, tokens, durationMs] of [
      [day, 1200, 420],
      [0, 800, 610],
      [0, 500, 380],
    ] as const) {
      await telemetryService.record({
        traceId: randomUUID(),
        subscriptionId: admin.subscriptionId,
        userId: admin.user._id,
        threadId: null,
        requestTimestamp: new Date(Date.now() - ago),
        durationMs,
        status: 'success',
        provider: 'openai',
        model: 'gpt-4o-mini',
        operation: 'chat',
        callerType: 'agent',
        callerName: 'support-bot',
        inputTokens: tokens - 100,
        outputTokens: 100,
        cachedTokens: 0,
        totalTokens: tokens,
        costUsd: tokens * 0.00002,
        attempts: 1,
        error: null,
      });
    }
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: run .ci/ensure-chromium.sh`);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
    context = await browser.newContext();
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    receiver?.close();
    rmSync(catalogueDir, { recursive: true, force: true });
  });

  step('signs an admin in with the session cookie, kept from the page', async () => {
    await signIn(page, admin.user.username, admin.password);
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    const [cookie] = (await context.cookies()).filter((each) => each.name === 'session');
    assert.ok(cookie, 'the session cookie is set');
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Lax');
    assert.equal(await page.evaluate(() => document.cookie.includes('session')), false, 'the page cannot read the session');
    assert.equal(await page.evaluate(() => window.localStorage.length + window.sessionStorage.length), 0, 'nothing kept in storage');
  });

  let fullKey = '';
  step('creates an API key, shows it once, and registers its webhook with it', async () => {
    await page.getByLabel('Description').fill('console key');
    await page.getByRole('button', { name: 'Create key' }).click();
    fullKey = (await page.getByTestId('full-key').textContent())!;
    assert.ok(fullKey.length > 20, fullKey);
    await page.getByRole('cell', { name: 'console key', exact: true }).waitFor();
    await page.getByLabel('Webhook URL').fill(hookUrl);
    await page.getByRole('button', { name: 'Register webhook' }).click();
    await page.getByText('Webhook verified.').waitFor();
    await page.getByRole('cell', { name: `${hookUrl} (verified)` }).waitFor();
    assert.ok(received.some((event) => event.type === 'webhook.test'));
    await page.reload();
    await page.getByRole('cell', { name: 'console key', exact: true }).waitFor();
    assert.equal((await page.content()).includes(fullKey), false, 'the full key is gone after a reload');
  });

  step('shows a delivery of the webhook in its log', async () => {
    await t.as(admin).SecretsRpc.create({ zone: 'production', key: 'db-password', value: 'hunter2-but-longer', description: 'The database' });
    await eventually('the secret.changed delivery', async () => received.some((event) => event.type === 'secret.changed'));
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: 'Show deliveries of console key' }).click();
    const row = page.getByRole('row').filter({ hasText: 'secret.changed' });
    await eventually('the delivered row', async () => {
      if ((await row.count()) > 0 && (await row.first().textContent())!.includes('delivered')) return true;
      await page.getByRole('button', { name: 'Refresh' }).click();
      return false;
    });
  });

  step('re-sends a failed delivery from the log', async () => {
    failing = true;
    await t.as(admin).SecretsRpc.create({ zone: 'production', key: 'api-token', value: 'token-value-1234' });
    const row = page.getByRole('row').filter({ hasText: 'secret.changed' }).filter({ hasText: 'failed' });
    await eventually('the failed delivery', async () => {
      if ((await row.count()) > 0) return true;
      await page.getByRole('button', { name: 'Refresh' }).click();
      return false;
    });
    failing = false;
    await page.getByRole('button', { name: 'Re-send 1 failed' }).click();
    // The failed row goes as soon as the delivery is queued again; the receiver sees it a moment later.
    const resent = page.getByRole('row').filter({ hasText: 'secret.changed' }).filter({ hasText: 'delivered' });
    await eventually('the delivery re-sent', async () => {
      if ((await row.count()) === 0 && (await resent.count()) === 2) return true;
      await page.getByRole('button', { name: 'Refresh' }).click();
      return false;
    });
    assert.equal(received.filter((event) => event.type === 'secret.changed').length, 2);
  });

  step("shows the subscription's background jobs, and retries a dead one", async () => {
    const { jobId } = await t.ok('QueueProbeRpc.enqueue', { label: 'nightly-export' }, { token: admin.token });
    await eventually('the probe job dead', async () => (await t.app.deps.jobs.get('queue-probe.work', jobId))?.state === 'dead');
    await page.getByRole('link', { name: 'Background jobs' }).click();
    const counts = page.getByRole('table', { name: 'Jobs per queue and state' });
    // The webhook's deliveries of the steps before ran as jobs of this subscription.
    const deliveries = await counts.getByRole('row').filter({ hasText: 'api-management.deliver' }).allTextContents();
    assert.equal(deliveries.length, 1, 'one row for the delivery queue');
    await page.getByLabel('Show jobs in state').selectOption('dead');
    const dead = page.getByRole('table', { name: 'Background jobs, newest first' }).getByRole('row').filter({ hasText: 'queue-probe.work' });
    await dead.getByText('nightly-export could not reach its peer').waitFor();
    failingJobs.clear();
    await dead.getByRole('button', { name: /^Retry the queue-probe\.work job/ }).click();
    await page.getByText('No job in this state.').waitFor();
    await eventually('the retried job done', async () => (await t.app.deps.jobs.get('queue-probe.work', jobId))?.state === 'done');
  });

  step('reveals a secret on request and shows the read in the audit log', async () => {
    await page.getByRole('link', { name: 'Secrets' }).click();
    await page.getByRole('cell', { name: 'db-password', exact: true }).waitFor();
    assert.equal((await page.content()).includes('hunter2-but-longer'), false, 'no value before Reveal');
    await page.getByRole('button', { name: 'Reveal the value of production:db-password' }).click();
    await page.getByText('hunter2-but-longer').waitFor();
    await page.getByRole('row').filter({ hasText: 'read' }).filter({ hasText: 'production:db-password' }).first().waitFor();
    const audit = await t.as(admin).SecretsRpc.getAuditLog();
    assert.ok(audit.data.some((entry: { action: string }) => entry.action === 'read'));
  });

  step("changes a user's role and active flag by keyboard, and the change holds after a reload", async () => {
    await page.getByRole('link', { name: 'Users and invites' }).click();
    await page.getByRole('button', { name: `Change the role or status of ${changed.username}` }).click();
    const change = page.getByRole('form', { name: `Change ${changed.username}` });
    const role = change.getByLabel('Role');
    assert.equal(await role.evaluate((select) => select === document.activeElement), true, 'the form takes the focus');
    await role.selectOption('staff');
    await page.keyboard.press('Tab');
    assert.equal(await change.getByLabel('Active (can sign in)').evaluate((box) => box === document.activeElement), true);
    await page.keyboard.press('Space');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await change
      .getByRole('status')
      .filter({ hasText: `Saved: ${changed.username} is staff, inactive.` })
      .waitFor();
    await page.reload();
    const row = page
      .getByRole('table', { name: 'Users of the subscription' })
      .getByRole('row')
      .filter({ hasText: `${changed.username}@` });
    await row.waitFor();
    const [, , roleCell, active] = await row.getByRole('cell').allTextContents();
    assert.deepEqual([roleCell, active], ['staff', 'no']);
    const stored = await t.as(admin).AdminUserRpc.findById({ id: changed.user._id });
    assert.deepEqual([stored.role, stored.isActive], ['staff', false]);
  });

  step('draws the telemetry charts from the traces of real calls and recorded ones, with their numbers as text', async () => {
    await page.getByRole('link', { name: 'AI telemetry' }).click();
    const tokens = page.getByRole('img', { name: /Tokens per day and model/ });
    await tokens.waitFor();
    assert.equal(await tokens.locator('rect.bar').count(), 3, 'two days: one model, then two');
    // 2,500 recorded tokens and the 12 words the embedder read.
    assert.match((await tokens.locator('desc').textContent())!, new RegExp(`2,512 tokens used over 2 days with calls, by gpt-4o-mini, ${EMBEDDER}`));
    const cost = page.getByRole('img', { name: /Cost per day and model/ });
    await cost.waitFor();
    assert.equal(await cost.locator('rect.bar').count(), 2, 'one priced model on each day');
    assert.match((await cost.locator('desc').textContent())!, /\$0\.05 spent over 2 days/);
    await page.getByText(`Not priced: ${EMBEDDER}.`).waitFor();
    const latency = page.getByRole('img', { name: /Call duration percentiles/ });
    // The real calls may take under a millisecond, a bar of no height: only the recorded model's three bars are sure to be drawn.
    assert.equal(
      await latency
        .locator('rect.bar title')
        .filter({ hasText: /^gpt-4o-mini, p\d\d:/ })
        .count(),
      3,
      'three percentiles of the priced model',
    );
    assert.match((await latency.locator('desc').textContent())!, new RegExp(`${EMBEDDER}: p50 [\\d.,]+ ms`));
    await page.getByText('Tokens and cost as a table').click();
    const numbers = page.getByRole('table', { name: 'Calls, tokens and cost per day and model' });
    const embedded = await numbers.getByRole('row').filter({ hasText: EMBEDDER }).getByRole('cell').allTextContents();
    assert.deepEqual(embedded.slice(1), [EMBEDDER, '2', '0', '12', '0', '12', 'no price'], 'the two real calls, unpriced');
  });

  step('fits a 375 px wide screen without scrolling sideways', async () => {
    const fits = async (what: string) => {
      const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth }));
      assert.ok(scroll <= width, `${what}: ${scroll} px wide in ${width}`);
    };
    await page.setViewportSize({ width: 375, height: 800 });
    for (const path of ['keys', 'security', 'webhooks', 'users', 'secrets', 'runs', 'knowledge', 'jobs', 'telemetry']) {
      await page.goto(`${t.url}/console#/${path}`);
      await page.locator('main h2').first().waitFor();
      await page.waitForLoadState('networkidle');
      await fits(`#/${path}`);
    }
    await page.goto(`${t.url}/console#/users`);
    await page.getByRole('button', { name: `Change the role or status of ${member.username}` }).click();
    await page.getByRole('form', { name: `Change ${member.username}` }).waitFor();
    await fits("#/users with a user's form open");
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  step('gives staff the pages of their role: no admin pages in the menu, no values to reveal', async () => {
    const own = await browser.newContext();
    own.setDefaultTimeout(10_000);
    const staffPage = await own.newPage();
    await signIn(staffPage, staff.username, staff.password);
    await staffPage.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    const menu = await staffPage.getByRole('navigation').locator('a').allTextContents();
    assert.deepEqual(menu, [
      'API keys',
      'Authorised apps',
      'Security',
      'Secrets',
      'Workflows and schedules',
      'Knowledge base',
      'Background jobs',
      'AI telemetry',
    ]);
    await staffPage.goto(`${t.url}/console#/jobs`);
    await staffPage.getByRole('table', { name: 'Jobs per queue and state' }).waitFor();
    assert.equal(await staffPage.getByRole('button', { name: /^Retry/ }).count(), 0, 'staff see jobs but retry none');
    await staffPage.goto(`${t.url}/console#/secrets`);
    await staffPage.getByRole('cell', { name: 'db-password', exact: true }).waitFor();
    assert.equal(await staffPage.getByRole('button', { name: /Reveal/ }).count(), 0);
    await staffPage.goto(`${t.url}/console#/users`);
    await staffPage.getByText('Users and invites is for admins.').waitFor();
    assert.equal(await staffPage.getByRole('button', { name: /^Change the role/ }).count(), 0, 'staff are offered no change of users');
    // As the service refuses it to them.
    const update = await staffPage.evaluate(async (_id) => {
      const answer = await fetch('/api/rpc', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ method: 'AdminUserRpc.update', params: { _id, role: 'admin' } }),
      });
      return answer.status;
    }, staff.user._id);
    assert.equal(update, 403);
    // Signed out elsewhere: the next call is refused and the page asks to sign in again.
    await t.as({ token: (await own.cookies()).find((cookie) => cookie.name === 'session')!.value }).AuthRpc.logout();
    await staffPage.goto(`${t.url}/console#/runs`);
    await staffPage.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await own.close();
  });

  step('gives a user with the role user their apps and security pages only, refuses the others, and the service refuses their calls', async () => {
    const own = await browser.newContext();
    own.setDefaultTimeout(10_000);
    const refused = await own.newPage();
    await signIn(refused, member.username, member.password);
    await refused.getByRole('heading', { level: 1, name: 'Authorised apps' }).waitFor();
    assert.deepEqual(await refused.getByRole('navigation').locator('a').allTextContents(), ['Authorised apps', 'Security']);
    await refused.goto(`${t.url}/console#/users`);
    await refused.getByText('Users and invites is for admins.').waitFor();
    await refused.goto(`${t.url}/console#/keys`);
    await refused.getByText('API keys is for staff and admins.').waitFor();
    // The page only hides: the service itself refuses the admin operations to this session.
    const status = await refused.evaluate(async () => {
      const response = await fetch('/api/rpc', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{"method":"AdminUserRpc.getData","params":{}}',
      });
      return response.status;
    });
    assert.equal(status, 403);
    await own.close();
  });

  step('refuses a body that is not JSON, all a form of another site could send with the cookie', async () => {
    const response = await page.evaluate(async () => {
      const answer = await fetch('/api/rpc', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{"method":"ApiKeyRpc.getData","params":{}}' });
      return { status: answer.status, body: await answer.json() };
    });
    assert.equal(response.status, 400);
    assert.equal(response.body.data.code, 'BAD_REQUEST');
  });
});
