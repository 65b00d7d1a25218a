import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PEER_EMBEDDING_MODEL, withModelChange } from '../../../test/support/model-peer.ts';
import type { TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { HANDBOOK } from '../../../test/fixtures/handbook.ts';

describe('KnowledgeBaseAdminRpc: switching the embedding model', () => {
  it('fills the other column with the new model while search answers from the old one, then cuts over', async () => {
    const vectorsNow = (app: TestApp) =>
      app.app.deps.db.execute<{ id: string; a: string | null; b: string | null }>(
        'select id, embedding_a::text as a, embedding_b::text as b from knowledge_base_chunk order by id',
      );
    await withModelChange(['auth', 'knowledge-base'], async ({ peer, start }) => {
      const { received } = peer;
      const first = await start();
      const admin = await first.signup();
      const { document } = await first.as(admin).KnowledgeBaseAdminRpc.ingestText({ name: 'Orbit handbook', content: HANDBOOK });
      await eventually(
        async () => ((await first.as(admin).KnowledgeBaseAdminRpc.getDocument({ docId: document._id })).status === 'ready' ? true : undefined),
        20_000,
      );
      const before = await vectorsNow(first);
      assert.ok(before.length >= 4 && before.every((row) => row.a !== null && row.b === null));
      await first.close();

      peer.delayMs = 2000;
      const second = await start({ newModel: true });
      try {
        const session = await second.as(null).AuthRpc.login({ identifier: admin.user.username, password: admin.password });
        const during = await second.as(session).KnowledgeBaseAdminRpc.getStats();
        assert.equal(during.embedding.model, 'local-lexical-384');
        assert.deepEqual([during.embedding.switch!.nextModel, during.embedding.switch!.total], [PEER_EMBEDDING_MODEL, before.length]);
        // Searches go on, answered from the old model's vectors (the question embedded locally, not by the slow new model).
        const [hit] = await second.as(session).KnowledgeBaseAdminRpc.search({ queryText: 'how long do refunds take', topK: 1 });
        assert.match(hit.text, /ten working days/);
        assert.ok(!received.flat().includes('how long do refunds take'), 'no question went to the new model yet');

        const switched = await eventually(async () => {
          const stats = await second.as(session).KnowledgeBaseAdminRpc.getStats();
          return stats.embedding.switch === null ? stats : undefined;
        }, 30_000);
        assert.equal(switched.embedding.model, PEER_EMBEDDING_MODEL);
        peer.delayMs = 0;
        // Every chunk now has the new model's vector in the other column: the reverse of its old one.
        const after = await eventually(async () => {
          const rows = await vectorsNow(second);
          return rows.every((row) => row.a === null) ? rows : undefined;
        }, 90_000);
        assert.deepEqual(
          after.map((row) => row.id),
          before.map((row) => row.id),
        );
        for (const [index, row] of after.entries()) {
          assert.deepEqual(JSON.parse(row.b!), [...JSON.parse(before[index]!.a!)].reverse());
        }
        const answered = received.length;
        const [afterHit] = await second.as(session).KnowledgeBaseAdminRpc.search({ queryText: 'how long do refunds take', topK: 1 });
        assert.match(afterHit.text, /ten working days/);
        assert.deepEqual(received.at(-1), ['how long do refunds take'], 'questions now go to the new model');
        assert.ok(received.length > answered);

        // Reindexing embeds every chunk again with the current model.
        await second.as(session).KnowledgeBaseAdminRpc.reindexDocument({ docId: document._id });
        await eventually(() => (received.slice(answered + 1).flat().length >= before.length ? true : undefined));
      } finally {
        await second.close();
      }
    });
  });
});
