// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261126011446_trace_from_core } from './Migration20261126011446_trace_from_core.ts';
import { Migration20261126100232_trace_cost } from './Migration20261126100232_trace_cost.ts';

export const migrations = [Migration20261126011446_trace_from_core, Migration20261126100232_trace_cost];
