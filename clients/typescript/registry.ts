import type { JSONSchema } from 'json-schema-to-typescript';
import type { App } from '../../core/app/app.ts';
import { startTestService } from '../../core/cli/testing.ts';
import type { OpenRpcDocument } from '../../core/rpc/openrpc.ts';

/**
 * What the typed client (generate.ts) and the operation reference
 * (docs/generate.ts) are generated from, and the names both give its types,
 * so the reference shows the types the client exports.
 */

/**
 * Starts the service on an in-memory database with the built-in plugins, as
 * `npm start` would load them, and hands `read` its OpenRPC document and the
 * running app (its plugins and extension points); closes it after.
 */
export async function fromBuiltInService<T>(read: (document: OpenRpcDocument, app: App) => T | Promise<T>): Promise<T> {
  const service = await startTestService({ env: { LOG_LEVEL: 'silent' } });
  try {
    const response = await fetch(`${service.url}/openrpc.json`);
    return await read((await response.json()) as OpenRpcDocument, service.app);
  } finally {
    await service.close();
  }
}

/** A method of the document (core/rpc/openrpc.ts). */
export interface Method {
  name: string;
  description: string;
  params: { name: string; required: boolean; schema: JSONSchema }[];
  result: { schema: JSONSchema };
  errors: { $ref: string }[];
  'x-access': string;
  'x-kind': string;
}

/** An event of the document's catalogue (`x-events`). */
export interface EventEntry {
  name: string;
  description: string;
  schema?: JSONSchema;
}

/** `MemoryRpc saveMemory` → `MemoryRpcSaveMemory`: how a method, an event or a shared schema names its types. */
export const pascal = (words: string): string =>
  words
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('');

/** The schema with references into the document's shared schemas turned into references among the definitions compiled with it. */
const local = (schema: JSONSchema): JSONSchema => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"#/definitions/')) as JSONSchema;

const UNKNOWN: JSONSchema = { tsType: 'unknown' };
export const NO_FIELDS: JSONSchema = { tsType: 'Record<string, never>' };

const isEmptyObject = (schema: JSONSchema): boolean =>
  schema.type === 'object' && Object.keys(schema.properties ?? {}).length === 0 && schema.additionalProperties === false;

/** A named declaration: its title names the TypeScript type; anything (`{}`) is `unknown`, an object without fields `Record<string, never>`. */
export function named(title: string, schema: JSONSchema): JSONSchema {
  if (Object.keys(schema).length === 0) return { ...UNKNOWN, title };
  if (isEmptyObject(schema)) return { ...NO_FIELDS, title };
  return { ...local(schema), title };
}
