import { action, h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

/**
 * Secrets by name. A value is fetched only when its Reveal button is pressed
 * (SecretsRpc.getSecretValue records the read in the audit log before it
 * answers), kept in its table cell only, and gone on Hide or when the page is left.
 */
export function secretsPage(session) {
  const admin = session.user.role === 'admin';
  const audit = section('Audit log', async () => {
    const { data } = await rpc('SecretsRpc.getAuditLog', { pageSize: 50 });
    return table(
      'Reads and changes of secrets, newest first',
      [
        ['When', (entry) => when(entry.at)],
        ['Action', (entry) => entry.action],
        ['Secret', (entry) => entry.target],
        ['Role', (entry) => entry.role],
        ['By user', (entry) => entry.userId],
        ['By API key', (entry) => entry.apiKeyId],
      ],
      data,
    );
  });
  const reveal = (secret) => {
    const cell = h('span', { class: 'value' });
    const toggle = action(
      'Reveal',
      async () => {
        if (cell.textContent) {
          cell.replaceChildren();
          toggle.textContent = 'Reveal';
          return;
        }
        const { value } = await rpc('SecretsRpc.getSecretValue', { zone: secret.zone, key: secret.key });
        cell.replaceChildren(h('code', { class: 'secret' }, value));
        toggle.textContent = 'Hide';
        await audit.refresh();
      },
      { 'aria-label': `Reveal the value of ${secret._id}` },
    );
    return h('span', { class: 'reveal' }, toggle, cell);
  };
  const secrets = section('Secrets', async () => {
    const { data, totalCount } = await rpc('SecretsRpc.getData', { pageSize: 100 });
    return [
      h('p', {}, `${totalCount} secrets. Values are shown only on Reveal${admin ? ', and each reveal is audited' : ' (admins only)'}.`),
      table(
        'Secrets by zone and key',
        [
          ['Zone', (secret) => secret.zone],
          ['Key', (secret) => h('code', {}, secret.key)],
          ['Description', (secret) => secret.description || '—'],
          ...(admin ? [['Value', reveal]] : []),
        ],
        data,
      ),
    ];
  });
  return admin ? [secrets, audit] : [secrets];
}
