import TurndownService from 'turndown';
import { extractText, getDocumentProxy } from 'unpdf';

/**
 * The built-in parsers, run in the worker pool: what a file or ingested text
 * says, as Markdown, so the chunker can follow its structure. `format` is
 * the parser's name: `text`, `markdown`, `html` or `pdf`.
 */

export interface ParseTask {
  format: string;
  bytes: Uint8Array;
  fileName: string | null;
}

export interface ParsedText {
  markdown: string;
  /** A title the content gives itself (an HTML <title>, a PDF's Title), if any. */
  title: string | null;
}

export default async function parse({ format, bytes, fileName }: ParseTask): Promise<ParsedText> {
  switch (format) {
    case 'text':
    case 'markdown':
      return { markdown: decode(bytes), title: null };
    case 'html':
      return html(decode(bytes));
    case 'pdf':
      return pdf(bytes, fileName);
    default:
      throw new Error(`No built-in parser for ${format}`);
  }
}

/** UTF-8 (a byte order mark dropped); invalid bytes become U+FFFD rather than failing the document. */
const decode = (bytes: Uint8Array): string => new TextDecoder('utf-8').decode(bytes);

function html(source: string): ParsedText {
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  // What a browser would not show is not part of the text.
  turndown.remove(['script', 'style', 'noscript', 'template', 'head', 'title']);
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(source)?.[1]?.trim() || null;
  return { markdown: turndown.turndown(source).trim(), title };
}

/** The text of each page under a `## Page n` heading, so a hit says where it was found. */
async function pdf(bytes: Uint8Array, fileName: string | null): Promise<ParsedText> {
  let document;
  try {
    document = await getDocumentProxy(bytes, { verbosity: 0 });
  } catch (error) {
    throw new Error(`${fileName ?? 'The file'} is not a readable PDF: ${(error as Error).message}`, { cause: error });
  }
  try {
    const { text } = await extractText(document, { mergePages: false });
    const pages = (text as string[]).map((page, index) => `## Page ${index + 1}\n\n${page.trim()}`);
    if ((text as string[]).every((page) => !page.trim())) throw new Error(`${fileName ?? 'The PDF'} holds no text (a scan needs OCR, which is not done here)`);
    const info = (await document.getMetadata().catch(() => null))?.info as { Title?: unknown } | undefined;
    return { markdown: pages.join('\n\n'), title: typeof info?.Title === 'string' && info.Title.trim() ? info.Title.trim() : null };
  } finally {
    await document.destroy();
  }
}
