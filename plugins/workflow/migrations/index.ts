// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124150630_initial } from './Migration20261124150630_initial.ts';
import { Migration20261124152640_instances } from './Migration20261124152640_instances.ts';
import { Migration20261125222816_run_attempts } from './Migration20261125222816_run_attempts.ts';
import { Migration20261126154956_tenant_keys } from './Migration20261126154956_tenant_keys.ts';
import { Migration20261128231802_authors } from './Migration20261128231802_authors.ts';

export const migrations = [
  Migration20261124150630_initial,
  Migration20261124152640_instances,
  Migration20261125222816_run_attempts,
  Migration20261126154956_tenant_keys,
  Migration20261128231802_authors,
];
