// Small SVG charts, drawn at the width of their card: line charts (active
// subscribers, MRR), stacked bars (reminders per day) and bars side by side
// with an optional line on a scale of its own (churn and its rate, revenue
// and refunds).

import { fitted, formatDay, h, s } from './dom.js';

const HEIGHT = 240;
const LEFT = 44;
const RIGHT = 14;
const TOP = 14;
const BOTTOM = 30;

function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((step) => step * magnitude).find((candidate) => candidate >= value) || 10 * magnitude;
}

/** The frame: horizontal grid with values, an x for index i of `count` slots. */
function frame(title, maximum, width) {
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${width} ${HEIGHT}`, width, height: HEIGHT, role: 'img', 'aria-label': title },
    s('title', {}, title));
  const y = (value) => TOP + (1 - value / maximum) * (HEIGHT - TOP - BOTTOM);
  for (let index = 0; index <= 4; index += 1) {
    const value = (maximum / 4) * index;
    svg.append(
      s('line', { class: 'grid', x1: LEFT, x2: width - RIGHT, y1: y(value), y2: y(value) }),
      s('text', { class: 'axis-label', x: LEFT - 6, y: y(value) + 4, 'text-anchor': 'end' }, Number.isInteger(value) ? value : value.toFixed(1)));
  }
  return { svg, y };
}

/** Labels every so many slots, so that they do not collide at this width. */
function labelEvery(count, width) {
  return Math.max(1, Math.ceil(count / Math.max(2, Math.floor((width - LEFT - RIGHT) / 56))));
}

/** series: [{name, points: [{at, value}]}]. */
export function lineChart(title, series) {
  const instants = [...new Set(series.flatMap((line) => line.points.map((point) => point.at)))].sort();
  const maximum = niceMax(Math.max(0, ...series.flatMap((line) => line.points.map((point) => point.value))));
  const draw = (available) => {
    const width = Math.max(300, available);
    const { svg, y } = frame(title, maximum, width);
    const x = (index) => LEFT + (instants.length <= 1 ? 0.5 : index / (instants.length - 1)) * (width - LEFT - RIGHT);
    const every = labelEvery(instants.length, width);
    instants.forEach((at, index) => {
      if (index % every === 0) svg.append(s('text', { class: 'axis-label', x: x(index), y: HEIGHT - 10, 'text-anchor': 'middle' }, formatDay(at).slice(5)));
    });
    series.forEach((line, index) => {
      const points = line.points.map((point) => [x(instants.indexOf(point.at)), y(point.value)]);
      svg.append(s('g', { class: `series series-${index % 6}`, 'data-series': line.name },
        s('polyline', { points: points.map((point) => point.join(',')).join(' ') }),
        points.map(([px, py], pointIndex) => s('circle', { cx: px, cy: py, r: 2.5 },
          s('title', {}, `${line.name}, ${formatDay(line.points[pointIndex].at)}: ${line.points[pointIndex].value}`)))));
    });
    return svg;
  };
  const key = h('ul', { class: 'legend' }, series.map((line, index) =>
    h('li', {}, h('span', { class: `swatch series-${index % 6}`, 'aria-hidden': 'true' }), line.name)));
  return h('figure', { class: 'chart-figure' }, fitted('chart-box', draw), key);
}

/** days: [{day, values: {key: count}}]; names: [{key, label, class}] in stacking order. */
export function stackedBars(title, days, names) {
  const totals = days.map((day) => names.reduce((sum, name) => sum + (day.values[name.key] || 0), 0));
  const maximum = niceMax(Math.max(0, ...totals));
  const draw = (available) => {
    const width = Math.max(300, available);
    const { svg, y } = frame(title, maximum, width);
    const slot = (width - LEFT - RIGHT) / Math.max(1, days.length);
    const every = labelEvery(days.length, width);
    days.forEach((day, index) => {
      let base = 0;
      const left = LEFT + index * slot + slot * 0.15;
      for (const name of names) {
        const value = day.values[name.key] || 0;
        if (value > 0) {
          svg.append(s('rect', { class: `bar ${name.class}`, x: left, width: slot * 0.7, y: y(base + value), height: y(base) - y(base + value) },
            s('title', {}, `${day.day}: ${value} ${name.label}`)));
        }
        base += value;
      }
      if (index % every === 0) {
        svg.append(s('text', { class: 'axis-label', x: left + slot * 0.35, y: HEIGHT - 10, 'text-anchor': 'middle' }, day.day.slice(5)));
      }
    });
    return svg;
  };
  const key = h('ul', { class: 'legend' }, names.map((name) =>
    h('li', {}, h('span', { class: `swatch ${name.class}`, 'aria-hidden': 'true' }), name.label)));
  return h('figure', { class: 'chart-figure' }, fitted('chart-box', draw), key);
}

/**
 * Bars side by side in each slot, and optionally a rate (1 = 100%) as a line
 * on a scale of its own, the right-hand axis. slots: [{at, values: {key:
 * number|null}}]; bars: [{key, label, class}]; line: {key, label, format:
 * value => text}, whose null values leave a gap.
 */
export function barChart(title, slots, bars, { line } = {}) {
  const maximum = niceMax(Math.max(0, ...slots.flatMap((slot) => bars.map((bar) => slot.values[bar.key] || 0))));
  const lineValues = line ? slots.map((slot) => slot.values[line.key]).filter((value) => value !== null && value !== undefined) : [];
  // The rate's axis ends at a round percentage, at least 4% so that small rates still read.
  const lineMaximum = niceMax(Math.max(0, ...lineValues) * 100) / 100;
  const draw = (available) => {
    const width = Math.max(300, available);
    const right = line ? 52 : 0;
    const { svg, y } = frame(title, maximum, width - right);
    const slot = (width - right - LEFT - RIGHT) / Math.max(1, slots.length);
    const every = labelEvery(slots.length, width - right);
    const barWidth = (slot * 0.7) / bars.length;
    slots.forEach((item, index) => {
      const left = LEFT + index * slot + slot * 0.15;
      bars.forEach((bar, barIndex) => {
        const value = item.values[bar.key] || 0;
        if (value > 0) {
          svg.append(s('rect', { class: `bar ${bar.class}`, x: left + barIndex * barWidth, width: barWidth, y: y(value), height: y(0) - y(value) },
            s('title', {}, `${formatDay(item.at)}: ${value} ${bar.label}`)));
        }
      });
      if (index % every === 0) {
        svg.append(s('text', { class: 'axis-label', x: left + slot * 0.35, y: HEIGHT - 10, 'text-anchor': 'middle' }, formatDay(item.at).slice(5)));
      }
    });
    if (line) {
      const ly = (value) => TOP + (1 - value / lineMaximum) * (HEIGHT - TOP - BOTTOM);
      for (let index = 0; index <= 4; index += 1) {
        const value = (lineMaximum / 4) * index;
        svg.append(s('text', { class: 'axis-label line-axis', x: width - right + 4, y: ly(value) + 4, 'text-anchor': 'start' }, line.format(value)));
      }
      const points = [];
      slots.forEach((item, index) => {
        const value = item.values[line.key];
        if (value !== null && value !== undefined) points.push([LEFT + index * slot + slot * 0.5, ly(value), item, value]);
      });
      svg.append(s('g', { class: 'series series-line', 'data-series': line.label },
        points.length > 1 ? s('polyline', { points: points.map(([px, py]) => `${px},${py}`).join(' ') }) : null,
        points.map(([px, py, item, value]) => s('circle', { cx: px, cy: py, r: 3 },
          s('title', {}, `${line.label}, ${formatDay(item.at)}: ${line.format(value)}`)))));
    }
    svg.setAttribute('width', width);
    svg.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
    return svg;
  };
  const key = h('ul', { class: 'legend' },
    bars.map((bar) => h('li', {}, h('span', { class: `swatch ${bar.class}`, 'aria-hidden': 'true' }), bar.label)),
    line ? h('li', {}, h('span', { class: 'swatch series-line', 'aria-hidden': 'true' }), line.label) : null);
  return h('figure', { class: 'chart-figure' }, fitted('chart-box', draw), key);
}
