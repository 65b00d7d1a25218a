import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { refused, shown, type Who } from '../../../test/support/caller.ts';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

/**
 * Recall by words (BM25), by meaning, and both fused (the default), each
 * over the owner's memories only; and memories saved before recall ranked
 * by words, found by them after the upgrade.
 */
describe('MemoryRpc.recallMemories: modes', () => {
  let t: TestApp;
  let member: Member;
  let other: Member;
  const notes = [
    'The quarterly budget review moved to Thursday',
    'Budget owners send their budget figures by Monday',
    'The warehouse in Porto stores the spare turbines',
    'Lunch with the auditors was pleasant',
  ];
  const ids = new Map<string, string>();
  const recall = (who: Who, queryText: string, mode?: 'hybrid' | 'semantic' | 'text', topK = 10) =>
    t.as(who).MemoryRpc.recallMemories({ scope: 'user', queryText, topK, ...(mode ? { mode } : {}) });

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'memory'] });
    const admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    other = await addUser(t, admin.subscriptionId, 'user');
    for (const content of notes) ids.set(content, (await t.as(member).MemoryRpc.saveMemory({ scope: 'user', memory: { content } })).memoryId);
    await t.as(other).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'Turbines turbines turbines in the Porto warehouse' } });
  });
  after(() => t.close());

  it('text: only memories sharing a word, a rare word outweighing a common one, stems matched', async () => {
    // "turbine" is held by one of the member's memories, "budget" by two: the rare word wins although the query says budget twice.
    const { memories } = await recall(member, 'budget budget turbine', 'text');
    assert.equal(memories[0]!.id, ids.get(notes[2]!));
    assert.deepEqual(new Set(memories.map((memory) => memory.content)), new Set([notes[0], notes[1], notes[2]]));
    assert.ok(memories.every((memory) => memory.score > 0));
    // "reviewing" and "review" share the stem the English configuration gives them.
    assert.deepEqual(
      (await recall(member, 'reviewing', 'text')).memories.map((memory) => memory.id),
      [ids.get(notes[0]!)],
    );
    assert.deepEqual((await recall(member, 'zeppelin', 'text')).memories, []);
    // Words the English configuration drops (and signs): nothing to rank by, an empty answer rather than an error.
    assert.deepEqual((await recall(member, 'the of and', 'text')).memories, []);
    assert.deepEqual((await recall(member, "'\\ & | !(", 'text')).memories, []);
  });

  it("counts and ranks the owner's memories only", async () => {
    // The other user's memory says "turbines" three times; it is never seen, nor does it make the word common.
    const { memories } = await recall(member, 'turbines', 'text');
    assert.deepEqual(
      memories.map((memory) => memory.id),
      [ids.get(notes[2]!)],
    );
    assert.equal((await recall(other, 'budget', 'text')).memories.length, 0);
  });

  it('semantic: every memory of the owner, by cosine similarity; hybrid (the default): both rankings fused', async () => {
    const semantic = (await recall(member, 'budget figures', 'semantic')).memories;
    assert.equal(semantic.length, notes.length);
    assert.ok(semantic.every((memory) => memory.score <= 1 && memory.score >= -1));
    const hybrid = (await recall(member, 'budget figures')).memories;
    // Found by words and by meaning, so first in both and first fused; those sharing no word still come, from the ranking by meaning.
    assert.equal(hybrid[0]!.id, ids.get(notes[1]!));
    assert.equal(hybrid.length, notes.length);
    const scores = hybrid.map((memory) => memory.score);
    assert.deepEqual(
      scores,
      [...scores].sort((a, b) => b - a),
    );
    assert.equal((await recall(member, 'budget figures', 'hybrid', 1)).memories.length, 1);
  });

  it('refuses a mode it does not know', async () => {
    const refusal = await refused(t.as(member).MemoryRpc.recallMemories({ scope: 'user', queryText: 'budget', mode: 'fuzzy' as 'text' }), 'VALIDATION_ERROR');
    assert.match(shown(refusal), /mode must be one of hybrid, semantic, text/);
  });
});

describe('MemoryRpc: memories saved before recall ranked by words', () => {
  it('get their words when the service is upgraded, and are found by them', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'rpc-memory-words-'));
    const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL) : undefined;
    const start = () => startTestApp({ dataDir, persistent: true, databaseUrl: scratch?.url, withNotes: false, plugins: ['auth', 'memory'] });
    try {
      const first = await start();
      const account = await first.signup();
      let saved: string;
      try {
        saved = (await first.as(account).MemoryRpc.saveMemory({ scope: 'user', memory: { content: 'The lighthouse keeper retires in spring' } })).memoryId;
        // As a release before that migration left the table: no words, and the migration not yet run.
        await first.app.deps.db.execute('drop index memory_search_vector_index');
        await first.app.deps.db.execute('alter table memory drop column search_vector');
        await first.app.deps.db.execute(`delete from core_migrations where name = 'memory:Migration20261207145200_search_words'`);
      } finally {
        await first.close();
      }
      const upgraded = await start();
      try {
        const { memories } = await upgraded.as(account).MemoryRpc.recallMemories({ scope: 'user', queryText: 'lighthouses', mode: 'text' });
        assert.deepEqual(
          memories.map((memory) => memory.id),
          [saved],
        );
      } finally {
        await upgraded.close();
      }
    } finally {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
