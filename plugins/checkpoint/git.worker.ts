import fs from 'node:fs';
import path from 'node:path';
import git, { Errors } from 'isomorphic-git';

/**
 * Git work on one scope's repository, run in the worker pool: the scope's
 * files are its working tree, checkpoints are commits on `main`. Expected
 * failures come back as outcomes with a code, never as thrown errors, which
 * the pool would turn into INTERNAL.
 */

export interface Author {
  name: string;
  email: string;
}

export type GitTask =
  | { op: 'status'; dir: string; files?: Record<string, string> }
  | { op: 'log'; dir: string; limit: number }
  | { op: 'commit'; dir: string; message: string; author: Author; tag?: string; files?: Record<string, string> }
  | { op: 'tag'; dir: string; hash: string; name: string; message: string; author: Author }
  | { op: 'readTree'; dir: string; hash: string }
  | { op: 'restore'; dir: string; hash: string; message: string; author: Author }
  | { op: 'rollback'; dir: string; hash: string }
  | { op: 'writeFile'; dir: string; path: string; content: string; encoding: Encoding; maxFiles: number }
  | { op: 'readFile'; dir: string; path: string; encoding: Encoding; hash?: string }
  | { op: 'listFiles'; dir: string; hash?: string }
  | { op: 'deleteFile'; dir: string; path: string };

export type Encoding = 'utf8' | 'base64';
export type FileChange = 'added' | 'modified' | 'deleted';

export interface Checkpoint {
  hash: string;
  author: string;
  date: string;
  message: string;
  tags: string[];
}

export type GitOutcome<T = unknown> = { ok: true; value: T } | { ok: false; code: 'NOT_FOUND' | 'CONFLICT' | 'VALIDATION_ERROR'; message: string };

class Refusal extends Error {
  constructor(
    readonly code: 'NOT_FOUND' | 'CONFLICT' | 'VALIDATION_ERROR',
    message: string,
  ) {
    super(message);
  }
}

const BRANCH = 'refs/heads/main';
// What isomorphic-git may keep between calls of one task; never longer, since other threads and nodes change the repository.
let cache = {};

export default async function run(task: GitTask): Promise<GitOutcome> {
  cache = {};
  try {
    return { ok: true, value: await perform(task) };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, code: error.code, message: error.message };
    throw error;
  }
}

async function perform(task: GitTask): Promise<unknown> {
  const { dir } = task;
  await open(dir);
  switch (task.op) {
    case 'status':
      if (task.files) await syncWorkdir(dir, task.files);
      return status(dir);
    case 'log':
      return checkpoints(dir, task.limit);
    case 'commit': {
      // A refused tag must leave no checkpoint behind.
      if (task.tag) await refuseExistingTag(dir, task.tag);
      if (task.files) await syncWorkdir(dir, task.files);
      const hash = await commitAll(dir, task.message, task.author);
      if (task.tag) await tag(dir, hash, task.tag, task.message, task.author);
      return hash;
    }
    case 'tag':
      await tag(dir, await commitOf(dir, task.hash), task.name, task.message, task.author);
      return task.name;
    case 'readTree':
      return treeFiles(dir, await commitOf(dir, task.hash));
    case 'restore': {
      const target = await commitOf(dir, task.hash);
      const head = await headCommit(dir);
      const { commit } = await git.readCommit({ fs, dir, oid: target, cache });
      const hash = await git.commit({ fs, dir, message: task.message, author: task.author, tree: commit.tree, parent: head ? [head] : [], cache });
      await checkoutHead(dir);
      return hash;
    }
    case 'rollback': {
      const target = await commitOf(dir, task.hash);
      const head = (await headCommit(dir))!;
      if (target !== head && !(await git.isDescendent({ fs, dir, oid: head, ancestor: target, depth: -1, cache }))) {
        throw new Refusal('NOT_FOUND', `Checkpoint ${task.hash} is not in the history of this scope`);
      }
      await git.writeRef({ fs, dir, ref: BRANCH, value: target, force: true });
      await checkoutHead(dir);
      return target;
    }
    case 'writeFile': {
      const file = inside(dir, task.path);
      if (!fs.existsSync(file) && (await workdirFiles(dir)).length >= task.maxFiles) {
        throw new Refusal('VALIDATION_ERROR', `A scope holds at most ${task.maxFiles} files`);
      }
      try {
        await fs.promises.mkdir(path.dirname(file), { recursive: true });
        await fs.promises.writeFile(file, Buffer.from(task.content, task.encoding));
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EISDIR' || code === 'ENOTDIR' || code === 'EEXIST')
          throw new Refusal('CONFLICT', `${task.path} clashes with a file or folder of the scope`);
        if (code === 'ENAMETOOLONG') throw new Refusal('VALIDATION_ERROR', `${task.path} is too long a path for the file system`);
        throw error;
      }
      return { path: task.path, size: fs.statSync(file).size };
    }
    case 'readFile': {
      if (task.hash) {
        const blob = await blobAt(dir, await commitOf(dir, task.hash), task.path);
        if (!blob) throw new Refusal('NOT_FOUND', `File ${task.path} not found at checkpoint ${task.hash}`);
        return { path: task.path, content: Buffer.from(blob).toString(task.encoding), encoding: task.encoding };
      }
      const file = inside(dir, task.path);
      if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw new Refusal('NOT_FOUND', `File ${task.path} not found`);
      return { path: task.path, content: (await fs.promises.readFile(file)).toString(task.encoding), encoding: task.encoding };
    }
    case 'listFiles': {
      if (task.hash) {
        const commit = await commitOf(dir, task.hash);
        // One blob in memory at a time: a scope may hold thousands of large files.
        const files: { path: string; size: number }[] = [];
        for (const filepath of await git.listFiles({ fs, dir, ref: commit, cache }))
          files.push({ path: filepath, size: (await blobAt(dir, commit, filepath))!.length });
        return files;
      }
      return Promise.all(
        (await workdirFiles(dir)).map(async (filepath) => ({ path: filepath, size: (await fs.promises.stat(path.join(dir, filepath))).size })),
      );
    }
    case 'deleteFile': {
      const file = inside(dir, task.path);
      if (!fs.existsSync(file) || !fs.statSync(file).isFile()) throw new Refusal('NOT_FOUND', `File ${task.path} not found`);
      await fs.promises.unlink(file);
      await removeEmptyFolders(dir, path.dirname(file));
      return { success: true };
    }
  }
}

/** Opens the scope's repository, made (with `main` as its branch) when there is none yet: the service decides which scopes may come into being. */
async function open(dir: string): Promise<void> {
  if (fs.existsSync(path.join(dir, '.git', 'HEAD'))) return;
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  await git.init({ fs, dir, defaultBranch: 'main' });
}

/** The absolute path of a file of the scope; the service checked the path, this refuses anything that would still leave the folder. */
function inside(dir: string, filepath: string): string {
  const file = path.resolve(dir, filepath);
  const relative = path.relative(dir, file);
  if (relative.startsWith('..') || path.isAbsolute(relative) || relative.split(path.sep)[0] === '.git') {
    throw new Refusal('VALIDATION_ERROR', 'path must stay inside the scope');
  }
  return file;
}

async function headCommit(dir: string): Promise<string | null> {
  try {
    return await git.resolveRef({ fs, dir, ref: 'HEAD' });
  } catch (error) {
    if (error instanceof Errors.NotFoundError) return null;
    throw error;
  }
}

/** A checkpoint's full hash from the (possibly short) one given, refusing what is not a commit of the repository. */
async function commitOf(dir: string, hash: string): Promise<string> {
  try {
    const oid = await git.expandOid({ fs, dir, oid: hash, cache });
    await git.readCommit({ fs, dir, oid, cache });
    return oid;
  } catch (error) {
    if (error instanceof Errors.AmbiguousError) throw new Refusal('VALIDATION_ERROR', `Checkpoint ${hash} is ambiguous; give more of the hash`);
    if (error instanceof Errors.NotFoundError || error instanceof Errors.ObjectTypeError) throw new Refusal('NOT_FOUND', `Checkpoint ${hash} not found`);
    throw error;
  }
}

/** Every file of the working tree, relative and with `/`, sorted. */
async function workdirFiles(dir: string, folder = ''): Promise<string[]> {
  const entries = await fs.promises.readdir(path.join(dir, folder), { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    const relative = folder ? `${folder}/${entry.name}` : entry.name;
    if (!folder && entry.name === '.git') continue;
    if (entry.isDirectory()) files.push(...(await workdirFiles(dir, relative)));
    else if (entry.isFile()) files.push(relative);
  }
  return files.sort();
}

async function removeEmptyFolders(dir: string, folder: string): Promise<void> {
  while (folder !== dir && (await fs.promises.readdir(folder)).length === 0) {
    await fs.promises.rmdir(folder);
    folder = path.dirname(folder);
  }
}

/** Makes the working tree hold exactly these files (an exporter's records). */
async function syncWorkdir(dir: string, files: Record<string, string>): Promise<void> {
  for (const filepath of await workdirFiles(dir)) {
    if (!(filepath in files)) {
      await fs.promises.unlink(path.join(dir, filepath));
      await removeEmptyFolders(dir, path.dirname(path.join(dir, filepath)));
    }
  }
  for (const [filepath, content] of Object.entries(files)) {
    const file = inside(dir, filepath);
    const current = fs.existsSync(file) ? await fs.promises.readFile(file, 'utf8') : null;
    if (current === content) continue;
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    await fs.promises.writeFile(file, content);
  }
}

/** Files that differ between the last checkpoint and the working tree. */
async function status(dir: string): Promise<{ isClean: boolean; files: { path: string; change: FileChange }[] }> {
  const files = (await changes(dir)).map(({ filepath, change }) => ({ path: filepath, change }));
  return { isClean: files.length === 0, files };
}

async function changes(dir: string): Promise<{ filepath: string; change: FileChange }[]> {
  const head = await headCommit(dir);
  if (!head) return (await workdirFiles(dir)).map((filepath) => ({ filepath, change: 'added' as const }));
  const rows = await git.statusMatrix({ fs, dir, cache });
  return rows.flatMap(([filepath, inHead, inWorkdir]): { filepath: string; change: FileChange }[] => {
    if (inHead === 0 && inWorkdir !== 0) return [{ filepath, change: 'added' as const }];
    if (inHead === 1 && inWorkdir === 0) return [{ filepath, change: 'deleted' as const }];
    if (inHead === 1 && inWorkdir === 2) return [{ filepath, change: 'modified' as const }];
    return [];
  });
}

/** Stages every change of the working tree and commits it on `main`. */
async function commitAll(dir: string, message: string, author: Author): Promise<string> {
  const found = await changes(dir);
  const removed = found.filter(({ change }) => change === 'deleted').map(({ filepath }) => filepath);
  const changed = found.filter(({ change }) => change !== 'deleted').map(({ filepath }) => filepath);
  for (const filepath of removed) await git.remove({ fs, dir, filepath, cache });
  if (changed.length > 0) await git.add({ fs, dir, filepath: changed, cache });
  return git.commit({ fs, dir, message, author, cache });
}

async function tag(dir: string, hash: string, name: string, message: string, author: Author): Promise<void> {
  try {
    await git.annotatedTag({ fs, dir, ref: name, object: hash, message, tagger: author, cache });
  } catch (error) {
    if (error instanceof Errors.AlreadyExistsError) throw new Refusal('CONFLICT', `Tag ${name} already exists in this scope`);
    throw error;
  }
}

/** A file's bytes at a commit, null when the commit has no such file. */
async function blobAt(dir: string, commit: string, filepath: string): Promise<Uint8Array | null> {
  try {
    return (await git.readBlob({ fs, dir, oid: commit, filepath, cache })).blob;
  } catch (error) {
    if (error instanceof Errors.NotFoundError || error instanceof Errors.ObjectTypeError) return null;
    throw error;
  }
}

async function refuseExistingTag(dir: string, name: string): Promise<void> {
  try {
    await git.resolveRef({ fs, dir, ref: `refs/tags/${name}` });
  } catch (error) {
    if (error instanceof Errors.NotFoundError) return;
    throw error;
  }
  throw new Refusal('CONFLICT', `Tag ${name} already exists in this scope`);
}

/** The files of a checkpoint's tree as text (a scope of records' JSON files). */
async function treeFiles(dir: string, hash: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const filepath of await git.listFiles({ fs, dir, ref: hash, cache })) {
    const { blob } = await git.readBlob({ fs, dir, oid: hash, filepath, cache });
    files[filepath] = Buffer.from(blob).toString('utf8');
  }
  return files;
}

/** Makes the index and the working tree equal the tree of `main` (as `git reset --hard` and `git clean` would). */
async function checkoutHead(dir: string): Promise<void> {
  await git.checkout({ fs, dir, ref: BRANCH, force: true, cache });
  for (const [filepath, inHead, , inStage] of await git.statusMatrix({ fs, dir, cache })) {
    if (inHead !== 0) continue;
    await fs.promises.rm(path.join(dir, filepath), { force: true });
    await removeEmptyFolders(dir, path.dirname(path.join(dir, filepath)));
    if (inStage !== 0) await git.remove({ fs, dir, filepath, cache });
  }
}

/** The latest checkpoints on `main`, newest first, with the tags that point at them. */
async function checkpoints(dir: string, limit: number): Promise<Checkpoint[]> {
  if (!(await headCommit(dir))) return [];
  const tagsOf = new Map<string, string[]>();
  for (const name of await git.listTags({ fs, dir })) {
    let oid = await git.resolveRef({ fs, dir, ref: `refs/tags/${name}` });
    const { type } = await git.readObject({ fs, dir, oid, format: 'parsed', cache });
    if (type === 'tag') oid = (await git.readTag({ fs, dir, oid, cache })).tag.object;
    tagsOf.set(oid, [...(tagsOf.get(oid) ?? []), name]);
  }
  const entries = await git.log({ fs, dir, ref: BRANCH, depth: limit, cache });
  return entries.map(({ oid, commit }) => ({
    hash: oid,
    author: commit.author.name,
    date: new Date(commit.author.timestamp * 1000).toISOString(),
    message: commit.message.replace(/\n$/, ''),
    tags: (tagsOf.get(oid) ?? []).sort(),
  }));
}
