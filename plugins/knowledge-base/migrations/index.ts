// Written by `npm run migration:create`: the migrations of this folder, oldest first.
import { Migration20261124014426_initial } from './Migration20261124014426_initial.ts';
import { Migration20261124144212_shared_embedding_state } from './Migration20261124144212_shared_embedding_state.ts';

export const migrations = [Migration20261124014426_initial, Migration20261124144212_shared_embedding_state];
