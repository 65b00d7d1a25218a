// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261126011501_from_core } from './Migration20261126011501_from_core.ts';
import { Migration20261126154935_tenant_keys } from './Migration20261126154935_tenant_keys.ts';

export const migrations = [Migration20261126011501_from_core, Migration20261126154935_tenant_keys];
