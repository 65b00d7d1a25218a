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
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/peers.ts';
import { addUser } from '../../../test/support/users.ts';

type Session = { token: string };
const as = (session: Session) => ({ token: session.token });

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
async function cloneScope(t: TestApp, session: Session, scope: string, { bare = true } = {}): Promise<string> {
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
async function agreeWithGit(t: TestApp, session: Session, scope: string, clean = true) {
  const dir = await cloneScope(t, session, scope);
  const history = (await t.ok('CheckpointRpc.listCheckpoints', { scope, limit: 1000 }, as(session))) as { hash: string; tags: string[]; message: string }[];
  assert.deepEqual(
    history.map(({ hash, author, date, message }: Record<string, any>) => ({ hash, author, date, message })),
    cliHistory(dir),
  );
  gitIn(dir, 'fsck', '--strict', '--no-dangling');
  const tags = gitIn(dir, 'tag', '-l');
  assert.deepEqual(tags ? tags.split('\n') : [], history.flatMap((checkpoint) => checkpoint.tags).sort(), 'the tags');
  assert.equal((await t.ok('CheckpointRpc.getStatus', { scope }, as(session))).isClean, clean, 'getStatus');
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
  let member: Awaited<ReturnType<typeof addUser>>;
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
    assert.deepEqual(await t.ok('CheckpointRpc.writeFile', { scope, path: 'index.md', content: '# Home\n' }, as(admin)), { path: 'index.md', size: 7 });
    await t.ok('CheckpointRpc.writeFile', { scope, path: 'docs/guide.md', content: 'Guide v1\n' }, as(admin));
    assert.deepEqual(await t.ok('CheckpointRpc.getStatus', { scope }, as(admin)), {
      isClean: false,
      files: [
        { path: 'docs/guide.md', change: 'added' },
        { path: 'index.md', change: 'added' },
      ],
    });
    const { commitHash: first } = await t.ok('CheckpointRpc.createCheckpoint', { scope, message: 'First version', tagName: 'v1' }, as(admin));
    assert.match(first, /^[0-9a-f]{40}$/);
    assert.deepEqual(await t.ok('CheckpointRpc.getStatus', { scope }, as(admin)), { isClean: true, files: [] });
    let { history, dir } = await agreeWithGit(t, admin, scope);
    assert.deepEqual([history.length, history[0]!.hash, history[0]!.tags], [1, first, ['v1']]);
    assert.equal(gitIn(dir, 'cat-file', '-t', 'v1'), 'tag', 'createCheckpoint tags with an annotated tag');

    await t.ok('CheckpointRpc.writeFile', { scope, path: 'docs/guide.md', content: 'Guide v2\n' }, as(member));
    await t.ok(
      'CheckpointRpc.writeFile',
      { scope, path: 'logo.png', content: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 255]).toString('base64'), encoding: 'base64' },
      as(member),
    );
    assert.deepEqual(await t.ok('CheckpointRpc.deleteFile', { scope, path: 'index.md' }, as(member)), { success: true });
    assert.deepEqual((await t.ok('CheckpointRpc.getStatus', { scope }, as(member))).files, [
      { path: 'docs/guide.md', change: 'modified' },
      { path: 'index.md', change: 'deleted' },
      { path: 'logo.png', change: 'added' },
    ]);
    const { commitHash: second } = await t.ok('CheckpointRpc.createCheckpoint', { scope, message: 'Second version' }, as(member));
    ({ history, dir } = await agreeWithGit(t, admin, scope));
    assert.deepEqual(
      history.map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    assert.equal(history[0]!.message, 'Second version');
    assert.equal(gitIn(dir, 'log', '-1', '--format=%ae'), `${member.username}@example.com`, 'the author is the caller');
    assert.deepEqual(
      await t.ok('CheckpointRpc.tagRelease', { scope, commitHash: second.slice(0, 8), tagName: 'release-2', message: 'Second release' }, as(admin)),
      { tagName: 'release-2' },
    );
    dir = await cloneScope(t, admin, scope);
    assert.equal(gitIn(dir, 'tag', '-l', '-n1', 'release-2').replace(/\s+/g, ' '), 'release-2 Second release');
    assert.equal(gitIn(dir, 'show', 'main:logo.png', '--format=').length > 0, true);
    assert.equal(gitIn(dir, 'show', `${first}:docs/guide.md`), 'Guide v1');
    assert.equal(
      (await t.call('CheckpointRpc.tagRelease', { scope, commitHash: first, tagName: 'release-2', message: 'Again' }, as(admin))).body.data.code,
      'CONFLICT',
    );
    assert.deepEqual(
      (await t.ok('CheckpointRpc.readFile', { scope, path: 'logo.png', encoding: 'base64' }, as(member))).content,
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 255]).toString('base64'),
    );
    assert.equal((await t.ok('CheckpointRpc.readFile', { scope, path: 'docs/guide.md', hash: first }, as(member))).content, 'Guide v1\n');
    assert.equal((await t.call('CheckpointRpc.readFile', { scope, path: 'logo.png', hash: first }, as(member))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('CheckpointRpc.readFile', { scope, path: 'docs', hash: first }, as(member))).body.data.code, 'NOT_FOUND');
    assert.deepEqual(await t.ok('CheckpointRpc.listFiles', { scope, hash: first }, as(member)), [
      { path: 'docs/guide.md', size: 9 },
      { path: 'index.md', size: 7 },
    ]);
    // A tag that exists already refuses the checkpoint, which is then not made; tags git would confuse with the branch are refused.
    assert.equal((await t.call('CheckpointRpc.createCheckpoint', { scope, message: 'Again', tagName: 'v1' }, as(admin))).body.data.code, 'CONFLICT');
    assert.deepEqual(
      cliHistory(await cloneScope(t, admin, scope)).map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    for (const tagName of ['main', 'HEAD', first]) {
      assert.equal(
        (await t.call('CheckpointRpc.tagRelease', { scope, commitHash: first, tagName, message: 'x' }, as(admin))).body.data.code,
        'VALIDATION_ERROR',
        tagName,
      );
    }

    // Restore: the files equal the first checkpoint, as a third checkpoint on top.
    let restoreCommit: string | undefined;
    const socket = new WebSocket(`${t.url.replace('http', 'ws')}/ws?token=${admin.token}`);
    const events: { type: string; event?: string; payload?: any }[] = [];
    socket.on('message', (data) => events.push(JSON.parse(data.toString())));
    try {
      await eventually(() => (events.some((message) => message.type === 'ready') ? true : undefined));
      const restored = await t.ok('CheckpointRpc.restore', { scope, hash: first }, as(admin));
      assert.match(restored.message, new RegExp(`restored to checkpoint ${first.slice(0, 7)}`));
      ({ history, dir } = await agreeWithGit(t, admin, scope));
      restoreCommit = history[0]!.hash;
      assert.deepEqual(
        history.slice(1).map((checkpoint) => checkpoint.hash),
        [second, first],
      );
      assert.equal(gitIn(dir, 'rev-parse', 'HEAD^{tree}'), gitIn(dir, 'rev-parse', `${first}^{tree}`), 'the new checkpoint holds the first one’s files');
      assert.deepEqual(
        (await t.ok('CheckpointRpc.listFiles', { scope }, as(admin))).map((file: { path: string }) => file.path),
        ['docs/guide.md', 'index.md'],
      );
      const refreshed = await eventually(() => events.find((message) => message.event === 'dataScopeRefreshed'));
      assert.deepEqual(refreshed.payload, { scope, hash: history[0]!.hash, action: 'restore' });

      // Rollback to the second checkpoint: the restore is discarded, the files are the second's.
      const rolledBack = await t.ok('CheckpointRpc.rollback', { scope, hash: second }, as(admin));
      assert.match(rolledBack.message, /rolled back/);
      const before = dir;
      ({ history, dir } = await agreeWithGit(t, admin, scope));
      assert.deepEqual(
        history.map((checkpoint) => checkpoint.hash),
        [second, first],
      );
      assert.deepEqual(
        (await t.ok('CheckpointRpc.listFiles', { scope }, as(admin))).map((file: { path: string }) => file.path),
        ['docs/guide.md', 'logo.png'],
      );
      assert.equal(gitIn(dir, 'ls-tree', '-r', '--name-only', 'main'), 'docs/guide.md\nlogo.png');
      // The export made before the rollback still holds the discarded checkpoint; the service no longer counts it.
      assert.equal(gitIn(before, 'cat-file', '-t', restoreCommit), 'commit');
      assert.equal((await t.ok('CheckpointRpc.readFile', { scope, path: 'docs/guide.md' }, as(admin))).content, 'Guide v2\n');
      await eventually(() => events.find((message) => message.event === 'dataScopeRefreshed' && message.payload.action === 'rollback'));
    } finally {
      socket.close();
    }

    // A checkpoint that is no longer in the history (the discarded restore) cannot be rolled back to.
    assert.equal((await t.call('CheckpointRpc.rollback', { scope, hash: restoreCommit }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('CheckpointRpc.rollback', { scope, hash: 'abcdef0' }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.deepEqual(
      cliHistory(await cloneScope(t, admin, scope)).map((checkpoint) => checkpoint.hash),
      [second, first],
    );
    assert.ok((await t.ok('CheckpointRpc.listScopes', {}, as(member))).includes(scope));
  });

  it('keeps every path inside its scope, and checks params', async () => {
    const scope = 'paths';
    await t.ok('CheckpointRpc.writeFile', { scope, path: 'a/b.txt', content: 'x' }, as(admin));
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
      const response = await t.call('CheckpointRpc.writeFile', { scope, path: bad, content: 'x' }, as(admin));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR', bad);
      assert.equal((await t.call('CheckpointRpc.readFile', { scope, path: bad }, as(admin))).body.data.code, 'VALIDATION_ERROR', bad);
    }
    // Names that only resemble git's own are ordinary files.
    for (const fine of ['.github/ci.yml', 'notes:1.txt', '.gitkeep']) await t.ok('CheckpointRpc.writeFile', { scope, path: fine, content: 'x' }, as(admin));
    await t.ok('CheckpointRpc.createCheckpoint', { scope, message: 'Look-alikes' }, as(admin));
    const { dir } = await agreeWithGit(t, admin, scope);
    assert.deepEqual(gitIn(dir, 'ls-tree', '-r', '--name-only', 'main').split('\n'), ['.github/ci.yml', '.gitkeep', 'a/b.txt', 'notes:1.txt']);
    for (const params of [
      { scope: '../x', path: 'f' },
      { scope: 'Upper', path: 'f' },
      { scope: '', path: 'f' },
    ]) {
      assert.equal((await t.call('CheckpointRpc.writeFile', { ...params, content: 'x' }, as(admin))).body.data.code, 'VALIDATION_ERROR', params.scope);
    }
    assert.equal((await t.call('CheckpointRpc.writeFile', { scope, path: 'a/b.txt/c', content: 'x' }, as(admin))).body.data.code, 'CONFLICT');
    assert.equal((await t.call('CheckpointRpc.createCheckpoint', { scope, message: '  ' }, as(admin))).body.data.code, 'VALIDATION_ERROR');
    assert.equal((await t.call('CheckpointRpc.createCheckpoint', { scope, message: 'x', tagName: 'bad..tag' }, as(admin))).body.data.code, 'VALIDATION_ERROR');
    assert.equal((await t.call('CheckpointRpc.restore', { scope, hash: 'not-a-hash' }, as(admin))).body.data.code, 'VALIDATION_ERROR');
    assert.equal((await t.call('CheckpointRpc.getStatus', { scope: 'never-written' }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('CheckpointRpc.readFile', { scope, path: 'missing.txt' }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal(
      (await t.call('CheckpointRpc.writeFile', { scope, path: 'big.bin', content: 'x'.repeat(512 * 1024 + 1) }, as(admin))).body.data.code,
      'VALIDATION_ERROR',
    );
    assert.equal((await t.call('CheckpointRpc.listCheckpoints', { scope }, as(admin))).body.data.length, 1);
  });

  it('refuses content that is not base64 when encoding is base64, and writes nothing', async () => {
    const scope = 'bytes';
    await t.ok('CheckpointRpc.writeFile', { scope, path: 'kept.bin', content: Buffer.from([1, 2, 3]).toString('base64'), encoding: 'base64' }, as(admin));
    for (const content of ['not base64!', 'AQID\n', 'AQI', 'AQ=', 'AQ==AQ==', '%%%%', 'AQID BAUG', '_-_-']) {
      const response = await t.call('CheckpointRpc.writeFile', { scope, path: 'bad.bin', content, encoding: 'base64' }, as(admin));
      assert.equal(response.body.data.code, 'VALIDATION_ERROR', content);
      assert.deepEqual(
        response.body.data.issues.map((issue: { path: string }) => issue.path),
        ['content'],
        content,
      );
      assert.match(response.body.data.issues[0].message, /content must be base64/);
      // An existing file is not overwritten with what a lenient decoder would make of it.
      const over = await t.call('CheckpointRpc.writeFile', { scope, path: 'kept.bin', content, encoding: 'base64' }, as(admin));
      assert.equal(over.body.data.code, 'VALIDATION_ERROR', content);
    }
    const files = await t.ok('CheckpointRpc.listFiles', { scope }, as(admin));
    assert.deepEqual(
      files.map((file: { path: string }) => file.path),
      ['kept.bin'],
    );
    assert.equal((await t.ok('CheckpointRpc.readFile', { scope, path: 'kept.bin', encoding: 'base64' }, as(admin))).content, 'AQID');
    // The same text is fine as utf8, and the empty file is valid base64.
    await t.ok('CheckpointRpc.writeFile', { scope, path: 'note.txt', content: 'not base64!' }, as(admin));
    assert.equal((await t.ok('CheckpointRpc.writeFile', { scope, path: 'empty.bin', content: '', encoding: 'base64' }, as(admin))).size, 0);
  });

  it('answers listCheckpoints with at most 50 by default, newest first', async () => {
    const scope = 'many';
    for (let index = 0; index < 52; index++) {
      await t.ok('CheckpointRpc.writeFile', { scope, path: 'counter.txt', content: String(index) }, as(admin));
      await t.ok('CheckpointRpc.createCheckpoint', { scope, message: `Count ${index}` }, as(admin));
    }
    const listed = await t.ok('CheckpointRpc.listCheckpoints', { scope }, as(admin));
    assert.deepEqual([listed.length, listed[0].message, listed[49].message], [50, 'Count 51', 'Count 2']);
    assert.equal((await t.ok('CheckpointRpc.listCheckpoints', { scope, limit: 3 }, as(admin))).length, 3);
  });

  it('restores the workflows scope into the database: a deleted workflow comes back, a later one goes', async () => {
    const graph = {
      nodes: [
        { id: 'start', type: 'start' },
        { id: 'done', type: 'end', config: { output: '"ok"' } },
      ],
      edges: [{ source: 'start', target: 'done' }],
    };
    const kept = await t.ok('WorkflowRpc.create', { name: 'Onboarding', description: 'Welcome', tags: ['hr'], ...graph }, as(admin));
    const deleted = await t.ok('WorkflowRpc.create', { name: 'Offboarding', ...graph }, as(member));
    assert.ok((await t.ok('CheckpointRpc.listScopes', {}, as(admin))).includes('workflows'));
    const status = await t.ok('CheckpointRpc.getStatus', { scope: 'workflows' }, as(admin));
    assert.deepEqual(
      status.files.map((file: { path: string; change: string }) => [file.path, file.change]).sort(),
      [
        [`${deleted._id}.json`, 'added'],
        [`${kept._id}.json`, 'added'],
      ].sort(),
    );
    const { commitHash } = await t.ok('CheckpointRpc.createCheckpoint', { scope: 'workflows', message: 'Two workflows' }, as(member));
    await agreeWithGit(t, admin, 'workflows');

    const keptBefore = await t.ok('WorkflowRpc.findById', { id: kept._id }, as(admin));
    await t.ok('WorkflowRpc.delete', { _id: deleted._id }, as(member));
    await t.ok('WorkflowRpc.update', { _id: kept._id, description: 'Changed' }, as(admin));
    const later = await t.ok('WorkflowRpc.create', { name: 'Later', ...graph }, as(admin));
    assert.deepEqual((await t.ok('CheckpointRpc.getStatus', { scope: 'workflows' }, as(admin))).files.map((file: { change: string }) => file.change).sort(), [
      'added',
      'deleted',
      'modified',
    ]);
    assert.equal(
      (await t.call('CheckpointRpc.writeFile', { scope: 'workflows', path: 'x.json', content: '{}' }, as(admin))).body.data.code,
      'VALIDATION_ERROR',
    );
    assert.equal(
      (await t.call('CheckpointRpc.restore', { scope: 'workflows', hash: commitHash }, as(member))).body.data.code,
      'FORBIDDEN',
      'records of every member: admin or staff',
    );

    await t.ok('CheckpointRpc.restore', { scope: 'workflows', hash: commitHash }, as(admin));
    const back = await t.ok('WorkflowRpc.findById', { id: deleted._id }, as(admin));
    assert.deepEqual([back.name, back.userId], ['Offboarding', member.user._id]);
    const restoredKept = await t.ok('WorkflowRpc.findById', { id: kept._id }, as(admin));
    assert.deepEqual(restoredKept, keptBefore);
    assert.equal((await t.call('WorkflowRpc.findById', { id: later._id }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.ok('WorkflowRpc.executeWorkflow', { workflowIdentifier: 'Offboarding' }, as(member))).result.status, 'completed');
    assert.deepEqual(await t.ok('CheckpointRpc.getStatus', { scope: 'workflows' }, as(admin)), { isClean: true, files: [] });
    await agreeWithGit(t, admin, 'workflows');
    // The other subscription's workflows are not part of this one's scope.
    assert.deepEqual(await t.ok('CheckpointRpc.listFiles', { scope: 'workflows' }, as(stranger)), []);

    // A checkpoint whose file names an id another subscription's record has (placed in the repository behind the service's back)
    // makes a record of this subscription: records are keyed by (subscriptionId, id), so the other one's is untouched.
    await t.ok('CheckpointRpc.createCheckpoint', { scope: 'workflows', message: 'None yet' }, as(stranger));
    const strangerDir = await cloneScope(t, stranger, 'workflows', { bare: false });
    const file = `${kept._id}.json`;
    const record = JSON.parse((await t.ok('CheckpointRpc.readFile', { scope: 'workflows', path: file }, as(admin))).content);
    writeFileSync(path.join(strangerDir, file), JSON.stringify({ ...record, name: 'Taken over' }));
    gitIn(strangerDir, 'add', file);
    gitIn(strangerDir, '-c', 'user.name=Intruder', '-c', 'user.email=intruder@example.com', 'commit', '-q', '-m', 'Foreign record');
    await plantObjects(t, stranger.subscriptionId, 'workflows', strangerDir);
    await t.ok('CheckpointRpc.restore', { scope: 'workflows', hash: gitIn(strangerDir, 'rev-parse', 'HEAD') }, as(stranger));
    assert.deepEqual(await t.ok('WorkflowRpc.findById', { id: kept._id }, as(admin)), keptBefore);
    const strangers = await t.ok('WorkflowRpc.findById', { id: kept._id }, as(stranger));
    assert.deepEqual([strangers.name, strangers.subscriptionId], ['Taken over', stranger.subscriptionId]);
    await t.ok('WorkflowRpc.update', { _id: kept._id, description: 'Changed by its own subscription' }, as(stranger));
    assert.deepEqual(await t.ok('WorkflowRpc.findById', { id: kept._id }, as(admin)), keptBefore);

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
    await t.ok('CheckpointRpc.restore', { scope: 'workflows', hash: await commitRecord(older, 'Before contextId') }, as(stranger));
    const olderBack = await t.ok('WorkflowRpc.findById', { id: older.id }, as(stranger));
    assert.deepEqual([olderBack.name, olderBack.contextId ?? null], ['Older', null]);
    const { name: _name, ...nameless } = { ...older, id: randomUUID() };
    const refused = await t.call('CheckpointRpc.restore', { scope: 'workflows', hash: await commitRecord(nameless, 'No name') }, as(stranger));
    assert.deepEqual([refused.body.data.code, refused.body.data.issues[0].message], ['VALIDATION_ERROR', `${nameless.id}.json of scope workflows lacks name`]);
    assert.ok(await t.ok('WorkflowRpc.findById', { id: older.id }, as(stranger)), 'nothing changed by the refused restore');
  });

  it('restores the agents scope', async () => {
    const agent = await t.ok('AgentConfigRpc.create', { name: 'helper', model: 'gpt-4o-mini', promptText: 'Be brief' }, as(admin));
    const { commitHash } = await t.ok('CheckpointRpc.createCheckpoint', { scope: 'agents', message: 'Helper' }, as(admin));
    await t.ok('AgentConfigRpc.update', { _id: agent._id, promptText: 'Be verbose' }, as(admin));
    await t.ok('CheckpointRpc.rollback', { scope: 'agents', hash: commitHash }, as(admin));
    assert.equal((await t.ok('AgentConfigRpc.findById', { _id: agent._id }, as(admin))).promptText, 'Be brief');
  });

  it("refuses a scope of records whose entity's key does not lead with its subscription", () => {
    const Keyed = defineEntity({ name: 'KeyedById', tableName: 'keyed_by_id', properties: (p) => ({ id: p.uuid().primary(), subscriptionId: p.uuid() }) });
    assert.throws(
      () => entityScope({ name: 'keyed', describe: 'Records keyed by id alone', entity: Keyed }),
      /^Error: Data scope "keyed": entity KeyedById needs the primary key \(subscriptionId, id\), not \(id\)$/,
    );
  });

  it('keeps scopes to their subscription', async () => {
    await t.ok('CheckpointRpc.writeFile', { scope: 'private', path: 'secret.txt', content: 'mine' }, as(admin));
    await t.ok('CheckpointRpc.createCheckpoint', { scope: 'private', message: 'Mine' }, as(admin));
    assert.ok(!(await t.ok('CheckpointRpc.listScopes', {}, as(stranger))).includes('private'));
    for (const [method, params] of [
      ['CheckpointRpc.getStatus', { scope: 'private' }],
      ['CheckpointRpc.listCheckpoints', { scope: 'private' }],
      ['CheckpointRpc.readFile', { scope: 'private', path: 'secret.txt' }],
      ['CheckpointRpc.listFiles', { scope: 'private' }],
      ['CheckpointRpc.deleteFile', { scope: 'private', path: 'secret.txt' }],
    ] as const) {
      assert.equal((await t.call(method, params, as(stranger))).body.data.code, 'NOT_FOUND', method);
    }
    // The stranger's own scope of that name is another repository.
    await t.ok('CheckpointRpc.writeFile', { scope: 'private', path: 'secret.txt', content: 'theirs' }, as(stranger));
    assert.equal((await t.ok('CheckpointRpc.readFile', { scope: 'private', path: 'secret.txt' }, as(admin))).content, 'mine');
  });

  it('lets concurrent writers to one scope take turns without corrupting it', async () => {
    const scope = 'busy';
    const writers = Array.from({ length: 12 }, (_, index) => index);
    await Promise.all(
      writers.map(async (index) => {
        const session = index % 2 === 0 ? admin : member;
        await t.ok('CheckpointRpc.writeFile', { scope, path: `file-${index}.txt`, content: `writer ${index}\n` }, as(session));
        await t.ok('CheckpointRpc.createCheckpoint', { scope, message: `Writer ${index}` }, as(session));
      }),
    );
    const { history, dir } = await agreeWithGit(t, admin, scope);
    assert.equal(history.length, 12);
    assert.equal((await t.ok('CheckpointRpc.listFiles', { scope }, as(admin))).length, 12);
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
    await t.ok('CheckpointRpc.writeFile', { scope: 'own', path: 'a.txt', content: 'a' }, as(user));
    await t.ok('CheckpointRpc.createCheckpoint', { scope: 'own', message: 'A' }, as(user));
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

    assert.ok((await t.ok('CheckpointRpc.listScopes', {}, as(user))).includes('legacy'));
    assert.deepEqual(await t.ok('CheckpointRpc.getStatus', { scope: 'legacy' }, as(user)), {
      isClean: false,
      files: [
        { path: 'docs/guide.md', change: 'modified' },
        { path: 'new.txt', change: 'added' },
      ],
    });
    const { history, dir: exported } = await agreeWithGit(t, user, 'legacy', false);
    assert.deepEqual(cliHistory(exported), disk, 'the same commits, by the same hashes');
    assert.deepEqual(history[1]!.tags, ['v1']);
    assert.equal((await t.ok('CheckpointRpc.readFile', { scope: 'legacy', path: 'docs/guide.md', hash: disk[1]!.hash }, as(user))).content, 'Guide v1\n');
    assert.equal((await t.ok('CheckpointRpc.readFile', { scope: 'legacy', path: 'docs/guide.md' }, as(user))).content, 'Guide v3, not checkpointed\n');
    assert.deepEqual(await t.ok('CheckpointRpc.listFiles', { scope: 'legacy', hash: disk[1]!.hash }, as(user)), [
      { path: 'docs/guide.md', size: 9 },
      { path: 'logo.bin', size: 4 },
    ]);
    // Moved once: the folder is no longer read.
    rmSync(dir, { recursive: true, force: true });
    const { commitHash } = await t.ok('CheckpointRpc.createCheckpoint', { scope: 'legacy', message: 'Third' }, as(user));
    assert.equal((await t.ok('CheckpointRpc.listCheckpoints', { scope: 'legacy' }, as(user)))[0].hash, commitHash);
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
          await node.ok('CheckpointRpc.writeFile', { scope: 'shared', path: `node-${index}.txt`, content: `${index}\n` }, as(user));
          await node.ok('CheckpointRpc.createCheckpoint', { scope: 'shared', message: `Change ${index}` }, as(user));
        }),
      );
      const { history, dir } = await agreeWithGit(second, user, 'shared');
      assert.equal(history.length, 16);
      assert.equal(gitIn(dir, 'ls-tree', '--name-only', 'main').split('\n').length, 16);
      assert.deepEqual(cliHistory(await cloneScope(first, user, 'shared')), cliHistory(dir), 'both nodes export the same repository');

      // Written through one node, read, restored and rolled back through the other.
      await first.ok('CheckpointRpc.writeFile', { scope: 'shared', path: 'node-0.txt', content: 'changed\n' }, as(user));
      assert.deepEqual((await second.ok('CheckpointRpc.getStatus', { scope: 'shared' }, as(user))).files, [{ path: 'node-0.txt', change: 'modified' }]);
      assert.equal((await second.ok('CheckpointRpc.readFile', { scope: 'shared', path: 'node-0.txt' }, as(user))).content, 'changed\n');
      const { commitHash } = await second.ok('CheckpointRpc.createCheckpoint', { scope: 'shared', message: 'Changed' }, as(user));
      await first.ok('CheckpointRpc.restore', { scope: 'shared', hash: history.at(-1)!.hash }, as(user));
      assert.deepEqual(
        (await second.ok('CheckpointRpc.listFiles', { scope: 'shared' }, as(user))).map((file: { path: string }) => file.path),
        (await first.ok('CheckpointRpc.listFiles', { scope: 'shared', hash: history.at(-1)!.hash }, as(user))).map((file: { path: string }) => file.path),
      );
      await second.ok('CheckpointRpc.rollback', { scope: 'shared', hash: commitHash }, as(user));
      assert.equal((await first.ok('CheckpointRpc.readFile', { scope: 'shared', path: 'node-0.txt' }, as(user))).content, 'changed\n');
      const after = await agreeWithGit(first, user, 'shared');
      assert.equal(after.history[0]!.hash, commitHash);
    } finally {
      await first.close();
      await second.close();
      await scratch.drop();
    }
  });
});
