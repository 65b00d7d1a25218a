import * as v from 'valibot';
import { SCOPE_NAME, trimmedText, wireTimestamp } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';

const scope = v.pipe(v.string('scope must be a string'), v.regex(SCOPE_NAME, 'scope must be lower-case letters, digits, _ and -, at most 64 characters'));
const hash = (label: string) =>
  v.pipe(
    v.string(`${label} must be a string`),
    v.trim(),
    v.toLowerCase(),
    v.regex(/^[0-9a-f]{4,40}$/, `${label} must be a checkpoint hash (4 to 40 hex digits)`),
  );
const message = trimmedText('message', 2000);
const tagName = v.pipe(
  v.string('tagName must be a string'),
  v.trim(),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'tagName must be letters, digits, ., _ and -, at most 100 characters'),
  v.check((name) => !name.includes('..') && !name.endsWith('.') && !name.endsWith('.lock'), 'tagName must not hold .. nor end with . or .lock'),
  // A tag git would take for the branch, HEAD or a commit makes `main` ambiguous for every git client.
  v.check((name) => !['main', 'head'].includes(name.toLowerCase()) && !/^[0-9a-f]{40}$/i.test(name), 'tagName must not be main, HEAD or a commit hash'),
);
/**
 * Names git itself treats specially, refused as any part of a path: `.git`
 * however disguised (case, trailing dots or spaces, characters some file
 * systems ignore, an NTFS stream suffix, its 8.3 short name), and the files that would change how
 * git reads the scope (.gitignore hiding files from checkpoints, .gitmodules,
 * .gitattributes).
 */
const IGNORED_BY_FILE_SYSTEMS = /[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;
const GIT_NAMES = new Set(['.git', '.gitignore', '.gitmodules', '.gitattributes']);
const isGitName = (part: string) => {
  const name = part
    .replace(IGNORED_BY_FILE_SYSTEMS, '')
    .split(':')[0]!
    .replace(/[. ]+$/, '')
    .toLowerCase();
  return GIT_NAMES.has(name) || /^git~\d+$/.test(name);
};
const isPlainPart = (part: string) => part !== '' && part !== '.' && part !== '..' && Buffer.byteLength(part) <= 255 && !isGitName(part);
/** A file's path inside its scope: relative, with `/` between folders, never leaving the scope nor touching what git reads as its own. */
const filePath = v.pipe(
  v.string('path must be a string'),
  v.minLength(1, 'path must not be empty'),
  v.maxLength(500, 'path must be at most 500 characters'),
  v.check(
    (value) => !value.includes('\\') && value.split('/').every(isPlainPart),
    'path must stay inside the scope: relative, no empty, . or .. parts, parts of at most 255 bytes, no backslashes, no .git, .gitignore, .gitmodules or .gitattributes',
  ),
);
const ENCODINGS = ['utf8', 'base64'] as const;
const encoding = v.optional(v.picklist(ENCODINGS, 'encoding must be utf8 or base64'), 'utf8');

// The answers' schemas; the handlers' return types (the worker's) are checked against them.
const FILE_CHANGES = ['added', 'modified', 'deleted'] as const;
const CHECKPOINT = v.strictObject({
  hash: v.string(),
  author: v.string(),
  date: wireTimestamp,
  message: v.string(),
  tags: v.array(v.string()),
});
const FILE_SIZE = v.strictObject({ path: v.string(), size: v.number() });
const MESSAGE = v.strictObject({ message: v.string() });

export const listScopes = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The subscription's data scopes: the scopes of records (workflows, agents) and the file scopes it has written.",
  result: v.array(v.string()),
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.checkpointService.listScopes(ctx),
});

export const getStatus = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'Whether the scope equals its last checkpoint (isClean), and the files added, modified or deleted since.',
  result: v.strictObject({ isClean: v.boolean(), files: v.array(v.strictObject({ path: v.string(), change: v.picklist(FILE_CHANGES) })) }),
  params: v.object({ scope }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.getStatus(ctx, params.scope),
});

export const listCheckpoints = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The scope's checkpoints, newest first (at most limit, 50 by default), with their tags.",
  result: v.array(CHECKPOINT),
  params: v.object({
    scope,
    limit: v.optional(v.pipe(v.number('limit must be a number'), v.integer('limit must be a whole number'), v.minValue(1), v.maxValue(1000)), 50),
  }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.listCheckpoints(ctx, params.scope, params.limit),
});

export const createCheckpoint = defineOperation({
  access: 'user',
  kind: 'write',
  describe: "Records the scope's current files as a checkpoint (a commit authored by the caller), tagged when tagName is given.",
  result: v.strictObject({ commitHash: v.string() }),
  params: v.object({ scope, message, tagName: v.optional(tagName) }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.createCheckpoint(ctx, params),
});

export const tagRelease = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Puts an annotated tag with a message on a checkpoint.',
  result: v.strictObject({ tagName: v.string() }),
  params: v.object({ scope, commitHash: hash('commitHash'), tagName, message }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.tagRelease(ctx, params),
});

export const restore = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Makes the scope equal a checkpoint as a new checkpoint (history kept); sends dataScopeRefreshed. Scopes of records: admin or staff.',
  result: MESSAGE,
  params: v.object({ scope, hash: hash('hash') }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.restore(ctx, params.scope, params.hash),
});

export const rollback = defineOperation({
  access: 'user',
  kind: 'write',
  describe:
    'Moves the scope back to a checkpoint of its history and discards the checkpoints after it; sends dataScopeRefreshed. Scopes of records: admin or staff.',
  result: MESSAGE,
  params: v.object({ scope, hash: hash('hash') }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.rollback(ctx, params.scope, params.hash),
});

/** Base64 as RFC 4648 §4 writes it (padded, no line breaks): Node's decoder skips anything else, and would write those bytes without a word. */
const BASE64 = v.pipe(v.string(), v.base64());

export const writeFile = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Writes a file of a file scope (made with its first file); text, or bytes as base64.',
  result: FILE_SIZE,
  params: v.pipe(
    v.object({ scope, path: filePath, content: v.string('content must be a string'), encoding }),
    v.forward(
      v.partialCheck(
        [['content'], ['encoding']],
        ({ content, encoding }) => encoding !== 'base64' || v.is(BASE64, content),
        'content must be base64 (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4 characters, no spaces or line breaks) when encoding is base64',
      ),
      ['content'],
    ),
  ),
  handler: ({ params, ctx, deps }) => deps.checkpointService.writeFile(ctx, params),
});

export const readFile = defineOperation({
  access: 'user',
  kind: 'read',
  describe: 'A file of the scope as it is now, or at a checkpoint (hash).',
  result: v.strictObject({ path: v.string(), content: v.string(), encoding: v.picklist(ENCODINGS) }),
  params: v.object({ scope, path: filePath, encoding, hash: v.optional(hash('hash')) }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.readFile(ctx, params),
});

export const listFiles = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "The scope's files with their sizes, as they are now or at a checkpoint (hash).",
  result: v.array(FILE_SIZE),
  params: v.object({ scope, hash: v.optional(hash('hash')) }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.listFiles(ctx, params.scope, params.hash),
});

export const deleteFile = defineOperation({
  access: 'user',
  kind: 'write',
  describe: 'Deletes a file of a file scope.',
  result: v.strictObject({ success: v.literal(true) }),
  params: v.object({ scope, path: filePath }),
  handler: ({ params, ctx, deps }) => deps.checkpointService.deleteFile(ctx, params.scope, params.path),
});
