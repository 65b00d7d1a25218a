import type { EntitySchema } from '@mikro-orm/core';

/**
 * Any entity made with defineEntity. EntitySchema is invariant in its entity
 * type (it both takes and gives it), so a list of different entities can only
 * be typed with `any` there.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
export type AnyEntitySchema = EntitySchema<any, any>;
