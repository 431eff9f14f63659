// A run's charts over steps (uPlot): loss, MFU, tokens/s and learning rate from
// GET /api/v1/runs/NAME/metrics, one series per attempt, and every resumption marked by a
// vertical line at the step it resumed from; hovering it shows why the attempt before ended.
import uPlot from './uPlot.esm.js';
import { enumName, fmtNumber, fmtTime, h, num, replaceChildren } from './dom.js';

const METRICS = [
  { key: 'loss', label: 'Loss', field: 'loss', fmt: (v) => fmtNumber(v, 4) },
  { key: 'mfu', label: 'MFU', field: 'mfu', scale: 100, unit: '%', fmt: (v) => `${fmtNumber(v, 3)}%` },
  { key: 'tokens', label: 'Tokens/s', field: 'tokens_per_second', fmt: (v) => si(v) },
  { key: 'lr', label: 'Learning rate', field: 'learning_rate', fmt: (v) => (v === null || v === undefined ? '-' : Number(v).toExponential(2)) },
];

const COLORS = ['#2563eb', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#db2777', '#65a30d', '#7c3aed'];

// Cause events that explain why an attempt ended.
const CAUSE_EVENTS = new Set([
  'NODE_FAILURE', 'GPU_FAULT', 'HANG_DETECTED', 'STRAGGLER_DETECTED', 'PREEMPTED',
  'CONTROL_PLANE_FAULT', 'STOP_REQUESTED', 'FAILED', 'SETUP',
]);

function si(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(2)}G`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return fmtNumber(v, 3);
}

// Axis tick labels with as many digits as the tick step needs (0.00296 and 0.00298 differ).
export function tickLabels(vals) {
  const finite = vals.filter((v) => v !== null && Number.isFinite(v));
  if (!finite.length) return vals.map(() => '');
  let step = 0;
  for (let i = 1; i < finite.length; i++) {
    const d = Math.abs(finite[i] - finite[i - 1]);
    if (d > 0 && (step === 0 || d < step)) step = d;
  }
  const maxAbs = Math.max(...finite.map(Math.abs));
  if (maxAbs >= 1000) return vals.map((v) => si(v));
  if (maxAbs > 0 && maxAbs < 0.01) {
    const digits = step > 0 ? Math.min(6, Math.max(1, Math.ceil(Math.log10(maxAbs / step)))) : 2;
    return vals.map((v) => (v === 0 ? '0' : Number(v).toExponential(digits)));
  }
  const decimals = step > 0 ? Math.min(8, Math.max(0, -Math.floor(Math.log10(step) + 1e-9))) : 2;
  return vals.map((v) => Number(v).toFixed(decimals));
}

// The resumption markers: for each attempt after the first, the step it resumed from and why
// the one before it ended (its end reason and detail, and the run's events about it).
export function resumptionMarkers(attempts, events = []) {
  const sorted = [...(attempts || [])].sort((a, b) => num(a.resumption_index) - num(b.resumption_index));
  const markers = [];
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    const cur = sorted[i];
    const cause = enumName(prev.end_reason, 'ATTEMPT_END_REASON_') || 'UNSPECIFIED';
    const detection = enumName(prev.detection_method, 'DETECTION_METHOD_');
    const related = (events || []).filter(
      (e) => num(e.resumption_index) === num(prev.resumption_index) && CAUSE_EVENTS.has(enumName(e.type, 'RUN_EVENT_TYPE_')),
    );
    const lines = [
      `Resumption ${num(cur.resumption_index)}: resumed from step ${num(cur.resumed_from_step)}`,
      `Attempt ${num(prev.resumption_index)} ended: ${cause}${detection && detection !== 'UNSPECIFIED' ? ` (detected by ${detection.toLowerCase().replace(/_/g, ' ')})` : ''}`,
    ];
    if (prev.reason) lines.push(prev.reason);
    if (prev.first_failed_node) lines.push(`Node: ${prev.first_failed_node}`);
    for (const e of related) lines.push(`${fmtTime(e.time)} ${e.message}`);
    if (prev.ended_at) lines.push(`Ended ${fmtTime(prev.ended_at)}, at step ${num(prev.last_step)}`);
    markers.push({
      step: num(cur.resumed_from_step),
      resumption: num(cur.resumption_index),
      cause,
      text: lines.join('\n'),
    });
  }
  return markers;
}

// Aligned data for uPlot: x = every step seen, one y series per attempt (null where it has no
// point). Returns {xs, series: [{resumption, ys}], count}.
export function alignPoints(points, field, scale = 1) {
  const steps = new Set();
  const byAttempt = new Map();
  let count = 0;
  for (const p of points || []) {
    const v = p[field];
    if (v === undefined || v === null || !Number.isFinite(Number(v))) continue;
    const step = num(p.step);
    const r = num(p.resumption_index);
    steps.add(step);
    if (!byAttempt.has(r)) byAttempt.set(r, new Map());
    byAttempt.get(r).set(step, Number(v) * scale);
    count++;
  }
  const xs = [...steps].sort((a, b) => a - b);
  const series = [...byAttempt.keys()]
    .sort((a, b) => a - b)
    .map((r) => {
      const m = byAttempt.get(r);
      return { resumption: r, ys: xs.map((x) => (m.has(x) ? m.get(x) : null)) };
    });
  return { xs, series, count };
}

function markerPlugin(getMarkers, onHover) {
  let layer = null;
  const place = (u) => {
    if (!layer) return;
    replaceChildren(layer);
    const markers = getMarkers();
    const min = u.scales.x.min;
    const max = u.scales.x.max;
    for (const m of markers) {
      if (min === undefined || max === undefined || m.step < min || m.step > max) continue;
      const left = u.valToPos(m.step, 'x');
      const el = h('div', {
        class: 'resume-marker',
        testid: 'resumption-marker',
        dataset: { resumption: String(m.resumption), step: String(m.step), cause: m.cause },
        style: { left: `${left}px` },
        'aria-label': m.text,
        tabindex: '0',
      }, h('span', { class: 'resume-marker-label' }, `↻${m.resumption}`));
      el.addEventListener('mouseenter', () => onHover(m, el));
      el.addEventListener('focus', () => onHover(m, el));
      el.addEventListener('mouseleave', () => onHover(null, el));
      el.addEventListener('blur', () => onHover(null, el));
      layer.appendChild(el);
    }
  };
  return {
    hooks: {
      init: (u) => {
        layer = h('div', { class: 'marker-layer' });
        u.over.appendChild(layer);
      },
      draw: (u) => {
        // The lines themselves, on the canvas, under the series' cursor points.
        const { ctx } = u;
        const markers = getMarkers();
        ctx.save();
        ctx.strokeStyle = '#dc2626';
        ctx.lineWidth = Math.max(1, devicePixelRatio);
        ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
        for (const m of markers) {
          if (m.step < u.scales.x.min || m.step > u.scales.x.max) continue;
          const x = Math.round(u.valToPos(m.step, 'x', true));
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
        place(u);
      },
    },
  };
}

// The four charts in `container`. update({points, attempts, total_steps}, events) redraws them.
export function createCharts(container) {
  const tip = h('div', { class: 'marker-tip', testid: 'marker-tooltip', hidden: true });
  const grid = h('div', { class: 'charts' });
  replaceChildren(container, grid, tip);
  let markers = [];
  const charts = METRICS.map((m) => {
    const body = h('div', { class: 'chart-body' });
    const empty = h('div', { class: 'chart-empty muted' }, 'No progress reported yet.');
    const box = h('div', { class: 'chart', testid: `chart-${m.key}`, dataset: { points: '0', markers: '0' } }, h('div', { class: 'chart-title' }, m.label), body, empty);
    grid.appendChild(box);
    return { m, box, body, empty, plot: null, seriesKey: '' };
  });

  const onHover = (marker, el) => {
    if (!marker) {
      tip.hidden = true;
      return;
    }
    tip.textContent = marker.text;
    tip.hidden = false;
    const r = el.getBoundingClientRect();
    const c = container.getBoundingClientRect();
    tip.style.left = `${Math.max(0, Math.min(r.left - c.left + 8, c.width - 320))}px`;
    tip.style.top = `${r.top - c.top + 24}px`;
  };

  function width(c) {
    return Math.max(240, Math.floor(c.body.clientWidth || c.box.clientWidth - 16 || 400));
  }

  function build(c, aligned) {
    if (c.plot) c.plot.destroy();
    const opts = {
      width: width(c),
      height: 220,
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false }, points: { size: 5 } },
      scales: { x: { time: false } },
      axes: [
        { label: 'step', size: 40, labelSize: 16, values: (u, vals) => tickLabels(vals) },
        { size: 64, values: (u, vals) => tickLabels(vals) },
      ],
      series: [
        { label: 'step', value: (u, v) => (v === null || v === undefined ? '-' : String(v)) },
        ...aligned.series.map((s, i) => ({
          label: `attempt ${s.resumption}`,
          stroke: COLORS[i % COLORS.length],
          width: 1.5,
          spanGaps: true,
          points: { show: aligned.count < 80 },
          value: (u, v) => (v === null || v === undefined ? '-' : c.m.fmt(v)),
        })),
      ],
      plugins: [markerPlugin(() => markers, onHover)],
    };
    c.plot = new uPlot(opts, [aligned.xs, ...aligned.series.map((s) => s.ys)], c.body);
  }

  const ro = new ResizeObserver(() => {
    for (const c of charts) if (c.plot) c.plot.setSize({ width: width(c), height: 220 });
  });
  ro.observe(grid);

  return {
    update(metrics, events) {
      const points = (metrics && metrics.points) || [];
      markers = resumptionMarkers((metrics && metrics.attempts) || [], events);
      for (const c of charts) {
        const aligned = alignPoints(points, c.m.field, c.m.scale || 1);
        c.box.dataset.points = String(aligned.count);
        c.box.dataset.markers = String(markers.length);
        c.empty.hidden = aligned.count > 0;
        c.body.hidden = aligned.count === 0;
        if (aligned.count === 0) {
          if (c.plot) {
            c.plot.destroy();
            c.plot = null;
          }
          continue;
        }
        const key = aligned.series.map((s) => s.resumption).join(',') + (aligned.count < 80 ? 'p' : '');
        if (!c.plot || key !== c.seriesKey) {
          c.seriesKey = key;
          build(c, aligned);
        } else {
          c.plot.setData([aligned.xs, ...aligned.series.map((s) => s.ys)]);
        }
      }
    },
    destroy() {
      ro.disconnect();
      for (const c of charts) if (c.plot) c.plot.destroy();
    },
  };
}
