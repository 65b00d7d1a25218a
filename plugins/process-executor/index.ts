import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { processSettings } from './config.ts';
import { DEPS, type ProcessDeps } from './deps.ts';
import { recover } from './jobs.ts';
import { migrations } from './migrations/index.ts';
import { getProcessLogs, getProcessStatus, sendProcessInput, startProcess, stopProcess } from './operations.ts';
import { ProcessExecutor } from './process-executor.ts';
import { ProcessInstance } from './instance.entity.ts';

/** ProcessExecutorRpc: commands the operator allows, started by admins, with their output, input and end. */
export const processExecutorPlugin = definePlugin<ProcessDeps>({
  id: 'process-executor',
  group: 'ProcessExecutorRpc',
  coreVersion: '^2.0.0',
  config: processSettings,
  deps: DEPS,
  entities: [ProcessInstance],
  migrations,
  services: { processExecutor: asClass(ProcessExecutor).singleton() },
  operations: { startProcess, stopProcess, getProcessStatus, getProcessLogs, sendProcessInput },
  jobs: { recover },
  start: async ({ processExecutor, jobs }) => {
    processExecutor.start();
    await jobs.enqueue('recover', {}, { key: 'start' });
  },
  stop: ({ processExecutor }) => processExecutor.stopAll(),
});
