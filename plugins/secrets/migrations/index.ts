// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123220123_initial } from './Migration20261123220123_initial.ts';
import { Migration20261126011525_rename_table } from './Migration20261126011525_rename_table.ts';
import { Migration20261126154947_tenant_keys } from './Migration20261126154947_tenant_keys.ts';

export const migrations = [Migration20261123220123_initial, Migration20261126011525_rename_table, Migration20261126154947_tenant_keys];
