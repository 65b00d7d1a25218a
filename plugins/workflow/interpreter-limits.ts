/**
 * What the host and the interpreter's worker (interpreter.worker.ts) share,
 * kept apart so the host does not load the worker's module (and JSONata with
 * it), nor the worker the host's (the service's SDK, which a new thread would
 * take seconds to load on a loaded machine).
 */

/** The cells of RunTask.clock. */
export const CLOCK = { began: 0, node: 1, deadline: 2, cells: 3 } as const;

/** What one expression may take: time, nesting and the length of the sequences it builds (JSONata's guardrails). */
export const EXPRESSION_LIMITS = { timeout: 5000, stack: 500, sequence: 100_000 };

/** The expressions of a template's `{{ expression }}` parts, in order. */
export const templateParts = (text: string): string[] => [...text.matchAll(/\{\{(.*?)\}\}/gs)].map((match) => match[1]!.trim());
