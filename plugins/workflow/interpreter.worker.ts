import type { MessagePort } from 'node:worker_threads';
import jsonata from 'jsonata';
import type { WorkflowEdge, WorkflowNode } from './graph.ts';
import type { Step } from './instance.entity.ts';
// Types only: node-types.ts loads the service's SDK, which this thread does without.
import type { NodeConfig } from './node-types.ts';
import { CLOCK, EXPRESSION_LIMITS, templateParts } from './interpreter-limits.ts';

/** Where a run stands: the node it is at, its variables and arguments, and the nodes run so far. */
export interface RunState {
  cursor: string;
  variables: Record<string, unknown>;
  args: Record<string, unknown>;
  steps: number;
}

export interface RunTask {
  nodes: WorkflowNode[];
  edges: WorkflowEdge[];
  state: RunState;
  /** The node at the cursor has ended with this result (a `wait` its event came for, a `delay` whose time came): go on after it. */
  resumed?: { result: unknown };
  limits: RunLimits;
  /**
   * Float64 cells shared with the host (see CLOCK): when the expression being
   * evaluated began (0 between expressions) and at which node, and when this
   * part must end. The host stops the thread when an expression runs too
   * long: a builtin such as `$pad` or a regular expression can hold the
   * thread beyond JSONata's own time check.
   */
  clock: SharedArrayBuffer;
  /** Where the work of other node types than start, end, set, condition, wait and delay is asked of the host. */
  port: MessagePort;
}

/** What the worker asks the host: to do a node's work, with its inputs evaluated. */
export interface EffectRequest {
  kind: 'effect';
  id: number;
  node: string;
  type: string;
  input: Record<string, unknown>;
}
export type EffectReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };
/** The state after a node with an effect, and every step of this part so far, for the host to keep (a crash then repeats at most that node). */
export interface Checkpoint {
  kind: 'checkpoint';
  state: RunState;
  steps: Step[];
}

export type RunOutcome =
  | { status: 'completed'; output: unknown; state: RunState; steps: Step[] }
  | { status: 'waiting'; event: string; state: RunState; steps: Step[] }
  | { status: 'sleeping'; until: string; state: RunState; steps: Step[] }
  | { status: 'failed'; error: string; state: RunState; steps: Step[] };

export interface RunLimits {
  /** Nodes run at most, over the whole run. */
  maxSteps: number;
  /** How long this part of the run may take from when it starts on its thread. */
  timeoutMs: number;
  /** Bytes of JSON text (UTF-8) that one expression's value, the run's variables and its output may take. */
  maxValueBytes: number;
  maxVariablesBytes: number;
  maxOutputBytes: number;
}

/** The longest text any step of an expression may build: set from the task (the same in every task of a process). */
let maxValueBytes = Infinity;

/**
 * Called by JSONata after each step of an evaluation: text longer than a
 * value may be stops the expression there, before doubling it again can take
 * the thread's memory. A string's length is a floor of its UTF-8 size; the
 * whole value is measured exactly once the expression ends.
 */
function checkStep(_expr: unknown, _input: unknown, _environment: unknown, result: unknown): void {
  if (typeof result === 'string' && result.length > maxValueBytes)
    throw new Error(`it made a text over ${maxValueBytes} bytes, the most a value may take (WORKFLOW_MAX_VALUE_BYTES)`);
}

/** Compiled expressions, kept per thread across runs (an Expression is read-only once compiled); the oldest go first. */
const COMPILED = new Map<string, jsonata.Expression>();
const MAX_COMPILED = 10_000;

function compiled(source: string): jsonata.Expression {
  let expression = COMPILED.get(source);
  if (!expression) {
    expression = jsonata(source, EXPRESSION_LIMITS);
    // JSONata's hook on every step is bound under this symbol; its types only name string bindings.
    expression.assign(Symbol.for('jsonata.__evaluate_exit') as never, checkStep);
    if (COMPILED.size >= MAX_COMPILED) COMPILED.delete(COMPILED.keys().next().value!);
    COMPILED.set(source, expression);
  }
  return expression;
}

/** Node types run here; the others' work is the host's. */
const LOCAL_TYPES = new Set(['start', 'end', 'set', 'condition', 'wait', 'delay']);

/** A node's failure: the run fails with this message, naming the node. */
class NodeError extends Error {}

/**
 * Runs a workflow graph from its cursor until it ends, waits (for an event
 * or a time) or fails, within the step and time limits. Expressions are
 * JSONata: the variables are the input, `$args`, `$result` and `$event` are
 * bound. Work with effects (rpc, http, tool, ai, contributed types) is asked
 * of the host over `port`, with its inputs evaluated here.
 */
export default async function run(task: RunTask): Promise<RunOutcome> {
  maxValueBytes = task.limits.maxValueBytes;
  const interpreter = new Interpreter(task);
  try {
    return await interpreter.run();
  } finally {
    task.port.close();
  }
}

class Interpreter {
  readonly #task: RunTask;
  readonly #nodes: Map<string, WorkflowNode>;
  readonly #pending = new Map<number, (reply: EffectReply) => void>();
  #nextEffect = 0;
  #steps: Step[] = [];
  #state: RunState;
  #result: unknown = null;
  #event: unknown = null;
  readonly #clock: Float64Array;
  readonly #deadline: number;

  constructor(task: RunTask) {
    this.#task = task;
    this.#nodes = new Map(task.nodes.map((node) => [node.id, node]));
    this.#state = structuredClone(task.state);
    this.#clock = new Float64Array(task.clock);
    this.#deadline = Date.now() + task.limits.timeoutMs;
    this.#clock[CLOCK.deadline] = this.#deadline;
    task.port.on('message', (reply: EffectReply) => {
      this.#pending.get(reply.id)?.(reply);
      this.#pending.delete(reply.id);
    });
  }

  async run(): Promise<RunOutcome> {
    // The variables as they were before the node at the cursor: nodes change a copy, so one that fails changes none of them.
    let before = this.#state.variables;
    try {
      if (this.#task.resumed) {
        const node = this.#node(this.#state.cursor);
        this.#result = this.#task.resumed.result;
        if (node.type === 'wait') this.#event = this.#result;
        this.#save(node, this.#result);
        this.#record(node, 'done');
        this.#state.cursor = await this.#next(node);
      }
      for (;;) {
        before = this.#state.variables;
        const node = this.#node(this.#state.cursor);
        if (this.#state.steps >= this.#task.limits.maxSteps)
          throw new NodeError(`the run stopped at node "${node.id}": it ran ${this.#task.limits.maxSteps} nodes, the most a run may`);
        if (Date.now() > this.#deadline) throw new NodeError(`the run stopped at node "${node.id}": it ran out of time`);
        this.#state.steps += 1;
        // A node's config was checked against its type's schema (node-types.ts) when the workflow was saved.
        const config = node.config;
        switch (node.type) {
          case 'start':
            this.#result = null;
            break;
          case 'end': {
            const { output: source } = config as NodeConfig<'end'>;
            const output = source ? await this.#evaluate(node, source) : this.#state.variables;
            this.#limit(node, output, this.#task.limits.maxOutputBytes, 'its output', 'WORKFLOW_MAX_OUTPUT_BYTES');
            this.#record(node, 'done');
            return { status: 'completed', output: output ?? null, state: this.#state, steps: this.#steps };
          }
          case 'set':
            this.#state.variables = { ...before };
            for (const [name, source] of Object.entries((config as NodeConfig<'set'>).values))
              this.#state.variables[name] = (await this.#evaluate(node, source)) ?? null;
            this.#result = null;
            break;
          case 'condition':
            this.#result = (await this.#evaluate(node, (config as NodeConfig<'condition'>).expression)) ?? null;
            break;
          case 'wait':
            this.#record(node, 'waiting');
            return { status: 'waiting', event: (config as NodeConfig<'wait'>).event, state: this.#state, steps: this.#steps };
          case 'delay': {
            const delay = config as NodeConfig<'delay'>;
            const until = delay.seconds !== undefined ? new Date(Date.now() + delay.seconds * 1000) : timeOf(await this.#evaluate(node, delay.until!));
            if (!until) throw new NodeError(`node "${node.id}": until must give a time (ISO 8601 or milliseconds since 1970)`);
            if (until.getTime() > Date.now()) {
              this.#record(node, 'waiting');
              return { status: 'sleeping', until: until.toISOString(), state: this.#state, steps: this.#steps };
            }
            this.#result = null;
            break;
          }
          default:
            this.#result = await this.#effect(node, await this.#inputs(node));
        }
        this.#save(node, this.#result);
        this.#limit(node, this.#state.variables, this.#task.limits.maxVariablesBytes, 'its variables', 'WORKFLOW_MAX_VARIABLES_BYTES');
        this.#record(node, 'done');
        this.#state.cursor = await this.#next(node);
        // After work the host did, it keeps where the run is and the steps of this part so far: a crash then repeats at most this node.
        if (!LOCAL_TYPES.has(node.type)) this.#task.port.postMessage({ kind: 'checkpoint', state: this.#state, steps: this.#steps } satisfies Checkpoint);
      }
    } catch (error) {
      const message = error instanceof NodeError ? error.message : `node "${this.#state.cursor}": ${(error as Error).message}`;
      const node = this.#nodes.get(this.#state.cursor);
      if (node) this.#record(node, 'failed', message);
      this.#state.variables = before;
      return { status: 'failed', error: message, state: this.#state, steps: this.#steps };
    }
  }

  /** The inputs of a node whose work the host does: expressions and templates evaluated, other values as given. */
  async #inputs(node: WorkflowNode): Promise<Record<string, unknown>> {
    const config = node.config;
    const value = async (field: unknown) => (typeof field === 'string' ? this.#evaluate(node, field) : field);
    switch (node.type) {
      case 'rpc': {
        const { method, params } = config as NodeConfig<'rpc'>;
        return { method, params: (await value(params)) ?? {} };
      }
      case 'tool': {
        const { tool, params } = config as NodeConfig<'tool'>;
        return { tool, params: (await value(params)) ?? {} };
      }
      case 'http': {
        const http = config as NodeConfig<'http'>;
        const headers: Record<string, string> = {};
        for (const [name, template] of Object.entries(http.headers ?? {})) headers[name] = await this.#render(node, template);
        return { url: await this.#render(node, http.url), method: http.method, headers, body: http.body === undefined ? undefined : await value(http.body) };
      }
      case 'ai': {
        const ai = config as NodeConfig<'ai'>;
        return {
          prompt: await this.#render(node, ai.prompt),
          system: ai.system === undefined ? undefined : await this.#render(node, ai.system),
          model: ai.model,
        };
      }
      default:
        return { config, variables: this.#state.variables, args: this.#state.args };
    }
  }

  #effect(node: WorkflowNode, input: Record<string, unknown>): Promise<unknown> {
    const id = this.#nextEffect++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, (reply) => (reply.ok ? resolve(reply.value) : reject(new NodeError(`node "${node.id}": ${reply.error}`))));
      this.#task.port.postMessage({ kind: 'effect', id, node: node.id, type: node.type, input } satisfies EffectRequest);
    });
  }

  /** The edge to follow after a node: the first whose condition holds, else the first without one. */
  async #next(node: WorkflowNode): Promise<string> {
    const edges = this.#task.edges.filter((edge) => edge.source === node.id);
    for (const edge of edges) {
      if (edge.condition !== undefined && truthy(await this.#evaluate(node, edge.condition, `the condition of the edge to "${edge.target}"`)))
        return edge.target;
    }
    const fallback = edges.find((edge) => edge.condition === undefined);
    if (!fallback) throw new NodeError(`node "${node.id}": no edge's condition holds, and no edge is without one`);
    return fallback.target;
  }

  async #evaluate(node: WorkflowNode, source: string, what = 'an expression'): Promise<unknown> {
    let value: unknown;
    this.#clock[CLOCK.node] = this.#task.nodes.indexOf(node);
    this.#clock[CLOCK.began] = Date.now();
    try {
      value = await compiled(source).evaluate(this.#state.variables, { args: this.#state.args, result: this.#result, event: this.#event });
    } catch (error) {
      throw new NodeError(`node "${node.id}": ${what} failed: ${(error as { message?: string }).message ?? String(error)}`);
    } finally {
      this.#clock[CLOCK.began] = 0;
    }
    this.#limit(node, value, this.#task.limits.maxValueBytes, `${what}'s value`, 'WORKFLOW_MAX_VALUE_BYTES');
    return value;
  }

  /** Fails the run when `value` takes more than `max` bytes as JSON. */
  #limit(node: WorkflowNode, value: unknown, max: number, what: string, setting: string): void {
    if (jsonBytes(value, max) > max) throw new NodeError(`node "${node.id}": ${what} would take over ${max} bytes, the most it may (${setting})`);
  }

  /** A template's text with each `{{ expression }}` replaced by its value (text as it is, anything else as JSON). */
  async #render(node: WorkflowNode, template: string): Promise<string> {
    const values = await Promise.all(templateParts(template).map((part) => this.#evaluate(node, part)));
    let index = 0;
    return template.replace(/\{\{(.*?)\}\}/gs, () => {
      const value = values[index++];
      return value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value);
    });
  }

  #save(node: WorkflowNode, result: unknown): void {
    const saveAs = (node.config as { saveAs?: string }).saveAs;
    if (saveAs) this.#state.variables = { ...this.#state.variables, [saveAs]: result ?? null };
  }

  #record(node: WorkflowNode, status: Step['status'], error?: string): void {
    this.#steps.push({ node: node.id, type: node.type, at: new Date().toISOString(), status, ...(error ? { error } : {}) });
  }

  #node(id: string): WorkflowNode {
    const node = this.#nodes.get(id);
    if (!node) throw new NodeError(`the graph has no node "${id}"`);
    return node;
  }
}

/**
 * The size of `value` as JSON text in UTF-8, counted until it passes
 * `limit` (then any number above it): a value far too large is not walked
 * whole, nor ever turned into text.
 */
export function jsonBytes(value: unknown, limit: number): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && size <= limit) {
    const item = pending.pop();
    if (typeof item === 'string') size += (item.length > limit ? item.length : Buffer.byteLength(item)) + 2;
    else if (typeof item === 'number' || typeof item === 'boolean') size += String(item).length;
    else if (item === null || item === undefined || typeof item === 'function') size += 4;
    else if (Array.isArray(item)) {
      size += 1 + item.length;
      if (size <= limit) for (const element of item) pending.push(element);
    } else if (typeof item === 'object') {
      size += 1;
      for (const [key, element] of Object.entries(item)) {
        size += Buffer.byteLength(key) + 4;
        pending.push(element);
      }
    }
  }
  return size;
}

/** JSONata's truth: false, null, 0, "", empty arrays and undefined are false. */
const truthy = (value: unknown): boolean => (Array.isArray(value) ? value.length > 0 : Boolean(value));

function timeOf(value: unknown): Date | null {
  const date = typeof value === 'string' || typeof value === 'number' ? new Date(value) : null;
  return date && !Number.isNaN(date.getTime()) ? date : null;
}
