import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';
import { logLines } from '../support/wire.ts';
import { linearGraph } from '../support/workflows.ts';

/** An OTLP attribute: its key, and its value under the name of its type (`stringValue`, `intValue`, ...). */
interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}

/** What the exporter posts (OTLP/HTTP JSON's ExportTraceServiceRequest), as far as these tests read it. */
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: { spans: { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes?: OtlpAttribute[] }[] }[];
  }[];
}

/** One span as OTLP/HTTP JSON carries it, its attributes flattened. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Record<string, unknown>;
}

type Receiver = Awaited<ReturnType<typeof startHttpReceiver>>;

/** Every span the collector has been sent, from the exporter's JSON bodies. */
function spansOf(collector: Receiver): ReceivedSpan[] {
  return collector.requests.flatMap((request) =>
    (JSON.parse(request.body) as OtlpExport).resourceSpans.flatMap((resource) =>
      resource.scopeSpans.flatMap((scope) =>
        scope.spans.map((span) => ({
          ...span,
          attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]])),
        })),
      ),
    ),
  );
}

/** A traceparent of a new trace, as a caller would send it. */
function newTrace(): { traceId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  return { traceId, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
}

/** Whether `span` descends from the span `ancestorId` among `spans`. */
function descendsFrom(span: ReceivedSpan, ancestorId: string, spans: ReceivedSpan[]): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  for (let parent = span.parentSpanId; parent; parent = byId.get(parent)?.parentSpanId) if (parent === ancestorId) return true;
  return false;
}

describe('OpenTelemetry traces', () => {
  let t: TestApp;
  let collector: Receiver;
  let hooks: Receiver;

  before(async () => {
    collector = await startHttpReceiver();
    hooks = await startHttpReceiver();
    t = await startTestApp({
      withNotes: false,
      plugins: ['auth', 'api-key', 'api-management', 'secrets', 'workflow'],
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: 'traced-service',
        OUTBOUND_ALLOW_PRIVATE: 'true',
        JOBS_POLL_MS: '500',
      },
    });
  });
  after(async () => {
    await t.close();
    await Promise.all([collector.close(), hooks.close()]);
  });

  it("follows one call from the caller's trace through its statements to the job and the webhook it caused", async () => {
    const admin = await t.signup();
    const key = await t.as(admin).ApiKeyRpc.create({ description: 'traced' });
    await t.as({ apiKey: key.fullKey }).ApiManagementRpc.registerWebhook({ webhookUrl: `${hooks.url}/hooks` });

    const { traceId, traceparent } = newTrace();
    await t.ok('SecretsRpc.create', { zone: 'traced', key: 'TRACED', value: 'not-in-any-span' }, { token: admin.token, headers: { traceparent } });

    const delivery = await eventually(() => hooks.requests.find((request) => request.body.includes('"secret.changed"')));
    assert.match(delivery.headers.traceparent ?? '', new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), 'the webhook receiver is sent the trace');

    const inTrace = () => spansOf(collector).filter((span) => span.traceId === traceId);
    const spans = await eventually(() => {
      const found = inTrace();
      const whole = found.some((span) => span.name === 'SecretsRpc.create') && found.some((span) => span.name.startsWith('job '));
      return whole && found.some((span) => span.attributes['server.port'] === hooks.port) ? found : undefined;
    });

    const call = spans.find((span) => span.name === 'SecretsRpc.create')!;
    assert.ok(call, 'the RPC call has a span');
    assert.equal(call.attributes['rpc.method'], 'SecretsRpc.create');
    assert.equal(call.attributes['subscription.id'], admin.subscriptionId);
    assert.equal(call.attributes['rpc.status_code'], 'OK', 'a success names its status too');
    assert.equal(call.parentSpanId, traceparent.split('-')[2], "the call continues the caller's trace");

    const statements = spans.filter((span) => span.attributes['db.system.name'] === 'postgresql' && descendsFrom(span, call.spanId, spans));
    assert.ok(
      statements.some((span) => /^insert/i.test(String(span.attributes['db.query.text']))),
      'the insert is a span under the call',
    );

    const job = spans.find((span) => span.name.startsWith('job '))!;
    assert.ok(descendsFrom(job, call.spanId, spans), 'the job continues the trace of the call that enqueued it');
    const webhook = spans.find((span) => span.attributes['server.port'] === hooks.port)!;
    assert.equal(webhook.attributes['http.request.method'], 'POST');
    assert.equal(webhook.attributes['http.response.status_code'], 200);
    assert.ok(descendsFrom(webhook, job.spanId, spans), 'the webhook is sent from the job');
    assert.equal(delivery.headers.traceparent!.split('-')[2], webhook.spanId, "the receiver's parent is the request's span");

    const everything = JSON.stringify(spansOf(collector));
    assert.ok(!everything.includes('not-in-any-span') && !everything.includes('TRACED'), 'no span holds a param, nor a statement its values');
    const resource = (JSON.parse(collector.requests[0]!.body) as OtlpExport).resourceSpans[0]!.resource.attributes;
    assert.deepEqual(
      resource.find((a) => a.key === 'service.name'),
      { key: 'service.name', value: { stringValue: 'traced-service' } },
    );

    const logged = logLines(t.logs).filter((line) => line.trace_id === traceId);
    assert.ok(
      logged.some((line) => line.method === 'SecretsRpc.create' && line.span_id === call.spanId),
      'the call is logged with its trace',
    );
  });

  it('names a failed call by our error code, as its status code and error type', async () => {
    const admin = await t.signup();
    const { traceId, traceparent } = newTrace();
    const missing = await t.call('SecretsRpc.getSecretValue', { zone: 'nowhere', key: 'MISSING' }, { token: admin.token, headers: { traceparent } });
    assert.equal(missing.status, 404);
    const call = await eventually(() => spansOf(collector).find((span) => span.traceId === traceId && span.name === 'SecretsRpc.getSecretValue'));
    assert.equal(call.attributes['rpc.status_code'], 'NOT_FOUND');
    assert.equal(call.attributes['error.type'], 'NOT_FOUND');
  });

  it("continues an agent's trace through an MCP tool call", async () => {
    const admin = await t.signup();
    const { traceId, traceparent } = newTrace();
    const client = new Client({ name: 'traced-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${admin.token}`, traceparent } } }),
    );
    try {
      const answer = await client.callTool({ name: 'SecretsRpc_getData', arguments: {} });
      assert.notEqual(answer.isError, true);
    } finally {
      await client.close();
    }
    const tool = await eventually(() => spansOf(collector).find((span) => span.traceId === traceId && span.name === 'tools/call SecretsRpc_getData'));
    assert.equal(tool.parentSpanId, traceparent.split('-')[2], "the tool call's span is the agent's span's child");
    const call = await eventually(() => spansOf(collector).find((span) => span.traceId === traceId && span.name === 'SecretsRpc.getData'));
    assert.equal(call.parentSpanId, tool.spanId, "the operation's span is inside the tool call's");
  });

  it('gives a workflow run a span, and each of its nodes one, the HTTP request of an http node under its own', async () => {
    const admin = await t.signup();
    const graph = linearGraph([{ id: 'call', type: 'http', config: { url: `${hooks.url}/flow`, method: 'POST', body: '{"n": 1}' } }]);
    await t.as(admin).WorkflowRpc.create({ name: 'traced', ...graph });
    const { traceId, traceparent } = newTrace();
    const run = await t.ok('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'traced' }, { token: admin.token, headers: { traceparent } });
    assert.equal(run.result.status, 'completed');

    const spans = await eventually(() => {
      const found = spansOf(collector).filter((span) => span.traceId === traceId);
      // The call's own span ends last, after its answer, and may come in a later export than its children.
      const whole = ['workflow node end', 'WorkflowRpc.executeWorkflow', 'workflow traced'].every((name) => found.some((span) => span.name === name));
      return whole && found.some((span) => span.attributes['server.port'] === hooks.port) ? found : undefined;
    });
    const call = spans.find((span) => span.name === 'WorkflowRpc.executeWorkflow')!;
    const part = spans.find((span) => span.name === 'workflow traced')!;
    assert.ok(descendsFrom(part, call.spanId, spans), 'the run is under the call that started it');
    const nodes = spans.filter((span) => span.parentSpanId === part.spanId && span.name.startsWith('workflow node '));
    assert.deepEqual(nodes.map((span) => span.attributes['workflow.node.id']).sort(), ['call', 'done', 'start']);
    const http = nodes.find((span) => span.attributes['workflow.node.id'] === 'call')!;
    const request = spans.find((span) => span.attributes['server.port'] === hooks.port)!;
    assert.ok(descendsFrom(request, http.spanId, spans), "the node's request is under the node");
  });
});
