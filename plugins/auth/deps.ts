import { operationBuilder, type Deps } from 'rpc-service/plugin';
import type { AuthService } from './auth.service.ts';
import type { AuthConfig } from './config.ts';
import type { InviteCodeService } from './invite-code.service.ts';
import type { JoinService } from './join.service.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { MessageSender } from './message-sender.ts';
import type { OAuthService } from './oauth.service.ts';
import type { SessionService } from './session.service.ts';
import type { SignInService } from './sign-in.service.ts';
import type { UserService } from './user.service.ts';
import type { VerificationService } from './verification.service.ts';

/** The core services the auth plugin uses; it receives exactly these. */
export const DEPS = ['db', 'credentials', 'secretBox', 'rateLimiter', 'uploadService', 'http'] as const;

export type AuthDeps = Deps<
  typeof DEPS,
  {
    authService: AuthService;
    userService: UserService;
    sessionService: SessionService;
    signInService: SignInService;
    verificationService: VerificationService;
    inviteCodeService: InviteCodeService;
    oauthService: OAuthService;
    joinService: JoinService;
    lifecycle: Lifecycle;
    messageSender: MessageSender;
  },
  AuthConfig
>;

export const defineOperation = operationBuilder<AuthDeps>();
