export { createClient, type Client, type UploadedFile, type UploadFile } from './client.ts';
export type { CallOptions, ClientOptions } from './options.ts';
export { RpcError, type ClientErrorCode, type Issue } from './errors.ts';
export { EventStream, type EventMessage, type EventStreamOptions, type StreamReady } from './events.ts';
export * from './operations.ts';
