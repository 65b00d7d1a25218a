import * as v from 'valibot';
import { defineExtensionPoint } from '../base/extension-points.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';
import type { Contribution } from '../base/extension-points.ts';
import type { Access } from './operation.ts';
import type { Registry } from './registry.ts';

/** A tool an agent may be given: one RPC operation, called as the agent's caller with the params the model chooses. */
export interface ToolDeclaration {
  /** Dotted, lower-case: `memory.recall`. */
  name: string;
  /** One line for the model and for people choosing tools: what it does. */
  describe: string;
  /** The operation it calls: `MemoryRpc.recallMemories`. */
  method: string;
}

/** A tool as listed: its declaration, the operation's access level and the JSON Schema of its params. */
export interface ToolListing extends ToolDeclaration {
  access: Access;
  params: Record<string, unknown>;
  pluginId: string;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.tools': ToolDeclaration;
  }
}

export const toolsPoint = defineExtensionPoint({
  id: 'core.tools',
  describe: "The tool catalogue: operations agents may be given as tools, each called as the agent's caller.",
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)+$/, 'name must be dotted, like "memory.recall"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    method: v.pipe(v.string(), v.regex(/^[A-Za-z][A-Za-z0-9]*\.[A-Za-z][A-Za-z0-9]*$/, 'method must be "Group.operation"')),
  }),
});

/** The `core.tools` contributions, checked against the operation registry once it is built. */
export class ToolCatalogue {
  #tools: readonly ToolListing[] = [];

  /** Each tool names an operation that exists and is not public; names are unique. */
  load(contributions: readonly Contribution<ToolDeclaration>[], registry: Registry): void {
    const listings = new Map(registry.listing().map((operation) => [operation.method, operation]));
    const owners = new Map<string, string>();
    this.#tools = contributions.map(({ pluginId, value }) => {
      const owner = owners.get(value.name);
      if (owner)
        throw new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `Plugin "${pluginId}": tool "${value.name}" is already declared by plugin "${owner}"`);
      const operation = listings.get(value.method);
      if (!operation || operation.access === 'public') {
        throw new PluginLoadError(
          'PLUGIN_INVALID_CONTRIBUTION',
          `Plugin "${pluginId}": tool "${value.name}" names ${value.method}, which is not an operation agents can call`,
        );
      }
      owners.set(value.name, pluginId);
      return Object.freeze({ ...value, access: operation.access, params: operation.params, pluginId });
    });
  }

  list(): readonly ToolListing[] {
    return this.#tools;
  }

  get(name: string): ToolListing | undefined {
    return this.#tools.find((tool) => tool.name === name);
  }
}
