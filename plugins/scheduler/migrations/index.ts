// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124151532_initial } from './Migration20261124151532_initial.ts';
import { Migration20261124154611_runs } from './Migration20261124154611_runs.ts';
import { Migration20261126154944_tenant_keys } from './Migration20261126154944_tenant_keys.ts';
import { Migration20261128231208_authors } from './Migration20261128231208_authors.ts';

export const migrations = [Migration20261124151532_initial, Migration20261124154611_runs, Migration20261126154944_tenant_keys, Migration20261128231208_authors];
