/* global document, navigator, window */
/**
 * Second factors as the sign-in page, the security page and the step-up
 * dialog use them: passkey ceremonies through the browser's WebAuthn, an
 * authenticator app's setup (its QR code drawn here), recovery codes shown
 * once, and the "Confirm it's you" dialog.
 */
import { action, field, form, h, s, uid, when } from './dom.js';
import { rpc } from './rpc.js';
import { encode } from './vendor/qr.js';

/** Whether the browser takes the service's WebAuthn options as JSON (PublicKeyCredential.parse…OptionsFromJSON). */
export const passkeysSupported = () => typeof window.PublicKeyCredential?.parseRequestOptionsFromJSON === 'function';

/** Runs a WebAuthn ceremony; its refusals become sentences (a DOMException's numeric code means nothing to a reader). */
async function ceremony(run) {
  try {
    return (await run()).toJSON();
  } catch (error) {
    const cause = { cause: error };
    if (error?.name === 'NotAllowedError') throw new Error('No passkey was used: the browser’s prompt was closed or timed out.', cause);
    if (error?.name === 'InvalidStateError') throw new Error('This device already holds a passkey of yours.', cause);
    throw new Error(`The browser could not use a passkey: ${error?.message ?? error}`, cause);
  }
}

const getCredential = (options) => ceremony(() => navigator.credentials.get({ publicKey: window.PublicKeyCredential.parseRequestOptionsFromJSON(options) }));

/** A device as its User-Agent names it: the browser and the system, as far as they tell; the whole agent otherwise. */
export function deviceOf(userAgent) {
  if (!userAgent) return 'Unknown device';
  const browser = [
    [/Edg\//, 'Edge'],
    [/Firefox\//, 'Firefox'],
    [/Chrom/, 'Chrome'],
    [/Safari\//, 'Safari'],
  ].find(([pattern]) => pattern.test(userAgent))?.[1];
  const system = [
    [/Android/, 'Android'],
    [/iPhone|iPad/, 'iOS'],
    [/Mac OS X/, 'macOS'],
    [/Windows/, 'Windows'],
    [/Linux/, 'Linux'],
  ].find(([pattern]) => pattern.test(userAgent))?.[1];
  return browser && system ? `${browser} on ${system}` : userAgent;
}

/** A sign-in with a passkey: without a username, or as the second factor of the sign-in `ticket` stands for. */
export async function signInWithPasskey(ticket) {
  const { challengeId, options } = await rpc('AccountSecurityRpc.beginPasskeySignIn', { ticket });
  return rpc('AccountSecurityRpc.finishPasskeySignIn', { challengeId, response: await getCredential(options) });
}

/** Makes a passkey on this device and registers it: for the signed-in person, or for the sign-in `ticket` stands for. */
export async function registerPasskey({ ticket, name }) {
  const { challengeId, options } = await rpc('AccountSecurityRpc.beginPasskeyRegistration', { ticket });
  const response = await ceremony(() => navigator.credentials.create({ publicKey: window.PublicKeyCredential.parseCreationOptionsFromJSON(options) }));
  // Unnamed, a passkey is named after the device that made it, so a list of several tells them apart.
  return rpc('AccountSecurityRpc.finishPasskeyRegistration', { ticket, challengeId, response, name: name || deviceOf(navigator.userAgent).slice(0, 100) });
}

/** A QR code as SVG, one path of dark modules over a light square, with the quiet zone of four modules scanners expect. */
function qrCode(text, label) {
  const { data } = encode(text, { border: 4 });
  const size = data.length;
  const dark = data.flatMap((row, y) => row.map((on, x) => (on ? `M${x} ${y}h1v1h-1z` : ''))).join('');
  return s(
    'svg',
    { class: 'qr', viewBox: `0 0 ${size} ${size}`, role: 'img', 'aria-label': label },
    s('rect', { class: 'qr-light', width: size, height: size }),
    s('path', { class: 'qr-dark', d: dark }),
  );
}

/** A field for an authenticator app's six digits (a space in the middle allowed, as apps show them). */
const sixDigits = () =>
  h('input', {
    name: 'code',
    inputmode: 'numeric',
    autocomplete: 'one-time-code',
    pattern: '\\d{3} ?\\d{3}',
    title: 'Six digits',
    maxlength: 7,
    required: true,
  });

/**
 * Setting up an authenticator app from the answer of beginTotpEnrolment: the
 * QR code of its otpauth:// URI, the key to type instead, and the form for
 * its first code; `confirmed` gets what confirmTotpEnrolment answers.
 */
export function authenticatorSetup(enrolment, ticket, confirmed) {
  return h(
    'ol',
    { class: 'steps' },
    h('li', {}, h('p', {}, 'Scan this QR code with your authenticator app:'), qrCode(enrolment.uri, 'QR code to add this account to an authenticator app')),
    h(
      'li',
      {},
      h('p', {}, 'Or, if it cannot scan, type this key into the app (time-based):'),
      h('p', {}, h('code', { class: 'secret', 'data-testid': 'authenticator-key' }, enrolment.secret.match(/.{1,4}/g).join(' '))),
    ),
    h(
      'li',
      {},
      h('p', {}, `Type the code the app shows now (before ${when(enrolment.expiresAt)}):`),
      form('Confirm the authenticator app', [field('Code from the app', sixDigits())], 'Confirm', async ({ code }) =>
        confirmed(await rpc('AccountSecurityRpc.confirmTotpEnrolment', { ticket, enrolmentId: enrolment.enrolmentId, code })),
      ),
    ),
  );
}

/** Recovery codes, shown this once: a list to copy or write down, and a button that copies them. */
export function recoveryCodesView(codes) {
  const copied = h('span', { role: 'status' });
  return h(
    'div',
    { class: 'callout' },
    h('h3', { tabindex: -1, class: 'callout-title' }, 'Your recovery codes'),
    h('p', {}, 'Each one signs you in once if you lose your passkeys and authenticator app. Keep them somewhere safe: they are shown only this once.'),
    h(
      'ol',
      { class: 'codes', 'aria-label': 'Recovery codes' },
      codes.map((code) => h('li', {}, h('code', {}, code))),
    ),
    h(
      'div',
      { class: 'actions' },
      action(
        'Copy the codes',
        async () => {
          await navigator.clipboard.writeText(codes.join('\n'));
          copied.textContent = 'Copied.';
        },
        { class: 'secondary' },
      ),
      copied,
    ),
  );
}

let asking = null;

/**
 * The "Confirm it's you" dialog a call refused with STEP_UP_REQUIRED opens:
 * the password for a person without a second factor, else a code or a
 * passkey (AccountSecurityRpc.stepUp). Resolves true once confirmed, false
 * when closed; calls refused at the same time share one dialog.
 */
export function confirmItsYou() {
  asking ??= ask().finally(() => {
    asking = null;
  });
  return asking;
}

async function ask() {
  const security = await rpc('AccountSecurityRpc.getSecurity').catch(() => null);
  if (!security) return false;
  return new Promise((resolve) => {
    const titleId = uid('dialog');
    const stepUp = async (params) => {
      await rpc('AccountSecurityRpc.stepUp', params);
      resolve(true);
      dialog.close();
    };
    const hasFactor = security.authenticator || security.passkeys > 0;
    const byCode = security.authenticator || security.recoveryCodesLeft > 0;
    const dialog = h(
      'dialog',
      { class: 'dialog', 'aria-labelledby': titleId },
      h('h2', { id: titleId }, 'Confirm it’s you'),
      h('p', {}, 'This needs a recent sign-in. Confirm who you are and it goes on.'),
      hasFactor
        ? [
            security.passkeys > 0 &&
              passkeysSupported() &&
              action('Use a passkey', async () => {
                const { challengeId, options } = await rpc('AccountSecurityRpc.beginPasskeySignIn');
                await stepUp({ challengeId, response: await getCredential(options) });
              }),
            byCode &&
              form(
                'Confirm with a code',
                [
                  field(
                    security.authenticator ? 'Code from your authenticator app, or a recovery code' : 'A recovery code',
                    h('input', { name: 'code', autocomplete: 'one-time-code', maxlength: 40, required: true }),
                  ),
                ],
                'Confirm with the code',
                ({ code }) => stepUp({ code }),
              ),
          ]
        : form(
            'Confirm with your password',
            [field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true }))],
            'Confirm',
            ({ password }) => stepUp({ password }),
          ),
      h('div', { class: 'actions' }, h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Cancel')),
    );
    // Closed by Cancel, Escape or a confirmation: a confirmed dialog has already answered true.
    dialog.addEventListener('close', () => {
      resolve(false);
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
