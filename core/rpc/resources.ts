import * as v from 'valibot';
import { defineExtensionPoint, type Contribution } from '../base/extension-points.ts';
import { PluginLoadError } from '../base/plugin-errors.ts';
import type { Registry } from './registry.ts';

/** A resource as a listing names it (MCP's `Resource`). */
export interface ResourceEntry {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  size?: number;
}

/** What reading a resource gives: text, or bytes as base64. */
export type ResourceContent = ({ text: string } | { blob: string }) & { mimeType?: string };

/** Calls an operation as the caller reading the resource (the pipeline's checks, as over HTTP); throws its RpcError when refused. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- an operation's answer, typed by the contribution that knows it
export type ResourceCall = (method: string, params: Record<string, unknown>) => Promise<any>;

/**
 * Records a plugin offers agents to read as MCP resources. They are read,
 * and listed, only through the plugin's own operations, called as the agent's
 * caller: what a resource shows is exactly what those operations answer that
 * caller, with its role and its credential's scopes.
 */
export interface ResourceDeclaration {
  /** Lower-case, unique: `memories`. */
  name: string;
  title: string;
  describe: string;
  /**
   * An RFC 6570 template of the resources' URIs: `{name}` is one path
   * segment, `{+name}` may hold slashes (`checkpoint://{scope}/{+path}`).
   */
  template: string;
  mimeType: string;
  /** The operations it reads through (`read` kind): offered to a caller who may call the first. */
  operations: readonly [string, ...string[]];
  /** A page of the caller's resources from `cursor` (undefined: the first); `next` continues, null on the last. */
  list?(call: ResourceCall, cursor: string | undefined, limit: number): Promise<{ resources: ResourceEntry[]; next: string | null }>;
  /** One resource by the template's values. */
  read(call: ResourceCall, values: Record<string, string>): Promise<ResourceContent>;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.resources': ResourceDeclaration;
  }
}

export const resourcesPoint = defineExtensionPoint({
  id: 'core.resources',
  describe: "Records offered to agents as MCP resources, listed and read through the plugin's operations as the agent's caller.",
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]*$/, 'name must be lower-case, like "memories"')),
    title: v.pipe(v.string(), v.minLength(1)),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    template: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9+.-]*:\/\/\S+$/, 'template must be a URI template with a scheme, like "memory://{scope}/{memoryId}"')),
    mimeType: v.pipe(v.string(), v.regex(/^[\w.+-]+\/[\w.+-]+$/, 'mimeType must be a media type')),
    operations: v.pipe(v.array(v.string()), v.minLength(1, 'operations must name the operations it reads through')),
    list: v.optional(v.function()),
    read: v.function(),
  }),
});

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A template's variables and the pattern that reads them back out of a URI. */
function compile(template: string): { pattern: RegExp; names: string[] } {
  const names: string[] = [];
  let source = '';
  let last = 0;
  for (const match of template.matchAll(/\{(\+?)([A-Za-z][A-Za-z0-9_]*)\}/g)) {
    source += escapeRegex(template.slice(last, match.index));
    source += match[1] ? '(.+)' : '([^/?#]+)';
    names.push(match[2]!);
    last = match.index! + match[0].length;
  }
  return { pattern: new RegExp(`^${source}${escapeRegex(template.slice(last))}$`), names };
}

/** The URI of a template with these values: `{name}` encoded as one segment, `{+name}` keeping its slashes. */
export function expandTemplate(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\+?)([A-Za-z][A-Za-z0-9_]*)\}/g, (_whole, reserved: string, name: string) => {
    const value = values[name] ?? '';
    return reserved ? value.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(value);
  });
}

interface LoadedResource {
  declaration: ResourceDeclaration;
  pluginId: string;
  pattern: RegExp;
  names: string[];
}

/** The `core.resources` contributions, checked against the operation registry once it is built. */
export class ResourceCatalogue {
  #resources: readonly LoadedResource[] = [];

  /** Each names operations that exist and read; names and templates are unique. */
  load(contributions: readonly Contribution<ResourceDeclaration>[], registry: Registry): void {
    const owners = new Map<string, string>();
    this.#resources = contributions.map(({ pluginId, value }) => {
      const fail = (why: string) => new PluginLoadError('PLUGIN_INVALID_CONTRIBUTION', `Plugin "${pluginId}": resource "${value.name}" ${why}`);
      for (const key of [`name ${value.name}`, `template ${value.template}`]) {
        const owner = owners.get(key);
        if (owner) throw fail(`has the ${key} of plugin "${owner}"'s`);
        owners.set(key, pluginId);
      }
      for (const method of value.operations) {
        const operation = registry.get(method);
        if (!operation || operation.access === 'public' || operation.kind !== 'read')
          throw fail(`names ${method}, which is not an operation that reads for a caller`);
      }
      return { declaration: value, pluginId, ...compile(value.template) };
    });
  }

  list(): readonly ResourceDeclaration[] {
    return this.#resources.map((resource) => resource.declaration);
  }

  /** The resource a URI names and the template's values in it; undefined when no template matches. */
  match(uri: string): { declaration: ResourceDeclaration; values: Record<string, string> } | undefined {
    for (const { declaration, pattern, names } of this.#resources) {
      const found = pattern.exec(uri);
      if (!found) continue;
      try {
        return { declaration, values: Object.fromEntries(names.map((name, index) => [name, decodeURIComponent(found[index + 1]!)])) };
      } catch {
        return undefined; // a malformed escape names nothing
      }
    }
    return undefined;
  }
}
