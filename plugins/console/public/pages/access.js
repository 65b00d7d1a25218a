import { action, checkbox, field, form, h, section, table, titled, when } from '../dom.js';
import { rpc } from '../rpc.js';
import { sessionsTable } from './security.js';

const name = (user) => [user.firstName, user.lastName].filter(Boolean).join(' ') || user.username;

const roleSelect = (roles, selected) =>
  h(
    'select',
    { name: 'role' },
    roles.map((role) => h('option', { value: role, selected: role === selected }, role)),
  );

/**
 * The form that changes a user's role and whether they may sign in, through
 * AdminUserRpc.update; the service keeps an active admin (CONFLICT otherwise)
 * and ends what the user may no longer do. `saved` loads the table again.
 */
function changeForm(user, roles, saved) {
  return titled(
    `Change ${name(user)}`,
    form(
      `Change ${name(user)}`,
      [
        field('Role', roleSelect(roles, user.role)),
        checkbox('Active (can sign in)', h('input', { type: 'checkbox', name: 'isActive', checked: user.isActive })),
      ],
      'Save changes',
      async ({ role, isActive }) => {
        const changed = await rpc('AdminUserRpc.update', { _id: user._id, role, isActive });
        await saved();
        return h('p', { role: 'status' }, `Saved: ${name(changed)} is ${changed.role}, ${changed.isActive ? 'active' : 'inactive'}.`);
      },
    ),
  );
}

/**
 * A user's sessions, to sign out one or all, and the reset of their second
 * factors (a lost phone: they sign in with their password and enrol again).
 */
function securityOf(user) {
  const done = h('p', { role: 'status' });
  const devices = section(`Sessions of ${name(user)}`, async (refresh) => {
    const { items } = await rpc('AccountSecurityRpc.listUserSessions', { userId: user._id });
    return [
      sessionsTable(`Where ${name(user)} is signed in`, items, async (session) => {
        await rpc('AccountSecurityRpc.revokeUserSessions', { userId: user._id, id: session.id });
        await refresh();
      }),
      h(
        'div',
        { class: 'actions' },
        items.some((session) => !session.current) &&
          action(
            'Sign out everywhere',
            async () => {
              await rpc('AccountSecurityRpc.revokeUserSessions', { userId: user._id });
              await refresh();
            },
            { class: 'danger', 'aria-label': `Sign out ${name(user)} everywhere` },
          ),
        action(
          'Reset second factors',
          async () => {
            await rpc('AccountSecurityRpc.resetUserFactors', { userId: user._id });
            await refresh();
            done.textContent = `Reset: ${name(user)} has no second factor and is signed out; they sign in with their password and may add one again.`;
          },
          {
            class: 'danger',
            'aria-label': `Reset the second factors of ${name(user)}`,
            confirm: `Remove the passkeys, authenticator app and recovery codes of ${name(user)}, and sign them out everywhere?`,
          },
        ),
      ),
    ];
  });
  return h('div', {}, devices, done);
}

/** The users page; the menu offers it to admins only, as only they may call AdminUserRpc. */
export function accessPage() {
  // The role names do not change while the page is open: one call serves every section.
  const available = rpc('AdminUserRpc.getAvailableRoles');
  const editor = h('div');
  const users = section('Users', async () => {
    const [{ docs, totalDocs }, roles] = await Promise.all([rpc('AdminUserRpc.getData', { pageSize: 100 }), available]);
    const edit = (user) => {
      editor.replaceChildren(changeForm(user, roles, users.refresh));
      editor.querySelector('select').focus();
    };
    const showSecurity = (user) => {
      editor.replaceChildren(securityOf(user));
      editor.querySelector('h2').setAttribute('tabindex', -1);
      editor.querySelector('h2').focus();
    };
    return [
      h('p', {}, `${totalDocs} users${totalDocs > docs.length ? ` (the first ${docs.length} shown)` : ''}.`),
      table(
        'Users of the subscription',
        [
          ['Name', name],
          ['E-mail', (user) => user.email],
          ['Role', (user) => user.role],
          ['Active', (user) => (user.isActive ? 'yes' : 'no')],
          ['Created', (user) => when(user.createdAt)],
          [
            'Actions',
            (user) =>
              h(
                'span',
                { class: 'reveal' },
                action('Change', () => edit(user), { class: 'secondary', 'aria-label': `Change the role or status of ${name(user)}` }),
                action('Sessions', () => showSecurity(user), { class: 'secondary', 'aria-label': `Sessions and second factors of ${name(user)}` }),
              ),
          ],
        ],
        docs,
      ),
    ];
  });
  const roles = section('Roles', async () =>
    h(
      'dl',
      { class: 'roles' },
      (await available).flatMap((role) => [h('dt', {}, role), h('dd', {}, ROLE_TEXT[role] ?? '')]),
    ),
  );
  const created = h('div');
  const invites = section('Invite codes', async (refresh) => {
    const { data } = await rpc('AdminUserRpc.listInviteCodes');
    return table(
      'Invite codes (the codes themselves are shown once, when made)',
      [
        ['Hint', (invite) => h('code', {}, invite.hint)],
        ['Role', (invite) => invite.role],
        ['Uses', (invite) => `${invite.uses} of ${invite.maxUses}`],
        ['Status', (invite) => invite.status],
        ['Expires', (invite) => when(invite.expiresAt)],
        [
          'Actions',
          (invite) =>
            invite.status === 'active' &&
            action(
              'Revoke',
              async () => {
                await rpc('AdminUserRpc.revokeInviteCode', { _id: invite._id });
                await refresh();
              },
              { class: 'danger', 'aria-label': `Revoke invite ${invite.hint}` },
            ),
        ],
      ],
      data,
    );
  });
  const create = section('Create an invite code', async () =>
    form(
      'Create an invite code',
      [
        field('Role', roleSelect(await available, 'user')),
        field('Uses', h('input', { name: 'maxUses', type: 'number', min: 1, max: 10000, value: 1, required: true })),
      ],
      'Create invite code',
      async ({ role, maxUses }) => {
        const invite = await rpc('AdminUserRpc.createInviteCode', { role, maxUses: Number(maxUses) });
        created.replaceChildren(
          h(
            'div',
            { class: 'callout', role: 'status' },
            h('p', {}, 'The invite code, shown only this once:'),
            h('p', {}, h('code', { class: 'secret' }, invite.code)),
          ),
        );
        await invites.refresh();
      },
    ),
  );
  return [users, editor, roles, create, created, invites];
}

/** What each role may do (core README, access levels). */
const ROLE_TEXT = {
  user: 'Calls the operations open to users; cannot open the console.',
  staff: 'Also the staff operations (knowledge-base editing); opens the console without the admin pages.',
  admin: 'Everything in the subscription: users, invites, webhooks, secret values and audit.',
};
