// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123220409_initial } from './Migration20261123220409_initial.ts';
import { Migration20261126154949_tenant_keys } from './Migration20261126154949_tenant_keys.ts';

export const migrations = [Migration20261123220409_initial, Migration20261126154949_tenant_keys];
