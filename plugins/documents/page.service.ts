import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  conflict,
  defineRecord,
  notFound,
  validationError,
  type AuthenticatedContext,
  type EntityManager,
  type InferRecord,
  type ListEnvelope,
  type PluginServices,
} from 'rpc-service/plugin';
import { Page } from './page.entity.ts';
import { PageVersion } from './page-version.entity.ts';

/** The pages' name in the knowledge base's search index. */
const SOURCE = 'documents';

const PAGE = defineRecord(Page, { hide: ['subscriptionId', 'instanceId'] });
const VERSION = defineRecord(PageVersion, { hide: ['id', 'subscriptionId', 'pageId'] });

/** A page names its instance `documentInstanceId`, and repeats its id as `uuid` (search hits name the page by it, `metadata.recordId`). */
export type DocumentRecord = InferRecord<typeof PAGE> & { uuid: string; documentInstanceId: string };
export type VersionRecord = InferRecord<typeof VERSION>;

/** The declared result of an answer with a page: PAGE's columns (tags spelled out), uuid and documentInstanceId. */
export const DOCUMENT_SCHEMA = v.strictObject({
  ...PAGE.entries,
  // A JSON column, any value to the view.
  tags: v.array(v.string()),
  uuid: v.string(),
  documentInstanceId: v.string(),
});

/** The declared result of an answer with a version of a page: VERSION's columns, tags spelled out. */
export const VERSION_SCHEMA = v.strictObject({
  ...VERSION.entries,
  // A JSON column, any value to the view.
  tags: v.array(v.string()),
});

/** The declared result of an answer with a search hit (DocumentSearchHit). */
export const SEARCH_HIT_SCHEMA = v.strictObject({
  id: v.string(),
  payload: v.strictObject({ content: v.string(), metadata: v.strictObject({ title: v.string(), recordId: v.string() }) }),
  score: v.number(),
});

export interface DocumentSearchHit {
  /** The matching chunk of the page. */
  id: string;
  payload: { content: string; metadata: { title: string; recordId: string } };
  /** Cosine similarity of the question's embedding and the chunk's. */
  score: number;
}

export interface CreateInput {
  documentInstanceId: string;
  title: string;
  content?: string;
  parentId?: string | null;
  tags?: string[];
}

export interface UpdateInput {
  title?: string;
  content?: string;
  parentId?: string | null;
  tags?: string[];
  isArchived?: boolean;
}

const toRecord = (page: Page): DocumentRecord => ({ ...PAGE.toRecord(page), uuid: page.id, documentInstanceId: page.instanceId });

/** What a search may filter on (list operators on these keys), as the index keeps it with each chunk. */
const searchMetadata = (page: Page) => ({
  title: page.title,
  tags: page.tags,
  parentId: page.parentId ?? null,
  version: page.version,
  isArchived: page.isArchived,
  createdBy: page.createdBy,
  lastModifiedBy: page.lastModifiedBy,
});

/**
 * Documentation pages: trees of Markdown pages per documentation instance,
 * every version kept, each page chunked and embedded in the knowledge base's
 * index so `search` finds passages by meaning.
 */
export class PageService {
  readonly #index: PluginServices['knowledgeIndex'];

  constructor({ knowledgeIndex }: { knowledgeIndex: PluginServices['knowledgeIndex'] }) {
    this.#index = knowledgeIndex;
  }

  /** Every page of the instance, oldest first (a parent before its children). */
  async getAllDocuments(ctx: AuthenticatedContext, documentInstanceId: string): Promise<ListEnvelope<DocumentRecord>> {
    const pages = await ctx.em.find(Page, { instanceId: documentInstanceId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return { data: pages.map(toRecord), totalCount: pages.length };
  }

  async getById(ctx: AuthenticatedContext, id: string): Promise<DocumentRecord> {
    return toRecord(await this.#find(ctx.em, id));
  }

  /** The page with this title in the instance, compared regardless of case. */
  async getByTitle(ctx: AuthenticatedContext, documentInstanceId: string, title: string): Promise<DocumentRecord> {
    const [page] = await ctx.em.find(Page, { instanceId: documentInstanceId, title: { $ilike: likeLiteral(title) } }, { limit: 1 });
    if (!page) throw notFound(`No page titled "${title}" in documentation instance ${documentInstanceId}`);
    return toRecord(page);
  }

  async create(ctx: AuthenticatedContext, input: CreateInput): Promise<DocumentRecord> {
    if (input.parentId) await this.#parent(ctx.em, input.parentId, input.documentInstanceId, null);
    const now = new Date();
    const page: Page = {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      instanceId: input.documentInstanceId,
      parentId: input.parentId ?? null,
      title: input.title,
      content: input.content ?? '',
      tags: input.tags ?? [],
      version: 1,
      isArchived: false,
      createdBy: ctx.userId,
      lastModifiedBy: ctx.userId,
      createdAt: now,
      updatedAt: now,
    };
    const [prepared] = await this.#index.prepare([this.#indexed(page)]);
    await ctx.em.fork().transactional(async (em) => {
      await this.#checkTitleFree(em, page.instanceId, page.title, page.id);
      em.create(Page, page);
      em.create(PageVersion, versionOf(page));
      await em.flush();
      await this.#index.write(ctx, em, prepared!);
    });
    return toRecord(page);
  }

  /**
   * Writes the changes as a new version (the earlier ones are kept); the
   * chunks whose text is unchanged keep their embeddings. Nothing changed:
   * the page as it is, no new version.
   */
  async update(ctx: AuthenticatedContext, id: string, changes: UpdateInput): Promise<DocumentRecord> {
    const current = await this.#find(ctx.em, id);
    const next = {
      title: changes.title ?? current.title,
      content: changes.content ?? current.content,
      parentId: changes.parentId === undefined ? (current.parentId ?? null) : changes.parentId,
      tags: changes.tags ?? current.tags,
      isArchived: changes.isArchived ?? current.isArchived,
    };
    const unchanged =
      next.title === current.title &&
      next.content === current.content &&
      next.parentId === (current.parentId ?? null) &&
      next.isArchived === current.isArchived &&
      JSON.stringify(next.tags) === JSON.stringify(current.tags);
    if (unchanged) return toRecord(current);
    if (next.parentId !== (current.parentId ?? null) && next.parentId !== null) await this.#parent(ctx.em, next.parentId, current.instanceId, current.id);

    const page: Page = { ...current, ...next, version: current.version + 1, lastModifiedBy: ctx.userId, updatedAt: new Date() };
    const [prepared] = await this.#index.prepare([this.#indexed(page)]);
    await ctx.em.fork().transactional(async (em) => {
      if (next.title !== current.title) await this.#checkTitleFree(em, page.instanceId, page.title, page.id);
      // The version read is the one replaced: an update made meanwhile is not overwritten.
      const written = await em.nativeUpdate(
        Page,
        { id, version: current.version },
        { ...next, version: page.version, lastModifiedBy: page.lastModifiedBy, updatedAt: page.updatedAt },
      );
      if (written !== 1) throw conflict(`Page ${id} was changed meanwhile; read it again and retry`);
      em.create(PageVersion, versionOf(page));
      await em.flush();
      await this.#index.write(ctx, em, prepared!);
    });
    return toRecord(page);
  }

  /** Deletes the page, every page under it, their versions and what the index holds for them. */
  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true; deletedCount: number }> {
    await this.#find(ctx.em, id);
    const deleted = await ctx.em.fork().transactional(async (em) => {
      const rows = await em.execute<{ id: string }[]>(
        `with recursive tree as (
           select id from documents_page where id = ? and subscription_id = ?
           union
           select page.id from documents_page page join tree on page.parent_id = tree.id where page.subscription_id = ?)
         delete from documents_page where subscription_id = ? and id in (select id from tree) returning id`,
        [id, ctx.subscriptionId, ctx.subscriptionId, ctx.subscriptionId],
      );
      const ids = rows.map((row) => row.id);
      await em.nativeDelete(PageVersion, { pageId: { $in: ids } });
      await this.#index.remove(ctx.subscriptionId, em, SOURCE, ids);
      return ids.length;
    });
    return { success: true, deletedCount: deleted };
  }

  /** Every version of the page, newest first. */
  async getVersions(ctx: AuthenticatedContext, id: string): Promise<VersionRecord[]> {
    await this.#find(ctx.em, id);
    const versions = await ctx.em.find(PageVersion, { pageId: id }, { orderBy: { version: 'desc' } });
    return versions.map(VERSION.toRecord);
  }

  /** The passages of the instance's pages closest in meaning to the question; archived pages are left out. */
  async search(
    ctx: AuthenticatedContext,
    query: { documentInstanceId: string; queryText: string; topK: number; filter?: unknown },
  ): Promise<DocumentSearchHit[]> {
    const hits = await this.#index.search(ctx, {
      source: SOURCE,
      collection: query.documentInstanceId,
      queryText: query.queryText,
      topK: query.topK,
      filter: query.filter === undefined ? { isArchived: false } : { $and: [{ isArchived: false }, query.filter] },
      mode: 'semantic',
    });
    return hits.map((hit) => ({
      id: hit.chunkId,
      payload: { content: hit.text, metadata: { title: String(hit.metadata.title), recordId: hit.recordId } },
      score: hit.score,
    }));
  }

  #indexed(page: Page) {
    return { source: SOURCE, recordId: page.id, collection: page.instanceId, title: page.title, markdown: page.content, metadata: searchMetadata(page) };
  }

  async #find(em: EntityManager, id: string): Promise<Page> {
    const page = await em.findOne(Page, { id });
    if (!page) throw notFound(`Page ${id} not found`);
    return page;
  }

  /** The parent must be a page of the same instance, and not the page itself or one under it. */
  async #parent(em: EntityManager, parentId: string, instanceId: string, pageId: string | null): Promise<void> {
    const parent = await em.findOne(Page, { id: parentId });
    if (!parent || parent.instanceId !== instanceId) {
      throw validationError([{ path: 'parentId', message: `no page ${parentId} in documentation instance ${instanceId}` }]);
    }
    if (pageId === null) return;
    const [cycle] = await em.execute<{ id: string }[]>(
      `with recursive above as (
         select id, parent_id from documents_page where id = ? and subscription_id = ?
         union
         select page.id, page.parent_id from documents_page page join above on page.id = above.parent_id where page.subscription_id = ?)
       select id from above where id = ? limit 1`,
      [parentId, parent.subscriptionId, parent.subscriptionId, pageId],
    );
    if (cycle) throw validationError([{ path: 'parentId', message: 'a page cannot move under itself or a page beneath it' }]);
  }

  async #checkTitleFree(em: EntityManager, instanceId: string, title: string, pageId: string): Promise<void> {
    const taken = await em.findOne(Page, { instanceId, title: { $ilike: likeLiteral(title) }, id: { $ne: pageId } });
    if (taken) throw conflict(`A page titled "${taken.title}" already exists in documentation instance ${instanceId}`);
  }
}

function versionOf(page: Page) {
  return {
    id: randomUUID(),
    subscriptionId: page.subscriptionId,
    pageId: page.id,
    version: page.version,
    parentId: page.parentId ?? null,
    title: page.title,
    content: page.content,
    tags: page.tags,
    isArchived: page.isArchived,
    modifiedBy: page.lastModifiedBy,
    modifiedAt: page.updatedAt,
  };
}

/** A title as an ILIKE pattern matching only itself (its %, _ and \ taken literally). */
const likeLiteral = (text: string): string => text.replace(/[\\%_]/g, (sign) => `\\${sign}`);
