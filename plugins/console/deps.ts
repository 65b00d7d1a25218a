import type { Deps } from 'rpc-service/plugin';

/** The console only serves files: it needs the request pipeline for its routes and nothing else. */
export const DEPS = ['http'] as const;

export type ConsoleDeps = Deps<typeof DEPS>;
