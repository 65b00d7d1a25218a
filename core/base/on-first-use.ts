/**
 * A loader run once, on first use, its promise kept: a heavy module a
 * feature needs (an SDK, a protocol library) is imported when the feature is
 * first used, so a process that never uses it neither loads nor holds it.
 * `const loadGit = onFirstUse(() => import('isomorphic-git'));`
 */
export function onFirstUse<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => (loaded ??= load());
}
