// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123225141_initial } from './Migration20261123225141_initial.ts';
import { Migration20261126154912_tenant_keys } from './Migration20261126154912_tenant_keys.ts';

export const migrations = [Migration20261123225141_initial, Migration20261126154912_tenant_keys];
