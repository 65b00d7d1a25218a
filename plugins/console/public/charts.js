import { h, s, uid } from './dom.js';

/** The drawing's own units; the SVG scales to its box (console.css). */
const WIDTH = 640;
const HEIGHT = 240;
const LEFT = 64;
const RIGHT = 8;
const TOP = 12;
const BOTTOM = 28;
/** Series colours are classes of console.css (series-0 … series-7), not style attributes. */
const PALETTE = 8;

export const number = (value) => value.toLocaleString();
export const compact = (value) => new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 }).format(value);

/** The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value`: the top of the axis. */
function axisTop(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((step) => step * power).find((top) => top >= value);
}

/**
 * A bar chart as SVG: a group of bars per `groups[i].label`, one bar per
 * series (side by side, or stacked when `stacked`). Screen readers get
 * `title` and `summary` (role img with its title and description); each bar
 * has a tooltip with its value, written by `format` (the axis by `tick`); the
 * caller puts the numbers in a table too.
 */
export function barChart({ title, summary, unit, series, groups, stacked = false, format = number, tick = compact }) {
  const titleId = uid('chart-title');
  const descId = uid('chart-desc');
  const heights = groups.map(({ values }) => (stacked ? values.reduce((sum, value) => sum + value, 0) : Math.max(0, ...values)));
  const top = axisTop(Math.max(0, ...heights));
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const y = (value) => TOP + plotHeight - (value / top) * plotHeight;
  const band = (WIDTH - LEFT - RIGHT) / Math.max(groups.length, 1);
  const barWidth = Math.min(56, band * 0.7);
  // At most about ten labels under the axis, so they never overlap.
  const labelEvery = Math.ceil(groups.length / 10);

  const bar = (group, index, value, x, width, base) =>
    value > 0 &&
    s(
      'rect',
      { class: `bar series-${index % PALETTE}`, x, width, y: y(base + value), height: y(base) - y(base + value) },
      s('title', {}, `${group.label}, ${series[index]}: ${format(value)}${unit ? ` ${unit}` : ''}`),
    );

  const svg = s(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`, class: 'chart' },
    s('title', { id: titleId }, title),
    s('desc', { id: descId }, summary),
    [0, 0.25, 0.5, 0.75, 1].map((share) =>
      s(
        'g',
        { class: 'tick' },
        s('line', { x1: LEFT, x2: WIDTH - RIGHT, y1: y(share * top), y2: y(share * top) }),
        s('text', { x: LEFT - 6, y: y(share * top) + 4, 'text-anchor': 'end' }, tick(share * top)),
      ),
    ),
    groups.map((group, position) => {
      const left = LEFT + band * position + (band - barWidth) / 2;
      let base = 0;
      const bars = group.values.map((value, index) => {
        if (!stacked) return bar(group, index, value, left + (barWidth / series.length) * index, barWidth / series.length, 0);
        const drawn = bar(group, index, value, left, barWidth, base);
        base += value;
        return drawn;
      });
      const label =
        position % labelEvery === 0 &&
        s('text', { class: 'axis-label', x: LEFT + band * position + band / 2, y: HEIGHT - 8, 'text-anchor': 'middle' }, group.label);
      return s('g', {}, bars, label);
    }),
  );
  const legend = h(
    'ul',
    { class: 'legend', 'aria-label': `Series of ${title}` },
    series.map((name, index) => h('li', {}, h('span', { class: `swatch series-${index % PALETTE}`, 'aria-hidden': 'true' }), name)),
  );
  return h('figure', { class: 'chart-figure' }, h('figcaption', {}, title), svg, legend);
}
