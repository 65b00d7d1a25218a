import * as v from 'valibot';
import { defineExtensionPoint, type AuthenticatedContext } from 'rpc-service/plugin';

/** A lead as generateDynamicLeads answers it. */
export const LEAD = v.strictObject({ name: v.string(), email: v.nullable(v.string()), company: v.nullable(v.string()) });
export type Lead = v.InferOutput<typeof LEAD>;

/**
 * A lead-generating tool (`generateDynamicLeads` by its `toolClassName`):
 * turns the caller's `properties` into leads. Plugins add theirs at
 * `workflow.leadSources` (a CRM search, an enrichment service).
 */
export interface LeadSourceContribution {
  /** The toolClassName callers name it by: `CsvLeadImporter`. */
  name: string;
  describe: string;
  /** A valibot schema of `properties`. */
  properties: v.GenericSchema;
  generate(ctx: AuthenticatedContext, properties: unknown): Promise<Lead[]>;
}

declare module 'rpc-service/plugin' {
  interface ExtensionPoints {
    'workflow.leadSources': LeadSourceContribution;
  }
}

export const leadSourcesPoint = defineExtensionPoint({
  id: 'workflow.leadSources',
  describe: 'Lead-generating tools for WorkflowRpc.generateDynamicLeads: {name, describe, properties (a valibot schema), generate(ctx, properties)}.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[A-Z][A-Za-z0-9]{1,63}$/, 'a lead source is named like a class: "CrmLeadSearch"')),
    describe: v.pipe(v.string(), v.minLength(1)),
    properties: v.custom<v.GenericSchema>(
      (value) => typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'schema',
      'properties must be a valibot schema',
    ),
    generate: v.function(),
  }),
});

/** Leads one call returns at most. */
export const MAX_LEADS = 10_000;
const MAX_TEXT = 1_000_000;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Column names (lower case, without spaces, dashes and underscores) that hold each field. */
const COLUMNS = {
  name: ['name', 'fullname', 'contact', 'contactname'],
  firstName: ['firstname', 'givenname', 'first'],
  lastName: ['lastname', 'surname', 'familyname', 'last'],
  email: ['email', 'emailaddress', 'mail'],
  company: ['company', 'companyname', 'organization', 'organisation', 'org', 'account', 'employer'],
} as const;

const text = (value: unknown): string => (typeof value === 'string' || typeof value === 'number' ? String(value).trim() : '');

/**
 * Leads from records of any shape: the name (or first and last name), the
 * e-mail (kept only when it looks like one) and the company, found by their
 * usual column names. Records with neither a name nor an e-mail are left
 * out, and so is a second record with an e-mail already seen.
 */
export function leadsOf(records: Record<string, unknown>[]): Lead[] {
  const leads: Lead[] = [];
  const seen = new Set<string>();
  for (const record of records) {
    const fields = new Map(Object.entries(record).map(([key, value]) => [key.toLowerCase().replace(/[\s_-]/g, ''), text(value)]));
    const pick = (names: readonly string[]) => names.map((key) => fields.get(key)).find((value) => value) ?? '';
    const email = pick(COLUMNS.email).toLowerCase();
    const name = pick(COLUMNS.name) || [pick(COLUMNS.firstName), pick(COLUMNS.lastName)].filter(Boolean).join(' ');
    const validEmail = EMAIL.test(email) ? email : null;
    if (!name && !validEmail) continue;
    if (validEmail) {
      if (seen.has(validEmail)) continue;
      seen.add(validEmail);
    }
    leads.push({ name: name || validEmail!.split('@')[0]!, email: validEmail, company: pick(COLUMNS.company) || null });
    if (leads.length === MAX_LEADS) break;
  }
  return leads;
}

const source = (label: string) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.minLength(1, `${label} must not be empty`),
    v.maxLength(MAX_TEXT, `${label} must be at most ${MAX_TEXT} characters`),
  );

/** The built-in lead sources: leads read from CSV or JSON text the caller supplies. */
export const builtInLeadSources: LeadSourceContribution[] = [
  {
    name: 'CsvLeadImporter',
    describe: 'Leads from CSV text with a header row (name or first and last name, email, company; other columns are ignored).',
    properties: v.object({ csv: source('csv'), delimiter: v.optional(v.picklist([',', ';', '\t', '|'], 'delimiter must be one of , ; tab |'), ',') }),
    async generate(_ctx, properties) {
      const { csv, delimiter } = properties as { csv: string; delimiter: string };
      let records: Record<string, unknown>[];
      // Imported at the first import of leads, not at start-up.
      const { parse } = await import('csv-parse/sync');
      try {
        records = parse(csv, { columns: true, delimiter, skip_empty_lines: true, trim: true, bom: true, relax_column_count: true, to: MAX_LEADS * 2 });
      } catch (error) {
        throw new LeadSourceError(`The CSV cannot be read: ${(error as Error).message}`);
      }
      return leadsOf(records);
    },
  },
  {
    name: 'JsonLeadImporter',
    describe: 'Leads from a JSON array of objects (as text in json, or as leads), with the same fields as CSV columns.',
    properties: v.pipe(
      v.object({
        json: v.optional(source('json')),
        leads: v.optional(v.pipe(v.array(v.record(v.string(), v.unknown()), 'leads must be an array of objects'), v.maxLength(MAX_LEADS))),
      }),
      v.check((properties) => (properties.json === undefined) !== (properties.leads === undefined), 'give either json or leads'),
    ),
    async generate(_ctx, properties) {
      const { json, leads } = properties as { json?: string; leads?: Record<string, unknown>[] };
      let records: unknown = leads;
      if (json !== undefined) {
        try {
          records = JSON.parse(json);
        } catch (error) {
          throw new LeadSourceError(`The JSON cannot be read: ${(error as Error).message}`);
        }
      }
      if (!Array.isArray(records) || records.some((record) => typeof record !== 'object' || record === null || Array.isArray(record))) {
        throw new LeadSourceError('The JSON must be an array of objects');
      }
      return leadsOf(records as Record<string, unknown>[]);
    },
  },
];

/** Properties a lead source cannot read: a VALIDATION_ERROR on `properties`. */
export class LeadSourceError extends Error {}
