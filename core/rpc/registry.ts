import { toJsonSchema } from '@valibot/to-json-schema';
import type { GenericSchema } from 'valibot';
import type { Access, Operation, OperationKind } from './operation.ts';

export interface RegisteredOperation {
  method: string;
  group: string;
  pluginId: string;
  access: Access;
  describe: string;
  params: GenericSchema;
  /** What it answers in `data`, where declared. */
  result?: GenericSchema;
  kind?: OperationKind;
  handler: Operation['handler'];
  /** The deps of the plugin that declared it, handed to the handler. */
  deps: object;
}

export interface OperationListing {
  method: string;
  access: Access;
  /** `write` where the operation does not say (operation.ts, OperationKind). */
  kind: OperationKind;
  description: string;
  params: Record<string, unknown>;
  /** The JSON Schema of what it answers in `data`, where declared. */
  result?: Record<string, unknown>;
}

export interface Registry {
  get(method: string): RegisteredOperation | undefined;
  all(): readonly RegisteredOperation[];
  /** The `GET /api/rpc` listing, made once at boot. */
  listing(): readonly OperationListing[];
}

/**
 * What the table is built from: the part of a plugin (core/plugin/define.ts)
 * that declares operations, named here so that rpc/ does not import plugin/.
 */
export interface OperationSource {
  id: string;
  group: string;
  operations: Record<string, Operation>;
}

/** A valibot schema as JSON Schema, for the listing, OpenRPC and MCP (what JSON Schema cannot say, such as a transform, is left out). */
export function jsonSchemaOf(schema: GenericSchema): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = toJsonSchema(schema, { errorMode: 'ignore' }) as Record<string, unknown>;
  return rest;
}

/** The operation table, frozen at boot: nothing can add a method after the server starts. */
export function buildRegistry<P extends OperationSource>(plugins: readonly P[], depsOf: (plugin: P) => object): Registry {
  const table = new Map<string, RegisteredOperation>();
  for (const plugin of plugins) {
    const deps = depsOf(plugin);
    for (const [key, operation] of Object.entries(plugin.operations)) {
      const name = key.includes('.') ? key.slice(key.indexOf('.') + 1) : key;
      const method = `${plugin.group}.${name}`;
      if (table.has(method)) throw new Error(`Operation ${method} is declared twice by plugin "${plugin.id}"`);
      table.set(
        method,
        Object.freeze({
          method,
          group: plugin.group,
          pluginId: plugin.id,
          access: operation.access,
          describe: operation.describe,
          params: operation.params,
          result: operation.result,
          kind: operation.kind,
          handler: operation.handler,
          deps,
        }),
      );
    }
  }
  const operations = Object.freeze([...table.values()].sort((a, b) => a.method.localeCompare(b.method)));
  const listing = Object.freeze(
    operations.map((operation) => ({
      method: operation.method,
      access: operation.access,
      kind: operation.kind ?? 'write',
      description: operation.describe,
      params: jsonSchemaOf(operation.params),
      ...(operation.result ? { result: jsonSchemaOf(operation.result) } : {}),
    })),
  );
  return {
    get: (method) => table.get(method),
    all: () => operations,
    listing: () => listing,
  };
}
