// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124150630_initial } from './Migration20261124150630_initial.ts';
import { Migration20261124152640_instances } from './Migration20261124152640_instances.ts';

export const migrations = [Migration20261124150630_initial, Migration20261124152640_instances];
