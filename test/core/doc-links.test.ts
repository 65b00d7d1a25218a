import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Lexer, marked, type Token, type Tokens } from 'marked';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What a reader follows from the front door: README.md, every document under docs/, and the READMEs of the core, each plugin and each client. */
function documents(): string[] {
  const docs = (readdirSync(path.join(ROOT, 'docs'), { recursive: true }) as string[])
    .filter((file) => file.endsWith('.md'))
    .map((file) => path.join('docs', file));
  const readmes = (folder: string): string[] =>
    readdirSync(path.join(ROOT, folder), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(path.join(ROOT, folder, entry.name, 'README.md')))
      .map((entry) => path.join(folder, entry.name, 'README.md'));
  return ['README.md', ...docs, 'core/README.md', ...readmes('plugins'), ...readmes('clients')];
}

/** A heading's text as GitHub reads it for its anchor: code spans as their text, HTML tags dropped. */
function plainText(tokens: Token[]): string {
  return tokens
    .map((token) => ('tokens' in token && token.tokens ? plainText(token.tokens) : token.type === 'html' ? '' : 'text' in token ? token.text : ''))
    .join('');
}

/** Every token of a document, those nested in lists and tables too (marked's walk: its results are this callback's, none a promise). */
function tokensOf(source: string): Token[] {
  const tokens: Token[] = [];
  void marked.walkTokens(Lexer.lex(source), (token) => {
    tokens.push(token);
  });
  return tokens;
}

/** The anchors GitHub gives a document's headings: lower case, punctuation and symbols dropped, spaces as hyphens, a repeated one numbered. */
function anchorsOf(source: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const token of tokensOf(source)) {
    if (token.type !== 'heading') continue;
    const slug = plainText((token as Tokens.Heading).tokens)
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Each relative link or image of a document (given by its path from the root) that leads nowhere: a missing file, or a missing heading of a Markdown file. */
function brokenLinks(file: string, source: string): string[] {
  return tokensOf(source)
    .filter((token) => token.type === 'link' || token.type === 'image')
    .map((token) => (token as Tokens.Link | Tokens.Image).href)
    .filter((href) => !/^(https?:|mailto:)/i.test(href))
    .flatMap((href) => {
      const [target = '', anchor] = href.split('#', 2);
      const noHeading = (markdown: string): boolean => anchor !== undefined && !anchorsOf(markdown).has(decodeURIComponent(anchor));
      if (target === '') return noHeading(source) ? [`${file}: ${href} (no such heading)`] : [];
      const resolved = path.resolve(ROOT, target.startsWith('/') ? '.' : path.dirname(file), decodeURI(target).replace(/^\//, ''));
      if (!resolved.startsWith(ROOT) || !existsSync(resolved)) return [`${file}: ${href} (no such file)`];
      return resolved.endsWith('.md') && noHeading(readFileSync(resolved, 'utf8')) ? [`${file}: ${href} (no such heading)`] : [];
    });
}

describe('the documents', () => {
  it('link only to files and headings that exist', () => {
    const files = documents();
    assert.ok(
      files.includes(path.join('docs', 'decisions', 'README.md')) && files.includes(path.join('plugins', 'auth', 'README.md')),
      'docs/ and the plugins are read',
    );
    assert.deepEqual(
      files.flatMap((file) => brokenLinks(file, readFileSync(path.join(ROOT, file), 'utf8'))),
      [],
    );
  });

  it('name a link to a missing file or heading, and pass one that exists', () => {
    const source = [
      'See [the settings](settings.md), [the command line](operations.md#the-command-line) and [a decision](./decisions/README.md).',
      '',
      '| where | link |',
      '|---|---|',
      '| table | [gone](nowhere.md) |',
      '',
      '- [no heading](operations.md#nowhere) and [here](#a-heading-here) and [not here](#elsewhere)',
      '',
      '## A heading, here',
      '',
      '[web](https://example.com/none.md) [mail](mailto:a@example.com)',
    ].join('\n');
    assert.deepEqual(brokenLinks(path.join('docs', 'example.md'), source), [
      'docs/example.md: nowhere.md (no such file)',
      'docs/example.md: operations.md#nowhere (no such heading)',
      'docs/example.md: #elsewhere (no such heading)',
    ]);
  });

  it('anchor headings as GitHub does', () => {
    const anchors = anchorsOf("# `jobs list`, `jobs retry`: the job queue\n\n## Who reads /metrics\n\n## Tests\n\n## Tests\n\n## The knowledge base's index\n");
    assert.deepEqual([...anchors], ['jobs-list-jobs-retry-the-job-queue', 'who-reads-metrics', 'tests', 'tests-1', 'the-knowledge-bases-index']);
  });

  it('have a README of at most 200 lines as the front door', () => {
    const lines = readFileSync(path.join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    assert.ok(lines <= 200, `README.md has ${lines} lines`);
  });
});
