import type { Config } from '../../core/config.ts';
import { hashPassword, verifyPassword } from '../../core/auth/crypto.ts';
import { UserSchema, type User } from '../../core/auth/entities.ts';
import type { SessionService } from '../../core/auth/sessions.ts';
import { normaliseIdentifier, type VerificationService } from '../auth/verification.service.ts';
import { toUserView, type UserView } from '../../core/auth/user-view.ts';
import { RateLimiter } from '../../core/rate-limiter.ts';
import type { AuthenticatedContext } from '../../core/rpc/context.ts';
import { badRequest, RpcError, validationError } from '../../core/rpc/errors.ts';
import { fileIdOfUrl, fileUrl, type IssuedUploadKey, type PurposeLimits, type UploadService } from '../../core/uploads/upload-service.ts';

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

/** The calling user's own record: profile fields, password and picture. */
export class UserProfileService {
  readonly #sessions: SessionService;
  readonly #limiter: RateLimiter;
  readonly #uploads: UploadService;
  readonly #config: Config;
  readonly #codes: VerificationService;

  constructor({
    sessionService,
    rateLimiter,
    uploadService,
    config,
    verificationService,
  }: {
    sessionService: SessionService;
    rateLimiter: RateLimiter;
    uploadService: UploadService;
    config: Config;
    verificationService: VerificationService;
  }) {
    this.#sessions = sessionService;
    this.#limiter = rateLimiter;
    this.#uploads = uploadService;
    this.#config = config;
    this.#codes = verificationService;
  }

  /**
   * Marks the user's e-mail address or phone as verified with a code sent to
   * it. The e-mail must be the user's own; a verified phone becomes the user's number.
   */
  async verifyChannel(
    ctx: AuthenticatedContext,
    input: { otpRequestId: string; code: string; identifier: string; channelType: 'email' | 'phone' },
    clientIp: string,
  ): Promise<{ success: true; message: string }> {
    const user = await this.#self(ctx);
    const expected = normaliseIdentifier(input.channelType === 'email' ? 'email' : 'sms', input.identifier);
    if (input.channelType === 'email' && expected !== user.email.toLowerCase()) {
      throw validationError([{ path: 'identifier', message: 'This is not the e-mail address of your account' }]);
    }
    const proven = await this.#codes.consume(input.otpRequestId, input.code, clientIp, '', ({ channel, identifier }) => {
      const sameChannel = input.channelType === 'email' ? channel === 'email' : channel !== 'email';
      if (!sameChannel || identifier !== expected) {
        throw validationError([{ path: 'otpRequestId', message: `This code was not sent to ${input.identifier}` }]);
      }
    });
    if (input.channelType === 'email') user.isVerified = true;
    else {
      user.phoneNumber = proven.identifier;
      user.isPhoneVerified = true;
    }
    await ctx.em.flush();
    return { success: true, message: input.channelType === 'email' ? 'E-mail address verified' : 'Phone number verified' };
  }

  async get(ctx: AuthenticatedContext): Promise<UserView> {
    return toUserView(await this.#self(ctx));
  }

  async update(ctx: AuthenticatedContext, changes: ProfileChanges): Promise<UserView> {
    const user = await this.#self(ctx);
    for (const field of ['firstName', 'lastName', 'jobTitle', 'department'] as const) {
      if (changes[field] !== undefined) user[field] = changes[field];
    }
    await ctx.em.flush();
    return toUserView(user);
  }

  /**
   * Failed attempts count per user like failed logins; past the limit even
   * the right password is refused until the window ends. Every other session
   * of the user ends, so a stolen session dies with the old password.
   */
  async changePassword(ctx: AuthenticatedContext, currentPassword: string, newPassword: string): Promise<void> {
    const buckets = [RateLimiter.bucket('password-change', ctx.userId)];
    await this.#limiter.check(buckets, this.#config.loginFailureLimit);
    const user = await this.#self(ctx, ['passwordHash']);
    if (!user.passwordHash) {
      throw badRequest(
        'This account has no password to change (it signs in another way); an administrator can set one with AdminUserRpc.resetPassword',
      );
    }
    if (!(await verifyPassword(currentPassword, user.passwordHash))) {
      await this.#limiter.hit(buckets, this.#config.loginFailureWindowSeconds);
      throw validationError([{ path: 'currentPassword', message: 'Current password is incorrect' }]);
    }
    user.passwordHash = await hashPassword(newPassword);
    await ctx.em.flush();
    await this.#limiter.reset(buckets);
    await this.#sessions.revokeAllOfUser(ctx.userId, ctx.sessionId ?? undefined);
  }

  createPictureUploadKey(ctx: AuthenticatedContext): Promise<IssuedUploadKey> {
    return this.#uploads.createKey(ctx, PROFILE_PICTURE);
  }

  /** Sets the picture uploaded through the key and consumes the key; then deletes the picture it replaced. */
  async updatePicture(ctx: AuthenticatedContext, uploadKey: string): Promise<UserView> {
    const { user, previous } = await this.#uploads.consume(ctx, uploadKey, PROFILE_PICTURE, async (files, em) => {
      if (files.length !== 1) throw badRequest('No picture has been uploaded with this upload key yet');
      const self = await em.findOne(UserSchema, { id: ctx.userId });
      if (!self) throw new RpcError('UNAUTHENTICATED', 'The user of this credential no longer exists');
      const replaced = self.profilePicture;
      self.profilePicture = fileUrl(files[0]!.fileId);
      return { user: self, previous: replaced };
    });
    const previousId = fileIdOfUrl(previous);
    if (previousId) {
      // The new picture is in place whatever happens here; a file left behind is only logged.
      await this.#uploads.delete(ctx, previousId).catch((err) => ctx.log.warn({ err }, 'could not delete the previous profile picture'));
    }
    return toUserView(user);
  }

  async #self(ctx: AuthenticatedContext, populate: 'passwordHash'[] = []): Promise<User> {
    const user = await ctx.em.findOne(UserSchema, { id: ctx.userId }, { populate });
    if (!user) throw new RpcError('UNAUTHENTICATED', 'The user of this credential no longer exists');
    return user;
  }
}
