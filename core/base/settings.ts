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

export const env = {
  integer: (name: string, min: number, max: number) =>
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, `${name} must be a whole number`),
      v.transform(Number),
      v.minValue(min, `${name} must be at least ${min}`),
      v.maxValue(max, `${name} must be at most ${max}`),
    ),
  boolean: (name: string) =>
    v.pipe(
      v.picklist(['true', 'false', '1', '0'], `${name} must be true or false`),
      v.transform((value) => value === 'true' || value === '1'),
    ),
  /** Comma-separated values, trimmed, empty ones dropped. */
  list: () => v.pipe(v.string(), v.transform(splitList)),
};

/** One setting: its schema, its default (as the text an environment variable would hold) and one line for the listing. */
export const setting = <S extends v.GenericSchema<string, unknown>, const D extends string | undefined = undefined>(
  schema: S,
  describe: string,
  fallback?: D,
) => v.optional(v.pipe(schema, v.description(describe)), fallback as D);

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
