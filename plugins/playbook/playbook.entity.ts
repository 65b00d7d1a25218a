import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A file attached to a playbook (uploaded through finalizeResourceUpload). */
export interface Resource {
  fileId: string;
  fileName: string;
  mimeType: string;
  size: number;
}

/**
 * A playbook: a named, tagged guide (Markdown content) a team or an agent
 * follows, with the files it refers to. `source` says how it came to be
 * (`api` for playbooks made through PlaybookRpc).
 */
export const Playbook = defineEntity({
  name: 'Playbook',
  tableName: 'playbook',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    createdBy: p.uuid(),
    source: p.text(),
    name: p.text(),
    description: p.text(),
    content: p.text(),
    category: p.text().nullable(),
    tags: p.array(),
    isActive: p.boolean(),
    resources: p.json<Resource[]>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'updatedAt'] }],
});
export type Playbook = InferEntity<typeof Playbook>;
