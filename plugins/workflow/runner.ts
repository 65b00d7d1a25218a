import { randomUUID } from 'node:crypto';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { context, trace, type Context } from '@opentelemetry/api';
import {
  actingPrincipal,
  authorOf,
  withBound,
  defineRecord,
  notFound,
  RpcError,
  WorkerTaskError,
  type AuthenticatedContext,
  type ChainLink,
  type Database,
  type EntityManager,
  type EventBus,
  type InferRecord,
  type Jobs,
  type Logger,
  type OperationCaller,
  type PluginServices,
  type Principal,
  type WorkerPool,
  modulePath,
} from 'rpc-service/plugin';
import type { WorkflowConfig } from './config.ts';
import type { NodeEffects } from './effects.ts';
import type { WorkflowEdge, WorkflowNode } from './graph.ts';
import { WorkflowInstance, type InstanceStatus } from './instance.entity.ts';
import { CLOCK, EXPRESSION_LIMITS } from './interpreter-limits.ts';
import type { Checkpoint, EffectReply, EffectRequest, RunOutcome, RunState, RunTask } from './interpreter.worker.ts';
import { PendingEvent } from './pending-event.entity.ts';
import { RunQueue } from './run-queue.ts';
import { failed, inSpan, nodeAttributes, recordSteps, tracer } from './run-spans.ts';
import type { WorkflowService } from './workflow.service.ts';

const INTERPRETER = modulePath(import.meta.url, './interpreter.worker.ts');
/** Steps of history an instance keeps (the latest). */
const MAX_HISTORY = 1000;
/** How often a part's time limits are looked at, and how far past them the host lets it go before stepping in. */
const WATCH_MS = 250;
const GRACE_MS = 1000;
/** How long a run is left to the node running it without word from it; renewed while a part runs. */
const LEASE_MS = 15_000;

/** A part of a run as the host sees it: an outcome, or its thread lost under it (out of memory, or stopped for another part on it). */
type PartOutcome = RunOutcome | { status: 'lost'; reason: string; progressed: boolean };

/** A run as its statements name it: the subscription with the id. */
interface RunKey {
  subscriptionId: string;
  id: string;
}

export const INSTANCE = defineRecord(WorkflowInstance, { hide: ['subscriptionId', 'projectId', 'graph', 'attempts', 'leaseUntil', 'chain'] });
export type InstanceRecord = InferRecord<typeof INSTANCE>;

export type ExecuteResult = { result: { status: 'completed'; output: unknown; instanceId: string } } | { status: 'waiting'; instanceId: string };

/**
 * Runs workflows durably. A run is a row (`workflow_instance`); each part
 * of it, from where it stands until it ends, waits or fails, is interpreted
 * in the worker pool, which asks this host over a MessagePort for the work
 * of rpc, http, tool, ai and contributed nodes (done as the user who
 * started the run, with that user's current role). The state is kept after
 * every such node, so a node that stops mid-run (its lease runs out) is
 * taken over by the `recover` job at most one node back. `wait` parks the
 * run until sendEventToWorkflow delivers its event (an event that comes
 * while the run is still on its way to the `wait` is kept for it); `delay`
 * parks it until a `resume` job, due at its time, takes it up again.
 */
export class WorkflowRunner {
  readonly #db: Database;
  readonly #pool: WorkerPool;
  readonly #jobs: Jobs;
  readonly #operations: OperationCaller;
  readonly #bus: EventBus;
  readonly #users: PluginServices['userService'];
  readonly #effects: NodeEffects;
  readonly #workflows: WorkflowService;
  readonly #config: WorkflowConfig;
  readonly #logger: Logger;
  /** Parts of runs under way in this process, awaited on shutdown. */
  readonly #active = new Set<Promise<unknown>>();
  /** The line runs wait in for a thread of the pool. */
  readonly #queue: RunQueue;

  constructor(deps: {
    db: Database;
    pool: WorkerPool;
    jobs: Jobs;
    operations: OperationCaller;
    bus: EventBus;
    userService: PluginServices['userService'];
    nodeEffects: NodeEffects;
    workflowService: WorkflowService;
    config: WorkflowConfig;
    logger: Logger;
  }) {
    this.#db = deps.db;
    this.#pool = deps.pool;
    this.#jobs = deps.jobs;
    this.#operations = deps.operations;
    this.#bus = deps.bus;
    this.#users = deps.userService;
    this.#effects = deps.nodeEffects;
    this.#workflows = deps.workflowService;
    this.#config = deps.config;
    this.#logger = deps.logger;
    this.#queue = new RunQueue(deps.pool.conversationThreads, deps.config);
  }

  /**
   * Starts a run as the caller and waits for it up to WORKFLOW_EXECUTE_WAIT_MS:
   * its output when it completed, `{status: 'waiting', instanceId}` when it
   * waits (or still runs); WORKFLOW_FAILED when it failed.
   */
  async executeWorkflow(ctx: AuthenticatedContext, identifier: string, args: Record<string, unknown>): Promise<ExecuteResult> {
    const workflow = await this.#workflows.findByIdentifier(ctx.em, identifier);
    const start = workflow.nodes.find((node) => node.type === 'start')!;
    // Its place in line, taken before the run is made: refused (RATE_LIMITED) when the caller's line is full.
    const ticket = this.#queue.enter(ctx.subscriptionId, ctx.userId, { refuseWhenFull: true });
    const now = new Date();
    const instance = ctx.em.create(WorkflowInstance, {
      id: randomUUID(),
      subscriptionId: ctx.subscriptionId,
      workflowId: workflow.id,
      workflowName: workflow.name,
      userId: ctx.userId,
      chain: [...workflow.authors, authorOf(ctx)],
      projectId: ctx.projectId ?? null,
      status: 'running',
      graph: { nodes: workflow.nodes, edges: workflow.edges },
      cursor: start.id,
      variables: structuredClone(workflow.variables),
      args,
      steps: 0,
      attempts: 0,
      history: [],
      waitingFor: null,
      wakeAt: null,
      output: null,
      error: null,
      leaseUntil: this.#leaseEnd(),
      createdAt: now,
      updatedAt: now,
      finishedAt: null,
    });
    await ctx.em.flush().catch((error: unknown) => {
      ticket.leave();
      throw error;
    });
    // Its first part takes this place up (#part); one that never comes to it (its user inactive, say) gives it back.
    this.#queue.hold(instance.id, ticket);
    const driven = this.#drive(ctx.subscriptionId, instance.id).finally(() => this.#queue.release(instance.id));
    const ended = await this.#within(driven, this.#config.WORKFLOW_EXECUTE_WAIT_MS);
    if (ended?.status === 'completed') return { result: { status: 'completed', output: ended.output, instanceId: instance.id } };
    if (ended?.status === 'failed') throw new RpcError('WORKFLOW_FAILED', `Workflow ${workflow.name} failed (run ${instance.id}): ${ended.error}`);
    return { status: 'waiting', instanceId: instance.id };
  }

  /**
   * Delivers an event: to the run `instanceId` names (kept for it if it is
   * not waiting for this event yet), else to the oldest run of the workflow
   * waiting for it. NOT_FOUND when there is no such run.
   */
  async sendEventToWorkflow(
    ctx: AuthenticatedContext,
    workflowName: string,
    eventName: string,
    eventData: Record<string, unknown>,
    instanceId?: string,
  ): Promise<void> {
    const workflow = await this.#workflows.findByIdentifier(ctx.em, workflowName);
    const claimed = await ctx.em.fork().transactional(async (em) => {
      const [row] = instanceId
        ? await em.execute<{ id: string; status: InstanceStatus; waiting_for: string | null; chain: ChainLink[] | string }[]>(
            'select id, status, waiting_for, chain from workflow_instance where id = ? and workflow_id = ? and subscription_id = ? for update',
            [instanceId, workflow.id, ctx.subscriptionId],
          )
        : await em.execute<{ id: string; status: InstanceStatus; waiting_for: string | null; chain: ChainLink[] | string }[]>(
            `select id, status, waiting_for, chain from workflow_instance where workflow_id = ? and subscription_id = ? and status = 'waiting' and waiting_for = ?
             order by created_at, id limit 1 for update skip locked`,
            [workflow.id, ctx.subscriptionId, eventName],
          );
      if (!row)
        throw notFound(
          instanceId ? `No run ${instanceId} of workflow ${workflow.name}` : `No run of workflow ${workflow.name} is waiting for event ${eventName}`,
        );
      if (row.status !== 'running' && row.status !== 'waiting') throw notFound(`Run ${row.id} of workflow ${workflow.name} has ended (${row.status})`);
      // What the event carries shapes what the run does next: its sender bounds the run's rights from now on.
      const chain = withBound(typeof row.chain === 'string' ? (JSON.parse(row.chain) as ChainLink[]) : row.chain, authorOf(ctx));
      await em.execute('update workflow_instance set chain = ?::jsonb where subscription_id = ? and id = ?', [
        JSON.stringify(chain),
        ctx.subscriptionId,
        row.id,
      ]);
      if (row.status === 'waiting' && row.waiting_for === eventName) {
        await em.execute(
          `update workflow_instance set status = 'running', waiting_for = null, lease_until = ?, updated_at = now() where subscription_id = ? and id = ?`,
          [this.#leaseEnd(), ctx.subscriptionId, row.id],
        );
        return row.id;
      }
      // On its way to a wait (or waiting for something else first): the event waits for it.
      em.create(PendingEvent, { id: randomUUID(), subscriptionId: ctx.subscriptionId, instanceId: row.id, eventName, eventData, createdAt: new Date() });
      return null;
    });
    if (claimed) this.#background(this.#drive(ctx.subscriptionId, claimed, { result: eventData }));
  }

  /** The runs the caller may read: an admin's, all of the subscription; anyone else's, those they started (see #visible). */
  async listInstances(ctx: AuthenticatedContext, query: { workflowId?: string; status?: InstanceStatus; page: number; pageSize: number }) {
    const where = {
      ...(ctx.role === 'admin' ? {} : { userId: ctx.userId }),
      ...(query.workflowId ? { workflowId: query.workflowId } : {}),
      ...(query.status ? { status: query.status } : {}),
    };
    const [instances, totalCount] = await ctx.em.findAndCount(WorkflowInstance, where, {
      orderBy: { createdAt: 'desc', id: 'asc' },
      limit: query.pageSize,
      offset: (query.page - 1) * query.pageSize,
    });
    return { data: instances.map(INSTANCE.toRecord), totalCount };
  }

  async getInstance(ctx: AuthenticatedContext, id: string): Promise<InstanceRecord> {
    return INSTANCE.toRecord(await this.#visible(ctx, id));
  }

  /** Cancels a run that has not ended (its starter and admins): it stops before its next node. */
  async cancelInstance(ctx: AuthenticatedContext, id: string): Promise<InstanceRecord> {
    const instance = await this.#visible(ctx, id);
    const cancelled = await ctx.em.execute(
      `update workflow_instance set status = 'cancelled', lease_until = null, waiting_for = null, wake_at = null, finished_at = now(), updated_at = now()
       where id = ? and subscription_id = ? and status in ('running', 'waiting') returning id`,
      [id, ctx.subscriptionId],
    );
    if (cancelled.length === 0) throw new RpcError('CONFLICT', `Run ${id} has already ended (${instance.status})`);
    await ctx.em.execute('delete from workflow_pending_event where subscription_id = ? and instance_id = ?', [ctx.subscriptionId, id]);
    return this.getInstance(ctx, id);
  }

  /** The `resume` job: a `delay` whose time has come. */
  async wake(subscriptionId: string, instanceId: string): Promise<{ resumed: boolean }> {
    const claimed = await this.#db.forkEm(subscriptionId).execute(
      `update workflow_instance set status = 'running', wake_at = null, lease_until = ?, updated_at = now()
       where id = ? and subscription_id = ? and status = 'waiting' and wake_at is not null and wake_at <= now() returning id`,
      [this.#leaseEnd(), instanceId, subscriptionId],
    );
    if (claimed.length === 0) return { resumed: false };
    await this.#drive(subscriptionId, instanceId, { result: null });
    return { resumed: true };
  }

  /** The `recover` job: runs whose node stopped (lease run out) go on from their last state; delays whose job was lost are woken. */
  async recover(): Promise<{ recovered: number }> {
    const em = this.#db.forkEm(null);
    const stalled = await em.execute<{ id: string; subscription_id: string }[]>(
      `update workflow_instance set lease_until = ?, updated_at = now()
       where id in (select id from workflow_instance where status = 'running' and lease_until < now() order by lease_until limit 100 for update skip locked)
       returning id, subscription_id`,
      [this.#leaseEnd()],
    );
    for (const row of stalled) this.#background(this.#drive(row.subscription_id, row.id));
    const late = await em.execute<{ id: string; subscription_id: string }[]>(
      `select id, subscription_id from workflow_instance where status = 'waiting' and wake_at < now() - interval '1 minute' limit 100`,
    );
    for (const row of late) this.#background(this.wake(row.subscription_id, row.id));
    return { recovered: stalled.length + late.length };
  }

  /** Waits for the parts of runs under way here (on shutdown); the recover job takes up any that do not end. */
  async drain(timeoutMs: number): Promise<void> {
    await this.#within(Promise.allSettled([...this.#active]), timeoutMs);
  }

  /**
   * Runs an instance from where it stands until it completes, fails or
   * waits, keeping its state; `resumed` ends the node it waits at.
   */
  async #drive(subscriptionId: string, instanceId: string, resumed?: { result: unknown }): Promise<RunOutcome | null> {
    const em = this.#db.forkEm(subscriptionId);
    const run: RunKey = { subscriptionId, id: instanceId };
    let next = resumed;
    let lost: string | undefined;
    for (;;) {
      const instance = await em.findOne(WorkflowInstance, { id: instanceId }, { refresh: true });
      if (!instance || instance.status !== 'running') return null;
      const principal = await this.#principal(instance);
      const state: RunState = { cursor: instance.cursor, variables: instance.variables, args: instance.args, steps: instance.steps };
      const attempts = typeof principal !== 'string' ? await this.#attempt(em, run) : 0;
      if (attempts === null) return null;
      const max = this.#config.WORKFLOW_MAX_ATTEMPTS;
      const part: PartOutcome =
        typeof principal === 'string'
          ? { status: 'failed', error: principal, state, steps: [] }
          : attempts > max
            ? {
                status: 'failed',
                error: `the run was stopped ${max} ${max === 1 ? 'time' : 'times'} on its way from node "${state.cursor}" (${lost ?? 'its node stopped'}), so it is not started again (WORKFLOW_MAX_ATTEMPTS)`,
                state,
                steps: [],
              }
            : await this.#runPart(em, instance, principal, state, next);
      if (part.status === 'lost') {
        // Started again at once from its last checkpoint; what it was resumed with goes again unless it got past that.
        this.#logger.warn({ instanceId, attempt: attempts, reason: part.reason }, 'a workflow run lost its thread');
        lost = part.reason;
        if (part.progressed) next = undefined;
        continue;
      }
      const outcome = part;
      const history = [...instance.history, ...outcome.steps];
      const kept = await em.fork().transactional(async (tx) => {
        const [current] = await tx.execute<{ status: InstanceStatus }[]>(
          'select status from workflow_instance where subscription_id = ? and id = ? for update',
          [subscriptionId, instanceId],
        );
        // Cancelled meanwhile: the cancel stands.
        if (current?.status !== 'running') return 'cancelled' as const;
        if (outcome.status === 'waiting') {
          const [pending] = await tx.execute<{ id: string; event_data: Record<string, unknown> | string }[]>(
            'select id, event_data from workflow_pending_event where subscription_id = ? and instance_id = ? and event_name = ? order by created_at, id limit 1',
            [subscriptionId, instanceId, outcome.event],
          );
          if (pending) {
            await tx.execute('delete from workflow_pending_event where subscription_id = ? and id = ?', [subscriptionId, pending.id]);
            await this.#keep(tx, run, outcome.state, history, { status: 'running', lease_until: this.#leaseEnd() });
            return { result: typeof pending.event_data === 'string' ? JSON.parse(pending.event_data) : pending.event_data };
          }
          await this.#keep(tx, run, outcome.state, history, { status: 'waiting', waiting_for: outcome.event, lease_until: null });
        } else if (outcome.status === 'sleeping') {
          await this.#keep(tx, run, outcome.state, history, { status: 'waiting', wake_at: new Date(outcome.until), lease_until: null });
          await this.#jobs.enqueue(
            'resume',
            { instanceId },
            { em: tx, runAt: new Date(outcome.until), ctx: this.#operations.contextOf(principal as Principal) },
          );
        } else if (outcome.status === 'completed') {
          await this.#keep(tx, run, outcome.state, history, {
            status: 'completed',
            output: JSON.stringify(outcome.output ?? null),
            lease_until: null,
            finished_at: new Date(),
          });
        } else {
          await this.#keep(tx, run, outcome.state, history, { status: 'failed', error: outcome.error, lease_until: null, finished_at: new Date() });
        }
        return 'kept' as const;
      });
      if (kept === 'cancelled') return null;
      if (kept !== 'kept') {
        // An event was waiting for this wait: go on at once.
        next = kept;
        continue;
      }
      await this.#announce(instance, outcome);
      return outcome;
    }
  }

  /**
   * One part of a run in a span, with a span per node: a node whose work the
   * host does (an operation, an HTTP request, an AI call) while it runs, so
   * what it causes nests under it; one the thread evaluates alone (a
   * condition, a variable) from its step once the part is over.
   */
  async #runPart(em: EntityManager, instance: WorkflowInstance, principal: Principal, state: RunState, resumed?: { result: unknown }): Promise<PartOutcome> {
    const span = tracer.startSpan(`workflow ${instance.workflowName}`, {
      attributes: { 'workflow.name': instance.workflowName, 'workflow.instance.id': instance.id },
    });
    const began = new Date();
    const hostNodes = new Set<string>();
    try {
      const outcome = await this.#part(em, instance, principal, state, resumed, trace.setSpan(context.active(), span), hostNodes);
      span.setAttribute('workflow.status', outcome.status);
      if (outcome.status === 'failed' || outcome.status === 'lost') failed(span);
      if (outcome.status !== 'lost') recordSteps(span, outcome.steps, began, hostNodes);
      return outcome;
    } catch (error) {
      failed(span);
      throw error;
    } finally {
      span.end();
    }
  }

  /** A node whose work the host does, in a span of its own. */
  #effect(principal: Principal, ctx: AuthenticatedContext, instance: WorkflowInstance, request: EffectRequest, stopped: () => boolean): Promise<EffectReply> {
    return inSpan(`workflow node ${request.type}`, nodeAttributes(request.node, request.type), () =>
      this.#effects.run(principal, ctx, instance, request, stopped),
    );
  }

  /** One part of a run in the worker pool, answering its requests for effects and keeping its checkpoints. */
  async #part(
    em: EntityManager,
    instance: WorkflowInstance,
    principal: Principal,
    state: RunState,
    resumed: { result: unknown } | undefined,
    traced: Context,
    hostNodes: Set<string>,
  ): Promise<PartOutcome> {
    const { port1, port2 } = new MessageChannel();
    const ctx = this.#operations.contextOf(principal, `workflow:${instance.id}`) as AuthenticatedContext;
    let stopped = false;
    let outOfTime = false;
    // The latest checkpoint, which a part stopped by the host ends at.
    let last: { state: RunState; steps: Checkpoint['steps'] } = { state, steps: [] };
    const pending = new Set<number>();
    const reply = (answer: EffectReply) => {
      if (pending.delete(answer.id)) port1.postMessage(answer);
    };
    // Checkpoints are written one after the other, and all of them before the part's outcome is.
    let saving: Promise<unknown> = Promise.resolve();
    port1.on('message', (message: EffectRequest | Checkpoint) => {
      if (message.kind === 'checkpoint') {
        last = message;
        saving = saving
          .then(() => this.#keep(em, instance, message.state, [...instance.history, ...message.steps], { lease_until: this.#leaseEnd() }, true))
          .then((kept) => (stopped ||= !kept))
          .catch((err) => this.#logger.warn({ err, instanceId: instance.id }, 'could not keep a workflow checkpoint'));
        return;
      }
      pending.add(message.id);
      if (outOfTime) return reply({ id: message.id, ok: false, error: 'the run ran out of time' });
      hostNodes.add(message.node);
      void context.with(traced, () => this.#effect(principal, ctx, instance, message, () => stopped)).then(reply);
    });
    const clock = new SharedArrayBuffer(CLOCK.cells * Float64Array.BYTES_PER_ELEMENT);
    const cells = new Float64Array(clock);
    const stop = new AbortController();
    let renewed = Date.now();
    // An expression running too long holds its thread: the thread is stopped. A part past its time waiting for
    // the host is answered that it ran out of time, so that it fails by itself and its thread goes on.
    const watch = setInterval(() => {
      const now = Date.now();
      const began = cells[CLOCK.began]!;
      const deadline = cells[CLOCK.deadline]!;
      if (began > 0 && now - began > EXPRESSION_LIMITS.timeout + GRACE_MS) {
        const node = (instance.graph.nodes as WorkflowNode[])[cells[CLOCK.node]!];
        stop.abort(Object.assign(new Error(`an expression ran longer than ${EXPRESSION_LIMITS.timeout} ms`), { node: node?.id }));
      } else if (deadline > 0 && now > deadline + GRACE_MS && !outOfTime) {
        outOfTime = true;
        for (const id of [...pending]) reply({ id, ok: false, error: 'the run ran out of time' });
      }
      if (now - renewed > LEASE_MS / 3) {
        renewed = now;
        void em
          .execute(`update workflow_instance set lease_until = ? where subscription_id = ? and id = ? and status = 'running'`, [
            this.#leaseEnd(),
            instance.subscriptionId,
            instance.id,
          ])
          .catch((err) => this.#logger.warn({ err, instanceId: instance.id }, 'could not renew the lease of a workflow run'));
      }
    }, WATCH_MS);
    const task: RunTask = {
      nodes: instance.graph.nodes as WorkflowNode[],
      edges: instance.graph.edges as WorkflowEdge[],
      state,
      resumed,
      limits: {
        maxSteps: this.#config.WORKFLOW_MAX_STEPS,
        timeoutMs: this.#config.WORKFLOW_RUN_TIMEOUT_MS,
        maxValueBytes: this.#config.WORKFLOW_MAX_VALUE_BYTES,
        maxVariablesBytes: this.#config.WORKFLOW_MAX_VARIABLES_BYTES,
        maxOutputBytes: this.#config.WORKFLOW_MAX_OUTPUT_BYTES,
      },
      clock,
      // The worker-side type of the port (node:worker_threads) is the same object the channel made here.
      port: port2 as unknown as MessagePort,
    };
    // Its turn in line for a thread (its lease renewed meanwhile by the watch above).
    const ticket = this.#queue.placeOf(instance);
    try {
      // Cancelled while it waited: it takes no thread, and #drive keeps the cancel, not this outcome.
      if ((await ticket.turn) && !(await this.#stillRunning(em, instance))) return { status: 'failed', error: 'cancelled', state, steps: [] };
      return await this.#pool.run<RunOutcome>(INTERPRETER, task, { port: port2, signal: stop.signal });
    } catch (error) {
      if (!(error instanceof WorkerTaskError) || error.failure === 'threw') throw error;
      if (error.failure === 'lost') return { status: 'lost', reason: `its thread was lost: ${error.reason}`, progressed: last.state !== state };
      const at = ((stop.signal.reason as { node?: string }).node ?? last.state.cursor) as string;
      const message = `node "${at}": ${error.reason}, and its thread was stopped`;
      const type = (instance.graph.nodes as WorkflowNode[]).find((node) => node.id === at)?.type ?? 'unknown';
      const steps = [...last.steps, { node: at, type, at: new Date().toISOString(), status: 'failed' as const, error: message }];
      return { status: 'failed', error: message, state: last.state, steps };
    } finally {
      ticket.leave();
      clearInterval(watch);
      port1.close();
      await saving;
    }
  }

  async #stillRunning(em: EntityManager, run: RunKey): Promise<boolean> {
    const rows = await em.execute(`select id from workflow_instance where subscription_id = ? and id = ? and status = 'running'`, [run.subscriptionId, run.id]);
    return rows.length === 1;
  }

  /** Counts a part of the run started, before it starts (a crash then still counts it); null when the run is no longer running. */
  async #attempt(em: EntityManager, run: RunKey): Promise<number | null> {
    const [row] = await em.execute<{ attempts: number }[]>(
      `update workflow_instance set attempts = attempts + 1, updated_at = now() where subscription_id = ? and id = ? and status = 'running' returning attempts`,
      [run.subscriptionId, run.id],
    );
    return row ? row.attempts : null;
  }

  /** Writes a run's state and history (its latest MAX_HISTORY steps), with other columns; false when it is no longer running (only with `onlyRunning`). */
  async #keep(
    em: EntityManager,
    run: RunKey,
    state: RunState,
    history: WorkflowInstance['history'],
    columns: Record<string, unknown>,
    onlyRunning = false,
  ): Promise<boolean> {
    const names = Object.keys(columns);
    const kept = await em.execute(
      `update workflow_instance set cursor = ?, variables = ?::jsonb, steps = ?, history = ?::jsonb, attempts = 0,
         ${names.map((name) => `${name} = ?`).join(', ')}${names.length ? ',' : ''} updated_at = now()
       where subscription_id = ? and id = ?${onlyRunning ? " and status = 'running'" : ''} returning id`,
      [
        state.cursor,
        JSON.stringify(state.variables),
        state.steps,
        JSON.stringify(history.slice(-MAX_HISTORY)),
        ...Object.values(columns),
        run.subscriptionId,
        run.id,
      ],
    );
    return kept.length === 1;
  }

  /** Tells the run's user that it ended or waits (`workflow.completed`, `workflow.failed`, `workflow.waiting`). */
  async #announce(instance: WorkflowInstance, outcome: RunOutcome): Promise<void> {
    const about = { instanceId: instance.id, workflowId: instance.workflowId, workflowName: instance.workflowName };
    const payload: { name: string; payload: Record<string, unknown> } =
      outcome.status === 'completed'
        ? { name: 'workflow.completed', payload: { ...about, output: outcome.output ?? null } }
        : outcome.status === 'failed'
          ? { name: 'workflow.failed', payload: { ...about, error: outcome.error } }
          : { name: 'workflow.waiting', payload: { ...about, ...(outcome.status === 'waiting' ? { event: outcome.event } : { until: outcome.until }) } };
    await this.#bus
      .publish({ ...payload, subscriptionId: instance.subscriptionId, userIds: [instance.userId] })
      .catch((err) => this.#logger.warn({ err }, 'could not announce a workflow run'));
  }

  /** The caller the run acts as: the weakest of its chain now (an admin running a member's workflow lends it nothing), under their key limits; why not, when one is gone. */
  async #principal(instance: WorkflowInstance): Promise<Principal | string> {
    const holderOf = (userId: string) => this.#users.credentialHolder(instance.subscriptionId, userId);
    const initialContext = instance.projectId ? { projectId: instance.projectId } : null;
    const refused = (error: unknown) => (error instanceof RpcError ? error.message : Promise.reject(error));
    return actingPrincipal(instance.subscriptionId, instance.chain, holderOf, initialContext).catch(refused);
  }

  /**
   * A run as its starter or an admin reads it; NOT_FOUND for anyone else. A
   * run holds what its nodes did with the rights of whoever started it (an
   * admin's run may have read a secret), so the workflow's author and other
   * members do not see it.
   */
  async #visible(ctx: AuthenticatedContext, id: string): Promise<WorkflowInstance> {
    const instance = await ctx.em.findOne(WorkflowInstance, { id }, { refresh: true });
    if (!instance || (ctx.role !== 'admin' && instance.userId !== ctx.userId)) throw notFound(`Workflow run ${id} not found`);
    return instance;
  }

  #leaseEnd(): Date {
    return new Date(Date.now() + LEASE_MS);
  }

  #background(run: Promise<unknown>): void {
    const tracked = run.catch((err) => this.#logger.error({ err }, 'a workflow run failed to go on')).finally(() => this.#active.delete(tracked));
    this.#active.add(tracked);
  }

  /** The promise's value if it settles within `ms`, else null (it goes on, tracked). */
  async #within<T>(promise: Promise<T>, ms: number): Promise<T | null> {
    this.#background(promise);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
