import type { Role } from 'rpc-service/plugin';
import { uniqueName, type TestApp } from './harness.ts';

/**
 * Adds a user with the given role to an existing subscription through the
 * auth plugin's user service (so it works when AdminUserRpc is not started),
 * and logs them in.
 */
export async function addUser(t: TestApp, subscriptionId: string, role: Role, password = 'another long password') {
  const name = uniqueName(role);
  const { userService } = t.app.depsOf('auth');
  const em = t.app.deps.db.forkEm(subscriptionId);
  await userService.create({ em, subscriptionId } as never, { email: `${name}@example.com`, username: name, password, role });
  const session = await t.as(null).AuthRpc.login({ identifier: name, password });
  return { ...session, username: name, password };
}

/** A subscription's admin (by signup), a staff member and a member of it, and the admin of another subscription. */
export async function signupTeam(t: TestApp) {
  const admin = await t.signup();
  const staff = await addUser(t, admin.subscriptionId, 'staff');
  const member = await addUser(t, admin.subscriptionId, 'user');
  const stranger = await t.signup();
  return { admin, staff, member, stranger };
}
export type Team = Awaited<ReturnType<typeof signupTeam>>;
/** A user addUser made: their session, username and password. */
export type Member = Awaited<ReturnType<typeof addUser>>;
