import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_CATALOGUE_FILE } from '../../core/ai/catalogue.ts';
import embed, { vectorsOf } from '../../workers/embed.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from './database.ts';
import { startTestApp, type TestApp } from './harness.ts';
import { startHttpReceiver } from './peers.ts';

/** The ids the catalogue file gives the peer's models. */
export const PEER_EMBEDDING_MODEL = 'peer-embed';
export const PEER_CHAT_MODEL = 'peer-chat';

/** The catalogue the service ships (config/ai-catalogue.json), read afresh: a copy to compare with or to change. */
export const shippedCatalogue = () => JSON.parse(readFileSync(DEFAULT_CATALOGUE_FILE, 'utf8'));

/** The local embedder's vector of a text, reversed: what the peer answers for it. */
export const reversedVectorOf = (text: string): number[] => [...vectorsOf(embed({ texts: [text], dimensions: 384 }).vectors, 384)[0]!].reverse();

/**
 * An OpenAI-compatible model server on loopback, and a catalogue file (for
 * AI_CATALOGUE_FILE) that makes its models the defaults. Its embeddings are
 * the local embedder's vectors reversed (as good at finding texts, but
 * different vectors: a new embedding model for tests of a change of model);
 * its chat model answers "You said: " and the last user message, with an id,
 * a dated model name and a finish reason, as OpenAI's API does. `delayMs`
 * slows its embedding answers, so a switch can be watched.
 */
export async function startModelPeer() {
  const received: string[][] = [];
  const chats: { role: string; content: string }[][] = [];
  const peer = {
    delayMs: 0,
    /** The texts of each embeddings request, and the messages of each chat request. */
    received,
    chats,
    catalogueFile: '',
    /** Where it serves (its OpenAI-compatible routes are under /v1). */
    url: '',
    close: async () => {},
  };
  const server = await startHttpReceiver((request) => {
    if (request.path.endsWith('/chat/completions')) {
      const { messages } = JSON.parse(request.body) as { messages: { role: string; content: string }[] };
      chats.push(messages);
      const content = `You said: ${messages.filter((message) => message.role === 'user').at(-1)?.content ?? ''}`;
      return {
        status: 200,
        json: {
          id: `chatcmpl-${chats.length}`,
          model: `${PEER_CHAT_MODEL}-2026-01-01`,
          choices: [{ message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10, completion_tokens: 5 },
        },
      };
    }
    const { input } = JSON.parse(request.body) as { input: string[] };
    received.push(input);
    const data = input.map((text, index) => ({ index, embedding: reversedVectorOf(text) }));
    return { status: 200, delayMs: peer.delayMs, json: { data, usage: { prompt_tokens: input.length } } };
  });
  peer.url = server.url;
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-embedding-peer-'));
  const catalogue = shippedCatalogue();
  catalogue.providers.push({ name: 'loopback', type: 'openai-compatible', baseUrl: `${server.url}/v1`, apiKeyEnvVar: null });
  const like = (id: string) => catalogue.models.find((model: { id: string }) => model.id === id);
  catalogue.models.push(
    { ...like('text-embedding-3-small'), id: PEER_EMBEDDING_MODEL, provider: 'loopback' },
    { ...like('gpt-4o-mini'), id: PEER_CHAT_MODEL, provider: 'loopback' },
  );
  catalogue.defaults.embedding = PEER_EMBEDDING_MODEL;
  catalogue.defaults.chat = PEER_CHAT_MODEL;
  peer.catalogueFile = path.join(dir, 'catalogue.json');
  writeFileSync(peer.catalogueFile, JSON.stringify(catalogue));
  peer.close = async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return peer;
}

type ModelPeer = Awaited<ReturnType<typeof startModelPeer>>;

/**
 * Runs a test of a change of embedding model: `start()` starts the plugins
 * on one database kept between starts (PostgreSQL with TEST_DATABASE_URL,
 * else PGlite on disk) with the local embedder as the default model,
 * `start({ newModel: true })` with the peer's model instead. Jobs are polled
 * every 500 ms. Everything is removed at the end.
 */
export async function withModelChange(
  plugins: string[],
  run: (args: { peer: ModelPeer; start(options?: { newModel?: boolean }): Promise<TestApp> }) => Promise<void>,
) {
  const peer = await startModelPeer();
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-model-change-'));
  const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
  const options = { withNotes: false, plugins, dataDir: path.join(dir, 'data'), persistent: true, databaseUrl: scratch?.url };
  try {
    await run({
      peer,
      start: ({ newModel = false } = {}) =>
        startTestApp({
          ...options,
          env: { JOBS_POLL_MS: '500', ...(newModel ? { AI_CATALOGUE_FILE: peer.catalogueFile, OUTBOUND_ALLOW_PRIVATE: 'true' } : {}) },
        }),
    });
  } finally {
    await peer.close();
    await scratch?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
