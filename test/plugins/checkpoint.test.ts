import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { createScratchDatabase, TEST_DATABASE_URL } from '../support/database.ts';
import { startTestApp, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { addUser } from '../support/users.ts';

type Session = { token: string };
const as = (session: Session) => ({ token: session.token });

/** The real git CLI on a scope's repository. */
const gitIn = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: dir } }).trim();

/** What `git log` says of the scope's history, in listCheckpoints' terms. */
function cliHistory(dir: string) {
  const log = gitIn(dir, 'log', '--format=%H%x09%an%x09%aI%x09%s', 'main');
  return log.split('\n').map((line) => {
    const [hash, author, date, message] = line.split('\t');
    return { hash, author, date: new Date(date!).toISOString(), message };
  });
}

/** listCheckpoints and the git CLI agree, and git fsck finds nothing wrong; the working tree is what git calls clean (or not). */
async function agreeWithGit(t: TestApp, session: Session, scope: string, dir: string, clean = true) {
  const checkpoints = await t.ok('CheckpointRpc.listCheckpoints', { scope }, as(session));
  assert.deepEqual(
    checkpoints.map(({ hash, author, date, message }: Record<string, string>) => ({ hash, author, date, message })),
    cliHistory(dir),
  );
  gitIn(dir, 'fsck', '--strict', '--no-dangling');
  assert.equal(gitIn(dir, 'status', '--porcelain') === '', clean, 'git status');
  return checkpoints as { hash: string; tags: string[]; message: string }[];
}

describe('CheckpointRpc', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Awaited<ReturnType<typeof addUser>>;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const scopeDir = (subscriptionId: string, scope: string) => path.join(t.dataDir, 'checkpoints', subscriptionId, scope);

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'checkpoint', 'workflow', 'agent-config'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('versions files: write, checkpoint, change, status, tag, restore and rollback, each agreeing with the git CLI', async () => {
    const scope = 'site';
    const dir = scopeDir(admin.subscriptionId, scope);
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
    let history = await agreeWithGit(t, admin, scope, dir);
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
    history = await agreeWithGit(t, admin, scope, dir);
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
    assert.equal(gitIn(dir, 'tag', '-l', '-n1', 'release-2').replace(/\s+/g, ' '), 'release-2 Second release');
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
      cliHistory(dir).map((checkpoint) => checkpoint.hash),
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
      history = await agreeWithGit(t, admin, scope, dir);
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
      history = await agreeWithGit(t, admin, scope, dir);
      assert.deepEqual(
        history.map((checkpoint) => checkpoint.hash),
        [second, first],
      );
      assert.deepEqual(
        (await t.ok('CheckpointRpc.listFiles', { scope }, as(admin))).map((file: { path: string }) => file.path),
        ['docs/guide.md', 'logo.png'],
      );
      assert.equal((await t.ok('CheckpointRpc.readFile', { scope, path: 'docs/guide.md' }, as(admin))).content, 'Guide v2\n');
      await eventually(() => events.find((message) => message.event === 'dataScopeRefreshed' && message.payload.action === 'rollback'));
    } finally {
      socket.close();
    }

    // A checkpoint that is no longer in the history (the discarded restore) cannot be rolled back to.
    assert.equal(gitIn(dir, 'cat-file', '-t', restoreCommit), 'commit', 'the discarded commit is still an object of the repository');
    assert.equal((await t.call('CheckpointRpc.rollback', { scope, hash: restoreCommit }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.equal((await t.call('CheckpointRpc.rollback', { scope, hash: 'abcdef0' }, as(admin))).body.data.code, 'NOT_FOUND');
    assert.deepEqual(
      cliHistory(dir).map((checkpoint) => checkpoint.hash),
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
    assert.ok(!existsSync(path.join(t.dataDir, 'checkpoints', 'escape.txt')));
    // Names that only resemble git's own are ordinary files.
    for (const fine of ['.github/ci.yml', 'notes:1.txt', '.gitkeep']) await t.ok('CheckpointRpc.writeFile', { scope, path: fine, content: 'x' }, as(admin));
    await t.ok('CheckpointRpc.createCheckpoint', { scope, message: 'Look-alikes' }, as(admin));
    gitIn(scopeDir(admin.subscriptionId, scope), 'fsck', '--strict');
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
    await agreeWithGit(t, admin, 'workflows', scopeDir(admin.subscriptionId, 'workflows'));

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
    await agreeWithGit(t, admin, 'workflows', scopeDir(admin.subscriptionId, 'workflows'));
    // The other subscription's workflows are not part of this one's scope.
    assert.deepEqual(await t.ok('CheckpointRpc.listFiles', { scope: 'workflows' }, as(stranger)), []);

    // A checkpoint whose files name another subscription's record (placed in the repository behind the service's back) is refused whole.
    await t.ok('CheckpointRpc.createCheckpoint', { scope: 'workflows', message: 'None yet' }, as(stranger));
    const strangerDir = scopeDir(stranger.subscriptionId, 'workflows');
    const file = `${kept._id}.json`;
    const record = JSON.parse((await t.ok('CheckpointRpc.readFile', { scope: 'workflows', path: file }, as(admin))).content);
    writeFileSync(path.join(strangerDir, file), JSON.stringify({ ...record, name: 'Taken over' }));
    gitIn(strangerDir, 'add', file);
    gitIn(strangerDir, '-c', 'user.name=Intruder', '-c', 'user.email=intruder@example.com', 'commit', '-q', '-m', 'Foreign record');
    const foreign = await t.call('CheckpointRpc.restore', { scope: 'workflows', hash: gitIn(strangerDir, 'rev-parse', 'HEAD') }, as(stranger));
    assert.equal(foreign.body.data.code, 'VALIDATION_ERROR');
    assert.deepEqual(await t.ok('WorkflowRpc.findById', { id: kept._id }, as(admin)), keptBefore);
    assert.equal((await t.call('WorkflowRpc.findById', { id: kept._id }, as(stranger))).body.data.code, 'NOT_FOUND');

    // A record file made before a nullable field existed restores with the field null; one lacking a required field is refused.
    const commitRecord = (fields: Record<string, unknown>, message: string) => {
      rmSync(path.join(strangerDir, file), { force: true });
      writeFileSync(path.join(strangerDir, `${fields.id}.json`), JSON.stringify(fields));
      gitIn(strangerDir, 'add', '-A');
      gitIn(strangerDir, '-c', 'user.name=Operator', '-c', 'user.email=operator@example.com', 'commit', '-q', '-m', message);
      return gitIn(strangerDir, 'rev-parse', 'HEAD');
    };
    const { contextId: _contextId, ...older } = { ...record, id: randomUUID(), userId: stranger.user._id, name: 'Older' };
    await t.ok('CheckpointRpc.restore', { scope: 'workflows', hash: commitRecord(older, 'Before contextId') }, as(stranger));
    const olderBack = await t.ok('WorkflowRpc.findById', { id: older.id }, as(stranger));
    assert.deepEqual([olderBack.name, olderBack.contextId ?? null], ['Older', null]);
    const { name: _name, ...nameless } = { ...older, id: randomUUID() };
    const refused = await t.call('CheckpointRpc.restore', { scope: 'workflows', hash: commitRecord(nameless, 'No name') }, as(stranger));
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
    const history = await agreeWithGit(t, admin, scope, scopeDir(admin.subscriptionId, scope));
    assert.equal(history.length, 12);
    assert.equal((await t.ok('CheckpointRpc.listFiles', { scope }, as(admin))).length, 12);
    assert.equal(gitIn(scopeDir(admin.subscriptionId, scope), 'ls-tree', '--name-only', 'HEAD').split('\n').length, 12);
  });
});

describe('CheckpointRpc: two nodes sharing the folder on one PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, () => {
  it('lets one writer at a time work on a scope across nodes', async () => {
    const scratch = await createScratchDatabase(TEST_DATABASE_URL!);
    const shared = mkdtempSync(path.join(tmpdir(), 'rpc-checkpoints-'));
    const options = { withNotes: false, plugins: ['auth', 'checkpoint'], databaseUrl: scratch.url, env: { CHECKPOINT_DIR: shared } };
    const first = await startTestApp(options);
    const second = await startTestApp(options);
    try {
      const user = await first.signup();
      await Promise.all(
        Array.from({ length: 16 }, async (_, index) => {
          const node = index % 2 === 0 ? first : second;
          await node.ok('CheckpointRpc.writeFile', { scope: 'shared', path: `node-${index}.txt`, content: `${index}\n` }, as(user));
          await node.ok('CheckpointRpc.createCheckpoint', { scope: 'shared', message: `Change ${index}` }, as(user));
        }),
      );
      const dir = path.join(shared, user.subscriptionId, 'shared');
      const history = await agreeWithGit(second, user, 'shared', dir);
      assert.equal(history.length, 16);
      assert.equal(gitIn(dir, 'ls-tree', '--name-only', 'HEAD').split('\n').length, 16);
    } finally {
      await first.close();
      await second.close();
      await scratch.drop();
      rmSync(shared, { recursive: true, force: true });
    }
  });
});
