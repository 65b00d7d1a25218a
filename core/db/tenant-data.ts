import * as v from 'valibot';
import { defineExtensionPoint } from '../base/extension-points.ts';

/**
 * What a plugin adds to a tenant's export (`rpc-service tenant export`)
 * beyond what moves without asking: every row of its entities' tables that
 * have a `subscription_id` column. A plugin names here the tables keyed by
 * another column (the subscription's own row, keyed by `id`), the folders
 * where it keeps each subscription's files under `<folder>/<subscriptionId>`,
 * the tables whose rows must not move (with why), and what an import must
 * not take on an archive's word.
 */
export interface TenantDataDeclaration {
  /** Tables whose tenant rows are found by another column than subscription_id. */
  tables?: { name: string; key: string }[];
  /** Folders holding a folder per subscription, named by its id. */
  folders?: string[];
  /** Tables with a subscription_id whose rows stay behind: their reason, e.g. "a login attempt counter". */
  skip?: { name: string; reason: string }[];
  /**
   * What an import takes from an archive only when the operator vouches for
   * it (`tenant import --trust-sign-ins`): whoever made the archive could
   * have written any row of their own tenant, so rows that vouch for someone
   * outside it (a sign-in provider's account linked to a user, an owner's
   * proof of an address) are left out, or their columns set to `reset`.
   */
  untrusted?: UntrustedData[];
}

export interface UntrustedData {
  /** For the import's summary, counted: "provider sign-in links". */
  what: string;
  table: string;
  /** Columns set to these values in every row; without it the table's rows are left out. */
  reset?: Record<string, string | number | boolean | null>;
  /** What leaving it out means to users, for the import's summary. */
  meaning: string;
}

declare module '../base/extension-points.ts' {
  interface ExtensionPoints {
    'core.tenantData': TenantDataDeclaration;
  }
}

const tableName = v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_]{0,62}$/, 'a table name is lower-case letters, digits and _'));

export const tenantDataPoint = defineExtensionPoint({
  id: 'core.tenantData',
  describe:
    "What moves with a tenant beyond its entities' rows with a subscription_id: tables keyed otherwise, per-subscription folders, tables left behind, " +
    'and what an import takes only from an archive the operator vouches for.',
  contribution: v.strictObject({
    tables: v.optional(v.array(v.strictObject({ name: tableName, key: tableName }))),
    folders: v.optional(
      v.array(
        v.pipe(
          v.string(),
          v.check((folder) => folder.startsWith('/'), 'a folder is an absolute path'),
        ),
      ),
    ),
    skip: v.optional(v.array(v.strictObject({ name: tableName, reason: v.pipe(v.string(), v.minLength(1)) }))),
    untrusted: v.optional(
      v.array(
        v.strictObject({
          what: v.pipe(v.string(), v.minLength(1)),
          table: tableName,
          reset: v.optional(
            v.pipe(
              v.record(tableName, v.union([v.string(), v.number(), v.boolean(), v.null()])),
              v.check((reset) => Object.keys(reset).length > 0, 'reset names a column at least'),
            ),
          ),
          meaning: v.pipe(v.string(), v.minLength(1)),
        }),
      ),
    ),
  }),
});
