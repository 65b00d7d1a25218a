import { randomUUID } from 'node:crypto';
import { randomToken, sha256Hex, unauthenticated, type Database, type RowOf } from 'rpc-service/plugin';
import { SignInTicket } from './ticket.entity.ts';

/** What a ticket's token starts with, so a log or a support request shows what it is. */
export const TICKET_PREFIX = 'sit_';

export type TicketPurpose = 'verify' | 'enrol';

export interface TicketInput {
  subscriptionId: string;
  userId: string;
  purpose: TicketPurpose;
  amr: readonly string[];
  resume: { externalLoginId?: string };
  clientIp: string;
  userAgent: string | null;
}

export type OpenTicket = RowOf<SignInTicket, 'subscriptionId' | 'id' | 'userId' | 'purpose' | 'amr' | 'resume' | 'clientIp' | 'userAgent' | 'expiresAt'>;

const COLUMNS = 'subscription_id, id, user_id, purpose, amr, resume, client_ip, user_agent, expires_at';

/**
 * Sign-in tickets: the proof of a first factor, carried for a few minutes to
 * the second factor (or to enrolling one). The token is 32 random bytes; only
 * its SHA-256 is kept. A ticket ends when its sign-in does.
 */
export class Tickets {
  readonly #db: Database;
  readonly #ttlMs: number;

  constructor(db: Database, ttlSeconds: number) {
    this.#db = db;
    this.#ttlMs = ttlSeconds * 1000;
  }

  async issue(input: TicketInput): Promise<{ ticket: string; expiresAt: string }> {
    const token = `${TICKET_PREFIX}${randomToken(32)}`;
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.#ttlMs);
    const em = this.#db.forkEm(input.subscriptionId);
    em.create(SignInTicket, {
      subscriptionId: input.subscriptionId,
      id: randomUUID(),
      userId: input.userId,
      tokenHash: sha256Hex(token),
      purpose: input.purpose,
      amr: input.amr.join(' '),
      resume: input.resume,
      clientIp: input.clientIp,
      userAgent: input.userAgent,
      createdAt: now,
      expiresAt,
    });
    await em.flush();
    return { ticket: token, expiresAt: expiresAt.toISOString() };
  }

  /** The unexpired ticket of a token, of one of the purposes; UNAUTHENTICATED otherwise (sign in again). */
  async open(token: string, purposes: readonly TicketPurpose[]): Promise<OpenTicket> {
    const [row] = token.startsWith(TICKET_PREFIX)
      ? await this.#db.execute<OpenTicket>(`select ${COLUMNS} from account_security_ticket where token_hash = ? and expires_at > now()`, [sha256Hex(token)])
      : [];
    if (!row || !purposes.includes(row.purpose as TicketPurpose)) throw unauthenticated('This sign-in is unknown or has expired; sign in again');
    return opened(row);
  }

  /** The unexpired ticket a passkey challenge was asked with. */
  async byId(subscriptionId: string, id: string): Promise<OpenTicket> {
    const [row] = await this.#db.execute<OpenTicket>(
      `select ${COLUMNS} from account_security_ticket where subscription_id = ? and id = ? and expires_at > now()`,
      [subscriptionId, id],
    );
    if (!row) throw unauthenticated('This sign-in is unknown or has expired; sign in again');
    return opened(row);
  }

  /**
   * Runs `step` (checking the factor, finishing the sign-in) as the one
   * request that holds the ticket: a second request at the same time is
   * refused before it spends its code. The ticket ends when the step
   * succeeds, and is free again when it fails (a mistyped code).
   */
  async finishing<T>(ticket: Pick<OpenTicket, 'subscription_id' | 'id'>, step: () => Promise<T>): Promise<T> {
    const [held] = await this.#db.execute<{ id: string }>(
      `update account_security_ticket set claimed_until = now() + interval '30 seconds'
       where subscription_id = ? and id = ? and expires_at > now() and (claimed_until is null or claimed_until < now()) returning id`,
      [ticket.subscription_id, ticket.id],
    );
    if (!held) throw unauthenticated('This sign-in is being finished by another request, or was already; sign in again if it does not go on');
    let result: T;
    try {
      result = await step();
    } catch (err) {
      await this.#db.execute('update account_security_ticket set claimed_until = null where subscription_id = ? and id = ?', [
        ticket.subscription_id,
        ticket.id,
      ]);
      throw err;
    }
    await this.#db.forkEm(ticket.subscription_id).nativeDelete(SignInTicket, { subscriptionId: ticket.subscription_id, id: ticket.id });
    return result;
  }

  /** Ends every sign-in of the user waiting for its second step (their sessions ended, a new password, their factors reset). */
  async endAllOf(subscriptionId: string, userId: string, em = this.#db.forkEm(subscriptionId)): Promise<void> {
    await em.nativeDelete(SignInTicket, { subscriptionId, userId });
  }

  /** Drops every tenant's expired tickets (the hourly sweep). */
  async sweep(): Promise<number> {
    const [row] = await this.#db.execute<{ n: number }>(
      'with gone as (delete from account_security_ticket where expires_at < now() returning 1) select count(*)::int as n from gone',
    );
    return row?.n ?? 0;
  }
}

/** A row as the driver gives it: json may come back as text, and a time as text (PGlite) or a Date. */
const opened = (row: OpenTicket): OpenTicket => ({
  ...row,
  resume: typeof row.resume === 'string' ? JSON.parse(row.resume) : row.resume,
  expires_at: new Date(row.expires_at),
});
