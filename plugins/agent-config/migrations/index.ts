// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123225141_initial } from './Migration20261123225141_initial.ts';

export const migrations = [Migration20261123225141_initial];
