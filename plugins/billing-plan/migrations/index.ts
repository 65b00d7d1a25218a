// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124182830_initial } from './Migration20261124182830_initial.ts';

export const migrations = [Migration20261124182830_initial];
