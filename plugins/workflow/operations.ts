import * as v from 'valibot';
import { collectionFieldValuesParams, envelope, isUuid, listParams, listSchema, recordId, stringList } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { graphFields } from './graph.ts';
import { INSTANCE_STATUSES } from './instance.entity.ts';
import { LEAD } from './leads.ts';
import { INSTANCE } from './runner.ts';
import { WORKFLOW } from './workflow.service.ts';

const name = v.pipe(
  v.string('name must be a string'),
  v.trim(),
  v.minLength(1, 'name must not be empty'),
  v.maxLength(200, 'name must be at most 200 characters'),
  // executeWorkflow takes a name or an _id: a name shaped like an id would be ambiguous.
  v.check((value) => !isUuid(value), 'name must not be a UUID (workflows are run by name or by _id)'),
);
const tags = stringList('tags');
/** The fields create and update take: a workflow's fields, without _id, subscriptionId, projectId and the timestamps. */
const fields = {
  description: v.optional(v.pipe(v.string('description must be a string'), v.maxLength(5000, 'description must be at most 5000 characters'))),
  nodes: v.optional(graphFields.nodes),
  edges: v.optional(graphFields.edges),
  variables: v.optional(v.record(v.string(), v.unknown(), 'variables must be an object')),
  tags: v.optional(tags),
  contextId: v.optional(v.nullable(v.pipe(v.string('contextId must be a string'), v.maxLength(200)))),
};

export const create = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Create a workflow (name unique in the subscription, whatever its case); its graph is checked: node types and configs, edges, one start node, every node reachable, an end on every path.',
  result: WORKFLOW.schema,
  params: v.object({ name, ...fields }),
  handler: ({ params, ctx, deps }) => deps.workflowService.create(ctx, params),
});

export const update = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Change the fields given of a workflow you created (admins and staff: any); a new graph is checked whole.',
  result: WORKFLOW.schema,
  params: v.object({ _id: recordId('_id'), name: v.optional(name), ...fields }),
  handler: ({ params: { _id, ...input }, ctx, deps }) => deps.workflowService.update(ctx, _id, input),
});

export const remove = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Delete a workflow you created (admins and staff: any); answers {success: true} without data.',
  result: v.strictObject({}),
  params: v.object({ _id: recordId('_id') }),
  handler: async ({ params, ctx, deps }) => {
    await deps.workflowService.delete(ctx, params._id);
    return envelope();
  },
});

export const findById = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One workflow of the subscription (the parameter is named id).',
  result: WORKFLOW.schema,
  params: v.object({ id: recordId('id') }),
  handler: ({ params, ctx, deps }) => deps.workflowService.findById(ctx, params.id),
});

export const getData = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Workflows of the subscription with document-store filters (name, description, tags, contextId, projectId, userId, dates; $regex with $options), sorted, paged (pageSize 25 by default).',
  result: listSchema(WORKFLOW.schema),
  params: v.object(listParams(25)),
  handler: ({ params, ctx, deps }) => deps.workflowService.getData(ctx, params),
});

export const getWorkflowTags = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The distinct tags of the subscription's workflows, as {value, label}.",
  result: v.array(v.strictObject({ value: v.string(), label: v.string() })),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.workflowService.getWorkflowTags(ctx),
});

export const getFieldValues = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    'Values for a form field, as {value, label}, from a collection (workflows, agentConfigs, and those plugins add), filtered and sorted; at most 1000 records read.',
  result: v.array(v.strictObject({ value: v.unknown(), label: v.string() })),
  params: collectionFieldValuesParams,
  handler: ({ params, ctx, deps }) => deps.workflowService.getFieldValues(ctx, params.reference),
});

export const getAvailableTools = defineOperation({
  access: 'user',
  kind: 'read',
  describe:
    "The tools the server runs, which workflow tool nodes and agents call: {name, description, schema}, schema the JSON Schema of its params. An agent's tools may also name tools its client runs itself; those are not listed here.",
  result: v.array(v.strictObject({ name: v.string(), description: v.string(), schema: v.record(v.string(), v.unknown()) })),
  params: v.object({}),
  handler: ({ deps }) => deps.workflowService.getAvailableTools(),
});

export const generateDynamicLeads = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Leads {name, email, company} from a lead-generating tool: CsvLeadImporter {csv, delimiter?}, JsonLeadImporter {json | leads}, or one a plugin adds.',
  result: v.array(LEAD),
  params: v.object({
    toolClassName: v.pipe(v.string('toolClassName must be a string'), v.minLength(1, 'toolClassName must not be empty'), v.maxLength(100)),
    properties: v.unknown(),
  }),
  handler: ({ params, ctx, deps }) => deps.workflowService.generateDynamicLeads(ctx, params.toolClassName, params.properties),
});

const object = (label: string) => v.record(v.string(), v.unknown(), `${label} must be an object`);
const workflowContext = v.optional(v.object({ id: v.optional(recordId('context.id')) }, 'context must be an object'));

export const executeWorkflow = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Run a workflow (by name or _id) as the caller with workflowArgs: {result: {status: "completed", output, instanceId}}, or {status: "waiting", instanceId} when it waits (for an event, a time, or longer than WORKFLOW_EXECUTE_WAIT_MS); WORKFLOW_FAILED when the run fails.',
  result: v.union([
    v.strictObject({ result: v.strictObject({ status: v.literal('completed'), output: v.unknown(), instanceId: v.string() }) }),
    v.strictObject({ status: v.literal('waiting'), instanceId: v.string() }),
  ]),
  params: v.object({
    workflowIdentifier: v.pipe(v.string(), v.minLength(1, 'workflowIdentifier must not be empty'), v.maxLength(200)),
    workflowArgs: v.optional(object('workflowArgs'), {}),
    context: v.optional(object('context')),
  }),
  handler: ({ params, ctx, deps }) => deps.workflowRunner.executeWorkflow(ctx, params.workflowIdentifier, params.workflowArgs),
});

export const sendEventToWorkflow = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Deliver an event to a run of a workflow: the run context.id names (kept for it when it is not waiting for the event yet), else the oldest run waiting for it; NOT_FOUND when there is none. Answers {success: true}.',
  result: v.strictObject({}),
  params: v.object({
    workflowName: v.pipe(v.string(), v.minLength(1, 'workflowName must not be empty'), v.maxLength(200)),
    eventName: v.pipe(v.string(), v.minLength(1, 'eventName must not be empty'), v.maxLength(200)),
    eventData: object('eventData'),
    context: workflowContext,
  }),
  handler: async ({ params, ctx, deps }) => {
    await deps.workflowRunner.sendEventToWorkflow(ctx, params.workflowName, params.eventName, params.eventData, params.context?.id);
    return envelope();
  },
});

export const listInstances = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "Runs of the subscription's workflows, newest first: of one workflow (workflowId) and in one status when given.",
  result: listSchema(INSTANCE.schema),
  params: v.object({
    workflowId: v.optional(recordId('workflowId')),
    status: v.optional(v.picklist(INSTANCE_STATUSES, `status must be one of ${INSTANCE_STATUSES.join(', ')}`)),
    page: listParams(25).page,
    pageSize: listParams(25).pageSize,
  }),
  handler: ({ params, ctx, deps }) => deps.workflowRunner.listInstances(ctx, params),
});

export const getInstance = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'One run: status, where it is (cursor), variables, output or error, what it waits for, and its steps.',
  result: INSTANCE.schema,
  params: v.object({ instanceId: recordId('instanceId') }),
  handler: ({ params, ctx, deps }) => deps.workflowRunner.getInstance(ctx, params.instanceId),
});

export const cancelInstance = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Cancel a run that has not ended (its starter, admins and staff); it stops before its next node.',
  result: INSTANCE.schema,
  params: v.object({ instanceId: recordId('instanceId') }),
  handler: ({ params, ctx, deps }) => deps.workflowRunner.cancelInstance(ctx, params.instanceId),
});
