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
 * (core/ai/ai-client.ts, core/rpc/tools.ts, core/credentials/authenticator.ts, core/events/catalogue.ts,
 * core/records/collections.ts, core/records/data-scopes.ts), so this file imports none
 * of them and stays a leaf of the import graph.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- empty here, filled by declaration merging
export interface ExtensionPoints {}

export type ExtensionPointId = keyof ExtensionPoints & string;

/**
 * What a plugin contributes to the points of others, by point id: the
 * contributions, or a function of the contributing plugin's own deps `D`
 * returning them, called once those deps exist. Functions in a contribution
 * close over the deps they need:
 *
 *   'core.collections': (deps) => [{ name: 'discounts', ..., list: (ctx, query) => deps.discountService.listForCollection(ctx, query) }]
 */
export type Contributions<D = unknown> = {
  readonly [K in ExtensionPointId]?: readonly ExtensionPoints[K][] | ((deps: D) => readonly ExtensionPoints[K][]);
};

/**
 * An extension point: a place where other plugins add to the plugin that
 * declares it. The contributions' type is the one declared for its id in
 * ExtensionPoints; `contribution` checks each of them at load time (valibot
 * cannot spell that type, functions with their parameters least of all).
 */
export interface ExtensionPoint {
  readonly id: string;
  readonly describe: string;
  readonly contribution: v.GenericSchema;
}

/** Declares a point whose id is declared in ExtensionPoints. */
export const defineExtensionPoint = <K extends ExtensionPointId>(point: ExtensionPoint & { readonly id: K }): ExtensionPoint => Object.freeze({ ...point });

/** One contribution as the declaring plugin receives it: the value and the contributing plugin. */
export interface Contribution<T> {
  readonly pluginId: string;
  readonly value: T;
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
  all<K extends ExtensionPointId>(id: K): readonly Contribution<ExtensionPoints[K]>[] {
    // What add() stored for this id passed the point's schema, and its type is the one ExtensionPoints declares.
    return (this.#byPoint.get(id) ?? []) as Contribution<ExtensionPoints[K]>[];
  }

  /** The view one owner has: its own points only. */
  scopedTo(owner: string, ownPoints: readonly string[]): Extensions {
    return {
      get: <K extends ExtensionPointId>(id: K) => {
        if (!ownPoints.includes(id)) throw new Error(`${owner} reads extension point "${id}", which it does not declare`);
        return this.all(id);
      },
    };
  }
}
