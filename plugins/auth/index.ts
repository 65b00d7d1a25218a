import { asClass } from 'awilix';
import { definePlugin } from '../../core/plugin/define.ts';
import { AuthService } from './auth.service.ts';
import { InviteCodeSchema } from './invite-code.entity.ts';
import { InviteCodeService } from './invite-codes.service.ts';
import { authMigrations } from './migrations.ts';
import { oauthRoutes } from './oauth.routes.ts';
import { OAuthService } from './oauth.service.ts';
import { OtpRequestSchema } from './otp-request.entity.ts';
import { VerificationService } from './verification.service.ts';
import * as operations from './operations.ts';

declare module '../../core/container.ts' {
  interface Cradle {
    authService: AuthService;
    inviteCodeService: InviteCodeService;
    verificationService: VerificationService;
    oauthService: OAuthService;
  }
}

export const authPlugin = definePlugin({
  id: 'auth',
  group: 'AuthRpc',
  coreVersion: '^1.0.0',
  entities: [InviteCodeSchema, OtpRequestSchema],
  migrations: authMigrations,
  services: {
    authService: asClass(AuthService).singleton(),
    inviteCodeService: asClass(InviteCodeService).singleton(),
    verificationService: asClass(VerificationService).singleton(),
    oauthService: asClass(OAuthService).singleton(),
  },
  operations,
  routes: oauthRoutes,
});
