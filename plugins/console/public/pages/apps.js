/* global window */
import { action, checkbox, form, h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

const DOORS = { mcp: 'the MCP door (/mcp)', api: 'the API (/api/rpc and its WebSocket)' };
const scopesText = (app) => `${app.scopes ? app.scopes.join(', ') : 'everything your role allows'}${app.readOnly ? ', read only' : ''}`;

/**
 * The consent page an app's authorization request opens (`#/authorize/<request>`):
 * who asks, where the browser goes back to, for which door and with what
 * scopes. The person grants all or some, or refuses; either way the service
 * answers where to send the browser (plugins/oauth-server/README.md).
 */
export function authorizePage(_session, request) {
  return section('What it asks for', async () => {
    const consent = await rpc('OAuthServerRpc.getConsent', { request });
    const scopeBoxes = consent.scopes.map(({ scope, describe }) =>
      checkbox(`${scope}: ${describe}`, h('input', { type: 'checkbox', name: `scope:${scope}`, checked: true })),
    );
    const readOnly = h('input', { type: 'checkbox', name: 'readOnly', checked: consent.readOnly, disabled: consent.readOnly });
    const grant = form(
      `Authorize ${consent.client.name}`,
      [
        h(
          'fieldset',
          {},
          h(
            'legend',
            {},
            consent.everything
              ? 'It asks for everything your role allows; untick what it should not have'
              : 'It asks for these scopes; untick what it should not have',
          ),
          ...scopeBoxes,
          checkbox('Read only: it may read, never change anything', readOnly),
        ),
      ],
      `Allow ${consent.client.name}`,
      async (values) => {
        const ticked = consent.scopes.map(({ scope }) => scope).filter((scope) => values[`scope:${scope}`]);
        if (ticked.length === 0) return h('p', { class: 'error', role: 'alert' }, 'Tick at least one scope, or refuse.');
        // Everything left ticked grants what was asked: all the role allows, groups loaded later included.
        const scopes = consent.everything && ticked.length === consent.scopes.length ? null : ticked;
        const { redirectTo } = await rpc('OAuthServerRpc.approveConsent', { request, scopes, readOnly: consent.readOnly || values.readOnly });
        window.location.assign(redirectTo);
        return h('p', { role: 'status' }, `Allowed; returning to ${consent.client.name}…`);
      },
    );
    const refuse = action(
      'Refuse',
      async () => {
        const { redirectTo } = await rpc('OAuthServerRpc.denyConsent', { request });
        window.location.assign(redirectTo);
      },
      { class: 'secondary' },
    );
    return [
      h(
        'dl',
        { class: 'consent' },
        h('dt', {}, 'App'),
        h('dd', {}, consent.client.name, consent.client.uri ? ` (${consent.client.uri})` : ''),
        h('dt', {}, 'Identified by'),
        h(
          'dd',
          {},
          h('code', {}, consent.client.id),
          consent.client.kind === 'metadata-document' ? ' (its metadata document)' : ' (registered with this service)',
        ),
        h('dt', {}, 'Returns to'),
        h('dd', {}, h('strong', {}, consent.redirectHost)),
        h('dt', {}, 'Will use'),
        h('dd', {}, DOORS[consent.door]),
        h('dt', {}, 'Request expires'),
        h('dd', {}, when(consent.expiresAt)),
      ),
      h('p', {}, 'Only allow apps you started connecting yourself. You can revoke it any time under Authorised apps.'),
      grant,
      refuse,
    ];
  });
}

function appsTable(caption, load, revoke, withUser) {
  return section(caption, async (refresh) => {
    const apps = await rpc(load);
    return table(
      caption,
      [
        ['App', (app) => app.clientName],
        ...(withUser ? [['User', (app) => h('code', {}, app.userId)]] : []),
        ['Returns to', (app) => app.redirectHost],
        ['Door', (app) => DOORS[app.door]],
        ['Scopes', scopesText],
        ['Authorised', (app) => when(app.createdAt)],
        ['Last refreshed', (app) => when(app.refreshedAt)],
        [
          'Actions',
          (app) =>
            action('Revoke', async () => (await rpc(revoke, { id: app.id }), refresh()), {
              class: 'danger',
              confirm: `Revoke ${app.clientName}? Its tokens stop working at once.`,
            }),
        ],
      ],
      apps,
      'No app is authorised.',
    );
  });
}

/** The apps the signed-in user authorised; an admin also sees every app of the subscription. */
export function appsPage(session) {
  return [
    appsTable('Your authorised apps', 'OAuthServerRpc.listApps', 'OAuthServerRpc.revokeApp', false),
    session.user.role === 'admin'
      ? appsTable('Apps authorised in this subscription', 'OAuthServerRpc.listSubscriptionApps', 'OAuthServerRpc.revokeSubscriptionApp', true)
      : null,
  ].filter(Boolean);
}
