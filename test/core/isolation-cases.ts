import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { uniqueName, type TestApp } from '../support/harness.ts';
import { putUpload } from '../support/uploads.ts';

/** The cases of test/core/isolation.test.ts: what each id-taking operation must answer another tenant, and the records each needs. */
const ID_NAME = /^(_?ids?|.+Ids?|identifier|.+Identifier|hash|.+Hash|uploadKey)$/;

export interface Schema {
  type?: string;
  format?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
}

/** The id-like params of an operation, as paths: `context.userId`, `comments[].commentId`. */
export function idParams(schema: Schema, prefix = ''): string[] {
  return Object.entries(schema.properties ?? {}).flatMap(([key, property]) => {
    const path = `${prefix}${key}`;
    const options = property.anyOf ?? [property];
    const own = ID_NAME.test(key) || options.some((option) => option.format === 'uuid' || option.items?.format === 'uuid') ? [path] : [];
    const object = options.find((option) => option.type === 'object' && option.properties);
    const items = options.find((option) => option.type === 'array' && option.items?.properties)?.items;
    return [...own, ...(object ? idParams(object, `${path}.`) : []), ...(items ? idParams(items, `${path}[].`) : [])];
  });
}

export const PASSWORD = 'correct horse battery';

export interface Session {
  token: string;
  user: { _id: string };
}

/** A tenant and its records: one of each kind that has ids, made through the operations themselves. */
export interface Tenant {
  label: string;
  admin: Session & { subscriptionId: string };
  member: Session;
  /** A page of the test's own web server, for ingestUrl. */
  page: string;
  /** Ids and other values naming A's records, each of them A's alone (the label is in every free-text one). */
  ids: Record<string, string>;
  /** An OAuth access token of an app the admin authorised for the API, with everything their role allows. */
  appToken: string;
}

export type Params = Record<string, unknown>;
/** Params of a call by B (`b`), naming records by `x`: A's ids, or ids that exist nowhere. */
type Build = (x: Record<string, string>, b: Tenant, t: TestApp) => Params | Promise<Params>;

/**
 * What B's call with A's id must answer. Every checked call is also made
 * with ids that exist nowhere, and both answers must be the same (code,
 * message and, for answers that read, the data), so A's ids are not even
 * told apart from made-up ones.
 */
type Expectation =
  | { answer: 'NOT_FOUND'; params: Build; creates?: undefined }
  /**
   * Not a lookup of the record: a reference inside a record written, checked as input, or a filter that selects nothing of A's.
   * `creates`: each call makes a record of B's (params built for each call, answers compared by code only).
   */
  | { answer: 'VALIDATION_ERROR' | 'OK'; why: string; params: Build; creates?: boolean }
  | { exempt: string };

const notFound = (params: Build): Expectation => ({ answer: 'NOT_FOUND', params });
const invalid = (why: string, params: Build): Expectation => ({ answer: 'VALIDATION_ERROR', why, params });
const nothingOfA = (why: string, params: Build): Expectation => ({ answer: 'OK', why, params });
/** A free-text id the caller chooses for a record it creates: B gets its own record, as with a value nobody has (no CONFLICT on A's). */
const ownRecord = (why: string, params: Build): Expectation => ({ answer: 'OK', why, params, creates: true });
const exempt = (why: string): Expectation => ({ exempt: why });

export const PAGE = { filter: {}, sort: {}, page: 1, pageSize: 100 };
const PUBLIC = 'a public operation of login and signup, made before there is a tenant; not a record of one';
const CONTACT = 'a messaging contact id, free text the tenant chooses';
const PROJECT = "a project name from the caller's context, free text the tenant chooses";
const OAUTH = "an identity provider's account id (its subject), not a record of a tenant: which user it signs in is the OAuth login's concern (plugins/auth)";
const namedNew = (base: string) => uniqueName(base);
const CREDENTIAL =
  "an authenticator's credential id inside its signed answer: the signature and the challenge decide, not the id (plugins/account-security/test)";
/** A passkey's answer of the right form, signed by nobody: the challenge it names is looked up first. */
const assertion = { id: 'AAAA', rawId: 'AAAA', type: 'public-key', response: { clientDataJSON: 'e30', authenticatorData: 'AAAA', signature: 'AAAA' } };
const registration = { id: 'AAAA', rawId: 'AAAA', type: 'public-key', response: { clientDataJSON: 'e30', attestationObject: 'AAAA' } };

/** For each operation with id-like params, what each of them must answer. */
export const EXPECTATIONS: Record<string, Record<string, Expectation>> = {
  'AdminUserRpc.create': {
    'oauthProfiles[].id': exempt(OAUTH),
    partnerContactId: ownRecord(CONTACT, (x) => ({
      email: `${namedNew('contact')}@example.com`,
      username: namedNew('contact'),
      password: PASSWORD,
      role: 'user',
      partnerContactId: x.contact,
    })),
  },
  'AccountSecurityRpc.confirmTotpEnrolment': { enrolmentId: notFound((x) => ({ enrolmentId: x.totpEnrolment, code: '123456' })) },
  'AccountSecurityRpc.finishPasskeyRegistration': {
    challengeId: notFound((x) => ({ challengeId: x.passkeyChallenge, response: registration })),
    'response.id': exempt(CREDENTIAL),
    'response.rawId': exempt(CREDENTIAL),
  },
  'AccountSecurityRpc.finishPasskeySignIn': {
    challengeId: notFound((x) => ({ challengeId: x.passkeyChallenge, response: assertion })),
    'response.id': exempt(CREDENTIAL),
    'response.rawId': exempt(CREDENTIAL),
  },
  'AccountSecurityRpc.stepUp': {
    challengeId: notFound((x) => ({ challengeId: x.passkeyChallenge, response: assertion })),
    'response.id': exempt(CREDENTIAL),
    'response.rawId': exempt(CREDENTIAL),
  },
  'AccountSecurityRpc.listUserSessions': { userId: notFound((x) => ({ userId: x.member })) },
  'AccountSecurityRpc.renamePasskey': { id: notFound((x) => ({ id: x.passkey, name: 'taken over' })) },
  'AccountSecurityRpc.removePasskey': { id: notFound((x) => ({ id: x.passkey })) },
  'AccountSecurityRpc.resetUserFactors': { userId: notFound((x) => ({ userId: x.member })) },
  'AccountSecurityRpc.revokeSession': { id: notFound((x) => ({ id: x.memberSession })) },
  'AccountSecurityRpc.revokeUserSessions': {
    userId: notFound((x) => ({ userId: x.member })),
    id: notFound((x, b) => ({ userId: b.ids.member, id: x.memberSession })),
  },
  'AdminUserRpc.delete': { _id: notFound((x) => ({ _id: x.member })) },
  'AdminUserRpc.findById': { id: notFound((x) => ({ id: x.member })) },
  'AdminUserRpc.resetPassword': { userId: notFound((x) => ({ userId: x.member, newPassword: 'another long password' })) },
  'AdminUserRpc.revokeInviteCode': { _id: notFound((x) => ({ _id: x.inviteCode })) },
  'AdminUserRpc.update': {
    _id: notFound((x) => ({ _id: x.member, firstName: 'Mallory' })),
    'oauthProfiles[].id': exempt(OAUTH),
    partnerContactId: ownRecord(CONTACT, (x, b) => ({ _id: b.ids.member, partnerContactId: x.contact })),
  },

  'AgentConfigRpc.create': {
    messagingContactId: ownRecord(CONTACT, (x) => ({ name: namedNew('bot'), model: 'gpt-4o-mini', messagingContactId: x.contact })),
    projectId: ownRecord(PROJECT, (x) => ({ name: namedNew('bot'), model: 'gpt-4o-mini', projectId: x.project })),
  },
  'AgentConfigRpc.delete': { _id: notFound((x) => ({ _id: x.agent })) },
  'AgentConfigRpc.findById': { _id: notFound((x) => ({ _id: x.agent })) },
  'AgentConfigRpc.getUploadKeyForAvatar': { _id: notFound((x) => ({ _id: x.agent })) },
  'AgentConfigRpc.update': { _id: notFound((x) => ({ _id: x.agent, description: 'changed by another tenant' })) },
  'AgentConfigRpc.updateAvatar': {
    _id: notFound((x, b) => ({ _id: x.agent, uploadKey: b.ids.avatarKey })),
    uploadKey: notFound((x, b) => ({ _id: b.ids.agent, uploadKey: x.avatarKey })),
  },

  'AITelemetryRpc.getStats': {
    'filter.threadId': nothingOfA('a filter: totals of no trace', (x) => ({ filter: { threadId: x.trace } })),
    'filter.subscriptionId': nothingOfA('a filter within the caller’s subscription: totals of no trace', (x) => ({
      filter: { subscriptionId: x.subscription },
    })),
  },
  'AITelemetryRpc.getThread': { threadId: nothingOfA('an unknown thread answers []', (x) => ({ threadId: x.trace })) },
  'AITelemetryRpc.getTrace': { traceId: notFound((x) => ({ traceId: x.trace })) },
  'AITelemetryRpc.listThreads': {
    'filter.threadId': nothingOfA('a filter', (x) => ({ filter: { threadId: x.trace } })),
    'filter.subscriptionId': nothingOfA('a filter within the caller’s subscription', (x) => ({ filter: { subscriptionId: x.subscription } })),
  },

  'ApiKeyRpc.delete': { _id: notFound((x) => ({ _id: x.apiKey })) },
  'ApiKeyRpc.update': { _id: notFound((x) => ({ _id: x.apiKey, description: 'changed by another tenant' })) },
  'ApiManagementRpc.getDeliveries': { apiKeyId: nothingOfA('a filter', (x) => ({ apiKeyId: x.apiKey })) },
  'ApiManagementRpc.resendDeliveries': {
    apiKeyId: notFound((x) => ({ apiKeyId: x.apiKey })),
    _ids: nothingOfA('deliveries picked among those of the caller’s webhook: none resent', (x, b) => ({ apiKeyId: b.ids.apiKey, _ids: [x.delivery] })),
  },

  'AuthRpc.login': { identifier: exempt(PUBLIC), otpRequestId: exempt(PUBLIC) },
  'AuthRpc.pollExternalOAuthLoginSession': { sessionId: exempt(PUBLIC) },
  'AuthRpc.requestVerificationCode': { identifier: exempt(PUBLIC), 'contactInfo.contactId': exempt(PUBLIC) },
  'AuthRpc.signup': { 'verifications.email.otpRequestId': exempt(PUBLIC), 'verifications.phone.otpRequestId': exempt(PUBLIC) },
  'AuthRpc.verifyCode': { otpRequestId: exempt(PUBLIC) },

  'BillingPlanRpc.create': {
    planId: ownRecord('a plan code, unique in each subscription', (x) => ({ planId: x.planCode, name: 'Copy', currency: 'EUR' })),
    basePlanId: invalid('a base plan is a reference inside the plan written: “no plan … in this subscription”', (x) => ({
      planId: namedNew('plan'),
      name: 'Derived',
      currency: 'EUR',
      basePlanId: x.planCode,
    })),
  },
  'BillingPlanRpc.delete': { _id: notFound((x) => ({ _id: x.plan })) },
  'BillingPlanRpc.findById': { _id: notFound((x) => ({ _id: x.plan })) },
  'BillingPlanRpc.update': {
    _id: notFound((x) => ({ _id: x.plan, name: 'Changed by another tenant' })),
    planId: invalid('planId never changes: “planId cannot change”', (x, b) => ({ _id: b.ids.plan, planId: x.planCode })),
    basePlanId: invalid('a reference inside the plan written', (x, b) => ({ _id: b.ids.plan, basePlanId: x.planCode })),
  },

  'CheckpointRpc.listFiles': { hash: notFound((x) => ({ scope: 'notes', hash: x.checkpoint })) },
  'CheckpointRpc.readFile': { hash: notFound((x) => ({ scope: 'notes', path: 'index.md', hash: x.checkpoint })) },
  'CheckpointRpc.restore': { hash: notFound((x) => ({ scope: 'notes', hash: x.checkpoint })) },
  'CheckpointRpc.rollback': { hash: notFound((x) => ({ scope: 'notes', hash: x.checkpoint })) },
  'CheckpointRpc.tagRelease': { commitHash: notFound((x) => ({ scope: 'notes', commitHash: x.checkpoint, tagName: namedNew('v'), message: 'Release' })) },

  'DiscountRpc.create': {
    planIds: invalid('plans the discount is for: references inside the record written', (x) => ({
      code: namedNew('CODE'),
      name: 'Copy',
      kind: 'percent',
      value: 10,
      planIds: [x.planCode],
    })),
  },
  'DiscountRpc.delete': { _id: notFound((x) => ({ _id: x.discount })) },
  'DiscountRpc.findById': { _id: notFound((x) => ({ _id: x.discount })) },
  'DiscountRpc.redeem': {
    planId: invalid('the plan a redemption is for: a reference checked as input', (x, b) => ({ code: b.ids.discountCode, planId: x.planCode })),
  },
  'DiscountRpc.update': {
    _id: notFound((x) => ({ _id: x.discount, name: 'Changed by another tenant' })),
    planIds: invalid('references inside the record written', (x, b) => ({ _id: b.ids.discount, planIds: [x.planCode] })),
  },

  'DocumentRpc.create': {
    documentInstanceId: ownRecord('a documentation instance is a name the tenant chooses; B writes in its own', (x) => ({
      title: namedNew('Page'),
      documentInstanceId: x.docInstance,
    })),
    parentId: invalid('the parent page is a reference inside the page written: “no page … in documentation instance …”', (x, b) => ({
      title: namedNew('Page'),
      documentInstanceId: b.ids.docInstance,
      parentId: x.page,
    })),
  },
  'DocumentRpc.delete': { _id: notFound((x) => ({ _id: x.page })) },
  'DocumentRpc.getAllDocuments': { documentInstanceId: nothingOfA('a filter', (x) => ({ documentInstanceId: x.docInstance })) },
  'DocumentRpc.getById': { docId: notFound((x) => ({ docId: x.page })) },
  'DocumentRpc.getByTitle': { documentInstanceId: notFound((x) => ({ documentInstanceId: x.docInstance, title: x.pageTitle })) },
  'DocumentRpc.getVersions': { docId: notFound((x) => ({ docId: x.page })) },
  'DocumentRpc.search': { documentInstanceId: nothingOfA('a filter', (x) => ({ documentInstanceId: x.docInstance, queryText: 'opening hours' })) },
  'DocumentRpc.update': {
    _id: notFound((x) => ({ _id: x.page, content: 'changed by another tenant' })),
    parentId: invalid('a reference inside the page written', (x, b) => ({ _id: b.ids.page, parentId: x.page })),
  },

  'JobQueueRpc.retryJob': { jobId: notFound((x) => ({ jobId: x.queueJob })) },

  'KnowledgeBaseAdminRpc.cancelJob': { jobId: notFound((x) => ({ jobId: x.kbJob })) },
  'KnowledgeBaseAdminRpc.deleteChunk': {
    docId: notFound((x) => ({ docId: x.kbDocument, chunkId: x.kbChunk })),
    chunkId: notFound((x, b) => ({ docId: b.ids.kbDocument, chunkId: x.kbChunk })),
  },
  'KnowledgeBaseAdminRpc.deleteDocument': { docId: notFound((x) => ({ docId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.getChunks': { docId: notFound((x) => ({ docId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.getDocument': { docId: notFound((x) => ({ docId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.getDocumentVersions': { docId: notFound((x) => ({ docId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.getJob': { jobId: notFound((x) => ({ jobId: x.kbJob })) },
  'KnowledgeBaseAdminRpc.ingestFiles': {
    uploadKey: notFound((x) => ({ uploadKey: x.kbKey })),
    documentId: notFound((x, b) => ({ uploadKey: b.ids.kbKey, documentId: x.kbDocument })),
    userId: invalid('the user a document is about: a reference inside the record written', (x, b) => ({ uploadKey: b.ids.kbKey, userId: x.member })),
    contactId: ownRecord(CONTACT, async (x, b, t) => ({ uploadKey: await kbUpload(t, b), contactId: x.contact })),
    projectId: ownRecord(PROJECT, async (x, b, t) => ({ uploadKey: await kbUpload(t, b), projectId: x.project })),
  },
  'KnowledgeBaseAdminRpc.ingestText': {
    documentId: notFound((x) => ({ name: 'Hours', content: 'Changed by another tenant.', documentId: x.kbDocument })),
    userId: invalid('a reference inside the record written', (x) => ({ name: namedNew('Doc'), content: 'Text.', userId: x.member })),
    contactId: ownRecord(CONTACT, (x) => ({ name: namedNew('Doc'), content: 'Text.', contactId: x.contact })),
    projectId: ownRecord(PROJECT, (x) => ({ name: namedNew('Doc'), content: 'Text.', projectId: x.project })),
  },
  'KnowledgeBaseAdminRpc.ingestUrl': {
    documentId: notFound((x, b) => ({ url: b.page, documentId: x.kbDocument })),
    userId: invalid('a reference inside the record written', (x, b) => ({ url: b.page, userId: x.member })),
    contactId: ownRecord(CONTACT, (x, b) => ({ url: b.page, contactId: x.contact })),
    projectId: ownRecord(PROJECT, (x, b) => ({ url: b.page, projectId: x.project })),
  },
  'KnowledgeBaseAdminRpc.listDocuments': {
    userId: nothingOfA('a filter', (x) => ({ userId: x.member })),
    contactId: nothingOfA('a filter', (x) => ({ contactId: x.contact })),
    projectId: nothingOfA('a filter', (x) => ({ projectId: x.project })),
  },
  'KnowledgeBaseAdminRpc.listJobs': { documentId: nothingOfA('a filter', (x) => ({ documentId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.reindexDocument': { docId: notFound((x) => ({ docId: x.kbDocument })) },
  'KnowledgeBaseAdminRpc.retryJob': { jobId: notFound((x) => ({ jobId: x.kbJob })) },
  'KnowledgeBaseAdminRpc.updateChunk': {
    docId: notFound((x) => ({ docId: x.kbDocument, chunkId: x.kbChunk, text: 'changed by another tenant' })),
    chunkId: notFound((x, b) => ({ docId: b.ids.kbDocument, chunkId: x.kbChunk, text: 'changed by another tenant' })),
  },
  'KnowledgeBaseAdminRpc.updateDocument': { docId: notFound((x) => ({ docId: x.kbDocument, updates: { name: 'Changed by another tenant' } })) },

  'MemoryRpc.deleteMemory': {
    memoryId: notFound((x) => ({ scope: 'user', memoryId: x.memory })),
    targetUserId: notFound((x, b) => ({ scope: 'user', targetUserId: x.member, memoryId: b.ids.memory })),
  },
  'MemoryRpc.getMemory': {
    memoryId: notFound((x) => ({ scope: 'user', memoryId: x.memory })),
    targetUserId: notFound((x, b) => ({ scope: 'user', targetUserId: x.member, memoryId: b.ids.memory })),
  },
  'MemoryRpc.listMemories': {
    targetUserId: notFound((x) => ({ scope: 'user', targetUserId: x.member })),
    offset: invalid('a cursor must be a memory of the list: “no memory with this id in this scope to continue after”', (x) => ({
      scope: 'user',
      offset: x.memory,
    })),
  },
  'MemoryRpc.recallMemories': { targetUserId: notFound((x) => ({ scope: 'user', targetUserId: x.member, queryText: 'mornings' })) },
  'MemoryRpc.saveMemory': {
    targetUserId: notFound((x) => ({ scope: 'user', targetUserId: x.member, memory: { content: 'Written by another tenant.' } })),
    // A given id updates that memory of the caller's scope, or saves a new one under it: ids are the caller's to choose, per subscription.
    'memory.id': ownRecord('a memory id of the caller’s subscription', (x) => ({
      scope: 'user',
      memory: { id: x.memory, content: namedNew('Written by another tenant') },
    })),
  },

  'NoteRpc.remove': { _id: notFound((x) => ({ _id: x.note })) },
  'OAuthServerRpc.revokeApp': { id: notFound((x) => ({ id: x.oauthGrant })) },
  'OAuthServerRpc.revokeSubscriptionApp': { id: notFound((x) => ({ id: x.oauthGrant })) },

  'NotificationRpc.delete': { _id: notFound((x) => ({ _id: x.notification })) },
  'NotificationRpc.findById': { _id: notFound((x) => ({ _id: x.notification })) },
  'NotificationRpc.markAsRead': { _id: notFound((x) => ({ _id: x.notification })) },

  'PlaybookRpc.delete': { _id: notFound((x) => ({ _id: x.playbook })) },
  'PlaybookRpc.finalizeResourceUpload': {
    playbookId: notFound((x, b) => ({ playbookId: x.playbook, uploadKey: b.ids.playbookKey })),
    uploadKey: notFound((x, b) => ({ playbookId: b.ids.playbook, uploadKey: x.playbookKey })),
  },
  'PlaybookRpc.findById': { _id: notFound((x) => ({ _id: x.playbook })) },
  'PlaybookRpc.getResourceUploadKey': { playbookId: notFound((x) => ({ playbookId: x.playbook })) },
  'PlaybookRpc.update': { _id: notFound((x) => ({ _id: x.playbook, data: { name: 'Changed by another tenant' } })) },

  'ProcessExecutorRpc.getProcessLogs': { instanceId: notFound((x) => ({ instanceId: x.process })) },
  'ProcessExecutorRpc.getProcessStatus': { instanceId: notFound((x) => ({ instanceId: x.process })) },
  'ProcessExecutorRpc.sendProcessInput': { instanceId: notFound((x) => ({ instanceId: x.process, input: 'from another tenant\n' })) },
  'ProcessExecutorRpc.stopProcess': { instanceId: notFound((x) => ({ instanceId: x.process })) },

  'PushSenderRpc.sendBroadcast': {
    targetIds: invalid('the users a broadcast goes to must be of the caller’s subscription', (x) => ({
      targetType: 'users',
      targetIds: [x.member],
      payload: { title: 'Hi', body: 'From another tenant' },
    })),
  },

  'SchedulerRpc.create': {
    'taskConfig.context.userId': invalid('the user a task acts as: a reference inside the task written', (x) => ({
      taskConfig: { ...schedulerTask(), context: { userId: x.member } },
    })),
    'taskConfig.context.subscriptionId': invalid('a task runs in the caller’s own subscription', (x) => ({
      taskConfig: { ...schedulerTask(), context: { subscriptionId: x.subscription } },
    })),
    'taskConfig.context.projectId': ownRecord(PROJECT, (x) => ({ taskConfig: { ...schedulerTask(), context: { projectId: x.project } } })),
    'context.userId': invalid('as taskConfig.context.userId', (x) => ({ taskConfig: schedulerTask(), context: { userId: x.member } })),
    'context.subscriptionId': invalid('as taskConfig.context.subscriptionId', (x) => ({
      taskConfig: schedulerTask(),
      context: { subscriptionId: x.subscription },
    })),
    'context.projectId': ownRecord(PROJECT, (x) => ({ taskConfig: schedulerTask(), context: { projectId: x.project } })),
  },
  ...Object.fromEntries(
    (['delete', 'disable', 'enable', 'findById'] as const).map((operation) => [
      `SchedulerRpc.${operation}`,
      {
        taskId: notFound((x) => ({ taskId: x.schedulerTask })),
        // delete: a task of B's for each call.
        ...ignoredContext(async (_x, b, t) => ({
          taskId: operation === 'delete' ? await t.as(b.admin).SchedulerRpc.create({ taskConfig: schedulerTask() }) : b.ids.schedulerTask,
        })),
      },
    ]),
  ),
  'SchedulerRpc.getData': ignoredContext(() => ({})),
  'SchedulerRpc.listRuns': { taskId: nothingOfA('a filter', (x) => ({ taskId: x.schedulerTask })), ...ignoredContext(() => ({})) },
  'SchedulerRpc.update': {
    taskId: notFound((x) => ({ taskId: x.schedulerTask, updatedConfig: { name: 'Changed by another tenant' } })),
    ...ignoredContext((_x, b) => ({ taskId: b.ids.schedulerTask, updatedConfig: {} })),
    'updatedConfig.context.userId': invalid('a reference inside the task written', (x, b) => ({
      taskId: b.ids.schedulerTask,
      updatedConfig: { context: { userId: x.member } },
    })),
    'updatedConfig.context.subscriptionId': invalid('a task runs in the caller’s own subscription', (x, b) => ({
      taskId: b.ids.schedulerTask,
      updatedConfig: { context: { subscriptionId: x.subscription } },
    })),
    'updatedConfig.context.projectId': nothingOfA(PROJECT, (x, b) => ({ taskId: b.ids.schedulerTask, updatedConfig: { context: { projectId: x.project } } })),
  },

  'SecretsManagerRpc.create': {
    projectId: ownRecord(PROJECT, (x) => ({ scope: 'project', projectId: x.project, key: namedNew('KEY').toUpperCase(), value: 'b-value' })),
  },
  'SecretsManagerRpc.delete': { _id: notFound((x) => ({ _id: x.scopedSecret })) },
  'SecretsManagerRpc.getData': { projectId: nothingOfA('a filter', (x) => ({ scope: 'project', projectId: x.project })) },
  'SecretsManagerRpc.getSecretValue': { _id: notFound((x) => ({ _id: x.scopedSecret })) },
  'SecretsManagerRpc.update': {
    _id: notFound((x) => ({ _id: x.scopedSecret, value: 'rotated by another tenant' })),
    projectId: ownRecord(PROJECT, (x, b) => ({ _id: b.ids.scopedSecret, label: 'moved', value: 'b-value', scope: 'project', projectId: x.project })),
  },
  'SecretsRpc.delete': { _id: notFound((x) => ({ _id: x.secret })) },
  'SecretsRpc.update': { _id: notFound((x) => ({ _id: x.secret, description: 'changed by another tenant' })) },

  'TaskRpc.addComment': { taskId: notFound((x) => ({ taskId: x.task, content: 'From another tenant' })) },
  'TaskRpc.create': {
    taskInstanceId: ownRecord('a task board is a name the tenant chooses; B writes in its own', (x) => ({ taskInstanceId: x.taskInstance, title: 'Task' })),
    parentId: invalid('the parent task is a reference inside the task written: “No task … in task instance …”', (x, b) => ({
      taskInstanceId: b.ids.taskInstance,
      title: 'Subtask',
      parentId: x.task,
    })),
    'comments[].commentId': ownRecord('a comment id the client chooses for a new comment', (x, b) => ({
      taskInstanceId: b.ids.taskInstance,
      title: 'Task',
      comments: [{ content: 'Hello', commentId: x.comment }],
    })),
    'comments[].authorContactId': ownRecord(CONTACT, (x, b) => ({
      taskInstanceId: b.ids.taskInstance,
      title: 'Task',
      comments: [{ content: 'Hello', authorContactId: x.contact }],
    })),
  },
  'TaskRpc.createTaskTree': {
    taskInstanceId: ownRecord('a task board is a name the tenant chooses', (x) => ({ taskInstanceId: x.taskInstance, tasks: [{ title: 'Tree' }] })),
    'tasks[].comments[].commentId': ownRecord('a comment id the client chooses', (x, b) => ({
      taskInstanceId: b.ids.taskInstance,
      tasks: [{ title: 'Tree', comments: [{ content: 'Hi', commentId: x.comment }] }],
    })),
    'tasks[].comments[].authorContactId': ownRecord(CONTACT, (x, b) => ({
      taskInstanceId: b.ids.taskInstance,
      tasks: [{ title: 'Tree', comments: [{ content: 'Hi', authorContactId: x.contact }] }],
    })),
  },
  // TaskRpc.delete answers {success: false} for a task that does not exist (plugins/task/README.md), so NOT_FOUND is not its answer; the same as for an unknown id it must be.
  'TaskRpc.delete': { _id: nothingOfA('{success: false}, as for no such task', (x) => ({ _id: x.task })) },
  'TaskRpc.findById': { _id: notFound((x) => ({ _id: x.task })) },
  'TaskRpc.getData': { taskInstanceId: nothingOfA('a filter', (x) => ({ taskInstanceId: x.taskInstance })) },
  'TaskRpc.update': { _id: notFound((x) => ({ _id: x.task, title: 'Changed by another tenant' })) },

  'TelephonyManagerRpc.assignAgentExtension': {
    agentConfigId: ownRecord('the agent’s id on the telephony platform, free text', (x) => ({ extension: nextExtension(), agentConfigId: x.agentConfig })),
    agentContactId: ownRecord(CONTACT, (x) => ({ extension: nextExtension(), agentConfigId: 'b-agent', agentContactId: x.contact })),
  },
  'TelephonyManagerRpc.assignUserExtension': { appUserId: notFound((x) => ({ appUserId: x.member, extension: '109' })) },
  'TelephonyManagerRpc.getExtensionsForAgent': { agentContactId: nothingOfA('a lookup by contact: no extension', (x) => ({ agentContactId: x.contact })) },
  'TelephonyManagerRpc.getExtensionsForUser': { appUserId: notFound((x) => ({ appUserId: x.member })) },

  'UserProfileRpc.updateProfilePicture': { uploadKey: notFound((x) => ({ uploadKey: x.pictureKey })) },
  'UserProfileRpc.verifyUserChannel': {
    identifier: invalid('the caller’s own address, checked as input', (x) => ({
      otpRequestId: randomUUID(),
      code: '123456',
      identifier: x.memberEmail,
      channelType: 'email',
    })),
    otpRequestId: exempt(
      'a one-time code request belongs to an address, not a tenant (codes are sent before signup too); its code is the secret, and the identifier must be the caller’s own',
    ),
  },

  'WorkflowRpc.cancelInstance': { instanceId: notFound((x) => ({ instanceId: x.run })) },
  'WorkflowRpc.create': {
    'nodes[].id': exempt('ids of the nodes of the graph given, local to it'),
    contextId: ownRecord('a context label the tenant chooses', (x) => ({ name: namedNew('Flow'), ...waitingGraph(), contextId: x.contact })),
  },
  'WorkflowRpc.delete': { _id: notFound((x) => ({ _id: x.workflow })) },
  'WorkflowRpc.executeWorkflow': { workflowIdentifier: notFound((x) => ({ workflowIdentifier: x.workflow })) },
  'WorkflowRpc.findById': { id: notFound((x) => ({ id: x.workflow })) },
  'WorkflowRpc.getInstance': { instanceId: notFound((x) => ({ instanceId: x.run })) },
  'WorkflowRpc.listInstances': { workflowId: nothingOfA('a filter', (x) => ({ workflowId: x.workflow })) },
  'WorkflowRpc.sendEventToWorkflow': {
    'context.id': notFound((x, b) => ({
      workflowName: b.ids.workflowName,
      eventName: 'approved',
      eventData: { by: 'another tenant' },
      context: { id: x.run },
    })),
  },
  'WorkflowRpc.update': {
    _id: notFound((x) => ({ _id: x.workflow, description: 'changed by another tenant' })),
    'nodes[].id': exempt('ids of the nodes of the graph given, local to it'),
    contextId: nothingOfA('a context label the tenant chooses', (x, b) => ({ _id: b.ids.workflow, contextId: x.contact })),
  },
};

/** Every SchedulerRpc operation takes a context (plugins/scheduler/README.md); only create and update read it (into the task), the others ignore it. */
function ignoredContext(build: Build): Record<string, Expectation> {
  const idOf = { userId: 'member', subscriptionId: 'subscription', projectId: 'project' } as const;
  return Object.fromEntries(
    (['userId', 'subscriptionId', 'projectId'] as const).map((field) => [
      `context.${field}`,
      nothingOfA('ignored by this operation', async (x, b, t) => ({ ...(await build(x, b, t)), context: { [field]: x[idOf[field]] } })),
    ]),
  );
}

let extension = 102;
/** A free extension of the pool (100-109) for each assignment. */
const nextExtension = () => String(extension++);

/** A new upload key of B's admin for ingestFiles, a text file sent with it. */
async function kbUpload(t: TestApp, b: Tenant): Promise<string> {
  return uploaded(t, b, 'KnowledgeBaseAdminRpc.getUploadKey', {}, Buffer.from(`${uniqueName('text')}\n`), 'text/plain');
}

export function schedulerTask() {
  return { name: namedNew('Task'), schedule: '0 0 1 1 *', actionType: 'event' as const, actionConfig: { eventName: 'isolation.tick' } };
}

/** start → wait for "approved" → end: a run that stays waiting. */
export function waitingGraph() {
  return {
    nodes: [
      { id: 'start', type: 'start' },
      { id: 'approval', type: 'wait', config: { event: 'approved', saveAs: 'approval' } },
      { id: 'done', type: 'end' },
    ],
    edges: [
      { source: 'start', target: 'approval' },
      { source: 'approval', target: 'done' },
    ],
  };
}

/** An upload key of the tenant's admin, a file sent with it, not yet put to use. */
export async function uploaded(t: TestApp, x: Tenant, method: string, params: Params, bytes: Buffer, type: string): Promise<string> {
  const { uploadKey } = await t.as(x.admin).call<{ uploadKey: string }>(method, params);
  const answer = await putUpload(t, uploadKey, bytes, type, { token: x.admin.token, fileName: 'file' });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return uploadKey;
}
