import type { EventBus } from '../events/bus.ts';

/**
 * Published whenever a credential stops being valid. Every node drops what it
 * cached for it and closes WebSocket connections that used it.
 */
export const CREDENTIALS_REVOKED = 'core.credentials.revoked';

export interface CredentialsRevoked {
  apiKeyId?: string;
  sessionId?: string;
  /** Every credential of this user (deactivation, role change, password reset). */
  userId?: string;
}

export const publishRevocation = (bus: EventBus, payload: CredentialsRevoked): Promise<void> =>
  bus.publish({ name: CREDENTIALS_REVOKED, payload });
