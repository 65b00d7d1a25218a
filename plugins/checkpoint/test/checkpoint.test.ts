import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { defineEntity, entityScope } from 'rpc-service/plugin';
import { createScratchDatabase, TEST_DATABASE_URL } from '../../../test/support/database.ts';
import { refused } from '../../../test/support/caller.ts';
import { startTestApp, type Session, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser, type Member } from '../../../test/support/users.ts';
import { completedRun } from '../../../test/support/workflows.ts';

const exports = mkdtempSync(path.join(tmpdir(), 'rpc-checkpoint-exports-'));
after(() => rmSync(exports, { recursive: true, force: true }));

/** The real git CLI, with no configuration of this machine's. */
const GIT_ENV = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: exports, GIT_TERMINAL_PROMPT: '0' };
const gitIn = (dir: string, ...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', env: GIT_ENV }).trim();

/**
 * `git clone` of a scope's export with the caller's session: a bare
 * repository, or one with a working tree to commit in. Not execFileSync: the
 * service answering git runs in this process.
 */
async function cloneScope(t: TestApp, session: Pick<Session, 'token'>, scope: string, { bare = true } = {}): Promise<string> {
  const dir = mkdtempSync(path.join(exports, `${scope}-`));
  const args = [
    '-c',
    `http.extraHeader=Authorization: Bearer ${session.token}`,
    'clone',
    '-q',
    ...(bare ? ['--bare'] : []),
    `${t.url}/checkpoints/${scope}.git`,
    dir,
  ];
  await promisify(execFile)('git', args, { env: GIT_ENV });
  return dir;
}

/** What `git log` says of the scope's history, in listCheckpoints' terms. */
function cliHistory(dir: string) {
  const log = gitIn(dir, 'log', '--format=%H%x09%an%x09%aI%x09%s', 'main');
  return log.split('\n').map((line) => {
    const [hash, author, date, message] = line.split('\t');
    return { hash, author, date: new Date(date!).toISOString(), message };
  });
}

/**
 * The scope's export is a repository git accepts (`fsck --strict`), its
 * history is what listCheckpoints says, its tags are the checkpoints' tags,
 * and the scope is clean (or not) as getStatus says.
 */
async function agreeWithGit(t: TestApp, session: Pick<Session, 'token'>, scope: string, clean = true) {
  const dir = await cloneScope(t, session, scope);
  const history = await t.as(session).CheckpointRpc.listCheckpoints({ scope, limit: 1000 });
  assert.deepEqual(
    history.map(({ hash, author, date, message }) => ({ hash, author, date, message })),
    cliHistory(dir),
  );
  gitIn(dir, 'fsck', '--strict', '--no-dangling');
  const tags = gitIn(dir, 'tag', '-l');
  assert.deepEqual(tags ? tags.split('\n') : [], history.flatMap((checkpoint) => checkpoint.tags).sort(), 'the tags');
  assert.equal((await t.as(session).CheckpointRpc.getStatus({ scope })).isClean, clean, 'getStatus');
  return { history, dir };
}

/**
 * Commits made with the git CLI in a clone of the scope, placed in the
 * database behind the service's back (as a tampered backup would be), so a
 * restore to them can be tried: every loose object of the clone.
 */
async function plantObjects(t: TestApp, subscriptionId: string, scope: string, dir: string): Promise<void> {
  const objects = path.join(dir, '.git', 'objects');
  for (const folder of readdirSync(objects).filter((name) => /^[0-9a-f]{2}$/.test(name))) {
    for (const file of readdirSync(path.join(objects, folder))) {
      await t.app.deps.db.execute('insert into checkpoint_object (subscription_id, scope, oid, data) values (?, ?, ?, ?) on conflict do nothing', [
        subscriptionId,
        scope,
        folder + file,
        readFileSync(path.join(objects, folder, file)),
      ]);
    }
  }
}

describe('CheckpointRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'checkpoint', 'workflow', 'agent-config'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('versions files: write, checkpoint, change, status, tag, restore and rollback, each agreeing with the git CLI', async () => {
    const scope = 'site';
    assert.deepEqual(await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'index.md', content: '# Home\n' }), { path: 'index.md', size: 7 });
    await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'docs/guide.md', content: 'Guide v1\n' });
    assert.deepEqual(await t.as(admin).CheckpointRpc.getStatus({ scope }), {
      isClean: false,
      files: [
        { path: 'docs/guide.md', change: 'added' },
        { path: 'index.md', change: 'added' },
      ],
    });
    const { commitHash: first } = await t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: 'First version', tagName: 'v1' });
    assert.match(first, /^[0-9a-f]{40}$/);
    assert.deepEqual(await t.as(admin).CheckpointRpc.getStatus({ scope }), { isClean: true, files: [] });
    let { history, dir } = await agreeWithGit(t, admin, scope);
    assert.deepEqual([history.length, history[0]!.hash, history[0]!.tags], [1, first, ['v1']]);
    assert.equal(gitIn(dir, 'cat-file', '-t', 'v1'), 'tag', 'createCheckpoint tags with an annotated tag');

    await t.as(member).CheckpointRpc.writeFile({ scope, path: 'docs/guide.md', content: 'Guide v2\n' });
    await t
      .as(member)
      .CheckpointRpc.writeFile({ scope, path: 'logo.png', content: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 255]).toString('base64'), encoding: 'base64' });
    assert.deepEqual(await t.as(member).CheckpointRpc.deleteFile({ scope, path: 'index.md' }), { success: true });
    assert.deepEqual((await t.as(member).CheckpointRpc.getStatus({ scope })).files, [
      { path: 'docs/guide.md', change: 'modified' },
      { path: 'index.md', change: 'deleted' },
      { path: 'logo.png', change: 'added' },
    ]);
    const { commitHash: second } = await t.as(member).CheckpointRpc.createCheckpoint({ scope, message: 'Second version' });
    ({ history, dir } = await agreeWithGit(t, admin, scope));
    assert.deepEqual(
      history.map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    assert.equal(history[0]!.message, 'Second version');
    assert.equal(gitIn(dir, 'log', '-1', '--format=%ae'), `${member.username}@example.com`, 'the author is the caller');
    assert.deepEqual(await t.as(admin).CheckpointRpc.tagRelease({ scope, commitHash: second.slice(0, 8), tagName: 'release-2', message: 'Second release' }), {
      tagName: 'release-2',
    });
    dir = await cloneScope(t, admin, scope);
    assert.equal(gitIn(dir, 'tag', '-l', '-n1', 'release-2').replace(/\s+/g, ' '), 'release-2 Second release');
    assert.equal(gitIn(dir, 'show', 'main:logo.png', '--format=').length > 0, true);
    assert.equal(gitIn(dir, 'show', `${first}:docs/guide.md`), 'Guide v1');
    await refused(t.as(admin).CheckpointRpc.tagRelease({ scope, commitHash: first, tagName: 'release-2', message: 'Again' }), 'CONFLICT');
    assert.deepEqual(
      (await t.as(member).CheckpointRpc.readFile({ scope, path: 'logo.png', encoding: 'base64' })).content,
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 255]).toString('base64'),
    );
    assert.equal((await t.as(member).CheckpointRpc.readFile({ scope, path: 'docs/guide.md', hash: first })).content, 'Guide v1\n');
    await refused(t.as(member).CheckpointRpc.readFile({ scope, path: 'logo.png', hash: first }), 'NOT_FOUND');
    await refused(t.as(member).CheckpointRpc.readFile({ scope, path: 'docs', hash: first }), 'NOT_FOUND');
    assert.deepEqual(await t.as(member).CheckpointRpc.listFiles({ scope, hash: first }), [
      { path: 'docs/guide.md', size: 9 },
      { path: 'index.md', size: 7 },
    ]);
    // A tag that exists already refuses the checkpoint, which is then not made; tags git would confuse with the branch are refused.
    await refused(t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: 'Again', tagName: 'v1' }), 'CONFLICT');
    assert.deepEqual(
      cliHistory(await cloneScope(t, admin, scope)).map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    for (const tagName of ['main', 'HEAD', first]) {
      await refused(t.as(admin).CheckpointRpc.tagRelease({ scope, commitHash: first, tagName, message: 'x' }), 'VALIDATION_ERROR', tagName);
    }

    // Restore: the files equal the first checkpoint, as a third checkpoint on top.
    let restoreCommit: string | undefined;
    const socket = new WebSocket(`${t.url.replace('http', 'ws')}/ws?token=${admin.token}`);
    const events: { type: string; event?: string; payload?: Record<string, unknown> }[] = [];
    socket.on('message', (data) => events.push(JSON.parse(data.toString())));
    try {
      await eventually(() => (events.some((message) => message.type === 'ready') ? true : undefined));
      const restored = await t.as(admin).CheckpointRpc.restore({ scope, hash: first });
      assert.match(restored.message, new RegExp(`restored to checkpoint ${first.slice(0, 7)}`));
      ({ history, dir } = await agreeWithGit(t, admin, scope));
      restoreCommit = history[0]!.hash;
      assert.deepEqual(
        history.slice(1).map((checkpoint) => checkpoint.hash),
        [second, first],
      );
      assert.equal(gitIn(dir, 'rev-parse', 'HEAD^{tree}'), gitIn(dir, 'rev-parse', `${first}^{tree}`), 'the new checkpoint holds the first one’s files');
      assert.deepEqual(
        (await t.as(admin).CheckpointRpc.listFiles({ scope })).map((file) => file.path),
        ['docs/guide.md', 'index.md'],
      );
      const refreshed = await eventually(() => events.find((message) => message.event === 'dataScopeRefreshed'));
      assert.deepEqual(refreshed.payload, { scope, hash: history[0]!.hash, action: 'restore' });

      // Rollback to the second checkpoint: the restore is discarded, the files are the second's.
      const rolledBack = await t.as(admin).CheckpointRpc.rollback({ scope, hash: second });
      assert.match(rolledBack.message, /rolled back/);
      const before = dir;
      ({ history, dir } = await agreeWithGit(t, admin, scope));
      assert.deepEqual(
        history.map((checkpoint) => checkpoint.hash),
        [second, first],
      );
      assert.deepEqual(
        (await t.as(admin).CheckpointRpc.listFiles({ scope })).map((file) => file.path),
        ['docs/guide.md', 'logo.png'],
      );
      assert.equal(gitIn(dir, 'ls-tree', '-r', '--name-only', 'main'), 'docs/guide.md\nlogo.png');
      // The export made before the rollback still holds the discarded checkpoint; the service no longer counts it.
      assert.equal(gitIn(before, 'cat-file', '-t', restoreCommit), 'commit');
      assert.equal((await t.as(admin).CheckpointRpc.readFile({ scope, path: 'docs/guide.md' })).content, 'Guide v2\n');
      await eventually(() => events.find((message) => message.event === 'dataScopeRefreshed' && message.payload?.action === 'rollback'));
    } finally {
      socket.close();
    }

    // A checkpoint that is no longer in the history (the discarded restore) cannot be rolled back to.
    await refused(t.as(admin).CheckpointRpc.rollback({ scope, hash: restoreCommit! }), 'NOT_FOUND');
    await refused(t.as(admin).CheckpointRpc.rollback({ scope, hash: 'abcdef0' }), 'NOT_FOUND');
    assert.deepEqual(
      cliHistory(await cloneScope(t, admin, scope)).map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    assert.ok((await t.as(member).CheckpointRpc.listScopes()).includes(scope));
  });

  it('keeps every path inside its scope, and checks params', async () => {
    const scope = 'paths';
    await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'a/b.txt', content: 'x' });
    const gitNames = ['.git.', '.GIT ', 'git~1/config', 'a/.git\u200c/x', '.git::$INDEX_ALLOCATION/x', 'a/.gitignore', '.gitmodules', '.gitattributes'];
    for (const bad of [
      '../escape.txt',
      'a/../../x',
      '/etc/passwd',
      '.git/config',
      'a/.git/hooks',
      'a//b',
      './a',
      'a\\..\\b',
      '',
      ...gitNames,
      `a/${'x'.repeat(256)}`,
    ]) {
      await refused(t.as(admin).CheckpointRpc.writeFile({ scope, path: bad, content: 'x' }), 'VALIDATION_ERROR', bad);
      await refused(t.as(admin).CheckpointRpc.readFile({ scope, path: bad }), 'VALIDATION_ERROR', bad);
    }
    // Names that only resemble git's own are ordinary files.
    for (const fine of ['.github/ci.yml', 'notes:1.txt', '.gitkeep']) await t.as(admin).CheckpointRpc.writeFile({ scope, path: fine, content: 'x' });
    await t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: 'Look-alikes' });
    const { dir } = await agreeWithGit(t, admin, scope);
    assert.deepEqual(gitIn(dir, 'ls-tree', '-r', '--name-only', 'main').split('\n'), ['.github/ci.yml', '.gitkeep', 'a/b.txt', 'notes:1.txt']);
    for (const params of [
      { scope: '../x', path: 'f' },
      { scope: 'Upper', path: 'f' },
      { scope: '', path: 'f' },
    ]) {
      await refused(t.as(admin).CheckpointRpc.writeFile({ ...params, content: 'x' }), 'VALIDATION_ERROR', params.scope);
    }
    await refused(t.as(admin).CheckpointRpc.writeFile({ scope, path: 'a/b.txt/c', content: 'x' }), 'CONFLICT');
    await refused(t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: '  ' }), 'VALIDATION_ERROR');
    await refused(t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: 'x', tagName: 'bad..tag' }), 'VALIDATION_ERROR');
    await refused(t.as(admin).CheckpointRpc.restore({ scope, hash: 'not-a-hash' }), 'VALIDATION_ERROR');
    await refused(t.as(admin).CheckpointRpc.getStatus({ scope: 'never-written' }), 'NOT_FOUND');
    await refused(t.as(admin).CheckpointRpc.readFile({ scope, path: 'missing.txt' }), 'NOT_FOUND');
    await refused(t.as(admin).CheckpointRpc.writeFile({ scope, path: 'big.bin', content: 'x'.repeat(512 * 1024 + 1) }), 'VALIDATION_ERROR');
    assert.equal((await t.as(admin).CheckpointRpc.listCheckpoints({ scope })).length, 1);
  });

  it('refuses content that is not base64 when encoding is base64, and writes nothing', async () => {
    const scope = 'bytes';
    await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'kept.bin', content: Buffer.from([1, 2, 3]).toString('base64'), encoding: 'base64' });
    for (const content of ['not base64!', 'AQID\n', 'AQI', 'AQ=', 'AQ==AQ==', '%%%%', 'AQID BAUG', '_-_-']) {
      const error = await refused(t.as(admin).CheckpointRpc.writeFile({ scope, path: 'bad.bin', content, encoding: 'base64' }), 'VALIDATION_ERROR', content);
      assert.deepEqual(
        error.issues!.map((issue) => issue.path),
        ['content'],
        content,
      );
      assert.match(error.issues![0]!.message, /content must be base64/);
      // An existing file is not overwritten with what a lenient decoder would make of it.
      await refused(t.as(admin).CheckpointRpc.writeFile({ scope, path: 'kept.bin', content, encoding: 'base64' }), 'VALIDATION_ERROR', content);
    }
    const files = await t.as(admin).CheckpointRpc.listFiles({ scope });
    assert.deepEqual(
      files.map((file) => file.path),
      ['kept.bin'],
    );
    assert.equal((await t.as(admin).CheckpointRpc.readFile({ scope, path: 'kept.bin', encoding: 'base64' })).content, 'AQID');
    // The same text is fine as utf8, and the empty file is valid base64.
    await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'note.txt', content: 'not base64!' });
    assert.equal((await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'empty.bin', content: '', encoding: 'base64' })).size, 0);
  });

  it('answers listCheckpoints with at most 50 by default, newest first', async () => {
    const scope = 'many';
    for (let index = 0; index < 52; index++) {
      await t.as(admin).CheckpointRpc.writeFile({ scope, path: 'counter.txt', content: String(index) });
      await t.as(admin).CheckpointRpc.createCheckpoint({ scope, message: `Count ${index}` });
    }
    const listed = await t.as(admin).CheckpointRpc.listCheckpoints({ scope });
    assert.deepEqual([listed.length, listed[0].message, listed[49].message], [50, 'Count 51', 'Count 2']);
    assert.equal((await t.as(admin).CheckpointRpc.listCheckpoints({ scope, limit: 3 })).length, 3);
  });

  it('restores the workflows scope into the database: a deleted workflow comes back, a later one goes', async () => {
    const graph = {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'done', type: 'end', config: { output: '"ok"' } },
      ],
      edges: [{ source: 'start', target: 'done' }],
    };
    const kept = await t.as(admin).WorkflowRpc.create({ name: 'Onboarding', description: 'Welcome', tags: ['hr'], ...graph });
    const deleted = await t.as(member).WorkflowRpc.create({ name: 'Offboarding', ...graph });
    assert.ok((await t.as(admin).CheckpointRpc.listScopes()).includes('workflows'));
    const status = await t.as(admin).CheckpointRpc.getStatus({ scope: 'workflows' });
    assert.deepEqual(
      status.files.map((file) => [file.path, file.change]).sort(),
      [
        [`${deleted._id}.json`, 'added'],
        [`${kept._id}.json`, 'added'],
      ].sort(),
    );
    const { commitHash } = await t.as(member).CheckpointRpc.createCheckpoint({ scope: 'workflows', message: 'Two workflows' });
    await agreeWithGit(t, admin, 'workflows');

    const keptBefore = await t.as(admin).WorkflowRpc.findById({ id: kept._id });
    await t.as(member).WorkflowRpc.delete({ _id: deleted._id });
    await t.as(admin).WorkflowRpc.update({ _id: kept._id, description: 'Changed' });
    const later = await t.as(admin).WorkflowRpc.create({ name: 'Later', ...graph });
    assert.deepEqual((await t.as(admin).CheckpointRpc.getStatus({ scope: 'workflows' })).files.map((file) => file.change).sort(), [
      'added',
      'deleted',
      'modified',
    ]);
    await refused(t.as(admin).CheckpointRpc.writeFile({ scope: 'workflows', path: 'x.json', content: '{}' }), 'VALIDATION_ERROR');
    await refused(t.as(member).CheckpointRpc.restore({ scope: 'workflows', hash: commitHash }), 'FORBIDDEN', 'records of every member: admin or staff');

    await t.as(admin).CheckpointRpc.restore({ scope: 'workflows', hash: commitHash });
    const back = await t.as(admin).WorkflowRpc.findById({ id: deleted._id });
    assert.deepEqual([back.name, back.userId], ['Offboarding', member.user._id]);
    const restoredKept = await t.as(admin).WorkflowRpc.findById({ id: kept._id });
    assert.deepEqual(restoredKept, keptBefore);
    await refused(t.as(admin).WorkflowRpc.findById({ id: later._id }), 'NOT_FOUND');
    assert.equal(completedRun(await t.as(member).WorkflowRpc.executeWorkflow({ workflowIdentifier: 'Offboarding' })).status, 'completed');
    assert.deepEqual(await t.as(admin).CheckpointRpc.getStatus({ scope: 'workflows' }), { isClean: true, files: [] });
    await agreeWithGit(t, admin, 'workflows');
    // The other subscription's workflows are not part of this one's scope.
    assert.deepEqual(await t.as(stranger).CheckpointRpc.listFiles({ scope: 'workflows' }), []);

    // A checkpoint whose file names an id another subscription's record has (placed in the repository behind the service's back)
    // makes a record of this subscription: records are keyed by (subscriptionId, id), so the other one's is untouched.
    await t.as(stranger).CheckpointRpc.createCheckpoint({ scope: 'workflows', message: 'None yet' });
    const strangerDir = await cloneScope(t, stranger, 'workflows', { bare: false });
    const file = `${kept._id}.json`;
    const record = JSON.parse((await t.as(admin).CheckpointRpc.readFile({ scope: 'workflows', path: file })).content);
    writeFileSync(path.join(strangerDir, file), JSON.stringify({ ...record, name: 'Taken over' }));
    gitIn(strangerDir, 'add', file);
    gitIn(strangerDir, '-c', 'user.name=Intruder', '-c', 'user.email=intruder@example.com', 'commit', '-q', '-m', 'Foreign record');
    await plantObjects(t, stranger.subscriptionId, 'workflows', strangerDir);
    await t.as(stranger).CheckpointRpc.restore({ scope: 'workflows', hash: gitIn(strangerDir, 'rev-parse', 'HEAD') });
    assert.deepEqual(await t.as(admin).WorkflowRpc.findById({ id: kept._id }), keptBefore);
    const strangers = await t.as(stranger).WorkflowRpc.findById({ id: kept._id });
    assert.deepEqual([strangers.name, strangers.subscriptionId], ['Taken over', stranger.subscriptionId]);
    await t.as(stranger).WorkflowRpc.update({ _id: kept._id, description: 'Changed by its own subscription' });
    assert.deepEqual(await t.as(admin).WorkflowRpc.findById({ id: kept._id }), keptBefore);

    // A record file made before a nullable field existed restores with the field null; one lacking a required field is refused.
    const commitRecord = async (fields: Record<string, unknown>, message: string) => {
      rmSync(path.join(strangerDir, file), { force: true });
      writeFileSync(path.join(strangerDir, `${fields.id}.json`), JSON.stringify(fields));
      gitIn(strangerDir, 'add', '-A');
      gitIn(strangerDir, '-c', 'user.name=Operator', '-c', 'user.email=operator@example.com', 'commit', '-q', '-m', message);
      await plantObjects(t, stranger.subscriptionId, 'workflows', strangerDir);
      return gitIn(strangerDir, 'rev-parse', 'HEAD');
    };
    const { contextId: _contextId, ...older } = { ...record, id: randomUUID(), userId: stranger.user._id, name: 'Older' };
    await t.as(stranger).CheckpointRpc.restore({ scope: 'workflows', hash: await commitRecord(older, 'Before contextId') });
    const olderBack = await t.as(stranger).WorkflowRpc.findById({ id: older.id });
    assert.deepEqual([olderBack.name, olderBack.contextId ?? null], ['Older', null]);
    const { name: _name, ...nameless } = { ...older, id: randomUUID() };
    const refusal = await refused(
      t.as(stranger).CheckpointRpc.restore({ scope: 'workflows', hash: await commitRecord(nameless, 'No name') }),
      'VALIDATION_ERROR',
    );
    assert.deepEqual([refusal.code, refusal.issues![0]!.message], ['VALIDATION_ERROR', `${nameless.id}.json of scope workflows lacks name`]);
    assert.ok(await t.as(stranger).WorkflowRpc.findById({ id: older.id }), 'nothing changed by the refused restore');
  });

  it('restores the agents scope', async () => {
    const agent = await t.as(admin).AgentConfigRpc.create({ name: 'helper', model: 'gpt-4o-mini', promptText: 'Be brief' });
    const { commitHash } = await t.as(admin).CheckpointRpc.createCheckpoint({ scope: 'agents', message: 'Helper' });
    await t.as(admin).AgentConfigRpc.update({ _id: agent._id, promptText: 'Be verbose' });
    await t.as(admin).CheckpointRpc.rollback({ scope: 'agents', hash: commitHash });
    assert.equal((await t.as(admin).AgentConfigRpc.findById({ _id: agent._id })).promptText, 'Be brief');
  });

  it("refuses a scope of records whose entity's key does not lead with its subscription", () => {
    const Keyed = defineEntity({ name: 'KeyedById', tableName: 'keyed_by_id', properties: (p) => ({ id: p.uuid().primary(), subscriptionId: p.uuid() }) });
    assert.throws(
      () => entityScope({ name: 'keyed', describe: 'Records keyed by id alone', entity: Keyed }),
      /^Error: Data scope "keyed": entity KeyedById needs the primary key \(subscriptionId, id\), not \(id\)$/,
    );
  });

  it('keeps scopes to their subscription', async () => {
    await t.as(admin).CheckpointRpc.writeFile({ scope: 'private', path: 'secret.txt', content: 'mine' });
    await t.as(admin).CheckpointRpc.createCheckpoint({ scope: 'private', message: 'Mine' });
    assert.ok(!(await t.as(stranger).CheckpointRpc.listScopes()).includes('private'));
    const theirs = t.as(stranger).CheckpointRpc;
    for (const [method, call] of [
      ['getStatus', () => theirs.getStatus({ scope: 'private' })],
      ['listCheckpoints', () => theirs.listCheckpoints({ scope: 'private' })],
      ['readFile', () => theirs.readFile({ scope: 'private', path: 'secret.txt' })],
      ['listFiles', () => theirs.listFiles({ scope: 'private' })],
      ['deleteFile', () => theirs.deleteFile({ scope: 'private', path: 'secret.txt' })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    // The stranger's own scope of that name is another repository.
    await t.as(stranger).CheckpointRpc.writeFile({ scope: 'private', path: 'secret.txt', content: 'theirs' });
    assert.equal((await t.as(admin).CheckpointRpc.readFile({ scope: 'private', path: 'secret.txt' })).content, 'mine');
  });

  it('lets concurrent writers to one scope take turns without corrupting it', async () => {
    const scope = 'busy';
    const writers = Array.from({ length: 12 }, (_, index) => index);
    await Promise.all(
      writers.map(async (index) => {
        const session = index % 2 === 0 ? admin : member;
        await t.as(session).CheckpointRpc.writeFile({ scope, path: `file-${index}.txt`, content: `writer ${index}\n` });
        await t.as(session).CheckpointRpc.createCheckpoint({ scope, message: `Writer ${index}` });
      }),
    );
    const { history, dir } = await agreeWithGit(t, admin, scope);
    assert.equal(history.length, 12);
    assert.equal((await t.as(admin).CheckpointRpc.listFiles({ scope })).length, 12);
    assert.equal(gitIn(dir, 'ls-tree', '--name-only', 'main').split('\n').length, 12);
  });
});

describe('CheckpointRpc: the export and repositories of earlier releases', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<TestApp['signup']>>;
  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'checkpoint', 'workflow'] });
    user = await t.signup();
  });
  after(() => t.close());

  it('serves a scope to its subscription only, read-only', async () => {
    await t.as(user).CheckpointRpc.writeFile({ scope: 'own', path: 'a.txt', content: 'a' });
    await t.as(user).CheckpointRpc.createCheckpoint({ scope: 'own', message: 'A' });
    const stranger = await t.signup();
    const get = (pathname: string, token?: string) => fetch(`${t.url}${pathname}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
    assert.equal((await get('/checkpoints/own.git/info/refs')).status, 401);
    assert.equal((await get('/checkpoints/own.git/info/refs', stranger.token)).status, 404);
    const refs = await (await get('/checkpoints/own.git/info/refs', user.token)).text();
    const [oid] = refs.split('\t');
    assert.match(refs, /^[0-9a-f]{40}\trefs\/heads\/main\n$/);
    const object = `/checkpoints/own.git/objects/${oid!.slice(0, 2)}/${oid!.slice(2)}`;
    assert.equal((await get(object, user.token)).status, 200);
    assert.equal((await get(object, stranger.token)).status, 404, "another subscription's object");
    assert.equal((await get('/checkpoints/own.git/objects/info/packs', user.token)).status, 404);
    assert.equal((await get('/checkpoints/..%2Fown.git/info/refs', user.token)).status, 404);
    assert.equal((await fetch(`${t.url}/checkpoints/own.git/info/refs`, { method: 'POST', headers: { authorization: `Bearer ${user.token}` } })).status, 405);
  });

  it('moves a repository an earlier release kept on disk into the database on first use', async () => {
    // Made with the git CLI as earlier releases left it: checkpoints on main, an annotated tag, a file changed since.
    const dir = path.join(t.dataDir, 'checkpoints', user.subscriptionId, 'legacy');
    mkdirSync(path.join(dir, 'docs'), { recursive: true });
    gitIn(dir, 'init', '-q', '-b', 'main');
    const commit = (message: string) => gitIn(dir, '-c', 'user.name=Earlier', '-c', 'user.email=earlier@example.com', 'commit', '-q', '-m', message);
    writeFileSync(path.join(dir, 'docs', 'guide.md'), 'Guide v1\n');
    writeFileSync(path.join(dir, 'logo.bin'), Buffer.from([0, 1, 2, 255]));
    gitIn(dir, 'add', '-A');
    commit('First');
    gitIn(dir, '-c', 'user.name=Earlier', '-c', 'user.email=earlier@example.com', 'tag', '-a', 'v1', '-m', 'First release');
    writeFileSync(path.join(dir, 'docs', 'guide.md'), 'Guide v2\n');
    gitIn(dir, 'add', '-A');
    commit('Second');
    writeFileSync(path.join(dir, 'docs', 'guide.md'), 'Guide v3, not checkpointed\n');
    writeFileSync(path.join(dir, 'new.txt'), 'new\n');
    const disk = cliHistory(dir);

    assert.ok((await t.as(user).CheckpointRpc.listScopes()).includes('legacy'));
    assert.deepEqual(await t.as(user).CheckpointRpc.getStatus({ scope: 'legacy' }), {
      isClean: false,
      files: [
        { path: 'docs/guide.md', change: 'modified' },
        { path: 'new.txt', change: 'added' },
      ],
    });
    const { history, dir: exported } = await agreeWithGit(t, user, 'legacy', false);
    assert.deepEqual(cliHistory(exported), disk, 'the same commits, by the same hashes');
    assert.deepEqual(history[1]!.tags, ['v1']);
    assert.equal((await t.as(user).CheckpointRpc.readFile({ scope: 'legacy', path: 'docs/guide.md', hash: disk[1]!.hash })).content, 'Guide v1\n');
    assert.equal((await t.as(user).CheckpointRpc.readFile({ scope: 'legacy', path: 'docs/guide.md' })).content, 'Guide v3, not checkpointed\n');
    assert.deepEqual(await t.as(user).CheckpointRpc.listFiles({ scope: 'legacy', hash: disk[1]!.hash }), [
      { path: 'docs/guide.md', size: 9 },
      { path: 'logo.bin', size: 4 },
    ]);
    // Moved once: the folder is no longer read.
    rmSync(dir, { recursive: true, force: true });
    const { commitHash } = await t.as(user).CheckpointRpc.createCheckpoint({ scope: 'legacy', message: 'Third' });
    assert.equal((await t.as(user).CheckpointRpc.listCheckpoints({ scope: 'legacy' }))[0].hash, commitHash);
    assert.equal(gitIn(await cloneScope(t, user, 'legacy'), 'show', 'main:new.txt'), 'new');
  });
});

describe('CheckpointRpc: two nodes on one PostgreSQL, no shared folder', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, () => {
  it('serves any scope from any node, with concurrent writers on both', async () => {
    const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
    const options = { withNotes: false, plugins: ['auth', 'checkpoint'], databaseUrl: scratch.url };
    const first = await startTestApp(options);
    const second = await startTestApp(options);
    try {
      assert.notEqual(first.dataDir, second.dataDir);
      const user = await first.signup();
      await Promise.all(
        Array.from({ length: 16 }, async (_, index) => {
          const node = index % 2 === 0 ? first : second;
          await node.as(user).CheckpointRpc.writeFile({ scope: 'shared', path: `node-${index}.txt`, content: `${index}\n` });
          await node.as(user).CheckpointRpc.createCheckpoint({ scope: 'shared', message: `Change ${index}` });
        }),
      );
      const { history, dir } = await agreeWithGit(second, user, 'shared');
      assert.equal(history.length, 16);
      assert.equal(gitIn(dir, 'ls-tree', '--name-only', 'main').split('\n').length, 16);
      assert.deepEqual(cliHistory(await cloneScope(first, user, 'shared')), cliHistory(dir), 'both nodes export the same repository');

      // Written through one node, read, restored and rolled back through the other.
      await first.as(user).CheckpointRpc.writeFile({ scope: 'shared', path: 'node-0.txt', content: 'changed\n' });
      assert.deepEqual((await second.as(user).CheckpointRpc.getStatus({ scope: 'shared' })).files, [{ path: 'node-0.txt', change: 'modified' }]);
      assert.equal((await second.as(user).CheckpointRpc.readFile({ scope: 'shared', path: 'node-0.txt' })).content, 'changed\n');
      const { commitHash } = await second.as(user).CheckpointRpc.createCheckpoint({ scope: 'shared', message: 'Changed' });
      await first.as(user).CheckpointRpc.restore({ scope: 'shared', hash: history.at(-1)!.hash });
      assert.deepEqual(
        (await second.as(user).CheckpointRpc.listFiles({ scope: 'shared' })).map((file) => file.path),
        (await first.as(user).CheckpointRpc.listFiles({ scope: 'shared', hash: history.at(-1)!.hash })).map((file) => file.path),
      );
      await second.as(user).CheckpointRpc.rollback({ scope: 'shared', hash: commitHash });
      assert.equal((await first.as(user).CheckpointRpc.readFile({ scope: 'shared', path: 'node-0.txt' })).content, 'changed\n');
      const after = await agreeWithGit(first, user, 'shared');
      assert.equal(after.history[0]!.hash, commitHash);
    } finally {
      await first.close();
      await second.close();
      await scratch.drop();
    }
  });
});
