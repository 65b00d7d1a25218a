// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261123230425_initial } from './Migration20261123230425_initial.ts';

export const migrations = [Migration20261123230425_initial];
