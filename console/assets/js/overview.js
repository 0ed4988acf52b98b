// Overview: the pipeline now, refreshed every few seconds while the tab is
// visible, each figure with its last hour (a point a minute).
import { api } from './api.js';
import { h, clear } from './dom.js';
import { draw, colors } from './charts.js';
import { pageHeader, table, toast } from './ui.js';
import { healthCard } from './health.js';
import * as fmt from './fmt.js';

const REFRESH_MS = 3000;

// tile is a figure with its chart; its title links to the page that
// tells more (href).
function tile(title, key, href) {
  const value = h('div', { class: 'tile-value', dataset: { metric: key }, text: '–' });
  const flag = h('span', { class: 'flag', hidden: true });
  const note = h('div', { class: 'tile-note muted' });
  const spark = h('div', { class: 'spark' });
  const el = h('section', { class: 'card tile', dataset: { tile: key } },
    h('div', { class: 'tile-head' }, h('h2', { class: 'card-title' }, h('a', { class: 'card-link', href, text: title })), flag),
    value, note, spark, h('a', { class: 'spark-caption muted', href: '#/history', text: 'last hour · history' }));
  return { el, value, note, spark, flag };
}

function setFlag(t, text, kind) {
  t.flag.hidden = !text;
  t.flag.textContent = text || '';
  t.flag.className = `flag flag-${kind || 'warn'}`;
}

// minutes lays the history's points over the last 60 minutes, null where
// no processor sampled.
function minutes(history, now) {
  const last = Math.floor(now / 60000);
  const xs = [], byMinute = new Map();
  for (const p of history.points) byMinute.set(Math.floor(new Date(p.minute).getTime() / 60000), p);
  for (let m = last - history.minutes + 1; m <= last; m++) xs.push(m * 60);
  return { xs, at: (i) => byMinute.get(xs[i] / 60) || null };
}

// holderName is a lease's holder as text: control and direction
// characters escaped, so a hostile host name cannot spoof what follows it.
function holderName(l) {
  return l.holder ? fmt.escapeText(l.holder) : 'an older drainer';
}

// shardLease is a shard's lease cell: free, or its holder, how long it has
// held the lease and whether it still renews it.
function shardLease(l) {
  if (!l) return h('span', { class: 'muted', dataset: { metric: 'shard_holder' }, text: 'free' });
  const held = l.age_seconds === null ? 'held for an unknown time' : `held for ${fmt.duration(l.age_seconds)}`;
  return h('div', { class: 'shard-lease' },
    h('span', { class: 'mono', dataset: { metric: 'shard_holder' }, text: holderName(l) }), ' ',
    h('span', { class: `flag flag-${l.stale ? 'danger' : 'ok'}`, dataset: { metric: 'shard_lease' }, text: l.stale ? 'holder dead?' : 'draining' }),
    h('div', { class: 'muted', text: `${held}, renewed ${fmt.duration(l.renewed_seconds_ago)} ago` }));
}

// shardRun is a shard's last run: when, what it drained, whether it failed
// (why in its title).
function shardRun(r, now) {
  if (!r) return h('span', { class: 'muted', text: 'none yet' });
  return h('span', { title: r.error || fmt.utc(r.finished_at) },
    `${fmt.ago(r.finished_at, now)} · drained ${fmt.int(r.entries_drained)}`,
    r.error ? [' ', h('span', { class: 'flag flag-danger', text: 'failed' })] : null);
}

function series(m, f) {
  return m.xs.map((_, i) => { const p = m.at(i); return p ? f(p) : null; });
}

export function mount(el) {
  const live = h('span', { class: 'live' }, h('span', { class: 'dot' }), h('span', { class: 'live-text', text: 'Loading…' }));
  const t = {
    depth: tile('Queue depth', 'queue_depth', '#/history'),
    lag: tile('Queue lag', 'queue_lag_seconds', '#/history'),
    rate: tile('Processing rate', 'processing_rate', '#/history'),
    latency: tile('Buffered → committed latency', 'latency', '#/history'),
    dlq: tile('Dead letters', 'dlq_count', '#/dead-letters'),
    lease: tile('Drain lease', 'lease', '#/history'),
    runs: tile('Drain runs', 'last_nonempty_run', '#/history'),
    drift: tile('Reconciliation drift', 'drifted', '#/users'),
  };
  t.latency.value.classList.add('pcts');
  const err = h('div');
  // The pipeline's verdict; the "Live" dot only tells this page's
  // connection to the API.
  const health = healthCard(() => refresh());
  const totals = h('div', { class: 'totals' });
  const shardList = h('div');
  const shardsCard = h('section', { class: 'card shards-card', hidden: true },
    h('h2', { class: 'card-title', text: 'Buffer shards' }), shardList);
  clear(el,
    pageHeader('Overview', 'The pipeline now, refreshed every 3 seconds while this tab is visible.', live),
    err,
    health.el,
    h('div', { class: 'tiles' }, Object.values(t).map((x) => x.el)),
    shardsCard,
    h('section', { class: 'card totals-card' }, h('h2', { class: 'card-title', text: 'Since the buffer was created' }), totals));

  let timer = null, stopped = false, failing = false;

  async function refresh() {
    const now = Date.now();
    try {
      const [m, st, hist] = await Promise.all([api('/v1/metrics'), api('/v1/status'), api('/v1/metrics/history')]);
      if (stopped) return;
      render(m.data, st, hist, now);
      clear(err);
      failing = false;
      live.className = 'live';
      live.lastChild.textContent = `Live · updated ${new Date(now).toLocaleTimeString('en-GB')}`;
    } catch (e) {
      if (stopped) return;
      live.className = 'live live-error';
      live.lastChild.textContent = 'Refresh failed';
      clear(err, h('div', { class: 'notice notice-error', text: `Could not refresh: ${e.message}` }));
      if (!failing) toast(`Overview refresh failed: ${e.message}`, 'error');
      failing = true;
    }
  }

  function render(s, st, hist, now) {
    health.render(st);
    const m = minutes(hist, now);
    const spark = (tl, data, sers, opts = {}) => draw(tl.spark, [m.xs, ...data], sers, { spark: true, ...opts });

    const total = (label, key, value, note) => h('div', { class: 'total' },
      h('div', { class: 'stat-label', text: label }), h('div', { class: 'total-value', dataset: { metric: key }, text: value }),
      note ? h('div', { class: 'stat-note muted', text: note }) : null);
    clear(totals,
      total('Drained', 'total_events', fmt.int(s.total_events)),
      total('Delivered', 'delivered', fmt.int(s.delivered)),
      total('Dead-lettered', 'failed', fmt.int(s.failed)),
      total('Last batch', 'last_processed_at', fmt.ago(s.last_processed_at, now), s.last_processed_at ? fmt.utc(s.last_processed_at) : ''),
      total('Last dead letter', 'last_failure_at', fmt.ago(s.last_failure_at, now), s.last_failure_at ? fmt.utc(s.last_failure_at) : ''));

    t.depth.value.textContent = fmt.int(s.queue_depth);
    t.depth.note.textContent = 'entries waiting in the buffer';
    spark(t.depth, [series(m, (p) => p.queue_depth)], [{ label: 'depth' }]);

    t.lag.value.textContent = fmt.duration(s.queue_lag_seconds);
    t.lag.note.textContent = 'age of the oldest buffered entry';
    spark(t.lag, [series(m, (p) => p.queue_lag_seconds)], [{ label: 'lag', color: colors.second }]);

    t.rate.value.textContent = `${fmt.int(s.processing_rate)} / min`;
    t.rate.note.textContent = 'entries drained in the last 60 s';
    spark(t.rate, [series(m, (p) => p.processing_rate)], [{ label: 'rate' }]);

    const p = s.processing_time_ms;
    clear(t.latency.value, ...['p50', 'p95', 'p99'].map((q) =>
      h('span', { class: 'pct' }, h('small', { text: q }), h('span', { dataset: { metric: q }, text: p.samples ? fmt.ms(p[q]) : '–' }))));
    t.latency.note.textContent = p.samples ? `last 15 min, ${fmt.int(p.samples)} samples` : 'no samples in the last 15 min';
    spark(t.latency, [series(m, (x) => x.processing_time_ms.p50), series(m, (x) => x.processing_time_ms.p95), series(m, (x) => x.processing_time_ms.p99)],
      [{ label: 'p50', area: false }, { label: 'p95', color: colors.second, area: false }, { label: 'p99', color: colors.third, area: false }]);

    t.dlq.value.textContent = fmt.int(s.dlq_count);
    t.dlq.note.textContent = s.dlq_count ? `open; the oldest failed ${fmt.duration(s.dlq_oldest_age_seconds)} ago` : 'none open';
    setFlag(t.dlq, s.dlq_count ? 'needs attention' : '', 'warn');
    spark(t.dlq, [series(m, (x) => x.dlq_count)], [{ label: 'open', color: colors.danger }]);

    renderLease(st, now);
    spark(t.lease, [series(m, (x) => x.lease_age_seconds ?? 0)], [{ label: 'held for', color: colors.second }]);

    renderRuns(st, now);
    renderShards(st, now);
    const drained = series(m, (x) => x.total_events);
    spark(t.runs, [drained.map((v, i) => (v === null || i === 0 || drained[i - 1] === null ? null : Math.max(v - drained[i - 1], 0)))],
      [{ label: 'drained', bars: true }]);

    const rec = st.last_reconciliation;
    const drifted = rec ? rec.drifted + (rec.days_drifted || 0) : 0;
    t.drift.value.textContent = rec ? `${fmt.int(rec.drifted)} drifted` : 'not run yet';
    t.drift.note.textContent = rec
      ? [`${rec.dry_run ? 'dry run' : drifted ? 'repaired' : 'totals and day counts exact'}`,
        rec.days_drifted ? `${fmt.int(rec.days_drifted)} day counts drifted` : '',
        `checked ${fmt.ago(rec.finished_at, now)}${rec.event_names?.length ? ': ' + rec.event_names.join(', ') : ''}`].filter(Boolean).join(' · ')
      : 'the processor reconciles every UUM_RECONCILE_INTERVAL';
    setFlag(t.drift, drifted ? (rec.dry_run ? 'drift found' : 'drift repaired') : '', rec && rec.dry_run ? 'danger' : 'warn');
    spark(t.drift, [series(m, (x) => x.drifted)], [{ label: 'drifted', color: colors.third }]);
  }

  function renderLease(st, now) {
    const shards = st.shards || [];
    if (shards.length > 1) {
      renderShardLeases(shards);
      return;
    }
    const l = st.lease;
    if (!l) {
      t.lease.value.textContent = 'free';
      t.lease.note.textContent = 'no drain is running';
      setFlag(t.lease, '');
      return;
    }
    t.lease.value.textContent = holderName(l);
    const held = l.age_seconds === null ? 'held for an unknown time' : `held for ${fmt.duration(l.age_seconds)}`;
    t.lease.note.textContent = l.stale
      ? `${held}, not renewed for ${fmt.duration(l.renewed_seconds_ago)}: the holder is probably dead; the lease frees itself in ${fmt.duration(l.ttl_left_seconds)}`
      : `${held}, renewed ${fmt.duration(l.renewed_seconds_ago)} ago`;
    setFlag(t.lease, l.stale ? 'holder dead?' : 'draining', l.stale ? 'danger' : 'ok');
  }

  // A sharded buffer: how many shards are being drained, by whom, and
  // whether a holder looks dead.
  function renderShardLeases(shards) {
    const held = shards.filter((sh) => sh.lease);
    const stale = held.filter((sh) => sh.lease.stale);
    const holders = [...new Set(held.map((sh) => holderName(sh.lease)))];
    t.lease.value.textContent = `${held.length} of ${shards.length} shards`;
    const deepest = shards.reduce((a, b) => (b.queue_depth > a.queue_depth ? b : a));
    const parts = [holders.length ? `held by ${holders.join(', ')}` : 'no drain is running'];
    if (deepest.queue_depth > 0) parts.push(`deepest: shard ${deepest.shard}, ${fmt.int(deepest.queue_depth)} waiting`);
    if (stale.length) parts.push(`not renewed: shard ${stale.map((sh) => sh.shard).join(', ')}`);
    t.lease.note.textContent = parts.join(' · ');
    setFlag(t.lease, stale.length ? 'holder dead?' : held.length ? 'draining' : '', stale.length ? 'danger' : 'ok');
  }

  // renderShards lists a sharded buffer's shards (hidden for one): each
  // shard's depth, oldest entry, lease and last run, then their totals.
  function renderShards(st, now) {
    const shards = st.shards || [];
    shardsCard.hidden = shards.length < 2;
    if (shardsCard.hidden) return;
    const row = (depth, lag, lease, run) => [
      h('span', { dataset: { metric: 'shard_depth' }, text: fmt.int(depth) }),
      h('span', { dataset: { metric: 'shard_lag' }, text: fmt.duration(lag) }),
      lease, run];
    const rows = shards.map((sh) => [String(sh.shard), ...row(sh.queue_depth, sh.queue_lag_seconds, shardLease(sh.lease), shardRun(sh.last_run, now))]);
    rows.push(['All', ...row(st.queue_depth, st.queue_lag_seconds,
      h('span', { dataset: { metric: 'shard_holder' }, text: `${fmt.int(st.leases_held)} of ${fmt.int(shards.length)} held` }),
      shardRun(st.last_run, now))]);
    clear(shardList, table(
      [{ label: 'Shard', class: 'num' }, { label: 'Waiting', class: 'num' }, { label: 'Oldest entry', class: 'num' }, { label: 'Drain lease' }, { label: 'Last run' }],
      rows, { rowAttrs: (i) => (i < shards.length ? { dataset: { shard: shards[i].shard } } : { class: 'total-row', dataset: { shard: 'all' } }) }));
  }

  function renderRuns(st, now) {
    const r = st.last_nonempty_run;
    t.runs.value.textContent = r ? fmt.ago(r.finished_at, now) : 'none yet';
    const parts = [];
    if (r) parts.push(`last non-empty run drained ${fmt.int(r.entries_drained)} (${fmt.int(r.inserted)} new, ${fmt.int(r.dead_lettered)} dead-lettered)`);
    parts.push(st.next_drain_at ? `next run ${fmt.ago(st.next_drain_at, now)}` : 'no processor is scheduling runs');
    t.runs.note.textContent = parts.join(' · ');
    setFlag(t.runs, st.last_run?.error ? 'last run failed' : '', 'danger');
    t.runs.note.title = st.last_run?.error || '';
  }

  function schedule() {
    clearTimeout(timer);
    if (stopped || document.hidden) {
      if (!stopped) {
        live.className = 'live live-paused';
        live.lastChild.textContent = 'Paused while the tab is hidden';
      }
      return;
    }
    timer = setTimeout(async () => { await refresh(); schedule(); }, REFRESH_MS);
  }
  const onVisibility = async () => {
    if (!document.hidden) await refresh();
    schedule();
  };
  document.addEventListener('visibilitychange', onVisibility);
  refresh().then(schedule);

  return () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisibility);
  };
}
