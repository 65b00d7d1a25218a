import { toJsonSchema } from '@valibot/to-json-schema';
import * as v from 'valibot';
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
  stepUp?: Operation['stepUp'];
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

type Dataset = { value: unknown; typed: boolean; issues?: v.BaseIssue<unknown>[] };
type Run = (this: AnySchema, dataset: Dataset, config: v.Config<v.BaseIssue<unknown>>) => Dataset;

/** What strictParams reads of a valibot schema: each kind has some of these, and its run reads them from `this`. */
type AnySchema = GenericSchema & {
  pipe?: (GenericSchema | { kind: string })[];
  entries: Record<string, GenericSchema>;
  item: GenericSchema;
  wrapped: GenericSchema;
  options: GenericSchema[];
  items: GenericSchema[];
  value: GenericSchema;
  getter: (input: unknown) => GenericSchema;
};

/** Schemas around one other schema, under `wrapped` (their runs read it from `this`). */
const WRAPPERS = new Set(['optional', 'nullable', 'nullish', 'undefinedable', 'exact_optional', 'non_optional', 'non_nullable', 'non_nullish']);

const strictSchemas = new WeakMap<object, AnySchema>();

/**
 * The schema with every `v.object` strict: a key it does not declare is a
 * VALIDATION_ERROR naming it ("Received unknown parameter: secret"), where
 * valibot's `v.object` drops it silently, so a typo in a field name is never
 * answered as a success. Nested objects follow, through optional, arrays,
 * unions, records' values and lazy schemas; what declares its keys open
 * (`v.record`, `v.looseObject`, `v.objectWithRest`) stays open, and so does
 * `v.intersect`. The JSON
 * Schema of an object made strict says `additionalProperties: false`.
 * Applied to every operation's params as the registry is built, so each
 * door (both envelopes, MCP, the in-process caller) refuses alike.
 */
export function strictParams(schema: GenericSchema): GenericSchema {
  const known = strictSchemas.get(schema);
  if (known) return known;
  const made = strictened(schema as AnySchema);
  strictSchemas.set(schema, made);
  return made;
}

function strictened(schema: AnySchema): AnySchema {
  // A pipe runs its items from a closure: the first (its schema) and any later schema are made strict, the actions kept.
  if (Array.isArray(schema.pipe)) {
    const [first, ...rest] = schema.pipe;
    const items = rest.map((item) => (item.kind === 'schema' ? strictParams(item as GenericSchema) : item));
    return v.pipe(strictParams(first as GenericSchema), ...(items as [])) as unknown as AnySchema;
  }
  switch (schema.type) {
    case 'object':
      return strictObject(schema);
    case 'strict_object':
    case 'loose_object':
    case 'object_with_rest':
      return { ...schema, entries: strictEntries(schema.entries) };
    case 'array':
      return { ...schema, item: strictParams(schema.item) };
    case 'union':
    case 'variant':
      return { ...schema, options: schema.options.map((option) => strictParams(option)) };
    case 'intersect':
      // Left as declared: each of its objects made strict would refuse the keys the others declare.
      return schema;
    case 'tuple':
      return { ...schema, items: schema.items.map((item) => strictParams(item)) };
    case 'record':
      return { ...schema, value: strictParams(schema.value) };
    case 'lazy': {
      const { getter } = schema;
      return { ...schema, getter: (input: unknown) => strictParams(getter(input)) };
    }
    default:
      return WRAPPERS.has(schema.type) ? { ...schema, wrapped: strictParams(schema.wrapped) } : schema;
  }
}

const strictEntries = (entries: Record<string, GenericSchema>): Record<string, GenericSchema> =>
  Object.fromEntries(Object.entries(entries).map(([key, entry]) => [key, strictParams(entry)]));

/** A `v.object` that also refuses every key it does not declare, each named in an issue of its own. */
function strictObject(schema: AnySchema): AnySchema {
  const run = schema['~run'] as Run;
  const made: Record<string, unknown> = {
    ...schema,
    // strict_object is what it now is: its JSON Schema then says additionalProperties: false.
    type: 'strict_object',
    entries: strictEntries(schema.entries),
    '~run'(this: AnySchema, dataset: Dataset, config: v.Config<v.BaseIssue<unknown>>): Dataset {
      const input = dataset.value;
      const checked = run.call(this, dataset, config);
      if (typeof input !== 'object' || input === null || Array.isArray(input)) return checked;
      for (const key of Object.keys(input)) {
        if (Object.hasOwn(this.entries, key)) continue;
        const value = (input as Record<string, unknown>)[key];
        (checked.issues ??= []).push({
          kind: 'schema',
          type: 'strict_object',
          input: key,
          expected: 'never',
          received: JSON.stringify(key),
          message: `Received unknown parameter: ${key}`,
          path: [{ type: 'object', origin: 'key', input: input as Record<string, unknown>, key, value }],
        });
      }
      return checked;
    },
  };
  return made as unknown as AnySchema;
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
          params: strictParams(operation.params),
          result: operation.result,
          kind: operation.kind,
          stepUp: operation.stepUp,
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
