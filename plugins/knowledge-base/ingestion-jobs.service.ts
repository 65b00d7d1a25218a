import * as v from 'valibot';
import { conflict, defineRecord, LockMode, notFound, type AuthenticatedContext, type EntityManager, type InferRecord, type Jobs } from 'rpc-service/plugin';
import { KnowledgeDocument } from './document.entity.ts';
import { liveDocument } from './documents.service.ts';
import { Ingestion, INGESTION_STATES, type IngestionState } from './ingestion.entity.ts';
import { queueIngestion } from './ingestion.service.ts';

const INGESTION = defineRecord(Ingestion, { hide: ['id', 'subscriptionId', 'jobId'] });

/** An ingestion is addressed as a job: its id is the record's `jobId` (the queue's own job id stays inside). */
export type IngestionRecord = InferRecord<typeof INGESTION> & { jobId: string };
/** Its schema: the record adds jobId. */
export const INGESTION_SCHEMA = v.strictObject({
  ...INGESTION.entries,
  jobId: v.string(),
  // The derived schema takes any text for the state.
  state: v.picklist(INGESTION_STATES),
});

const toIngestion = (ingestion: Ingestion): IngestionRecord => ({ jobId: ingestion.id, ...INGESTION.toRecord(ingestion) });

/** The ingestion jobs of the knowledge base: listed, read, retried and cancelled. */
export class IngestionJobsService {
  readonly #jobs: Jobs;

  constructor(deps: { jobs: Jobs }) {
    this.#jobs = deps.jobs;
  }

  /** Ingestion runs, newest first. */
  async listJobs(ctx: AuthenticatedContext, query: { documentId?: string; state?: IngestionState; page: number; limit: number }) {
    const where = { ...(query.documentId ? { documentId: query.documentId } : {}), ...(query.state ? { state: query.state } : {}) };
    const [runs, totalCount] = await ctx.em.findAndCount(Ingestion, where, {
      orderBy: { createdAt: 'desc', id: 'desc' },
      limit: query.limit,
      offset: (query.page - 1) * query.limit,
    });
    return { data: runs.map(toIngestion), totalCount, page: query.page, limit: query.limit };
  }

  async getJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    return toIngestion(await this.#ingestion(ctx.em, jobId));
  }

  /** Runs a failed or cancelled ingestion again, if its version is still the document's latest. */
  async retryJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const previous = await this.#ingestion(em, jobId);
      if (previous.state !== 'failed' && previous.state !== 'cancelled')
        throw conflict(`Job ${jobId} is ${previous.state}; only a failed or cancelled job can be retried`);
      const document = await liveDocument(em, previous.documentId, true);
      if (document.version !== previous.version)
        throw conflict(`Job ${jobId} ingested version ${previous.version}; the document is at version ${document.version}`);
      Object.assign(document, { status: 'pending', error: null, updatedAt: new Date() });
      return toIngestion(await queueIngestion(this.#jobs, ctx, em, document));
    });
  }

  /**
   * Stops an ingestion that has not finished: a queued one never runs, a
   * running one stops before it writes to the index. The document keeps what
   * the index holds: ready with an earlier version's chunks, else failed.
   */
  async cancelJob(ctx: AuthenticatedContext, jobId: string): Promise<IngestionRecord> {
    const ingestion = await ctx.em.fork().transactional(async (em) => {
      const found = await this.#ingestion(em, jobId, true);
      if (found.state !== 'queued' && found.state !== 'running')
        throw conflict(`Job ${jobId} is ${found.state}; only a queued or running job can be cancelled`);
      Object.assign(found, { state: 'cancelled', finishedAt: new Date() });
      const document = await em.findOne(KnowledgeDocument, { id: found.documentId, version: found.version, status: { $ne: 'deleted' } });
      if (document)
        Object.assign(document, document.chunkCount > 0 ? { status: 'ready', error: null } : { status: 'failed', error: 'Ingestion cancelled' }, {
          updatedAt: new Date(),
        });
      await em.flush();
      return found;
    });
    if (ingestion.jobId) await this.#jobs.cancel('ingest', ingestion.jobId);
    return toIngestion(ingestion);
  }

  async #ingestion(em: EntityManager, id: string, lock = false): Promise<Ingestion> {
    const ingestion = await em.findOne(Ingestion, { id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
    if (!ingestion) throw notFound(`Job ${id} not found`);
    return ingestion;
  }
}
