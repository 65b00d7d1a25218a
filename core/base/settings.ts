import * as v from 'valibot';

/**
 * Building blocks for environment settings, shared by the core's own and
 * every plugin's `config` schema, so each variable reads and fails the same way.
 */

/** A setting that stops start-up: the message names it (and what to change), and `npm start` prints it as one line. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export const splitList = (text: string): string[] =>
  text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

/** A setting's schema, made for its name so that its messages name the variable. */
type Reader<S> = (name: string) => S;

/** Readers of the usual kinds of setting, for `setting(...)`. */
export const env = {
  integer:
    (min: number, max: number): Reader<v.GenericSchema<string, number>> =>
    (name) =>
      v.pipe(
        v.string(),
        v.regex(/^\d+$/, `${name} must be a whole number`),
        v.transform(Number),
        v.minValue(min, `${name} must be at least ${min}`),
        v.maxValue(max, `${name} must be at most ${max}`),
      ),
  boolean: (): Reader<v.GenericSchema<string, boolean>> => (name) =>
    v.pipe(
      v.picklist(['true', 'false', '1', '0'], `${name} must be true or false`),
      v.transform((value) => value === 'true' || value === '1'),
    ),
  /** One of `values`. */
  oneOf:
    <const T extends readonly string[]>(values: T): Reader<v.GenericSchema<string, T[number]>> =>
    (name) =>
      v.picklist(values, `${name} must be ${values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`}`),
  /** An absolute URL. */
  url: (): Reader<v.GenericSchema<string, string>> => (name) => v.pipe(v.string(), v.url(`${name} must be an absolute URL`)),
  /** Comma-separated values, trimmed, empty ones dropped. */
  list: () => v.pipe(v.string(), v.transform(splitList)),
};

type StringSchema = v.GenericSchema<string, unknown>;

/** One setting before it has its name: `settings(...)` gives it the key it is declared under. */
export interface Setting<S extends StringSchema, D extends string | undefined> {
  readonly read: Reader<S>;
  readonly describe: string;
  readonly fallback: D;
}

/**
 * One setting: its schema (or a reader, `env.integer(1, 100)` or
 * `(name) => v.pipe(..., v.check(..., `${name} must ...`))`), one line for the
 * listing and its default, as the text an environment variable would hold.
 */
export const setting = <S extends StringSchema, const D extends string | undefined = undefined>(
  schema: S | Reader<S>,
  describe: string,
  fallback?: D,
): Setting<S, D> => ({ read: typeof schema === 'function' ? schema : () => schema, describe, fallback: fallback as D });

/** A named setting as valibot reads it: optional, with its description and default. */
type Named<T> =
  T extends Setting<infer S, infer D> ? v.OptionalSchema<v.SchemaWithPipe<readonly [S, v.DescriptionAction<v.InferOutput<S>, string>]>, D> : never;

/**
 * A settings schema: a valibot object whose keys are the variables, each
 * named once, by its key. Pipe it into the shape a plugin wants; its
 * `entries` make a loose object for settings whose names vary.
 */
export function settings<T extends Record<string, Setting<StringSchema, string | undefined>>>(
  declared: T,
): v.ObjectSchema<{ [K in keyof T]: Named<T[K]> }, undefined> {
  const entries = Object.fromEntries(
    Object.entries(declared).map(([name, { read, describe, fallback }]) => [name, v.optional(v.pipe(read(name), v.description(describe)), fallback)]),
  );
  // valibot types an object built from entries at run time as any entries: the mapped type says what each becomes.
  return v.object(entries) as v.ObjectSchema<{ [K in keyof T]: Named<T[K]> }, undefined>;
}

/** Parses the environment with a settings schema; every problem is named in one ConfigError. */
export function parseSettings<S extends v.GenericSchema>(schema: S, env: Record<string, string | undefined>): v.InferOutput<S> {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const result = v.safeParse(schema, present);
  if (result.success) return result.output;
  const problems = result.issues.map((issue) => {
    const key = v.getDotPath(issue) ?? '';
    return issue.message.includes(key) ? issue.message : `${key}: ${issue.message}`;
  });
  throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
}

export interface SettingInfo {
  name: string;
  owner: string;
  /** What a value must be, read off the schema's checks: `whole number, 1 to 256`, `true or false`, `one of disk, database`, `URL`, `text`. */
  type: string;
  default: string | null;
  description: string;
}

type SettingsSchema = v.GenericSchema & { entries?: v.ObjectEntries; pipe?: readonly unknown[] };

/** The variables of a settings schema (an object, or a pipe that starts with one); undefined for anything else. */
export function settingsEntries(schema: unknown): v.ObjectEntries | undefined {
  const candidate = schema as SettingsSchema;
  const object = candidate?.pipe ? (candidate.pipe[0] as SettingsSchema) : candidate;
  return object && (object.type === 'object' || object.type === 'loose_object') ? object.entries : undefined;
}

/** A schema or an action of a pipe, as far as `valueOf` reads it. */
interface Part {
  type: string;
  requirement?: unknown;
  options?: readonly unknown[];
  pipe?: readonly Part[];
}

/** A schema's checks in order, those of the pipes nested in it included. */
const partsOf = (part: Part): Part[] => (part.pipe ? [...partsOf(part.pipe[0]!), ...part.pipe.slice(1).flatMap(partsOf)] : [part]);

/** What env.boolean takes. */
const BOOLEAN_TEXTS = ['true', 'false', '1', '0'];

/** SettingInfo.type: what a value must be. A check with a message only (`v.check`) is left to the description. */
function valueOf(schema: v.GenericSchema): string {
  const parts = partsOf(schema as unknown as Part);
  const requirement = (type: string) => parts.find((part) => part.type === type)?.requirement;
  const [base] = parts;
  if (base?.type === 'picklist') {
    const options = (base.options ?? []).map(String);
    return options.length === BOOLEAN_TEXTS.length && BOOLEAN_TEXTS.every((text) => options.includes(text)) ? 'true or false' : `one of ${options.join(', ')}`;
  }
  const [min, max] = [requirement('min_value'), requirement('max_value')];
  const pattern = requirement('regex') as RegExp | undefined;
  // env.integer: digits, then a number.
  const digits = pattern?.source === '^\\d+$';
  if (digits || parts.some((part) => part.type === 'number')) {
    const range =
      min !== undefined && max !== undefined ? `, ${min} to ${max}` : min !== undefined ? `, at least ${min}` : max !== undefined ? `, at most ${max}` : '';
    return `${digits ? 'whole number' : 'number'}${range}`;
  }
  if (parts.some((part) => part.type === 'url')) return 'URL';
  const minLength = requirement('min_length') as number | undefined;
  return [
    pattern ? `text matching ${pattern.source}` : 'text',
    ...(minLength !== undefined && minLength > 1 ? [`at least ${minLength} characters`] : minLength === 1 ? ['not empty'] : []),
  ].join(', ');
}

/** The variables a settings schema reads, with defaults and descriptions, for `--print-config`. */
export function describeSettings(schema: v.GenericSchema, owner: string): SettingInfo[] {
  return Object.entries(settingsEntries(schema) ?? {}).map(([name, entry]) => {
    const inner = entry.type === 'optional' ? (entry as v.OptionalSchema<v.GenericSchema, unknown>).wrapped : entry;
    const fallback = entry.type === 'optional' ? v.getDefault(entry as v.OptionalSchema<v.GenericSchema, unknown>) : undefined;
    return {
      name,
      owner,
      type: valueOf(inner),
      default: fallback === undefined ? null : String(fallback),
      description: v.getDescription(inner) ?? '',
    };
  });
}
