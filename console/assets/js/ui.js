// Page furniture shared by the pages: cards, tables, toasts, the confirm
// dialog, load errors.
import { h, clear, $ } from './dom.js';

export function card(title, ...children) {
  return h('section', { class: 'card' }, title ? h('h2', { class: 'card-title', text: title }) : null, ...children);
}

export function pageHeader(title, subtitle, ...actions) {
  return h('div', { class: 'page-header' },
    h('div', {}, h('h1', { text: title }), subtitle ? h('p', { class: 'muted', text: subtitle }) : null),
    h('div', { class: 'page-actions' }, ...actions));
}

// table returns a table of columns ({label, class}) and rows (arrays of
// cells: nodes or text); onRow(i) makes rows clickable.
export function table(columns, rows, { onRow, empty = 'Nothing here yet.', rowAttrs } = {}) {
  const body = rows.length === 0
    ? [h('tr', {}, h('td', { class: 'empty', colspan: columns.length, text: empty }))]
    : rows.map((cells, i) => h('tr', {
      class: onRow ? 'clickable' : null,
      tabindex: onRow ? 0 : null,
      onclick: onRow ? () => onRow(i) : null,
      onkeydown: onRow ? (e) => { if (e.key === 'Enter') onRow(i); } : null,
      ...(rowAttrs ? rowAttrs(i) : {}),
    }, cells.map((c, j) => h('td', { class: columns[j].class || null }, c))));
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.class || null, text: c.label })))),
    h('tbody', {}, body)));
}

export function toast(message, kind = 'ok') {
  const el = h('div', { class: `toast toast-${kind}`, role: 'status', text: message });
  $('#toasts').append(el);
  setTimeout(() => el.remove(), 5000);
}

// problem shows why a read failed in place of its content.
export function problem(el, err, what) {
  clear(el, h('div', { class: 'notice notice-error' },
    h('strong', { text: `Could not load ${what}. ` }), err.message || String(err)));
}

// confirm asks before an action: title, body nodes, the confirming
// button's label (danger styles it red). Resolves true if confirmed.
export function confirm({ title, body, ok = 'Confirm', danger = false }) {
  const dlg = $('#confirm');
  clear($('#confirm-title'), title);
  clear($('#confirm-body'), ...[].concat(body));
  const okBtn = $('#confirm-ok');
  okBtn.textContent = ok;
  okBtn.className = danger ? 'btn btn-danger' : 'btn btn-primary';
  return new Promise((resolve) => {
    const done = (v) => {
      okBtn.onclick = null; $('#confirm-cancel').onclick = null; dlg.onclose = null;
      if (dlg.open) dlg.close();
      resolve(v);
    };
    okBtn.onclick = () => done(true);
    $('#confirm-cancel').onclick = () => done(false);
    dlg.onclose = () => done(false);
    dlg.showModal();
    okBtn.focus();
  });
}

// stat is a figure with a label and a note; key names it for tests.
export function stat(label, key) {
  const value = h('div', { class: 'stat-value', dataset: { metric: key }, text: '–' });
  const note = h('div', { class: 'stat-note muted', text: '' });
  return { el: h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: label }), value, note), value, note };
}

export function segmented(options, current, onChange) {
  const wrap = h('div', { class: 'segmented', role: 'group' });
  for (const [value, label] of options) {
    wrap.append(h('button', {
      type: 'button', class: value === current ? 'active' : null, dataset: { value },
      onclick: () => {
        for (const b of wrap.children) b.classList.toggle('active', b.dataset.value === value);
        onChange(value);
      },
    }, label));
  }
  return wrap;
}
