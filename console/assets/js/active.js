// Active users: the distinct users of the selected events (several, or
// every event) per day, ISO week and month, DAU with the 7- and 30-day
// windows ending on each day, stickiness, a weekly retention table, and
// the daily series as CSV. Days are the report time zone's.
import { api, session, APIError } from './api.js';
import { h, clear } from './dom.js';
import { draw, colors } from './charts.js';
import { pageHeader, table, card, problem, segmented } from './ui.js';
import * as fmt from './fmt.js';

const RANGES = [['30', '30 days'], ['90', '90 days'], ['365', '365 days']];
const COHORT_WEEKS = 8; // rows of the retention table
const FOLLOW_WEEKS = 4; // its columns after the cohort's own week

const dateUTC = (d) => d.toISOString().slice(0, 10);
const addDays = (s, n) => dateUTC(new Date(Date.parse(s + 'T00:00:00Z') + n * 86400000));

// reportToday is today in the report time zone (UUM_REPORT_TIMEZONE), not
// the browser's: the API cuts a range's `to` to that day, so a range of
// the browser's UTC date ± 2 days, which holds today in every zone
// (UTC-12 to UTC+14), answers it as its `to`.
async function reportToday() {
  const utc = dateUTC(new Date());
  const { to } = await api('/v1/active-users', { query: { from: addDays(utc, -2), to: addDays(utc, 2) } });
  return to;
}

// selection is the query of the chosen events: event_name once per event,
// none for every event.
function selection(events) {
  const q = new URLSearchParams();
  for (const e of events) q.append('event_name', e);
  return q;
}

// get reads an active-user route with the selection and the other
// parameters.
function get(path, events, query) {
  const s = selection(events).toString();
  return api(`${path}${s ? '?' + s : ''}`, { query });
}

export function mount(el) {
  const picker = h('div', { class: 'event-picker' });
  const stats = h('div', { class: 'stats-row' });
  const chartEl = h('div', { class: 'chart', dataset: { chart: 'active' } });
  const retention = h('div');
  const fromIn = h('input', { type: 'date', 'aria-label': 'From', dataset: { range: 'from' } });
  const toIn = h('input', { type: 'date', 'aria-label': 'To', dataset: { range: 'to' } });
  const csv = h('button', { type: 'button', class: 'btn', dataset: { action: 'csv' }, onclick: () => download() }, 'Download CSV');
  let today = null; // the report zone's, once reportToday answers
  let days = '30', stopped = false, all = true, chosen = new Set(), known = [];
  const setRange = () => { toIn.value = today; fromIn.value = addDays(today, -(Number(days) - 1)); };
  fromIn.addEventListener('change', () => load());
  toIn.addEventListener('change', () => load());

  clear(el,
    pageHeader('Active users', 'Distinct users who did the selected events, exactly, per day in the report time zone. Today is partial.'),
    h('div', { class: 'split' },
      h('div', { class: 'split-side' }, card('Events', picker)),
      h('div', { class: 'split-main' },
        card(null,
          h('div', { class: 'card-head' },
            h('h2', { class: 'card-title', text: 'Daily, weekly and monthly active users' }),
            h('div', { class: 'card-tools' },
              segmented(RANGES, days, (v) => { days = v; if (today) { setRange(); load(); } }),
              fromIn, toIn, csv)),
          stats, chartEl),
        card('Retention: weekly cohorts of active users', retention))));

  function events() { return all ? [] : [...chosen].sort(); }

  function renderPicker() {
    const box = (label, checked, onchange, data) => h('label', { class: 'check' },
      h('input', { type: 'checkbox', checked, onchange, dataset: data }), h('span', { class: 'mono', text: label }));
    clear(picker,
      box('All events', all, (e) => { all = e.target.checked; renderPicker(); load(); }, { event: '*' }),
      known.map((n) => box(n, !all && chosen.has(n), (e) => {
        if (e.target.checked) chosen.add(n); else chosen.delete(n);
        all = chosen.size === 0;
        renderPicker();
        load();
      }, { event: n })));
  }

  async function loadEvents() {
    try {
      const { counts } = await api('/v1/unique-counts');
      if (stopped) return;
      known = counts.map((c) => c.event_name);
      renderPicker();
    } catch (e) {
      problem(picker, e, 'the events');
    }
  }

  let generation = 0;
  async function load() {
    const gen = ++generation;
    const evs = events();
    const range = { from: fromIn.value, to: toIn.value };
    let total, dau, wau, mau, sticky;
    try {
      [total, dau, wau, mau, sticky] = await Promise.all([
        get('/v1/active-users', evs, range),
        get('/v1/active-users', evs, { ...range, period: 'day' }),
        get('/v1/active-users/rolling', evs, { ...range, window: 7 }),
        get('/v1/active-users/rolling', evs, { ...range, window: 30 }),
        get('/v1/active-users/stickiness', evs, { ...range, window: 30 }),
      ]);
    } catch (e) {
      if (!stopped && gen === generation) problem(chartEl, e, 'the active users');
      return;
    }
    if (stopped || gen !== generation) return;
    const last = (pts) => (pts.length ? pts[pts.length - 1] : null);
    const closed = sticky.points.filter((p) => !p.partial && p.window_users > 0);
    const avg = closed.length ? closed.reduce((a, p) => a + p.ratio, 0) / closed.length : null;
    const partial = (p) => (p && p.partial ? ' (today, partial)' : '');
    clear(stats,
      stat('Active users in range', fmt.int(total.active_users), 'active_range', `${total.from} to ${total.to}${total.partial ? ', today partial' : ''}`),
      stat('DAU', last(dau) ? fmt.int(last(dau).active_users) : '–', 'dau', last(dau) ? last(dau).start + partial(last(dau)) : ''),
      stat('WAU (7 days)', last(wau.points) ? fmt.int(last(wau.points).active_users) : '–', 'wau', ''),
      stat('MAU (30 days)', last(mau.points) ? fmt.int(last(mau.points).active_users) : '–', 'mau', ''),
      stat('Stickiness (DAU/MAU)', avg === null ? '–' : `${(avg * 100).toFixed(1)} %`, 'stickiness', 'mean over the closed days'));
    const xs = dau.map((p) => Date.parse(p.start + 'T00:00:00Z') / 1000);
    const v = (u, x) => (x === null || x === undefined ? '–' : fmt.int(x));
    draw(chartEl, [xs, dau.map((p) => p.active_users), wau.points.map((p) => p.active_users), mau.points.map((p) => p.active_users)], [
      { label: 'DAU', value: v },
      { label: 'WAU (7 days)', color: colors.second, area: false, value: v },
      { label: 'MAU (30 days)', color: colors.third, area: false, value: v },
    ], { height: 300, integer: true, yFormat: (x) => fmt.int(x), xValue: (u, x) => (x === null ? '–' : new Date(x * 1000).toISOString().slice(0, 10)) });
    chartEl.dataset.points = String(xs.length);
    loadRetention(gen, evs, range);
  }

  async function loadRetention(gen, evs, range) {
    const from = addDays(range.to, -7 * (COHORT_WEEKS - 1)) > range.from ? addDays(range.to, -7 * (COHORT_WEEKS - 1)) : range.from;
    let m;
    try {
      m = await get('/v1/active-users/retention', evs, { from, to: range.to, period: 'week', periods: FOLLOW_WEEKS });
    } catch (e) {
      if (!stopped && gen === generation) problem(retention, e, 'the retention');
      return;
    }
    if (stopped || gen !== generation) return;
    const cols = [{ label: 'Cohort week' }, { label: 'Users', class: 'num' }];
    for (let k = 1; k <= m.periods; k++) cols.push({ label: `Week +${k}`, class: 'num' });
    clear(retention, table(cols, m.cohorts.map((c) => {
      const cells = [c.start + (c.partial ? ' (partial)' : ''), h('span', { dataset: { cohort: c.start }, text: fmt.int(c.users) })];
      for (let k = 0; k < m.periods; k++) {
        const cell = c.retained[k];
        cells.push(cell ? h('span', { dataset: { cohort: c.start, offset: String(cell.offset), users: String(cell.users) },
          title: `${fmt.int(cell.users)} of ${fmt.int(c.users)}${cell.partial ? ', partial' : ''}`,
          text: c.users ? `${(100 * cell.users / c.users).toFixed(0)} %` : '–' }) : '');
      }
      return cells;
    }), { empty: 'No cohort in this range.' }));
  }

  function stat(label, value, key, note) {
    return h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: label }),
      h('div', { class: 'stat-value', dataset: { metric: key }, text: value }),
      h('div', { class: 'stat-note muted', text: note }));
  }

  // download saves the daily series as the API's CSV: fetched with the
  // token in its header, since a link cannot carry it.
  async function download() {
    const url = new URL('/v1/active-users', location.origin);
    url.search = selection(events()).toString();
    url.searchParams.set('from', fromIn.value);
    url.searchParams.set('to', toIn.value);
    url.searchParams.set('period', 'day');
    const res = await fetch(url, { headers: { Authorization: `Bearer ${session.token()}`, Accept: 'text/csv' }, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    if (!res.ok) {
      let body = null;
      try { body = await res.json(); } catch { /* described by the status */ }
      problem(chartEl, new APIError(res.status, body?.error), 'the CSV');
      return;
    }
    const blob = await res.blob();
    const a = h('a', { href: URL.createObjectURL(blob), download: `active-users-${fromIn.value}-${toIn.value}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  loadEvents();
  (async () => {
    try {
      today = await reportToday();
    } catch (e) {
      if (!stopped) problem(chartEl, e, 'today in the report time zone');
      return;
    }
    if (stopped) return;
    toIn.dataset.today = today;
    setRange();
    load();
  })();
  return () => { stopped = true; };
}
