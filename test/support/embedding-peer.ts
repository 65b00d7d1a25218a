import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_CATALOGUE_FILE } from '../../core/ai/catalogue.ts';
import embed, { vectorsOf } from '../../workers/embed.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from './database.ts';
import { startTestApp, type TestApp } from './harness.ts';
import { startHttpReceiver } from './peers.ts';

/** The id the catalogue file gives the peer's model. */
export const PEER_MODEL = 'peer-embed';

/** The local embedder's vector of a text, reversed: what the peer answers for it. */
export const reversedVectorOf = (text: string): number[] => [...vectorsOf(embed({ texts: [text], dimensions: 384 }).vectors, 384)[0]!].reverse();

/**
 * A new embedding model for tests of a change of model: an OpenAI-compatible
 * embeddings server on loopback whose vectors are the local embedder's,
 * reversed (as good at finding texts, but different vectors), and a
 * catalogue file (for AI_CATALOGUE_FILE) that makes it the default
 * embedding model. `delayMs` slows its answers, so a switch can be watched.
 */
export async function startEmbeddingPeer() {
  const received: string[][] = [];
  const peer = {
    delayMs: 0,
    received,
    catalogueFile: '',
    close: async () => {},
  };
  const server = await startHttpReceiver((request) => {
    const { input } = JSON.parse(request.body) as { input: string[] };
    received.push(input);
    const data = input.map((text, index) => ({ index, embedding: reversedVectorOf(text) }));
    return { status: 200, delayMs: peer.delayMs, json: { data, usage: { prompt_tokens: input.length } } };
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-embedding-peer-'));
  const catalogue = JSON.parse(readFileSync(DEFAULT_CATALOGUE_FILE, 'utf8'));
  catalogue.providers.push({ name: 'loopback', type: 'openai-compatible', baseUrl: `${server.url}/v1`, apiKeyEnvVar: null });
  catalogue.models.push({ ...catalogue.models.find((model: { id: string }) => model.id === 'text-embedding-3-small'), id: PEER_MODEL, provider: 'loopback' });
  catalogue.defaults.embedding = PEER_MODEL;
  peer.catalogueFile = path.join(dir, 'catalogue.json');
  writeFileSync(peer.catalogueFile, JSON.stringify(catalogue));
  peer.close = async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return peer;
}

type EmbeddingPeer = Awaited<ReturnType<typeof startEmbeddingPeer>>;

/**
 * Runs a test of a change of embedding model: `start()` starts the plugins
 * on one database kept between starts (PostgreSQL with TEST_DATABASE_URL,
 * else PGlite on disk) with the local embedder as the default model,
 * `start({ newModel: true })` with the peer's model instead. Jobs are polled
 * every 500 ms. Everything is removed at the end.
 */
export async function withModelChange(plugins: string[], run: (args: { peer: EmbeddingPeer; start(options?: { newModel?: boolean }): Promise<TestApp> }) => Promise<void>) {
  const peer = await startEmbeddingPeer();
  const dir = mkdtempSync(path.join(tmpdir(), 'rpc-model-change-'));
  const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
  const options = { withNotes: false, plugins, dataDir: path.join(dir, 'data'), persistent: true, databaseUrl: scratch?.url };
  try {
    await run({
      peer,
      start: ({ newModel = false } = {}) =>
        startTestApp({ ...options, env: { JOBS_POLL_MS: '500', ...(newModel ? { AI_CATALOGUE_FILE: peer.catalogueFile, OUTBOUND_ALLOW_PRIVATE: 'true' } : {}) } }),
    });
  } finally {
    await peer.close();
    await scratch?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
