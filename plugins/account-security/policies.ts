import { isManager, ROLES, type EntityManager, type Role } from 'rpc-service/plugin';
import { FactorPolicy } from './policy.entity.ts';

export const REQUIRED_FOR = ['nobody', 'admins', 'staff', 'everyone'] as const;
export type RequiredFor = (typeof REQUIRED_FOR)[number];

export interface PolicyView {
  requiredFor: RequiredFor;
  graceDays: number;
  /** From when each covered role has been covered (its grace period counts from then). */
  coveredSince: Partial<Record<Role, string>>;
  updatedAt: string | null;
  updatedBy: string | null;
}

/** Whether a policy asks a second factor of a role: admins; staff and admins; or everyone. */
export const covers = (requiredFor: RequiredFor, role: Role): boolean =>
  requiredFor === 'everyone' || (requiredFor === 'staff' && isManager(role)) || (requiredFor === 'admins' && role === 'admin');

const NONE: PolicyView = { requiredFor: 'nobody', graceDays: 0, coveredSince: {}, updatedAt: null, updatedBy: null };

/** A subscription's policy on second factors: none until an admin sets one. */
export class Policies {
  async get(em: EntityManager, subscriptionId: string): Promise<PolicyView> {
    const policy = await em.findOne(FactorPolicy, { subscriptionId });
    return policy ? viewOf(policy) : NONE;
  }

  async set(em: EntityManager, subscriptionId: string, input: { requiredFor: RequiredFor; graceDays: number }, by: string): Promise<PolicyView> {
    const now = new Date();
    const policy = await em.findOne(FactorPolicy, { subscriptionId });
    // Widening the policy gives only the newly covered their grace period; those covered already keep their date.
    const before = policy?.coveredSince ?? {};
    const coveredSince = Object.fromEntries(
      ROLES.filter((role) => covers(input.requiredFor, role)).map((role) => [role, before[role] ?? now.toISOString()]),
    ) as Partial<Record<Role, string>>;
    if (policy) {
      Object.assign(policy, input, { coveredSince, updatedAt: now, updatedBy: by });
      await em.flush();
      return viewOf(policy);
    }
    const made = em.create(FactorPolicy, { subscriptionId, ...input, coveredSince, updatedAt: now, updatedBy: by });
    await em.flush();
    return viewOf(made);
  }

  /** Whether the policy asks this person for a factor, and from when their sign-ins need one (null: not asked). */
  requirement(policy: PolicyView, user: { role: Role; createdAt: Date }): { required: boolean; deadline: Date | null } {
    const since = policy.coveredSince[user.role];
    if (!covers(policy.requiredFor, user.role) || !since) return { required: false, deadline: null };
    const from = Math.max(new Date(since).getTime(), user.createdAt.getTime());
    return { required: true, deadline: new Date(from + policy.graceDays * 86_400_000) };
  }
}

const viewOf = (policy: FactorPolicy): PolicyView => ({
  requiredFor: policy.requiredFor as RequiredFor,
  graceDays: policy.graceDays,
  coveredSince: policy.coveredSince,
  updatedAt: policy.updatedAt.toISOString(),
  updatedBy: policy.updatedBy,
});
