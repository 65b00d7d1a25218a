import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { RpcError, type Principal } from 'rpc-service/plugin';
import type { OperationListing } from '../../core/rpc/registry.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';

/**
 * Sends hostile params to every operation of the registry, anonymously and as
 * an admin, and insists that none is answered with INTERNAL: bad input is a
 * 4xx, whatever it is and wherever it sits. Each call starts from params the
 * operation accepts and spoils one property, so the spoiled value gets as far
 * into the handler (and the database) as validation lets it.
 */

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minLength?: number;
  minimum?: number;
}

const NUL = '\u0000';

const nested = (levels: number, wrap: (inner: unknown) => unknown): unknown => {
  let value: unknown = 'leaf';
  for (let level = 0; level < levels; level++) value = wrap(value);
  return value;
};

/** What every property gets in turn. */
const HOSTILE_VALUES: unknown[] = [
  `fuzz${NUL}value`,
  NUL,
  [`a${NUL}`],
  { value: `a${NUL}` },
  { [`key${NUL}`]: 1 },
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  true,
  false,
  null,
  [],
  {},
  ['x', 1, null],
  { a: 1 },
  '',
  'x'.repeat(100_000),
  // Valid text for most fields, so it reaches the handler: quotes, a lone surrogate, a character outside the BMP.
  "it's' or 1=1 -- \ud800 \u{1F642}",
  // What ends, quotes or comments out a statement: the values are inlined into SQL, which a driver must not split (core/db/pglite-driver.ts).
  'semi;colon',
  "'; delete from core_user; --",
  `$$;$$ select 1; -- x' || pg_sleep(1) || 'a"b;c\\`,
  nested(200, (inner) => ({ a: inner })),
  nested(200, (inner) => [inner]),
  JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "toString": 1}'),
];

/** Filters for each field a list takes: unknown operators, wrong operands, patterns either regex dialect refuses. */
const hostileFilters = (field: string): unknown[] => [
  { [field]: { $bogus: 1 } },
  { [field]: { $where: 'sleep(10)' } },
  { [field]: { $regex: '[' } },
  { [field]: { $regex: '(?<name>x)' } },
  { [field]: { $regex: 'a{1,300}' } },
  { [field]: { $regex: 'x', $options: 'gx' } },
  { [field]: { $options: 'i' } },
  { [field]: { $in: 'x' } },
  { [field]: { $nin: [{}, []] } },
  { [field]: { $gt: {} } },
  { [field]: { $exists: 'yes' } },
  { [field]: { $eq: `a${NUL}` } },
  { [field]: -8.64e15 },
  { [field]: '-271821-04-20T00:00:00Z' },
  { [field]: '275760-09-13T00:00:00Z' },
  { [field]: 'x'.repeat(100_000) },
  { $or: [{ [field]: { $regex: '[' } }] },
];
const HOSTILE_FILTERS: unknown[] = [
  { $where: '1' },
  { $or: 'x' },
  { $and: [] },
  { $and: [{ $nor: [] }] },
  { toString: 1 },
  { '': 1 },
  nested(30, (inner) => ({ $and: [inner] })),
];
const hostileSorts = (field: string): unknown[] => [{ [field]: 'up' }, { [field]: 0 }, { toString: 1 }, { [field]: 1, [`${field}${NUL}`]: 1 }];

interface Case {
  method: string;
  params: unknown;
  principal: Principal | null;
  label: string;
}

let counter = 0;

/** A value the schema accepts, as plain as possible: null where allowed, required properties only. */
function sample(schema: Schema, userId: string): unknown {
  if (schema.anyOf) return schema.anyOf.some((option) => option.type === 'null') ? null : sample(schema.anyOf[0]!, userId);
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  switch (schema.type) {
    case 'string': {
      const n = ++counter;
      if (schema.format === 'email') return `fuzz${n}@example.com`;
      if (schema.format === 'uuid') return userId;
      if (schema.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      return `fuzz${n}`.padEnd(schema.minLength ?? 0, 'x');
    }
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return Object.fromEntries((schema.required ?? []).map((key) => [key, sample(schema.properties![key]!, userId)]));
    default:
      return 'fuzz';
  }
}

/** Every property path of a params schema, nested objects included. */
function propertyPaths(schema: Schema, prefix: string[] = []): string[][] {
  return Object.entries(schema.properties ?? {}).flatMap(([key, property]) => {
    const path = [...prefix, key];
    const object = property.anyOf?.find((option) => option.type === 'object') ?? property;
    return [path, ...(object.type === 'object' ? propertyPaths(object, path) : [])];
  });
}

function withValue(params: Record<string, unknown>, schema: Schema, path: string[], value: unknown, userId: string): Record<string, unknown> {
  const [key, ...rest] = path as [string, ...string[]];
  if (rest.length === 0) return { ...params, [key]: value };
  const property = schema.properties![key]!;
  const object = property.anyOf?.find((option) => option.type === 'object') ?? property;
  const inner = (params[key] as Record<string, unknown> | undefined) ?? (sample(object, userId) as Record<string, unknown>);
  return { ...params, [key]: withValue(inner, object, rest, value, userId) };
}

function subsets<T>(items: T[], size: number): T[][] {
  if (size === 0) return [[]];
  return items.flatMap((item, index) => subsets(items.slice(index + 1), size - 1).map((rest) => [item, ...rest]));
}

describe('fuzzing every operation', () => {
  let t: TestApp;
  let admin: Principal;
  let adminKey: string;
  let ip = 0;

  before(async () => {
    t = await startTestApp();
    const owner = await t.signup();
    admin = { subscriptionId: owner.subscriptionId, userId: owner.user._id, role: 'admin', apiKeyId: null, sessionId: null, initialContext: null };
    // HTTP calls use an API key and in-process calls a principal, neither a session: a fuzzed logout or password reset ends neither.
    adminKey = (await t.as(owner).ApiKeyRpc.create({ description: 'fuzz' })).fullKey;
  });
  after(() => t?.close());

  /** Params the operation accepts: its required properties with up to two optional ones. */
  function acceptedParams(operation: OperationListing): Record<string, unknown>[] {
    const schema = operation.params as Schema;
    const valid = (params: unknown) => v.safeParse(t.app.registry.get(operation.method)!.params, params).success;
    const required = sample(schema, admin.userId) as Record<string, unknown>;
    const optional = Object.keys(schema.properties ?? {}).filter((key) => !(key in required));
    const candidates = [0, 1, 2].flatMap((size) =>
      subsets(optional, size).map((keys) => keys.reduce((params, key) => ({ ...params, [key]: sample(schema.properties![key]!, admin.userId) }), required)),
    );
    const accepted = candidates.filter(valid);
    return accepted.length > 0 ? accepted : [required];
  }

  /** Calls in process (from a fresh client address each time, so rate limits never stand in for validation); says what went wrong, if anything. */
  async function internalFailure({ method, params, principal, label }: Case): Promise<string | undefined> {
    const n = ++ip;
    const caller = t.app.createCaller(principal, { clientIp: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` });
    try {
      await caller.call(method, params);
    } catch (error) {
      if (!(error instanceof RpcError)) return `${method} ${label}: threw ${String(error)}`;
      if (error.code === 'INTERNAL') return `${method} ${label}: ${error.message}`;
    }
    return undefined;
  }

  /** The fields a list param names; null when the operation takes the param and ignores it (PlaybookRpc.list's sort, as `plugins/playbook/README.md` has it). */
  async function discoverFields(operation: OperationListing, param: 'filter' | 'sort'): Promise<string[] | null> {
    try {
      // With the operation's required params, so that the probe is what validation stops at.
      await t.app.createCaller(admin).call(operation.method, { ...acceptedParams(operation)[0], [param]: { '~probe': 1 } });
      if (param === 'sort') return null;
    } catch (error) {
      const message = (error as RpcError).issues?.[0]?.message ?? '';
      const listed = /(?:filterable|sortable) fields: (.*)$/.exec(message)?.[1];
      if (listed) return listed.split(', ');
      // Filters on metadata (MemoryRpc) take any key: made-up ones, one of them nested.
      if (/a metadata key is/.test(message)) return ['topic', 'customer.tier'];
    }
    return [];
  }

  it('the registry has operations to fuzz, with params', () => {
    const listing = t.app.registry.listing();
    assert.ok(listing.length >= 20, `only ${listing.length} operations`);
    assert.ok(
      listing.some((operation) => operation.method === 'AdminUserRpc.getData'),
      'a list operation is among them',
    );
  });

  it('never answers 500 over HTTP, which is what a client sees', async () => {
    const deep = nested(200, (inner) => ({ a: inner }));
    for (const operation of t.app.registry.listing()) {
      const keys = Object.keys((operation.params as Schema).properties ?? {});
      const variants: unknown[] = [
        Object.fromEntries(keys.map((key) => [key, `x${NUL}`])),
        Object.fromEntries(keys.map((key) => [key, 'x'.repeat(100_000)])),
        { ...Object.fromEntries(keys.map((key) => [key, deep])), deep },
      ];
      const calls = [{}, { apiKey: adminKey }].flatMap((credential) => variants.map((params) => t.call(operation.method, params, credential)));
      for (const response of await Promise.all(calls)) {
        assert.notEqual(response.status, 500, `${operation.method}: ${JSON.stringify(response.body)}`);
        assert.notEqual(response.body.data?.code, 'INTERNAL', operation.method);
        assert.equal(response.body.success, response.status === 200, operation.method);
      }
    }
  });

  it('never answers INTERNAL to a hostile value in any property of any operation, or to a hostile filter or sort', async () => {
    const cases: Case[] = [];
    for (const principal of [null, admin]) {
      const who = principal ? 'as admin' : 'anonymously';
      for (const operation of t.app.registry.listing()) {
        const schema = operation.params as Schema;
        const accepted = acceptedParams(operation);
        for (const path of propertyPaths(schema)) {
          // Accepted params with this property, where there are some: the spoiled value then gets past the other checks.
          const base = accepted.find((params) => path[0]! in params) ?? accepted[0]!;
          for (const value of HOSTILE_VALUES) {
            const label = `${who} ${path.join('.')}=${JSON.stringify(value)?.slice(0, 40)}`;
            cases.push({ method: operation.method, params: withValue(base, schema, path, value, admin.userId), principal, label });
          }
        }
        for (const param of ['filter', 'sort'] as const) {
          if (!schema.properties?.[param] || !principal) continue;
          const fields = await discoverFields(operation, param);
          if (fields === null) continue;
          assert.ok(fields.length > 0, `${operation.method} names its ${param} fields`);
          const hostile = param === 'filter' ? [...fields.flatMap(hostileFilters), ...HOSTILE_FILTERS] : fields.flatMap(hostileSorts);
          for (const value of hostile) {
            cases.push({ method: operation.method, params: { [param]: value }, principal, label: `${who} ${param}=${JSON.stringify(value).slice(0, 60)}` });
          }
        }
      }
    }
    // A few calls at a time: password hashing runs in the thread pool while others validate.
    let next = 0;
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < cases.length) {
          const failure = await internalFailure(cases[next++]!);
          if (failure) failures.push(failure);
        }
      }),
    );
    assert.ok(cases.length > 1000, `only ${cases.length} cases`);
    assert.deepEqual(failures, []);
  });
});
