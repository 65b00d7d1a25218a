import { action, checkbox, field, form, h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

const scopesOf = (text) => {
  const scopes = text
    .split(/[\s,]+/)
    .map((scope) => scope.trim())
    .filter(Boolean);
  return scopes.length > 0 ? scopes : null;
};

/**
 * The key just made, shown once: it is in this element only, gone when the
 * page is left or reloaded (the service keeps a hash). Its webhook is
 * registered here, with the key itself, as ApiManagementRpc.registerWebhook
 * requires (plugins/api-management/README.md).
 */
function createdKey(created, refresh) {
  const webhook = form(
    `Webhook of ${created.description}`,
    [
      field('Webhook URL', h('input', { name: 'webhookUrl', type: 'url', required: true, placeholder: 'https://example.com/hooks' })),
      field(
        'Signing secret (optional)',
        h('input', { name: 'webhookSecret', type: 'password', autocomplete: 'off', minlength: 16 }),
        'At least 16 characters.',
      ),
    ],
    'Register webhook',
    async ({ webhookUrl, webhookSecret }) => {
      const answer = await rpc('ApiManagementRpc.registerWebhook', { webhookUrl, ...(webhookSecret ? { webhookSecret } : {}) }, { apiKey: created.fullKey });
      await refresh();
      return h('p', { role: 'status' }, answer.status === 'verified' ? 'Webhook verified.' : `Webhook stored but unreachable: ${answer.error}`);
    },
  );
  return h(
    'div',
    { class: 'callout' },
    h('h3', { tabindex: -1, class: 'callout-title' }, `New key: ${created.description}`),
    h('p', {}, 'Copy it now, it is shown only this once:'),
    h('p', {}, h('code', { class: 'secret', 'data-testid': 'full-key' }, created.fullKey)),
    h('h3', {}, 'Register a webhook for this key'),
    webhook,
  );
}

export function keysPage() {
  const created = h('div');
  const list = section('Your API keys', async (refresh) => {
    const { data } = await rpc('ApiKeyRpc.getData');
    return table(
      'API keys',
      [
        ['Description', (key) => key.description],
        ['Prefix', (key) => h('code', {}, key.prefix)],
        ['Scopes', (key) => (key.scopes ? key.scopes.join(', ') : 'all')],
        ['Read only', (key) => (key.readOnly ? 'yes' : 'no')],
        ['Enabled', (key) => (key.isEnabled ? 'yes' : 'no')],
        ['Webhook', (key) => (key.webhookUrl ? `${key.webhookUrl} (${key.webhookStatus})` : '—')],
        ['Created', (key) => when(key.createdAt)],
        [
          'Actions',
          (key) =>
            action(
              'Delete',
              async () => {
                await rpc('ApiKeyRpc.delete', { _id: key._id });
                await refresh();
              },
              {
                class: 'danger',
                'aria-label': `Delete key ${key.description}`,
                confirm: `Delete the key "${key.description}"? Clients using it stop working at once.`,
              },
            ),
        ],
      ],
      data,
    );
  });
  const create = section('Create an API key', () =>
    form(
      'Create an API key',
      [
        field('Description', h('input', { name: 'description', required: true, maxlength: 500 })),
        field(
          'Scopes',
          h('input', { name: 'scopes', placeholder: 'TaskRpc, NoteRpc.list' }),
          'Groups or operations, separated by commas; empty: everything your role may call.',
        ),
        checkbox('Read only', h('input', { type: 'checkbox', name: 'readOnly' })),
      ],
      'Create key',
      async ({ description, scopes, readOnly }, element) => {
        const key = await rpc('ApiKeyRpc.create', { description, scopes: scopesOf(scopes), readOnly });
        element.reset();
        created.replaceChildren(createdKey(key, list.refresh));
        // Where the reader is sent: the key, then its webhook form, follow the heading.
        created.querySelector('.callout-title').focus();
        await list.refresh();
      },
    ),
  );
  return [create, created, list];
}

export function webhooksPage() {
  const deliveries = h('div');
  const showDeliveries = async (apiKeyId, label) => {
    const load = section(`Deliveries to the webhook of ${label}`, async (refresh) => {
      const { data, totalCount } = await rpc('ApiManagementRpc.getDeliveries', { apiKeyId, pageSize: 50 });
      const failed = data.filter((delivery) => delivery.state === 'failed');
      return [
        h('p', {}, `${totalCount} deliveries, newest first (the latest 50 shown).`),
        failed.length > 0 &&
          action(`Re-send ${failed.length} failed`, async () => {
            await rpc('ApiManagementRpc.resendDeliveries', { apiKeyId });
            await refresh();
          }),
        action('Refresh', refresh, { class: 'secondary' }),
        table(
          'Delivery log',
          [
            ['Event', (delivery) => delivery.eventType],
            ['State', (delivery) => h('span', { class: `state state-${delivery.state}` }, delivery.state)],
            ['Attempts', (delivery) => String(delivery.attempts)],
            ['Last status', (delivery) => (delivery.lastStatusCode === null ? (delivery.lastError ?? '—') : String(delivery.lastStatusCode))],
            ['Created', (delivery) => when(delivery.createdAt)],
            ['Delivered', (delivery) => when(delivery.deliveredAt)],
            [
              'Actions',
              (delivery) =>
                delivery.state === 'failed' &&
                action(
                  'Re-send',
                  async () => {
                    await rpc('ApiManagementRpc.resendDeliveries', { apiKeyId, _ids: [delivery._id] });
                    await refresh();
                  },
                  { 'aria-label': `Re-send ${delivery.eventType} of ${when(delivery.createdAt)}` },
                ),
            ],
          ],
          data,
          'no delivery yet.',
        ),
      ];
    });
    deliveries.replaceChildren(load);
  };
  const hooks = section('Webhooks', async () => {
    const keys = await rpc('ApiManagementRpc.listApiKeysForWebhook');
    if (keys.length === 0) return h('p', { class: 'empty' }, 'No API key has a verified webhook. Register one when you create a key (API keys page).');
    return h(
      'ul',
      { class: 'plain' },
      keys.map((key) =>
        h(
          'li',
          {},
          action(`Show deliveries of ${key.label}`, () => showDeliveries(key.value, key.label)),
        ),
      ),
    );
  });
  return [hooks, deliveries];
}
