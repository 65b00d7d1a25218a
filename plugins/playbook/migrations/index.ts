// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124160225_initial } from './Migration20261124160225_initial.ts';
import { Migration20261126011349_rename_table } from './Migration20261126011349_rename_table.ts';
import { Migration20261126154937_tenant_keys } from './Migration20261126154937_tenant_keys.ts';

export const migrations = [Migration20261124160225_initial, Migration20261126011349_rename_table, Migration20261126154937_tenant_keys];
