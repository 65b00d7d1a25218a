// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123171525_initial } from './Migration20261123171525_initial.ts';
import { Migration20261125230608_oauth_link } from './Migration20261125230608_oauth_link.ts';
import { Migration20261126014417_outbox_from_core } from './Migration20261126014417_outbox_from_core.ts';
import { Migration20261126154922_tenant_keys } from './Migration20261126154922_tenant_keys.ts';
import { Migration20261128231630_owner_proof } from './Migration20261128231630_owner_proof.ts';
import { Migration20261129000059_code_join } from './Migration20261129000059_code_join.ts';
import { Migration20261207211515_session_devices } from './Migration20261207211515_session_devices.ts';

export const migrations = [
  Migration20261123171525_initial,
  Migration20261125230608_oauth_link,
  Migration20261126014417_outbox_from_core,
  Migration20261126154922_tenant_keys,
  Migration20261128231630_owner_proof,
  Migration20261129000059_code_join,
  Migration20261207211515_session_devices,
];
