// DOM helpers. Every value from the ledger goes in as text (text nodes,
// textContent, setAttribute): nothing here parses HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') element.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    else if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** An HTML element: h('a', {href: '#/'}, 'text', otherNode). */
export function h(tag, attributes, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** An SVG element, the same way. */
export function s(tag, attributes, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attributes, children);
}

/**
 * A box that draws `draw(width)` at its own width in CSS pixels, and again
 * when that width changes, so SVG text keeps its size on a phone and on a
 * wide screen alike.
 */
export function fitted(className, draw) {
  const box = h('div', { class: className });
  let drawnWidth = 0;
  const observer = new ResizeObserver((entries) => {
    if (!box.isConnected) {
      observer.disconnect();
      return;
    }
    const width = Math.floor(entries[entries.length - 1].contentRect.width);
    if (width > 0 && width !== drawnWidth) {
      drawnWidth = width;
      box.replaceChildren(draw(width));
    }
  });
  observer.observe(box);
  return box;
}

/** Replaces an element's children. */
export function replace(element, ...children) {
  element.replaceChildren();
  return build(element, {}, children);
}

/** "2026-11-01 10:00:00 UTC" from an RFC 3339 instant; a dash for none. */
/** Milliseconds since the epoch of an RFC 3339 instant; null if it is not one. */
export function ms(iso) {
  const value = Date.parse(iso);
  return Number.isNaN(value) ? null : value;
}

export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

/** A <time> element showing formatTime, the exact instant as its title. */
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: iso, title: iso }, formatTime(iso));
}

/** The date part only: "2026-11-01". */
export function formatDay(iso) {
  return new Date(iso).toISOString().slice(0, 10);
}

/** A status pill; the word is always written, never only a colour. */
export function badge(text, kind) {
  return h('span', { class: ['badge', kind && `badge-${kind}`] }, text);
}

/** A link to a subscriber's page, optionally at an instant and in the Sandbox view. */
export function subscriberHref(id, at, environment) {
  let href = `#/subscriber?id=${encodeURIComponent(id)}`;
  if (at) href += `&at=${encodeURIComponent(at)}`;
  if (environment) href += `&environment=${encodeURIComponent(environment)}`;
  return href;
}

export function subscriberLink(id) {
  if (!id) return h('span', { class: 'muted' }, '—');
  return h('a', { href: subscriberHref(id), class: 'mono' }, id);
}

/**
 * A table in a scrolling wrapper. columns: [{label, cell: row => Node|string, class}].
 * An empty list shows `empty` instead.
 */
export function table(columns, rows, { empty = 'Nothing to show.', caption, rowClass } = {}) {
  if (!rows || rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', {},
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((column) => h('th', { scope: 'col', class: column.class }, column.label)))),
      h('tbody', {}, rows.map((row) => h('tr', { class: rowClass ? rowClass(row) : null },
        columns.map((column) => h('td', { class: column.class, 'data-label': column.label }, h('div', { class: 'cell' }, column.cell(row)))))))));
}

/** A titled card section. */
export function section(title, { id, actions } = {}, ...children) {
  const headingID = id ? `${id}-title` : null;
  return h('section', { class: 'card', id, 'aria-labelledby': headingID },
    h('div', { class: 'card-head' }, h('h2', { id: headingID }, title), actions || null),
    children);
}

/** A plain note for an endpoint this server does not have yet. */
export function unavailable(what) {
  return h('p', { class: 'note' }, `${what}: not available on this server yet.`);
}

/** A message for a failed request. */
export function failure(error) {
  return h('p', { class: 'error', role: 'alert' }, error && error.message ? error.message : String(error));
}

/** Pretty JSON as text, for raw data. */
export function rawJSON(value) {
  return h('pre', { class: 'raw' }, JSON.stringify(value, null, 2));
}
