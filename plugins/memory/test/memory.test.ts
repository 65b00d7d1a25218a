import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { RequestContext } from 'rpc-service/plugin';
import type { MemoryRpcListMemoriesResult, MemoryRpcRecallMemoriesParams, MemoryRpcSaveMemoryParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { PEER_EMBEDDING_MODEL, reversedVectorOf, withModelChange } from '../../../test/support/model-peer.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

describe('MemoryRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let agent: Member;
  const save = (who: Who, content: string, metadata?: Record<string, unknown>, extra: Partial<MemoryRpcSaveMemoryParams> = {}) =>
    t.as(who).MemoryRpc.saveMemory({ scope: 'user', memory: { content, ...(metadata ? { metadata } : {}) }, ...extra });
  const recall = (who: Who, queryText: string, extra: Partial<MemoryRpcRecallMemoriesParams> = {}) =>
    t.as(who).MemoryRpc.recallMemories({ scope: 'user', queryText, ...extra });

  before(async () => {
    // Recalls over more than 10 candidates use the HNSW index, so both ways of searching are exercised.
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'memory'], env: { MEMORY_EXACT_SEARCH_LIMIT: '10' } });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    agent = await addUser(t, admin.subscriptionId, 'agent');
  });
  after(() => t.close());

  it('saves memories with generated ids and recalls the lexically closest first, topK 3 by default', async () => {
    const saved = await save(member, 'The customer prefers invoices by e-mail on the first of the month', { topic: 'billing' });
    assert.equal(saved.success, true);
    assert.match(saved.memoryId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(typeof saved.message, 'string');
    for (const content of ['Favourite colour is green', 'Lives in Lisbon near the river', 'Allergic to peanuts', 'Plays chess on Sundays']) {
      await save(member, content);
    }
    const result = await recall(member, 'how does the customer want invoices sent');
    assert.equal(result.success, true);
    assert.equal(result.memories.length, 3);
    assert.equal(result.memories[0].id, saved.memoryId);
    assert.deepEqual(Object.keys(result.memories[0]).sort(), ['content', 'id', 'metadata', 'score']);
    assert.deepEqual(result.memories[0].metadata, { topic: 'billing' });
    assert.ok(result.memories[0].score > result.memories[1].score);
    assert.ok(result.memories[0].score <= 1 && result.memories[2].score >= -1);
    assert.equal((await recall(member, 'invoices', { topK: 1 })).memories.length, 1);
  });

  it('keeps one memory for the same content, and updates the memory a given id names', async () => {
    const first = await save(member, 'Prefers tea over coffee', { source: 'chat' });
    const again = await save(member, 'Prefers tea over coffee', { source: 'call' });
    assert.equal(again.memoryId, first.memoryId);
    const listed = await t.as(member).MemoryRpc.listMemories({ scope: 'user', limit: 200 });
    const copies = listed.memories.filter((memory) => memory.content === 'Prefers tea over coffee');
    assert.equal(copies.length, 1);
    assert.deepEqual(copies[0].metadata, { source: 'call' });

    const updated = await t.as(member).MemoryRpc.saveMemory({ scope: 'user', memory: { id: first.memoryId, content: 'Prefers green tea over coffee' } });
    assert.equal(updated.memoryId, first.memoryId);
    const [best] = (await recall(member, 'green tea')).memories;
    assert.equal(best.id, first.memoryId);
    assert.equal(best.content, 'Prefers green tea over coffee');
    assert.deepEqual(best.metadata, { source: 'call' }, 'metadata stays when not given');

    const chosenId = randomUUID();
    assert.equal((await t.as(member).MemoryRpc.saveMemory({ scope: 'user', memory: { id: chosenId, content: 'Has a dog named Rex' } })).memoryId, chosenId);
  });

  it('keeps user memories to their user, shares global ones inside the subscription only', async () => {
    const other = await t.signup();
    await save(admin, 'Admin private note about the quarterly budget');
    const global = await t.as(admin).MemoryRpc.saveMemory({ scope: 'global', memory: { content: 'Office closes at 6 pm on Fridays' } });

    const memberRecall = await recall(member, 'quarterly budget note', { topK: 10 });
    assert.ok(!memberRecall.memories.some((memory) => memory.content.includes('quarterly budget')));
    const shared = await t.as(member).MemoryRpc.recallMemories({ scope: 'global', queryText: 'when does the office close' });
    assert.equal(shared.memories[0].id, global.memoryId);
    const outsider = await t.as(other).MemoryRpc.recallMemories({ scope: 'global', queryText: 'when does the office close' });
    assert.equal(outsider.memories.length, 0);
    assert.equal((await t.as(other).MemoryRpc.listMemories({ scope: 'user' })).memories.length, 0);
    for (const [who, scope] of [
      [other, 'global'],
      [member, 'user'],
    ] as const) {
      await refused(t.as(who).MemoryRpc.deleteMemory({ scope, memoryId: global.memoryId }), 'NOT_FOUND', scope);
    }
  });

  it('keeps ids per subscription: an id another tenant uses is free, and each sees, changes and deletes only its own', async () => {
    const other = await t.signup();
    const id = randomUUID();
    const saveAs = (who: Who, content: string) => t.as(who).MemoryRpc.saveMemory({ scope: 'global', memory: { id, content } });
    assert.equal((await saveAs(admin, 'Front desk closes at noon on Saturdays')).memoryId, id);
    // Not a CONFLICT telling the other tenant the id exists: a memory of its own.
    assert.deepEqual(await saveAs(other, 'Warehouse opens at 7 am'), { success: true, memoryId: id, message: 'Memory saved' });
    const contentOf = async (who: Who) => {
      const listed = (await t.as(who).MemoryRpc.listMemories({ scope: 'global', limit: 200 })).memories.filter((memory) => memory.id === id);
      const recalled = (await t.as(who).MemoryRpc.recallMemories({ scope: 'global', queryText: 'front desk warehouse opens closes', topK: 100 })).memories;
      return {
        listed: listed.map((memory) => memory.content),
        recalled: recalled.filter((memory) => memory.id === id).map((memory) => memory.content),
      };
    };
    assert.deepEqual(await contentOf(member), {
      listed: ['Front desk closes at noon on Saturdays'],
      recalled: ['Front desk closes at noon on Saturdays'],
    });
    assert.deepEqual(await contentOf(other), { listed: ['Warehouse opens at 7 am'], recalled: ['Warehouse opens at 7 am'] });

    // Saving under the id again updates the caller's own memory only; deleting it deletes the caller's only.
    assert.equal((await saveAs(other, 'Warehouse opens at 8 am')).message, 'Memory updated');
    assert.deepEqual((await contentOf(member)).listed, ['Front desk closes at noon on Saturdays']);
    await t.as(other).MemoryRpc.deleteMemory({ scope: 'global', memoryId: id });
    assert.deepEqual(await contentOf(other), { listed: [], recalled: [] });
    assert.deepEqual((await contentOf(admin)).listed, ['Front desk closes at noon on Saturdays']);

    // Inside one subscription the id stays one memory's: another scope does not reach it, and the same content under another id is a CONFLICT.
    await refused(t.as(member).MemoryRpc.saveMemory({ scope: 'user', memory: { id, content: 'Mine now' } }), 'NOT_FOUND');
    await refused(
      t.as(member).MemoryRpc.saveMemory({ scope: 'global', memory: { id: randomUUID(), content: 'Front desk closes at noon on Saturdays' } }),
      'CONFLICT',
    );
  });

  it('lets agents and admins act for another user of the subscription with targetUserId, and no one else', async () => {
    const forMember = await save(agent, 'Asked the agent to call back on Monday', undefined, { targetUserId: member.user._id });
    const mine = await recall(member, 'call back Monday');
    assert.equal(mine.memories[0].id, forMember.memoryId);
    const byAgent = await recall(agent, 'call back Monday', { targetUserId: member.user._id });
    assert.equal(byAgent.memories[0].id, forMember.memoryId);
    assert.equal((await recall(agent, 'call back Monday')).memories.length, 0, "the agent's own memories are its own");

    await refused(t.as(member).MemoryRpc.recallMemories({ scope: 'user', queryText: 'x', targetUserId: admin.user._id }), 'FORBIDDEN');
    const outsider = await t.signup();
    await refused(t.as(agent).MemoryRpc.recallMemories({ scope: 'user', queryText: 'x', targetUserId: outsider.user._id }), 'NOT_FOUND');
  });

  it('deletes a memory of the scope', async () => {
    const saved = await save(member, 'Temporary memory to delete');
    assert.equal((await t.as(member).MemoryRpc.deleteMemory({ scope: 'user', memoryId: saved.memoryId })).success, true);
    await refused(t.as(member).MemoryRpc.deleteMemory({ scope: 'user', memoryId: saved.memoryId }), 'NOT_FOUND');
  });

  it('filters recall on metadata with every operator', async () => {
    const filtered = await t.signup();
    const items = [
      { content: 'ticket about login failure', metadata: { kind: 'ticket', priority: 1, tags: 'auth', customer: { tier: 'gold' } } },
      { content: 'ticket about slow login page', metadata: { kind: 'ticket', priority: 3, tags: 'perf', customer: { tier: 'silver' } } },
      { content: 'note about login redesign', metadata: { kind: 'note', priority: 2 } },
      { content: 'ticket about login timeout', metadata: { kind: 'Ticket', priority: 5, customer: { tier: 'gold' } } },
    ];
    const ids: string[] = [];
    for (const item of items) ids.push((await save(filtered, item.content, item.metadata)).memoryId);
    const found = async (filter: unknown) => (await recall(filtered, 'login', { topK: 10, filter })).memories.map((memory) => ids.indexOf(memory.id)).sort();
    assert.deepEqual(await found({ kind: 'ticket' }), [0, 1]);
    assert.deepEqual(await found({ kind: { $eq: 'note' } }), [2]);
    assert.deepEqual(await found({ kind: { $ne: 'ticket' } }), [2, 3]);
    assert.deepEqual(await found({ priority: { $gt: 2 } }), [1, 3]);
    assert.deepEqual(await found({ priority: { $gte: 3, $lt: 5 } }), [1]);
    assert.deepEqual(await found({ priority: { $lte: 2 } }), [0, 2]);
    assert.deepEqual(await found({ priority: { $in: [1, 5] } }), [0, 3]);
    assert.deepEqual(await found({ kind: { $nin: ['ticket', 'note'] } }), [3]);
    assert.deepEqual(await found({ tags: { $exists: true } }), [0, 1]);
    assert.deepEqual(await found({ tags: { $exists: false } }), [2, 3]);
    assert.deepEqual(await found({ kind: { $regex: '^tick', $options: 'i' } }), [0, 1, 3]);
    assert.deepEqual(await found({ kind: { $regex: '^tick' } }), [0, 1]);
    assert.deepEqual(await found({ 'customer.tier': 'gold' }), [0, 3]);
    assert.deepEqual(await found({ $or: [{ priority: 2 }, { 'customer.tier': 'silver' }] }), [1, 2]);
    assert.deepEqual(await found({ $and: [{ kind: 'ticket' }, { priority: { $gt: 1 } }] }), [1]);
    assert.deepEqual(await found({ priority: '1' }), [], 'a string never equals a number');

    for (const [filter, path] of [
      [{ kind: { $where: 'x' } }, 'filter.kind.$where'],
      [{ priority: { $gt: {} } }, 'filter.priority.$gt'],
      [{ kind: { $regex: '(' } }, 'filter.kind.$regex'],
      [{ "kind'; drop table memory; --": 1 }, "filter.kind'; drop table memory; --"],
      ['not an object', 'filter'],
    ] as const) {
      const error = await refused(
        t.as(filtered).MemoryRpc.recallMemories({ scope: 'user', queryText: 'login', filter }),
        'VALIDATION_ERROR',
        JSON.stringify(filter),
      );
      assert.equal(error.issues?.[0]?.path, path);
    }
  });

  it('pages with a cursor (a memory id) and with an index, limit 10 by default', async () => {
    const pager = await t.signup();
    const ids: string[] = [];
    for (let index = 0; index < 25; index++) ids.push((await save(pager, `paged memory ${index}`)).memoryId);
    const pages: string[][] = [];
    let cursor: MemoryRpcListMemoriesResult['next_page_offset'] | undefined;
    do {
      const page = await t.as(pager).MemoryRpc.listMemories({ scope: 'user', ...(cursor ? { offset: cursor } : {}) });
      assert.deepEqual(Object.keys(page).sort(), ['memories', 'next_page_offset', 'success']);
      pages.push(page.memories.map((memory) => memory.id));
      cursor = page.next_page_offset;
    } while (cursor);
    assert.deepEqual(
      pages.map((page) => page.length),
      [10, 10, 5],
    );
    assert.deepEqual(pages.flat(), ids, 'oldest first, each once');

    const byIndex = await t.as(pager).MemoryRpc.listMemories({ scope: 'user', limit: 10, offset: 20 });
    assert.deepEqual(
      byIndex.memories.map((memory) => memory.id),
      ids.slice(20),
    );
    assert.equal(byIndex.next_page_offset, null);
    assert.equal((await t.as(pager).MemoryRpc.listMemories({ scope: 'user', offset: 0 })).next_page_offset, 10);
    await refused(t.as(pager).MemoryRpc.listMemories({ scope: 'user', offset: randomUUID() }), 'VALIDATION_ERROR');
    for (const params of [{ limit: 0 }, { offset: -1 }, { offset: 1e308 }, { offset: 'abc' }, { scope: 'team' }]) {
      await refused(t.as(pager).call('MemoryRpc.listMemories', { scope: 'user', ...params }), 'VALIDATION_ERROR', JSON.stringify(params));
    }
  });

  it('refuses empty content and query text', async () => {
    for (const [method, params, path] of [
      ['MemoryRpc.saveMemory', { scope: 'user', memory: { content: '   ' } }, 'memory.content'],
      ['MemoryRpc.recallMemories', { scope: 'user', queryText: '' }, 'queryText'],
      ['MemoryRpc.recallMemories', { scope: 'user', queryText: 'x', topK: 0 }, 'topK'],
      ['MemoryRpc.saveMemory', { memory: { content: 'x' } }, 'scope'],
    ] as const) {
      const error = await refused(t.as(member).call(method, params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues?.[0]?.path, path);
    }
  });

  it('still returns topK rows when a filter matches 1% of 2,000 memories (through the HNSW index)', async () => {
    const bulk = await t.signup();
    const texts = Array.from({ length: 2000 }, (_, index) => `bulk memory ${index} about subject ${index % 37} and detail ${index % 11}`);
    const ctx = { subscriptionId: bulk.subscriptionId, userId: bulk.user._id } as unknown as RequestContext;
    const { vectors } = await t.app.deps.ai.embed(ctx, texts, { caller: { type: 'test', name: 'memory.test' } });
    for (let start = 0; start < texts.length; start += 500) {
      const rows = texts.slice(start, start + 500).map((text, offset) => {
        const index = start + offset;
        return [
          randomUUID(),
          bulk.subscriptionId,
          'user',
          bulk.user._id,
          text,
          `hash-${index}`,
          text,
          JSON.stringify({ bucket: index % 100 }),
          `[${vectors[index]!.join(',')}]`,
        ];
      });
      await t.app.deps.db.execute(
        `insert into memory (id, subscription_id, scope, user_id, content, content_hash, search_vector, metadata, embedding_a, created_at, updated_at) values ${rows
          .map(() => "(?, ?, ?, ?, ?, ?, to_tsvector('english', ?), ?::jsonb, ?::vector, now(), now())")
          .join(', ')}`,
        rows.flat(),
      );
    }
    const result = await recall(bulk, 'memory about subject 5', { topK: 10, filter: { bucket: 42 } });
    assert.equal(result.memories.length, 10);
    assert.ok(result.memories.every((memory) => memory.metadata.bucket === 42));
    const scores = result.memories.map((memory) => memory.score);
    assert.deepEqual(
      scores,
      [...scores].sort((a, b) => b - a),
      'best first',
    );
  });
});

describe('MemoryRpc: switching the embedding model', () => {
  it('re-embeds every memory with the new model while recalls answer from the old one, then cuts over', async () => {
    const rows = (app: TestApp) =>
      app.app.deps.db.execute<{ id: string; content: string; a: string | null; b: string | null }>(
        'select id, content, embedding_a::text as a, embedding_b::text as b from memory order by content',
      );
    const state = async (app: TestApp) =>
      (
        await app.app.deps.db.execute<{ active_slot: string; active_model: string; next_model: string | null }>(
          `select active_slot, active_model, next_model from core_embedding_state where table_name = 'memory'`,
        )
      )[0]!;
    await withModelChange(['auth', 'memory'], async ({ peer, start }) => {
      const first = await start();
      const admin = await first.signup();
      const saveIn = (app: TestApp, who: Who, content: string, id?: string) =>
        app.as(who).MemoryRpc.saveMemory({ scope: 'user', memory: { content, ...(id ? { id } : {}) } });
      const tea = await saveIn(first, admin, 'Drinks green tea every afternoon');
      await saveIn(first, admin, 'Lives in Lisbon near the river');
      const chess = await saveIn(first, admin, 'Plays chess on Sundays');
      await first.as(admin).MemoryRpc.saveMemory({ scope: 'global', memory: { content: 'The office closes at six' } });
      assert.deepEqual(await state(first), { active_slot: 'a', active_model: 'local-lexical-384', next_model: null });
      await first.close();

      peer.delayMs = 1500;
      const second = await start({ newModel: true });
      try {
        const session = await second.as(null).AuthRpc.login({ identifier: admin.user.username, password: admin.password });
        const recall = (queryText: string) => second.as(session).MemoryRpc.recallMemories({ scope: 'user', queryText, topK: 1 });
        assert.deepEqual(await state(second), { active_slot: 'a', active_model: 'local-lexical-384', next_model: PEER_EMBEDDING_MODEL });
        // Recalls, saves and updates go on with the old model while the new one fills the other column.
        assert.equal((await recall('which tea in the afternoon')).memories[0].id, tea.memoryId);
        const garden = await saveIn(second, session, 'Grows tomatoes on the balcony');
        await saveIn(second, session, 'Plays chess on Saturdays', chess.memoryId);
        assert.equal((await recall('tomatoes on a balcony')).memories[0].id, garden.memoryId);
        assert.ok(!peer.received.flat().some((text) => /tea in the|on a balcony/.test(text)), 'no question went to the new model');

        await eventually(async () => ((await state(second)).next_model === null ? true : undefined), 30_000);
        assert.deepEqual(await state(second), { active_slot: 'b', active_model: PEER_EMBEDDING_MODEL, next_model: null });
        // Every memory, those saved and changed during the switch included, has the new model's vector; the old column is emptied.
        const after = await eventually(async () => {
          const now = await rows(second);
          return now.every((row) => row.a === null) ? now : undefined;
        }, 30_000);
        assert.equal(after.length, 5);
        // (Compared as the float32 values pgvector keeps.)
        const float32 = (vector: number[]) => vector.map(Math.fround);
        for (const row of after) assert.deepEqual(float32(JSON.parse(row.b!)), float32(reversedVectorOf(row.content)), row.content);

        peer.delayMs = 0;
        assert.equal((await recall('chess on Saturdays')).memories[0].id, chess.memoryId);
        assert.deepEqual(peer.received.at(-1), ['chess on Saturdays'], 'questions now go to the new model');
        const moved = await saveIn(second, session, 'Cycles to work');
        const [saved] = (await rows(second)).filter((row) => row.id === moved.memoryId);
        assert.deepEqual([saved!.a, float32(JSON.parse(saved!.b!))], [null, float32(reversedVectorOf('Cycles to work'))]);
      } finally {
        await second.close();
      }
    });
  });
});
