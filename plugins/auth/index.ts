import { asClass } from 'awilix';
import { definePlugin } from '../../core/plugin/define.ts';
import { AuthService } from './auth.service.ts';
import * as operations from './operations.ts';

declare module '../../core/container.ts' {
  interface Cradle {
    authService: AuthService;
  }
}

export const authPlugin = definePlugin({
  id: 'auth',
  group: 'AuthRpc',
  coreVersion: '^1.0.0',
  services: { authService: asClass(AuthService).singleton() },
  operations,
});
