import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import { defineExtensionPoint, type EntityManager, type Extensions, type Logger } from 'rpc-service/plugin';
import type { UserView } from './user-view.ts';

export interface AfterSignup {
  user: UserView;
  subscriptionId: string;
  /** True when the user joined an existing subscription with an invite code. */
  joinedExisting: boolean;
}

export interface AfterLogin {
  user: UserView;
  method: 'password' | 'code' | 'oauth' | 'passkey';
}

export interface UserRemoved {
  userId: string;
  subscriptionId: string;
  /** The removal's transaction: what is done with it commits or rolls back with the removal. */
  em: EntityManager;
}

export interface AccountClaimed {
  userId: string;
  subscriptionId: string;
  /** The claim's transaction: what is done with it commits or rolls back with the claim. */
  em: EntityManager;
}

/** What a plugin contributes to `auth.lifecycle`. */
export interface LifecycleHooks {
  /** After a user exists (signup, OAuth signup); awaited in load order; a failure is logged and undoes nothing. */
  afterSignup?(event: AfterSignup): void | Promise<void>;
  /** After a session was made; like afterSignup. */
  afterLogin?(event: AfterLogin): void | Promise<void>;
  /** Inside the transaction that removes a user: delete or detach what the plugin keeps for them. A failure stops the removal. */
  userRemoved?(event: UserRemoved): Promise<void>;
  /**
   * Inside the transaction in which the person who owns a user's address joins
   * that account, which someone else may have made (join.service.ts): end every
   * credential the plugin keeps that acts as the user, since someone else may
   * hold it, and stop what it keeps to act as the user later (a scheduled
   * task), since someone else may have written it. The auth plugin then makes every node forget the user's cached
   * credentials. A failure stops the join.
   */
  accountClaimed?(event: AccountClaimed): Promise<void>;
  /**
   * After every session of a user ended (a new password, an admin's reset,
   * "sign out everywhere else"): end what else would sign them in (a sign-in
   * waiting for its second step). A failure is the caller's.
   */
  sessionsEnded?(event: { subscriptionId: string; userId: string }): Promise<void>;
}

export const lifecyclePoint = defineExtensionPoint({
  id: 'auth.lifecycle',
  describe:
    'Hooks that run after signup and login, inside the removal of a user or the claim of an account by its owner, and after all of a user’s sessions ended.',
  contribution: v.strictObject({
    afterSignup: v.optional(v.function()),
    afterLogin: v.optional(v.function()),
    userRemoved: v.optional(v.function()),
    accountClaimed: v.optional(v.function()),
    sessionsEnded: v.optional(v.function()),
  }),
});

/** Runs the contributions to `auth.lifecycle` in load order. */
export class Lifecycle {
  readonly #extensions: Extensions;
  readonly #logger: Logger;

  constructor({ extensions, logger }: { extensions: Extensions; logger: Logger }) {
    this.#extensions = extensions;
    this.#logger = logger;
  }

  afterSignup(event: AfterSignup): Promise<void> {
    return this.#notify('afterSignup', event);
  }

  afterLogin(event: AfterLogin): Promise<void> {
    return this.#notify('afterLogin', event);
  }

  async userRemoved(event: UserRemoved): Promise<void> {
    for (const { value } of this.#extensions.get('auth.lifecycle')) await value.userRemoved?.(event);
  }

  async accountClaimed(event: AccountClaimed): Promise<void> {
    for (const { value } of this.#extensions.get('auth.lifecycle')) await value.accountClaimed?.(event);
  }

  async sessionsEnded(event: { subscriptionId: string; userId: string }): Promise<void> {
    for (const { value } of this.#extensions.get('auth.lifecycle')) await value.sessionsEnded?.(event);
  }

  async #notify(name: 'afterSignup' | 'afterLogin', event: AfterSignup | AfterLogin): Promise<void> {
    for (const { pluginId, value } of this.#extensions.get('auth.lifecycle')) {
      const hook = value[name] as ((event: unknown) => void | Promise<void>) | undefined;
      if (!hook) continue;
      try {
        await hook(event);
      } catch (err) {
        this.#logger.error({ err, errorId: randomUUID(), plugin: pluginId, hook: name, userId: event.user._id }, 'lifecycle hook failed');
      }
    }
  }
}
