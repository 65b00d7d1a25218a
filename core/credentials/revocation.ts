/** Published whenever a credential changes or stops being valid; see Credentials.changed. */
export const CREDENTIALS_CHANGED = 'core.credentials.changed';

export interface CredentialsChanged {
  apiKeyId?: string;
  sessionId?: string;
  /** Every access token of an OAuth grant (revoked, or its refresh token reused). */
  grantId?: string;
  /** Every credential of this user (deactivation, role change, password reset). */
  userId?: string;
}

export function concerns({ apiKeyId, sessionId, grantId, userId }: CredentialsChanged) {
  return (principal: { apiKeyId: string | null; sessionId: string | null; userId: string; grant?: { id: string } }): boolean =>
    (apiKeyId !== undefined && principal.apiKeyId === apiKeyId) ||
    (grantId !== undefined && principal.grant?.id === grantId) ||
    (sessionId !== undefined && principal.sessionId === sessionId) ||
    (userId !== undefined && principal.userId === userId);
}
