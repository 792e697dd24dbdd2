// Small SVG charts: a line chart of active subscribers over time and a bar
// chart of reminders per day. Each has a table of the same numbers beside it.

import { formatDay, h, s } from './dom.js';

const WIDTH = 720;
const HEIGHT = 260;
const LEFT = 48;
const RIGHT = 16;
const TOP = 16;
const BOTTOM = 34;

function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  const steps = [1, 2, 2.5, 5, 10];
  return steps.map((step) => step * magnitude).find((candidate) => candidate >= value) || 10 * magnitude;
}

function frame(title, maximum, labels) {
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': title },
    s('title', {}, title));
  const y = (value) => TOP + (1 - value / maximum) * (HEIGHT - TOP - BOTTOM);
  for (let index = 0; index <= 4; index += 1) {
    const value = (maximum / 4) * index;
    svg.append(
      s('line', { class: 'grid', x1: LEFT, x2: WIDTH - RIGHT, y1: y(value), y2: y(value) }),
      s('text', { class: 'axis-label', x: LEFT - 6, y: y(value) + 4, 'text-anchor': 'end' }, Number.isInteger(value) ? value : value.toFixed(1)));
  }
  const every = Math.max(1, Math.ceil(labels.length / 8));
  const x = (index) => LEFT + (labels.length <= 1 ? 0.5 : index / (labels.length - 1)) * (WIDTH - LEFT - RIGHT);
  labels.forEach((label, index) => {
    if (index % every === 0) {
      svg.append(s('text', { class: 'axis-label', x: x(index), y: HEIGHT - 12, 'text-anchor': 'middle' }, label));
    }
  });
  return { svg, x, y };
}

/**
 * series: [{name, points: [{at, value}]}] sharing the same instants.
 */
export function lineChart(title, series) {
  const instants = [...new Set(series.flatMap((line) => line.points.map((point) => point.at)))].sort();
  const labels = instants.map((at) => formatDay(at).slice(5));
  const maximum = niceMax(Math.max(0, ...series.flatMap((line) => line.points.map((point) => point.value))));
  const { svg, x, y } = frame(title, maximum, labels);
  series.forEach((line, index) => {
    const points = line.points.map((point) => [x(instants.indexOf(point.at)), y(point.value)]);
    svg.append(s('g', { class: `series series-${index % 6}`, 'data-series': line.name },
      s('polyline', { points: points.map((point) => point.join(',')).join(' ') }),
      points.map(([px, py], pointIndex) => s('circle', { cx: px, cy: py, r: 2.5 },
        s('title', {}, `${line.name}, ${formatDay(line.points[pointIndex].at)}: ${line.points[pointIndex].value}`)))));
  });
  const key = h('ul', { class: 'legend' }, series.map((line, index) =>
    h('li', {}, h('span', { class: `swatch series-${index % 6}`, 'aria-hidden': 'true' }), line.name)));
  return h('figure', { class: 'chart-figure' }, h('div', { class: 'chart-scroll' }, svg), series.length > 1 ? key : null);
}

/**
 * days: [{day, values: {name: count}}], names in stacking order with a class each.
 */
export function stackedBars(title, days, names) {
  const labels = days.map((day) => day.day.slice(5));
  const totals = days.map((day) => names.reduce((sum, name) => sum + (day.values[name.key] || 0), 0));
  const maximum = niceMax(Math.max(0, ...totals));
  const { svg, y } = frame(title, maximum, []);
  const slot = (WIDTH - LEFT - RIGHT) / Math.max(1, days.length);
  const every = Math.max(1, Math.ceil(days.length / 8));
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
      svg.append(s('text', { class: 'axis-label', x: left + slot * 0.35, y: HEIGHT - 12, 'text-anchor': 'middle' }, labels[index]));
    }
  });
  const key = h('ul', { class: 'legend' }, names.map((name) =>
    h('li', {}, h('span', { class: `swatch ${name.class}`, 'aria-hidden': 'true' }), name.label)));
  return h('figure', { class: 'chart-figure' }, h('div', { class: 'chart-scroll' }, svg), key);
}
