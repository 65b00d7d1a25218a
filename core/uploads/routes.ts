import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import Router from '@koa/router';
import busboy from 'busboy';
import type { Context, Next } from 'koa';
import type { Config } from '../config.ts';
import { presentedCredentials, type Authenticator } from '../credentials/authenticator.ts';
import type { Database } from '../db/orm.ts';
import { answerDuringBody } from '../http/read-body.ts';
import type { Logger } from '../logger.ts';
import { createContext, type AuthenticatedContext } from '../rpc/context.ts';
import { errorBody } from '../rpc/dispatch.ts';
import { badRequest, RpcError, unauthenticated } from '../rpc/errors.ts';
import { tooManyFiles, type UploadBatch, type UploadService } from './upload-service.ts';

export interface UploadRouteDeps {
  config: Config;
  authenticator: Authenticator;
  uploadService: UploadService;
  db: Database;
  logger: Logger;
}

// Room for multipart boundaries and part headers around the files themselves.
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

/**
 * `PUT|POST /api/uploads/<uploadKey>` and `GET /api/files/<fileId>`. Both
 * take the same credentials as RPC calls and answer errors in the RPC
 * envelope. They live on the Koa side, off the RPC hot path.
 */
export function uploadRoutes({ config, authenticator, uploadService, db, logger }: UploadRouteDeps): Router {
  const router = new Router();
  // The largest body any upload may send: what a refused one may still be sending is drained up to a multiple of it.
  const bodyLimit = config.uploadMaxBytes + MULTIPART_OVERHEAD_BYTES;
  const contextDeps = { forkEm: (id: string | null) => db.forkEm(id), logger };

  const caller = async (ctx: Context): Promise<AuthenticatedContext> => {
    const principal = await authenticator.authenticate(presentedCredentials(ctx.req.headers));
    if (!principal) throw unauthenticated('Authentication required: send X-API-Key or a session token');
    return createContext(contextDeps, requestIdOf(ctx), principal) as AuthenticatedContext;
  };

  const envelopeErrors = async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } catch (thrown) {
      let error: RpcError;
      let errorId: string | undefined;
      if (thrown instanceof RpcError) {
        error = thrown;
        logger.info({ requestId: requestIdOf(ctx), code: error.code, route: ctx.routerPath }, error.message);
      } else {
        errorId = randomUUID();
        error = new RpcError('INTERNAL', `Internal error (error id ${errorId})`);
        logger.error({ err: thrown, errorId, requestId: requestIdOf(ctx), route: ctx.routerPath }, 'upload route failed');
      }
      const body = { success: false, data: errorBody(error, errorId) };
      if (ctx.req.complete) {
        ctx.status = error.status;
        ctx.body = body;
        return;
      }
      // The client may still be sending: answer now, and close once the rest of its body is dropped.
      ctx.respond = false;
      answerDuringBody(ctx.req, ctx.res, error.status, { 'content-type': 'application/json; charset=utf-8' }, JSON.stringify(body), bodyLimit);
    }
  };

  const answer = (ctx: Context, files: unknown): void => {
    ctx.body = { success: true, data: { files } };
  };

  router.put('/api/uploads/:uploadKey', envelopeErrors, async (ctx) => {
    const batch = await uploadService.begin(await caller(ctx), ctx.params.uploadKey!);
    refuseDeclaredOverLimit(ctx, batch.limits.maxBytes);
    // A failed check destroys the stream it reads; a pass-through keeps that from destroying the request (and the answer).
    const body = new PassThrough();
    onAbort(ctx.req, (error) => body.destroy(error));
    ctx.req.pipe(body);
    try {
      await batch.add({ content: body, mimeType: ctx.get('content-type'), fileName: headerFileName(ctx.get('x-file-name')) });
      answer(ctx, await batch.commit());
    } catch (error) {
      ctx.req.unpipe(body);
      await batch.abort();
      throw error;
    }
  });

  router.post('/api/uploads/:uploadKey', envelopeErrors, async (ctx) => {
    const batch = await uploadService.begin(await caller(ctx), ctx.params.uploadKey!);
    refuseDeclaredOverLimit(ctx, batch.limits.maxBytes * batch.remainingFiles + MULTIPART_OVERHEAD_BYTES);
    const pending: Promise<void>[] = [];
    try {
      await receiveMultipart(ctx, batch, pending);
      answer(ctx, await batch.commit());
    } catch (error) {
      await Promise.allSettled(pending);
      await batch.abort();
      throw error;
    }
  });

  router.get('/api/files/:fileId', envelopeErrors, async (ctx) => {
    const { file, content } = await uploadService.open(await caller(ctx), ctx.params.fileId!);
    ctx.set('X-Content-Type-Options', 'nosniff');
    // Even a file a browser would render (say, a future HTML upload) runs nothing when opened from here.
    ctx.set('Content-Security-Policy', "default-src 'none'; sandbox");
    ctx.set('Cache-Control', 'private');
    ctx.attachment(file.fileName, { type: file.mimeType.startsWith('image/') ? 'inline' : 'attachment' });
    ctx.set('Content-Type', file.mimeType);
    ctx.length = file.size;
    ctx.body = content;
  });

  return router;
}

const requestIdOf = (ctx: Context): string => String(ctx.response.get('x-request-id'));

/** Calls back when the client goes away before the body is complete, so nothing waits for bytes that never come. */
function onAbort(req: IncomingMessage, callback: (error: Error) => void): void {
  const aborted = () => callback(badRequest('The upload was interrupted'));
  req.once('error', aborted);
  req.once('close', () => {
    if (!req.complete) aborted();
  });
}

function refuseDeclaredOverLimit(ctx: Context, limit: number): void {
  const declared = Number(ctx.get('content-length') || -1);
  if (declared > limit) throw new RpcError('PAYLOAD_TOO_LARGE', `The upload exceeds the limit of ${limit} bytes`);
}

/** X-File-Name carries UTF-8 names percent-encoded (headers are Latin-1); a malformed escape is taken as it is. */
function headerFileName(value: string): string | undefined {
  if (value === '') return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** Feeds every file part to the batch as it streams in; settles once the whole body is read and every file stored. */
function receiveMultipart(ctx: Context, batch: UploadBatch, pending: Promise<void>[]): Promise<void> {
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: ctx.req.headers,
      defParamCharset: 'utf8',
      limits: { files: batch.remainingFiles, fields: 20, fieldSize: 4096, parts: 100 },
    });
  } catch {
    throw badRequest('Send multipart/form-data with the file in a part, or PUT the file itself');
  }
  return new Promise<void>((resolve, reject) => {
    const streaming = new Set<Readable>();
    let failed = false;
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      ctx.req.unpipe(parser);
      // A part cut off mid-way would never end: end it with the error so its storage cleans up.
      for (const stream of streaming) stream.destroy(error as Error);
      reject(error);
    };
    parser.on('file', (field, stream, info) => {
      if (failed) return void stream.resume();
      streaming.add(stream);
      stream.once('close', () => streaming.delete(stream));
      pending.push(batch.add({ content: stream, mimeType: info.mimeType, fileName: info.filename, field }).catch(fail));
    });
    parser.on('filesLimit', () => fail(tooManyFiles(batch.limits.maxFiles)));
    parser.on('error', () => fail(badRequest('The multipart body is malformed')));
    // Each pending file already reports its own failure through fail().
    parser.on('close', () => {
      void Promise.all(pending).then(() => {
        if (!failed) resolve();
      });
    });
    onAbort(ctx.req, fail);
    ctx.req.pipe(parser);
  });
}
