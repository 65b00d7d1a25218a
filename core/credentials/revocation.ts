/** Published whenever a credential changes or stops being valid; see Credentials.changed. */
export const CREDENTIALS_CHANGED = 'core.credentials.changed';

export interface CredentialsChanged {
  apiKeyId?: string;
  sessionId?: string;
  /** Every credential of this user (deactivation, role change, password reset). */
  userId?: string;
}

export function concerns({ apiKeyId, sessionId, userId }: CredentialsChanged) {
  return (principal: { apiKeyId: string | null; sessionId: string | null; userId: string }): boolean =>
    (apiKeyId !== undefined && principal.apiKeyId === apiKeyId) ||
    (sessionId !== undefined && principal.sessionId === sessionId) ||
    (userId !== undefined && principal.userId === userId);
}
