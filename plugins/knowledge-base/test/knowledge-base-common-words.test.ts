import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { COMMON_ROWS, TEXT_WINDOW, type AuthenticatedContext } from 'rpc-service/plugin';
import { COUNT_DELAY_SECONDS } from '../text-ranking.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';

/**
 * Hybrid search on a source larger than its full-text window: the words many
 * chunks hold are counted per subscription, and the full-text candidates come
 * from the question's other words and from the chunks holding all its words.
 */
describe('KnowledgeBaseAdminRpc.search on a large source', () => {
  let t: TestApp;
  let big: Awaited<ReturnType<TestApp['signup']>>;
  /** When the big source's writes began: its count is due COUNT_DELAY_SECONDS later, however long the writes took. */
  let began: number;
  let small: Awaited<ReturnType<TestApp['signup']>>;
  const CHUNKS = TEXT_WINDOW + 100;
  const index = () => t.app.depsOf('knowledge-base').knowledgeIndex;
  const contextOf = (account: { subscriptionId: string; user: { _id: string } }) => {
    const em = t.app.deps.db.forkEm(account.subscriptionId);
    return {
      subscriptionId: account.subscriptionId,
      userId: account.user._id,
      role: 'admin',
      requestId: randomUUID(),
      em,
      log: t.app.logger,
    } as unknown as AuthenticatedContext;
  };
  /** Writes one single-chunk record per text, in one transaction, as an ingestion does. */
  const write = async (account: typeof big, texts: string[]) => {
    const prepared = await index().prepare(
      texts.map((markdown, ordinal) => ({
        source: 'knowledge-base',
        recordId: randomUUID(),
        collection: null,
        title: `Log ${ordinal}`,
        markdown,
        metadata: { name: `Log ${ordinal}`, tags: [] },
      })),
    );
    await t.app.deps.db.forkEm(account.subscriptionId).transactional(async (em) => {
      for (const text of prepared) await index().write(contextOf(account), em, text);
    });
  };
  const commonWords = (account: typeof big) =>
    t.app.deps.db.execute<{ lexeme: string; chunks: number }>(
      'select lexeme, chunks from knowledge_base_common_word where subscription_id = ? and source = ? order by lexeme',
      [account.subscriptionId, 'knowledge-base'],
    );
  const search = (account: typeof big, queryText: string) => t.as(account).KnowledgeBaseAdminRpc.search({ queryText, topK: 5 });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'knowledge-base'] });
    big = await t.signup();
    small = await t.signup();
    // Every chunk of the big source holds "harbour"; one in forty "ferry"; one alone "lighthouse".
    began = Date.now();
    await write(
      big,
      Array.from({ length: CHUNKS }, (_, n) =>
        n === 7 ? 'The harbour lighthouse keeper logs the ferry.' : `Harbour log ${n}: ${n % 40 === 0 ? 'the ferry came in' : 'a quiet tide'}.`,
      ),
    );
    await write(small, ['The harbour master opens the gates.', 'Tide tables for the harbour.']);
  });
  after(() => t.close());

  it('counts a burst of writes once, a moment later, as a job of the subscription', async () => {
    const waiting = await t.app.deps.jobQueue.listJobs(big.subscriptionId, { queue: 'knowledge-base.countWords', offset: 0, limit: 10 });
    assert.equal(waiting.total, 1, `${CHUNKS} writes, one count`);
    assert.equal(waiting.jobs[0]!.state, 'waiting');
    // The database's clock and this one's may differ by a little.
    assert.ok(Date.parse(waiting.jobs[0]!.runAt) >= began + (COUNT_DELAY_SECONDS - 1) * 1000, 'it starts after the burst');
  });

  it("keeps the words many of a subscription's chunks hold, and none for a source its window covers", async () => {
    await t.app.deps.db.forkEm(big.subscriptionId).transactional((em) => index().countWords(big.subscriptionId, em, 'knowledge-base'));
    await t.app.deps.db.forkEm(small.subscriptionId).transactional((em) => index().countWords(small.subscriptionId, em, 'knowledge-base'));
    const words = await commonWords(big);
    assert.deepEqual(
      words.find((word) => word.lexeme === 'harbour'),
      { lexeme: 'harbour', chunks: CHUNKS },
    );
    assert.ok(words.every((word) => word.chunks > COMMON_ROWS));
    assert.equal(
      words.find((word) => word.lexeme === 'ferri'),
      undefined,
      'a word of one chunk in forty is not common',
    );
    assert.deepEqual(await commonWords(small), []);
  });

  it("finds the chunk by the question's uncommon word, and by all its words when every word is common", async () => {
    // The full-text side finds it first; where it lands among the fused hits depends on the vector index's neighbours of 600 near-copies.
    const hits = await search(big, 'harbour lighthouse');
    const lighthouse = hits.find((hit) => hit.text === 'The harbour lighthouse keeper logs the ferry.');
    assert.equal(lighthouse?.textRank, 1, JSON.stringify(hits));
    assert.ok(
      hits.every((hit) => hit === lighthouse || hit.textRank === null),
      'no other chunk holds "lighthouse"',
    );
    const common = await search(big, 'harbour log quiet tide');
    assert.ok(
      common.some((hit) => hit.textRank !== null && /quiet tide/.test(hit.text)),
      'chunks holding all the words are ranked',
    );
  });

  it('answers another subscription from its own chunks and counts, exactly as before on a small source', async () => {
    const hits = await search(small, 'harbour gates');
    assert.deepEqual(
      hits.map((hit) => [hit.text, hit.textRank]),
      [
        ['The harbour master opens the gates.', 1],
        ['Tide tables for the harbour.', 2],
      ],
    );
  });

  it('ranks by words alone with BM25 (mode text): a rare word of the question outweighs a common one said often', async () => {
    const fresh = await t.signup();
    await write(fresh, [
      'Harbour, harbour, harbour: the harbour wakes at dawn.',
      'A lighthouse stands on the cliff.',
      'The harbour market sells fish.',
      'Boats leave the harbour at noon.',
    ]);
    const hits = await t.as(fresh).KnowledgeBaseAdminRpc.search({ queryText: 'harbour lighthouse', topK: 5, mode: 'text' });
    assert.equal(hits[0]?.text, 'A lighthouse stands on the cliff.', JSON.stringify(hits));
    assert.deepEqual(
      hits.map((hit) => [hit.textRank, hit.semanticRank]),
      hits.map((_, index) => [index + 1, null]),
    );
    assert.equal(hits.length, 4, 'every chunk holding a word of the question, and no other');
    assert.ok(
      hits.every((hit, index) => index === 0 || hits[index - 1]!.score >= hit.score),
      'best first by BM25 score',
    );
  });
});
