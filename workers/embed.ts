/**
 * The local lexical embedder: a text becomes a fixed-size vector of hashed
 * features (its words, pairs of neighbouring words, and the character
 * trigrams of each word), weighted by how often they occur, L2-normalised.
 * Texts sharing words and word parts come out close under cosine distance;
 * synonyms do not. It is deterministic, needs no model files, and is honest
 * about being lexical: a real embedding model is one catalogue entry away.
 */

export interface EmbedTask {
  texts: string[];
  dimensions: number;
}

export interface EmbedResult {
  /** The vectors one after another, `dimensions` numbers each: one typed array crosses to the main thread as a single copy. */
  vectors: Float32Array;
  /** Words read, the local stand-in for input tokens. */
  tokens: number;
}

const WORD = /[\p{L}\p{N}]+/gu;
const WEIGHTS = { word: 1, pair: 0.6, trigram: 0.35 } as const;

/** FNV-1a, 32 bits: the feature's bucket comes from its low bits, its sign from the top one. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function add(counts: Map<string, number>, feature: string, weight: number): void {
  counts.set(feature, (counts.get(feature) ?? 0) + weight);
}

/** Writes the vector of `text` into `into` (zeroed, `dimensions` long); returns the words read. */
export function embedText(text: string, into: Float32Array): number {
  const dimensions = into.length;
  const normalized = text.normalize('NFKC').toLowerCase();
  // A text of signs only still gets a direction of its own (a zero vector has no cosine).
  const words = normalized.match(WORD) ?? [normalized.trim() || normalized];
  const features = new Map<string, number>();
  for (const [index, word] of words.entries()) {
    add(features, `w:${word}`, WEIGHTS.word);
    if (index > 0) add(features, `p:${words[index - 1]} ${word}`, WEIGHTS.pair);
    const marked = `#${word}#`;
    for (let start = 0; start + 3 <= marked.length; start++) add(features, `t:${marked.slice(start, start + 3)}`, WEIGHTS.trigram);
  }
  const vector = new Float64Array(dimensions);
  for (const [feature, weight] of features) {
    const hash = fnv1a(feature);
    // Sub-linear in repetition, so one word said ten times does not drown the rest.
    vector[hash % dimensions]! += (hash & 0x80000000 ? -1 : 1) * Math.log1p(weight);
  }
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  for (let index = 0; index < dimensions; index++) into[index] = norm === 0 ? 0 : vector[index]! / norm;
  return words.length;
}

/** The worker's task: a batch of texts in, their vectors out. */
export default function embed({ texts, dimensions }: EmbedTask): EmbedResult {
  const vectors = new Float32Array(texts.length * dimensions);
  let tokens = 0;
  for (const [index, text] of texts.entries()) tokens += embedText(text, vectors.subarray(index * dimensions, (index + 1) * dimensions));
  return { vectors, tokens };
}

/** The rows of an EmbedResult's vectors, as plain arrays. */
export function vectorsOf(flat: Float32Array, dimensions: number): number[][] {
  return Array.from({ length: flat.length / dimensions }, (_, index) => Array.from(flat.subarray(index * dimensions, (index + 1) * dimensions)));
}
