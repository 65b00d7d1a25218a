/** File types recognised by their first bytes ("magic numbers"), with the extension a nameless upload gets. */
const SIGNATURES: readonly { type: string; extension: string; matches(head: Buffer): boolean }[] = [
  {
    type: 'image/png',
    extension: 'png',
    matches: (head) => head.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  },
  { type: 'image/jpeg', extension: 'jpg', matches: (head) => head.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff])) },
  {
    type: 'image/gif',
    extension: 'gif',
    matches: (head) => ['GIF87a', 'GIF89a'].includes(head.subarray(0, 6).toString('latin1')),
  },
  {
    type: 'image/webp',
    extension: 'webp',
    matches: (head) => head.subarray(0, 4).toString('latin1') === 'RIFF' && head.subarray(8, 12).toString('latin1') === 'WEBP',
  },
];

/** How many leading bytes sniffing needs. */
export const SNIFF_BYTES = 12;

/** The type the content shows by its signature, if it is one we know. */
export function sniffType(head: Buffer): string | undefined {
  return SIGNATURES.find((signature) => signature.matches(head))?.type;
}

/**
 * Whether content starting with `head` may be stored as `declaredType`: a
 * type with a known signature must carry it, and a type without one (say,
 * text/plain) must not hold a file that is recognisably something else.
 */
export function contentMatchesType(declaredType: string, head: Buffer): boolean {
  const known = SIGNATURES.some((signature) => signature.type === declaredType);
  return sniffType(head) === (known ? declaredType : undefined);
}

export function extensionFor(type: string): string | undefined {
  return SIGNATURES.find((signature) => signature.type === type)?.extension;
}
