// Audit log: the operator actions of GET /v1/audit, newest first - who
// (the token's name, or uumctl:<user>), what, when, on how many entries,
// with which parameters - filtered by action and actor, a page at a time.
// It is read-only: no route changes the log.
import { api } from './api.js';
import { h, clear } from './dom.js';
import { pageHeader, table, card, problem } from './ui.js';
import * as fmt from './fmt.js';

const LIMIT = 50;
// MAX_ROWS bounds what "Load more" keeps on the page: past it, narrow
// the filters.
const MAX_ROWS = 1000;

// ACTIONS are store/audit.go's actions, as the filter offers them.
const ACTIONS = [
  ['dlq.replay', 'dead letter replayed'], ['dlq.replay_bulk', 'dead letters replayed by filter'],
  ['dlq.delete', 'dead letter deleted'], ['dlq.delete_bulk', 'dead letters deleted by filter'],
  ['dlq.edit', 'dead letter corrected'], ['drain_now', 'drain now'], ['pause', 'paused'], ['resume', 'resumed'],
  ['counters.accept', 'counters file accepted'],
];
const DESCRIBE = Object.fromEntries(ACTIONS);

export function mount(el) {
  const action = h('select', { class: 'select', name: 'action', id: 'audit-action' },
    h('option', { value: '', text: 'any action' }), ACTIONS.map(([v, label]) => h('option', { value: v, text: `${v} (${label})` })));
  const actor = h('input', { class: 'input', name: 'actor', id: 'audit-actor', placeholder: 'token name (exact)' });
  const list = h('div', { id: 'audit-list' });
  clear(el,
    pageHeader('Audit log', 'What operators did, newest first: every replay, deletion, correction, pause, resume, drain now and counters acceptance, under the token\'s name. Nobody can edit it.'),
    card(null, h('form', { class: 'filters', id: 'audit-filters', onsubmit: (e) => { e.preventDefault(); reload(); } },
      field('Action', action), field('Actor', actor),
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Apply'),
      h('button', { type: 'button', class: 'btn', onclick: () => { action.value = ''; actor.value = ''; reload(); } }, 'Reset')),
    list));

  let rows = [], cursor = '', stopped = false, gen = 0;

  function field(label, input) { return h('label', { class: 'field' }, h('span', { text: label }), input); }

  function reload() {
    rows = []; cursor = ''; gen++;
    return more();
  }

  async function more() {
    const mine = gen;
    try {
      const page = await api('/v1/audit', { query: { action: action.value, actor: actor.value.trim(), limit: LIMIT, cursor } });
      if (stopped || mine !== gen) return; // a newer filter's answer wins
      rows = rows.concat(page.actions);
      cursor = page.next_cursor || '';
      render();
    } catch (e) {
      if (!stopped) problem(list, e, 'the audit log');
    }
  }

  function render() {
    const full = rows.length >= MAX_ROWS;
    clear(list, table(
      [{ label: 'When (UTC)' }, { label: 'Who' }, { label: 'What' }, { label: 'Entries', class: 'num' }, { label: 'Details' }],
      rows.map((a) => [
        h('span', { title: fmt.ago(a.at), text: fmt.utc(a.at) }),
        h('span', {}, h('span', { class: 'mono', dataset: { actor: a.actor }, text: fmt.escapeText(a.actor) }),
          a.via !== 'api' ? h('span', { class: 'muted', text: ` via ${a.via}` }) : null),
        h('span', { title: DESCRIBE[a.action] || '' }, h('span', { class: 'mono', text: a.action })),
        h('span', { dataset: { entries: a.entries }, text: fmt.int(a.entries) }),
        h('code', { class: 'raw-preview', text: params(a.params) }),
      ]),
      { empty: 'No action matches.', rowAttrs: (i) => ({ dataset: { auditId: rows[i].id, action: rows[i].action } }) }),
    h('div', { class: 'pager' },
      h('span', { class: 'muted', dataset: { count: rows.length }, text: `${fmt.int(rows.length)} shown${full ? `: at most ${fmt.int(MAX_ROWS)}, narrow the filters to see older ones` : ''}` }),
      cursor && !full ? h('button', { type: 'button', class: 'btn', id: 'audit-more', onclick: () => more() }, 'Load more') : null));
  }

  reload();
  return () => { stopped = true; };
}

// params writes an action's parameters as compact JSON, its control and
// direction characters escaped: a filter holds what an operator typed.
function params(p) {
  if (!p || (typeof p === 'object' && Object.keys(p).length === 0)) return '–';
  return fmt.escapeText(JSON.stringify(p));
}
