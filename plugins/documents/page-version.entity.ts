import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** Every version of a page as it was written, the current one included. */
export const PageVersion = defineEntity({
  name: 'PageVersion',
  tableName: 'documents_page_version',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    pageId: p.uuid(),
    version: p.integer(),
    parentId: p.uuid().nullable(),
    title: p.text(),
    content: p.text(),
    tags: p.json<string[]>(),
    isArchived: p.boolean(),
    modifiedBy: p.uuid(),
    modifiedAt: p.datetime(),
  }),
  uniques: [{ properties: ['subscriptionId', 'pageId', 'version'] }],
  indexes: [{ properties: ['subscriptionId', 'pageId'] }],
});
export type PageVersion = InferEntity<typeof PageVersion>;
