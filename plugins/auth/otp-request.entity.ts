import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const OTP_CHANNELS = ['email', 'sms', 'whatsapp'] as const;
export type OtpChannel = (typeof OTP_CHANNELS)[number];

/**
 * A one-time code sent to an e-mail address or phone number. It exists before
 * any account does (signup), so it belongs to no subscription. Only an HMAC of
 * the code is stored.
 */
export const OtpRequest = defineEntity({
  name: 'OtpRequest',
  tableName: 'auth_otp_request',
  properties: (p) => ({
    id: p.uuid().primary(),
    channel: p.text().$type<OtpChannel>(),
    /** Normalised: lower-case e-mail, or a phone number in E.164 form. */
    identifier: p.text(),
    codeHash: p.text(),
    attempts: p.integer().default(0),
    expiresAt: p.datetime().index(),
    verifiedAt: p.datetime().nullable(),
    consumedAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  }),
});
export type OtpRequest = InferEntity<typeof OtpRequest>;
