import fs from 'node:fs';
import path from 'node:path';
import { GITDIR } from './git-store.ts';
import { loadGit, type ScopeRepository } from './repository.ts';

// Objects held in memory before they are written: each is at most CHECKPOINT_MAX_FILE_BYTES.
const FLUSH_EVERY = 100;

/**
 * Moves a scope's repository that an earlier release kept on disk
 * (`<CHECKPOINT_DIR>/<subscriptionId>/<scope>`, a working tree with its
 * `.git`) into the database: every object reachable from its branch and
 * tags, the refs, and the files of its working tree as the scope's files now,
 * so its status is what it was. The folder is left for the operator to
 * remove once every node runs this release.
 */
export async function importDiskRepository(repository: ScopeRepository, dir: string): Promise<void> {
  const { default: git } = await loadGit();
  const source = { fs, dir, cache: {} };
  const target = { fs: repository.store.fs, gitdir: GITDIR };
  const refs = new Map<string, string>();
  for (const branch of await git.listBranches({ fs, dir })) refs.set(`refs/heads/${branch}`, await git.resolveRef({ fs, dir, ref: branch }));
  for (const tag of await git.listTags({ fs, dir })) refs.set(`refs/tags/${tag}`, await git.resolveRef({ fs, dir, ref: `refs/tags/${tag}` }));

  const seen = new Set<string>();
  const pending = [...refs.values()];
  while (pending.length > 0) {
    const oid = pending.pop()!;
    if (seen.has(oid)) continue;
    seen.add(oid);
    const read = await git.readObject({ ...source, oid, format: 'content' });
    const type = read.type as 'blob' | 'tree' | 'commit' | 'tag';
    const content = Buffer.from(read.object as Uint8Array);
    if (type === 'commit') {
      const { commit } = await git.readCommit({ ...source, oid });
      pending.push(commit.tree, ...commit.parent);
    } else if (type === 'tree') pending.push(...(await git.readTree({ ...source, oid })).tree.map((entry) => entry.oid));
    else if (type === 'tag') pending.push((await git.readTag({ ...source, oid })).tag.object);
    else repository.store.noteBlobSize(oid, content.length);
    await git.writeObject({ ...target, type, object: content, format: 'content' });
    if (seen.size % FLUSH_EVERY === 0) await repository.store.flush();
  }
  // Only `main` is a branch of a scope; tags keep their names.
  for (const [name, oid] of refs)
    if (name === 'refs/heads/main' || name.startsWith('refs/tags/')) await git.writeRef({ ...target, ref: name, value: oid, force: true });
  await repository.store.flush();
  await repository.reset();
  const files: Record<string, Buffer> = {};
  for (const filepath of await workingTree(dir)) files[filepath] = await fs.promises.readFile(path.join(dir, filepath));
  await repository.syncFiles(files);
}

async function workingTree(dir: string, folder = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await fs.promises.readdir(path.join(dir, folder), { withFileTypes: true })) {
    const relative = folder ? `${folder}/${entry.name}` : entry.name;
    if (!folder && entry.name === '.git') continue;
    if (entry.isDirectory()) files.push(...(await workingTree(dir, relative)));
    else if (entry.isFile()) files.push(relative);
  }
  return files;
}
