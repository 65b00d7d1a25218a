/**
 * What the host and the interpreter's worker (interpreter.worker.ts) share,
 * kept apart so the host does not load the worker's module (and JSONata with it).
 */

/** The cells of RunTask.clock. */
export const CLOCK = { began: 0, node: 1, deadline: 2, cells: 3 } as const;

/** What one expression may take: time, nesting and the length of the sequences it builds (JSONata's guardrails). */
export const EXPRESSION_LIMITS = { timeout: 5000, stack: 500, sequence: 100_000 };
