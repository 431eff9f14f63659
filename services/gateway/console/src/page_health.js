// Health: canary sweeps (GET /api/v1/health/sweeps, newest first) and one sweep with its
// evidence (GET /api/v1/health/sweeps/{id}): per node, the all-reduce bandwidth and compute
// figures against their peers', the verdicts, and the anomalies found. Polled while running.
import { api, enc } from './api.js';
import { badge, enumName, fmtAge, fmtBytes, fmtDuration, fmtNumber, fmtTime, h, link, num, parseTime, replaceChildren } from './dom.js';
import { createTable } from './table.js';

const POLL_MS = 3000;

const STATE_KIND = { RUNNING: 'active', FINISHED: 'ok', FAILED: 'bad' };
const VERDICT_KIND = { PASSED: 'ok', SLOW: 'warn', WRONG_DATA: 'bad', TIMEOUT: 'bad', ERROR: 'bad', GPU_FAULT: 'bad' };

function sweepState(s) {
  return enumName(s.state, 'SWEEP_STATE_');
}

export async function mountHealth(container, ctx) {
  const { signal } = ctx;
  const summary = h('span', { class: 'muted', testid: 'sweeps-summary' }, 'Loading…');
  const sweepButton = ctx.session.isOperator
    ? h('button', { type: 'button', class: 'primary', testid: 'sweep-now' }, 'Sweep now')
    : null;
  const table = createTable(
    [
      { key: 'id', label: 'Sweep', sort: (s) => s.id, render: (s) => link(`/health/${encodeURIComponent(s.id)}`, s.id, { testid: 'sweep-link' }) },
      { key: 'state', label: 'State', sort: (s) => sweepState(s), render: (s) => badge(sweepState(s).toLowerCase(), STATE_KIND[sweepState(s)], { testid: 'sweep-state' }) },
      { key: 'trigger', label: 'Trigger', sort: (s) => s.trigger, render: (s) => triggerText(s) },
      { key: 'nodes', label: 'Nodes', class: 'num', sort: (s) => (s.node_names || []).length, render: (s) => String((s.node_names || []).length) },
      {
        key: 'anomalous',
        label: 'Anomalies',
        sort: (s) => (s.anomalous_nodes || []).length,
        render: (s) => (s.anomalous_nodes || []).length
          ? h('span', { class: 'badges' }, s.anomalous_nodes.map((n) => badge(n, 'bad')))
          : h('span', { class: 'muted' }, sweepState(s) === 'RUNNING' ? '…' : 'none'),
      },
      { key: 'created', label: 'Started', sort: (s) => s.created_at || '', render: (s) => h('span', { title: fmtTime(s.created_at) }, `${fmtAge(s.created_at)} ago`) },
      { key: 'duration', label: 'Took', sort: (s) => duration(s), render: (s) => (s.finished_at ? fmtDuration(duration(s)) : '…') },
      { key: 'by', label: 'Requested by', sort: (s) => s.requested_by, render: (s) => s.requested_by || '—' },
    ],
    {
      testid: 'sweeps-table',
      sort: { key: 'created', dir: -1 },
      rowAttrs: (s) => ({ testid: 'sweep-row', dataset: { id: s.id, state: sweepState(s) } }),
      empty: 'No sweeps yet.',
    },
  );
  container.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Health'), summary, h('div', { class: 'actions' }, sweepButton)),
    h('p', { class: 'muted' }, 'Canary sweeps measure every node against its peers: an all-reduce across groups of nodes (bus bandwidth) and a compute stress on each (TFLOP/s). A node far below the others is cordoned with the figures as evidence.'),
    table.el,
  );

  let sweeps = [];
  async function load() {
    const res = await api('/api/v1/health/sweeps', { signal, query: { limit: 1000 } });
    sweeps = res.sweeps || [];
    table.setRows(sweeps);
    const running = sweeps.filter((s) => sweepState(s) === 'RUNNING').length;
    summary.textContent = `${sweeps.length} sweep${sweeps.length === 1 ? '' : 's'}${running ? ` · ${running} running` : ''}`;
    ctx.clearError('sweeps');
  }
  if (sweepButton) {
    sweepButton.addEventListener('click', async () => {
      sweepButton.disabled = true;
      try {
        const res = await api('/api/v1/health/sweeps', { method: 'POST', body: {}, signal });
        if (res.sweep && res.sweep.id) ctx.navigate(`/health/${encodeURIComponent(res.sweep.id)}`);
      } catch (e) {
        ctx.showError(e);
      } finally {
        sweepButton.disabled = false;
      }
    });
  }
  let timer = null;
  const tick = async () => {
    try {
      await load();
    } catch (e) {
      ctx.showError(e, 'sweeps');
      if (e.status === 403) {
        summary.textContent = 'Sweeps are shown to operators and admins.';
        return; // asking again will not change the answer
      }
    }
    if (!signal.aborted) timer = setTimeout(tick, POLL_MS);
  };
  await tick();
  return () => clearTimeout(timer);
}

export async function mountSweep(container, ctx) {
  const { signal } = ctx;
  const id = ctx.params.id;
  const head = h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, link('/health', 'Health'), ' / '), h('h1', { testid: 'sweep-id' }, id));
  const body = h('div', { testid: 'sweep-detail' });
  container.append(head, body);

  async function load() {
    const res = await api(`/api/v1/health/sweeps/${enc(id)}`, { signal });
    ctx.clearError('sweep');
    render(res.sweep || {}, res.results || []);
    return sweepState(res.sweep || {}) === 'RUNNING';
  }

  function render(s, results) {
    const state = sweepState(s);
    const info = h('dl', { class: 'summary' },
      item('State', badge(state.toLowerCase(), STATE_KIND[state], { testid: 'sweep-state' })),
      item('Trigger', triggerText(s)),
      item('Nodes', (s.node_names || []).join(', ') || '—'),
      item('Requested by', s.requested_by || '—'),
      item('Started', fmtTime(s.created_at)),
      item('Finished', s.finished_at ? `${fmtTime(s.finished_at)} (${fmtDuration(duration(s))})` : 'running…'),
      item('Results', `${results.length} of ${num(s.expected_results)} expected`),
      s.suspect_node ? item('Suspect', s.suspect_node) : null,
      s.trigger_detail ? item('Why it started', s.trigger_detail) : null,
      s.run_name ? item('Run', s.run_name) : null,
      s.follows_sweep_id ? item('Follows', s.follows_sweep_id) : null);
    const anomalies = (s.anomalous_nodes || []).length || (s.findings || []).length
      ? h('div', { class: 'anomalies', testid: 'sweep-anomalies' },
        h('h2', null, 'Anomalies'),
        h('p', null, (s.anomalous_nodes || []).length ? ['Cordoned: ', (s.anomalous_nodes || []).map((n) => badge(n, 'bad'))] : 'No node cordoned.'),
        h('ul', { class: 'findings' }, (s.findings || []).map((f) => h('li', { testid: 'sweep-finding' }, f))))
      : h('div', { testid: 'sweep-anomalies' }, h('h2', null, 'Anomalies'),
        h('p', { class: state === 'RUNNING' ? 'muted' : 'verdict-ok' }, state === 'RUNNING' ? 'Measuring…' : 'No anomaly: every node is within range of its peers.'));

    // A switch (or rack) whose every all-reduce pair failed: its nodes were cordoned together.
    const fabric = (s.fabric_faults || []).length
      ? h('section', { class: 'card', testid: 'sweep-fabric' },
        h('h2', null, 'Fabric faults'),
        s.fabric_faults.map((f) => h('div', { testid: 'sweep-fabric-fault' },
          h('p', null, `${f.label} ${f.value}: `, (f.nodes || []).map((n) => badge(n, 'bad')),
            ' cordoned together, returned together once all of them pass'),
          h('ul', { class: 'findings' }, (f.pairs || []).map((p) => h('li', null, p))))))
      : null;

    // Nodes that looked slow, measured again in turn with peers until the sequential test decided.
    const suspects = (s.suspects || []).length
      ? h('section', { class: 'card', testid: 'sweep-suspects' },
        h('h2', null, 'Suspects measured again'),
        (s.repeat_nodes || []).length
          ? h('p', null, 'Found slow once (not cordoned until a second sweep finds it too): ', s.repeat_nodes.map((n) => badge(n, 'warn')))
          : null,
        (s.inconclusive_nodes || []).length
          ? h('p', null, 'Inconclusive (not cordoned, measured again): ', s.inconclusive_nodes.map((n) => badge(n, 'warn')))
          : null,
        h('ul', { class: 'findings' }, s.suspects.map((line) => h('li', { testid: 'sweep-suspect' }, line))))
      : null;
    replaceChildren(body,
      h('div', { class: 'run-top' }, h('section', { class: 'card' }, h('h2', null, 'Sweep'), info), h('section', { class: 'card' }, anomalies)),
      fabric,
      suspects,
      h('section', { class: 'card' }, h('h2', null, 'Per node'), nodeSummary(s, results)),
      h('section', { class: 'card' }, h('h2', null, 'Every result'), resultTable(results)));
  }

  let timer = null;
  const tick = async () => {
    let running = true;
    try {
      running = await load();
    } catch (e) {
      ctx.showError(e, 'sweep');
      if (e.status >= 400 && e.status < 500 && e.status !== 429) running = false; // will not change
    }
    if (!signal.aborted && running) timer = setTimeout(tick, POLL_MS);
  };
  await tick();
  return () => clearTimeout(timer);
}

function item(k, v) {
  return [h('dt', null, k), h('dd', null, v)];
}

function duration(s) {
  const a = parseTime(s.created_at);
  const b = parseTime(s.finished_at);
  return a !== null && b !== null ? (b - a) / 1000 : null;
}

function triggerText(s) {
  const t = enumName(s.trigger, 'SWEEP_TRIGGER_').toLowerCase().replace(/_/g, ' ');
  return s.run_name ? `${t} (${s.run_name})` : t;
}

function bestBusbw(r) {
  return (r.samples || []).reduce((m, x) => Math.max(m, Number(x.busbw_gbps) || 0), 0);
}

function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x) && x > 0).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One row per node: its best all-reduce bus bandwidth and its compute rate, each against the
// median of the sweep's nodes, and its worst verdict.
function nodeSummary(s, results) {
  const names = [...new Set([...(s.node_names || []), ...results.map((r) => r.node_name)])].sort();
  const per = names.map((n) => {
    const mine = results.filter((r) => r.node_name === n);
    const ar = mine.filter((r) => enumName(r.kind, 'HEALTH_CHECK_KIND_') === 'ALLREDUCE');
    const cs = mine.filter((r) => enumName(r.kind, 'HEALTH_CHECK_KIND_') === 'COMPUTE_STRESS');
    const verdicts = mine.map((r) => enumName(r.verdict, 'HEALTH_VERDICT_'));
    const worst = verdicts.find((v) => v !== 'PASSED') || (verdicts.length ? 'PASSED' : '');
    return {
      name: n,
      busbw: ar.length ? Math.max(...ar.map(bestBusbw)) : null,
      tflops: cs.length ? Math.max(...cs.map((r) => Number(r.compute_tflops) || 0)) : null,
      expected: cs.length ? Math.max(...cs.map((r) => Number(r.expected_tflops) || 0)) : null,
      verdict: worst,
      anomalous: (s.anomalous_nodes || []).includes(n),
    };
  });
  const mBus = median(per.map((p) => p.busbw));
  const mTf = median(per.map((p) => p.tflops));
  const rel = (v, m) => (v !== null && m ? ` (${((v / m) * 100).toFixed(0)}% of median)` : '');
  return h('table', { class: 'grid compact', testid: 'sweep-nodes' },
    h('thead', null, h('tr', null, h('th', null, 'Node'), h('th', { class: 'num' }, 'All-reduce bus bandwidth'), h('th', { class: 'num' }, 'Compute'), h('th', null, 'Verdict'))),
    h('tbody', null, per.map((p) => h('tr', { testid: 'sweep-node', dataset: { node: p.name, verdict: p.verdict }, class: p.anomalous ? 'row-bad' : '' },
      h('td', null, h('strong', null, p.name), p.anomalous ? [' ', badge('anomalous', 'bad')] : null),
      h('td', { class: 'num' }, p.busbw !== null ? `${fmtNumber(p.busbw, 3)} GB/s${rel(p.busbw, mBus)}` : '—'),
      h('td', { class: 'num' }, p.tflops !== null ? `${fmtNumber(p.tflops, 3)} TFLOP/s${p.expected ? ` of ${fmtNumber(p.expected, 3)} expected` : ''}${rel(p.tflops, mTf)}` : '—'),
      h('td', null, p.verdict ? badge(p.verdict.toLowerCase().replace(/_/g, ' '), VERDICT_KIND[p.verdict] || 'neutral') : h('span', { class: 'muted' }, 'waiting'))))));
}

function resultTable(results) {
  const sorted = [...results].sort((a, b) => String(a.node_name).localeCompare(String(b.node_name)) || num(a.id) - num(b.id));
  return h('table', { class: 'grid compact', testid: 'sweep-results' },
    h('thead', null, h('tr', null, ['Node', 'Check', 'Group', 'Verdict', 'Figures', 'Took', 'Error'].map((t) => h('th', null, t)))),
    h('tbody', null, sorted.length ? sorted.map((r) => {
      const kind = enumName(r.kind, 'HEALTH_CHECK_KIND_');
      const verdict = enumName(r.verdict, 'HEALTH_VERDICT_');
      const took = parseTime(r.finished_at) !== null && parseTime(r.started_at) !== null ? fmtDuration((parseTime(r.finished_at) - parseTime(r.started_at)) / 1000) : '—';
      let figures;
      if (kind === 'ALLREDUCE' && (r.samples || []).length) {
        figures = h('table', { class: 'samples' },
          h('tbody', null, r.samples.map((x) => h('tr', null,
            h('td', null, fmtBytes(x.payload_bytes)),
            h('td', null, `${(Number(x.time_seconds) * 1000).toFixed(2)} ms`),
            h('td', null, `algbw ${fmtNumber(x.algbw_gbps, 3)}`),
            h('td', null, `busbw ${fmtNumber(x.busbw_gbps, 3)} GB/s`)))));
      } else if (kind === 'COMPUTE_STRESS') {
        figures = `${fmtNumber(r.compute_tflops, 3)} TFLOP/s${num(r.expected_tflops) ? ` (expected ${fmtNumber(r.expected_tflops, 3)})` : ''}`;
      } else {
        figures = '—';
      }
      return h('tr', { testid: 'sweep-result', dataset: { node: r.node_name, kind, verdict } },
        h('td', null, r.node_name),
        h('td', null, kind.toLowerCase().replace(/_/g, ' ')),
        h('td', null, (r.group || []).join(', ') || '—'),
        h('td', null, badge(verdict.toLowerCase().replace(/_/g, ' '), VERDICT_KIND[verdict] || 'neutral')),
        h('td', null, figures),
        h('td', { class: 'num' }, took),
        h('td', null, r.error || ''));
    }) : h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No results yet.'))));
}
