// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123220921_initial } from './Migration20261123220921_initial.ts';
import { Migration20261126013122_webhook_from_api_key } from './Migration20261126013122_webhook_from_api_key.ts';
import { Migration20261126154920_tenant_keys } from './Migration20261126154920_tenant_keys.ts';

export const migrations = [Migration20261123220921_initial, Migration20261126013122_webhook_from_api_key, Migration20261126154920_tenant_keys];
