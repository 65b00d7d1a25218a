// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124005640_initial } from './Migration20261124005640_initial.ts';
import { Migration20261126154930_tenant_keys } from './Migration20261126154930_tenant_keys.ts';

export const migrations = [Migration20261124005640_initial, Migration20261126154930_tenant_keys];
