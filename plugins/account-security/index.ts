import { asClass } from 'awilix';
import * as v from 'valibot';
import { definePlugin, type EntityManager } from 'rpc-service/plugin';
import { AccountSecurityService, FACTOR_CHANGED, POLICY_CHANGED } from './account-security.service.ts';
import { Authenticator } from './authenticator.entity.ts';
import { PasskeyChallenge } from './challenge.entity.ts';
import { accountSecuritySettings } from './config.ts';
import { DEPS, type AccountSecurityDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import * as operations from './operations.ts';
import { Passkey } from './passkey.entity.ts';
import { REQUIRED_FOR } from './policies.ts';
import { FactorPolicy } from './policy.entity.ts';
import { RecoveryCode } from './recovery-code.entity.ts';
import { SignInTicket } from './ticket.entity.ts';

declare module 'rpc-service/plugin' {
  interface PluginErrorCodes {
    /** A sign-in of a person with a second factor: `details.ticket` goes on to verifySecondFactor or a passkey. */
    SECOND_FACTOR_REQUIRED: 401;
    /** A sign-in the subscription's policy stops until its person enrols a factor, with `details.ticket`. */
    ENROLMENT_REQUIRED: 401;
  }
}

const { sweep, ...rpc } = operations;

/**
 * AccountSecurityRpc: passkeys, authenticator apps and recovery codes; the
 * second step of a sign-in (a gate of `auth.signIn`); step-ups; the
 * subscription's policy on second factors; and the sessions a person (or
 * their admin) sees and signs out.
 */
export const accountSecurityPlugin = definePlugin<AccountSecurityDeps>({
  id: 'account-security',
  group: 'AccountSecurityRpc',
  // The second step of a sign-in is called before there is a session.
  signIn: true,
  coreVersion: '^2.0.0',
  deps: DEPS,
  config: accountSecuritySettings,
  entities: [Passkey, Authenticator, RecoveryCode, SignInTicket, PasskeyChallenge, FactorPolicy],
  migrations,
  errors: { SECOND_FACTOR_REQUIRED: 401, ENROLMENT_REQUIRED: 401 },
  services: { accountSecurityService: asClass(AccountSecurityService).singleton() },
  extends: {
    'auth.signIn': (deps) => [{ check: (attempt) => deps.accountSecurityService.check(attempt) }],
    // A removed user's factors go with them. An account with a factor cannot be claimed by its address alone; one without loses what
    // someone else may have begun. Sign-ins waiting for their second step end with the user's sessions.
    'auth.lifecycle': (deps) => {
      const service = deps.accountSecurityService;
      type Event = { em: EntityManager; subscriptionId: string; userId: string };
      return [
        {
          userRemoved: ({ em, subscriptionId, userId }: Event) => service.removeAllOf(em, subscriptionId, userId),
          accountClaimed: ({ em, subscriptionId, userId }: Event) => service.claimed(em, subscriptionId, userId),
          sessionsEnded: (event: { subscriptionId: string; userId: string }) => service.sessionsEnded(event),
        },
      ];
    },
    'core.events': [
      {
        name: FACTOR_CHANGED,
        describe:
          'A factor of the user was added, removed or used (a recovery code): {action, factor (passkey, authenticator, recovery-codes, all), userId, id}. Heard by that user only.',
        payload: v.strictObject({
          action: v.picklist(['added', 'removed', 'used']),
          factor: v.picklist(['passkey', 'authenticator', 'recovery-codes', 'all']),
          userId: v.string(),
          id: v.nullable(v.string()),
        }),
      },
      {
        name: POLICY_CHANGED,
        describe: "The subscription's policy on second factors changed: {requiredFor, graceDays, coveredSince, updatedAt, updatedBy}.",
        payload: v.strictObject({
          requiredFor: v.picklist(REQUIRED_FOR),
          graceDays: v.number(),
          coveredSince: v.record(v.string(), v.string()),
          updatedAt: v.nullable(v.string()),
          updatedBy: v.nullable(v.string()),
        }),
      },
    ],
    'core.tenantData': [
      {
        skip: [
          { name: 'account_security_ticket', reason: 'a sign-in waiting a few minutes for its second factor' },
          { name: 'account_security_challenge', reason: 'a passkey challenge, answered within minutes on the installation that asked it' },
        ],
        // A factor signs its holder in as the user: from an archive, whose maker could have written any, none is taken unless the operator vouches for it.
        untrusted: [
          {
            what: 'passkeys',
            table: 'account_security_passkey',
            meaning: 'their users sign in with a password or code and a second factor they enrol again (the policy asks them to)',
          },
          { what: 'authenticator apps', table: 'account_security_authenticator', meaning: 'their users enrol their authenticator app again' },
          { what: 'recovery codes', table: 'account_security_recovery_code', meaning: 'their users get new recovery codes when they enrol a factor again' },
        ],
      },
    ],
  },
  operations: rpc,
  jobs: { sweep },
});
