/**
 * Deterministic made-up text for the benchmarks: sentences of 8 to 20 words
 * from a vocabulary of 5,000 made-up words, a few common and most rare (as
 * in real text), so texts differ as real ones do and a word search matches
 * some of them, not all. A small linear congruential generator keeps runs
 * comparable.
 */
const SYLLABLES = 'ka lo mi ne ru sa te vo bi du fe go hi ja ke la mo ni pa qu re si to ul va we xi yo za an'.split(' ');
const VOCABULARY = 5000;

const WORDS = Array.from({ length: VOCABULARY }, (_, index) => {
  let word = '';
  for (let rest = index + SYLLABLES.length; rest > 0; rest = Math.floor(rest / SYLLABLES.length)) word += SYLLABLES[rest % SYLLABLES.length];
  return word;
});

/** A source of words and sentences from `seed`. */
export function madeUpText(seed: number): { word(): string; sentence(): string } {
  let state = seed;
  // Math.imul keeps the product exact: in doubles it lost its low bits and the sequence fell into short cycles (repeated pages).
  const next = () => (state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff) / 2 ** 31;
  const word = () => WORDS[Math.floor(VOCABULARY * next() ** 2)]!;
  return { word, sentence: () => Array.from({ length: 8 + Math.floor(next() * 13) }, word).join(' ') };
}

export const sentences = (count: number, seed: number): string[] => {
  const text = madeUpText(seed);
  return Array.from({ length: count }, text.sentence);
};
