import type * as v from 'valibot';
import { env, setting, settings } from 'rpc-service/plugin';

export const workflowSettings = settings({
  WORKFLOW_MAX_STEPS: setting(env.integer(1, 1_000_000), 'nodes a workflow run may run in all before it is stopped (a runaway loop)', '1000'),
  WORKFLOW_RUN_TIMEOUT_MS: setting(
    env.integer(100, 3_600_000),
    'how long a workflow run may run between two waits before it is stopped, in milliseconds',
    '60000',
  ),
  WORKFLOW_EXECUTE_WAIT_MS: setting(
    env.integer(0, 600_000),
    'how long executeWorkflow waits for the run to end before answering that it is waiting (it goes on), in milliseconds',
    '30000',
  ),
  WORKFLOW_MAX_VALUE_BYTES: setting(
    env.integer(1024, 64 * 1024 * 1024),
    'largest value (as JSON, UTF-8) one expression of a run may make; a larger one fails the run',
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_VARIABLES_BYTES: setting(
    env.integer(1024, 64 * 1024 * 1024),
    "largest size (as JSON, UTF-8) of a run's variables; a node that makes them larger fails the run",
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_OUTPUT_BYTES: setting(
    env.integer(1024, 64 * 1024 * 1024),
    "largest size (as JSON, UTF-8) of a run's output; a larger one fails the run",
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_ATTEMPTS: setting(
    env.integer(1, 100),
    'times a run may be started again at the same point after its thread or node was lost (out of memory, a crash) before it fails',
    '3',
  ),
  WORKFLOW_RUNNING_PER_SUBSCRIPTION: setting(
    env.integer(1, 1000),
    "parts of one subscription's workflow runs that hold a thread at once, on each node (never all the pool's threads for runs: one is left to the others)",
    '4',
  ),
  WORKFLOW_RUNNING_PER_USER: setting(env.integer(1, 1000), "parts of one user's workflow runs that hold a thread at once, on each node", '2'),
  WORKFLOW_QUEUED_PER_SUBSCRIPTION: setting(
    env.integer(0, 100_000),
    'runs of one subscription that may wait for a thread, on each node; executeWorkflow past it is refused (RATE_LIMITED)',
    '100',
  ),
  WORKFLOW_QUEUED_PER_USER: setting(
    env.integer(0, 100_000),
    'runs of one user that may wait for a thread, on each node; executeWorkflow past it is refused (RATE_LIMITED)',
    '20',
  ),
  WORKFLOW_HTTP_TIMEOUT_MS: setting(env.integer(100, 600_000), 'how long an http node waits for an answer, in milliseconds', '30000'),
});

export type WorkflowConfig = v.InferOutput<typeof workflowSettings>;
