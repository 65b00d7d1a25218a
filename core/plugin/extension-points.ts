import type * as v from 'valibot';

/**
 * The contract of every extension point, by id. The plugin that declares a
 * point adds its contribution type here by declaration merging, so that
 * contributors are type-checked against it:
 *
 *   declare module 'rpc-service/plugin' {
 *     interface ExtensionPoints { 'task.boards': BoardTemplate }
 *   }
 *
 * Core's own points declare themselves the same way, beside their catalogue
 * (core/ai/ai-client.ts, core/ai/tools.ts, core/credentials/authenticator.ts, core/events/catalogue.ts,
 * core/rpc/collections.ts, core/rpc/data-scopes.ts), so this file imports none
 * of them and stays a leaf of the import graph.
 */
export interface ExtensionPoints {}

export type ExtensionPointId = keyof ExtensionPoints & string;

/** What a plugin contributes to the points of others, by point id. */
export type Contributions = { readonly [K in ExtensionPointId]?: readonly ExtensionPoints[K][] };

/**
 * An extension point: a typed place where other plugins add to the plugin
 * that declares it. `contribution` checks each contribution at load time.
 */
export interface ExtensionPoint<T = unknown> {
  readonly id: string;
  readonly describe: string;
  readonly contribution: v.GenericSchema<unknown, T>;
}

export const defineExtensionPoint = <T>(point: ExtensionPoint<T>): ExtensionPoint<T> => Object.freeze({ ...point });

/**
 * One contribution as the declaring plugin receives it: the value, the
 * contributing plugin and that plugin's own deps, for contributions whose
 * functions need the contributor's services.
 */
export interface Contribution<T> {
  readonly pluginId: string;
  readonly value: T;
  readonly deps: object;
}

/** The contributions to the points a plugin declared (a plugin reads only its own points). */
export interface Extensions {
  get<K extends ExtensionPointId>(id: K): readonly Contribution<ExtensionPoints[K]>[];
}

export class ExtensionRegistry {
  readonly #byPoint = new Map<string, Contribution<unknown>[]>();

  declare(id: string): void {
    this.#byPoint.set(id, []);
  }

  add(id: string, contribution: Contribution<unknown>): void {
    this.#byPoint.get(id)!.push(contribution);
  }

  /** Every contribution to a point, in load order of the contributors. */
  all<T>(id: string): readonly Contribution<T>[] {
    return (this.#byPoint.get(id) ?? []) as Contribution<T>[];
  }

  /** The view one owner has: its own points only. */
  scopedTo(owner: string, ownPoints: readonly string[]): Extensions {
    return {
      get: (id) => {
        if (!ownPoints.includes(id)) throw new Error(`${owner} reads extension point "${id}", which it does not declare`);
        return this.all(id) as never;
      },
    };
  }
}
