// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124164049_initial } from './Migration20261124164049_initial.ts';
import { Migration20261125221706_endpoint_per_subscription } from './Migration20261125221706_endpoint_per_subscription.ts';
import { Migration20261126154942_tenant_keys } from './Migration20261126154942_tenant_keys.ts';

export const migrations = [Migration20261124164049_initial, Migration20261125221706_endpoint_per_subscription, Migration20261126154942_tenant_keys];
