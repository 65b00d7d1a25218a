import type { EntityManager, Knex } from '@mikro-orm/postgresql';

/**
 * Runs `run` once the transaction `em` is in commits, or at once outside
 * one; never when it rolls back. A nested transaction is a savepoint, so
 * what counts is its outermost one: MikroORM links each nested transaction
 * to its parent under a symbol of its own (`parentTransaction`), which is
 * followed here.
 */
export function afterCommit(em: EntityManager, run: () => void): void {
  let transaction = em.getTransactionContext<Knex.Transaction>();
  if (!transaction) return run();
  for (;;) {
    const parent: symbol | undefined = Object.getOwnPropertySymbols(transaction).find((symbol) => symbol.description === 'parentTransaction');
    if (!parent) break;
    transaction = (transaction as unknown as Record<symbol, Knex.Transaction>)[parent]!;
  }
  transaction.executionPromise.then(run, () => undefined);
}
