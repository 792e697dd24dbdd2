// Small SVG charts, drawn at the width of their card: a line chart of active
// subscribers over time and a stacked bar chart of reminders per day.

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
