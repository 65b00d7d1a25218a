import * as v from 'valibot';
import { notFound, RpcError, type AuthenticatedContext, type Outbound, type PluginServices } from 'rpc-service/plugin';
import type { TelephonyConfig } from './config.ts';
import { HttpProvider } from './http-provider.ts';
import { LocalProvider } from './local-provider.ts';
import type { TelephonyProvider } from './provider.ts';

/** What the reads answer: extensions, as text of digits. */
export const EXTENSIONS = v.array(v.string());

/** What the writes answer: the change made. */
const acknowledgment = { success: v.literal(true), extension: v.string() };
export const DISASSOCIATED = v.strictObject(acknowledgment);
export const USER_ASSIGNED = v.strictObject({ ...acknowledgment, appUserId: v.string() });
export const AGENT_ASSIGNED = v.strictObject({ ...acknowledgment, agentConfigId: v.string(), agentContactId: v.nullable(v.string()) });

/**
 * TelephonyManagerRpc over the configured provider (TELEPHONY_PROVIDER):
 * checks what belongs to the service (the assignee is a user of the caller's
 * subscription) and leaves the extensions and assignments to the provider.
 * Without a provider every operation is FEATURE_UNAVAILABLE.
 */
export class TelephonyService {
  readonly #provider: TelephonyProvider | null;
  readonly #users: PluginServices['userService'];

  constructor({ config, outbound, userService }: { config: TelephonyConfig; outbound: Outbound; userService: PluginServices['userService'] }) {
    this.#provider =
      config.provider === 'local' ? new LocalProvider(config.extensions) : config.provider === 'http' ? new HttpProvider(outbound, config) : null;
    this.#users = userService;
  }

  getAvailableExtensions(ctx: AuthenticatedContext): Promise<string[]> {
    return this.#required().availableExtensions(ctx);
  }

  async assignUserExtension(ctx: AuthenticatedContext, appUserId: string, extension: string): Promise<v.InferOutput<typeof USER_ASSIGNED>> {
    const provider = this.#required();
    const user = await this.#user(ctx, appUserId);
    await provider.assign(ctx, extension, { kind: 'user', userId: user.id, partnerContactId: user.partnerContactId ?? null });
    return { success: true, extension, appUserId };
  }

  async assignAgentExtension(
    ctx: AuthenticatedContext,
    extension: string,
    agentConfigId: string,
    agentContactId: string | null,
  ): Promise<v.InferOutput<typeof AGENT_ASSIGNED>> {
    await this.#required().assign(ctx, extension, { kind: 'agent', agentConfigId, agentContactId });
    return { success: true, extension, agentConfigId, agentContactId };
  }

  async disassociateUserExtension(ctx: AuthenticatedContext, extension: string): Promise<v.InferOutput<typeof DISASSOCIATED>> {
    await this.#required().disassociate(ctx, extension, 'user');
    return { success: true, extension };
  }

  async disassociateAgentExtension(ctx: AuthenticatedContext, extension: string): Promise<v.InferOutput<typeof DISASSOCIATED>> {
    await this.#required().disassociate(ctx, extension, 'agent');
    return { success: true, extension };
  }

  async getExtensionsForUser(ctx: AuthenticatedContext, appUserId: string): Promise<string[]> {
    const provider = this.#required();
    await this.#user(ctx, appUserId);
    return provider.extensionsOfUser(ctx, appUserId);
  }

  getExtensionsForAgent(ctx: AuthenticatedContext, agentContactId: string): Promise<string[]> {
    return this.#required().extensionsOfAgent(ctx, agentContactId);
  }

  #required(): TelephonyProvider {
    if (!this.#provider) {
      throw new RpcError(
        'FEATURE_UNAVAILABLE',
        'Telephony is not configured: the operator sets TELEPHONY_PROVIDER to local (with TELEPHONY_EXTENSIONS) or http (with TELEPHONY_API_URL and TELEPHONY_API_KEY)',
      );
    }
    return this.#provider;
  }

  /** A user of the caller's subscription; another subscription's is as unknown as a missing one. */
  async #user(ctx: AuthenticatedContext, appUserId: string) {
    const user = await this.#users.findById(ctx, appUserId);
    if (!user) throw notFound(`User ${appUserId} not found`);
    return user;
  }
}
