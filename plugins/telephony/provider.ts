import type { AuthenticatedContext } from 'rpc-service/plugin';
import type { AssigneeKind } from './assignment.entity.ts';

/** Whom an extension is assigned to: a user of the subscription (with their contact id on the platform, if any), or an agent. */
export type Assignee =
  { kind: 'user'; userId: string; partnerContactId: string | null } | { kind: 'agent'; agentConfigId: string; agentContactId: string | null };

/**
 * Where extensions and their assignments live. Every method acts within
 * `ctx.subscriptionId` and throws RpcErrors meant for the caller: CONFLICT
 * for an extension already assigned, NOT_FOUND for one not assigned to the
 * kind named, VALIDATION_ERROR for one the provider does not have.
 */
export interface TelephonyProvider {
  availableExtensions(ctx: AuthenticatedContext): Promise<string[]>;
  assign(ctx: AuthenticatedContext, extension: string, assignee: Assignee): Promise<void>;
  disassociate(ctx: AuthenticatedContext, extension: string, kind: AssigneeKind): Promise<void>;
  extensionsOfUser(ctx: AuthenticatedContext, userId: string): Promise<string[]>;
  extensionsOfAgent(ctx: AuthenticatedContext, agentContactId: string): Promise<string[]>;
}
