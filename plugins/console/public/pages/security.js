import { action, field, form, h, section, table, when } from '../dom.js';
import { authenticatorSetup, deviceOf, passkeysSupported, recoveryCodesView, registerPasskey } from '../factors.js';
import { rpc } from '../rpc.js';

/** How a session proved who its person is (its `amr`), in words. */
const PROOF = { pwd: 'password', code: 'e-mailed code', oauth: 'OpenID provider', otp: 'authenticator app', recovery: 'recovery code', webauthn: 'passkey' };
const howSignedIn = (session) => session.amr.map((method) => PROOF[method] ?? method).join(' + ') || '—';

/** A table of sessions, the current one marked; `signOut(session)` ends another. */
export function sessionsTable(caption, sessions, signOut) {
  return table(
    caption,
    [
      ['Device', (session) => h('span', { title: session.userAgent ?? undefined }, deviceOf(session.userAgent))],
      ['Address', (session) => session.ipAddress ?? '—'],
      ['Signed in', (session) => when(session.createdAt)],
      ['Last seen', (session) => when(session.lastSeenAt)],
      ['How', howSignedIn],
      [
        'Actions',
        (session) =>
          session.current
            ? h('strong', {}, 'This device')
            : action('Sign out', () => signOut(session), {
                class: 'danger',
                'aria-label': `Sign out ${deviceOf(session.userAgent)}, last seen ${when(session.lastSeenAt)}`,
              }),
      ],
    ],
    sessions,
    'no session.',
  );
}

const REQUIRED_FOR = { nobody: 'Nobody', admins: 'Admins', staff: 'Staff and admins', everyone: 'Everyone' };

/** The subscription's policy: of whom it requires a second factor, and how many days they have to enrol one; `saved` loads the page again. */
function policySection(saved) {
  return section('Second factors in this subscription', async () => {
    const policy = await rpc('AccountSecurityRpc.getPolicy');
    return [
      h(
        'p',
        {},
        policy.requiredFor === 'nobody'
          ? 'No one is required to have a second factor.'
          : `${REQUIRED_FOR[policy.requiredFor]} must have a second factor, ${policy.graceDays} days after the policy first covered them (or after they joined, if later); past that, their sign-ins stop until they add one.`,
      ),
      h('p', {}, 'A user who lost their factors gets them reset, and their sessions signed out, on the Users page.'),
      form(
        'Second-factor policy',
        [
          field(
            'Require a second factor of',
            h(
              'select',
              { name: 'requiredFor' },
              Object.entries(REQUIRED_FOR).map(([value, label]) => h('option', { value, selected: value === policy.requiredFor }, label)),
            ),
          ),
          field(
            'Days to add one',
            h('input', { name: 'graceDays', type: 'number', min: 0, max: 365, value: policy.graceDays, required: true }),
            'Sign-ins go on for this long after the policy starts covering someone.',
          ),
        ],
        'Save policy',
        async ({ requiredFor, graceDays }) => {
          await rpc('AccountSecurityRpc.setPolicy', { requiredFor, graceDays: Number(graceDays) });
          await saved();
        },
      ),
    ];
  });
}

/**
 * The signed-in person's own security: passkeys, authenticator app, recovery
 * codes, their sessions, and what the subscription requires of them; an
 * admin also sets the subscription's policy. Each change loads every section
 * again (a removed factor also ends the other sessions).
 */
export function securityPage(session) {
  let overview = rpc('AccountSecurityRpc.getSecurity');
  const sections = [];
  const reload = async () => {
    overview = rpc('AccountSecurityRpc.getSecurity');
    await Promise.all(sections.map((each) => each.refresh()));
  };
  /** Recovery codes just made, until the page changes. */
  const fresh = h('div');
  const showCodes = (codes) => {
    if (!codes) return;
    fresh.replaceChildren(recoveryCodesView(codes));
    fresh.querySelector('.callout-title').focus();
  };

  const summary = section('Your sign-in', async () => {
    const { authenticator, passkeys, required, requiredFrom, session: current } = await overview;
    const factors = [passkeys > 0 && `${passkeys} passkey${passkeys === 1 ? '' : 's'}`, authenticator && 'an authenticator app'].filter(Boolean);
    const deadline = requiredFrom && Date.parse(requiredFrom) > Date.now() ? `before ${when(requiredFrom)}` : 'now';
    return [
      required &&
        h(
          'p',
          { class: factors.length > 0 ? 'notice' : 'notice warning', role: factors.length > 0 ? undefined : 'alert' },
          factors.length > 0
            ? 'Your subscription requires a second factor of you: keep at least one.'
            : `Your subscription requires a second factor of you: add a passkey or an authenticator app ${deadline}. Without one, signing in stops.`,
        ),
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Second factors'),
        h('dd', {}, factors.length > 0 ? factors.join(' and ') : 'none: a password alone signs you in'),
        current && [h('dt', {}, 'This session'), h('dd', {}, `${howSignedIn(current)}, last confirmed ${when(current.signedInAt)}`)],
      ),
    ].filter(Boolean);
  });

  const passkeys = section('Passkeys', async () => {
    const { items } = await rpc('AccountSecurityRpc.listPasskeys');
    const renaming = h('div');
    const rename = (passkey) => {
      renaming.replaceChildren(
        form(
          `Rename ${passkey.name}`,
          [field('New name', h('input', { name: 'name', value: passkey.name, required: true, maxlength: 100 }))],
          'Save name',
          async ({ name }) => {
            await rpc('AccountSecurityRpc.renamePasskey', { id: passkey.id, name });
            await reload();
          },
        ),
      );
      renaming.querySelector('input').focus();
    };
    return [
      h('p', {}, "A passkey signs you in with this device's screen lock or a security key, without a password."),
      table(
        'Your passkeys',
        [
          ['Name', (passkey) => passkey.name],
          ['Added', (passkey) => when(passkey.createdAt)],
          ['Last used', (passkey) => when(passkey.lastUsedAt)],
          ['Synced', (passkey) => (passkey.backedUp ? 'yes, between your devices' : 'no, on one device')],
          [
            'Actions',
            (passkey) =>
              h(
                'span',
                { class: 'reveal' },
                action('Rename', () => rename(passkey), { class: 'secondary', 'aria-label': `Rename passkey ${passkey.name}` }),
                action(
                  'Remove',
                  async () => {
                    await rpc('AccountSecurityRpc.removePasskey', { id: passkey.id });
                    await reload();
                  },
                  {
                    class: 'danger',
                    'aria-label': `Remove passkey ${passkey.name}`,
                    confirm: `Remove the passkey "${passkey.name}"? It no longer signs you in, and your other sessions end.`,
                  },
                ),
              ),
          ],
        ],
        items,
        'none yet.',
      ),
      renaming,
      passkeysSupported()
        ? form(
            'Add a passkey',
            [field('Name of the new passkey (optional)', h('input', { name: 'name', maxlength: 100 }), 'Say where it is kept, such as "Work laptop".')],
            'Add a passkey',
            async ({ name }) => {
              const { recoveryCodes } = await registerPasskey({ name });
              await reload();
              showCodes(recoveryCodes);
            },
          )
        : h('p', { class: 'empty' }, 'This browser cannot make passkeys.'),
    ];
  });

  const setup = h('div');
  const authenticator = section('Authenticator app', async () => {
    const { authenticator: enrolled } = await overview;
    setup.replaceChildren();
    if (enrolled) {
      return [
        h('p', {}, 'An authenticator app is set up: sign-ins may ask for the code it shows.'),
        action(
          'Remove the authenticator app',
          async () => {
            await rpc('AccountSecurityRpc.removeTotp');
            await reload();
          },
          { class: 'danger', confirm: 'Remove the authenticator app? Its codes no longer sign you in, and your other sessions end.' },
        ),
      ];
    }
    return [
      h('p', {}, 'An authenticator app on your phone shows a new six-digit code every 30 seconds.'),
      action('Set up an authenticator app', async (start) => {
        const enrolment = await rpc('AccountSecurityRpc.beginTotpEnrolment');
        const cancel = () => {
          setup.replaceChildren();
          start.hidden = false;
          start.focus();
        };
        setup.replaceChildren(
          authenticatorSetup(enrolment, undefined, async ({ recoveryCodes }) => {
            await reload();
            showCodes(recoveryCodes);
          }),
          h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel'),
        );
        start.hidden = true;
        setup.querySelector('input').focus();
      }),
      setup,
    ];
  });

  const recovery = section('Recovery codes', async () => {
    const { authenticator: enrolled, passkeys: count, recoveryCodesLeft } = await overview;
    if (!enrolled && count === 0) return h('p', {}, 'You get ten recovery codes with your first passkey or authenticator app.');
    return [
      h('p', {}, `${recoveryCodesLeft} of your recovery codes are left. Each signs you in once, instead of a passkey or the app.`),
      action(
        'Make new recovery codes',
        async () => {
          const { recoveryCodes } = await rpc('AccountSecurityRpc.regenerateRecoveryCodes');
          await reload();
          showCodes(recoveryCodes);
        },
        { class: 'secondary', confirm: 'Make ten new recovery codes? The ones you have stop working.' },
      ),
    ];
  });

  const devices = section('Devices', async (refresh) => {
    const { items } = await rpc('AccountSecurityRpc.listSessions');
    return [
      h('p', {}, 'Where you are signed in. Sign out a device you do not know, then change your password.'),
      sessionsTable('Your sessions', items, async (other) => {
        await rpc('AccountSecurityRpc.revokeSession', { id: other.id });
        await refresh();
      }),
      items.length > 1 &&
        action(
          'Sign out all other devices',
          async () => {
            await rpc('AccountSecurityRpc.revokeOtherSessions');
            await refresh();
          },
          { class: 'danger' },
        ),
    ].filter(Boolean);
  });

  // An admin's policy changes what the summary says of them too: saving it loads every section.
  const policy = session.user.role === 'admin' && policySection(reload);
  sections.push(...[summary, passkeys, authenticator, recovery, devices, policy].filter(Boolean));
  return [summary, passkeys, authenticator, fresh, recovery, devices, policy].filter(Boolean);
}
