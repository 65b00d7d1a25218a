import { randomUUID } from 'node:crypto';
import {
  defineRecord,
  listOf,
  notFound,
  randomToken,
  sha256Hex,
  validationError,
  type AuthenticatedContext,
  type Database,
  type EntityManager,
  type InferRecord,
  type ListEnvelope,
  type Role,
  type RowOf,
} from 'rpc-service/plugin';
import { InviteCode } from './invite-code.entity.ts';

const INVITE_CODE = defineRecord(InviteCode, { hide: ['subscriptionId', 'codeHash'] });

/** An invite code as its administrators see it: never the code, with its state spelled out. */
export type InviteCodeRecord = InferRecord<typeof INVITE_CODE> & { status: 'active' | 'exhausted' | 'expired' | 'revoked' };

function statusOf(invite: InviteCode, now = Date.now()): InviteCodeRecord['status'] {
  if (invite.revokedAt) return 'revoked';
  if (invite.expiresAt && invite.expiresAt.getTime() <= now) return 'expired';
  return invite.uses >= invite.maxUses ? 'exhausted' : 'active';
}

const toRecord = (invite: InviteCode): InviteCodeRecord => ({ ...INVITE_CODE.toRecord(invite), status: statusOf(invite) });

const USABLE = 'revoked_at is null and (expires_at is null or expires_at > now()) and uses < max_uses';
const invalidCode = () => validationError([{ path: 'inviteCode', message: 'This invite code is not valid: unknown, used up, expired or revoked' }]);

/** Invite codes of a subscription: made and revoked by its admins, redeemed at signup. */
export class InviteCodeService {
  readonly #db: Database;

  constructor({ db }: { db: Database }) {
    this.#db = db;
  }

  /** Refuses a code that signup would not accept. */
  async check(code: string): Promise<void> {
    const [usable] = await this.#db.execute(`select 1 from auth_invite_code where code_hash = ? and ${USABLE}`, [sha256Hex(code)]);
    if (!usable) throw invalidCode();
  }

  /** Takes one use of a code inside the signup's transaction; two signups cannot share its last use. */
  async redeem(tx: EntityManager, code: string): Promise<{ subscriptionId: string; role: Role }> {
    const [invite] = await tx.execute<RowOf<InviteCode, 'subscriptionId' | 'role'>[]>(
      `update auth_invite_code set uses = uses + 1 where code_hash = ? and ${USABLE} returning subscription_id, role`,
      [sha256Hex(code)],
    );
    if (!invite) throw invalidCode();
    return { subscriptionId: invite.subscription_id, role: invite.role };
  }

  async createInviteCode(
    ctx: AuthenticatedContext,
    input: { role: Role; maxUses: number; expiresAt: Date | null },
  ): Promise<InviteCodeRecord & { code: string }> {
    const code = `inv_${randomToken(15)}`;
    const invite = ctx.em.create(InviteCode, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      codeHash: sha256Hex(code),
      hint: code.slice(0, 8),
      role: input.role,
      maxUses: input.maxUses,
      uses: 0,
      expiresAt: input.expiresAt,
      revokedAt: null,
      createdBy: ctx.userId,
      createdAt: new Date(),
    });
    await ctx.em.flush();
    return { ...toRecord(invite), code };
  }

  async listInviteCodes(ctx: AuthenticatedContext): Promise<ListEnvelope<InviteCodeRecord>> {
    const invites = await ctx.em.find(InviteCode, {}, { orderBy: { createdAt: 'desc' } });
    return listOf(invites.map(toRecord));
  }

  /** Revoking is final and idempotent; a revoked code stays listed for the record. */
  async revokeInviteCode(ctx: AuthenticatedContext, id: string): Promise<InviteCodeRecord> {
    const invite = await ctx.em.findOne(InviteCode, { id });
    if (!invite) throw notFound(`Invite code ${id} not found`);
    invite.revokedAt ??= new Date();
    await ctx.em.flush();
    return toRecord(invite);
  }
}
