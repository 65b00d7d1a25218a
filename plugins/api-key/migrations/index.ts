// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123171528_initial } from './Migration20261123171528_initial.ts';
import { Migration20261126051946_scopes_and_limits } from './Migration20261126051946_scopes_and_limits.ts';
import { Migration20261126154917_tenant_keys } from './Migration20261126154917_tenant_keys.ts';

export const migrations = [Migration20261123171528_initial, Migration20261126051946_scopes_and_limits, Migration20261126154917_tenant_keys];
