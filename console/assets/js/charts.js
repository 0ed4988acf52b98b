// Charts with uPlot (vendor/uplot), sized to their container.

const css = getComputedStyle(document.documentElement);
export const colors = {
  primary: css.getPropertyValue('--chart-1').trim() || '#4f46e5',
  second: css.getPropertyValue('--chart-2').trim() || '#0ea5e9',
  third: css.getPropertyValue('--chart-3').trim() || '#f59e0b',
  danger: css.getPropertyValue('--danger').trim() || '#dc2626',
  grid: css.getPropertyValue('--grid').trim() || '#eef0f4',
  axis: css.getPropertyValue('--muted').trim() || '#64748b',
};

const charts = new Set();
const observer = new ResizeObserver((entries) => {
  for (const e of entries) {
    const u = e.target.__uplot;
    if (u && e.contentRect.width > 0) u.setSize({ width: Math.floor(e.contentRect.width), height: u.height });
  }
});

function fill(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

const pad = (n) => String(n).padStart(2, '0');
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

// utcTicks labels time ticks in UTC: "14:05" within two days, else "Nov 24".
function utcTicks(u, ticks) {
  const span = u.scales.x.max - u.scales.x.min;
  return ticks.map((t) => {
    const d = new Date(t * 1000);
    return span <= 2 * 86400 ? `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` : `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
  });
}

// Tick steps of whole numbers, for counts.
const INTEGER_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

// xRange spans the data, and half a step more each side for bars, so the
// first and last bars show whole.
function xRange(bars) {
  return (u, min, max) => {
    const xs = u.data[0];
    if (!bars || !xs || xs.length === 0) return [min, max];
    const step = xs.length > 1 ? (xs[xs.length - 1] - xs[0]) / (xs.length - 1) : 60;
    return [xs[0] - step / 2, xs[xs.length - 1] + step / 2];
  };
}

// chart draws data ([xs in unix seconds, ...ys]) into el. series are
// {label, color, bars, scale, value(u, v) for the legend}; opts: height,
// spark (no axes, no legend), axes ({y: format}), y2 (label of a right
// axis on scale "y2").
export function chart(el, data, series, opts = {}) {
  destroy(el);
  const spark = !!opts.spark;
  const height = opts.height || (spark ? 56 : 240);
  const width = Math.max(Math.floor(el.clientWidth), 120);
  const yFmt = opts.yFormat || ((v) => v);
  const counts = opts.integer ? { incrs: INTEGER_STEPS } : {};
  const axis = (extra) => ({
    stroke: colors.axis,
    grid: { stroke: colors.grid, width: 1 },
    ticks: { show: false },
    font: '11px system-ui, sans-serif',
    ...extra,
  });
  const u = new uPlot({
    width, height,
    padding: spark ? [4, 0, 2, 0] : [12, 8, 0, 0],
    cursor: spark ? { show: true, x: false, y: false, points: { size: 5 } } : { points: { size: 6 } },
    legend: { show: !spark && (opts.legend ?? series.length > 1), live: true },
    select: { show: false },
    scales: { x: { time: opts.time !== false, range: xRange(series.some((s) => s.bars)) }, y: { range: (u, lo, hi) => [Math.min(0, lo), hi > 0 ? hi * 1.1 : 1] },
      ...(opts.y2 ? { y2: { range: (u, lo, hi) => [Math.min(0, lo), hi > 0 ? hi * 1.05 : 1] } } : {}) },
    axes: spark ? [{ show: false }, { show: false }] : [
      axis({ values: utcTicks, space: 60 }),
      axis({ size: 56, values: (u, ticks) => ticks.map(yFmt), ...counts }),
      ...(opts.y2 ? [axis({ scale: 'y2', side: 1, size: 64, grid: { show: false }, values: (u, ticks) => ticks.map(yFmt), ...counts })] : []),
    ],
    series: [
      { value: opts.xValue || ((u, v) => v === null ? '–' : new Date(v * 1000).toISOString().replace('T', ' ').slice(0, 16) + ' UTC') },
      ...series.map((s) => ({
        label: s.label,
        stroke: s.color || colors.primary,
        width: s.bars ? 0 : (spark ? 1.5 : 2),
        fill: s.bars ? fill(s.color || colors.primary, 0.85) : (s.area === false ? undefined : fill(s.color || colors.primary, spark ? 0.12 : 0.08)),
        paths: s.bars ? uPlot.paths.bars({ size: [0.7, 24] }) : undefined,
        points: { show: false },
        spanGaps: false,
        scale: s.scale || 'y',
        value: s.value || ((u, v) => v === null || v === undefined ? '–' : yFmt(v)),
      })),
    ],
  }, data, el);
  el.__uplot = u;
  charts.add(el);
  observer.observe(el);
  return u;
}

export function destroy(el) {
  if (el.__uplot) {
    observer.unobserve(el);
    el.__uplot.destroy();
    el.__uplot = null;
    charts.delete(el);
  }
}

// destroyAll removes every chart (on leaving a page).
export function destroyAll() {
  for (const el of [...charts]) destroy(el);
}

// draw is chart, or new data for the chart already in el.
export function draw(el, data, series, opts = {}) {
  if (el.__uplot && el.__uplot.series.length === series.length + 1) {
    el.__uplot.setData(data);
    return el.__uplot;
  }
  return chart(el, data, series, opts);
}
