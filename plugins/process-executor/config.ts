import * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const processSettings = settings({
  PROCESS_ALLOWED_COMMANDS: setting(
    env.list(),
    'commands startProcess may run (absolute paths, comma-separated; no shell); empty: startProcess answers FEATURE_UNAVAILABLE',
    '',
  ),
  PROCESS_WORK_DIR: setting(v.string(), 'where each process gets its working folder (the system temporary folder when empty)', ''),
  PROCESS_LOG_LINES: setting(env.integer(10, 100_000), 'lines of output kept per process (the latest)', '1000'),
  PROCESS_STOP_GRACE_MS: setting(env.integer(100, 600_000), 'how long stopProcess waits after SIGTERM before SIGKILL, in milliseconds', '5000'),
  PROCESS_LEASE_MS: setting(
    env.integer(1000, 3_600_000),
    "how long a process's record stays running without word from its node (renewed every third of it); past it, the recovery job ends the record and kills what is left of the process",
    '30000',
  ),
  PROCESS_MAX_RUNNING: setting(env.integer(1, 1000), 'processes a subscription may have running at once', '10'),
});

export type ProcessConfig = v.InferOutput<typeof processSettings>;
