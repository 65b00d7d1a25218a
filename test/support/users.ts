import { randomUUID } from 'node:crypto';
import type { Role } from '../../config/roles.ts';
import { hashPassword } from '../../core/auth/crypto.ts';
import { UserSchema } from '../../core/auth/entities.ts';
import { uniqueName, type TestApp } from './harness.ts';

/**
 * Adds a user with the given role to an existing subscription, straight in the
 * database (user administration arrives with AdminUserRpc), and logs them in.
 */
export async function addUser(t: TestApp, subscriptionId: string, role: Role, password = 'another long password') {
  const name = uniqueName(role);
  const em = t.app.deps.db.forkEm(subscriptionId);
  em.create(UserSchema, {
    id: randomUUID(),
    subscriptionId,
    email: `${name}@example.com`,
    username: name,
    passwordHash: await hashPassword(password),
    firstName: null,
    lastName: null,
    role,
    isActive: true,
    isVerified: false,
    isPhoneVerified: false,
    phoneNumber: null,
    onboardingCompleted: false,
    oauthProfiles: [],
    partnerContactId: null,
    profilePicture: null,
    jobTitle: null,
    department: null,
    serviceCode: null,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  await em.flush();
  const session = await t.ok('AuthRpc.login', { identifier: name, password });
  return { ...session, username: name, password };
}
