import type { User } from './entities.ts';

/** A user as the user themself sees it: everything but the password hash. */
export interface UserView {
  _id: string;
  email: string;
  subscriptionId: string;
  serviceCode: string | null;
  username: string;
  firstName: string | null;
  lastName: string | null;
  role: string;
  isActive: boolean;
  isVerified: boolean;
  phoneNumber: string | null;
  isPhoneVerified: boolean;
  onboardingCompleted: boolean;
  profilePicture: string | null;
  jobTitle: string | null;
  department: string | null;
  oauthProfiles: { provider: string; id: string }[];
  createdAt: string;
  updatedAt: string;
}

export function toUserView(user: User): UserView {
  return {
    _id: user.id,
    email: user.email,
    subscriptionId: user.subscriptionId,
    serviceCode: user.serviceCode,
    username: user.username,
    firstName: user.firstName,
    lastName: user.lastName,
    role: user.role,
    isActive: user.isActive,
    isVerified: user.isVerified,
    phoneNumber: user.phoneNumber,
    isPhoneVerified: user.isPhoneVerified,
    onboardingCompleted: user.onboardingCompleted,
    profilePicture: user.profilePicture,
    jobTitle: user.jobTitle,
    department: user.department,
    oauthProfiles: (user.oauthProfiles ?? []).map(({ provider, id }) => ({ provider, id })),
    createdAt: user.createdAt.toISOString(),
    updatedAt: user.updatedAt.toISOString(),
  };
}

/** A user as an administrator of the subscription sees it (the spec's administrative view). */
export interface AdminUserRecord {
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
  oauthProfiles: Record<string, unknown>[];
  partnerContactId: string | null;
  subscriptionId: string;
  serviceCode: string | null;
  createdAt: string;
  updatedAt: string;
}

export function toAdminUserRecord(user: User): AdminUserRecord {
  return {
    _id: user.id,
    email: user.email,
    username: user.username,
    firstName: user.firstName,
    lastName: user.lastName,
    role: user.role,
    isActive: user.isActive,
    isVerified: user.isVerified,
    isPhoneVerified: user.isPhoneVerified,
    onboardingCompleted: user.onboardingCompleted,
    oauthProfiles: user.oauthProfiles ?? [],
    partnerContactId: user.partnerContactId,
    subscriptionId: user.subscriptionId,
    serviceCode: user.serviceCode,
    createdAt: user.createdAt.toISOString(),
    updatedAt: user.updatedAt.toISOString(),
  };
}
