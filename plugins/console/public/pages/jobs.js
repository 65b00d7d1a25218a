import { action, field, h, section, table, when } from '../dom.js';
import { rpc } from '../rpc.js';

const STATES = ['waiting', 'retrying', 'running', 'done', 'dead', 'cancelled'];
const PAGE_SIZE = 50;
const state = (value) => h('span', { class: `state state-${value}` }, value);

/**
 * The subscription's background jobs (JobQueueRpc, plugins/job-queue): how
 * many of each queue are in each state, then the newest jobs of a state with
 * their last error; an admin puts a dead one back in its queue.
 */
export function jobsPage(session) {
  const queues = section('Queues', async () =>
    table(
      'Jobs per queue and state',
      [['Queue', (row) => h('code', {}, row.queue)], ...STATES.map((name) => [name[0].toUpperCase() + name.slice(1), (row) => String(row.states[name])])],
      await rpc('JobQueueRpc.getCounts'),
      'No background jobs of this subscription yet.',
    ),
  );
  const filter = h(
    'select',
    { name: 'state' },
    h('option', { value: '' }, 'every state'),
    STATES.map((name) => h('option', { value: name }, name)),
  );
  const jobs = section('Jobs', async (refresh) => {
    const { docs, totalDocs } = await rpc('JobQueueRpc.listJobs', { pageSize: PAGE_SIZE, ...(filter.value ? { state: filter.value } : {}) });
    return [
      h('p', {}, `${totalDocs} jobs${filter.value ? ` ${filter.value}` : ''}, newest first${totalDocs > PAGE_SIZE ? ` (the latest ${PAGE_SIZE} shown)` : ''}.`),
      action('Refresh', async () => Promise.all([refresh(), queues.refresh()]), { class: 'secondary' }),
      table(
        'Background jobs, newest first',
        [
          ['Queue', (job) => h('code', {}, job.queue)],
          ['State', (job) => state(job.state)],
          ['Attempts', (job) => String(job.attempts)],
          ['Created', (job) => when(job.createdAt)],
          ['Finished', (job) => when(job.finishedAt)],
          ['Last error', (job) => job.lastError],
          [
            'Actions',
            (job) =>
              job.state === 'dead' &&
              session.user.role === 'admin' &&
              action(
                'Retry',
                async () => {
                  await rpc('JobQueueRpc.retryJob', { jobId: job.id });
                  await Promise.all([refresh(), queues.refresh()]);
                },
                { 'aria-label': `Retry the ${job.queue} job of ${when(job.createdAt)}` },
              ),
          ],
        ],
        docs,
        'No job in this state.',
      ),
    ];
  });
  filter.addEventListener('change', () => jobs.refresh());
  return [queues, field('Show jobs in state', filter), jobs];
}
