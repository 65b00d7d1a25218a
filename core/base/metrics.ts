import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one app instance (its own registry, so several instances can share a process). */
export class Metrics {
  readonly registry = new Registry();
  readonly rpcCalls: Counter<'method' | 'code'>;
  readonly rpcDuration: Histogram<'method'>;
  /** outcome `accepted`, or `refused` with the reason: `unauthenticated`, `user_limit`, `address_limit`, `total_limit`. */
  readonly webSockets: Counter<'outcome' | 'reason'>;
  readonly webSocketsOpen: Gauge;
  /** OpenTelemetry's GenAI client metrics (gen_ai.client.token.usage, gen_ai.client.operation.duration), by operation, provider and model. */
  readonly aiTokens: Histogram<'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model' | 'gen_ai_token_type'>;
  readonly aiDuration: Histogram<'gen_ai_operation_name' | 'gen_ai_provider_name' | 'gen_ai_request_model' | 'error_type'>;
  // Label-bound children, made once per method and outcome: the per-call cost is then a plain add.
  readonly #callChildren = new Map<string, { inc(): void }>();
  readonly #durationChildren = new Map<string, { observe(value: number): void }>();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.rpcCalls = new Counter({
      name: 'rpc_calls_total',
      help: 'RPC calls by method and outcome code (OK on success)',
      labelNames: ['method', 'code'],
      registers: [this.registry],
    });
    this.rpcDuration = new Histogram({
      name: 'rpc_call_duration_seconds',
      help: 'Time from request to response of RPC calls',
      labelNames: ['method'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [this.registry],
    });
    this.webSockets = new Counter({
      name: 'websocket_connections_total',
      help: 'WebSocket connection attempts by outcome, and refusals by reason',
      labelNames: ['outcome', 'reason'],
      registers: [this.registry],
    });
    this.webSocketsOpen = new Gauge({
      name: 'websocket_connections_open',
      help: 'WebSockets open on this node',
      registers: [this.registry],
    });
    // The buckets the GenAI conventions advise for these two.
    this.aiTokens = new Histogram({
      name: 'gen_ai_client_token_usage',
      help: 'Tokens of AI calls, input and output (gen_ai_token_type), by operation, provider and model',
      labelNames: ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'gen_ai_token_type'],
      buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
      registers: [this.registry],
    });
    this.aiDuration = new Histogram({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'Duration of AI calls, retries included, by operation, provider, model and error type (empty on success)',
      labelNames: ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model', 'error_type'],
      buckets: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
      registers: [this.registry],
    });
  }

  /** Counts one RPC call and its duration. */
  recordCall(method: string, code: string, seconds: number): void {
    const key = `${method} ${code}`;
    let calls = this.#callChildren.get(key);
    if (!calls) this.#callChildren.set(key, (calls = this.rpcCalls.labels(method, code)));
    calls.inc();
    let duration = this.#durationChildren.get(method);
    if (!duration) this.#durationChildren.set(method, (duration = this.rpcDuration.labels(method)));
    duration.observe(seconds);
  }
}
