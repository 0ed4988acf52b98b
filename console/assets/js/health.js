// The pipeline's health verdict on the Overview (GET /v1/status's health
// and capacity), what operators paused, and the admin's "Drain now"
// (POST /v1/drain) and pause and resume buttons (pause.js). The
// "Live" dot tells the console's connection; this card tells the
// pipeline's health.
import { api, session } from './api.js';
import { h, clear } from './dom.js';
import { confirm, toast } from './ui.js';
import { pauseControls } from './pause.js';
import * as fmt from './fmt.js';

const LABELS = { healthy: 'Healthy', degraded: 'Degraded', failing: 'Failing' };

// healthCard returns the card and its render(status) and, for an admin
// token only, a "Drain now" button and the pause buttons; onDrained is
// called after a drain was enqueued or a pause switched, to refresh the
// page.
export function healthCard(onDrained) {
  const verdict = h('span', { class: 'health-status', dataset: { metric: 'health' }, text: '–' });
  const reasons = h('ul', { class: 'health-reasons' });
  const capacity = h('div', { class: 'health-capacity muted', dataset: { metric: 'capacity' } });
  const drain = session.can('admin')
    ? h('button', { type: 'button', class: 'btn btn-primary', id: 'drain-now', onclick: () => drainNow(onDrained) }, 'Drain now')
    : null;
  const pauses = pauseControls(onDrained);
  const el = h('section', { class: 'card health-card', dataset: { tile: 'health' } },
    h('div', { class: 'tile-head' }, h('h2', { class: 'card-title', text: 'Pipeline health' }), verdict, drain),
    reasons, capacity, pauses.el);

  function render(st) {
    const v = st.health;
    verdict.textContent = LABELS[v.status] || v.status;
    verdict.className = `health-status flag flag-${v.status === 'healthy' ? 'ok' : v.status === 'degraded' ? 'warn' : 'danger'}`;
    el.dataset.health = v.status;
    clear(reasons, ...(v.reasons.length
      ? v.reasons.map((r) => h('li', { dataset: { code: r.code } },
        h('span', { class: `flag flag-${r.status === 'failing' ? 'danger' : 'warn'}`, text: r.code }), ' ', r.message))
      : [h('li', { class: 'muted', text: 'The processors schedule runs and keep up; nothing needs attention.' })]));
    clear(capacity, capacityText(st.capacity));
    pauses.render(st.paused);
  }
  return { el, render };
}

// capacityText says what the settings sustain and how full the last run
// was.
function capacityText(c) {
  if (!c || !c.run_cap) return 'Capacity: unknown until a processor records a run.';
  const parts = [`Capacity: ${fmt.int(c.batch_size)} × ${fmt.int(c.max_iterations)} = ${fmt.int(c.run_cap)} entries a run`];
  if (c.entries_per_second !== null) parts.push(`sustains ${fmt.int(Math.round(c.entries_per_second))} entries/s`);
  if (c.full_run_seconds !== null) parts.push(`a full run takes ${fmt.duration(c.full_run_seconds)}`);
  if (c.saturation !== null) parts.push(`last run ${Math.round(c.saturation * 100)} % full (saturation)`);
  return parts.join(' · ');
}

// drainNow asks first, then makes the running processors drain at once.
async function drainNow(onDrained) {
  const ok = await confirm({
    title: 'Drain now?',
    body: h('p', { text: 'The running processors drain every shard at once, through the drain lease like any run.' }),
    ok: 'Drain now',
  });
  if (!ok) return;
  try {
    const res = await api('/v1/drain', { method: 'POST' });
    toast(`Drain enqueued (task ${res.task_id})`);
    onDrained();
  } catch (e) {
    toast(`Drain now failed: ${e.message}`, 'error');
  }
}
