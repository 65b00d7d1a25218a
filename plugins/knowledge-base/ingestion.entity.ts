import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const INGESTION_STATES = ['queued', 'running', 'done', 'failed', 'cancelled'] as const;
export type IngestionState = (typeof INGESTION_STATES)[number];

/** One run of ingestion for a document version: what listJobs shows, retryJob repeats and cancelJob stops. */
export const Ingestion = defineEntity({
  name: 'Ingestion',
  tableName: 'knowledge_base_ingestion',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    documentId: p.uuid(),
    version: p.integer(),
    state: p.enum([...INGESTION_STATES]),
    error: p.text().nullable(),
    /** The job service's job. */
    jobId: p.uuid().nullable(),
    createdBy: p.uuid(),
    createdAt: p.datetime(),
    startedAt: p.datetime().nullable(),
    finishedAt: p.datetime().nullable(),
  }),
  indexes: [{ properties: ['subscriptionId', 'createdAt'] }, { properties: ['subscriptionId', 'documentId'] }],
});
export type Ingestion = InferEntity<typeof Ingestion>;
