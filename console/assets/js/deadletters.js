// Dead letters: browse with the API's filters (user id and raw content
// too), count them by reason or event, read an entry's reason and raw
// bytes (as text: escapes for control, direction and invalid bytes) in a
// detail beside the list (over it on a narrow screen), replay, delete or
// correct one, replay or delete every match after a dry run. Every action
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
    user_id: h('input', { class: 'input', name: 'user_id', placeholder: 'user id (UUID)' }),
    raw: h('input', { class: 'input', name: 'raw', placeholder: 'raw entry contains…' }),
    from: h('input', { class: 'input', name: 'from', type: 'datetime-local', step: 1 }),
    to: h('input', { class: 'input', name: 'to', type: 'datetime-local', step: 1 }),
  };
  const summary = h('div', { class: 'stats-row' });
  const groups = h('div', { id: 'dl-groups' });
  const list = h('div');
  const detail = h('div', { id: 'dl-detail', class: 'dl-detail' });
  const groupBy = h('select', { class: 'select', name: 'group_by', id: 'dl-group-by', onchange: () => loadGroups() },
    h('option', { value: '', text: 'no grouping' }), h('option', { value: 'reason', text: 'reason' }),
    h('option', { value: 'event_name', text: 'event' }));
  const bulk = admin ? h('button', { type: 'button', class: 'btn btn-primary', id: 'bulk-replay', onclick: () => bulkReplay() }, 'Replay matching…') : null;
  const bulkDelete = admin ? h('button', { type: 'button', class: 'btn btn-danger', id: 'bulk-delete', onclick: () => bulkDel() }, 'Delete matching…') : null;
  clear(el,
    pageHeader('Dead letters', admin ? 'Entries the drain could not count. Fix the cause or the entry, then replay them.'
      : 'Entries the drain could not count. Your token is read-only: an admin token replays, edits and deletes.', bulk, bulkDelete),
    summary,
    card(null, h('form', { class: 'filters', id: 'dl-filters', onsubmit: (e) => { e.preventDefault(); reload(); } },
      field('Status', f.status), field('Reason', f.reason), field('Event name', f.event_name),
      field('User id', f.user_id), field('Raw contains', f.raw),
      field('Correlation id', f.correlation_id), field('First failed from (UTC)', f.from), field('to (UTC)', f.to),
      field('Group by', groupBy),
      h('button', { type: 'submit', class: 'btn btn-primary' }, 'Apply'),
      h('button', { type: 'button', class: 'btn', onclick: () => { for (const [k, i] of Object.entries(f)) i.value = k === 'status' ? 'open' : ''; reload(); } }, 'Reset')),
    groups),
    h('div', { class: 'dl-split' }, card(null, list), detail));

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
    await Promise.all([loadSummary(), more(), loadGroups()]);
  }

  // loadGroups counts the matches by the chosen key; a click on a group
  // filters the list by it.
  async function loadGroups() {
    const by = groupBy.value;
    if (!by) { clear(groups); return; }
    try {
      const g = await api('/v1/dlq/groups', { query: { ...filters(), by } });
      if (stopped) return;
      const label = by === 'reason' ? 'Reason' : 'Event';
      clear(groups, table([{ label }, { label: 'Dead letters', class: 'num' }],
        g.groups.map((x) => [h('span', { class: by === 'reason' ? 'reason' : 'mono', text: x.key === null ? '(none)' : fmt.escapeText(x.key) }),
          h('span', { dataset: { groupCount: x.key ?? '' }, text: fmt.int(x.count) })]),
        { empty: 'No dead letter matches.', onRow: (i) => pickGroup(by, g.groups[i].key),
          rowAttrs: (i) => ({ dataset: { group: g.groups[i].key ?? '' } }) }),
        h('p', { class: 'muted small', dataset: { groupTotal: g.total },
          text: `${fmt.int(g.total)} in all${g.more ? ', the largest groups shown' : ''}${g.complete ? '' : '; counted over the newest 100,000 matches'}. Click a group to list it.` }));
    } catch (e) {
      problem(groups, e, 'the groups');
    }
  }

  function pickGroup(by, key) {
    if (key === null) return;
    f[by].value = key;
    groupBy.value = '';
    reload();
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
      cursor ? h('button', { type: 'button', class: 'btn', onclick: () => more() },
        filters().raw ? 'Search further' : 'Load more') : null));
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
    const actions = h('div', { class: 'card-tools' },
      admin && d.status !== 'deleted' ? h('button', { type: 'button', class: 'btn btn-primary', id: 'dl-replay', onclick: () => replayOne(d) }, 'Replay') : null,
      admin && d.status !== 'deleted' ? h('button', { type: 'button', class: 'btn btn-danger', id: 'dl-delete', onclick: () => deleteOne(d) }, 'Delete') : null,
      h('button', { type: 'button', class: 'btn', id: 'dl-close', title: 'Close', onclick: () => { selectedID = null; clear(detail); renderList(); } }, '×'));
    const original = d.original_raw_base64 ? fmt.escapeBinary(d.original_raw_base64) : (d.original_raw != null ? fmt.escapeText(d.original_raw) : null);
    clear(detail, card(null,
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title', text: `Dead letter ${d.id}` }), actions),
      h('dl', { class: 'props' },
        prop('Status', statusBadge(d.status)), prop('Reason', h('span', { id: 'dl-reason', text: fmt.escapeText(d.reason) })),
        prop('Kind', d.kind), prop('Event', d.event_name ?? '–'), prop('User', d.user_id ?? '–'), prop('Organisation', d.org_id ?? '–'),
        prop('Correlation id', h('span', { class: 'mono', text: d.correlation_id })),
        prop('First failed', fmt.utc(d.first_failed_at)), prop('Last failed', fmt.utc(d.last_failed_at)),
        prop('Attempts', String(d.attempts)), d.closed_at ? prop('Closed', fmt.utc(d.closed_at)) : null),
      h('div', { class: 'raw-head' }, h('h3', { text: original !== null ? 'Raw entry (edited)' : 'Raw entry' }), h('span', { class: 'muted small', text: size })),
      h('pre', { class: 'raw', id: 'dl-raw', text: raw }),
      original !== null ? [h('div', { class: 'raw-head' }, h('h3', { text: 'As the drain found it' }),
        h('span', { class: 'muted small', text: `edited ${fmt.utc(d.edited_at)}` })),
      h('pre', { class: 'raw', id: 'dl-original', text: original })] : null,
      admin && d.status !== 'deleted' && d.kind === 'entry' && !d.raw_base64 ? editForm(d) : null));
    detail.scrollIntoView({ block: 'nearest' });
  }

  // editForm corrects the entry: the API validates it as the drain
  // would, keeps the original and replays the edit.
  function editForm(d) {
    const text = h('textarea', { class: 'input raw-edit', id: 'dl-edit-raw', rows: 4, spellcheck: 'false' });
    text.value = d.raw ?? '';
    const error = h('p', { class: 'notice notice-error', id: 'dl-edit-error', hidden: true });
    return h('form', { class: 'dl-edit', onsubmit: async (e) => {
      e.preventDefault();
      const ok = await confirm({ title: `Replay dead letter ${d.id} as edited?`, ok: 'Save and replay',
        body: [h('p', { text: 'The corrected entry is checked as the drain checks entries, then buffered; the next drain counts it (at most once).' }),
          h('p', { class: 'muted', text: 'The entry as the drain found it is kept.' })] });
      if (!ok) return;
      try {
        await api(`/v1/dlq/${enc(d.id)}/edit`, { method: 'POST', body: { raw: text.value } });
        toast(`Dead letter ${d.id} edited and replayed.`);
      } catch (err) {
        error.hidden = false;
        error.textContent = `${err.field ? err.field + ': ' : ''}${err.message}`;
        return;
      }
      await reload();
      open(d.id);
    } },
    h('div', { class: 'raw-head' }, h('h3', { text: 'Correct the entry' })), text, error,
    h('button', { type: 'submit', class: 'btn btn-primary', id: 'dl-edit-save' }, 'Save and replay…'));
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

  // bulkDel deletes every match after a dry run; with no filter but the
  // status it says so and confirms with all=true.
  async function bulkDel() {
    const q = filters();
    if (q.status === 'deleted') {
      toast('These dead letters are deleted already: choose open or replayed.', 'error');
      return;
    }
    let dry;
    try {
      dry = await api('/v1/dlq/delete', { method: 'POST', query: { ...q, dry_run: 'true' } });
    } catch (e) {
      toast(`Dry run failed: ${e.message}`, 'error');
      return;
    }
    const unfiltered = Object.keys(q).every((k) => k === 'status');
    const desc = Object.entries(q).map(([k, v]) => `${k} = ${v}`).join(', ');
    const ok = await confirm({
      title: unfiltered ? `Delete EVERY ${q.status || 'open'} dead letter?` : 'Delete the matching dead letters?',
      ok: `Delete ${fmt.int(dry.would_delete)}`, danger: true,
      body: [h('p', { text: unfiltered ? 'No filter but the status: this deletes them all.' : `Filters: ${desc}.` }),
        h('div', { class: 'stats-row' },
          h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: 'Would delete' }), h('div', { class: 'stat-value', dataset: { metric: 'would_delete' }, text: fmt.int(dry.would_delete) }))),
        dry.more ? h('p', { class: 'muted', text: 'More match than one call deletes (10,000): run it again afterwards.' }) : null],
    });
    if (!ok) return;
    try {
      const res = await api('/v1/dlq/delete', { method: 'POST', query: unfiltered ? { ...q, all: 'true' } : q });
      toast(`Deleted ${fmt.int(res.deleted)}.`);
    } catch (e) {
      toast(`Delete failed: ${e.message}`, 'error');
    }
    await reload();
  }

  reload();
  return () => { stopped = true; };
}

function statusBadge(s) {
  return h('span', { class: `badge badge-${s}`, text: s });
}
