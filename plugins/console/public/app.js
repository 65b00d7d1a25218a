/* global document, window */
import { form, h, field } from './dom.js';
import { rpc, RpcFailure } from './rpc.js';
import { accessPage } from './pages/access.js';
import { appsPage, authorizePage } from './pages/apps.js';
import { jobsPage } from './pages/jobs.js';
import { keysPage, webhooksPage } from './pages/keys.js';
import { secretsPage } from './pages/secrets.js';
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
        // The answer also carries the session token; the page keeps none of it: the cookie the service set is the session.
        await rpc('AuthRpc.login', { identifier, password });
        await start();
      },
    ),
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

async function start() {
  try {
    session = await rpc('AuthRpc.getSession');
  } catch (error) {
    if (error instanceof RpcFailure && error.code === 'UNAUTHENTICATED') return signInPage();
    return show('Console', h('p', { class: 'error', role: 'alert' }, error.message));
  }
  route();
}

window.addEventListener('console:signed-out', () => {
  session = null;
  signInPage('Your session has ended; sign in again.');
});
window.addEventListener('hashchange', () => {
  if (routeOf(window.location.hash) !== null) route();
});
void start();
