import type { Role } from '../../config/roles.ts';
import { hashPassword } from '../../core/auth/crypto.ts';
import { newUser, UserSchema } from '../../core/auth/entities.ts';
import { uniqueName, type TestApp } from './harness.ts';

/**
 * Adds a user with the given role to an existing subscription, straight in the
 * database (user administration arrives with AdminUserRpc), and logs them in.
 */
export async function addUser(t: TestApp, subscriptionId: string, role: Role, password = 'another long password') {
  const name = uniqueName(role);
  const em = t.app.deps.db.forkEm(subscriptionId);
  em.create(
    UserSchema,
    newUser({ subscriptionId, email: `${name}@example.com`, username: name, passwordHash: await hashPassword(password), role }),
  );
  await em.flush();
  const session = await t.ok('AuthRpc.login', { identifier: name, password });
  return { ...session, username: name, password };
}
