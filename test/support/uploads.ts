import { crc32, deflateSync } from 'node:zlib';
import type { UploadedFile } from '../../clients/typescript/src/client.ts';
import type { CallOptions, TestApp } from './harness.ts';
import type { Envelope } from './wire.ts';

/** A valid PNG of `width` × 1 pixels of one colour, built byte by byte (signature, IHDR, IDAT, IEND). */
export function tinyPng(width = 1, rgba: [number, number, number, number] = [200, 30, 30, 255]): Buffer {
  const chunk = (type: string, data: Buffer): Buffer => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(1, 4);
  header.set([8, 6, 0, 0, 0], 8); // 8 bits per channel, RGBA, deflate, no filter, no interlace
  const row = Buffer.concat([Buffer.from([0]), ...Array.from({ length: width }, () => Buffer.from(rgba))]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(row)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const credentialHeaders = (options: CallOptions = {}): Record<string, string> => ({
  ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}),
  ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
  ...options.headers,
});

/** What an upload answers in the spec's envelope: the files it stored, or a refusal. */
export type UploadBody = Envelope<{ files: UploadedFile[] }>;

export interface HttpAnswer {
  status: number;
  headers: Headers;
  /** Read through dataOf() or refusalOf() (wire.ts), which tell a success from a refusal. */
  body: UploadBody;
}

const answerOf = async (response: Response): Promise<HttpAnswer> => ({
  status: response.status,
  headers: response.headers,
  body: (await response.json()) as UploadBody,
});

/** `PUT /api/uploads/<key>` with the raw bytes. */
export async function putUpload(
  t: TestApp,
  uploadKey: string,
  bytes: Buffer,
  type: string,
  options: CallOptions & { fileName?: string } = {},
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { 'content-type': type, ...credentialHeaders(options) };
  if (options.fileName !== undefined) headers['x-file-name'] = encodeURIComponent(options.fileName);
  return answerOf(await fetch(`${t.url}/api/uploads/${uploadKey}`, { method: 'PUT', headers, body: new Uint8Array(bytes) }));
}

/** Multipart `POST /api/uploads/<key>`, one part per file. */
export async function postUpload(
  t: TestApp,
  uploadKey: string,
  files: { bytes: Buffer; type: string; name: string; field?: string }[],
  options: CallOptions = {},
): Promise<HttpAnswer> {
  const form = new FormData();
  for (const file of files) form.append(file.field ?? 'file', new Blob([new Uint8Array(file.bytes)], { type: file.type }), file.name);
  return answerOf(await fetch(`${t.url}/api/uploads/${uploadKey}`, { method: 'POST', headers: credentialHeaders(options), body: form }));
}

/** `GET` of a file path such as `/api/files/<id>`: status, headers and the raw bytes. */
export async function getFile(t: TestApp, filePath: string, options: CallOptions = {}) {
  const response = await fetch(`${t.url}${filePath}`, { headers: credentialHeaders(options) });
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
}
