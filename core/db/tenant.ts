import type { AnyEntitySchema } from './any-entity.ts';

/**
 * The filter that keeps every query inside the caller's subscription. The core
 * applies it to every entity with a `subscriptionId` property, so a plugin
 * cannot forget it; a query without the filter's argument fails instead of
 * reading every tenant's rows.
 */
export const TENANT_FILTER = 'tenant';

export function tenantEntityNames(entities: readonly AnyEntitySchema[]): string[] {
  return entities.filter((schema) => 'subscriptionId' in schema.meta.properties).map((schema) => schema.meta.className);
}

/** Options for the rare query that must cross tenants (login by e-mail, token lookups). */
export const ACROSS_TENANTS = { filters: { [TENANT_FILTER]: false } } as const;
