import { asClass } from 'awilix';
import { definePlugin } from '../../core/plugin/define.ts';
import { AdminUserService } from './admin-user.service.ts';
import * as operations from './operations.ts';

declare module '../../core/container.ts' {
  interface Cradle {
    adminUserService: AdminUserService;
  }
}

const { remove, ...rest } = operations;

/** AdminUserRpc: user administration inside the caller's subscription (admins only). */
export const adminUserPlugin = definePlugin({
  id: 'admin-user',
  group: 'AdminUserRpc',
  coreVersion: '^1.0.0',
  // Invite codes belong to the auth plugin, which redeems them at signup.
  dependsOn: ['auth'],
  services: { adminUserService: asClass(AdminUserService).singleton() },
  operations: { ...rest, delete: remove },
});
