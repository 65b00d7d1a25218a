/* global document, window */
import { action, form, h, field, when } from './dom.js';
import { authenticatorSetup, confirmItsYou, passkeysSupported, recoveryCodesView, registerPasskey, signInWithPasskey } from './factors.js';
import { onStepUp, rpc, RpcFailure } from './rpc.js';
import { accessPage } from './pages/access.js';
import { appsPage, authorizePage } from './pages/apps.js';
import { jobsPage } from './pages/jobs.js';
import { keysPage, webhooksPage } from './pages/keys.js';
import { secretsPage } from './pages/secrets.js';
import { securityPage } from './pages/security.js';
import { knowledgePage, runsPage } from './pages/runs.js';
import { telemetryPage } from './pages/telemetry.js';

/**
 * The pages, in the order of the menu, with the least role that opens each.
 * The role only chooses what the menu offers: every call a page makes is
 * authorised by the service again, and a refusal is shown as it comes.
 * A page `inMenu: false` is opened by a link from elsewhere (an app's
 * authorization request), with what follows its path as its argument.
 */
const PAGES = [
  { path: 'keys', title: 'API keys', role: 'staff', render: keysPage },
  { path: 'apps', title: 'Authorised apps', role: 'user', render: appsPage },
  { path: 'security', title: 'Security', role: 'user', render: securityPage },
  { path: 'authorize', title: 'Authorize an app', role: 'user', render: authorizePage, inMenu: false },
  { path: 'webhooks', title: 'Webhooks', role: 'admin', render: webhooksPage },
  { path: 'users', title: 'Users and invites', role: 'admin', render: accessPage },
  { path: 'secrets', title: 'Secrets', role: 'staff', render: secretsPage },
  { path: 'runs', title: 'Workflows and schedules', role: 'staff', render: runsPage },
  { path: 'knowledge', title: 'Knowledge base', role: 'staff', render: knowledgePage },
  { path: 'jobs', title: 'Background jobs', role: 'staff', render: jobsPage },
  { path: 'telemetry', title: 'AI telemetry', role: 'staff', render: telemetryPage },
];
const RANK = { user: 0, staff: 1, admin: 2 };
const mayOpen = (role, page) => (RANK[role] ?? -1) >= RANK[page.role];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let session = null;

/** The page of the location's hash (`#/keys`); anything else, such as the skip link's `#main`, is no route. */
const routeOf = (hash) => (hash.startsWith('#/') ? hash.slice(2) : null);

function show(title, ...content) {
  document.title = `${title} · Console`;
  main.replaceChildren(h('h1', {}, title), ...content.flat().filter(Boolean));
  main.focus();
}

/** The answers of AuthRpc.login that stop a sign-in until a second factor is given or enrolled; their details carry its ticket. */
const SECOND_STEP = new Set(['SECOND_FACTOR_REQUIRED', 'ENROLMENT_REQUIRED']);

function signInPage(reason) {
  nav.hidden = true;
  who.replaceChildren();
  show(
    'Sign in',
    reason && h('p', { class: 'error', role: 'alert' }, reason),
    form(
      'Sign in',
      [
        field('E-mail or username', h('input', { name: 'identifier', autocomplete: 'username', required: true })),
        field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true })),
      ],
      'Sign in',
      async ({ identifier, password }) => {
        try {
          // The answer also carries the session token; the page keeps none of it: the cookie the service set is the session.
          await rpc('AuthRpc.login', { identifier, password });
        } catch (error) {
          if (SECOND_STEP.has(error.code) && error.details?.ticket) return secondStep(error.details.ticket);
          throw error;
        }
        await start();
      },
    ),
    passkeysSupported() &&
      h(
        'div',
        { class: 'alternative' },
        // Not "Sign in with a passkey": the form's button stays the one button named "Sign in".
        h('p', {}, 'Or sign in with a passkey, with no username or password:'),
        action('Use a passkey', async () => signedIn(await signInWithPasskey()), { class: 'secondary' }),
      ),
  );
}

/** A finished sign-in: into the console, or, when an app outside it asked for the sign-in (its session went to the app), a word that it is done. */
function signedIn(answer) {
  if (answer.status === 'signed-in') return start();
  show('Signed in', h('p', { role: 'status' }, 'You are signed in to the app that asked. You can close this window.'));
}

/**
 * The second step of a sign-in a factor stopped: `ticket` stands for it, and
 * lives in this closure only (never in the address, nor in storage).
 */
async function secondStep(ticket) {
  nav.hidden = true;
  who.replaceChildren();
  let waiting;
  try {
    waiting = await rpc('AccountSecurityRpc.getSignIn', { ticket });
  } catch (error) {
    return signInPage(`This sign-in can no longer be finished (${error.message}); sign in again.`);
  }
  const again = h('p', {}, h('button', { type: 'button', class: 'link', onclick: () => signInPage() }, 'Start again'));
  const until = h('p', { class: 'hint' }, `This sign-in waits for you until ${when(waiting.expiresAt)}.`);
  if (waiting.purpose === 'verify') {
    const byCode = waiting.methods.includes('authenticator') || waiting.methods.includes('recovery-code');
    return show(
      'Finish signing in',
      h('p', {}, 'Your account has a second factor: give it to finish signing in.'),
      waiting.methods.includes('passkey') &&
        passkeysSupported() &&
        h(
          'div',
          { class: 'choices' },
          action('Use a passkey', async () => signedIn(await signInWithPasskey(ticket))),
        ),
      byCode &&
        form(
          'Finish signing in with a code',
          [
            field(
              waiting.methods.includes('authenticator') ? 'Code from your authenticator app, or a recovery code' : 'A recovery code',
              h('input', { name: 'code', autocomplete: 'one-time-code', maxlength: 40, required: true }),
              'A code works once.',
            ),
          ],
          'Verify',
          async ({ code }) => signedIn(await rpc('AccountSecurityRpc.verifySecondFactor', { ticket, code })),
        ),
      until,
      again,
    );
  }
  const enrolled = ({ recoveryCodes, signIn }) => {
    if (!recoveryCodes) return signedIn(signIn);
    show('Save your recovery codes', recoveryCodesView(recoveryCodes), h('button', { type: 'button', onclick: () => signedIn(signIn) }, 'Continue'));
  };
  const setup = h('div');
  show(
    'Set up a second factor',
    h('p', {}, 'This subscription requires a second factor to sign in. Set one up now; later sign-ins ask for it after your password.'),
    h(
      'div',
      { class: 'choices' },
      passkeysSupported() && action('Create a passkey', async () => enrolled(await registerPasskey({ ticket }))),
      action(
        'Set up an authenticator app',
        async () => {
          setup.replaceChildren(authenticatorSetup(await rpc('AccountSecurityRpc.beginTotpEnrolment', { ticket }), ticket, enrolled));
          setup.querySelector('input').focus();
        },
        { class: 'secondary' },
      ),
    ),
    setup,
    until,
    again,
  );
}

async function signOut() {
  await rpc('AuthRpc.logout').catch(() => undefined);
  session = null;
  signInPage();
}

function renderNav() {
  const current = routeOf(window.location.hash);
  nav.replaceChildren(
    h(
      'ul',
      {},
      PAGES.filter((page) => page.inMenu !== false && mayOpen(session.user.role, page)).map((page) =>
        h('li', {}, h('a', { href: `#/${page.path}`, 'aria-current': page.path === current ? 'page' : undefined }, page.title)),
      ),
    ),
  );
  nav.hidden = false;
}

function route() {
  if (!session) return;
  who.replaceChildren(
    h('span', { class: 'who' }, `${session.user.email} (${session.user.role})`),
    h('button', { type: 'button', class: 'secondary', onclick: signOut }, 'Sign out'),
  );
  const [path, argument] = (routeOf(window.location.hash) ?? '').split(/\/(.*)/s);
  const first = PAGES.find((page) => page.inMenu !== false && mayOpen(session.user.role, page));
  const page = PAGES.find((candidate) => candidate.path === path && (argument === undefined) === (candidate.inMenu !== false)) ?? first;
  if (path !== page.path) return window.location.replace(`#/${page.path}`);
  renderNav();
  if (!mayOpen(session.user.role, page))
    return show(page.title, h('p', { class: 'error', role: 'alert' }, `${page.title} is for ${page.role === 'admin' ? 'admins' : 'staff and admins'}.`));
  show(page.title, page.render(session, argument));
}

/**
 * A sign-in an OpenID provider's answer stopped comes back as
 * `#/sign-in/<ticket>`: the ticket is read, then taken out of the address
 * (and so of the history) before anything else happens.
 */
function ticketInAddress() {
  const path = routeOf(window.location.hash);
  if (!path?.startsWith('sign-in/')) return null;
  window.history.replaceState(null, '', window.location.pathname + window.location.search);
  return path.slice('sign-in/'.length);
}

async function start() {
  const ticket = ticketInAddress();
  if (ticket) return secondStep(ticket);
  try {
    session = await rpc('AuthRpc.getSession');
  } catch (error) {
    if (error instanceof RpcFailure && error.code === 'UNAUTHENTICATED') return signInPage();
    return show('Console', h('p', { class: 'error', role: 'alert' }, error.message));
  }
  // A person the subscription's policy asks for a second factor, with none yet, is led to add one (plugins/account-security/README.md).
  const security = await rpc('AccountSecurityRpc.getSecurity').catch(() => null);
  if (security?.required && !security.authenticator && security.passkeys === 0) window.history.replaceState(null, '', '#/security');
  route();
}

onStepUp(confirmItsYou);
window.addEventListener('console:signed-out', () => {
  session = null;
  signInPage('Your session has ended; sign in again.');
});
window.addEventListener('hashchange', () => {
  if (routeOf(window.location.hash)?.startsWith('sign-in/')) void start();
  else if (routeOf(window.location.hash) !== null) route();
});
void start();
