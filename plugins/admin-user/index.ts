import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { AdminUserService } from './admin-user.service.ts';
import { DEPS, type AdminUserDeps } from './deps.ts';
import * as operations from './operations.ts';

const { remove, ...rest } = operations;

/** AdminUserRpc: user administration inside the caller's subscription (admins only); the records are the auth plugin's. */
export const adminUserPlugin = definePlugin<AdminUserDeps>({
  id: 'admin-user',
  group: 'AdminUserRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  services: { adminUserService: asClass(AdminUserService).singleton() },
  operations: { ...rest, delete: remove },
});
