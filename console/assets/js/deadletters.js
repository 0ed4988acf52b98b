// Dead letters: browse with the API's filters, read an entry's reason and
// raw bytes (as text: escapes for control, direction and invalid bytes),
// replay or delete one, replay every match after a dry run. Every action
// asks first; an admin token sees the actions, a read token does not (and
// the API would refuse them: 403).
import { api, session, enc } from './api.js';
import { h, clear } from './dom.js';
import { pageHeader, table, card, problem, toast, confirm } from './ui.js';
import * as fmt from './fmt.js';

const LIMIT = 50;

export function mount(el) {
  const admin = session.can('admin');
  const f = {
    status: h('select', { class: 'select', name: 'status' },
      h('option', { value: 'open', text: 'open' }), h('option', { value: 'replayed', text: 'replayed' }),
      h('option', { value: 'deleted', text: 'deleted' }), h('option', { value: '', text: 'any status' })),
    reason: h('input', { class: 'input', name: 'reason', placeholder: 'reason contains…' }),
    event_name: h('input', { class: 'input', name: 'event_name', placeholder: 'event name' }),
    correlation_id: h('input', { class: 'input', name: 'correlation_id', placeholder: 'correlation id' }),
    from: h('input', { class: 'input', name: 'from', type: 'datetime-local', step: 1 }),
    to: h('input', { class: 'input', name: 'to', type: 'datetime-local', step: 1 }),
  };
  const summary = h('div', { class: 'stats-row' });
  const list = h('div');
  const detail = h('div', { id: 'dl-detail' });
  const bulk = admin ? h('button', { type: 'button', class: 'btn btn-primary', id: 'bulk-replay', onclick: () => bulkReplay() }, 'Replay matching…') : null;
  clear(el,
    pageHeader('Dead letters', admin ? 'Entries the drain could not count. Fix the cause, then replay them.'
      : 'Entries the drain could not count. Your token is read-only: an admin token replays and deletes.', bulk),
    summary,
    card(null, h('form', { class: 'filters', id: 'dl-filters', onsubmit: (e) => { e.preventDefault(); reload(); } },
      field('Status', f.status), field('Reason', f.reason), field('Event name', f.event_name),
      field('Correlation id', f.correlation_id), field('First failed from (UTC)', f.from), field('to (UTC)', f.to),
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Apply'),
      h('button', { type: 'button', class: 'btn', onclick: () => { for (const [k, i] of Object.entries(f)) i.value = k === 'status' ? 'open' : ''; reload(); } }, 'Reset')),
    list),
    detail);

  let rows = [], cursor = '', stopped = false, selectedID = null;

  function field(label, input) { return h('label', { class: 'field' }, h('span', { text: label }), input); }

  // filters returns the query of the form: datetime-local values are UTC.
  function filters() {
    const q = {};
    for (const [k, i] of Object.entries(f)) {
      if (!i.value) continue;
      q[k] = (k === 'from' || k === 'to') ? new Date(i.value + 'Z').toISOString().replace(/\.000Z$/, 'Z') : i.value.trim();
    }
    return q;
  }

  async function loadSummary() {
    try {
      const { data } = await api('/v1/metrics');
      if (stopped) return;
      clear(summary,
        h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: 'Open dead letters' }),
          h('div', { class: 'stat-value', dataset: { metric: 'dlq_count' }, text: fmt.int(data.dlq_count) }),
          h('div', { class: 'stat-note muted', text: data.dlq_count ? `oldest failed ${fmt.duration(data.dlq_oldest_age_seconds)} ago` : 'none open' })),
        h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: 'Queue depth' }),
          h('div', { class: 'stat-value', dataset: { metric: 'queue_depth' }, text: fmt.int(data.queue_depth) }),
          h('div', { class: 'stat-note muted', text: 'replayed entries wait here for the next drain' })));
    } catch (e) {
      problem(summary, e, 'the counts');
    }
  }

  async function reload() {
    rows = []; cursor = '';
    await Promise.all([loadSummary(), more()]);
  }

  async function more() {
    try {
      const page = await api('/v1/dlq', { query: { ...filters(), limit: LIMIT, cursor } });
      if (stopped) return;
      rows = rows.concat(page.dead_letters);
      cursor = page.next_cursor || '';
      renderList();
      if (selectedID !== null && !rows.some((r) => r.id === selectedID)) clear(detail);
    } catch (e) {
      problem(list, e, 'the dead letters');
    }
  }

  function renderList() {
    clear(list, table(
      [{ label: 'ID', class: 'num' }, { label: 'First failed' }, { label: 'Event' }, { label: 'Reason' }, { label: 'Status' }, { label: 'Raw (start)' }],
      rows.map((d) => [
        String(d.id),
        h('span', { title: fmt.utc(d.first_failed_at), text: fmt.ago(d.first_failed_at) }),
        h('span', { class: 'mono', text: d.event_name ?? '–' }),
        h('span', { class: 'reason', text: fmt.escapeText(d.reason) }),
        statusBadge(d.status),
        h('code', { class: 'raw-preview', text: preview(d) }),
      ]),
      { empty: 'No dead letter matches.', onRow: (i) => open(rows[i].id), rowAttrs: (i) => ({ dataset: { id: rows[i].id }, class: `clickable${rows[i].id === selectedID ? ' selected' : ''}` }) }),
    h('div', { class: 'pager' },
      h('span', { class: 'muted', dataset: { count: rows.length }, text: `${rows.length} shown` }),
      cursor ? h('button', { type: 'button', class: 'btn', onclick: () => more() }, 'Load more') : null));
  }

  function preview(d) {
    if (d.raw_base64) return `(${fmt.bytesOfBase64(d.raw_base64)} bytes, not UTF-8) ${fmt.escapeBinary(d.raw_base64).slice(0, 60)}`;
    return fmt.escapeText(d.raw ?? '') + (d.raw_cut ? ' …' : '');
  }

  async function open(id) {
    selectedID = id;
    for (const tr of list.querySelectorAll('tr[data-id]')) tr.classList.toggle('selected', Number(tr.dataset.id) === id);
    // The previous entry's buttons go at once: none can act on the wrong one.
    clear(detail, card(null, h('p', { class: 'muted', text: `Loading dead letter ${id}…` })));
    let d;
    try {
      d = await api(`/v1/dlq/${enc(id)}`);
    } catch (e) {
      if (selectedID === id) problem(detail, e, `dead letter ${id}`);
      return;
    }
    if (stopped || selectedID !== id) return; // another was chosen meanwhile
    const raw = d.raw_base64 ? fmt.escapeBinary(d.raw_base64) : fmt.escapeText(d.raw ?? '');
    const size = d.raw_base64 ? `${fmt.bytesOfBase64(d.raw_base64)} bytes, not valid UTF-8: shown with \\xNN escapes`
      : `${new TextEncoder().encode(d.raw ?? '').length} bytes of UTF-8; control and direction characters shown as \\uNNNN`;
    const actions = admin && d.status !== 'deleted' ? h('div', { class: 'card-tools' },
      h('button', { type: 'button', class: 'btn btn-primary', id: 'dl-replay', onclick: () => replayOne(d) }, 'Replay'),
      h('button', { type: 'button', class: 'btn btn-danger', id: 'dl-delete', onclick: () => deleteOne(d) }, 'Delete')) : null;
    clear(detail, card(null,
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title', text: `Dead letter ${d.id}` }), actions),
      h('dl', { class: 'props' },
        prop('Status', statusBadge(d.status)), prop('Reason', h('span', { id: 'dl-reason', text: fmt.escapeText(d.reason) })),
        prop('Kind', d.kind), prop('Event', d.event_name ?? '–'), prop('User', d.user_id ?? '–'), prop('Organisation', d.org_id ?? '–'),
        prop('Correlation id', h('span', { class: 'mono', text: d.correlation_id })),
        prop('First failed', fmt.utc(d.first_failed_at)), prop('Last failed', fmt.utc(d.last_failed_at)),
        prop('Attempts', String(d.attempts)), d.closed_at ? prop('Closed', fmt.utc(d.closed_at)) : null),
      h('div', { class: 'raw-head' }, h('h3', { text: 'Raw entry' }), h('span', { class: 'muted small', text: size })),
      h('pre', { class: 'raw', id: 'dl-raw', text: raw })));
  }

  function prop(k, v) { return [h('dt', { text: k }), h('dd', {}, v)]; }

  async function replayOne(d) {
    const ok = await confirm({ title: `Replay dead letter ${d.id}?`, ok: 'Replay',
      body: [h('p', { text: 'Its raw entry goes back into the buffer; the next drain counts it (at most once).' }),
        h('p', { class: 'muted', text: 'If it still fails the event-name policy or does not decode, nothing changes and you see why.' })] });
    if (!ok) return;
    try {
      await api(`/v1/dlq/${enc(d.id)}/replay`, { method: 'POST' });
      toast(`Dead letter ${d.id} replayed.`);
    } catch (e) {
      toast(e.code === 'still_invalid' ? `Still invalid: ${e.message}` : `Replay failed: ${e.message}`, 'error');
    }
    await reload();
    open(d.id);
  }

  async function deleteOne(d) {
    const ok = await confirm({ title: `Delete dead letter ${d.id}?`, ok: 'Delete', danger: true,
      body: h('p', { text: 'It is marked deleted, no longer replayed, and purged after UUM_DLQ_RETENTION.' }) });
    if (!ok) return;
    try {
      await api(`/v1/dlq/${enc(d.id)}`, { method: 'DELETE' });
      toast(`Dead letter ${d.id} deleted.`);
    } catch (e) {
      toast(`Delete failed: ${e.message}`, 'error');
    }
    await reload();
    open(d.id);
  }

  async function bulkReplay() {
    const q = filters();
    if (q.status === 'deleted') {
      toast('Deleted dead letters cannot be replayed: choose open or replayed.', 'error');
      return;
    }
    let dry;
    try {
      dry = await api('/v1/dlq/replay', { method: 'POST', query: { ...q, dry_run: 'true' } });
    } catch (e) {
      toast(`Dry run failed: ${e.message}`, 'error');
      return;
    }
    const desc = Object.entries(q).map(([k, v]) => `${k} = ${v}`).join(', ') || 'every open dead letter';
    const ok = await confirm({
      title: 'Replay the matching dead letters?', ok: `Replay ${fmt.int(dry.would_replay)}`,
      body: [h('p', { text: `Filters: ${desc}.` }),
        h('div', { class: 'stats-row' },
          h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: 'Would replay' }), h('div', { class: 'stat-value', dataset: { metric: 'would_replay' }, text: fmt.int(dry.would_replay) })),
          h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: 'Still invalid (left as they are)' }), h('div', { class: 'stat-value', dataset: { metric: 'still_invalid' }, text: fmt.int(dry.still_invalid) }))),
        dry.more ? h('p', { class: 'muted', text: 'More match than one call replays (10,000): run it again afterwards.' }) : null],
    });
    if (!ok) return;
    try {
      const res = await api('/v1/dlq/replay', { method: 'POST', query: q });
      toast(`Replayed ${fmt.int(res.replayed)}; ${fmt.int(res.still_invalid)} still invalid.`);
    } catch (e) {
      toast(`Replay failed: ${e.message}`, 'error');
    }
    await reload();
  }

  reload();
  return () => { stopped = true; };
}

function statusBadge(s) {
  return h('span', { class: `badge badge-${s}`, text: s });
}
