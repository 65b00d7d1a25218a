// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261126011446_trace_from_core } from './Migration20261126011446_trace_from_core.ts';
import { Migration20261126100232_trace_cost } from './Migration20261126100232_trace_cost.ts';
import { Migration20261126154914_tenant_keys } from './Migration20261126154914_tenant_keys.ts';

export const migrations = [Migration20261126011446_trace_from_core, Migration20261126100232_trace_cost, Migration20261126154914_tenant_keys];
