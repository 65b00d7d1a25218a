import { randomUUID } from 'node:crypto';
import type { UserView } from '../auth/user-view.ts';
import type { Cradle } from '../container.ts';
import type { Logger } from '../logger.ts';
import type { Plugin } from './define.ts';

export interface AfterSignup {
  user: UserView;
  subscriptionId: string;
  /** True when the user joined an existing subscription with an invite code. */
  joinedExisting: boolean;
}

export interface AfterLogin {
  user: UserView;
  method: 'password' | 'code' | 'oauth';
}

/** Application lifecycle hooks a plugin may register in `definePlugin({hooks})`. */
export interface LifecycleHookSet {
  afterSignup?(event: AfterSignup, deps: Cradle): void | Promise<void>;
  afterLogin?(event: AfterLogin, deps: Cradle): void | Promise<void>;
}

/**
 * Runs every plugin's hooks in load order and waits for them. A failing hook
 * is logged with an error id and does not undo the signup or login it follows.
 */
export class LifecycleHooks {
  readonly #plugins: readonly Plugin[];
  readonly #deps: () => Cradle;
  readonly #logger: Logger;

  constructor(plugins: readonly Plugin[], deps: () => Cradle, logger: Logger) {
    this.#plugins = plugins;
    this.#deps = deps;
    this.#logger = logger;
  }

  afterSignup(event: AfterSignup): Promise<void> {
    return this.#run('afterSignup', event);
  }

  afterLogin(event: AfterLogin): Promise<void> {
    return this.#run('afterLogin', event);
  }

  async #run<K extends keyof LifecycleHookSet>(name: K, event: Parameters<NonNullable<LifecycleHookSet[K]>>[0]): Promise<void> {
    for (const plugin of this.#plugins) {
      const hook = plugin.hooks?.[name] as ((event: unknown, deps: Cradle) => void | Promise<void>) | undefined;
      if (!hook) continue;
      try {
        await hook(event, this.#deps());
      } catch (err) {
        this.#logger.error({ err, errorId: randomUUID(), plugin: plugin.id, hook: name, userId: event.user._id }, 'lifecycle hook failed');
      }
    }
  }
}
