import * as v from 'valibot';
import { env, setting } from 'rpc-service/plugin';

export const workflowSettings = v.object({
  WORKFLOW_MAX_STEPS: setting(
    env.integer('WORKFLOW_MAX_STEPS', 1, 1_000_000),
    'nodes a workflow run may run in all before it is stopped (a runaway loop)',
    '1000',
  ),
  WORKFLOW_RUN_TIMEOUT_MS: setting(
    env.integer('WORKFLOW_RUN_TIMEOUT_MS', 100, 3_600_000),
    'how long a workflow run may run between two waits before it is stopped, in milliseconds',
    '60000',
  ),
  WORKFLOW_EXECUTE_WAIT_MS: setting(
    env.integer('WORKFLOW_EXECUTE_WAIT_MS', 0, 600_000),
    'how long executeWorkflow waits for the run to end before answering that it is waiting (it goes on), in milliseconds',
    '30000',
  ),
  WORKFLOW_MAX_VALUE_BYTES: setting(
    env.integer('WORKFLOW_MAX_VALUE_BYTES', 1024, 64 * 1024 * 1024),
    'largest value (as JSON, UTF-8) one expression of a run may make; a larger one fails the run',
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_VARIABLES_BYTES: setting(
    env.integer('WORKFLOW_MAX_VARIABLES_BYTES', 1024, 64 * 1024 * 1024),
    "largest size (as JSON, UTF-8) of a run's variables; a node that makes them larger fails the run",
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_OUTPUT_BYTES: setting(
    env.integer('WORKFLOW_MAX_OUTPUT_BYTES', 1024, 64 * 1024 * 1024),
    "largest size (as JSON, UTF-8) of a run's output; a larger one fails the run",
    String(1024 * 1024),
  ),
  WORKFLOW_MAX_ATTEMPTS: setting(
    env.integer('WORKFLOW_MAX_ATTEMPTS', 1, 100),
    'times a run may be started again at the same point after its thread or node was lost (out of memory, a crash) before it fails',
    '3',
  ),
  WORKFLOW_HTTP_TIMEOUT_MS: setting(
    env.integer('WORKFLOW_HTTP_TIMEOUT_MS', 100, 600_000),
    'how long an http node waits for an answer, in milliseconds',
    '30000',
  ),
});

export type WorkflowConfig = v.InferOutput<typeof workflowSettings>;
