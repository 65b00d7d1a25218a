import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { PEER_CHAT_MODEL, PEER_EMBEDDING_MODEL, startModelPeer } from '../support/model-peer.ts';
import { eventually, startHttpReceiver } from '../support/peers.ts';
import { completedRun, linearGraph } from '../support/workflows.ts';

type Receiver = Awaited<ReturnType<typeof startHttpReceiver>>;

/** One span as OTLP/HTTP JSON carries it: its name, kind and attributes, each attribute's value under the name of its type. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

function spansOf(collector: Receiver): ReceivedSpan[] {
  type Export = {
    resourceSpans: {
      scopeSpans: {
        spans: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: { key: string; value: Record<string, unknown> }[];
        }[];
      }[];
    }[];
  };
  const valueOf = (value: Record<string, unknown>): unknown => {
    const [type, inner] = Object.entries(value)[0]!;
    return type === 'arrayValue' ? ((inner as { values?: Record<string, unknown>[] }).values ?? []).map(valueOf) : inner;
  };
  return collector.requests.flatMap((request) =>
    (JSON.parse(request.body) as Export).resourceSpans.flatMap((resource) =>
      resource.scopeSpans.flatMap((scope) =>
        scope.spans.map((span) => ({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId,
          name: span.name,
          kind: span.kind,
          attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, valueOf(a.value)])),
        })),
      ),
    ),
  );
}

/** OTLP's SpanKind: 2 is SERVER, 3 CLIENT. */
const SERVER = 2;
const CLIENT = 3;

/** The service sending its spans to a collector, with its models at the loopback peer (the OpenAI-compatible provider). */
async function tracedService(plugins: string[], env: Record<string, string> = {}) {
  const collector = await startHttpReceiver();
  const peer = await startModelPeer();
  const t = await startTestApp({
    withNotes: false,
    plugins,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      AI_CATALOGUE_FILE: peer.catalogueFile,
      OUTBOUND_ALLOW_PRIVATE: 'true',
      ...env,
    },
  });
  return { t, collector, peer };
}

async function closeTraced(t: TestApp, collector: Receiver, peer: { close(): Promise<void> }): Promise<void> {
  await t?.close();
  await Promise.all([collector?.close(), peer?.close()]);
}

/**
 * The AI calls the service makes, as spans in OpenTelemetry's GenAI
 * conventions, so LLM observability tools that read them (Langfuse,
 * Phoenix, OpenLLMetry) show them as model calls: an embedding (a memory
 * saved) and a chat (a workflow's ai node), through the OpenAI-compatible
 * provider, never with their content.
 */
describe('AI calls as GenAI spans', () => {
  let t: TestApp;
  let collector: Receiver;
  let peer: Awaited<ReturnType<typeof startModelPeer>>;

  before(async () => void ({ t, collector, peer } = await tracedService(['auth', 'memory', 'workflow'])));
  after(() => closeTraced(t, collector, peer));

  it('an embedding call: embeddings and the model as its name, the provider, the server, the vector size and the tokens', async () => {
    const admin = await t.signup();
    await t.as(admin).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'a secret recipe for plum jam' } });
    const span = await eventually(() => spansOf(collector).find((each) => each.name === `embeddings ${PEER_EMBEDDING_MODEL}`));
    assert.equal(span.kind, CLIENT);
    assert.deepEqual(span.attributes, {
      'gen_ai.operation.name': 'embeddings',
      'gen_ai.provider.name': 'loopback',
      'gen_ai.request.model': PEER_EMBEDDING_MODEL,
      'gen_ai.embeddings.dimension.count': 384,
      'server.address': new URL(peer.url).hostname,
      'server.port': Number(new URL(peer.url).port),
      'gen_ai.response.model': PEER_EMBEDDING_MODEL,
      'gen_ai.usage.input_tokens': 1,
      'gen_ai.usage.output_tokens': 0,
    });
    assert.ok(!JSON.stringify(collector.requests.map((request) => request.body)).includes('plum jam'), 'the text embedded is not in any span');
  });

  it('a chat call: chat and the model as its name, the run as the conversation, the answering model, tokens and finish reason', async () => {
    const admin = await t.signup();
    const graph = {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'ask', type: 'ai', config: { prompt: 'Tell me about {{ $args.topic }}', saveAs: 'answer' } },
        { id: 'done', type: 'end', config: { output: 'answer' } },
      ],
      edges: [
        { source: 'start', target: 'ask' },
        { source: 'ask', target: 'done' },
      ],
    };
    await t.as(admin).WorkflowRpc.create({ name: 'Ask', ...graph });
    await t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Ask', workflowArgs: { topic: 'the moon landing' } });
    const span = await eventually(() => spansOf(collector).find((each) => each.name === `chat ${PEER_CHAT_MODEL}`));
    assert.equal(span.kind, CLIENT);
    const { 'gen_ai.conversation.id': conversation, ...attributes } = span.attributes;
    assert.match(String(conversation), /^[0-9a-f-]{36}$/, "the workflow run's id");
    assert.deepEqual(attributes, {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'loopback',
      'gen_ai.request.model': PEER_CHAT_MODEL,
      'server.address': new URL(peer.url).hostname,
      'server.port': Number(new URL(peer.url).port),
      'gen_ai.response.model': `${PEER_CHAT_MODEL}-2026-01-01`,
      'gen_ai.response.id': 'chatcmpl-1',
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    assert.ok(!JSON.stringify(collector.requests.map((request) => request.body)).includes('moon landing'), 'neither prompt nor answer is in any span');
  });

  it("a workflow's tool node: its call of the tool as execute_tool, inside the node's span", async () => {
    const admin = await t.signup();
    const graph = linearGraph(
      [{ id: 'look', type: 'tool', config: { tool: 'memory.recall', params: '{"scope": "user", "queryText": "plums"}', saveAs: 'found' } }],
      'found',
    );
    await t.as(admin).WorkflowRpc.create({ name: 'Look', ...graph });
    completedRun(await t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Look', workflowArgs: {} }));
    const span = await eventually(() => spansOf(collector).find((each) => each.name === 'execute_tool memory.recall'));
    const { 'gen_ai.tool.call.id': callId, ...attributes } = span.attributes;
    assert.match(String(callId), /^[0-9a-f-]{36}:look$/, 'the run and the node');
    assert.deepEqual(attributes, { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'memory.recall', 'gen_ai.tool.type': 'function' });
    // The node's span ends after its tool's, and may reach the collector in a later batch.
    const parent = await eventually(() => spansOf(collector).find((each) => each.spanId === span.parentSpanId));
    assert.equal(parent.name, 'workflow node tool');
    assert.equal(parent.attributes['workflow.node.id'], 'look');
  });

  it('counts the same calls in the GenAI client metrics: tokens by type, and duration', async () => {
    // The embedding and the chat of the first two tests above, one each (the recall of the third embeds its question too).
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const embedding = `gen_ai_operation_name="embeddings",gen_ai_provider_name="loopback",gen_ai_request_model="${PEER_EMBEDDING_MODEL}"`;
    const chat = `gen_ai_operation_name="chat",gen_ai_provider_name="loopback",gen_ai_request_model="${PEER_CHAT_MODEL}"`;
    const value = (line: string) => Number(new RegExp(`^${line.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.equal(value(`gen_ai_client_token_usage_sum{${embedding},gen_ai_token_type="input"}`), 2);
    assert.equal(value(`gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="input"}`), 10);
    assert.equal(value(`gen_ai_client_token_usage_sum{${chat},gen_ai_token_type="output"}`), 5);
    assert.equal(value(`gen_ai_client_operation_duration_seconds_count{${embedding},error_type=""}`), 2);
    assert.equal(value(`gen_ai_client_operation_duration_seconds_count{${chat},error_type=""}`), 1);
  });

  it("an MCP client's tools/call: execute_tool, named as the MCP conventions name it, continuing the agent's trace, the operation inside", async () => {
    const admin = await t.signup();
    const agentTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const answer = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${admin.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        traceparent: `00-${agentTrace}-00f067aa0ba902b7-01`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'MemoryRpc_listMemories', arguments: { scope: 'user' } } }),
    });
    assert.equal(answer.status, 200);
    const span = await eventually(() => spansOf(collector).find((each) => each.name === 'tools/call MemoryRpc_listMemories'));
    assert.equal(span.kind, SERVER);
    assert.equal(span.traceId, agentTrace);
    assert.deepEqual(span.attributes, {
      'mcp.method.name': 'tools/call',
      'jsonrpc.request.id': '7',
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'MemoryRpc_listMemories',
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.id': '7',
    });
    const inside = await eventually(() => spansOf(collector).find((each) => each.name === 'MemoryRpc.listMemories' && each.parentSpanId === span.spanId));
    assert.equal(inside.attributes['rpc.method'], 'MemoryRpc.listMemories');
  });
});

/** With OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, as the conventions' instrumentations read it, a chat span carries its messages and answer. */
describe('AI calls as GenAI spans, with content captured on opt-in', () => {
  let t: TestApp;
  let collector: Receiver;
  let peer: Awaited<ReturnType<typeof startModelPeer>>;

  before(async () => void ({ t, collector, peer } = await tracedService(['auth', 'workflow'], { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' })));
  after(() => closeTraced(t, collector, peer));

  it('a chat span holds the input messages and the answer as the conventions write them', async () => {
    const admin = await t.signup();
    const graph = linearGraph([{ id: 'ask', type: 'ai', config: { prompt: 'Tell me about {{ $args.topic }}', saveAs: 'answer' } }], 'answer');
    await t.as(admin).WorkflowRpc.create({ name: 'Ask', ...graph });
    await t.as(admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Ask', workflowArgs: { topic: 'the moon landing' } });
    const span = await eventually(() => spansOf(collector).find((each) => each.name === `chat ${PEER_CHAT_MODEL}`));
    const input = JSON.parse(String(span.attributes['gen_ai.input.messages'])) as { role: string; parts: { type: string; content: string }[] }[];
    assert.deepEqual(input.at(-1), { role: 'user', parts: [{ type: 'text', content: 'Tell me about the moon landing' }] });
    assert.deepEqual(JSON.parse(String(span.attributes['gen_ai.output.messages'])), [
      { role: 'assistant', parts: [{ type: 'text', content: 'You said: Tell me about the moon landing' }], finish_reason: 'stop' },
    ]);
  });
});
