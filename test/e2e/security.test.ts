import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Secret, TOTP } from 'otpauth';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import { startTestApp, type Session, type TestApp } from '../support/harness.ts';
import { addUser, type Member } from '../support/users.ts';

/** Debian's chromium, installed by .ci/ensure-chromium.sh; playwright-core downloads no browser. */
const CHROMIUM = '/usr/bin/chromium';
/** Screenshots of failed steps, and those of the page docs/images shows (plugins/console/README.md). */
const SCREENSHOTS = 'test-results/security';
const PLUGINS = ['auth', 'admin-user', 'api-key', 'secrets', 'account-security', 'console'];
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1';

/** The code an authenticator app shows for the secret, `steps` periods from now: the test is the app. */
const codeOf = (secret: string, steps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: Date.now() + steps * 30_000 });

/**
 * Passkeys, an authenticator app, the second step of a sign-in and a step-up,
 * through the console's own buttons in headless Chromium, with virtual
 * authenticators (the DevTools protocol's WebAuthn domain) standing for a
 * laptop and then a phone. The console is opened at localhost: WebAuthn
 * refuses an IP address as the relying party, which the service takes from
 * the address the browser used.
 */
describe('account security in a browser', () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let admin: Session;
  let member: Member;
  /** The authenticator app's secret, as the page showed it. */
  let appSecret = '';

  /** Runs a step of the scenario; on failure, keeps a screenshot of every open page under test-results/security/. */
  const step = (name: string, body: () => Promise<void>): void => {
    it(name, async () => {
      try {
        await body();
      } catch (error) {
        const slug = name.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
        for (const [index, open] of (browser?.contexts().flatMap((each) => each.pages()) ?? []).entries()) {
          await open.screenshot({ path: `${SCREENSHOTS}/failed-${slug}-${index}.png`, fullPage: true }).catch(() => undefined);
        }
        throw error;
      }
    });
  };

  /** A virtual authenticator of this device: built in, with user verification, which answers without a touch. */
  const addAuthenticator = async () =>
    (
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      })
    ).authenticatorId;

  /** The browser's session, as if it had proved who it is an hour ago. */
  const age = async () => {
    const token = (await context.cookies()).find((cookie) => cookie.name === 'session')!.value;
    const [aged] = await t.app.deps.db.execute<{ id: string }>(
      `update auth_session set signed_in_at = now() - interval '1 hour' where token_hash = ? returning id`,
      [createHash('sha256').update(token).digest('hex')],
    );
    await t.app.deps.credentials.changed({ sessionId: aged!.id });
  };

  const passkeyNames = () => page.getByRole('table', { name: 'Your passkeys' }).locator('tbody tr td:first-child').allTextContents();

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    t = await startTestApp({ withNotes: false, plugins: PLUGINS });
    base = t.url.replace('127.0.0.1', 'localhost');
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    await t.as(admin).SecretsRpc.create({ zone: 'production', key: 'db-password', value: 'hunter2-but-longer' });
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: run .ci/ensure-chromium.sh`);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  step("asks a person without a second factor to confirm it's you with the password; cancelled, the call is refused", async () => {
    await page.goto(`${base}/console`);
    await page.getByLabel('E-mail or username').fill(admin.user.username);
    await page.getByLabel('Password').fill(admin.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await age();
    await page.getByRole('link', { name: 'Secrets' }).click();
    const reveal = page.getByRole('button', { name: 'Reveal the value of production:db-password' });
    const dialog = page.getByRole('dialog', { name: 'Confirm it’s you' });
    await reveal.click();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('alert').filter({ hasText: 'STEP_UP_REQUIRED' }).waitFor();
    await reveal.click();
    await dialog.getByLabel('Password', { exact: true }).fill(admin.password);
    await dialog.getByRole('button', { name: 'Confirm' }).click();
    await page.getByText('hunter2-but-longer').waitFor();
  });

  let laptop = '';
  step('registers a passkey on the security page, and shows the first recovery codes once', async () => {
    laptop = await addAuthenticator();
    await page.getByRole('link', { name: 'Security' }).click();
    await page.getByText('none: a password alone signs you in').waitFor();
    await page.getByLabel('Name of the new passkey (optional)').fill('Laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByRole('heading', { name: 'Your recovery codes' }).waitFor();
    const codes = await page.getByRole('list', { name: 'Recovery codes' }).getByRole('listitem').allTextContents();
    assert.equal(codes.length, 10);
    assert.deepEqual(await passkeyNames(), ['Laptop']);
    await page.getByText('1 passkey', { exact: true }).waitFor();
    assert.equal((await cdp.send('WebAuthn.getCredentials', { authenticatorId: laptop })).credentials.length, 1, 'the authenticator holds it');
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Security' }).waitFor();
    await page.getByText('10 of your recovery codes are left.').waitFor();
    assert.equal(await page.getByRole('list', { name: 'Recovery codes' }).count(), 0, 'the codes are gone once the page changes');
  });

  step('signs out, then signs in with the passkey and no username', async () => {
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    // Back on the page the person signed out from.
    await page.getByRole('heading', { level: 1, name: 'Security' }).waitFor();
    await page.getByText(/^passkey, last confirmed /).waitFor();
  });

  step('adds a second passkey from another device, and removes the first', async () => {
    // The laptop goes away and a phone comes: the laptop's credential is the one the new passkey must not replace.
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: laptop });
    await addAuthenticator();
    await page.getByLabel('Name of the new passkey (optional)').fill('Phone');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByRole('cell', { name: 'Phone', exact: true }).waitFor();
    assert.deepEqual(await passkeyNames(), ['Laptop', 'Phone']);
    assert.equal(await page.getByRole('heading', { name: 'Your recovery codes' }).count(), 0, 'a second factor brings no new codes');
    await page.getByRole('button', { name: 'Remove passkey Laptop' }).click();
    await page.getByText('1 passkey', { exact: true }).waitFor();
    assert.deepEqual(await passkeyNames(), ['Phone']);
  });

  step('signs in with the password, then the remaining passkey as the second factor', async () => {
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.getByLabel('E-mail or username').fill(admin.user.username);
    await page.getByLabel('Password').fill(admin.password);
    await page.getByLabel('Password').press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Finish signing in' }).waitFor();
    await page.getByLabel('Code from your authenticator app, or a recovery code').or(page.getByLabel('A recovery code')).waitFor();
    assert.equal((await context.cookies()).filter((cookie) => cookie.name === 'session').length, 0, 'no session before the second factor');
    await page.screenshot({ path: `${SCREENSHOTS}/security-sign-in.png` });
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await page.getByRole('heading', { level: 1, name: 'Security' }).waitFor();
    await page.getByText(/^password \+ passkey, last confirmed /).waitFor();
  });

  step("asks to confirm it's you before revealing a secret, and the passkey confirms", async () => {
    await age();
    await page.getByRole('link', { name: 'Secrets' }).click();
    await page.getByRole('button', { name: 'Reveal the value of production:db-password' }).click();
    const dialog = page.getByRole('dialog', { name: 'Confirm it’s you' });
    await dialog.waitFor();
    assert.equal(await page.getByText('hunter2-but-longer').count(), 0, 'no value before the confirmation');
    await dialog.getByRole('button', { name: 'Use a passkey' }).click();
    await page.getByText('hunter2-but-longer').waitFor();
    assert.equal(await dialog.count(), 0, 'the dialog is gone');
  });

  step('sets up an authenticator app from its QR code, with the code of the key shown', async () => {
    await page.getByRole('link', { name: 'Security' }).click();
    await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
    const qr = page.getByRole('img', { name: 'QR code to add this account to an authenticator app' });
    await qr.waitFor();
    assert.ok(((await qr.locator('path').getAttribute('d')) ?? '').length > 1000, 'the QR code has its modules');
    appSecret = (await page.getByTestId('authenticator-key').textContent())!.replace(/\s/g, '');
    assert.match(appSecret, /^[A-Z2-7]{16,}$/);
    await page.screenshot({ path: `${SCREENSHOTS}/security-page-desktop.png`, fullPage: true });
    await page.getByLabel('Code from the app').fill(codeOf(appSecret));
    await page.getByRole('button', { name: 'Confirm', exact: true }).click();
    await page.getByText('An authenticator app is set up').waitFor();
    await page.getByText('1 passkey and an authenticator app').waitFor();
  });

  step('lists the devices, and signs out another one', async () => {
    // A phone signs in with the password and a code of the app (the next one: each is used once).
    const stopped = await t.call('AuthRpc.login', { identifier: admin.user.username, password: admin.password }, { headers: { 'user-agent': IPHONE } });
    assert.equal(stopped.body.data.code, 'SECOND_FACTOR_REQUIRED');
    const { ticket } = stopped.body.data.details;
    const phone = await t.call('AccountSecurityRpc.verifySecondFactor', { ticket, code: codeOf(appSecret, 1) }, { headers: { 'user-agent': IPHONE } });
    assert.equal(phone.body.data.status, 'signed-in', JSON.stringify(phone.body));
    await page.reload();
    const sessions = page.getByRole('table', { name: 'Your sessions' });
    await sessions.getByRole('row').filter({ hasText: 'Safari on iOS' }).waitFor();
    assert.match((await sessions.getByRole('row').filter({ hasText: 'This device' }).textContent())!, /Chrome on Linux.*password \+ passkey/);
    await page.setViewportSize({ width: 375, height: 800 });
    const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth }));
    assert.ok(scroll <= width, `the page fits 375 px: ${scroll} px wide in ${width}`);
    await page.screenshot({ path: `${SCREENSHOTS}/security-page-375.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
    await sessions.getByRole('button', { name: /^Sign out Safari on iOS/ }).click();
    await sessions.getByRole('row').filter({ hasText: 'Safari on iOS' }).waitFor({ state: 'detached' });
    const token = (phone.body.data as { token: string }).token;
    assert.equal((await t.call('AuthRpc.getSession', {}, { token })).status, 401, 'the phone is signed out');
  });

  step('an admin requires a factor of everyone: within the grace period a member signing in is led to add one', async () => {
    await page.getByLabel('Require a second factor of').selectOption('everyone');
    await page.getByLabel('Days to add one').fill('7');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByText(/^Everyone must have a second factor, 7 days after/).waitFor();
    const graced = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    graced.setDefaultTimeout(10_000);
    const gracedPage = await graced.newPage();
    await gracedPage.goto(`${base}/console`);
    await gracedPage.getByLabel('E-mail or username').fill(member.username);
    await gracedPage.getByLabel('Password').fill(member.password);
    await gracedPage.getByRole('button', { name: 'Sign in', exact: true }).click();
    await gracedPage.getByRole('heading', { level: 1, name: 'Security' }).waitFor();
    await gracedPage.getByText(/^Your subscription requires a second factor of you: add a passkey or an authenticator app before /).waitFor();
    await graced.close();
  });

  step('past the grace period, a member signing in through #/sign-in/<ticket> enrols an authenticator app first', async () => {
    await page.getByLabel('Days to add one').fill('0');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByText(/^Everyone must have a second factor, 0 days after/).waitFor();
    await page.getByText('Your subscription requires a second factor of you: keep at least one.').waitFor();

    // Where an OpenID provider's answer sends the browser of a sign-in the policy stopped.
    const stopped = await t.call('AuthRpc.login', { identifier: member.username, password: member.password });
    assert.equal(stopped.body.data.code, 'ENROLMENT_REQUIRED');
    const own = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    own.setDefaultTimeout(10_000);
    const memberPage = await own.newPage();
    await memberPage.goto(`${base}/console#/sign-in/${stopped.body.data.details.ticket}`);
    await memberPage.getByRole('heading', { level: 1, name: 'Set up a second factor' }).waitFor();
    assert.equal(new URL(memberPage.url()).hash, '', 'the ticket left the address bar');
    await memberPage.getByRole('button', { name: 'Set up an authenticator app' }).click();
    const secret = (await memberPage.getByTestId('authenticator-key').textContent())!.replace(/\s/g, '');
    await memberPage.getByLabel('Code from the app').fill(codeOf(secret));
    await memberPage.getByRole('button', { name: 'Confirm', exact: true }).click();
    await memberPage.getByRole('heading', { level: 1, name: 'Save your recovery codes' }).waitFor();
    assert.equal(await memberPage.getByRole('list', { name: 'Recovery codes' }).getByRole('listitem').count(), 10);
    await memberPage.getByRole('button', { name: 'Continue' }).click();
    await memberPage.getByRole('heading', { level: 1, name: 'Authorised apps' }).waitFor();
    await own.close();
  });
});
