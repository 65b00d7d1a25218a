import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import Router from '@koa/router';
import busboy from 'busboy';
import type { Context } from 'koa';
import type { Config } from '../base/config.ts';
import { pipelineRoute, type RouteHandler, type RouteOptions } from './route.ts';
import type { Logger } from '../base/logger.ts';
import { badRequest, RpcError } from '../base/errors.ts';
import type { Access } from '../rpc/operation.ts';
import type { RequestPipeline } from '../rpc/pipeline.ts';
import { tooManyFiles, type UploadBatch, type UploadService } from '../uploads/upload-service.ts';

export interface UploadRouteDeps {
  config: Config;
  pipeline: RequestPipeline;
  uploadService: UploadService;
  logger: Logger;
}

const BY_PURPOSE = { perRequest: "the group of the plugin that declared the upload key's or file's purpose" } as const;

// Room for multipart boundaries and part headers around the files themselves.
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

/**
 * `PUT|POST /api/uploads/<uploadKey>` and `GET /api/files/<fileId>`, through
 * the request pipeline: the same credentials as RPC calls, errors in the RPC
 * envelope with the same codes. They live on the Koa side, off the RPC hot path.
 * An upload or a file serves the group of the plugin that declared its
 * purpose, found per request: the caller is admitted to that group before a
 * byte is read or sent.
 */
export function uploadRoutes({ config, pipeline, uploadService, logger }: UploadRouteDeps): Router {
  const router = new Router();
  const route = <A extends Access>(options: RouteOptions<A>, handler: RouteHandler<A>) => pipelineRoute({ pipeline, logger }, options, handler);
  // The largest body any upload may send: what a refused one may still be sending is drained up to a multiple of it.
  const upload = { access: 'user', serves: BY_PURPOSE, kind: 'write', drainLimitBytes: config.uploadMaxBytes + MULTIPART_OVERHEAD_BYTES } as const;

  const answer = (http: Context, files: unknown): void => {
    http.body = { success: true, data: { files } };
  };

  router.put(
    '/api/uploads/:uploadKey',
    route(upload, async ({ ctx, http, admit }) => {
      const batch = await uploadService.begin(ctx, http.params.uploadKey!, admit);
      refuseDeclaredOverLimit(http, batch.limits.maxBytes);
      // A failed check destroys the stream it reads; a pass-through keeps that from destroying the request (and the answer).
      const body = new PassThrough();
      onAbort(http.req, (error) => body.destroy(error));
      http.req.pipe(body);
      try {
        await batch.add({ content: body, mimeType: http.get('content-type'), fileName: headerFileName(http.get('x-file-name')) });
        answer(http, await batch.commit());
      } catch (error) {
        http.req.unpipe(body);
        await batch.abort();
        throw error;
      }
    }),
  );

  router.post(
    '/api/uploads/:uploadKey',
    route(upload, async ({ ctx, http, admit }) => {
      const batch = await uploadService.begin(ctx, http.params.uploadKey!, admit);
      refuseDeclaredOverLimit(http, batch.limits.maxBytes * batch.remainingFiles + MULTIPART_OVERHEAD_BYTES);
      const pending: Promise<void>[] = [];
      try {
        await receiveMultipart(http, batch, pending);
        answer(http, await batch.commit());
      } catch (error) {
        await Promise.allSettled(pending);
        await batch.abort();
        throw error;
      }
    }),
  );

  router.get(
    '/api/files/:fileId',
    route({ access: 'user', serves: BY_PURPOSE, kind: 'read' }, async ({ ctx, http, admit }) => {
      const { file, content } = await uploadService.open(ctx, http.params.fileId!, admit);
      http.set('X-Content-Type-Options', 'nosniff');
      // Even a file a browser would render (say, a future HTML upload) runs nothing when opened from here.
      http.set('Content-Security-Policy', "default-src 'none'; sandbox");
      http.set('Cache-Control', 'private');
      http.attachment(file.fileName, { type: file.mimeType.startsWith('image/') ? 'inline' : 'attachment' });
      http.set('Content-Type', file.mimeType);
      http.length = file.size;
      http.body = content;
    }),
  );

  return router;
}

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
