// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261126130855_repositories } from './Migration20261126130855_repositories.ts';

export const migrations = [Migration20261126130855_repositories];
