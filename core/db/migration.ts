/**
 * A versioned schema change. Migrations run forward only, in order: the core's
 * first, then each plugin's in dependency order. `name` must stay the same
 * once released; it is what the migrations table remembers.
 */
export interface MigrationDef {
  name: string;
  /** SQL statements run in one transaction. */
  up: readonly string[];
}

export const defineMigration = (name: string, up: readonly string[]): MigrationDef => ({ name, up });
