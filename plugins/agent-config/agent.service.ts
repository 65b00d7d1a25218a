import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import {
  badRequest,
  defineRecord,
  conflict,
  fileIdOfUrl,
  fileUrl,
  forbidden,
  mayChangeRecordOf,
  notFound,
  toOrderBy,
  toWhere,
  validationError,
  type Access,
  type AiCatalogue,
  type AuthenticatedContext,
  type EntityManager,
  type InferRecord,
  type IssuedUploadKey,
  type ListEnvelope,
  type ListQuery,
  type PurposeLimits,
  type ToolCatalogue,
  type UploadService,
  type ValidationIssue,
} from 'rpc-service/plugin';
import { Agent } from './agent.entity.ts';
import { AGENT_SETTINGS, settingsFrom, type AgentInput, type AgentSettings } from './agent-settings.ts';

export const AVATAR = 'agent-avatar';
export const AVATAR_LIMITS: PurposeLimits = { maxBytes: 2 * 1024 * 1024, types: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'], maxFiles: 1 };

export interface CreateInput extends AgentInput {
  name: string;
  model: string;
  messagingContactId?: string | null;
  avatarUrl?: string | null;
  realtime?: boolean;
  /** "" : global; undefined: the caller's context project. */
  projectId?: string | null;
}

export type UpdateInput = AgentInput & { name?: string };

const VIEW = defineRecord(Agent, { hide: ['settings'] });
export const AGENT_FIELDS = VIEW.fields;

/** An agent's settings are spread into its record, beside its columns. */
export type AgentRecord = InferRecord<typeof VIEW> & AgentSettings;

const toRecord = (agent: Agent): AgentRecord => ({ ...agent.settings, ...VIEW.toRecord(agent) });

/** The record as operations answer it: its settings beside the columns VIEW shows. */
export const AGENT_SCHEMA = v.strictObject({ ...AGENT_SETTINGS.entries, ...VIEW.entries });

const ACCESS_LEVELS: readonly Access[] = ['public', 'user', 'staff', 'admin'];

/** What getAvailableTools answers: a tool of the catalogue, its params as JSON Schema. */
export const TOOL = v.strictObject({
  name: v.string(),
  describe: v.string(),
  method: v.string(),
  access: v.picklist(ACCESS_LEVELS),
  params: v.record(v.string(), v.unknown()),
});

/** AI agent configurations of a subscription: everyone reads them; their creator, admins and staff change them. */
export class AgentService {
  readonly #catalogue: AiCatalogue;
  readonly #tools: ToolCatalogue;
  readonly #uploads: UploadService;

  constructor({ aiCatalogue, tools, uploadService }: { aiCatalogue: AiCatalogue; tools: ToolCatalogue; uploadService: UploadService }) {
    this.#catalogue = aiCatalogue;
    this.#tools = tools;
    this.#uploads = uploadService;
  }

  async create(ctx: AuthenticatedContext, input: CreateInput): Promise<AgentRecord> {
    this.#checkReferences(input);
    await this.#checkNameFree(ctx.em, input.name);
    const now = new Date();
    const agent = ctx.em.create(Agent, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      userId: ctx.userId,
      projectId: input.projectId === undefined ? ctx.projectId : input.projectId === '' ? null : input.projectId,
      name: input.name,
      model: input.model,
      agentClass: input.agentClass ?? 'AIAgent',
      role: input.role ?? null,
      realtime: input.realtime ?? false,
      avatarUrl: input.avatarUrl ?? null,
      messagingContactId: input.messagingContactId ?? null,
      settings: settingsFrom(input),
      createdAt: now,
      updatedAt: now,
    });
    await ctx.em.flush();
    return toRecord(agent);
  }

  async update(ctx: AuthenticatedContext, id: string, input: UpdateInput): Promise<AgentRecord> {
    const agent = await this.#changeable(ctx, id);
    this.#checkReferences(input);
    if (input.name !== undefined && input.name !== agent.name) await this.#checkNameFree(ctx.em, input.name);
    if (input.name !== undefined) agent.name = input.name;
    if (input.model !== undefined) agent.model = input.model;
    if (input.agentClass !== undefined) agent.agentClass = input.agentClass;
    if (input.role !== undefined) agent.role = input.role;
    agent.settings = settingsFrom(input, agent.settings);
    agent.updatedAt = new Date();
    await ctx.em.flush();
    return toRecord(agent);
  }

  async findById(ctx: AuthenticatedContext, id: string): Promise<AgentRecord> {
    return toRecord(await this.#find(ctx, id));
  }

  async getData(ctx: AuthenticatedContext, query: ListQuery): Promise<ListEnvelope<AgentRecord>> {
    const sort = toOrderBy(query.sort, AGENT_FIELDS);
    const [agents, totalCount] = await ctx.em.findAndCount(Agent, toWhere(query.filter, AGENT_FIELDS), {
      // The caller's sort first; name, then id, settle ties.
      orderBy: { ...sort, name: sort.name ?? 'asc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: agents.map(toRecord), totalCount };
  }

  async delete(ctx: AuthenticatedContext, id: string): Promise<{ success: true }> {
    const agent = await this.#changeable(ctx, id);
    await ctx.em.remove(agent).flush();
    await this.#dropAvatar(ctx, agent.avatarUrl ?? null);
    return { success: true };
  }

  async getUploadKeyForAvatar(ctx: AuthenticatedContext, id: string): Promise<IssuedUploadKey> {
    await this.#changeable(ctx, id);
    return this.#uploads.createKey(ctx, AVATAR);
  }

  /** The image uploaded with the key becomes the avatar; the one it replaces is deleted. */
  async updateAvatar(ctx: AuthenticatedContext, id: string, uploadKey: string): Promise<AgentRecord> {
    await this.#changeable(ctx, id);
    const { agent, previous } = await this.#uploads.consume(ctx, uploadKey, AVATAR, async (files, em) => {
      if (files.length !== 1) throw badRequest('No image has been uploaded with this upload key yet');
      const agent = await em.findOneOrFail(Agent, { id });
      const previous = agent.avatarUrl ?? null;
      agent.avatarUrl = fileUrl(files[0]!.fileId);
      agent.updatedAt = new Date();
      return { agent, previous };
    });
    await this.#dropAvatar(ctx, previous);
    return toRecord(agent);
  }

  /** The tools the server runs for an agent (the `core.tools` catalogue); an agent's `tools` may also name tools its client runs. */
  getAvailableTools() {
    return this.#tools.list().map(({ name, describe, method, access, params }) => ({ name, describe, method, access, params }));
  }

  /**
   * The model must be in the catalogue; the speech models, when given, of their kind. Tools are not
   * checked: `tools` is any array of string, and clients name tools they run themselves.
   */
  #checkReferences(input: AgentInput): void {
    const issues: ValidationIssue[] = [];
    const models = new Map(this.#catalogue.models.map((model) => [model.id, model]));
    if (input.model !== undefined && !models.has(input.model)) issues.push({ path: 'model', message: `${input.model} is not a model of the AI catalogue` });
    for (const [field, type] of [
      ['ttsModel', 'tts'],
      ['transcriptionModel', 'transcription'],
    ] as const) {
      const id = input[field];
      if (id != null && models.get(id)?.type !== type) issues.push({ path: field, message: `${id} is not a ${type} model of the AI catalogue` });
    }
    if (issues.length > 0) throw validationError(issues);
  }

  async #checkNameFree(em: EntityManager, name: string): Promise<void> {
    if (await em.count(Agent, { name })) throw conflict(`An agent named ${name} already exists`);
  }

  async #find(ctx: AuthenticatedContext, id: string): Promise<Agent> {
    const agent = await ctx.em.findOne(Agent, { id });
    if (!agent) throw notFound(`Agent ${id} not found`);
    return agent;
  }

  async #changeable(ctx: AuthenticatedContext, id: string): Promise<Agent> {
    const agent = await this.#find(ctx, id);
    if (!mayChangeRecordOf(ctx, agent.userId)) throw forbidden('Only its creator, admins and staff may change this agent');
    return agent;
  }

  async #dropAvatar(ctx: AuthenticatedContext, url: string | null): Promise<void> {
    const fileId = fileIdOfUrl(url);
    // The change is made whatever happens here; a file left behind is only logged.
    if (fileId) await this.#uploads.delete(ctx, fileId).catch((err) => ctx.log.warn({ err }, 'could not delete a replaced agent avatar'));
  }
}
