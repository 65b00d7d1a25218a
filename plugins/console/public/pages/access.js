import { action, field, form, h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

const name = (user) => [user.firstName, user.lastName].filter(Boolean).join(' ') || user.username;

export function accessPage() {
  const users = section('Users', async () => {
    const { docs, totalDocs } = await rpc('AdminUserRpc.getData', { pageSize: 100 });
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
        ],
        docs,
      ),
    ];
  });
  const roles = section('Roles', async () => {
    const available = await rpc('AdminUserRpc.getAvailableRoles');
    return h(
      'dl',
      { class: 'roles' },
      available.flatMap((role) => [h('dt', {}, role), h('dd', {}, ROLE_TEXT[role] ?? '')]),
    );
  });
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
  const create = section('Create an invite code', async () => {
    const available = await rpc('AdminUserRpc.getAvailableRoles');
    return form(
      'Create an invite code',
      [
        field(
          'Role',
          h(
            'select',
            { name: 'role' },
            available.map((role) => h('option', { value: role, selected: role === 'user' }, role)),
          ),
        ),
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
    );
  });
  return [users, roles, create, created, invites];
}

/** What each role may do (core README, access levels). */
const ROLE_TEXT = {
  user: 'Calls the operations open to users; cannot open the console.',
  staff: 'Also the staff operations (knowledge-base editing); opens the console without the admin pages.',
  admin: 'Everything in the subscription: users, invites, webhooks, secret values and audit.',
};
