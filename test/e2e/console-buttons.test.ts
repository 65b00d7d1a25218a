import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { queueProbePlugin } from '../fixtures/queue-probe-plugin.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { addUser } from '../support/users.ts';

/** Debian's chromium, installed by .ci/ensure-chromium.sh; playwright-core downloads no browser. */
const CHROMIUM = '/usr/bin/chromium';
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
  'job-queue',
  'queue-probe',
  'oauth-server',
  'account-security',
  'console',
];
/** Answers that say the console itself is wrong: an operation it names that does not exist, params it builds that do not fit, or a failure of the service. */
const CONSOLE_BUGS = new Set(['METHOD_NOT_FOUND', 'VALIDATION_ERROR', 'INTERNAL']);
/** Most buttons one page may show, with what clicking them reveals: past it the page keeps making new ones. */
const MAX_CLICKS = 100;

/**
 * Every button of every console page, clicked by an admin: the pages are
 * those of the menu the console draws, the buttons those each page shows
 * (and those its clicks reveal), found in the page, not listed here. Forms'
 * required fields are filled as they ask (type, length) before their button is
 * clicked; confirmations are accepted. Any answer of /api/rpc coded as a
 * console bug, and any error the page throws, fails the test.
 */
describe('every button of every console page', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  const dialogs: string[] = [];
  let where = 'signing in';
  let inFlight = 0;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: PLUGINS, extraPlugins: [queueProbePlugin(new Set(['broken-export']))] });
    const admin = await t.signup();
    // Something on each page for its buttons to act on: a key, a secret, a user, an invite code, a dead job.
    await t.as(admin).ApiKeyRpc.create({ description: 'key to delete' });
    await t.as(admin).SecretsRpc.create({ zone: 'production', key: 'db-password', value: 'a value long enough', description: 'The database' });
    await addUser(t, admin.subscriptionId, 'user');
    await t.as(admin).AdminUserRpc.createInviteCode();
    await t.as(admin).call('QueueProbeRpc.enqueue', { label: 'broken-export' });
    await eventually(async () => ((await t.as(admin).JobQueueRpc.listJobs({ state: 'dead' })).totalDocs > 0 ? true : undefined), 30_000);

    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: run .ci/ensure-chromium.sh`);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
    const context = await browser.newContext();
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`${where}: the page threw ${error.message}`));
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    page.on('request', (request) => void (request.url().endsWith('/api/rpc') && inFlight++));
    page.on('requestfailed', (request) => void (request.url().endsWith('/api/rpc') && inFlight--));
    page.on('response', async (response) => {
      if (!response.url().endsWith('/api/rpc')) return;
      const method = (response.request().postDataJSON() as { method: string }).method;
      const body = (await response.json().catch(() => null)) as { success: boolean; data?: { code?: string; error?: string } } | null;
      if (!body) problems.push(`${where}: ${method} answered HTTP ${response.status()} without JSON`);
      else if (!body.success && CONSOLE_BUGS.has(body.data?.code ?? '')) problems.push(`${where}: ${method} answered ${body.data!.code}: ${body.data!.error}`);
      inFlight--;
    });

    await page.goto(`${t.url}/console`);
    await page.getByLabel('E-mail or username').fill(admin.user.username);
    await page.getByLabel('Password').fill(admin.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('nav a').first().waitFor();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  /** Until the page's calls have answered and what they draw is drawn. */
  async function settled(): Promise<void> {
    await eventually(async () => (inFlight === 0 ? true : undefined));
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 50))));
    await eventually(async () => (inFlight === 0 ? true : undefined));
  }

  /** Fills the empty required fields of the form a submit button belongs to, as each field's type and length ask (an optional one may hold a format of its own). */
  async function fillFormOf(button: Locator): Promise<void> {
    await button.evaluate((element) => {
      const form = (element as HTMLButtonElement).form;
      if (!form || (element as HTMLButtonElement).type !== 'submit') return;
      for (const input of [...form.elements] as HTMLInputElement[]) {
        if (!('value' in input) || !input.required || input.value || input.type === 'checkbox' || input.type === 'hidden' || input.tagName === 'SELECT')
          continue;
        const length = Math.max(input.minLength, 12);
        const byType: Record<string, string> = {
          url: 'https://example.com/hook',
          email: `someone-${Date.now()}@example.com`,
          number: input.min || '1',
          password: 'p'.repeat(length),
        };
        input.value = byType[input.type] ?? `button test ${'x'.repeat(Math.max(0, length - 12))}`.slice(0, input.maxLength > 0 ? input.maxLength : undefined);
      }
    });
  }

  /** A button's name as a reader tells it from the others: its label, or its text. */
  const nameOf = async (button: Locator) => (await button.getAttribute('aria-label')) ?? (await button.innerText()).trim();

  it('answers no click with METHOD_NOT_FOUND, VALIDATION_ERROR or INTERNAL, and throws no error', async () => {
    const pages = await page.locator('nav a').evaluateAll((links) => links.map((link) => ({ href: link.getAttribute('href')!, title: link.textContent! })));
    assert.ok(pages.length >= 8, `the menu lists the pages: ${JSON.stringify(pages)}`);
    const clickedOn: Record<string, string[]> = {};
    for (const { href, title } of pages) {
      where = title;
      await page.goto(`${t.url}/console${href}`);
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
      await settled();
      const clicked = new Set<string>();
      for (let clicks = 0; clicks < MAX_CLICKS; clicks++) {
        let next: { button: Locator; name: string } | undefined;
        for (const button of await page.locator('#main button').all()) {
          if (!(await button.isVisible()) || !(await button.isEnabled())) continue;
          const name = await nameOf(button);
          if (!clicked.has(name)) {
            next = { button, name };
            break;
          }
        }
        if (!next) break;
        clicked.add(next.name);
        where = `${title}, button "${next.name}"`;
        await fillFormOf(next.button);
        await next.button.click();
        await settled();
      }
      clickedOn[title] = [...clicked];
    }
    assert.deepEqual(problems, [], `clicked: ${JSON.stringify(clickedOn, null, 1)}`);
    assert.ok(clickedOn['API keys']?.includes('Delete key key to delete'), JSON.stringify(clickedOn));
    assert.ok(
      dialogs.some((message) => message.startsWith('Delete the key "key to delete"?')),
      'Delete asks first',
    );
    // The browser's session: the security page's buttons signed out the admin's other ones.
    const token = (await page.context().cookies()).find((cookie) => cookie.name === 'session')!.value;
    const keys = (await t.as({ token }).ApiKeyRpc.getData()).data as { description: string }[];
    assert.equal(keys.filter((key) => key.description === 'key to delete').length, 0, 'the key was deleted');
  });
});
