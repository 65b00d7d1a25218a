/* global fetch, window, CustomEvent */
/**
 * Calls of POST /api/rpc from the page. The session travels in its HttpOnly
 * cookie (the page never sees it); `Content-Type: application/json` is what
 * the endpoint requires, and no other site's form can send it (README.md,
 * "Security").
 */

/** A refusal or failure of a call: the service's code and message, and what it adds to go on (a sign-in's ticket). */
export class RpcFailure extends Error {
  constructor(code, message, status, details) {
    super(message);
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

/**
 * Calls whose UNAUTHENTICATED refuses what they were given (a password, a
 * code, a passkey, a sign-in's ticket), not the page's session: they never
 * send the page back to signing in.
 */
const PROOFS = new Set([
  'AccountSecurityRpc.getSignIn',
  'AccountSecurityRpc.verifySecondFactor',
  'AccountSecurityRpc.beginPasskeySignIn',
  'AccountSecurityRpc.finishPasskeySignIn',
  'AccountSecurityRpc.stepUp',
]);
const provesItself = (method, params) => method.startsWith('AuthRpc.') || PROOFS.has(method) || params.ticket !== undefined;

let confirmIdentity = null;

/**
 * What a call refused with STEP_UP_REQUIRED waits for: `confirm(failure)`
 * resolves true once the session is confirmed (AccountSecurityRpc.stepUp),
 * false when the person gives up. app.js sets its dialog here.
 */
export function onStepUp(confirm) {
  confirmIdentity = confirm;
}

async function send(method, params, apiKey) {
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
  if (apiKey) headers['X-API-Key'] = apiKey;
  const response = await fetch('/api/rpc', { method: 'POST', credentials: 'same-origin', headers, body: JSON.stringify({ method, params }) });
  const body = await response.json().catch(() => null);
  if (body && body.success === true) return body.data;
  const error = body && body.data;
  const failure = new RpcFailure(error?.code ?? 'INTERNAL', error?.error ?? `The service answered HTTP ${response.status}`, response.status, error?.details);
  // The session ended (expired, signed out elsewhere, its user removed): the page goes back to signing in.
  if (failure.code === 'UNAUTHENTICATED' && !apiKey && !provesItself(method, params)) window.dispatchEvent(new CustomEvent('console:signed-out'));
  throw failure;
}

/**
 * Calls `method`; `apiKey` authenticates the one call with that key instead of
 * the session (a webhook is registered by its key). A call that needs a
 * recent sign-in is retried once, after the person confirms who they are.
 */
export async function rpc(method, params = {}, { apiKey } = {}) {
  try {
    return await send(method, params, apiKey);
  } catch (failure) {
    if (failure.code !== 'STEP_UP_REQUIRED' || apiKey || !confirmIdentity || !(await confirmIdentity(failure))) throw failure;
    return send(method, params, apiKey);
  }
}
