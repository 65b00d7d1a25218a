import type { EventBus } from '../events/bus.ts';

/**
 * Published whenever a credential changes or stops being valid (key edited,
 * disabled or deleted, logout, user deactivated ...). Every node drops what it
 * cached for it and re-checks WebSocket connections that used it.
 */
export const CREDENTIALS_CHANGED = 'core.credentials.changed';

export interface CredentialsChanged {
  apiKeyId?: string;
  sessionId?: string;
  /** Every credential of this user (deactivation, role change, password reset). */
  userId?: string;
}

export const publishCredentialChange = (bus: EventBus, payload: CredentialsChanged): Promise<void> =>
  bus.publish({ name: CREDENTIALS_CHANGED, payload });

export function concerns({ apiKeyId, sessionId, userId }: CredentialsChanged) {
  return (principal: { apiKeyId: string | null; sessionId: string | null; userId: string }): boolean =>
    (apiKeyId !== undefined && principal.apiKeyId === apiKeyId) ||
    (sessionId !== undefined && principal.sessionId === sessionId) ||
    (userId !== undefined && principal.userId === userId);
}
