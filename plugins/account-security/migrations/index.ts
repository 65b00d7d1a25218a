// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261207215735_initial } from './Migration20261207215735_initial.ts';

export const migrations = [Migration20261207215735_initial];
