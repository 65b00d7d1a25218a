import { asClass } from 'awilix';
import { definePlugin } from '../../core/plugin/define.ts';
import { AuthService } from './auth.service.ts';
import { InviteCodeSchema } from './invite-code.entity.ts';
import { InviteCodeService } from './invite-codes.service.ts';
import { authMigrations } from './migrations.ts';
import * as operations from './operations.ts';

declare module '../../core/container.ts' {
  interface Cradle {
    authService: AuthService;
    inviteCodeService: InviteCodeService;
  }
}

export const authPlugin = definePlugin({
  id: 'auth',
  group: 'AuthRpc',
  coreVersion: '^1.0.0',
  entities: [InviteCodeSchema],
  migrations: authMigrations,
  services: { authService: asClass(AuthService).singleton(), inviteCodeService: asClass(InviteCodeService).singleton() },
  operations,
});
