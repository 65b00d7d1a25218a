import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourcePath, type RouteContext, type Router, type RpcError } from 'rpc-service/plugin';
import type { ConsoleDeps } from './deps.ts';

const PUBLIC = sourcePath(import.meta.url, './public/');

/** The types of the files `public/` holds; a file of another type is not served. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * Every console answer, files and refusals alike: scripts and styles only from
 * this origin (no inline script or style, no `eval`), no framing, no sniffing,
 * no referrer beyond the origin.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

interface StaticFile {
  type: string;
  body: Buffer;
  etag: string;
}

/**
 * Modules of the project's dependencies the page imports, by their key under
 * /console/: the QR code encoder (`uqr`, one ES module importing nothing)
 * draws an authenticator app's code without any other origin.
 */
const VENDOR: Record<string, string> = {
  'vendor/qr.js': fileURLToPath(import.meta.resolve('uqr')),
};

const staticFile = (type: string, body: Buffer): StaticFile => ({
  type,
  body,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

/**
 * The files of `public/` and VENDOR, read once at start and keyed by their
 * path under /console/: a request names a key of this map or gets 404, so no
 * request path ever reaches the file system.
 */
function loadFiles(): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  for (const name of readdirSync(PUBLIC, { recursive: true }) as string[]) {
    const type = TYPES[path.extname(name)];
    if (!type) continue;
    files.set(name.split(path.sep).join('/'), staticFile(type, readFileSync(path.join(PUBLIC, name))));
  }
  for (const [key, file] of Object.entries(VENDOR)) files.set(key, staticFile(TYPES['.js']!, readFileSync(file)));
  return files;
}

const secure = (http: RouteContext) => {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) http.set(name, value);
};

const notFoundPage = (http: RouteContext) => {
  secure(http);
  http.status = 404;
  http.type = 'text/plain; charset=utf-8';
  http.body = 'Not found';
};

/** A refusal of the pipeline (a rate limit, say) as plain text under the console's headers. */
const answerError = (http: RouteContext, error: RpcError, errorId?: string) => {
  secure(http);
  http.status = error.status;
  http.type = 'text/plain; charset=utf-8';
  http.body = errorId ? `Something went wrong (error id ${errorId})` : error.message;
};

/** The key of a request path below /console/, or null when it cannot name a file (bad escapes, dot segments, backslashes). */
function fileKeyOf(requestPath: string): string | null {
  let key: string;
  try {
    key = decodeURIComponent(requestPath.slice('/console/'.length));
  } catch {
    return null;
  }
  return key.split('/').some((segment) => segment === '' || segment === '.' || segment === '..') || key.includes('\\') ? null : key;
}

/**
 * GET /console answers the page (the browser's routes are in its hash, so one
 * page serves them all); GET /console/<file> a file of `public/`. Files are
 * revalidated on each load (no-cache with an ETag): their names carry no
 * version, and a 304 costs one round trip.
 */
export function consoleRoutes(router: Router, { http }: ConsoleDeps): void {
  const files = loadFiles();
  const serve = (exchange: RouteContext, key: string | null) => {
    const file = key === null ? undefined : files.get(key);
    if (!file) return notFoundPage(exchange);
    secure(exchange);
    exchange.set('Cache-Control', 'no-cache');
    exchange.set('ETag', file.etag);
    if (exchange.get('If-None-Match') === file.etag) {
      exchange.status = 304;
      return;
    }
    exchange.type = file.type;
    exchange.body = file.body;
  };
  // The console's pages are the service's own files, the same for everyone: no scope narrows them, and they change nothing.
  const route = { access: 'public', serves: null, kind: 'read', answerError } as const;
  router.get(
    '/console',
    http.route(route, ({ http: exchange }) => serve(exchange, 'index.html')),
  );
  router.get(
    '/console/*rest',
    http.route(route, ({ http: exchange }) => serve(exchange, fileKeyOf(exchange.path))),
  );
}
