import type { GenericSchema, InferInput, InferOutput } from 'valibot';
import type { AuthenticatedContext, RequestContext } from '../base/context.ts';

/**
 * Who may call an operation. `public` is for AuthRpc only; `user` is any
 * authenticated caller of the subscription; `staff` is admin or staff.
 */
export type Access = 'public' | 'user' | 'staff' | 'admin';
export const ACCESS_LEVELS: readonly Access[] = ['public', 'user', 'staff', 'admin'];

export interface CookieOptions {
  expires?: Date;
  /** Max age in seconds; 0 clears the cookie. */
  maxAge?: number;
}

/** What a handler may learn about, or ask of, the transport that carried the call. */
export interface Transport {
  /** The caller's address (from X-Forwarded-For only when TRUST_PROXY is on). */
  readonly clientIp: string;
  /** The base URL the caller used (PUBLIC_URL when set). */
  readonly baseUrl: string;
  /** The caller's User-Agent, cut to 300 characters; null when none was sent (or not over HTTP). */
  readonly userAgent: string | null;
  setCookie(name: string, value: string, options?: CookieOptions): void;
}

export type ContextFor<A extends Access> = A extends 'public' ? RequestContext : AuthenticatedContext;

export interface HandlerArgs<S extends GenericSchema, A extends Access, D = unknown> {
  params: InferOutput<S>;
  ctx: ContextFor<A>;
  /** The plugin's deps: the services it named, its own services, its config, logger and extension points. */
  deps: D;
  transport: Transport;
}

/**
 * `read`: answers from what is stored and changes nothing a caller can see
 * (an audit entry aside); `write`: creates, changes or deletes, or acts
 * outside (sends, calls, runs). Read-only API keys and MCP's hints read it.
 */
export type OperationKind = 'read' | 'write';
export const OPERATION_KINDS: readonly OperationKind[] = ['read', 'write'];

type Awaitable<T> = T | Promise<T>;

export interface OperationDefinition<S extends GenericSchema = GenericSchema, A extends Access = Access, D = unknown, R extends GenericSchema = GenericSchema> {
  access: A;
  params: S;
  /**
   * What the operation answers in `data` (for an `envelope(...)` answer, its
   * fields), as a valibot schema: the handler's return type is checked
   * against it, OpenRPC and the clients describe it, and with CHECK_RESULTS
   * on (the tests) every answer is checked at run time.
   */
  result?: R;
  kind?: OperationKind;
  /**
   * The operation needs a recent strong sign-in (step-up): a session whose
   * person proved who they are within STEP_UP_MAX_AGE_SECONDS, or an API key;
   * STEP_UP_REQUIRED otherwise. A function decides from the params (a role
   * change among other changes, say).
   */
  stepUp?: true | ((params: InferOutput<S>) => boolean);
  /** One line for the operation listing. */
  describe: string;
  handler(args: HandlerArgs<S, A, D>): Awaitable<InferInput<R> | Envelope>;
}

export const OPERATION_MARKER = Symbol.for('rpc-service.operation');

export type Operation = OperationDefinition<GenericSchema, Access> & { [OPERATION_MARKER]: true };

/** Declares one operation: access, params schema and handler as plain data. */
export function defineOperation<S extends GenericSchema, A extends Access, D = unknown, R extends GenericSchema = GenericSchema>(
  definition: OperationDefinition<S, A, D, R>,
): Operation {
  return { ...definition, [OPERATION_MARKER]: true } as unknown as Operation;
}

/**
 * `defineOperation` with the plugin's deps type fixed, so handlers see exactly
 * the services the plugin named: `export const defineOperation = operationBuilder<NoteDeps>();`
 */
export const operationBuilder =
  <D>() =>
  <S extends GenericSchema, A extends Access, R extends GenericSchema = GenericSchema>(definition: OperationDefinition<S, A, D, R>): Operation =>
    defineOperation(definition);

/**
 * A success answer with fields beside (or instead of) `data`, for the few
 * operations whose documented answer has that shape: `{success: true,
 * message}` or a bare `{success: true}` (their plugins' READMEs say which).
 */
export class Envelope {
  constructor(readonly fields: Record<string, unknown>) {}
}

export const envelope = (fields: Record<string, unknown> = {}): Envelope => new Envelope(fields);

/** The data a handler's answer carries: an envelope's fields, else the value (null for none). */
export const answerData = (result: unknown): unknown => (result instanceof Envelope ? result.fields : (result ?? null));
