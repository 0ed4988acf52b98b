// New users: every event with its total of distinct users, and one event's
// new (first-time) users per day with the cumulative reach, as a chart and
// as CSV. Active users, who may come back, are the Active users page's.
import { api, enc } from './api.js';
import { h, clear } from './dom.js';
import { draw, colors } from './charts.js';
import { pageHeader, table, card, problem, segmented } from './ui.js';
import * as fmt from './fmt.js';

const RANGES = [['30', '30 days'], ['90', '90 days'], ['365', '365 days']];

// dateUTC writes a date as YYYY-MM-DD.
function dateUTC(d) { return d.toISOString().slice(0, 10); }

export function mount(el) {
  const list = h('div');
  const detail = h('div');
  clear(el,
    pageHeader('New users', 'Distinct users per event, and the day each did it for the first time (UTC days). For the users active on a day, see Active users.'),
    h('div', { class: 'split' }, h('div', { class: 'split-side' }, card('Events', list)), h('div', { class: 'split-main' }, detail)));

  let selected = null, days = '30', stopped = false, series = null;

  async function loadEvents() {
    try {
      const { counts } = await api('/v1/unique-counts');
      if (stopped) return;
      if (!selected && counts.length) selected = counts[0].event_name;
      const render = () => clear(list, table(
        [{ label: 'Event' }, { label: 'Unique users', class: 'num' }],
        counts.map((c) => [h('span', { class: 'mono', text: c.event_name }),
          h('span', { dataset: { total: c.event_name }, text: fmt.int(c.unique_users) })]),
        {
          empty: 'No event counted yet.',
          onRow: (i) => { selected = counts[i].event_name; render(); loadSeries(); },
          rowAttrs: (i) => ({ class: `clickable${counts[i].event_name === selected ? ' selected' : ''}`, dataset: { event: counts[i].event_name } }),
        }));
      render();
      if (selected) loadSeries();
      else clear(detail, card(null, h('p', { class: 'muted', text: 'Events appear here once the processor has counted them.' })));
    } catch (e) {
      problem(list, e, 'the events');
    }
  }

  async function loadSeries() {
    const name = selected;
    const to = new Date();
    const from = new Date(to.getTime() - (Number(days) - 1) * 86400000);
    const summary = h('div', { class: 'stats-row' });
    const chartEl = h('div', { class: 'chart' });
    const csv = h('button', { type: 'button', class: 'btn', disabled: true, onclick: () => download() }, 'Download CSV');
    clear(detail, card(null,
      h('div', { class: 'card-head' },
        h('h2', { class: 'card-title' }, 'New (first-time) users per day · ', h('span', { class: 'mono', text: name })),
        h('div', { class: 'card-tools' }, segmented(RANGES, days, (v) => { days = v; loadSeries(); }), csv)),
      summary, chartEl));
    try {
      series = await api(`/v1/unique-counts/${enc(name)}/series`, { query: { period: 'day', from: dateUTC(from), to: dateUTC(to) } });
      if (stopped || name !== selected) return;
    } catch (e) {
      if (!stopped) problem(chartEl, e, 'the daily series');
      return;
    }
    const pts = series.points;
    const added = pts.reduce((a, p) => a + p.new_users, 0);
    clear(summary,
      stat('New in these days', fmt.int(added), 'new_in_range'),
      stat('Reach at the end', fmt.int(pts.length ? pts[pts.length - 1].cumulative : 0), 'reach'),
      stat('All-time total', fmt.int(series.total), 'series_total'));
    csv.disabled = false;
    const xs = pts.map((p) => Date.parse(p.start + 'T00:00:00Z') / 1000);
    draw(chartEl, [xs, pts.map((p) => p.new_users), pts.map((p) => p.cumulative)], [
      { label: 'New (first-time) users', bars: true, value: (u, v) => (v === null ? '–' : fmt.int(v)) },
      { label: 'Cumulative reach', color: colors.third, scale: 'y2', area: false, value: (u, v) => (v === null ? '–' : fmt.int(v)) },
    ], { height: 300, y2: true, integer: true, yFormat: (v) => fmt.int(v), xValue: (u, v) => (v === null ? '–' : new Date(v * 1000).toISOString().slice(0, 10)) });
  }

  function stat(label, value, key) {
    return h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: label }),
      h('div', { class: 'stat-value', dataset: { metric: key }, text: value }));
  }

  function download() {
    if (!series) return;
    const lines = ['date,new_users,cumulative', ...series.points.map((p) => `${p.start},${p.new_users},${p.cumulative}`)];
    const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
    const a = h('a', { href: URL.createObjectURL(blob), download: `${series.event_name}-new-users-${series.from}-${series.to}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  loadEvents();
  return () => { stopped = true; };
}
