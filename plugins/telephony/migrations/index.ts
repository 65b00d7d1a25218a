// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124183913_initial } from './Migration20261124183913_initial.ts';

export const migrations = [Migration20261124183913_initial];
