import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  defineRecord,
  isUuid,
  RpcError,
  type AuthenticatedContext,
  type EntityManager,
  type InferRecord,
  type IssuedUploadKey,
  type PurposeLimits,
  type UploadService,
} from 'rpc-service/plugin';
import { Playbook, type Resource } from './playbook.entity.ts';

export const RESOURCE_PURPOSE = 'playbook-resource';
export const RESOURCE_LIMITS: PurposeLimits = {
  maxBytes: 25 * 1024 * 1024,
  maxFiles: 20,
  types: [
    'application/pdf',
    'text/plain',
    'text/markdown',
    'text/csv',
    'text/html',
    'image/png',
    'image/jpeg',
    'image/webp',
    'image/gif',
    'application/json',
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    'application/octet-stream',
  ],
};

export interface PlaybookFields {
  name?: string;
  description?: string;
  content?: string;
  category?: string | null;
  tags?: string[];
  isActive?: boolean;
}

const PLAYBOOK = defineRecord(Playbook);
export type PlaybookRecord = InferRecord<typeof PLAYBOOK>;

/** A resource file as a playbook lists it and finalizeResourceUpload answers it. */
export const RESOURCE_SCHEMA = v.strictObject({ fileId: v.string(), fileName: v.string(), mimeType: v.string(), size: v.number() });

/** The declared result of an answer with a playbook: PLAYBOOK's columns, its resources spelled out. */
export const PLAYBOOK_SCHEMA = v.strictObject({
  ...PLAYBOOK.entries,
  // A JSON column, any value to the view.
  resources: v.array(RESOURCE_SCHEMA),
});

/** A LIKE pattern matching the text anywhere (its % _ and \ escaped). */
const containing = (text: string) => `%${text.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;

/**
 * Playbooks of a subscription, with the list quirks of `plugins/playbook/README.md` kept: `tags` (or
 * `filter.tags`) narrows to playbooks with any of them, `limit` (else
 * `pageSize`) caps the answer, `page` and `sort` are accepted but not used,
 * and `totalCount` is the number of playbooks returned. Resource files
 * come through the upload service and are deleted with their playbook.
 */
export class PlaybookService {
  readonly #uploads: UploadService;

  constructor({ uploadService }: { uploadService: UploadService }) {
    this.#uploads = uploadService;
  }

  async list(ctx: AuthenticatedContext, query: { tags?: string[]; limit: number }): Promise<{ data: PlaybookRecord[]; totalCount: number }> {
    const playbooks = await ctx.em.find(Playbook, query.tags?.length ? { tags: { $overlap: query.tags } } : {}, {
      orderBy: { updatedAt: 'desc', id: 'asc' },
      limit: query.limit,
    });
    return { data: playbooks.map(PLAYBOOK.toRecord), totalCount: playbooks.length };
  }

  /** Playbooks whose name, description, content or tags hold the query (any case), with any of the tags; name matches first. */
  async search(ctx: AuthenticatedContext, query: { query?: string; tags?: string[]; limit: number }): Promise<{ data: PlaybookRecord[]; totalCount: number }> {
    const text = query.query?.trim();
    const where = {
      ...(query.tags?.length ? { tags: { $overlap: query.tags } } : {}),
      ...(text
        ? {
            $or: [
              { name: { $ilike: containing(text) } },
              { description: { $ilike: containing(text) } },
              { content: { $ilike: containing(text) } },
              { tags: { $overlap: [text] } },
            ],
          }
        : {}),
    };
    const playbooks = await ctx.em.find(Playbook, where, { orderBy: { updatedAt: 'desc', id: 'asc' }, limit: query.limit });
    if (text) {
      const lower = text.toLowerCase();
      playbooks.sort((a, b) => Number(b.name.toLowerCase().includes(lower)) - Number(a.name.toLowerCase().includes(lower)));
    }
    return { data: playbooks.map(PLAYBOOK.toRecord), totalCount: playbooks.length };
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<PlaybookRecord> {
    return PLAYBOOK.toRecord(await this.#find(ctx.em, id));
  }

  async create(ctx: AuthenticatedContext, input: PlaybookFields & { name: string }): Promise<PlaybookRecord> {
    const now = new Date();
    const playbook = ctx.em.create(Playbook, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      createdBy: ctx.userId,
      source: 'api',
      name: input.name,
      description: input.description ?? '',
      content: input.content ?? '',
      category: input.category ?? null,
      tags: input.tags ?? [],
      isActive: input.isActive ?? true,
      resources: [],
      createdAt: now,
      updatedAt: now,
    });
    await ctx.em.flush();
    return PLAYBOOK.toRecord(playbook);
  }

  async update(ctx: AuthenticatedContext, id: string, changes: PlaybookFields): Promise<PlaybookRecord> {
    const playbook = await this.#find(ctx.em, id);
    Object.assign(playbook, Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)), { updatedAt: new Date() });
    await ctx.em.flush();
    return PLAYBOOK.toRecord(playbook);
  }

  /** Deletes a playbook and its resource files. */
  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true; message: string }> {
    const playbook = await this.#find(ctx.em, id);
    await ctx.em.remove(playbook).flush();
    for (const resource of playbook.resources) {
      // The playbook is gone whatever happens here; a file left behind is only logged.
      await this.#uploads.delete(ctx, resource.fileId).catch((err) => ctx.log.warn({ err }, 'could not delete a playbook resource file'));
    }
    return { success: true, message: `Playbook ${id} deleted` };
  }

  async getResourceUploadKey(ctx: AuthenticatedContext, playbookId: string): Promise<IssuedUploadKey & PurposeLimits> {
    await this.#find(ctx.em, playbookId);
    return { ...(await this.#uploads.createKey(ctx, RESOURCE_PURPOSE)), ...this.#uploads.limitsOf(RESOURCE_PURPOSE) };
  }

  /** Appends the files uploaded with the key to the playbook's resources; `added: 0` (and no `files`) when none was sent. */
  async finalizeResourceUpload(
    ctx: AuthenticatedContext,
    playbookId: string,
    uploadKey: string,
  ): Promise<{ success: true; added: number; files?: Resource[] }> {
    await this.#find(ctx.em, playbookId);
    return this.#uploads.consume(ctx, uploadKey, RESOURCE_PURPOSE, async (uploaded, em) => {
      if (uploaded.length === 0) return { success: true as const, added: 0 };
      const files = uploaded.map((file) => ({ fileId: file.fileId, fileName: file.fileName, mimeType: file.mimeType, size: file.size }));
      const playbook = await this.#find(em, playbookId);
      playbook.resources = [...playbook.resources, ...files];
      playbook.updatedAt = new Date();
      await em.flush();
      return { success: true as const, added: files.length, files };
    });
  }

  async #find(em: EntityManager, id: string): Promise<Playbook> {
    const playbook = isUuid(id) ? await em.findOne(Playbook, { id }) : null;
    // Word for word the message clients of this API already receive.
    if (!playbook) throw new RpcError('NOT_FOUND', `Playbook ${id} not found`);
    return playbook;
  }
}
