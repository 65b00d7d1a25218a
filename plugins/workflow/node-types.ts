import { createRequire } from 'node:module';
import type jsonataModule from 'jsonata';
import * as v from 'valibot';
import { defineExtensionPoint, type AuthenticatedContext } from 'rpc-service/plugin';
import { templateParts } from './interpreter-limits.ts';

/**
 * What a node of a workflow graph does is its type's: a config schema,
 * checked when the workflow is saved, and (for contributed types) what it
 * runs. Built-in types are listed here; plugins add theirs at the extension
 * point `workflow.nodeTypes`.
 */

/** Where a contributed node runs: on the host, as the workflow's caller, with the run's variables and arguments. */
export interface NodeRunInput {
  config: Record<string, unknown>;
  variables: Record<string, unknown>;
  args: Record<string, unknown>;
}

export interface NodeTypeContribution {
  /** Dotted, with the contributing plugin's name first: `crm.createLead`. */
  type: string;
  describe: string;
  /** A valibot schema of the node's `config`. */
  config: v.GenericSchema;
  /** Does the node's work; what it returns is the node's result (`$result` for the edges after it, `saveAs` keeps it). */
  run(ctx: AuthenticatedContext, input: NodeRunInput): Promise<unknown>;
}

declare module 'rpc-service/plugin' {
  interface ExtensionPoints {
    'workflow.nodeTypes': NodeTypeContribution;
  }
}

export const nodeTypesPoint = defineExtensionPoint({
  id: 'workflow.nodeTypes',
  describe: 'Node types for workflow graphs: {type, describe, config (a valibot schema), run(ctx, {config, variables, args})}.',
  contribution: v.object({
    type: v.pipe(v.string(), v.regex(/^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)+$/, 'a node type is dotted, like "crm.createLead"')),
    describe: v.pipe(v.string(), v.minLength(1, 'describe must not be empty')),
    config: v.custom<v.GenericSchema>(
      (value) => typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'schema',
      'config must be a valibot schema',
    ),
    run: v.function(),
  }),
});

/** Longest expression or template accepted. */
const MAX_EXPRESSION = 10_000;

/** A JSONata expression, compiled when the workflow is saved so that a mistake is refused then, with JSONata's reason. */
export const expression = (label: string) =>
  v.pipe(
    v.string(`${label} must be a JSONata expression (a string)`),
    v.minLength(1, `${label} must not be empty`),
    v.maxLength(MAX_EXPRESSION, `${label} must be at most ${MAX_EXPRESSION} characters`),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const problem = expressionProblem(dataset.value);
      if (problem) addIssue({ message: `${label} is not a valid JSONata expression: ${problem}` });
    }),
  );

/** Text with `{{ expression }}` parts, each compiled when the workflow is saved. */
export const template = (label: string) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.maxLength(MAX_EXPRESSION, `${label} must be at most ${MAX_EXPRESSION} characters`),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      for (const part of templateParts(dataset.value)) {
        const problem = expressionProblem(part);
        if (problem) addIssue({ message: `${label}: {{ ${part} }} is not a valid JSONata expression: ${problem}` });
      }
    }),
  );

/** JSONata, loaded when a workflow's expressions are first checked: a service that never writes one does not hold it (the interpreter's worker loads its own). */
let jsonata: typeof jsonataModule | undefined;

function expressionProblem(source: string): string | undefined {
  try {
    (jsonata ??= createRequire(import.meta.url)('jsonata') as typeof jsonataModule)(source);
    return undefined;
  } catch (error) {
    return (error as { message?: string }).message ?? 'it cannot be read';
  }
}

/** A variable name: where `saveAs` keeps a node's result, and what `set` assigns. */
const variableName = (label: string) =>
  v.pipe(v.string(`${label} must be a string`), v.regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, `${label} must be a name of letters, digits and _`));
const saveAs = { saveAs: v.optional(variableName('saveAs')) };
/** An expression (a string) for a computed value, or any other JSON value taken as it is. */
const valueOrExpression = (label: string) =>
  v.union(
    [expression(label), v.record(v.string(), v.unknown()), v.array(v.unknown()), v.number(), v.boolean(), v.null()],
    `${label} must be an expression or a JSON value`,
  );
const seconds = (label: string) =>
  v.pipe(v.number(`${label} must be a number`), v.minValue(0, `${label} must not be negative`), v.maxValue(366 * 24 * 3600, `${label} must be at most a year`));

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** The built-in node types and their config. */
export const BUILT_IN_NODE_TYPES = {
  start: { describe: 'Where a run begins; workflowArgs are $args.', config: v.optional(v.object({}), {}) },
  end: {
    describe: "Where a run ends; output (an expression) is the run's output, the variables when omitted.",
    config: v.optional(v.object({ output: v.optional(expression('output')) }), {}),
  },
  set: {
    describe: 'Sets variables: values maps each name to an expression.',
    config: v.object({
      values: v.pipe(
        v.record(variableName('a variable name'), expression('a value')),
        v.check((values) => Object.keys(values).length > 0, 'values must set at least one variable'),
      ),
    }),
  },
  condition: {
    describe: 'Evaluates expression into $result; the edges after it choose by their condition (for example "$result").',
    config: v.object({ expression: expression('expression'), ...saveAs }),
  },
  rpc: {
    describe: "Calls an operation as the workflow's caller; params an expression or an object.",
    config: v.object({
      method: v.pipe(v.string('method must be a string'), v.regex(/^[A-Za-z][A-Za-z0-9]*\.[A-Za-z][A-Za-z0-9]*$/, 'method must be "Group.operation"')),
      params: v.optional(valueOrExpression('params')),
      ...saveAs,
    }),
  },
  http: {
    describe: 'Makes an HTTP request through the outbound guard; url and headers are templates, body an expression or a value.',
    config: v.object({
      url: template('url'),
      method: v.optional(v.picklist(HTTP_METHODS, `method must be one of ${HTTP_METHODS.join(', ')}`), 'GET'),
      headers: v.optional(v.record(v.string(), template('a header'))),
      body: v.optional(valueOrExpression('body')),
      ...saveAs,
    }),
  },
  wait: {
    describe: 'Suspends the run until sendEventToWorkflow delivers the event named; its data becomes $event (and saveAs).',
    config: v.object({ event: v.pipe(v.string('event must be a string'), v.minLength(1, 'event must not be empty'), v.maxLength(200)), ...saveAs }),
  },
  delay: {
    describe: 'Suspends the run for seconds, or until the time an expression gives; survives restarts.',
    config: v.pipe(
      v.object({ seconds: v.optional(seconds('seconds')), until: v.optional(expression('until')) }),
      v.check((config) => (config.seconds === undefined) !== (config.until === undefined), 'a delay takes either seconds or until'),
    ),
  },
  tool: {
    describe: "Calls a tool of the tool catalogue (getAvailableTools) as the workflow's caller; params an expression or an object.",
    config: v.object({
      tool: v.pipe(v.string('tool must be a string'), v.minLength(1, 'tool must not be empty')),
      params: v.optional(valueOrExpression('params')),
      ...saveAs,
    }),
  },
  ai: {
    describe: 'Asks a chat model (the catalogue default unless model is given); prompt and system are templates; the answer is $result.',
    config: v.object({
      prompt: template('prompt'),
      system: v.optional(template('system')),
      model: v.optional(v.pipe(v.string('model must be a string'), v.minLength(1))),
      ...saveAs,
    }),
  },
} as const satisfies Record<string, { describe: string; config: v.GenericSchema }>;

export type BuiltInNodeType = keyof typeof BUILT_IN_NODE_TYPES;

/** The checked config of a built-in node type, as it was saved. */
export type NodeConfig<T extends BuiltInNodeType> = v.InferOutput<(typeof BUILT_IN_NODE_TYPES)[T]['config']>;
