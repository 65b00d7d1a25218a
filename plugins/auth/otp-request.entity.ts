import { EntitySchema } from '@mikro-orm/core';

export type OtpChannel = 'email' | 'sms' | 'whatsapp';

/**
 * A one-time code sent to an e-mail address or phone number. It exists before
 * any account does (signup), so it belongs to no subscription. Only an HMAC of
 * the code is stored.
 */
export interface OtpRequest {
  id: string;
  channel: OtpChannel;
  /** Normalised: lower-case e-mail, or a phone number in E.164 form. */
  identifier: string;
  codeHash: string;
  attempts: number;
  expiresAt: Date;
  verifiedAt: Date | null;
  consumedAt: Date | null;
  createdAt: Date;
}

export const OtpRequestSchema = new EntitySchema<OtpRequest>({
  name: 'OtpRequest',
  tableName: 'auth_otp_request',
  properties: {
    id: { type: 'uuid', primary: true },
    channel: { type: 'string' },
    identifier: { type: 'string' },
    codeHash: { type: 'string' },
    attempts: { type: 'integer', default: 0 },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    verifiedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    consumedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz', onCreate: () => new Date() },
  },
});
