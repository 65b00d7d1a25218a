import * as v from 'valibot';
import { recordId } from 'rpc-service/plugin';
import { defineOperation } from './deps.ts';
import { PROCESS_STATUSES } from './instance.entity.ts';
import { STATUS } from './process-executor.ts';

const instanceId = { instanceId: recordId('instanceId') };

export const startProcess = defineOperation({
  access: 'admin',
  kind: 'write',
  describe:
    'Start a command of the allow-list (PROCESS_ALLOWED_COMMANDS) with args, without a shell, in a working folder of its own; answers {instanceId, status, pid}.',
  result: v.strictObject({ instanceId: v.string(), status: v.picklist(PROCESS_STATUSES), pid: v.nullable(v.number()) }),
  params: v.object({
    command: v.pipe(v.string('command must be a string'), v.minLength(1, 'command must not be empty'), v.maxLength(1000)),
    args: v.optional(
      v.pipe(v.array(v.pipe(v.string('args must be strings'), v.maxLength(10_000)), 'args must be an array of strings'), v.maxLength(100, 'at most 100 args')),
      [],
    ),
  }),
  handler: ({ params, ctx, deps }) => deps.processExecutor.startProcess(ctx, params.command, params.args),
});

export const stopProcess = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Stop a process: SIGTERM, then SIGKILL after PROCESS_STOP_GRACE_MS; answers {message} once it has ended.',
  result: v.strictObject({ message: v.string() }),
  params: v.object(instanceId),
  handler: ({ params, ctx, deps }) => deps.processExecutor.stopProcess(ctx, params.instanceId),
});

export const getProcessStatus = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'A process: {status (running, exited, failed, stopped), exitCode, signal, error, command, args, startedAt, endedAt}.',
  result: STATUS.schema,
  params: v.object(instanceId),
  handler: ({ params, ctx, deps }) => deps.processExecutor.getProcessStatus(ctx, params.instanceId),
});

export const getProcessLogs = defineOperation({
  access: 'admin',
  kind: 'read',
  describe: 'The latest lines of a process output (PROCESS_LOG_LINES), stderr lines marked [stderr]: {logs}.',
  result: v.strictObject({ logs: v.array(v.string()) }),
  params: v.object(instanceId),
  handler: ({ params, ctx, deps }) => deps.processExecutor.getProcessLogs(ctx, params.instanceId),
});

export const sendProcessInput = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: "Write input to a running process's stdin (as given: end lines with \\n); answers {message}.",
  result: v.strictObject({ message: v.string() }),
  params: v.object({ ...instanceId, input: v.pipe(v.string('input must be a string'), v.minLength(1, 'input must not be empty'), v.maxLength(1_000_000)) }),
  handler: ({ params, ctx, deps }) => deps.processExecutor.sendProcessInput(ctx, params.instanceId, params.input),
});
