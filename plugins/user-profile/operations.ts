import * as v from 'valibot';
import { password, UPLOAD_KEY_ANSWER } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { PROFILE } from './user-profile.service.ts';

// Trimmed; null or an empty string clears the field.
const profileText = (label: string) =>
  v.optional(
    v.nullable(
      v.pipe(
        v.string(`${label} must be a string or null`),
        v.trim(),
        v.maxLength(100, `${label} must be at most 100 characters`),
        v.transform((text) => (text === '' ? null : text)),
      ),
    ),
  );

export const getUserProfile = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The calling user's own profile.",
  result: PROFILE,
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.userProfileService.getUserProfile(ctx),
});

export const updateUserProfile = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Change the calling user's name, job title or department (null clears a field).",
  result: PROFILE,
  params: v.object({
    firstName: profileText('firstName'),
    lastName: profileText('lastName'),
    jobTitle: profileText('jobTitle'),
    department: profileText('department'),
  }),
  handler: ({ params, ctx, deps }) => deps.userProfileService.updateUserProfile(ctx, params),
});

export const changePassword = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Change the calling user's password; every other session of the user ends.",
  result: v.literal(true),
  params: v.object({
    currentPassword: v.pipe(v.string(), v.minLength(1, 'currentPassword is required'), v.maxLength(256)),
    newPassword: password,
  }),
  handler: async ({ params, ctx, deps }) => {
    await deps.userProfileService.changePassword(ctx, params.currentPassword, params.newPassword);
    return true as const;
  },
});

export const getUploadKeyForProfilePicture = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'A single-use upload key, when it expires, and the URL to PUT or POST the new profile picture to.',
  result: UPLOAD_KEY_ANSWER,
  params: v.object({}),
  handler: async ({ ctx, deps, transport }) => {
    const { uploadKey, expiresAt } = await deps.userProfileService.getUploadKeyForProfilePicture(ctx);
    return { uploadKey, uploadUrl: `${transport.baseUrl}/api/uploads/${uploadKey}`, expiresAt: expiresAt.toISOString() };
  },
});

export const updateProfilePicture = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Make the picture uploaded with this key the profile picture; the previous one is deleted.',
  result: PROFILE,
  params: v.object({ uploadKey: v.pipe(v.string(), v.minLength(1, 'uploadKey is required'), v.maxLength(100)) }),
  handler: ({ params, ctx, deps }) => deps.userProfileService.updateProfilePicture(ctx, params.uploadKey),
});

export const verifyUserChannel = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Verify the caller's e-mail address or phone number with a one-time code sent to it.",
  result: v.strictObject({ success: v.literal(true), message: v.string() }),
  params: v.object({
    otpRequestId: v.pipe(v.string(), v.trim(), v.minLength(1, 'otpRequestId must not be empty')),
    code: v.pipe(v.string(), v.trim(), v.minLength(1, 'code must not be empty'), v.maxLength(20)),
    identifier: v.pipe(v.string(), v.trim(), v.minLength(1, 'identifier must not be empty'), v.maxLength(254)),
    channelType: v.picklist(['email', 'phone'], 'channelType must be email or phone'),
  }),
  handler: ({ params, ctx, deps, transport }) => deps.userProfileService.verifyUserChannel(ctx, params, transport.clientIp),
});
