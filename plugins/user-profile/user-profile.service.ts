import {
  badRequest,
  fileIdOfUrl,
  fileUrl,
  ROLES,
  RpcError,
  validationError,
  wireTimestamp,
  type AuthenticatedContext,
  type IssuedUploadKey,
  type PluginServices,
  type PurposeLimits,
  type UploadService,
} from 'rpc-service/plugin';
import * as v from 'valibot';

type UserService = PluginServices['userService'];
type VerificationService = PluginServices['verificationService'];
type UserView = ReturnType<UserService['view']>;

const nullableText = v.nullable(v.string());

/**
 * The user's own record as the auth plugin's `userService.view` makes it
 * (the profile of README.md): what UserProfileRpc answers for the profile.
 */
export const PROFILE = v.strictObject({
  _id: v.string(),
  subscriptionId: v.string(),
  email: v.string(),
  username: v.string(),
  firstName: nullableText,
  lastName: nullableText,
  role: v.picklist(ROLES),
  isActive: v.boolean(),
  isVerified: v.boolean(),
  isPhoneVerified: v.boolean(),
  phoneNumber: nullableText,
  onboardingCompleted: v.boolean(),
  profilePicture: nullableText,
  jobTitle: nullableText,
  department: nullableText,
  serviceCode: nullableText,
  oauthProfiles: v.array(v.strictObject({ provider: v.string(), id: v.string() })),
  createdAt: wireTimestamp,
  updatedAt: wireTimestamp,
});

export const PROFILE_PICTURE = 'profile-picture';
export const PROFILE_PICTURE_LIMITS: PurposeLimits = {
  maxBytes: 5 * 1024 * 1024,
  types: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
  maxFiles: 1,
};

export interface ProfileChanges {
  firstName?: string | null;
  lastName?: string | null;
  jobTitle?: string | null;
  department?: string | null;
}

/** The calling user's own record: profile fields, password, picture and verified channels. The records are the auth plugin's. */
export class UserProfileService {
  readonly #users: UserService;
  readonly #uploads: UploadService;
  readonly #codes: VerificationService;

  constructor({
    userService,
    uploadService,
    verificationService,
  }: {
    userService: UserService;
    uploadService: UploadService;
    verificationService: VerificationService;
  }) {
    this.#users = userService;
    this.#uploads = uploadService;
    this.#codes = verificationService;
  }

  /**
   * Marks the user's e-mail address or phone as verified with a code sent to
   * it. The e-mail must be the user's own; a verified phone becomes the user's number.
   */
  async verifyUserChannel(
    ctx: AuthenticatedContext,
    input: { otpRequestId: string; code: string; identifier: string; channelType: 'email' | 'phone' },
    clientIp: string,
  ): Promise<{ success: true; message: string }> {
    const user = await this.#users.self(ctx);
    const expected = this.#codes.normalise(input.channelType === 'email' ? 'email' : 'sms', input.identifier);
    if (input.channelType === 'email' && expected !== user.email.toLowerCase()) {
      throw validationError([{ path: 'identifier', message: 'This is not the e-mail address of your account' }]);
    }
    const proven = await this.#codes.consume(input.otpRequestId, input.code, clientIp, '', ({ channel, identifier }) => {
      const sameChannel = input.channelType === 'email' ? channel === 'email' : channel !== 'email';
      if (!sameChannel || identifier !== expected) {
        throw validationError([{ path: 'otpRequestId', message: `This code was not sent to ${input.identifier}` }]);
      }
    });
    // The owner of the address received the code: the address is proven theirs, not only marked verified.
    if (input.channelType === 'email') this.#users.emailProven(user, 'code');
    else {
      user.phoneNumber = proven.identifier;
      user.isPhoneVerified = true;
    }
    await ctx.em.flush();
    return { success: true, message: input.channelType === 'email' ? 'E-mail address verified' : 'Phone number verified' };
  }

  async getUserProfile(ctx: AuthenticatedContext): Promise<UserView> {
    return this.#users.view(await this.#users.self(ctx));
  }

  async updateUserProfile(ctx: AuthenticatedContext, changes: ProfileChanges): Promise<UserView> {
    const user = await this.#users.self(ctx);
    for (const field of ['firstName', 'lastName', 'jobTitle', 'department'] as const) {
      if (changes[field] !== undefined) user[field] = changes[field];
    }
    await ctx.em.flush();
    return this.#users.view(user);
  }

  /** Checks the current password, sets the new one and ends every other session of the user. */
  changePassword(ctx: AuthenticatedContext, currentPassword: string, newPassword: string): Promise<void> {
    return this.#users.changePassword(ctx, currentPassword, newPassword);
  }

  getUploadKeyForProfilePicture(ctx: AuthenticatedContext): Promise<IssuedUploadKey> {
    return this.#uploads.createKey(ctx, PROFILE_PICTURE);
  }

  /** Sets the picture uploaded through the key and consumes the key; then deletes the picture it replaced. */
  async updateProfilePicture(ctx: AuthenticatedContext, uploadKey: string): Promise<UserView> {
    const { user, previous } = await this.#uploads.consume(ctx, uploadKey, PROFILE_PICTURE, async (files, em) => {
      if (files.length !== 1) throw badRequest('No picture has been uploaded with this upload key yet');
      const self = await this.#users.findById({ em }, ctx.userId);
      if (!self) throw new RpcError('UNAUTHENTICATED', 'The user of this credential no longer exists');
      const replaced = self.profilePicture ?? null;
      self.profilePicture = fileUrl(files[0]!.fileId);
      return { user: self, previous: replaced };
    });
    const previousId = fileIdOfUrl(previous);
    if (previousId) {
      // The new picture is in place whatever happens here; a file left behind is only logged.
      await this.#uploads.delete(ctx, previousId).catch((err) => ctx.log.warn({ err }, 'could not delete the previous profile picture'));
    }
    return this.#users.view(user);
  }
}
