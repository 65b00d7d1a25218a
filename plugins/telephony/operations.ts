import * as v from 'valibot';
import { recordId, trimmedText } from 'rpc-service/plugin';
import { EXTENSION, MAX_EXTENSION_DIGITS } from './config.ts';
import { defineOperation } from './deps.ts';
import { AGENT_ASSIGNED, DISASSOCIATED, EXTENSIONS, USER_ASSIGNED } from './telephony.service.ts';

/** Ids of agents on the telephony platform: opaque text, as long as a messaging contact id may be. */
const MAX_AGENT_ID = 200;

const extension = v.pipe(
  v.string('extension must be a string of digits'),
  v.trim(),
  v.regex(EXTENSION, `extension must be 1 to ${MAX_EXTENSION_DIGITS} digits`),
);
const appUserId = recordId('appUserId');

export const getAvailableExtensions = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "Extensions no user or agent of the subscription holds: [extension], the local pool's order or the platform's.",
  result: EXTENSIONS,
  params: v.object({}),
  handler: ({ ctx, deps }) => deps.telephonyService.getAvailableExtensions(ctx),
});

export const assignAgentExtension = defineOperation({
  access: 'admin',
  kind: 'write',
  describe:
    'Assign an extension to an agent (agentConfigId, its id on the platform; agentContactId optional); CONFLICT when it is assigned; answers {success, extension, agentConfigId, agentContactId}.',
  result: AGENT_ASSIGNED,
  params: v.object({
    extension,
    agentConfigId: trimmedText('agentConfigId', MAX_AGENT_ID),
    agentContactId: v.nullish(trimmedText('agentContactId', MAX_AGENT_ID)),
  }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.assignAgentExtension(ctx, params.extension, params.agentConfigId, params.agentContactId ?? null),
});

export const assignUserExtension = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Assign an extension to a user of the subscription; CONFLICT when it is assigned; answers {success, extension, appUserId}.',
  result: USER_ASSIGNED,
  params: v.object({ appUserId, extension }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.assignUserExtension(ctx, params.appUserId, params.extension),
});

export const disassociateUserExtension = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Take an extension from the user holding it; NOT_FOUND when no user holds it; answers {success, extension}.',
  result: DISASSOCIATED,
  params: v.object({ extension }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.disassociateUserExtension(ctx, params.extension),
});

export const disassociateAgentExtension = defineOperation({
  access: 'admin',
  kind: 'write',
  describe: 'Take an extension from the agent holding it; NOT_FOUND when no agent holds it; answers {success, extension}.',
  result: DISASSOCIATED,
  params: v.object({ extension }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.disassociateAgentExtension(ctx, params.extension),
});

export const getExtensionsForUser = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "A user's extensions: [extension].",
  result: EXTENSIONS,
  params: v.object({ appUserId }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.getExtensionsForUser(ctx, params.appUserId),
});

export const getExtensionsForAgent = defineOperation({
  access: 'user',
  kind: 'read',
  describe: "An agent's extensions: those whose assignment named this agentContactId, or this agentConfigId; [extension].",
  result: EXTENSIONS,
  params: v.object({ agentContactId: trimmedText('agentContactId', MAX_AGENT_ID) }),
  handler: ({ params, ctx, deps }) => deps.telephonyService.getExtensionsForAgent(ctx, params.agentContactId),
});
