import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/**
 * A page of a documentation instance (a set of pages, named by the caller's
 * documentInstanceId), in a tree through parentId. Titles are unique within
 * an instance (regardless of case), so getByTitle names one page.
 */
export const Page = defineEntity({
  name: 'Page',
  tableName: 'documents_page',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    instanceId: p.text(),
    parentId: p.uuid().nullable(),
    title: p.text(),
    content: p.text(),
    tags: p.json<string[]>(),
    version: p.integer(),
    isArchived: p.boolean(),
    createdBy: p.uuid(),
    lastModifiedBy: p.uuid(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  indexes: [{ properties: ['subscriptionId', 'instanceId', 'parentId'] }],
  uniques: [
    {
      name: 'documents_page_title_unique',
      expression: 'create unique index "documents_page_title_unique" on "documents_page" ("subscription_id", "instance_id", lower("title"))',
    },
  ],
});
export type Page = InferEntity<typeof Page>;
