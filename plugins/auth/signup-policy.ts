import { validationError } from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';

/**
 * The operator's signup rules: blocked e-mail domains (a domain blocks its
 * subdomains too), blocked e-mail patterns, reserved usernames.
 */
export function checkSignupRules(config: AuthConfig, { email, username }: { email: string; username: string }): void {
  const issues = [];
  const domain = email.slice(email.lastIndexOf('@') + 1);
  const blockedDomain = config.signupBlockedEmailDomains.some((blocked) => domain === blocked || domain.endsWith(`.${blocked}`));
  if (blockedDomain || config.signupBlockedEmailPatterns.some((pattern) => pattern.test(email))) {
    issues.push({ path: 'email', message: 'This e-mail address cannot be used to sign up' });
  }
  if (config.signupReservedUsernames.includes(username.toLowerCase())) {
    issues.push({ path: 'username', message: 'This username is reserved' });
  }
  if (issues.length > 0) throw validationError(issues);
}
