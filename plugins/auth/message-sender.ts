import { randomUUID } from 'node:crypto';
import type { Transporter } from 'nodemailer';
import { Outbound, RpcError, type Database, type Logger } from 'rpc-service/plugin';
import type { AuthConfig, MessagingConfig, SmsProviderConfig } from './config.ts';

export type Channel = 'email' | 'sms' | 'whatsapp';

export interface OutgoingMessage {
  channel: Channel;
  /** An e-mail address or a phone number in E.164 form. */
  to: string;
  subject: string;
  text: string;
}

/** Where a message went: the provider's id, or the outbox row of the embedded default. */
export interface Delivery {
  via: 'smtp' | 'sms-provider' | 'outbox';
  id: string;
}

/**
 * The SMS API is an address the operator configured, so it skips the outbound
 * guard (docs/decisions/0012-outbound-requests.md); its requests still get the
 * guard's client span and `traceparent`, as every other outbound request does.
 */
const operatorConfigured = new Outbound({ allowPrivate: true, allowedHosts: [] });

const mask = (to: string) => (to.includes('@') ? to.replace(/^(.).*(@.*)$/, '$1***$2') : `***${to.slice(-3)}`);

/**
 * Sends e-mail over SMTP (nodemailer) and SMS or WhatsApp messages through a
 * Twilio-style HTTP API. A channel with nothing configured writes to the
 * `auth_outbox` table instead, and the log says so without the message text,
 * which may hold a code. Only the auth plugin sends messages (one-time codes),
 * so the sender and its settings are the plugin's own.
 */
export class MessageSender {
  readonly #config: MessagingConfig;
  readonly #db: Database;
  readonly #logger: Logger;
  readonly #mail?: Promise<Transporter>;

  constructor({ config, db, logger }: { config: AuthConfig; db: Database; logger: Logger }) {
    this.#config = config.messaging;
    this.#db = db;
    this.#logger = logger;
    // nodemailer is loaded only where SMTP is configured: about 60 ms of every start otherwise.
    const { smtpUrl } = this.#config;
    if (smtpUrl) {
      this.#mail = import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(smtpUrl));
      // A failure surfaces at the first send, as that send's error.
      this.#mail.catch(() => undefined);
    }
  }

  async send(message: OutgoingMessage): Promise<Delivery> {
    if (message.channel === 'email' && this.#mail) return this.#sendMail(message);
    const from = message.channel === 'sms' ? this.#config.sms?.smsFrom : message.channel === 'whatsapp' ? this.#config.sms?.whatsappFrom : undefined;
    if (this.#config.sms && from) return this.#sendText(message, this.#config.sms, from);
    return this.#toOutbox(message);
  }

  async #sendMail(message: OutgoingMessage): Promise<Delivery> {
    try {
      const info = await (await this.#mail!).sendMail({ from: this.#config.mailFrom, to: message.to, subject: message.subject, text: message.text });
      return { via: 'smtp', id: info.messageId };
    } catch (err) {
      this.#logger.error({ err, to: mask(message.to) }, 'e-mail delivery failed');
      throw new RpcError('FEATURE_UNAVAILABLE', 'The e-mail could not be sent; try again later');
    }
  }

  async #sendText(message: OutgoingMessage, provider: SmsProviderConfig, from: string): Promise<Delivery> {
    const prefix = message.channel === 'whatsapp' ? 'whatsapp:' : '';
    const url = `${provider.apiUrl.replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(provider.accountSid)}/Messages.json`;
    const body = new URLSearchParams({ To: `${prefix}${message.to}`, From: `${prefix}${from}`, Body: message.text });
    try {
      const response = await operatorConfigured.fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${provider.accountSid}:${provider.authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      if (!response.ok) throw new Error(`provider answered HTTP ${response.status}`);
      const answer = (await response.json().catch(() => ({}))) as { sid?: string };
      return { via: 'sms-provider', id: answer.sid ?? randomUUID() };
    } catch (err) {
      this.#logger.error({ err, channel: message.channel, to: mask(message.to) }, 'text message delivery failed');
      throw new RpcError('FEATURE_UNAVAILABLE', `The ${message.channel} message could not be sent; try again later`);
    }
  }

  async #toOutbox(message: OutgoingMessage): Promise<Delivery> {
    const id = randomUUID();
    await this.#db.execute('insert into auth_outbox (id, channel, recipient, subject, body, created_at) values (?, ?, ?, ?, ?, now())', [
      id,
      message.channel,
      message.to,
      message.subject,
      message.text,
    ]);
    this.#logger.info(
      { outboxId: id, channel: message.channel, to: mask(message.to) },
      'message written to the outbox (no delivery configured for this channel)',
    );
    return { via: 'outbox', id };
  }
}
