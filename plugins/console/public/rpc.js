/* global fetch, window, CustomEvent */
/**
 * Calls of POST /api/rpc from the page. The session travels in its HttpOnly
 * cookie (the page never sees it); `Content-Type: application/json` is what
 * the endpoint requires, and no other site's form can send it (README.md,
 * "Security").
 */

/** A refusal or failure of a call: the service's code and message. */
export class RpcFailure extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

/** Calls `method`; `apiKey` authenticates the one call with that key instead of the session (a webhook is registered by its key). */
export async function rpc(method, params = {}, { apiKey } = {}) {
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
  if (apiKey) headers['X-API-Key'] = apiKey;
  const response = await fetch('/api/rpc', { method: 'POST', credentials: 'same-origin', headers, body: JSON.stringify({ method, params }) });
  const body = await response.json().catch(() => null);
  if (body && body.success === true) return body.data;
  const error = body && body.data;
  const failure = new RpcFailure(error?.code ?? 'INTERNAL', error?.error ?? `The service answered HTTP ${response.status}`, response.status);
  // The session ended (expired, signed out elsewhere, its user removed): the page goes back to signing in.
  if (failure.code === 'UNAUTHENTICATED' && !apiKey && !method.startsWith('AuthRpc.')) window.dispatchEvent(new CustomEvent('console:signed-out'));
  throw failure;
}
