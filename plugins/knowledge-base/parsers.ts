import * as v from 'valibot';
import { defineExtensionPoint, type Extensions, modulePath } from 'rpc-service/plugin';

/**
 * A parser: turns files of some types into Markdown in the worker pool.
 * Plugins contribute more to `knowledge-base.parsers`; the knowledge base
 * contributes text, Markdown, HTML and PDF itself.
 */
export interface ParserContribution {
  /** Its name, and the `docType` of what it reads: `pdf`, `docx`. */
  name: string;
  /** Media types it reads. */
  types: string[];
  /** File name endings it reads when the declared type says nothing (application/octet-stream). */
  extensions: string[];
  /** Absolute path of a worker module whose default export takes `{format, bytes, fileName}` and returns `{markdown, title}`. */
  worker: string;
}

declare module 'rpc-service/plugin' {
  interface ExtensionPoints {
    'knowledge-base.parsers': ParserContribution;
  }
}

export const parsersPoint = defineExtensionPoint({
  id: 'knowledge-base.parsers',
  describe: 'Parsers of uploaded files into Markdown for the knowledge base: {name, types, extensions, worker}.',
  contribution: v.object({
    name: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]{0,31}$/, 'a parser name is lowercase letters, digits and dashes')),
    types: v.pipe(v.array(v.pipe(v.string(), v.regex(/^[a-z]+\/[a-z0-9.+-]+$/, 'a media type such as application/pdf'))), v.minLength(1)),
    extensions: v.array(v.pipe(v.string(), v.regex(/^\.[a-z0-9]+$/, 'a file name ending such as .pdf'))),
    worker: v.pipe(
      v.string(),
      v.check((path) => path.startsWith('/'), 'an absolute path'),
    ),
  }),
});

const BUILT_IN = modulePath(import.meta.url, './parse.worker.ts');

export const builtInParsers: ParserContribution[] = [
  { name: 'text', types: ['text/plain'], extensions: ['.txt'], worker: BUILT_IN },
  { name: 'markdown', types: ['text/markdown', 'text/x-markdown'], extensions: ['.md', '.markdown'], worker: BUILT_IN },
  { name: 'html', types: ['text/html', 'application/xhtml+xml'], extensions: ['.html', '.htm'], worker: BUILT_IN },
  { name: 'pdf', types: ['application/pdf'], extensions: ['.pdf'], worker: BUILT_IN },
];

/** Built-in parsers first; a contributed parser adds types, it does not replace a built-in one. */
export const loadedParsers = (extensions: Extensions): ParserContribution[] => [
  ...builtInParsers,
  ...extensions.get('knowledge-base.parsers').map((contribution) => contribution.value),
];
