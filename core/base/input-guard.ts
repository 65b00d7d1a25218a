import type { ValidationIssue } from './errors.ts';

/**
 * Nesting deeper than this is refused: no operation needs it, and every later
 * step (schemas, filter translation, JSON columns) recurses over the params.
 */
export const MAX_DEPTH = 64;
/** A body full of bad strings gets a few issues, not one per string. */
const MAX_ISSUES = 10;
/** Half of a UTF-16 surrogate pair without the other half: no UTF-8 text holds it, and PostgreSQL's JSON refuses its escape. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * What no params may carry, whatever the operation: a NUL character in a
 * string or key (PostgreSQL refuses it in text and JSON), a lone surrogate
 * (ill-formed Unicode) and nesting past MAX_DEPTH. One walk, in which paths are only spelled out for an issue.
 */
export function unsafeInputIssues(params: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  walk(params, [], issues);
  return issues;
}

function walk(value: unknown, trail: (string | number)[], issues: ValidationIssue[]): void {
  if (typeof value === 'string') {
    if (value.includes('\0')) issues.push({ path: pathOf(trail), message: 'must not contain a NUL character (\\u0000)' });
    else if (LONE_SURROGATE.test(value)) issues.push({ path: pathOf(trail), message: 'must be well-formed Unicode (it holds half of a surrogate pair)' });
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  if (trail.length === MAX_DEPTH) {
    issues.push({ path: pathOf(trail), message: `must not nest deeper than ${MAX_DEPTH} levels` });
    return;
  }
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length && issues.length < MAX_ISSUES; index++) {
      trail.push(index);
      walk(value[index], trail, issues);
      trail.pop();
    }
    return;
  }
  for (const key of Object.keys(value)) {
    if (issues.length >= MAX_ISSUES) return;
    trail.push(key);
    if (key.includes('\0')) issues.push({ path: pathOf(trail), message: 'a key must not contain a NUL character (\\u0000)' });
    else if (LONE_SURROGATE.test(key)) issues.push({ path: pathOf(trail), message: 'a key must be well-formed Unicode (it holds half of a surrogate pair)' });
    else walk((value as Record<string, unknown>)[key], trail, issues);
    trail.pop();
  }
}

/** Spelled like valibot's issue paths; a NUL in a key is shown escaped. */
const pathOf = (trail: readonly (string | number)[]): string => trail.join('.').replaceAll('\0', '\\u0000');
