import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { BroadcastService } from './broadcast.service.ts';
import { pushSenderSettings } from './config.ts';
import { DEPS, type PushSenderDeps } from './deps.ts';
import { broadcast } from './jobs.ts';
import { sendBroadcast } from './operations.ts';

/** PushSenderRpc: broadcasts from a subscription's staff to its users' browsers (web push) and in-app notifications. */
export const pushSenderPlugin = definePlugin<PushSenderDeps>({
  id: 'push-sender',
  group: 'PushSenderRpc',
  coreVersion: '^2.0.0',
  config: pushSenderSettings,
  deps: DEPS,
  services: { broadcastService: asClass(BroadcastService).singleton() },
  jobs: { broadcast },
  operations: { sendBroadcast },
});
