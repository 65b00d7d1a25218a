import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { AuthService } from './auth.service.ts';
import { authSettings } from './config.ts';
import { DEPS, type AuthDeps } from './deps.ts';
import { ExternalLogin } from './external-login.entity.ts';
import { InviteCode } from './invite-code.entity.ts';
import { InviteCodeService } from './invite-code.service.ts';
import { JoinService } from './join.service.ts';
import { Lifecycle, lifecyclePoint, type LifecycleHooks } from './lifecycle.ts';
import { MessageSender } from './message-sender.ts';
import { migrations } from './migrations/index.ts';
import { OAuthLink } from './oauth-link.entity.ts';
import { OAuthState } from './oauth-state.entity.ts';
import { oauthRoutes } from './oauth.routes.ts';
import { OAuthService } from './oauth.service.ts';
import * as operations from './operations.ts';
import { OtpRequest } from './otp-request.entity.ts';
import { OutboxMessage } from './outbox.entity.ts';
import { PendingLink } from './pending-link.entity.ts';
import { Session } from './session.entity.ts';
import { SessionService } from './session.service.ts';
import { SignInService, signInPoint, type SignInGate } from './sign-in.service.ts';
import { Subscription } from './subscription.entity.ts';
import { User } from './user.entity.ts';
import { UserService } from './user.service.ts';
import { VerificationService } from './verification.service.ts';

declare module 'rpc-service/plugin' {
  interface PluginServices {
    userService: UserService;
    sessionService: SessionService;
    signInService: SignInService;
    verificationService: VerificationService;
    inviteCodeService: InviteCodeService;
  }
  interface ExtensionPoints {
    'auth.lifecycle': LifecycleHooks;
    'auth.signIn': SignInGate;
  }
  interface PluginErrorCodes {
    /** A code login proved an address whose account someone else may have made: the person answers at /auth/join first. */
    CONFIRM_JOIN: 409;
  }
}

/**
 * AuthRpc: signup, login, sessions, one-time codes, invite codes and OAuth.
 * Owns subscriptions and users, and exports the services other plugins use
 * for them; verifies session tokens for the core.
 */
export const authPlugin = definePlugin<AuthDeps>({
  id: 'auth',
  group: 'AuthRpc',
  coreVersion: '^2.0.0',
  config: authSettings,
  deps: DEPS,
  entities: [Subscription, User, OAuthLink, Session, InviteCode, OtpRequest, OAuthState, ExternalLogin, OutboxMessage, PendingLink],
  migrations,
  errors: { CONFIRM_JOIN: 409 },
  services: {
    authService: asClass(AuthService).singleton(),
    userService: asClass(UserService).singleton(),
    sessionService: asClass(SessionService).singleton(),
    signInService: asClass(SignInService).singleton(),
    verificationService: asClass(VerificationService).singleton(),
    inviteCodeService: asClass(InviteCodeService).singleton(),
    oauthService: asClass(OAuthService).singleton(),
    joinService: asClass(JoinService).singleton(),
    lifecycle: asClass(Lifecycle).singleton(),
    messageSender: asClass(MessageSender).singleton(),
  },
  exports: ['userService', 'sessionService', 'signInService', 'verificationService', 'inviteCodeService'],
  extensionPoints: [lifecyclePoint, signInPoint],
  extends: {
    'core.credentials': (deps) => [{ scheme: 'session', verifier: deps.sessionService }],
    // The subscription's own row is keyed by its id; its users, sessions and links move by their subscription_id.
    // A link or an owner's proof signs a provider account or an address into a user unasked (oauth.service.ts):
    // from an archive, whose maker could write any, they come only when the operator vouches for it.
    'core.tenantData': [
      {
        tables: [{ name: 'auth_subscription', key: 'id' }],
        untrusted: [
          {
            what: 'provider sign-in links',
            table: 'auth_oauth_link',
            meaning: 'their users sign in with their password, or are asked before joining, until they sign in with the provider again',
          },
          {
            what: "owners' proofs of their address",
            table: 'auth_user',
            reset: { email_proven: null, email_proven_by: null },
            meaning: 'a provider sign-in or a one-time code with such an address asks before joining its account, until its owner proves the address again',
          },
        ],
      },
    ],
  },
  operations,
  routes: oauthRoutes,
});
