/**
 * An OAuth error as RFC 6749 names them (`invalid_request`, `invalid_grant`,
 * ...): the token, registration and revocation endpoints answer it as
 * `{error, error_description}`, the authorization endpoint sends it back to
 * the client's redirect URI.
 */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }

  get body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}
