// Pause and resume of draining and ingestion on the Overview: the state
// of GET /v1/status's paused (GET /v1/pause's object), and for an admin
// token the buttons of POST /v1/pause and POST /v1/resume. A read token
// sees the state and no button (the API would answer 403).
import { api, session } from './api.js';
import { h, clear } from './dom.js';
import { confirm, toast } from './ui.js';
import * as fmt from './fmt.js';

const PARTS = [
  { what: 'drain', label: 'Draining',
    pause: 'Processors skip their runs, and a running drain stops after the batch it is committing (committed and trimmed); what is left stays buffered.',
    resume: 'Processors drain again at their next run (within about a second of a drain now).' },
  { what: 'ingest', label: 'Ingestion',
    pause: 'POST /v1/events and /v1/track answer 503 with Retry-After, and the library returns ErrIngestPaused: producers must retry, nothing is buffered.',
    resume: 'Producers buffer again, within about a second on every process.' },
];

// pauseControls returns the row of pause states and render(paused), the
// paused object of GET /v1/status (absent when the API has no pause
// switch: the row hides). onChange is called after a pause or resume.
export function pauseControls(onChange) {
  const admin = session.can('admin');
  const el = h('div', { class: 'pause-row', id: 'pause-row', hidden: true });
  let last = null;

  function render(paused) {
    el.hidden = !paused;
    if (!paused) return;
    last = paused;
    clear(el, PARTS.map((p) => part(p, paused[p.what])));
  }

  function part(p, entry) {
    const state = entry
      ? h('span', { class: 'flag flag-warn', dataset: { paused: p.what }, title: fmt.utc(entry.since),
        text: `paused by ${fmt.escapeText(entry.by)} ${fmt.ago(entry.since)}` })
      : h('span', { class: 'flag flag-ok', dataset: { running: p.what }, text: 'running' });
    const btn = admin
      ? h('button', { type: 'button', class: entry ? 'btn btn-primary' : 'btn btn-danger', id: `${entry ? 'resume' : 'pause'}-${p.what}`,
        onclick: () => flip(p, !entry) }, `${entry ? 'Resume' : 'Pause'} ${p.label.toLowerCase()}`)
      : null;
    return h('div', { class: 'pause-part', dataset: { part: p.what } }, h('span', { class: 'pause-label', text: p.label }), state, btn);
  }

  // flip asks first, then pauses or resumes p, and shows the answer's
  // state at once.
  async function flip(p, pausing) {
    const ok = await confirm({
      title: `${pausing ? 'Pause' : 'Resume'} ${p.label.toLowerCase()}?`,
      body: h('p', { text: pausing ? p.pause : p.resume }),
      ok: `${pausing ? 'Pause' : 'Resume'} ${p.label.toLowerCase()}`,
      danger: pausing,
    });
    if (!ok) return;
    try {
      const res = await api(pausing ? '/v1/pause' : '/v1/resume', { method: 'POST', body: { what: p.what } });
      render(res.paused);
      toast(res.changed ? `${p.label} ${pausing ? 'paused' : 'resumed'}` : `${p.label} was already ${pausing ? 'paused' : 'running'}`);
      onChange();
    } catch (e) {
      toast(`${pausing ? 'Pause' : 'Resume'} failed: ${e.message}`, 'error');
      if (last) render(last);
    }
  }
  return { el, render };
}
