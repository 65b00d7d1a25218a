import { h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

const state = (value) => h('span', { class: `state state-${value}` }, value);

export function runsPage() {
  const workflows = section('Workflow runs', async () => {
    const { data } = await rpc('WorkflowRpc.listInstances', { pageSize: 50 });
    return table(
      'Workflow runs, newest first',
      [
        ['Workflow', (run) => run.workflowName],
        ['Status', (run) => state(run.status)],
        ['Steps', (run) => String(run.steps)],
        ['Waiting for', (run) => run.waitingFor],
        ['Started', (run) => when(run.createdAt)],
        ['Finished', (run) => when(run.finishedAt)],
        ['Error', (run) => run.error],
      ],
      data,
    );
  });
  const tasks = section('Scheduled tasks', async () => {
    const { data } = await rpc('SchedulerRpc.getData', { pageSize: 50 });
    return table(
      'Scheduled tasks',
      [
        ['Name', (task) => task.name],
        ['Schedule', (task) => h('code', {}, `${task.schedule}${task.timeZone ? ` (${task.timeZone})` : ''}`)],
        ['Action', (task) => task.actionType],
        ['Enabled', (task) => (task.enabled ? 'yes' : 'no')],
        ['Last run', (task) => when(task.lastRun)],
        ['Next run', (task) => when(task.nextRun)],
      ],
      data,
    );
  });
  const runs = section('Last runs of scheduled tasks', async () => {
    const { data } = await rpc('SchedulerRpc.listRuns', { pageSize: 50 });
    return table(
      'Runs of scheduled tasks, newest first',
      [
        ['Task', (run) => run.taskName],
        ['Status', (run) => state(run.status)],
        ['Due', (run) => when(run.scheduledFor)],
        ['Delay', (run) => `${run.delayMs} ms`],
        ['Attempts', (run) => String(run.attempts)],
        ['Error', (run) => run.error],
      ],
      data,
    );
  });
  return [workflows, tasks, runs];
}

export function knowledgePage() {
  const documents = section('Documents', async () => {
    const { data, totalCount } = await rpc('KnowledgeBaseAdminRpc.listDocuments', { limit: 50 });
    return [
      h('p', {}, `${totalCount} documents.`),
      table(
        'Documents and their ingestion state',
        [
          ['Name', (doc) => doc.name],
          ['Collection', (doc) => doc.collection],
          ['Status', (doc) => state(doc.status)],
          ['Version', (doc) => String(doc.version)],
          ['Chunks', (doc) => String(doc.chunkCount)],
          ['Updated', (doc) => when(doc.updatedAt)],
          ['Error', (doc) => doc.error],
        ],
        data,
      ),
    ];
  });
  const jobs = section('Ingestion jobs', async () => {
    const { data } = await rpc('KnowledgeBaseAdminRpc.listJobs', { limit: 50 });
    return table(
      'Ingestion jobs, newest first',
      [
        ['Document', (job) => h('code', {}, job.documentId)],
        ['Version', (job) => String(job.version)],
        ['State', (job) => state(job.state)],
        ['Queued', (job) => when(job.createdAt)],
        ['Finished', (job) => when(job.finishedAt)],
        ['Error', (job) => job.error],
      ],
      data,
    );
  });
  return [documents, jobs];
}
