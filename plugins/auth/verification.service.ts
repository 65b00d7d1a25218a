import { randomInt, randomUUID } from 'node:crypto';
import { badRequest, isUuid, notFound, RateLimiter, RpcError, validationError, type Database, type RowOf, type SecretBox } from 'rpc-service/plugin';
import type { AuthConfig } from './config.ts';
import type { MessageSender } from './message-sender.ts';
import { OtpRequest, type OtpChannel } from './otp-request.entity.ts';

export const CODE_TTL_MS = 10 * 60_000;
export const MAX_ATTEMPTS = 5;

export interface CodeRequested {
  otpRequestId: string;
  channelType: OtpChannel;
  /** Masked, so the answer does not echo the full address. */
  destination: string;
  expiresAt: string;
}

export interface CodeVerified {
  verified: true;
  otpRequestId: string;
  finalized: boolean;
}

/** A verified, consumed code: who proved control of what. */
export interface ProvenIdentifier {
  channel: OtpChannel;
  identifier: string;
}

const E164 = /^\+[1-9]\d{6,14}$/;

type AttemptRow = RowOf<OtpRequest, 'channel' | 'identifier' | 'codeHash' | 'attempts'>;

/** Lower-case e-mail addresses; phone numbers without spaces, dots, dashes or brackets. */
export function normaliseIdentifier(channel: OtpChannel, raw: string): string {
  const trimmed = raw.trim();
  if (channel === 'email') return trimmed.toLowerCase();
  return trimmed.replace(/[\s().-]/g, '');
}

const mask = (channel: OtpChannel, identifier: string) => (channel === 'email' ? identifier.replace(/^(.).*(@.*)$/, '$1***$2') : `***${identifier.slice(-3)}`);

/**
 * One-time codes: six digits, valid ten minutes, five attempts, stored as an
 * HMAC. Requests are limited per identifier and per client address, wrong
 * codes per client address. Codes go out through the MessageSender, never in
 * an answer or a log line.
 */
export class VerificationService {
  readonly #db: Database;
  readonly #secretBox: SecretBox;
  readonly #sender: MessageSender;
  readonly #limiter: RateLimiter;
  readonly #config: AuthConfig;

  constructor(deps: { db: Database; secretBox: SecretBox; messageSender: MessageSender; rateLimiter: RateLimiter; config: AuthConfig }) {
    this.#db = deps.db;
    this.#secretBox = deps.secretBox;
    this.#sender = deps.messageSender;
    this.#limiter = deps.rateLimiter;
    this.#config = deps.config;
  }

  /** The form codes are requested and matched in (see normaliseIdentifier). */
  normalise(channel: OtpChannel, raw: string): string {
    return normaliseIdentifier(channel, raw);
  }

  async requestVerificationCode(channel: OtpChannel, rawIdentifier: string, clientIp: string, firstName?: string): Promise<CodeRequested> {
    const identifier = normaliseIdentifier(channel, rawIdentifier);
    if (channel !== 'email' && !E164.test(identifier)) {
      throw validationError([{ path: 'identifier', message: 'A phone number in international form is required, e.g. +15551234567' }]);
    }
    const { otpRequestLimit, otpRequestIpLimit, otpWindowSeconds } = this.#config;
    const byIdentifier = RateLimiter.bucket('otp-request-id', identifier);
    const byIp = RateLimiter.bucket('otp-request-ip', clientIp);
    await this.#limiter.check([
      [byIdentifier, otpRequestLimit],
      [byIp, otpRequestIpLimit],
    ]);
    await this.#limiter.hit([byIdentifier, byIp], otpWindowSeconds);

    const id = randomUUID();
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const expiresAt = new Date(Date.now() + CODE_TTL_MS);
    const em = this.#db.forkEm(null);
    em.create(OtpRequest, {
      id,
      channel,
      identifier,
      codeHash: this.#hash(id, code),
      attempts: 0,
      expiresAt,
      verifiedAt: null,
      consumedAt: null,
      createdAt: new Date(),
    });
    await em.flush();
    // Old requests are of no use once expired; a day's grace keeps them for support questions.
    await this.#db.execute(`delete from auth_otp_request where expires_at < now() - interval '1 day'`);
    const greeting = firstName ? `Hello ${firstName},\n\n` : '';
    await this.#sender.send({
      channel,
      to: identifier,
      subject: 'Your verification code',
      text: `${greeting}Your verification code is ${code}. It expires in 10 minutes. If you did not ask for it, ignore this message.`,
    });
    return { otpRequestId: id, channelType: channel, destination: mask(channel, identifier), expiresAt: expiresAt.toISOString() };
  }

  /** Checks a code; `finalize` also consumes it, so it cannot be used again. */
  async verifyCode(otpRequestId: string, code: string, clientIp: string, finalize: boolean): Promise<CodeVerified> {
    await this.#check(otpRequestId, code, clientIp, finalize);
    return { verified: true, otpRequestId, finalized: finalize };
  }

  /**
   * Checks and consumes a code in one step, for signup, login and channel
   * verification; `path` prefixes issue paths. `accept` may refuse a right
   * code sent to the wrong place by throwing; the code then stays unused.
   */
  async consume(otpRequestId: string, code: string, clientIp: string, path: string, accept?: (proven: ProvenIdentifier) => void): Promise<ProvenIdentifier> {
    try {
      return await this.#check(otpRequestId, code, clientIp, true, accept);
    } catch (error) {
      // Name the params the caller sent (verifications.email.code rather than code).
      if (error instanceof RpcError && error.code === 'VALIDATION_ERROR') {
        throw validationError((error.issues ?? []).map((issue) => ({ ...issue, path: path ? `${path}.${issue.path}` : issue.path })));
      }
      throw error;
    }
  }

  /**
   * Each attempt is counted with one atomic update, so parallel guesses
   * cannot share an attempt, and consuming is first come, first served.
   */
  async #check(
    otpRequestId: string,
    code: string,
    clientIp: string,
    finalize: boolean,
    accept?: (proven: ProvenIdentifier) => void,
  ): Promise<ProvenIdentifier> {
    const limit = this.#config.otpVerifyFailureLimit;
    const byIp = RateLimiter.bucket('otp-verify-ip', clientIp);
    await this.#limiter.check([[byIp, limit]]);
    const [target] = isUuid(otpRequestId)
      ? await this.#db.execute<{ identifier: string }>('select identifier from auth_otp_request where id = ?', [otpRequestId])
      : [];
    if (!target) throw notFound('Unknown verification request; request a new code');
    // Wrong codes count per client address and per address or number, across all of its requests.
    const buckets = [byIp, RateLimiter.bucket('otp-verify-id', target.identifier)];
    await this.#limiter.check(buckets.map((bucket) => [bucket, limit] as const));
    const [attempt] = await this.#db.execute<AttemptRow>(
      `update auth_otp_request set attempts = attempts + 1
       where id = ? and consumed_at is null and expires_at > now() and attempts < ?
       returning channel, identifier, code_hash, attempts`,
      [otpRequestId, MAX_ATTEMPTS],
    );
    if (!attempt) throw await this.#whyUnusable(otpRequestId);
    if (!this.#secretBox.macMatches(otpText(otpRequestId, code.trim()), attempt.code_hash)) {
      await this.#limiter.hit(buckets, this.#config.otpWindowSeconds);
      const left = MAX_ATTEMPTS - attempt.attempts;
      throw validationError([{ path: 'code', message: left > 0 ? `Wrong code; ${left} attempt(s) left` : 'Wrong code; request a new one' }]);
    }
    const proven: ProvenIdentifier = { channel: attempt.channel, identifier: attempt.identifier };
    accept?.(proven);
    const [marked] = await this.#db.execute(
      `update auth_otp_request
       set verified_at = coalesce(verified_at, now()), consumed_at = case when ?::boolean then now() else consumed_at end
       where id = ? and consumed_at is null returning id`,
      [finalize, otpRequestId],
    );
    if (!marked) throw badRequest('This code was already used; request a new one');
    return proven;
  }

  async #whyUnusable(otpRequestId: string): Promise<RpcError> {
    const request = await this.#db.forkEm(null).findOne(OtpRequest, { id: otpRequestId });
    if (!request) return notFound('Unknown verification request; request a new code');
    if (request.consumedAt) return badRequest('This code was already used; request a new one');
    const secondsLeft = Math.ceil((request.expiresAt.getTime() - Date.now()) / 1000);
    if (secondsLeft <= 0) return badRequest('This code has expired; request a new one');
    // Locked for the rest of its life, like the other limits: Retry-After says when it is gone for good.
    return new RpcError('RATE_LIMITED', 'Too many wrong codes; request a new one', { retryAfter: secondsLeft });
  }

  #hash(requestId: string, code: string): string {
    return this.#secretBox.mac(otpText(requestId, code));
  }
}

const otpText = (requestId: string, code: string): string => `otp:${requestId}:${code}`;
