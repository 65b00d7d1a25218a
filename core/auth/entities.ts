import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/core';
import type { Role } from '../../config/roles.ts';

const timestamps = {
  createdAt: { type: 'Date', columnType: 'timestamptz', onCreate: () => new Date() },
  updatedAt: { type: 'Date', columnType: 'timestamptz', onCreate: () => new Date(), onUpdate: () => new Date() },
} as const;

export interface Subscription {
  id: string;
  name: string;
  serviceCode: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export const SubscriptionSchema = new EntitySchema<Subscription>({
  name: 'Subscription',
  tableName: 'core_subscription',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'string' },
    serviceCode: { type: 'string', nullable: true },
    ...timestamps,
  },
});

export interface OAuthProfile {
  provider: string;
  id: string;
  [key: string]: unknown;
}

export interface User {
  id: string;
  subscriptionId: string;
  email: string;
  username: string;
  passwordHash: string | null;
  firstName: string | null;
  lastName: string | null;
  role: Role;
  isActive: boolean;
  isVerified: boolean;
  isPhoneVerified: boolean;
  phoneNumber: string | null;
  onboardingCompleted: boolean;
  oauthProfiles: OAuthProfile[];
  partnerContactId: string | null;
  profilePicture: string | null;
  jobTitle: string | null;
  department: string | null;
  serviceCode: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export type NewUser = Pick<User, 'subscriptionId' | 'email' | 'username' | 'role'> & Partial<User>;

/** A complete user record from the fields that matter, every other field at its default. */
export function newUser(fields: NewUser): User {
  const now = new Date();
  return {
    id: randomUUID(),
    passwordHash: null,
    firstName: null,
    lastName: null,
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
    createdAt: now,
    updatedAt: now,
    ...fields,
  };
}

export const UserSchema = new EntitySchema<User>({
  name: 'User',
  tableName: 'core_user',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    email: { type: 'string' },
    username: { type: 'string' },
    passwordHash: { type: 'string', nullable: true, lazy: true },
    firstName: { type: 'string', nullable: true },
    lastName: { type: 'string', nullable: true },
    role: { type: 'string' },
    isActive: { type: 'boolean', default: true },
    isVerified: { type: 'boolean', default: false },
    isPhoneVerified: { type: 'boolean', default: false },
    phoneNumber: { type: 'string', nullable: true },
    onboardingCompleted: { type: 'boolean', default: false },
    oauthProfiles: { type: 'json', default: '[]' },
    partnerContactId: { type: 'string', nullable: true },
    profilePicture: { type: 'string', nullable: true },
    jobTitle: { type: 'string', nullable: true },
    department: { type: 'string', nullable: true },
    serviceCode: { type: 'string', nullable: true },
    ...timestamps,
  },
});

export interface Session {
  id: string;
  subscriptionId: string;
  userId: string;
  /** SHA-256 of the token, hex; the token itself is never stored. */
  tokenHash: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
}

export const SessionSchema = new EntitySchema<Session>({
  name: 'Session',
  tableName: 'core_session',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    userId: { type: 'uuid' },
    tokenHash: { type: 'string' },
    createdAt: { type: 'Date', columnType: 'timestamptz', onCreate: () => new Date() },
    lastSeenAt: { type: 'Date', columnType: 'timestamptz' },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export interface ApiKey {
  id: string;
  subscriptionId: string;
  userId: string;
  prefix: string;
  /** SHA-256 of the full key, hex. */
  keyHash: string;
  /** The full key sealed with the master key. */
  encryptedKey: string;
  description: string;
  isEnabled: boolean;
  initialContext: Record<string, unknown> | null;
  webhookUrl: string | null;
  /** Sealed with the master key. */
  webhookSecret: string | null;
  webhookStatus: string | null;
  lastTestedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  name: 'ApiKey',
  tableName: 'core_api_key',
  properties: {
    id: { type: 'uuid', primary: true },
    subscriptionId: { type: 'uuid' },
    userId: { type: 'uuid' },
    prefix: { type: 'string' },
    keyHash: { type: 'string' },
    encryptedKey: { type: 'text' },
    description: { type: 'text' },
    isEnabled: { type: 'boolean', default: true },
    initialContext: { type: 'json', nullable: true },
    webhookUrl: { type: 'text', nullable: true },
    webhookSecret: { type: 'text', nullable: true },
    webhookStatus: { type: 'string', nullable: true },
    lastTestedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    ...timestamps,
  },
});

export const identityEntities = [SubscriptionSchema, UserSchema, SessionSchema, ApiKeySchema];
