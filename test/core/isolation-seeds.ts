import assert from 'node:assert/strict';
import { uniqueName, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { tinyPng } from '../support/uploads.ts';
import { as, PASSWORD, schedulerTask, uploaded, waitingGraph, type Tenant } from './isolation-cases.ts';

/** The records test/core/isolation.test.ts makes in each tenant before it calls across them. */
type Seed = (t: TestApp, x: Tenant) => Promise<void>;

/**
 * One record of each kind that has ids, per group, through the operations
 * themselves, in both tenants. Some names are the same in both (the agent
 * support-bot, the plan basic, the playbook Onboarding, the scope notes,
 * extension 100, the secret hooks:FIRE): that B's seeding succeeds shows they
 * are unique per tenant.
 */
export const SEEDS: Record<string, Seed> = {
  async users(t, x) {
    const name = uniqueName(`${x.label}member`);
    x.ids.contact = `${x.label}-contact`;
    x.ids.memberEmail = `${name}@example.com`;
    const member = await t.ok(
      'AdminUserRpc.create',
      { email: x.ids.memberEmail, username: name, password: PASSWORD, role: 'user', partnerContactId: x.ids.contact },
      as(x.admin),
    );
    x.ids.member = member._id;
    x.member = await t.ok('AuthRpc.login', { identifier: name, password: PASSWORD });
    x.ids.inviteCode = (await t.ok('AdminUserRpc.createInviteCode', {}, as(x.admin)))._id;
    x.ids.pictureKey = await uploaded(t, x, 'UserProfileRpc.getUploadKeyForProfilePicture', {}, tinyPng(), 'image/png');
  },
  async agents(t, x) {
    x.ids.project = `${x.label}-crm`;
    x.ids.agent = (
      await t.ok(
        'AgentConfigRpc.create',
        { name: 'support-bot', model: 'gpt-4o-mini', messagingContactId: x.ids.contact, projectId: x.ids.project },
        as(x.admin),
      )
    )._id;
    x.ids.avatarKey = await uploaded(t, x, 'AgentConfigRpc.getUploadKeyForAvatar', { _id: x.ids.agent }, tinyPng(), 'image/png');
  },
  async memories(t, x) {
    x.ids.memory = (await t.ok('MemoryRpc.saveMemory', { scope: 'user', memory: { content: `${x.label} prefers mornings.` } }, as(x.admin))).memoryId;
    await t.ok('MemoryRpc.saveMemory', { scope: 'user', targetUserId: x.ids.member, memory: { content: `${x.label}'s member likes tea.` } }, as(x.admin));
    // The embedding of a memory is an AI call, traced without a thread: its trace id is its thread's.
    x.ids.trace = (await t.ok('AITelemetryRpc.listThreads', {}, as(x.admin))).data[0].threadId;
  },
  async billing(t, x) {
    await t.ok('BillingPlanRpc.create', { planId: 'basic', name: 'Basic', currency: 'EUR' }, as(x.admin));
    x.ids.planCode = `${x.label}-gold`;
    x.ids.plan = (await t.ok('BillingPlanRpc.create', { planId: x.ids.planCode, name: 'Gold', currency: 'EUR', basePlanId: 'basic' }, as(x.admin)))._id;
    x.ids.discountCode = `${x.label.toUpperCase()}10`;
    x.ids.discount = (
      await t.ok('DiscountRpc.create', { code: x.ids.discountCode, name: 'Ten off', kind: 'percent', value: 10, planIds: [x.ids.planCode] }, as(x.admin))
    )._id;
  },
  async checkpoints(t, x) {
    await t.ok('CheckpointRpc.writeFile', { scope: 'notes', path: 'index.md', content: `# ${x.label}\n` }, as(x.admin));
    x.ids.checkpoint = (await t.ok('CheckpointRpc.createCheckpoint', { scope: 'notes', message: 'First' }, as(x.admin))).commitHash;
  },
  async documents(t, x) {
    x.ids.docInstance = `${x.label}-handbook`;
    x.ids.pageTitle = `${x.label} opening hours`;
    x.ids.page = (
      await t.ok('DocumentRpc.create', { title: x.ids.pageTitle, documentInstanceId: x.ids.docInstance, content: 'We open at nine.' }, as(x.admin))
    )._id;
  },
  async knowledgeBase(t, x) {
    const { document, jobId } = await t.ok(
      'KnowledgeBaseAdminRpc.ingestText',
      { name: 'Hours', content: 'The front desk opens at nine and closes at five.', userId: x.ids.member, contactId: x.ids.contact, projectId: x.ids.project },
      as(x.admin),
    );
    x.ids.kbDocument = document._id;
    x.ids.kbJob = jobId;
    await eventually(
      async () => ((await t.ok('KnowledgeBaseAdminRpc.getDocument', { docId: document._id }, as(x.admin))).status === 'ready' ? true : undefined),
      20_000,
    );
    // The queue's job behind the ingestion, as JobQueueRpc lists it.
    x.ids.queueJob = (await t.ok('JobQueueRpc.listJobs', { queue: 'knowledge-base.ingest' }, as(x.admin))).docs[0].id;
    const chunks = await t.ok('KnowledgeBaseAdminRpc.getChunks', { docId: document._id }, as(x.admin));
    x.ids.kbChunk = (Array.isArray(chunks) ? chunks : chunks.chunks)[0].chunkId;
    x.ids.kbKey = await uploaded(t, x, 'KnowledgeBaseAdminRpc.getUploadKey', {}, Buffer.from('Parking is underground.\n'), 'text/plain');
  },
  async notes(t, x) {
    x.ids.note = (await t.ok('NoteRpc.add', { text: `${x.label} note` }, as(x.admin)))._id;
  },
  async playbooks(t, x) {
    x.ids.playbook = (await t.ok('PlaybookRpc.create', { name: 'Onboarding', content: '# Steps' }, as(x.admin)))._id;
    x.ids.playbookKey = await uploaded(t, x, 'PlaybookRpc.getResourceUploadKey', { playbookId: x.ids.playbook }, Buffer.from('# Checklist\n'), 'text/markdown');
  },
  async processes(t, x) {
    x.ids.process = (await t.ok('ProcessExecutorRpc.startProcess', { command: '/bin/cat' }, as(x.admin))).instanceId;
  },
  async scheduler(t, x) {
    const taskId = await t.ok(
      'SchedulerRpc.create',
      { taskConfig: { ...schedulerTask(), schedule: `once:${new Date(Date.now() + 200).toISOString()}` } },
      as(x.admin),
    );
    x.ids.schedulerTask = taskId;
    await eventually(async () => {
      const { data } = await t.ok('SchedulerRpc.listRuns', { taskId }, as(x.admin));
      return data.length === 1 && data[0].status !== 'running' ? true : undefined;
    });
  },
  async secrets(t, x) {
    // A secret's id is "zone:key", both chosen by the tenant.
    x.ids.secret = (
      await t.ok('SecretsRpc.create', { zone: 'billing', key: `${x.label.toUpperCase()}_STRIPE_KEY`, value: `${x.label}-stripe` }, as(x.admin))
    )._id;
    x.ids.scopedSecret = (
      await t.ok('SecretsManagerRpc.create', { scope: 'project', projectId: x.ids.project, key: 'CRM_TOKEN', value: `${x.label}-crm` }, as(x.admin))
    )._id;
  },
  async tasks(t, x) {
    x.ids.taskInstance = `${x.label}-board`;
    // Assigned to the member's contact: the member gets a notification.
    const task = await t.ok(
      'TaskRpc.create',
      { taskInstanceId: x.ids.taskInstance, title: 'Call back', assignees: [x.ids.contact], comments: [{ content: 'First' }] },
      as(x.admin),
    );
    x.ids.task = task._id;
    x.ids.comment = task.comments[0].commentId;
    await t.ok('TaskRpc.create', { taskInstanceId: x.ids.taskInstance, title: 'Dial', parentId: task._id }, as(x.admin));
    x.ids.notification = (await t.ok('NotificationRpc.getData', {}, as(x.member))).data[0]._id;
  },
  async telephony(t, x) {
    x.ids.agentConfig = `${x.label}-agent-config`;
    await t.ok('TelephonyManagerRpc.assignUserExtension', { appUserId: x.ids.member, extension: '100' }, as(x.admin));
    await t.ok('TelephonyManagerRpc.assignAgentExtension', { extension: '101', agentConfigId: x.ids.agentConfig, agentContactId: x.ids.contact }, as(x.admin));
  },
  async workflows(t, x) {
    x.ids.workflowName = `${x.label} approval`;
    x.ids.workflow = (await t.ok('WorkflowRpc.create', { name: x.ids.workflowName, ...waitingGraph(), contextId: x.ids.contact }, as(x.admin)))._id;
    const started = await t.ok('WorkflowRpc.executeWorkflow', { workflowIdentifier: x.ids.workflow }, as(x.admin));
    assert.equal(started.status, 'waiting');
    x.ids.run = started.instanceId;
  },
};
