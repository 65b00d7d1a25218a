import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  authorOf,
  conflict,
  defineRecord,
  forbidden,
  isUuid,
  mayChangeRecordOf,
  notFound,
  toOrderBy,
  toWhere,
  validationError,
  withAuthor,
  type AiCatalogue,
  type AuthenticatedContext,
  type CollectionCatalogue,
  type EntityManager,
  type Extensions,
  type InferRecord,
  type FieldReference,
  type ListEnvelope,
  type ListQuery,
  type ToolCatalogue,
} from 'rpc-service/plugin';
import { checkGraph, type WorkflowEdge, type WorkflowNode } from './graph.ts';
import { builtInLeadSources, LeadSourceError, type Lead, type LeadSourceContribution } from './leads.ts';
import { BUILT_IN_NODE_TYPES } from './node-types.ts';
import { Workflow } from './definition.entity.ts';

export interface WorkflowInput {
  name?: string;
  description?: string;
  nodes?: WorkflowNode[];
  edges?: WorkflowEdge[];
  variables?: Record<string, unknown>;
  tags?: string[];
  contextId?: string | null;
}

export const WORKFLOW = defineRecord(Workflow, { hide: ['authors'] });
export type WorkflowRecord = InferRecord<typeof WORKFLOW>;

/**
 * Workflows of a subscription: graphs checked when saved (node types and
 * their configs, edges, one start, every node reachable, an end on every
 * path), listed with the document-store filters; the values forms pick
 * from; lead-generating tools.
 */
export class WorkflowService {
  readonly #tools: ToolCatalogue;
  readonly #catalogue: AiCatalogue;
  readonly #collections: CollectionCatalogue;
  readonly #extensions: Extensions;
  #configSchemas?: Map<string, v.GenericSchema>;

  constructor({
    tools,
    aiCatalogue,
    collections,
    extensions,
  }: {
    tools: ToolCatalogue;
    aiCatalogue: AiCatalogue;
    collections: CollectionCatalogue;
    extensions: Extensions;
  }) {
    this.#tools = tools;
    this.#catalogue = aiCatalogue;
    this.#collections = collections;
    this.#extensions = extensions;
  }

  /** The config schema of every node type: the built-in ones, then those plugins contribute. */
  get configSchemas(): ReadonlyMap<string, v.GenericSchema> {
    this.#configSchemas ??= new Map<string, v.GenericSchema>([
      ...Object.entries(BUILT_IN_NODE_TYPES).map(([type, definition]) => [type, definition.config] as const),
      ...this.#extensions.get('workflow.nodeTypes').map(({ value }) => [value.type, value.config] as const),
    ]);
    return this.#configSchemas;
  }

  async create(ctx: AuthenticatedContext, input: WorkflowInput & { name: string }): Promise<WorkflowRecord> {
    const nodes = this.#checked(input.nodes ?? [], input.edges ?? []);
    return ctx.em.fork().transactional(async (em) => {
      await this.#checkNameFree(em, input.name);
      const now = new Date();
      const workflow = em.create(Workflow, {
        id: randomUUID(),
        subscriptionId: ctx.subscriptionId,
        userId: ctx.userId,
        authors: [authorOf(ctx)],
        projectId: ctx.projectId ?? null,
        contextId: input.contextId ?? null,
        name: input.name,
        description: input.description ?? '',
        nodes,
        edges: input.edges ?? [],
        variables: input.variables ?? {},
        tags: input.tags ?? [],
        createdAt: now,
        updatedAt: now,
      });
      await em.flush();
      return WORKFLOW.toRecord(workflow);
    });
  }

  /** Changes the fields given; a new graph (nodes, edges or both) is checked whole. */
  async update(ctx: AuthenticatedContext, id: string, input: WorkflowInput): Promise<WorkflowRecord> {
    return ctx.em.fork().transactional(async (em) => {
      const workflow = await this.#changeable(ctx, em, id);
      if (input.nodes !== undefined || input.edges !== undefined) {
        workflow.nodes = this.#checked(input.nodes ?? workflow.nodes, input.edges ?? workflow.edges);
        if (input.edges !== undefined) workflow.edges = input.edges;
      }
      if (input.name !== undefined && input.name.toLowerCase() !== workflow.name.toLowerCase()) await this.#checkNameFree(em, input.name);
      if (input.name !== undefined) workflow.name = input.name;
      if (input.description !== undefined) workflow.description = input.description;
      if (input.variables !== undefined) workflow.variables = input.variables;
      if (input.tags !== undefined) workflow.tags = input.tags;
      if (input.contextId !== undefined) workflow.contextId = input.contextId;
      // Whoever saves a workflow shapes what its runs do: they act with no more than the weakest of them (runner.ts).
      workflow.authors = withAuthor(workflow.authors, authorOf(ctx));
      workflow.updatedAt = new Date();
      await em.flush();
      return WORKFLOW.toRecord(workflow);
    });
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<void> {
    await ctx.em.fork().transactional(async (em) => {
      em.remove(await this.#changeable(ctx, em, id));
    });
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<WorkflowRecord> {
    return WORKFLOW.toRecord(await this.#find(ctx.em, id));
  }

  /** A workflow by `_id`, else by name (any case); NOT_FOUND when neither names one of the subscription. */
  async findByIdentifier(em: EntityManager, identifier: string): Promise<Workflow> {
    const workflow = isUuid(identifier) ? await em.findOne(Workflow, { id: identifier }) : null;
    const found = workflow ?? (await em.findOne(Workflow, { name: { $ilike: likeExactly(identifier) } }));
    if (!found) throw notFound(`Workflow ${identifier} not found`);
    return found;
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<ListEnvelope<WorkflowRecord>> {
    const sort = toOrderBy(query.sort, WORKFLOW.fields);
    const [workflows, totalCount] = await ctx.em.findAndCount(Workflow, toWhere(query.filter, WORKFLOW.fields), {
      // The caller's sort first; the most recently changed first by default, then id, settle ties.
      orderBy: { ...sort, ...(Object.keys(sort).length === 0 ? { updatedAt: 'desc' } : {}), id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: workflows.map(WORKFLOW.toRecord), totalCount };
  }

  /** The workflows' distinct tags, in alphabetical order. */
  async getWorkflowTags(ctx: AuthenticatedContext): Promise<{ value: string; label: string }[]> {
    const rows = await ctx.em.execute<{ tag: string }[]>('select distinct unnest(tags) as tag from workflow_definition where subscription_id = ? order by 1', [
      ctx.subscriptionId,
    ]);
    return rows.map(({ tag }) => ({ value: tag, label: tag }));
  }

  getFieldValues(ctx: AuthenticatedContext, reference: FieldReference): Promise<{ value: unknown; label: string }[]> {
    return this.#collections.fieldValues(ctx, reference);
  }

  /** The tools workflows (tool nodes) and agents may use, with their params schemas. */
  getAvailableTools(): { name: string; description: string; schema: Record<string, unknown> }[] {
    return this.#tools.list().map((tool) => ({ name: tool.name, description: tool.describe, schema: tool.params }));
  }

  /** The `workflows` collection for getFieldValues: the subscription's workflows as getData lists them. */
  async listForCollection(ctx: AuthenticatedContext, query: Pick<ListQuery, 'filter' | 'sort'> & { limit: number }): Promise<WorkflowRecord[]> {
    return (await this.getData(ctx, { ...query, page: 1, pageSize: query.limit })).data;
  }

  /** Leads from a lead-generating tool: a built-in one (CsvLeadImporter, JsonLeadImporter) or one a plugin contributes. */
  async generateDynamicLeads(ctx: AuthenticatedContext, toolClassName: string, properties: unknown): Promise<Lead[]> {
    const sources: LeadSourceContribution[] = [...builtInLeadSources, ...this.#extensions.get('workflow.leadSources').map(({ value }) => value)];
    const found = sources.find((source) => source.name === toolClassName);
    if (!found) {
      throw validationError([{ path: 'toolClassName', message: `unknown lead source; known: ${sources.map((source) => source.name).join(', ')}` }]);
    }
    const parsed = v.safeParse(found.properties, properties);
    if (!parsed.success) {
      throw validationError(parsed.issues.map((issue) => ({ path: ['properties', v.getDotPath(issue)].filter(Boolean).join('.'), message: issue.message })));
    }
    try {
      return await found.generate(ctx, parsed.output);
    } catch (error) {
      if (error instanceof LeadSourceError) throw validationError([{ path: 'properties', message: error.message }]);
      throw error;
    }
  }

  /** The graph checked, with the node configs as parsed; tool nodes name tools of the catalogue, ai nodes chat models of it. */
  #checked(nodes: WorkflowNode[], edges: WorkflowEdge[]): WorkflowNode[] {
    const chatModels = new Set(this.#catalogue.models.filter((model) => model.type === 'chat').map((model) => model.id));
    return checkGraph(nodes, edges, this.configSchemas, (node) => {
      const config = node.config as { tool?: string; model?: string };
      if (node.type === 'tool' && !this.#tools.get(config.tool!)) return [`${config.tool} is not an available tool (see getAvailableTools)`];
      if (node.type === 'ai' && config.model !== undefined && !chatModels.has(config.model)) return [`${config.model} is not a chat model of the AI catalogue`];
      return [];
    });
  }

  async #checkNameFree(em: EntityManager, name: string): Promise<void> {
    if (await em.count(Workflow, { name: { $ilike: likeExactly(name) } })) throw conflict(`A workflow named ${name} already exists`);
  }

  async #find(em: EntityManager, id: string): Promise<Workflow> {
    const workflow = await em.findOne(Workflow, { id });
    if (!workflow) throw notFound(`Workflow ${id} not found`);
    return workflow;
  }

  async #changeable(ctx: AuthenticatedContext, em: EntityManager, id: string): Promise<Workflow> {
    const workflow = await this.#find(em, id);
    if (!mayChangeRecordOf(ctx, workflow.userId)) throw forbidden('Only its creator, admins and staff may change this workflow');
    return workflow;
  }
}

/** A LIKE pattern matching the text exactly (its % _ and \ escaped): with ilike, a case-insensitive equality. */
const likeExactly = (text: string) => text.replace(/[\\%_]/g, (character) => `\\${character}`);
