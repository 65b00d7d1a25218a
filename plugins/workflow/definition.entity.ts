import { defineEntity, type Author, type InferEntity } from 'rpc-service/plugin';
import type { WorkflowEdge, WorkflowNode } from './graph.ts';

/**
 * A workflow: a graph of nodes joined by edges, with initial variables, of
 * one subscription. Names are unique in a subscription, whatever their case:
 * executeWorkflow finds a workflow by its name.
 */
export const Workflow = defineEntity({
  name: 'Workflow',
  tableName: 'workflow_definition',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    /** Who created it. */
    userId: p.uuid(),
    /** Who shaped what it does: its creator, then each later editor (plugins/workflow/README.md, "Whose rights a run has"). */
    authors: p.json<Author[]>(),
    /** The project of the context it was created in; null: every project. */
    projectId: p.text().nullable(),
    /** What the workflow belongs to in the caller's application (a contact, a campaign), as the caller names it. */
    contextId: p.text().nullable(),
    name: p.text(),
    description: p.text(),
    nodes: p.json<WorkflowNode[]>(),
    edges: p.json<WorkflowEdge[]>(),
    variables: p.json<Record<string, unknown>>(),
    tags: p.array(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  }),
  uniques: [
    {
      name: 'workflow_definition_name_unique',
      expression: 'create unique index "workflow_definition_name_unique" on "workflow_definition" ("subscription_id", lower("name"))',
    },
  ],
  indexes: [{ properties: ['subscriptionId', 'updatedAt'] }],
});
export type Workflow = InferEntity<typeof Workflow>;
