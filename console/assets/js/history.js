// History: the pipeline's figures a minute at a time for the last day and
// an hour at a time for 90 days (GET /v1/history), charted with axes and
// every value on hover, refreshed every minute while the tab is visible.
import { api } from './api.js';
import { h, clear } from './dom.js';
import { draw, colors } from './charts.js';
import { pageHeader, card, problem, segmented, stat } from './ui.js';
import * as fmt from './fmt.js';

const RANGES = [['1h', 'Last hour'], ['24h', '24 hours'], ['7d', '7 days'], ['30d', '30 days'], ['90d', '90 days']];
const REFRESH_MS = 60000;

// charts are the page's charts: the figures each draws from a point, on
// the left axis (y) or the right (y2), and how its values read.
const CHARTS = [
  { key: 'drained', title: 'Entries drained', integer: true, format: fmt.int,
    series: [{ label: 'drained', f: (p) => p.drained }, { label: 'dead-lettered', f: (p) => p.dead_lettered, color: colors.danger }] },
  { key: 'depth', title: 'Buffer depth (largest sampled)', integer: true, format: fmt.int,
    series: [{ label: 'depth', f: (p) => p.queue_depth }] },
  { key: 'lag', title: 'Queue lag (largest sampled)', format: fmt.duration,
    series: [{ label: 'lag', f: (p) => p.queue_lag_seconds, color: colors.second }] },
  { key: 'latency', title: 'Buffered → committed latency', format: fmt.ms,
    series: [{ label: 'p50', f: (p) => p.latency_p50_ms, area: false }, { label: 'p99', f: (p) => p.latency_p99_ms, color: colors.third, area: false }] },
  { key: 'runs', title: 'Drain runs', format: fmt.duration, y2: 'runs',
    series: [{ label: 'longest run', f: (p) => p.run_seconds_max, color: colors.second },
      { label: 'runs', f: (p) => p.runs, scale: 'y2', format: fmt.int, area: false }] },
];

export function mount(el) {
  let range = '24h', timer = null, stopped = false;
  const live = h('span', { class: 'muted live-text' });
  const body = h('div');
  const totals = { drained: stat('Drained', 'history_drained'), delivered: stat('Delivered', 'history_delivered'),
    dead: stat('Dead-lettered', 'history_dead_lettered'), runs: stat('Runs', 'history_runs') };
  const charts = CHARTS.map((c) => ({ ...c, el: h('div', { class: 'chart', dataset: { chart: c.key } }) }));
  clear(el,
    pageHeader('History', 'The pipeline a minute at a time for the last day, an hour at a time for 90 days. Hover a chart for its values (UTC).',
      segmented(RANGES, range, (v) => { range = v; load(); }), live),
    body,
    card(null, h('div', { class: 'stats-row' }, Object.values(totals).map((s) => s.el))),
    h('div', { class: 'history-charts' }, charts.map((c) => card(c.title, c.el))));

  async function load() {
    const want = range;
    let res;
    try {
      res = await api(`/v1/history?range=${encodeURIComponent(want)}`);
    } catch (e) {
      if (!stopped) problem(body, e, 'the history');
      return;
    }
    if (stopped || want !== range) return;
    clear(body);
    render(res);
    live.textContent = `updated ${new Date().toLocaleTimeString('en-GB')}`;
  }

  function render(res) {
    const pts = res.points;
    const xs = pts.map((p) => Math.floor(new Date(p.start).getTime() / 1000));
    const sum = (f) => pts.reduce((a, p) => a + f(p), 0);
    const step = res.step_seconds === 60 ? 'a minute' : 'an hour';
    totals.drained.value.textContent = fmt.int(sum((p) => p.drained));
    totals.drained.note.textContent = `over ${pts.length} points, ${step} each`;
    totals.delivered.value.textContent = fmt.int(sum((p) => p.delivered));
    totals.dead.value.textContent = fmt.int(sum((p) => p.dead_lettered));
    totals.runs.value.textContent = fmt.int(sum((p) => p.runs));
    for (const c of charts) {
      const data = [xs, ...c.series.map((s) => pts.map((p) => s.f(p) ?? null))];
      const series = c.series.map((s) => ({ label: s.label, color: s.color, area: s.area, scale: s.scale,
        value: (u, v) => (v === null || v === undefined ? '–' : (s.format || c.format)(v)) }));
      draw(c.el, data, series, { legend: true, integer: c.integer, yFormat: c.format, y2: c.y2 });
      // What is drawn, for the browser test to wait on.
      Object.assign(c.el.dataset, { range: res.range, first: String(xs[0]), points: String(xs.length) });
    }
  }

  function schedule() {
    clearTimeout(timer);
    if (stopped || document.hidden) return;
    timer = setTimeout(async () => { await load(); schedule(); }, REFRESH_MS);
  }
  const onVisibility = async () => {
    if (!document.hidden) await load();
    schedule();
  };
  document.addEventListener('visibilitychange', onVisibility);
  load().then(schedule);

  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisibility);
  };
}
