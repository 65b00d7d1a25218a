import { barChart } from '../charts.js';
import { h, section, table } from '../dom.js';
import { rpc } from '../rpc.js';

const DAYS = 30;
const number = (value) => value.toLocaleString();
const unique = (values) => [...new Set(values)].sort();

/** Tokens per model and day, stacked: what the subscription's AI calls used. */
function tokensChart(daily) {
  const days = unique(daily.map((row) => row.day));
  const models = unique(daily.map((row) => row.model));
  const tokens = (day, model) => daily.find((row) => row.day === day && row.model === model)?.totalTokens ?? 0;
  const totals = days.map((day) => models.reduce((sum, model) => sum + tokens(day, model), 0));
  const busiest = totals.indexOf(Math.max(...totals));
  return barChart({
    title: `Tokens per day and model, last ${DAYS} days`,
    summary:
      `${number(totals.reduce((sum, total) => sum + total, 0))} tokens over ${days.length} days with calls, by ${models.join(', ')}; ` +
      `the most on ${days[busiest]}: ${number(totals[busiest])} tokens.`,
    unit: 'tokens',
    series: models,
    groups: days.map((day) => ({ label: day.slice(5), values: models.map((model) => tokens(day, model)) })),
    stacked: true,
  });
}

/** The 50th, 90th and 99th percentile of each model's call durations, side by side. */
function latencyChart(latency) {
  return barChart({
    title: `Call duration percentiles per model, last ${DAYS} days`,
    summary: latency.map((row) => `${row.model}: p50 ${number(row.p50Ms)} ms, p90 ${number(row.p90Ms)} ms, p99 ${number(row.p99Ms)} ms`).join('; '),
    unit: 'ms',
    series: ['p50', 'p90', 'p99'],
    groups: latency.map((row) => ({ label: row.model, values: [row.p50Ms, row.p90Ms, row.p99Ms] })),
  });
}

/** A chart's numbers, folded under it: the chart's description already says the gist. */
const asTable = (label, content) => h('details', { class: 'numbers' }, h('summary', {}, label), content);

/**
 * AI usage as pictures, each with its numbers as a table beside it. An admin
 * sees the subscription's calls, anyone else the calls made for them
 * (plugins/ai-telemetry/README.md). No cost: the AI catalogue has no prices.
 */
export function telemetryPage() {
  const usage = rpc('AITelemetryRpc.getUsage', { filter: { dateFrom: new Date(Date.now() - DAYS * 86_400_000).toISOString() } });
  const tokens = section('Tokens', async () => {
    const { daily } = await usage;
    if (daily.length === 0) return h('p', { class: 'empty' }, `No AI calls in the last ${DAYS} days.`);
    return [
      tokensChart(daily),
      asTable(
        'Tokens as a table',
        table(
          'Calls and tokens per day and model',
          [
            ['Day', (row) => row.day],
            ['Model', (row) => row.model],
            ['Calls', (row) => number(row.calls)],
            ['Failed', (row) => number(row.errors)],
            ['Input tokens', (row) => number(row.inputTokens)],
            ['Output tokens', (row) => number(row.outputTokens)],
            ['Total tokens', (row) => number(row.totalTokens)],
          ],
          daily,
        ),
      ),
    ];
  });
  const latency = section('Latency', async () => {
    const { latency: rows } = await usage;
    if (rows.length === 0) return h('p', { class: 'empty' }, `No AI calls in the last ${DAYS} days.`);
    return [
      latencyChart(rows),
      asTable(
        'Latency as a table',
        table(
          'Call duration percentiles per model',
          [
            ['Model', (row) => row.model],
            ['Calls', (row) => number(row.calls)],
            ['p50 (ms)', (row) => number(row.p50Ms)],
            ['p90 (ms)', (row) => number(row.p90Ms)],
            ['p99 (ms)', (row) => number(row.p99Ms)],
          ],
          rows,
        ),
      ),
    ];
  });
  return [tokens, latency, h('p', { class: 'hint' }, 'Cost is not shown: the AI catalogue holds no prices per token.')];
}
