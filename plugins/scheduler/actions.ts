import * as v from 'valibot';
import { trimmedText } from 'rpc-service/plugin';
import type { ActionType } from './task.entity.ts';

const object = (label: string) => v.record(v.string(), v.unknown(), `${label} must be an object`);

/** The actionConfig of each action type. */
export const ACTION_CONFIGS = {
  event: v.object({ eventName: trimmedText('eventName', 200), eventData: v.optional(object('eventData'), {}) }),
  rpc: v.object({
    method: v.pipe(v.string('method must be a string'), v.regex(/^[A-Za-z][A-Za-z0-9]*\.[A-Za-z][A-Za-z0-9]*$/, 'method must be "Group.operation"')),
    params: v.optional(object('params'), {}),
  }),
  workflow: v.object({ workflowIdentifier: trimmedText('workflowIdentifier', 200), workflowArgs: v.optional(object('workflowArgs'), {}) }),
  aiMessage: v.object({ agentName: trimmedText('agentName', 100), message: trimmedText('message', 20_000) }),
} satisfies Record<ActionType, v.GenericSchema>;

/** The checked actionConfig of an action type, as it was saved. */
export type ActionConfig<T extends ActionType> = v.InferOutput<(typeof ACTION_CONFIGS)[T]>;
