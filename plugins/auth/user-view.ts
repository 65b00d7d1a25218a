import type { OAuthProfile, User } from './user.entity.ts';

/** The fields both views of a user share. */
interface UserBase {
  _id: string;
  email: string;
  username: string;
  firstName: string | null;
  lastName: string | null;
  role: string;
  isActive: boolean;
  isVerified: boolean;
  isPhoneVerified: boolean;
  onboardingCompleted: boolean;
  subscriptionId: string;
  serviceCode: string | null;
  createdAt: string;
  updatedAt: string;
}

const base = (user: User): UserBase => ({
  _id: user.id,
  email: user.email,
  username: user.username,
  firstName: user.firstName ?? null,
  lastName: user.lastName ?? null,
  role: user.role,
  isActive: user.isActive,
  isVerified: user.isVerified,
  isPhoneVerified: user.isPhoneVerified,
  onboardingCompleted: user.onboardingCompleted,
  subscriptionId: user.subscriptionId,
  serviceCode: user.serviceCode ?? null,
  createdAt: user.createdAt.toISOString(),
  updatedAt: user.updatedAt.toISOString(),
});

/** A user as the user themself sees it (the profile of `plugins/user-profile/README.md`): never the password hash. */
export interface UserView extends UserBase {
  phoneNumber: string | null;
  profilePicture: string | null;
  jobTitle: string | null;
  department: string | null;
  oauthProfiles: { provider: string; id: string }[];
}

export const toUserView = (user: User): UserView => ({
  ...base(user),
  phoneNumber: user.phoneNumber ?? null,
  profilePicture: user.profilePicture ?? null,
  jobTitle: user.jobTitle ?? null,
  department: user.department ?? null,
  oauthProfiles: (user.oauthProfiles ?? []).map(({ provider, id }) => ({ provider, id })),
});

/** A user as an administrator of the subscription sees it (AdminUserRpc's records, `plugins/admin-user/README.md`). */
export interface AdminUserRecord extends UserBase {
  /** With the address the provider gave when each link was made. */
  oauthProfiles: OAuthProfile[];
  partnerContactId: string | null;
}

export const toAdminUserRecord = (user: User): AdminUserRecord => ({
  ...base(user),
  oauthProfiles: user.oauthProfiles ?? [],
  partnerContactId: user.partnerContactId ?? null,
});
