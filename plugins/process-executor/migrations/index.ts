// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124160443_initial } from './Migration20261124160443_initial.ts';
import { Migration20261126154939_tenant_keys } from './Migration20261126154939_tenant_keys.ts';
import { Migration20261128231158_leases } from './Migration20261128231158_leases.ts';

export const migrations = [Migration20261124160443_initial, Migration20261126154939_tenant_keys, Migration20261128231158_leases];
