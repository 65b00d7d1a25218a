import { createHash } from 'node:crypto';
import { Lexer, type Token, type Tokens } from 'marked';

/**
 * Markdown split by its structure, for retrieval with context: a section is
 * the text under one heading (up to the next heading), named by the path of
 * headings above it; its chunks are small, overlapping runs of its blocks
 * (paragraphs, list items, code, table rows) that are matched against a
 * question, while the section is what a hit returns as context. Runs in the
 * worker pool (the default export) and in tests directly.
 */

export interface ChunkOptions {
  /** Characters a chunk holds at most (a single longer word is cut). */
  chunkSize: number;
  /** Characters of the previous chunk's end repeated at the start of the next, so no passage is cut in two. */
  overlap: number;
  /** Characters a section holds at most; a longer one becomes several sections with the same heading. */
  sectionSize: number;
}

export interface ChunkedSection {
  /** The title and the headings above the text: `Guide › Install › Linux`. */
  heading: string;
  text: string;
  chunks: { text: string; contentHash: string }[];
}

export interface ChunkTask {
  documents: { title: string; markdown: string }[];
  options: ChunkOptions;
}

export const PATH_SEPARATOR = ' › ';

/** The hash that decides whether a chunk changed: its text and the headings it is embedded with. */
export const chunkHash = (heading: string, text: string): string => createHash('sha256').update(heading).update('\n').update(text).digest('hex');

/** What the embedding model reads for a chunk: where it sits, then what it says. */
export const embeddingInput = (heading: string, text: string): string => (heading ? `${heading}\n\n${text}` : text);

export default function chunkDocuments({ documents, options }: ChunkTask): ChunkedSection[][] {
  return documents.map(({ title, markdown }) => chunkMarkdown(title, markdown, options));
}

/** A piece of a section, and what joins it to the piece before: a blank line between blocks, a space or newline inside one. */
interface Block {
  text: string;
  glue: string;
}

export function chunkMarkdown(title: string, markdown: string, options: ChunkOptions): ChunkedSection[] {
  const sections: { heading: string; blocks: Block[] }[] = [];
  const headings: string[] = [];
  let current: { heading: string; blocks: Block[] } = { heading: pathOf(title, headings), blocks: [] };
  for (const token of new Lexer().lex(markdown.replace(/\r\n?/g, '\n'))) {
    if (token.type === 'space') continue;
    if (token.type === 'heading') {
      if (current.blocks.length > 0) sections.push(current);
      const { depth, text } = token as Tokens.Heading;
      headings.length = depth - 1;
      headings[depth - 1] = text.trim();
      current = { heading: pathOf(title, headings), blocks: [] };
      continue;
    }
    // Pieces of a long block leave room for the overlap carried into their chunk.
    current.blocks.push(...blocksOf(token, Math.max(1, options.chunkSize - options.overlap)));
  }
  if (current.blocks.length > 0) sections.push(current);
  // Headings alone still say something; a page of only headings is one section of them.
  if (sections.length === 0 && markdown.trim()) sections.push({ heading: title.trim(), blocks: glued(piecesOf(markdown.trim(), options.chunkSize), ' ') });

  return sections.flatMap(({ heading, blocks }) =>
    groups(blocks, options.sectionSize).map((group) => ({
      heading,
      text: joined(group),
      chunks: pack(group, options).map((text) => ({ text, contentHash: chunkHash(heading, text) })),
    })),
  );
}

const pathOf = (title: string, headings: string[]): string => [title.trim(), ...headings].filter(Boolean).join(PATH_SEPARATOR);

const glued = (pieces: string[], glue: string): Block[] => pieces.map((text, index) => ({ text, glue: index === 0 ? '\n\n' : glue }));
const joined = (blocks: Block[]): string => blocks.map((block, index) => (index === 0 ? block.text : block.glue + block.text)).join('');

/** A token as blocks no longer than `size`, split where its structure allows: list items, table rows, code lines, sentences. */
function blocksOf(token: Token, size: number): Block[] {
  const raw = token.raw.trim();
  if (!raw) return [];
  if (raw.length <= size) return glued([raw], '');
  switch (token.type) {
    case 'list':
      return glued(
        (token as Tokens.List).items.flatMap((item) => piecesOf(item.raw.trim(), size)),
        '\n',
      );
    case 'code':
    case 'table':
      return glued(linesOf(raw, size), '\n');
    default:
      return glued(piecesOf(raw, size), ' ');
  }
}

/** Lines packed up to `size`; a longer line is cut as prose. */
function linesOf(text: string, size: number): string[] {
  return packPieces(
    text.split('\n').flatMap((line) => (line.length > size ? piecesOf(line, size) : [line])),
    size,
    '\n',
  );
}

/** Prose up to `size`: whole sentences where they fit, else words, else characters. */
function piecesOf(text: string, size: number): string[] {
  if (text.length <= size) return [text];
  const sentences = text.split(/(?<=[.!?;:])\s+/u);
  const fine = sentences.flatMap((sentence) => {
    if (sentence.length <= size) return [sentence];
    const words = sentence.split(/\s+/u).flatMap((word) => (word.length > size ? (word.match(new RegExp(`[^]{1,${size}}`, 'gu')) ?? []) : [word]));
    return packPieces(words, size, ' ');
  });
  return packPieces(fine, size, ' ');
}

function packPieces(pieces: string[], size: number, separator: string): string[] {
  const packed: string[] = [];
  let run = '';
  for (const piece of pieces) {
    if (run && run.length + separator.length + piece.length > size) {
      packed.push(run);
      run = piece;
    } else run = run ? run + separator + piece : piece;
  }
  if (run) packed.push(run);
  return packed;
}

/** Consecutive blocks up to `size` characters together (a block is never split here). */
function groups(blocks: Block[], size: number): Block[][] {
  const result: Block[][] = [];
  let group: Block[] = [];
  let length = 0;
  for (const block of blocks) {
    if (group.length > 0 && length + block.glue.length + block.text.length > size) {
      result.push(group);
      group = [];
      length = 0;
    }
    length += (group.length > 0 ? block.glue.length : 0) + block.text.length;
    group.push(block);
  }
  if (group.length > 0) result.push(group);
  return result;
}

/** Blocks packed into chunks; each chunk after the first begins with the end of the one before it. */
function pack(blocks: Block[], { chunkSize, overlap }: ChunkOptions): string[] {
  const chunks: string[] = [];
  let run = '';
  for (const { text, glue } of blocks) {
    if (run && run.length + glue.length + text.length > chunkSize) {
      chunks.push(run);
      const carried = tail(run, Math.min(overlap, chunkSize - text.length - glue.length));
      run = carried ? carried + glue + text : text;
    } else run = run ? run + glue + text : text;
  }
  if (run) chunks.push(run);
  return chunks;
}

/** The end of `text`, at most `length` characters, starting at a sentence where one starts in it, else at a word. */
function tail(text: string, length: number): string {
  if (length <= 0) return '';
  if (text.length <= length) return text;
  const end = text.slice(text.length - length);
  const sentence = end.search(/(?<=[.!?;:]\s+)\S/u);
  const start = sentence >= 0 ? sentence : end.search(/(?<=\s)\S/u);
  return start < 0 ? '' : end.slice(start).trim();
}
