import * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const checkpointSettings = settings({
  CHECKPOINT_DIR: setting(
    v.string(),
    'where earlier releases kept the git repositories of data scopes (DATA_DIR/checkpoints when empty); each moves into the database on its first use',
    '',
  ),
  CHECKPOINT_MAX_FILE_BYTES: setting(env.integer(1, 50 * 1024 * 1024), 'the largest file writeFile takes, in bytes', String(512 * 1024)),
  CHECKPOINT_MAX_FILES: setting(env.integer(1, 1_000_000), 'files a scope may hold', '10000'),
  CHECKPOINT_MAX_SCOPES: setting(env.integer(1, 100_000), 'file scopes a subscription may have (besides the scopes of records)', '100'),
});

export type CheckpointConfig = v.InferOutput<typeof checkpointSettings>;
