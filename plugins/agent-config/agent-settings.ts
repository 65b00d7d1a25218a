import * as v from 'valibot';

const text = (label: string, max = 200) => v.pipe(v.string(`${label} must be a string`), v.maxLength(max, `${label} must be at most ${max} characters`));
const optionalText = (label: string, max = 200) => v.optional(v.nullable(text(label, max)));
const flag = (label: string) => v.optional(v.boolean(`${label} must be true or false`));
/** Lists of names (tools, connectors, communication modes) are free text: at most 50, each 1 to 100 characters once trimmed. */
const names = (label: string) =>
  v.optional(
    v.pipe(
      v.array(
        v.pipe(
          v.string(`${label}[] must be a string`),
          v.trim(),
          v.minLength(1, `${label} items must not be empty`),
          v.maxLength(100, `${label} items must be at most 100 characters`),
        ),
        `${label} must be an array of strings`,
      ),
      v.maxLength(50, `${label} takes at most 50 items`),
    ),
  );

const personality = v.object({
  profession: optionalText('personality.profession'),
  style: optionalText('personality.style'),
  gender: optionalText('personality.gender'),
  verbosity: optionalText('personality.verbosity'),
  defaultMood: optionalText('personality.defaultMood'),
  adaptMood: flag('personality.adaptMood'),
  notes: optionalText('personality.notes', 2000),
});

const access = (label: string) =>
  v.object({ accessWorkspace: flag(`${label}.accessWorkspace`), modifyWorkspace: flag(`${label}.modifyWorkspace`), createOwn: flag(`${label}.createOwn`) });
const capabilities = v.object({
  computer: v.optional(v.object({ browserAccess: flag('capabilities.computer.browserAccess'), terminalAccess: flag('capabilities.computer.terminalAccess') })),
  search: v.optional(v.object({ enabled: flag('capabilities.search.enabled'), connectors: names('capabilities.search.connectors') })),
  documentation: v.optional(access('capabilities.documentation')),
  tasks: v.optional(access('capabilities.tasks')),
});

/** The record's fields from `name` through `fileContext` (`plugins/agent-config/README.md`), the ones create and update both take. */
export const agentFields = {
  model: text('model', 200),
  description: optionalText('description', 2000),
  agentClass: v.optional(text('agentClass', 100)),
  promptSource: optionalText('promptSource', 50),
  promptText: optionalText('promptText', 100_000),
  promptFile: optionalText('promptFile', 1000),
  saveChatHistory: flag('saveChatHistory'),
  communicationModes: names('communicationModes'),
  personalityEnabled: flag('personalityEnabled'),
  personality: v.optional(v.nullable(personality)),
  voiceEnabled: flag('voiceEnabled'),
  ttsModel: optionalText('ttsModel'),
  selectedVoice: optionalText('selectedVoice'),
  transcriptionModel: optionalText('transcriptionModel'),
  speakFirstOutgoing: optionalText('speakFirstOutgoing', 2000),
  allowOutgoingCalls: flag('allowOutgoingCalls'),
  allowIncomingCalls: flag('allowIncomingCalls'),
  allowGroupParticipation: flag('allowGroupParticipation'),
  forkNewInstanceForCalls: flag('forkNewInstanceForCalls'),
  enableDeepWork: flag('enableDeepWork'),
  capabilities: v.optional(capabilities),
  role: optionalText('role', 100),
  tools: names('tools'),
  fileContext: optionalText('fileContext', 10_000),
};

export type AgentInput = { [K in keyof typeof agentFields]?: v.InferOutput<(typeof agentFields)[K]> };

const nullableText = v.nullable(v.string());
const workspaceAccess = v.strictObject({ accessWorkspace: v.boolean(), modifyWorkspace: v.boolean(), createOwn: v.boolean() });

/** What is kept in the settings document, and answered in the record: every field but those with columns of their own. */
export const AGENT_SETTINGS = v.strictObject({
  description: nullableText,
  promptSource: nullableText,
  promptText: nullableText,
  promptFile: nullableText,
  saveChatHistory: v.boolean(),
  communicationModes: v.array(v.string()),
  personalityEnabled: v.boolean(),
  // As given: each field optional.
  personality: v.nullable(
    v.strictObject({
      profession: v.optional(nullableText),
      style: v.optional(nullableText),
      gender: v.optional(nullableText),
      verbosity: v.optional(nullableText),
      defaultMood: v.optional(nullableText),
      adaptMood: v.optional(v.boolean()),
      notes: v.optional(nullableText),
    }),
  ),
  voiceEnabled: v.boolean(),
  ttsModel: nullableText,
  selectedVoice: nullableText,
  transcriptionModel: nullableText,
  speakFirstOutgoing: nullableText,
  allowOutgoingCalls: v.boolean(),
  allowIncomingCalls: v.boolean(),
  allowGroupParticipation: v.boolean(),
  forkNewInstanceForCalls: v.boolean(),
  enableDeepWork: v.boolean(),
  capabilities: v.strictObject({
    computer: v.strictObject({ browserAccess: v.boolean(), terminalAccess: v.boolean() }),
    search: v.strictObject({ enabled: v.boolean(), connectors: v.array(v.string()) }),
    documentation: workspaceAccess,
    tasks: workspaceAccess,
  }),
  tools: v.array(v.string()),
  fileContext: nullableText,
});
export type AgentSettings = v.InferOutput<typeof AGENT_SETTINGS>;

const workspace = (
  given?: { accessWorkspace?: boolean; modifyWorkspace?: boolean; createOwn?: boolean },
  current?: AgentSettings['capabilities']['tasks'],
) => ({
  accessWorkspace: given?.accessWorkspace ?? current?.accessWorkspace ?? false,
  modifyWorkspace: given?.modifyWorkspace ?? current?.modifyWorkspace ?? false,
  createOwn: given?.createOwn ?? current?.createOwn ?? false,
});

/** The settings after `input` is applied to `current` (or to the defaults): a field given replaces it, capabilities merge by key. */
export function settingsFrom(input: AgentInput, current?: AgentSettings): AgentSettings {
  const pick = <K extends keyof AgentSettings>(key: K, fallback: AgentSettings[K]): AgentSettings[K] =>
    (input[key as keyof AgentInput] !== undefined ? input[key as keyof AgentInput] : (current?.[key] ?? fallback)) as AgentSettings[K];
  const caps = input.capabilities;
  return {
    description: pick('description', null),
    promptSource: pick('promptSource', 'text'),
    promptText: pick('promptText', null),
    promptFile: pick('promptFile', null),
    saveChatHistory: pick('saveChatHistory', true),
    communicationModes: pick('communicationModes', ['direct']),
    personalityEnabled: pick('personalityEnabled', false),
    personality: pick('personality', null),
    voiceEnabled: pick('voiceEnabled', false),
    ttsModel: pick('ttsModel', null),
    selectedVoice: pick('selectedVoice', null),
    transcriptionModel: pick('transcriptionModel', null),
    speakFirstOutgoing: pick('speakFirstOutgoing', null),
    allowOutgoingCalls: pick('allowOutgoingCalls', false),
    allowIncomingCalls: pick('allowIncomingCalls', false),
    allowGroupParticipation: pick('allowGroupParticipation', false),
    forkNewInstanceForCalls: pick('forkNewInstanceForCalls', false),
    enableDeepWork: pick('enableDeepWork', false),
    capabilities: {
      computer: {
        browserAccess: caps?.computer?.browserAccess ?? current?.capabilities.computer.browserAccess ?? false,
        terminalAccess: caps?.computer?.terminalAccess ?? current?.capabilities.computer.terminalAccess ?? false,
      },
      search: {
        enabled: caps?.search?.enabled ?? current?.capabilities.search.enabled ?? false,
        connectors: caps?.search?.connectors ?? current?.capabilities.search.connectors ?? [],
      },
      documentation: workspace(caps?.documentation, current?.capabilities.documentation),
      tasks: workspace(caps?.tasks, current?.capabilities.tasks),
    },
    tools: pick('tools', []),
    fileContext: pick('fileContext', null),
  };
}
