// Counters and windows: a persistent counter's keys (paged, or one key
// looked up by its dimensions), a window counter's top organisations and
// its last 60 minutes, platform-wide and per organisation.
import { api, enc } from './api.js';
import { h, clear } from './dom.js';
import { draw, colors } from './charts.js';
import { pageHeader, table, card, problem } from './ui.js';
import * as fmt from './fmt.js';

const PAGE = 25;

export function mount(el) {
  const picker = h('select', { id: 'counter-picker', class: 'select', 'aria-label': 'Counter' });
  const body = h('div');
  clear(el, pageHeader('Counters & windows', 'The counters of UUM_COUNTERS_FILE, as the drain has counted them.', picker), body);
  let defs = [], stopped = false;

  async function load() {
    try {
      ({ counters: defs } = await api('/v1/counters'));
    } catch (e) {
      problem(body, e, 'the counters');
      return;
    }
    if (stopped) return;
    if (!defs.length) {
      picker.hidden = true;
      clear(body, card(null, h('p', { class: 'muted', text: 'No counters are defined: set UUM_COUNTERS_FILE (see docs/counters.md).' })));
      return;
    }
    const group = (mode, label) => h('optgroup', { label },
      defs.filter((d) => d.mode === mode).map((d) => h('option', { value: d.name, text: d.window ? `${d.name} (${d.window})` : d.name })));
    clear(picker, group('persistent', 'Persistent'), group('window', 'Windows'));
    picker.onchange = () => show(picker.value);
    show(defs[0].name);
  }

  function show(name) {
    picker.value = name;
    const def = defs.find((d) => d.name === name);
    if (def.mode === 'window') windowView(def);
    else persistentView(def);
  }

  function persistentView(def) {
    const inputs = def.dimensions.map((d) => h('input', { class: 'input', name: d, placeholder: d, 'aria-label': d, dataset: { dim: d } }));
    const out = h('div');
    const cursors = [''];
    const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); lookup(); } },
      inputs.map((i) => h('label', { class: 'field' }, h('span', { text: i.name }), i)),
      def.dimensions.length ? h('button', { type: 'submit', class: 'btn btn-primary' }, 'Look up key') : null,
      def.dimensions.length ? h('button', { type: 'button', class: 'btn', onclick: () => { for (const i of inputs) i.value = ''; page(0); } }, 'Clear') : null);
    clear(body, card(null,
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, 'Values by dimension · ', h('span', { class: 'mono', text: def.name })),
        h('span', { class: 'muted', text: def.dimensions.length ? `keyed by ${def.dimensions.join(', ')}` : 'one value, no dimensions' })),
      def.dimensions.length ? h('p', { class: 'muted small', text: 'Look up one key by its dimension values (an empty field is the empty value), or page through every key.' }) : null,
      form, out));

    const columns = [...def.dimensions.map((d) => ({ label: d, class: 'mono' })), { label: 'Value', class: 'num' }, { label: 'Updated', class: 'muted' }];
    const row = (it) => [...def.dimensions.map((d) => it.dimensions[d] ?? ''),
      h('span', { dataset: { value: JSON.stringify(it.dimensions) }, text: fmt.int(it.value) }),
      h('span', { title: fmt.utc(it.updated_at), text: it.updated_at ? fmt.ago(it.updated_at) : 'never' })];

    async function page(i) {
      try {
        const p = await api(`/v1/counters/${enc(def.name)}`, { query: { limit: PAGE, cursor: cursors[i] } });
        if (stopped) return;
        cursors.length = i + 1;
        if (p.next_cursor) cursors.push(p.next_cursor);
        clear(out, table(columns, p.items.map(row), { empty: 'No key counted yet.' }),
          h('div', { class: 'pager' },
            h('span', { class: 'muted', text: `Page ${i + 1}` }),
            h('button', { type: 'button', class: 'btn', disabled: i === 0, onclick: () => page(i - 1) }, '← Previous'),
            h('button', { type: 'button', class: 'btn', disabled: !p.next_cursor, onclick: () => page(i + 1) }, 'Next →')));
      } catch (e) {
        problem(out, e, 'the keys');
      }
    }

    async function lookup() {
      const query = {};
      for (const i of inputs) query[`dim.${i.name}`] = i.value;
      const url = new URL(`/v1/counters/${enc(def.name)}`, location.origin);
      for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
      try {
        // dim. parameters with empty values are meaningful: pass them all.
        const one = await api(url.pathname + url.search);
        clear(out, table(columns, [row(one)]),
          h('div', { class: 'pager' }, h('button', { type: 'button', class: 'btn', onclick: () => page(0) }, 'Show every key')));
      } catch (e) {
        problem(out, e, 'the key');
      }
    }
    page(0);
  }

  function windowView(def) {
    const platform = h('div', { class: 'stat-value', dataset: { metric: 'window_platform' }, text: '–' });
    const asOf = h('div', { class: 'stat-note muted' });
    const platformChart = h('div', { class: 'chart' });
    const top = h('div');
    const orgTitle = h('h2', { class: 'card-title', text: 'Select an organisation' });
    const orgChart = h('div', { class: 'chart' });
    clear(body,
      h('div', { class: 'grid-2' },
        card(null, h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, 'Platform-wide · ', h('span', { class: 'mono', text: def.name }))),
          h('div', { class: 'stats-row' }, h('div', { class: 'stat' }, h('div', { class: 'stat-label', text: `Events in the last ${def.window}` }), platform, asOf)),
          h('div', { class: 'chart-label muted', text: 'Events per minute, last 60 minutes' }), platformChart),
        card(`Top organisations, last ${def.window}`, top)),
      card(null, h('div', { class: 'card-head' }, orgTitle), h('div', { class: 'chart-label muted', text: 'Events per minute, last 60 minutes' }), orgChart));

    const minuteChart = async (elc, org) => {
      try {
        const r = await api(`/v1/windows/${enc(def.name)}/minutes`, { query: { org_id: org } });
        if (stopped) return;
        draw(elc, [r.minutes.map((m) => Date.parse(m.start) / 1000), r.minutes.map((m) => m.value)],
          [{ label: 'events', bars: true, color: org ? colors.second : colors.primary, value: (u, v) => (v === null ? '–' : fmt.int(v)) }],
          { height: 200, yFormat: (v) => fmt.int(v), integer: true, legend: true });
      } catch (e) {
        problem(elc, e, 'the minutes');
      }
    };

    (async () => {
      try {
        const [w, t] = await Promise.all([api(`/v1/windows/${enc(def.name)}`), api(`/v1/windows/${enc(def.name)}/top`, { query: { limit: 10 } })]);
        if (stopped) return;
        platform.textContent = fmt.int(w.value);
        asOf.textContent = w.as_of ? `as of ${fmt.utc(w.as_of)}` : 'nothing counted yet';
        const maxV = Math.max(1, ...t.orgs.map((o) => o.value));
        const showOrg = (org) => {
          for (const tr of top.querySelectorAll('tr[data-org]')) tr.classList.toggle('selected', tr.dataset.org === org);
          clear(orgTitle, 'Organisation · ', h('span', { class: 'mono', text: org }));
          minuteChart(orgChart, org);
        };
        clear(top, table([{ label: 'Organisation' }, { label: 'Events', class: 'num' }, { label: '' }],
          t.orgs.map((o) => [h('span', { class: 'mono', text: o.org_id }),
            h('span', { dataset: { org: o.org_id }, text: fmt.int(o.value) }),
            h('div', { class: 'bar' }, barFill(o.value / maxV))]),
          { empty: 'No organisation in this window.', onRow: (i) => showOrg(t.orgs[i].org_id), rowAttrs: (i) => ({ dataset: { org: t.orgs[i].org_id } }) }));
        if (t.orgs.length) showOrg(t.orgs[0].org_id);
        else clear(orgChart, h('p', { class: 'muted', text: 'No organisation has events in this window.' }));
      } catch (e) {
        problem(top, e, 'the window');
      }
    })();
    minuteChart(platformChart, '');
  }

  load();
  return () => { stopped = true; };
}

// barFill is a share bar: its width is set through the CSSOM, which the
// CSP allows (no style attribute).
function barFill(share) {
  const f = h('div', { class: 'bar-fill' });
  f.style.width = `${Math.max(2, Math.round(share * 100))}%`;
  return f;
}
