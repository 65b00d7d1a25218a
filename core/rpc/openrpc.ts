import type { EventDeclaration } from '../events/catalogue.ts';
import { CORE_ERROR_STATUS } from '../base/errors.ts';
import { jsonRpcCode } from './json-rpc-codes.ts';
import { jsonSchemaOf, type RegisteredOperation } from './registry.ts';

/**
 * The OpenRPC 1.3 document of the service (https://spec.open-rpc.org),
 * generated from the operation registry at start: every operation with its
 * params by name, its result, its access level and kind (`x-access`,
 * `x-kind`), the errors it may answer, and the event catalogue (`x-events`).
 * `GET /openrpc.json` and JSON-RPC's `rpc.discover` answer it.
 */
export interface OpenRpcDocument {
  openrpc: string;
  info: { title: string; version: string; description: string };
  servers?: { name: string; url: string }[];
  methods: Record<string, unknown>[];
  components: {
    errors: Record<string, { code: number; message: string; data: { code: string; status: number } }>;
    /** The definitions a recursive schema refers to (`$ref: '#/components/schemas/<method>.<part>.<n>'`). */
    schemas: Record<string, Record<string, unknown>>;
  };
  /** The event catalogue; `schema` is the JSON Schema of the payload, where the event declares one. */
  'x-events': { name: string; description: string; schema?: Record<string, unknown> }[];
}

export interface OpenRpcSource {
  version: string;
  operations: readonly RegisteredOperation[];
  events: readonly EventDeclaration[];
  /** Each plugin's own error codes with their HTTP status, by plugin id. */
  pluginErrors: ReadonlyMap<string, Readonly<Record<string, number>>>;
}

/**
 * A schema whose `$defs` (a recursive one: a task tree) moved into the
 * document's shared schemas, each named `<owner>.<n>`, with its references
 * following: in an OpenRPC document `#` is the document, so a `$ref` to
 * `#/$defs/…` inside a method's params would point nowhere.
 */
function hoisted(schema: Record<string, unknown>, owner: string, shared: Record<string, Record<string, unknown>>): Record<string, unknown> {
  const { $defs, ...rest } = schema as { $defs?: Record<string, Record<string, unknown>> };
  if (!$defs) return schema;
  const moved = (value: unknown) =>
    JSON.parse(JSON.stringify(value).replace(/"#\/\$defs\/([^"]+)"/g, (_, key: string) => JSON.stringify(`#/components/schemas/${owner}.${key}`))) as Record<
      string,
      unknown
    >;
  for (const [key, definition] of Object.entries($defs)) shared[`${owner}.${key}`] = moved(definition);
  return moved(rest);
}

/** Errors every call may meet, whatever its operation. */
const COMMON_ERRORS = ['BAD_REQUEST', 'VALIDATION_ERROR', 'RATE_LIMITED', 'INTERNAL'];

export function openRpcDocument({ version, operations, events, pluginErrors }: OpenRpcSource): OpenRpcDocument {
  const errors: OpenRpcDocument['components']['errors'] = {};
  const declare = (code: string, status: number) => (errors[code] = { code: jsonRpcCode(code, status), message: code, data: { code, status } });
  for (const [code, status] of Object.entries(CORE_ERROR_STATUS)) declare(code, status);
  for (const codes of pluginErrors.values()) for (const [code, status] of Object.entries(codes)) declare(code, status);

  const schemas: OpenRpcDocument['components']['schemas'] = {};
  const methods = operations.map((operation) => {
    const params = hoisted(jsonSchemaOf(operation.params), `${operation.method}.params`, schemas) as {
      properties?: Record<string, unknown>;
      required?: string[];
    };
    const codes = [
      ...COMMON_ERRORS,
      ...(operation.access === 'public' ? [] : ['UNAUTHENTICATED', 'FORBIDDEN']),
      ...Object.keys(pluginErrors.get(operation.pluginId) ?? {}),
    ];
    return {
      name: operation.method,
      description: operation.describe,
      paramStructure: 'by-name',
      params: Object.entries(params.properties ?? {}).map(([name, schema]) => ({ name, required: params.required?.includes(name) ?? false, schema })),
      result: { name: 'result', schema: operation.result ? hoisted(jsonSchemaOf(operation.result), `${operation.method}.result`, schemas) : {} },
      errors: codes.map((code) => ({ $ref: `#/components/errors/${code}` })),
      'x-access': operation.access,
      'x-kind': operation.kind ?? 'write',
    };
  });
  return {
    openrpc: '1.3.2',
    info: {
      title: 'rpc-service',
      version,
      description:
        'Every operation of the service, called at POST /api/rpc as JSON-RPC 2.0 (or in the envelope {method, params}). ' +
        'An error carries our code in error.data.code; x-access is who may call the method, x-kind whether it changes data.',
    },
    methods,
    components: { errors, schemas },
    'x-events': events.map((event) => ({
      name: event.name,
      description: event.describe,
      ...(event.payload ? { schema: hoisted(jsonSchemaOf(event.payload), `event.${event.name}`, schemas) } : {}),
    })),
  };
}

/**
 * The document with the server address a caller used, for `GET /openrpc.json`
 * and `rpc.discover`; with `permits`, only the methods the caller may call.
 */
export const openRpcFor = (document: OpenRpcDocument, baseUrl: string, permits?: (method: string) => boolean): OpenRpcDocument => ({
  ...document,
  servers: [{ name: 'this service', url: `${baseUrl}/api/rpc` }],
  ...(permits ? { methods: document.methods.filter((method) => permits(method.name as string)) } : {}),
});
