import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chunkHash, chunkMarkdown, embeddingInput } from '../chunker.ts';

const options = { chunkSize: 200, overlap: 60, sectionSize: 600 };

describe('Markdown chunking', () => {
  it('cuts sections at headings and names each by the title and the headings above it', () => {
    const sections = chunkMarkdown(
      'Guide',
      'Intro.\n\n# Install\n\nRun it.\n\n## Linux\n\nUse apt.\n\n## Windows\n\n### Details\n\nClick next.\n\nSetext heading\n==============\n\nLast words.',
      options,
    );
    assert.deepEqual(
      sections.map((section) => [section.heading, section.text]),
      [
        ['Guide', 'Intro.'],
        ['Guide › Install', 'Run it.'],
        ['Guide › Install › Linux', 'Use apt.'],
        ['Guide › Install › Windows › Details', 'Click next.'],
        ['Guide › Setext heading', 'Last words.'],
      ],
    );
    assert.deepEqual(sections[2]!.chunks, [{ text: 'Use apt.', contentHash: chunkHash('Guide › Install › Linux', 'Use apt.') }]);
  });

  it('packs blocks into chunks of at most chunkSize, each repeating the end of the one before', () => {
    const sentences = Array.from({ length: 30 }, (_, index) => `Sentence number ${index} talks about rockets.`);
    const [section] = chunkMarkdown('Long', sentences.join(' '), { ...options, sectionSize: 5000 });
    assert.equal(section!.text, sentences.join(' '), 'the section keeps the text as written');
    const chunks = section!.chunks.map((chunk) => chunk.text);
    assert.ok(chunks.length > 3);
    for (const chunk of chunks) assert.ok(chunk.length <= options.chunkSize, `${chunk.length} characters`);
    for (let index = 1; index < chunks.length; index++) {
      const previous = chunks[index - 1]!;
      // The overlap starts at a word of the previous chunk and is at most `overlap` long.
      const shared = [...Array(options.overlap + 1).keys()].reverse().find((length) => length > 0 && chunks[index]!.startsWith(previous.slice(-length)));
      assert.ok(shared && shared <= options.overlap, `chunk ${index} starts with the end of chunk ${index - 1}`);
      assert.match(chunks[index]!, /^\S/);
    }
    // Every sentence is in some chunk whole.
    for (const sentence of sentences)
      assert.ok(
        chunks.some((chunk) => chunk.includes(sentence)),
        sentence,
      );
  });

  it('splits long code blocks and lists at lines and items, and long sections into several', () => {
    const code = '```js\n' + Array.from({ length: 40 }, (_, index) => `console.log(${index});`).join('\n') + '\n```';
    const list = Array.from({ length: 30 }, (_, index) => `- item ${index} of the list`).join('\n');
    const sections = chunkMarkdown('Code', `# Sample\n\n${code}\n\n${list}`, options);
    assert.ok(sections.length >= 2, 'a section over sectionSize becomes several');
    assert.ok(sections.every((section) => section.heading === 'Code › Sample' && section.text.length <= options.sectionSize));
    const chunks = sections.flatMap((section) => section.chunks.map((chunk) => chunk.text));
    assert.ok(chunks.every((chunk) => chunk.length <= options.chunkSize));
    assert.ok(
      chunks.some((chunk) => chunk.includes('console.log(0);\nconsole.log(1);')),
      'code lines stay together',
    );
    assert.ok(
      chunks.some((chunk) => /^- item \d+ of the list\n- item/m.test(chunk)),
      'list items stay whole',
    );
  });

  it('hashes heading and text, so a renamed heading changes the chunk; blank input gives nothing', () => {
    assert.notEqual(chunkHash('A', 'text'), chunkHash('B', 'text'));
    assert.equal(chunkHash('A', 'text'), chunkHash('A', 'text'));
    assert.equal(embeddingInput('Guide › Install', 'Run it.'), 'Guide › Install\n\nRun it.');
    assert.deepEqual(chunkMarkdown('Empty', '  \n\n ', options), []);
    const [only] = chunkMarkdown('Headings', '# One\n\n## Two', options);
    assert.equal(only!.chunks.length, 1, 'a page of headings alone is still one chunk');
  });
});
