// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124164049_initial } from './Migration20261124164049_initial.ts';
import { Migration20261125221706_endpoint_per_subscription } from './Migration20261125221706_endpoint_per_subscription.ts';

export const migrations = [Migration20261124164049_initial, Migration20261125221706_endpoint_per_subscription];
