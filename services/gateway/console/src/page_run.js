// One run: GET /api/v1/runs/NAME/describe (the run, attempts, events, interruptions, goodput)
// every 2 s while it is active; GET /api/v1/runs/NAME/metrics when its progress moved (charts);
// logs over SSE (logs.js). Stop, Clone and Delete for the run's owner.
import { api, enc, isAbort } from './api.js';
import {
  enumName, fmtDuration, fmtNumber, fmtPercent, fmtTime, h, isActiveRun, link, num, parseTime,
  replaceChildren, runStatusBadge,
} from './dom.js';
import { createCharts } from './charts.js';
import { createLogViewer } from './logs.js';
import { renderTimeline } from './timeline.js';
import { progressBar } from './page_runs.js';
import { pruneEmpty, toYaml } from './yaml.js';

const POLL_MS = 2000;
const METRICS_EVERY_MS = 10000; // also refetched whenever the step or the attempt changes

export async function mountRun(container, ctx) {
  const name = ctx.params.name;
  const { signal } = ctx;
  let desc = null; // RunDescription
  let metrics = null;
  let metricsKey = '';
  let metricsAt = 0;
  let specMode = 'yaml';

  const title = h('h1', { testid: 'run-name' }, name);
  const statusEl = h('span', { testid: 'run-status' });
  const actions = h('div', { class: 'actions', testid: 'run-actions' });
  const summary = h('dl', { class: 'summary', testid: 'run-summary' });
  const goodputEl = h('div', { testid: 'run-goodput' });
  const timelineEl = h('div');
  const chartsEl = h('div', { testid: 'run-charts' });
  const specEl = h('pre', { class: 'spec', testid: 'run-spec' });
  const specToggle = h('button', { type: 'button', class: 'small', testid: 'spec-toggle' }, 'Show JSON');
  const charts = createCharts(chartsEl);
  const logs = createLogViewer({ runName: name, ctx });

  specToggle.addEventListener('click', () => {
    specMode = specMode === 'yaml' ? 'json' : 'yaml';
    specToggle.textContent = specMode === 'yaml' ? 'Show JSON' : 'Show YAML';
    renderSpec();
  });

  container.append(
    h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, link('/runs', 'Runs'), ' / '), title, statusEl, actions),
    h('div', { class: 'run-top' },
      h('section', { class: 'card' }, h('h2', null, 'Status'), summary),
      h('section', { class: 'card' }, h('h2', null, 'Goodput'), goodputEl)),
    h('section', { class: 'card' }, h('h2', null, 'Training'), chartsEl),
    h('section', { class: 'card' }, h('h2', null, 'Attempts and events'), timelineEl),
    logs.el,
    h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Spec'), specToggle), specEl),
  );

  function renderSpec() {
    if (!desc) return;
    const spec = JSON.parse(JSON.stringify(desc.run.spec || {}));
    if (specMode === 'json') {
      specEl.textContent = JSON.stringify(spec, null, 2);
      return;
    }
    if (spec.scheduling && spec.scheduling.priority) {
      spec.scheduling.priority = enumName(spec.scheduling.priority, 'PRIORITY_').toLowerCase();
    }
    specEl.textContent = toYaml(pruneEmpty(spec) || {});
  }

  function renderActions(run) {
    replaceChildren(actions);
    if (!ctx.session.whoami || run.user !== ctx.session.user) return;
    const active = isActiveRun(run);
    const stop = h('button', { type: 'button', testid: 'run-stop', disabled: !active || run.stop_requested, title: run.stop_requested ? 'Stop requested' : null }, run.stop_requested ? 'Stopping…' : 'Stop');
    const clone = h('button', { type: 'button', testid: 'run-clone' }, 'Clone');
    const del = h('button', { type: 'button', class: 'danger', testid: 'run-delete', disabled: active, title: active ? 'Only a finished run can be deleted' : null }, 'Delete');
    stop.addEventListener('click', async () => {
      const ok = await ctx.confirm({ title: `Stop ${run.name}?`, message: 'Its ranks are stopped; it can be restarted later.', okLabel: 'Stop run', danger: true });
      if (!ok) return;
      stop.disabled = true;
      try {
        await api(`/api/v1/runs/${enc(run.name)}/stop`, { method: 'POST', body: { reason: `stopped by ${ctx.session.user} from the console` }, signal });
        ctx.showInfo(`Stop requested for ${run.name}.`, 'run-action');
        await refresh();
      } catch (e) {
        ctx.showError(e);
        stop.disabled = false;
      }
    });
    clone.addEventListener('click', async () => {
      const newName = await ctx.prompt({
        title: `Clone ${run.name}`,
        message: 'Submits a copy of this run. Leave the name empty for one made from the spec\'s name.',
        okLabel: 'Clone',
        input: { label: 'New name (optional)', value: '', placeholder: (run.spec && run.spec.name) || '' },
      });
      if (newName === null) return;
      try {
        const res = await api(`/api/v1/runs/${enc(run.name)}/clone`, { method: 'POST', body: newName ? { new_name: newName } : {}, signal });
        const created = res.run && res.run.name;
        if (created) ctx.navigate(`/runs/${encodeURIComponent(created)}`);
      } catch (e) {
        ctx.showError(e);
      }
    });
    del.addEventListener('click', async () => {
      const ok = await ctx.confirm({ title: `Delete ${run.name}?`, message: 'The run, its attempts, events and logs are removed for good.', okLabel: 'Delete', danger: true });
      if (!ok) return;
      try {
        await api(`/api/v1/runs/${enc(run.name)}`, { method: 'DELETE', signal });
        ctx.navigate('/runs');
        ctx.showInfo(`Deleted ${run.name}.`);
      } catch (e) {
        ctx.showError(e);
      }
    });
    actions.append(stop, clone, del);
  }

  function renderSummary(run, attempts) {
    const p = run.progress || null;
    const compute = (run.spec && run.spec.compute) || {};
    const sched = (run.spec && run.spec.scheduling) || {};
    const nodes = (run.nodes || []).map((n) => n.node_name).join(', ');
    const rows = [
      ['User', run.user],
      ['Image', run.spec && run.spec.image],
      ['Compute', `${num(compute.gpus)} GPUs${num(compute.nodes) ? ` on ${num(compute.nodes)} nodes` : ''}${compute.cluster ? ` · cluster ${compute.cluster}` : ''}${compute.gpu_type ? ` · ${compute.gpu_type}` : ''}`],
      ['Priority', `${enumName(sched.priority, 'PRIORITY_').toLowerCase() || 'medium'}${sched.preemptible ? ', preemptible' : ''}`],
      ['Nodes', nodes || '—'],
      ['Created', fmtTime(run.created_at)],
      ['Started', fmtTime(run.started_at)],
      ['Ended', fmtTime(run.ended_at)],
      ['Attempts', `${attempts.length} (retries used ${num(run.retries_used)}${num(run.control_plane_interruptions) ? `, ${num(run.control_plane_interruptions)} by the control plane` : ''})`],
    ];
    if (run.status_reason) rows.push(['Reason', run.status_reason]);
    const items = rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v === undefined || v === null || v === '' ? '—' : v)]);
    if (p) {
      items.push(
        h('dt', null, 'Progress'),
        h('dd', null, progressBar(num(p.step), num(p.total_steps))),
        h('dt', null, 'Latest'),
        h('dd', { testid: 'run-latest' }, `loss ${fmtNumber(p.loss)} · MFU ${fmtPercent(p.mfu)} · ${fmtNumber(p.tokens_per_second, 3)} tokens/s · lr ${Number(p.learning_rate || 0).toExponential(2)}`),
      );
    }
    replaceChildren(summary, items);
  }

  // The run manager's figures (services/runs/describe.h): with progress reports, each
  // interruption from the last report before it to training back at that step, in its parts.
  function renderGoodput(d) {
    const run = d.run || {};
    const created = parseTime(run.created_at);
    const ended = parseTime(run.ended_at);
    const wall = created !== null ? Math.max(0, ((ended !== null ? ended : Date.now()) - created) / 1000) : 0;
    const interruptions = [...(d.interruptions || [])].sort((a, b) => num(a.resumption_index) - num(b.resumption_index));
    const lost = interruptions.reduce((sum, i) => sum + num(i.seconds_lost), 0);
    const byCause = Object.entries(d.seconds_lost_by_cause || {}).sort((a, b) => num(b[1]) - num(a[1]));
    const stats = h('div', { class: 'stats' },
      stat('Goodput', d.goodput !== undefined ? fmtPercent(num(d.goodput)) : '-', 'goodput-value', 'the steps kept at the run\'s usual pace, over wall time'),
      stat('Training', fmtDuration(num(run.effective_training_seconds)), 'goodput-training'),
      stat('Wall time', fmtDuration(wall), 'goodput-wall'),
      stat('Lost', fmtDuration(lost), 'goodput-lost', 'each interruption from the last progress before it to training back at that step'),
      stat('Step', num(d.step_seconds) > 0 ? `${fmtNumber(num(d.step_seconds), 3)} s` : '-', 'goodput-step', 'the median seconds per step'),
      stat('Cluster', d.cluster_goodput !== undefined ? fmtPercent(num(d.cluster_goodput)) : '-', 'goodput-cluster', 'the running runs\' goodput, weighted by their GPUs (ETTR)'));
    const a = d.checkpoint_advice;
    const advice = a
      ? h('p', { class: 'muted small', testid: 'checkpoint-advice' },
        `Checkpoints every ${num(a.interval_steps)} steps (${fmtDuration(num(a.interval_seconds))}), ${fmtNumber(num(a.save_seconds), 2)} s a save; `
        + `advised every ${num(a.advised_interval_steps)} steps (${fmtDuration(num(a.advised_interval_seconds))}): expected loss ${fmtPercent(num(a.expected_loss_advised))} instead of ${fmtPercent(num(a.expected_loss_now))}, `
        + `from ${a.rate_is_bound ? 'no hardware interruption (taken as one)' : `${num(a.interruptions)} hardware interruption(s)`} in ${Math.round(num(a.gpu_hours))} GPU-hours over ${Math.round(num(a.window_days))} days.`)
      : null;
    const part = (seconds) => (num(seconds) > 0 ? fmtDuration(num(seconds)) : '—');
    const table = interruptions.length
      ? h('table', { class: 'grid compact', testid: 'interruptions' },
        h('thead', null, h('tr', null, ['Attempt', 'Cause', 'Detail', 'Noticed', 'Waited', 'Restart', 'Redone', 'Lost'].map((t) => h('th', null, t)))),
        h('tbody', null, interruptions.map((i) => {
          const cause = enumName(i.cause, 'ATTEMPT_END_REASON_') || 'UNSPECIFIED';
          const detection = enumName(i.detection_method, 'DETECTION_METHOD_');
          return h('tr', { testid: 'interruption' },
            h('td', { class: 'num' }, `${num(i.resumption_index)} → ${num(i.resumption_index) + 1}`),
            h('td', null, h('span', { class: 'badge badge-bad' }, cause), detection && detection !== 'UNSPECIFIED' ? h('div', { class: 'muted small' }, `by ${detection.toLowerCase().replace(/_/g, ' ')}`) : null),
            h('td', null, i.detail || '—'),
            h('td', { class: 'num', title: 'the last progress before it to the attempt\'s end' }, part(i.detection_seconds)),
            h('td', { class: 'num', title: 'the attempt\'s end to the next one\'s start' }, part(i.downtime_seconds)),
            h('td', { class: 'num', title: 'the next start to its first step' }, part(i.restart_seconds)),
            h('td', { class: 'num', title: 'steps trained again' }, `${part(i.rework_seconds)}${num(i.rework_steps) ? ` (${num(i.rework_steps)} steps)` : ''}`),
            h('td', { class: 'num', testid: 'interruption-lost' }, `${fmtDuration(num(i.seconds_lost))}${i.ongoing ? '…' : ''}`));
        })))
      : h('p', { class: 'muted' }, 'No interruptions.');
    const causes = byCause.length
      ? h('p', { class: 'muted small', testid: 'lost-by-cause' }, `Lost by cause: ${byCause.map(([c, s]) => `${c} ${fmtDuration(num(s))}`).join(', ')}`)
      : null;
    replaceChildren(goodputEl, stats, table, causes, advice);
  }

  function render() {
    if (!desc) return;
    const run = desc.run;
    const attempts = desc.attempts || [];
    const events = desc.events || [];
    replaceChildren(statusEl, runStatusBadge(run.status, { testid: 'run-status-badge' }));
    statusEl.dataset.status = enumName(run.status, 'RUN_STATUS_');
    document.title = `${run.name} · Tessera`;
    renderActions(run);
    renderSummary(run, attempts);
    renderGoodput(desc);
    const open = timelineEl.querySelector('details');
    replaceChildren(timelineEl, renderTimeline(run, attempts, events, { eventsOpen: open ? open.open : undefined }));
    if (!specEl.textContent) renderSpec();
    const compute = (run.spec && run.spec.compute) || {};
    const latest = attempts.length ? attempts[attempts.length - 1] : null;
    let ranks = num(compute.gpus);
    if (latest && latest.nodes && latest.nodes.length) {
      const perNode = num(compute.procs_per_node);
      ranks = perNode > 0 ? perNode * latest.nodes.length : latest.nodes.reduce((s, n) => s + (n.gpu_indices || []).length, 0) || ranks;
    }
    logs.update(attempts, isActiveRun(run), ranks);
  }

  async function loadMetrics(force) {
    const run = desc.run;
    const key = `${num(run.resumption_index)}:${run.progress ? run.progress.step : ''}:${(desc.attempts || []).length}`;
    if (!force && key === metricsKey && Date.now() - metricsAt < METRICS_EVERY_MS) return;
    metricsKey = key;
    metricsAt = Date.now();
    metrics = await api(`/api/v1/runs/${enc(name)}/metrics`, { signal });
    charts.update(metrics, desc.events || []);
    ctx.clearError('run-metrics');
  }

  async function refresh() {
    const res = await api(`/api/v1/runs/${enc(name)}/describe`, { signal });
    desc = res.description || res;
    ctx.clearError('run-describe');
    try {
      await loadMetrics(false);
    } catch (e) {
      if (!isAbort(e)) ctx.showError(e, 'run-metrics');
    }
    render();
  }

  let timer = null;
  let finalDone = false;
  const tick = async () => {
    timer = null;
    try {
      await refresh();
    } catch (e) {
      if (isAbort(e)) return;
      ctx.showError(e, 'run-describe');
    }
    if (signal.aborted) return;
    // A finished run changes no more: one last look, then only on request.
    const active = !desc || isActiveRun(desc.run);
    if (!active && finalDone) return;
    if (!active) finalDone = true;
    timer = setTimeout(tick, active ? POLL_MS : 5 * POLL_MS);
  };

  const cleanup = () => {
    if (timer) clearTimeout(timer);
    charts.destroy();
    logs.destroy();
  };
  try {
    await refresh();
  } catch (e) {
    if (isAbort(e)) return cleanup;
    ctx.showError(e, 'run-describe');
    if (e.status === 404) {
      replaceChildren(container, h('h1', null, name), h('p', { testid: 'run-not-found' }, 'No such run, or not yours to see. ', link('/runs', 'All runs')));
      return cleanup;
    }
  }
  timer = setTimeout(tick, POLL_MS);
  return cleanup;
}

function stat(label, value, testid, title) {
  return h('div', { class: 'stat', title }, h('div', { class: 'stat-value', testid }, value), h('div', { class: 'stat-label' }, label));
}
