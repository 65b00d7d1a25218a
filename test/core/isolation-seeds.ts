import { SoftAuthenticator } from '../support/authenticator.ts';
import { uniqueName, type TestApp } from '../support/harness.ts';
import { eventually } from '../support/peers.ts';
import { authorizeApp } from '../support/oauth.ts';
import { waitingRun } from '../support/workflows.ts';
import { tinyPng } from '../support/uploads.ts';
import { PASSWORD, schedulerTask, uploaded, waitingGraph, type Tenant } from './isolation-cases.ts';

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
    const member = await t
      .as(x.admin)
      .AdminUserRpc.create({ email: x.ids.memberEmail, username: name, password: PASSWORD, role: 'user', partnerContactId: x.ids.contact });
    x.ids.member = member._id;
    x.member = await t.as(null).AuthRpc.login({ identifier: name, password: PASSWORD });
    x.ids.inviteCode = (await t.as(x.admin).AdminUserRpc.createInviteCode())._id;
    x.ids.pictureKey = await uploaded(t, x, 'UserProfileRpc.getUploadKeyForProfilePicture', {}, tinyPng(), 'image/png');
  },
  async accountSecurity(t, x) {
    const device = new SoftAuthenticator(t.url);
    const begun = await t.as(x.admin).AccountSecurityRpc.beginPasskeyRegistration({});
    const made = await t.as(x.admin).AccountSecurityRpc.finishPasskeyRegistration({
      challengeId: begun.challengeId,
      response: device.create(begun.options),
      name: `${x.label} laptop`,
    });
    x.ids.passkey = made.passkey.id;
    x.ids.memberSession = (await t.as(x.member).AccountSecurityRpc.listSessions()).items[0]!.id;
    x.ids.totpEnrolment = (await t.as(x.admin).AccountSecurityRpc.beginTotpEnrolment({})).enrolmentId;
    x.ids.passkeyChallenge = (await t.as(x.admin).AccountSecurityRpc.beginPasskeyRegistration({})).challengeId;
  },
  async agents(t, x) {
    x.ids.project = `${x.label}-crm`;
    x.ids.agent = (
      await t.as(x.admin).AgentConfigRpc.create({ name: 'support-bot', model: 'gpt-4o-mini', messagingContactId: x.ids.contact, projectId: x.ids.project })
    )._id;
    x.ids.avatarKey = await uploaded(t, x, 'AgentConfigRpc.getUploadKeyForAvatar', { _id: x.ids.agent }, tinyPng(), 'image/png');
  },
  async memories(t, x) {
    x.ids.memory = (await t.as(x.admin).MemoryRpc.saveMemory({ scope: 'user', memory: { content: `${x.label} prefers mornings.` } })).memoryId;
    await t.as(x.admin).MemoryRpc.saveMemory({ scope: 'user', targetUserId: x.ids.member, memory: { content: `${x.label}'s member likes tea.` } });
    // The embedding of a memory is an AI call, traced without a thread: its trace id is its thread's.
    x.ids.trace = (await t.as(x.admin).AITelemetryRpc.listThreads()).data[0].threadId;
  },
  async billing(t, x) {
    await t.as(x.admin).BillingPlanRpc.create({ planId: 'basic', name: 'Basic', currency: 'EUR' });
    x.ids.planCode = `${x.label}-gold`;
    x.ids.plan = (await t.as(x.admin).BillingPlanRpc.create({ planId: x.ids.planCode, name: 'Gold', currency: 'EUR', basePlanId: 'basic' }))._id;
    x.ids.discountCode = `${x.label.toUpperCase()}10`;
    x.ids.discount = (
      await t.as(x.admin).DiscountRpc.create({ code: x.ids.discountCode, name: 'Ten off', kind: 'percent', value: 10, planIds: [x.ids.planCode] })
    )._id;
  },
  async checkpoints(t, x) {
    await t.as(x.admin).CheckpointRpc.writeFile({ scope: 'notes', path: 'index.md', content: `# ${x.label}\n` });
    x.ids.checkpoint = (await t.as(x.admin).CheckpointRpc.createCheckpoint({ scope: 'notes', message: 'First' })).commitHash;
  },
  async documents(t, x) {
    x.ids.docInstance = `${x.label}-handbook`;
    x.ids.pageTitle = `${x.label} opening hours`;
    x.ids.page = (await t.as(x.admin).DocumentRpc.create({ title: x.ids.pageTitle, documentInstanceId: x.ids.docInstance, content: 'We open at nine.' }))._id;
  },
  async knowledgeBase(t, x) {
    const { document, jobId } = await t.as(x.admin).KnowledgeBaseAdminRpc.ingestText({
      name: 'Hours',
      content: 'The front desk opens at nine and closes at five.',
      userId: x.ids.member,
      contactId: x.ids.contact,
      projectId: x.ids.project,
    });
    x.ids.kbDocument = document._id;
    x.ids.kbJob = jobId;
    await eventually(
      async () => ((await t.as(x.admin).KnowledgeBaseAdminRpc.getDocument({ docId: document._id })).status === 'ready' ? true : undefined),
      20_000,
    );
    // The queue's job behind the ingestion, as JobQueueRpc lists it.
    x.ids.queueJob = (await t.as(x.admin).JobQueueRpc.listJobs({ queue: 'knowledge-base.ingest' })).docs[0].id;
    const chunks = await t.as(x.admin).KnowledgeBaseAdminRpc.getChunks({ docId: document._id });
    x.ids.kbChunk = chunks[0].chunkId;
    x.ids.kbKey = await uploaded(t, x, 'KnowledgeBaseAdminRpc.getUploadKey', {}, Buffer.from('Parking is underground.\n'), 'text/plain');
  },
  async notes(t, x) {
    x.ids.note = (await t.as(x.admin).call<{ _id: string }>('NoteRpc.add', { text: `${x.label} note` }))._id;
  },
  async playbooks(t, x) {
    x.ids.playbook = (await t.as(x.admin).PlaybookRpc.create({ name: 'Onboarding', content: '# Steps' }))._id;
    x.ids.playbookKey = await uploaded(t, x, 'PlaybookRpc.getResourceUploadKey', { playbookId: x.ids.playbook }, Buffer.from('# Checklist\n'), 'text/markdown');
  },
  async processes(t, x) {
    x.ids.process = (await t.as(x.admin).ProcessExecutorRpc.startProcess({ command: '/bin/cat' })).instanceId;
  },
  async scheduler(t, x) {
    const taskId = await t
      .as(x.admin)
      .SchedulerRpc.create({ taskConfig: { ...schedulerTask(), schedule: `once:${new Date(Date.now() + 200).toISOString()}` } });
    x.ids.schedulerTask = taskId;
    await eventually(async () => {
      const { data } = await t.as(x.admin).SchedulerRpc.listRuns({ taskId });
      return data.length === 1 && data[0].status !== 'running' ? true : undefined;
    });
  },
  async secrets(t, x) {
    // A secret's id is "zone:key", both chosen by the tenant.
    x.ids.secret = (await t.as(x.admin).SecretsRpc.create({ zone: 'billing', key: `${x.label.toUpperCase()}_STRIPE_KEY`, value: `${x.label}-stripe` }))._id;
    x.ids.scopedSecret = (
      await t.as(x.admin).SecretsManagerRpc.create({ scope: 'project', projectId: x.ids.project, key: 'CRM_TOKEN', value: `${x.label}-crm` })
    )._id;
  },
  async tasks(t, x) {
    x.ids.taskInstance = `${x.label}-board`;
    // Assigned to the member's contact: the member gets a notification.
    const task = await t
      .as(x.admin)
      .TaskRpc.create({ taskInstanceId: x.ids.taskInstance, title: 'Call back', assignees: [x.ids.contact], comments: [{ content: 'First' }] });
    x.ids.task = task._id;
    x.ids.comment = task.comments[0].commentId;
    await t.as(x.admin).TaskRpc.create({ taskInstanceId: x.ids.taskInstance, title: 'Dial', parentId: task._id });
    x.ids.notification = (await t.as(x.member).NotificationRpc.getData()).data[0]._id;
  },
  async apps(t, x) {
    x.appToken = (await authorizeApp(t, x.admin)).accessToken;
    x.ids.oauthGrant = (await t.as(x.admin).OAuthServerRpc.listApps())[0]!.id;
  },
  async telephony(t, x) {
    x.ids.agentConfig = `${x.label}-agent-config`;
    await t.as(x.admin).TelephonyManagerRpc.assignUserExtension({ appUserId: x.ids.member, extension: '100' });
    await t.as(x.admin).TelephonyManagerRpc.assignAgentExtension({ extension: '101', agentConfigId: x.ids.agentConfig, agentContactId: x.ids.contact });
  },
  async workflows(t, x) {
    x.ids.workflowName = `${x.label} approval`;
    x.ids.workflow = (await t.as(x.admin).WorkflowRpc.create({ name: x.ids.workflowName, ...waitingGraph(), contextId: x.ids.contact }))._id;
    x.ids.run = waitingRun(await t.as(x.admin).WorkflowRpc.executeWorkflow({ workflowIdentifier: x.ids.workflow }));
  },
};
