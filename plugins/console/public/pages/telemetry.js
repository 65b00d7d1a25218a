import { barChart, compact, number } from '../charts.js';
import { h, section, table } from '../dom.js';
import { rpc } from '../rpc.js';

const DAYS = 30;
const unique = (values) => [...new Set(values)].sort();

/** Dollars: cents from a cent up, two significant digits below (a day of embeddings may cost a fraction of a cent). */
const usd = (value) =>
  new Intl.NumberFormat(undefined, {
    style: 'currency',
    currency: 'USD',
    ...(value === 0 || value >= 0.01 ? { minimumFractionDigits: 2, maximumFractionDigits: 2 } : { maximumSignificantDigits: 2 }),
  }).format(value);

/** One figure of the usage rows per model and day, stacked; `format` writes an amount with its unit. */
function dailyChart(daily, { field, title, what, format, tick = format }) {
  const days = unique(daily.map((row) => row.day));
  const models = unique(daily.map((row) => row.model));
  const amount = (day, model) => daily.find((row) => row.day === day && row.model === model)?.[field] ?? 0;
  const totals = days.map((day) => models.reduce((sum, model) => sum + amount(day, model), 0));
  const busiest = totals.indexOf(Math.max(...totals));
  return barChart({
    title: `${title}, last ${DAYS} days`,
    summary:
      `${format(totals.reduce((sum, total) => sum + total, 0))} ${what} over ${days.length} days with calls, by ${models.join(', ')}; ` +
      `the most on ${days[busiest]}: ${format(totals[busiest])}.`,
    unit: '',
    series: models,
    groups: days.map((day) => ({ label: day.slice(5), values: models.map((model) => amount(day, model)) })),
    stacked: true,
    format,
    tick,
  });
}

const tokensChart = (daily) =>
  dailyChart(daily, { field: 'totalTokens', title: 'Tokens per day and model', what: 'used', format: (value) => `${number(value)} tokens`, tick: compact });

/** The axis of the cost chart: its quarter steps need more than cents ($0.015). */
const usdTick = (value) => new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', maximumSignificantDigits: 3 }).format(value);

/** What the calls cost at the AI catalogue's prices; a model without a price adds nothing (its rows' cost is null). */
const costChart = (daily) => dailyChart(daily, { field: 'costUsd', title: 'Cost per day and model', what: 'spent', format: usd, tick: usdTick });

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
 * (plugins/ai-telemetry/README.md). Cost is each call's, at the catalogue's
 * prices when it was made.
 */
export function telemetryPage() {
  const usage = rpc('AITelemetryRpc.getUsage', { filter: { dateFrom: new Date(Date.now() - DAYS * 86_400_000).toISOString() } });
  const none = () => h('p', { class: 'empty' }, `No AI calls in the last ${DAYS} days.`);
  const tokens = section('Tokens', async () => {
    const { daily } = await usage;
    if (daily.length === 0) return none();
    return [
      tokensChart(daily),
      asTable(
        'Tokens and cost as a table',
        table(
          'Calls, tokens and cost per day and model',
          [
            ['Day', (row) => row.day],
            ['Model', (row) => row.model],
            ['Calls', (row) => number(row.calls)],
            ['Failed', (row) => number(row.errors)],
            ['Input tokens', (row) => number(row.inputTokens)],
            ['Output tokens', (row) => number(row.outputTokens)],
            ['Total tokens', (row) => number(row.totalTokens)],
            ['Cost', (row) => (row.costUsd === null ? 'no price' : usd(row.costUsd))],
          ],
          daily,
        ),
      ),
    ];
  });
  const cost = section('Cost', async () => {
    const { daily } = await usage;
    if (daily.length === 0) return none();
    const unpriced = unique(daily.filter((row) => row.costUsd === null).map((row) => row.model));
    const hint =
      unpriced.length > 0 && h('p', { class: 'hint' }, `Not priced: ${unpriced.join(', ')}. The AI catalogue gives these models no costPerMillionTokens.`);
    if (unpriced.length === unique(daily.map((row) => row.model)).length) return hint;
    return [costChart(daily), hint].filter(Boolean);
  });
  const latency = section('Latency', async () => {
    const { latency: rows } = await usage;
    if (rows.length === 0) return none();
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
  return [tokens, cost, latency];
}
