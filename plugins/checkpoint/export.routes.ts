import { RpcError, type Router } from 'rpc-service/plugin';
import type { CheckpointDeps } from './deps.ts';

const REPOSITORY = /^([a-z0-9_-]{1,64})\.git$/;

/**
 * A scope's repository over git's "dumb" HTTP protocol, read-only:
 * `git clone --bare <base>/checkpoints/<scope>.git` with the caller's
 * credentials (`-c http.extraHeader="X-Api-Key: <key>"`) writes it as a bare
 * repository that `git fsck --strict` and `git log` read. Git asks for
 * `info/refs` (as the smart protocol first; any answer not typed as the smart
 * one makes it read the list), `HEAD`, then each object it lacks by its path;
 * every object is loose, so it never asks for packs.
 */
export function exportRoutes(router: Router, { http, checkpointService }: CheckpointDeps): void {
  const scopeOf = (repository: string): string => {
    const found = REPOSITORY.exec(repository);
    if (!found) throw new RpcError('NOT_FOUND', `${repository} is not a scope's repository: <scope>.git`);
    return found[1]!;
  };
  // A clone reads every checkpoint of the scope: what CheckpointRpc's reads give, so it serves that group.
  const route = { access: 'user', serves: 'CheckpointRpc', kind: 'read' } as const;
  router.get(
    '/checkpoints/:repository/info/refs',
    http.route(route, async ({ ctx, http: exchange }) => {
      const refs = await checkpointService.exportRefs(ctx, scopeOf(exchange.params.repository!));
      exchange.type = 'text/plain; charset=utf-8';
      exchange.set('Cache-Control', 'no-store');
      exchange.body = refs.map(({ name, oid, peeled }) => `${oid}\t${name}\n${peeled && peeled !== oid ? `${peeled}\t${name}^{}\n` : ''}`).join('');
    }),
  );
  router.get(
    '/checkpoints/:repository/HEAD',
    http.route(route, async ({ ctx, http: exchange }) => {
      await checkpointService.exportRefs(ctx, scopeOf(exchange.params.repository!));
      exchange.type = 'text/plain; charset=utf-8';
      exchange.body = 'ref: refs/heads/main\n';
    }),
  );
  router.get(
    '/checkpoints/:repository/objects/:folder/:file',
    http.route(route, async ({ ctx, http: exchange }) => {
      const oid = `${exchange.params.folder}${exchange.params.file}`;
      if (!/^[0-9a-f]{40}$/.test(oid)) throw new RpcError('NOT_FOUND', `${exchange.path} is not an object of the repository`);
      exchange.body = await checkpointService.exportObject(ctx, scopeOf(exchange.params.repository!), oid);
      exchange.type = 'application/x-git-loose-object';
      // An object never changes under its name.
      exchange.set('Cache-Control', 'private, max-age=31536000, immutable');
    }),
  );
}
