import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { TelephonyAssignment } from './assignment.entity.ts';
import { telephonySettings } from './config.ts';
import { DEPS, type TelephonyDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import {
  assignAgentExtension,
  assignUserExtension,
  disassociateAgentExtension,
  disassociateUserExtension,
  getAvailableExtensions,
  getExtensionsForAgent,
  getExtensionsForUser,
} from './operations.ts';
import { TelephonyService } from './telephony.service.ts';

/** TelephonyManagerRpc: extensions of users and agents, from the local pool or an external telephony platform. */
export const telephonyPlugin = definePlugin<TelephonyDeps>({
  id: 'telephony',
  group: 'TelephonyManagerRpc',
  coreVersion: '^2.0.0',
  config: telephonySettings,
  deps: DEPS,
  entities: [TelephonyAssignment],
  migrations,
  services: { telephonyService: asClass(TelephonyService).singleton() },
  extends: {
    // A removed user's extensions go back to the pool in the same transaction (the platform keeps its own for the http provider).
    'auth.lifecycle': [{ userRemoved: async ({ em, userId }) => void (await em.nativeDelete(TelephonyAssignment, { userId })) }],
  },
  operations: {
    getAvailableExtensions,
    assignAgentExtension,
    assignUserExtension,
    disassociateUserExtension,
    disassociateAgentExtension,
    getExtensionsForUser,
    getExtensionsForAgent,
  },
});
