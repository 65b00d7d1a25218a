import { expandTemplate, type ResourceDeclaration } from 'rpc-service/plugin';

const TEMPLATE = 'checkpoint://{scope}/{+path}';

/** Types of the files agents most often read; anything else is bytes. */
const TYPES: Record<string, string> = { md: 'text/markdown', txt: 'text/plain', json: 'application/json', yaml: 'application/yaml', yml: 'application/yaml' };
const typeOf = (path: string) => TYPES[path.slice(path.lastIndexOf('.') + 1).toLowerCase()] ?? 'application/octet-stream';

/**
 * The files of the subscription's data scopes as they are now, as MCP
 * resources, through CheckpointRpc.listScopes, listFiles and readFile. The
 * listing's cursor is the scope it is at and how many of its files were given.
 */
export const scopeFileResources: ResourceDeclaration = {
  name: 'checkpoint-files',
  title: 'Data scope files',
  describe: 'A file of a data scope as it is now (checkpoint://<scope>/<path>): text as text, other files as bytes.',
  template: TEMPLATE,
  mimeType: 'application/octet-stream',
  operations: ['CheckpointRpc.readFile', 'CheckpointRpc.listFiles', 'CheckpointRpc.listScopes'],
  async list(call, cursor, limit) {
    const scopes: string[] = await call('CheckpointRpc.listScopes', {});
    const [at, skip] = cursor ? cursor.split(':').map(Number) : [0, 0];
    const scope = scopes[at!];
    if (scope === undefined) return { resources: [], next: null };
    const files: { path: string; size: number }[] = await call('CheckpointRpc.listFiles', { scope });
    const page = files.slice(skip, skip! + limit);
    const next = skip! + limit < files.length ? `${at}:${skip! + limit}` : at! + 1 < scopes.length ? `${at! + 1}:0` : null;
    return {
      resources: page.map((file) => ({
        uri: expandTemplate(TEMPLATE, { scope, path: file.path }),
        name: file.path,
        mimeType: typeOf(file.path),
        size: file.size,
      })),
      next,
    };
  },
  async read(call, { scope, path }) {
    const mimeType = typeOf(path);
    const binary = mimeType === 'application/octet-stream';
    const file: { content: string } = await call('CheckpointRpc.readFile', { scope, path, encoding: binary ? 'base64' : 'utf8' });
    return binary ? { blob: file.content, mimeType } : { text: file.content, mimeType };
  },
};
