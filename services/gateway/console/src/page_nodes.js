// Nodes: GET /api/v1/nodes (every 5 s, and at once after each node event), which GPUs the active
// runs hold (GET /api/v1/runs?status=STARTING|RUNNING|TERMINATING: a run's nodes and GPU
// indices), and a live panel of cordon and health events (GET /api/v1/events?follow=true, SSE,
// resumed with Last-Event-ID). Cordon, Uncordon, Drain and "Sweep now" for operators and admins.
import { api, enc, listAllRuns, toQuery } from './api.js';
import { badge, debounce, enumName, fmtAge, fmtTime, h, link, num, replaceChildren } from './dom.js';
import { jsonEvents, openEventStream } from './sse.js';
import { createTable } from './table.js';
import { liveIndicator } from './live.js';

const POLL_MS = 5000;
const MAX_EVENTS = 300;
const EVENT_TYPES = ['CORDONED', 'UNCORDONED', 'DRAINING', 'GPU_FAULT', 'HEALTH_CHECK_FAILED', 'HEALTH_CHECK_PASSED', 'LOST', 'RECOVERED', 'FENCED'];
const EVENT_KIND = {
  CORDONED: 'bad', UNCORDONED: 'ok', DRAINING: 'warn', GPU_FAULT: 'bad', HEALTH_CHECK_FAILED: 'bad',
  HEALTH_CHECK_PASSED: 'ok', LOST: 'bad', RECOVERED: 'ok', FENCED: 'warn', REGISTERED: 'neutral',
};

export async function mountNodes(container, ctx) {
  const { signal } = ctx;
  const operator = ctx.session.isOperator;
  let nodes = [];
  let usage = new Map(); // node name -> [{run, gpus: [indices]}]
  const events = [];

  const stateSelect = h('select', { testid: 'nodes-filter-state', 'aria-label': 'State' },
    [['', 'Any state'], ['SCHEDULABLE', 'schedulable'], ['CORDONED', 'cordoned'], ['DRAINING', 'draining'], ['LOST', 'lost'], ['UNHEALTHY', 'unhealthy'], ['BUSY', 'running a run'], ['IDLE', 'idle']]
      .map(([v, t]) => h('option', { value: v }, t)));
  stateSelect.value = ctx.query.get('state') || '';
  const text = h('input', { type: 'search', placeholder: 'Filter by name, label or reason…', value: ctx.query.get('q') || '', testid: 'nodes-filter-text', 'aria-label': 'Filter' });
  const summary = h('span', { class: 'muted', testid: 'nodes-summary' }, 'Loading…');
  const sweepButton = operator
    ? h('button', { type: 'button', class: 'primary', testid: 'sweep-now', onclick: () => sweepNow() }, 'Sweep now')
    : null;
  const live = liveIndicator();
  const eventList = h('ol', { class: 'event-list', testid: 'node-events' });

  const table = createTable(columns(), {
    testid: 'nodes-table',
    sort: { key: 'name', dir: 1 },
    rowAttrs: (n) => ({ testid: 'node-row', dataset: { name: n.name, adminState: enumName(n.admin_state, 'NODE_ADMIN_STATE_'), liveness: enumName(n.liveness, 'NODE_LIVENESS_') } }),
    empty: 'No nodes match.',
  });

  container.classList.add('page-wide');
  container.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Nodes'), summary, h('div', { class: 'actions' }, sweepButton)),
    h('div', { class: 'nodes-layout' },
      h('div', { class: 'nodes-main' }, h('div', { class: 'filters' }, stateSelect, text), table.el),
      h('aside', { class: 'card events-panel', testid: 'events-panel' },
        h('div', { class: 'card-head' }, h('h2', null, 'Cordon and health events'), live.el),
        eventList)),
  );

  const onFilter = () => {
    ctx.setQuery({ state: stateSelect.value, q: text.value.trim() });
    render();
  };
  stateSelect.addEventListener('change', onFilter);
  text.addEventListener('input', debounce(onFilter, 150));

  function matches(n) {
    const s = stateSelect.value;
    const admin = enumName(n.admin_state, 'NODE_ADMIN_STATE_');
    if (s === 'LOST' && enumName(n.liveness, 'NODE_LIVENESS_') !== 'LOST') return false;
    if (s === 'UNHEALTHY' && enumName(n.health, 'NODE_HEALTH_') !== 'UNHEALTHY') return false;
    if (['SCHEDULABLE', 'CORDONED', 'DRAINING'].includes(s) && admin !== s) return false;
    if (s === 'BUSY' && !(usage.get(n.name) || []).length) return false;
    if (s === 'IDLE' && (usage.get(n.name) || []).length) return false;
    const t = text.value.trim().toLowerCase();
    if (t) {
      const hay = [n.name, n.cluster, n.gpu_type, n.status_reason, ...Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`)].join(' ').toLowerCase();
      if (!hay.includes(t)) return false;
    }
    return true;
  }

  function render() {
    const rows = nodes.filter(matches);
    table.setRows(rows);
    const count = (f) => nodes.filter(f).length;
    const gpuTotal = nodes.reduce((s, n) => s + num(n.gpu_count), 0);
    const gpuUsed = [...usage.values()].reduce((s, list) => s + list.reduce((t, u) => t + u.gpus.length, 0), 0);
    summary.textContent = `${nodes.length} nodes · ${count((n) => enumName(n.liveness, 'NODE_LIVENESS_') === 'ONLINE')} online · ` +
      `${count((n) => enumName(n.admin_state, 'NODE_ADMIN_STATE_') === 'CORDONED')} cordoned · ` +
      `${count((n) => n.spare)} hot spare(s) · ${gpuUsed}/${gpuTotal} GPUs in use`;
  }

  async function load() {
    const [nodeRes, runs] = await Promise.all([
      api('/api/v1/nodes', { signal }),
      listAllRuns({ status: ['STARTING', 'RUNNING', 'TERMINATING'] }, signal),
    ]);
    nodes = nodeRes.nodes || [];
    usage = new Map();
    for (const r of runs) {
      for (const an of r.nodes || []) {
        if (!usage.has(an.node_name)) usage.set(an.node_name, []);
        usage.get(an.node_name).push({ run: r, gpus: (an.gpu_indices || []).map(num) });
      }
    }
    ctx.clearError('nodes');
    render();
  }
  const loadSoon = debounce(() => load().catch((e) => ctx.showError(e, 'nodes')), 200);

  async function act(node, verb) {
    const labels = { cordon: 'Cordon', uncordon: 'Uncordon', drain: 'Drain' };
    const help = {
      cordon: 'Nothing new is placed on it; runs there keep running.',
      uncordon: 'Runs may be placed on it again.',
      drain: 'Runs there finish; nothing new is placed.',
    };
    const reason = await ctx.prompt({
      title: `${labels[verb]} ${node.name}`,
      message: help[verb],
      okLabel: labels[verb],
      danger: verb !== 'uncordon',
      input: { label: 'Reason', required: verb !== 'uncordon', placeholder: verb === 'cordon' ? 'e.g. xid 79' : '' },
    });
    if (reason === null) return;
    try {
      await api(`/api/v1/nodes/${enc(node.name)}/${verb}`, { method: 'POST', body: { reason: reason || `${verb} from the console` }, signal });
      await load();
    } catch (e) {
      ctx.showError(e);
    }
  }

  async function sweepNow() {
    sweepButton.disabled = true;
    try {
      const res = await api('/api/v1/health/sweeps', { method: 'POST', body: {}, signal });
      const s = res.sweep || {};
      ctx.showInfo(`Sweep ${s.id} started on ${(s.node_names || []).length} nodes (see Health).`, 'sweep');
    } catch (e) {
      ctx.showError(e);
    } finally {
      sweepButton.disabled = false;
    }
  }

  function columns() {
    const cols = [
      { key: 'name', label: 'Node', class: 'nowrap', sort: (n) => n.name, render: (n) => h('strong', { testid: 'node-name' }, n.name) },
      { key: 'cluster', label: 'Cluster', sort: (n) => n.cluster, render: (n) => [n.cluster || '—', n.gpu_type ? h('div', { class: 'muted small' }, n.gpu_type) : null] },
      {
        key: 'state',
        label: 'State',
        class: 'nowrap',
        sort: (n) => `${enumName(n.liveness, 'NODE_LIVENESS_')}${enumName(n.admin_state, 'NODE_ADMIN_STATE_')}`,
        render: (n) => {
          const live = enumName(n.liveness, 'NODE_LIVENESS_');
          const admin = enumName(n.admin_state, 'NODE_ADMIN_STATE_');
          return h('span', { class: 'badges' },
            badge(live.toLowerCase(), live === 'ONLINE' ? 'ok' : 'bad', { testid: 'node-liveness' }),
            badge(admin.toLowerCase(), admin === 'SCHEDULABLE' ? 'ok' : admin === 'DRAINING' ? 'warn' : 'bad', { testid: 'node-admin-state' }),
            // A hot spare: kept for runs resuming after a node fault; its readiness on hover.
            n.spare ? badge('spare', 'neutral', { testid: 'node-spare', title: n.spare_status || '' }) : null);
        },
      },
      {
        key: 'health',
        label: 'Health',
        sort: (n) => enumName(n.health, 'NODE_HEALTH_'),
        render: (n) => {
          const s = enumName(n.health, 'NODE_HEALTH_');
          return badge(s.toLowerCase() || 'unknown', s === 'HEALTHY' ? 'ok' : s === 'UNHEALTHY' ? 'bad' : 'neutral', { testid: 'node-health' });
        },
      },
      {
        key: 'gpus',
        label: 'GPUs in use',
        sort: (n) => (usage.get(n.name) || []).reduce((s, u) => s + u.gpus.length, 0),
        render: (n) => gpuCells(n, usage.get(n.name) || [], ctx),
      },
      {
        key: 'labels',
        label: 'Labels',
        sort: (n) => Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`).join(','),
        render: (n) => h('span', { class: 'labels' }, Object.entries(n.labels || {}).sort().map(([k, v]) => h('span', { class: 'label' }, `${k}=${v}`))),
      },
      { key: 'reason', label: 'Reason', sort: (n) => n.status_reason, render: (n) => h('span', { class: 'reason', testid: 'node-reason', title: n.status_reason || '' }, n.status_reason || '') },
      {
        key: 'heartbeat',
        label: 'Seen',
        class: 'nowrap',
        sort: (n) => n.last_heartbeat_at || '',
        render: (n) => h('span', { title: fmtTime(n.last_heartbeat_at) }, `${fmtAge(n.last_heartbeat_at)} ago`),
      },
    ];
    if (operator) {
      cols.push({
        key: 'actions',
        label: '',
        render: (n) => {
          const admin = enumName(n.admin_state, 'NODE_ADMIN_STATE_');
          return h('span', { class: 'row-actions' },
            admin === 'SCHEDULABLE'
              ? h('button', { type: 'button', class: 'small', testid: 'node-cordon', onclick: () => act(n, 'cordon') }, 'Cordon')
              : h('button', { type: 'button', class: 'small', testid: 'node-uncordon', onclick: () => act(n, 'uncordon') }, 'Uncordon'),
            admin !== 'DRAINING'
              ? h('button', { type: 'button', class: 'small', testid: 'node-drain', onclick: () => act(n, 'drain') }, 'Drain')
              : null);
        },
      });
    }
    return cols;
  }

  // --- Events ---
  let frame = 0;
  function renderEvents() {
    frame = 0;
    replaceChildren(eventList, events.length
      ? events.map(eventItem)
      : h('li', { class: 'muted' }, 'No cordon or health events yet.'));
  }

  openEventStream({
    url: `/api/v1/events?${toQuery({ follow: true, limit: 100, type: EVENT_TYPES })}`,
    signal,
    onStatus: (s) => live.set(s === 'open' ? 'live' : s === 'closed' ? 'off' : 'connecting'),
    onOpen: () => ctx.clearError('node-events'),
    onEvent: jsonEvents('node_event', (e) => {
      if (events.some((x) => x.id === e.id)) return;
      events.unshift(e);
      events.sort((a, b) => num(b.id) - num(a.id));
      if (events.length > MAX_EVENTS) events.length = MAX_EVENTS;
      if (!frame) frame = requestAnimationFrame(renderEvents);
      loadSoon(); // the node's state changed: show it now
    }),
    onError: (e) => {
      ctx.showError(e, 'node-events');
      return true;
    },
  });

  renderEvents();
  let timer = null;
  const tick = async () => {
    try {
      await load();
    } catch (e) {
      ctx.showError(e, 'nodes');
    }
    if (!signal.aborted) timer = setTimeout(tick, POLL_MS);
  };
  await tick();
  return () => {
    clearTimeout(timer);
    loadSoon.cancel();
    if (frame) cancelAnimationFrame(frame);
  };
}

function gpuCells(node, uses, ctx) {
  const byIndex = new Map();
  for (const u of uses) for (const g of u.gpus) byIndex.set(g, u.run);
  const count = Math.max(num(node.gpu_count), (node.gpus || []).length);
  const chips = [];
  for (let i = 0; i < count; i++) {
    const run = byIndex.get(i);
    chips.push(h('span', { class: `gpu ${run ? 'gpu-used' : 'gpu-free'}`, title: run ? `GPU ${i}: ${run.name} (${run.user})` : `GPU ${i}: free` }, String(i)));
  }
  const runs = [...new Map(uses.map((u) => [u.run.name, u.run])).values()];
  return h('span', { class: 'gpu-cell', testid: 'node-gpus', dataset: { used: String(byIndex.size), total: String(count) } },
    h('span', { class: 'gpus' }, chips),
    runs.map((r) => h('span', { class: 'gpu-run' }, r.user === ctx.session.user || ctx.session.isOperator ? link(`/runs/${encodeURIComponent(r.name)}`, r.name) : r.name)));
}

function eventItem(e) {
  const type = enumName(e.type, 'NODE_EVENT_TYPE_');
  const actor = e.actor ? `${e.actor.name || enumName(e.actor.kind, 'ACTOR_KIND_').toLowerCase()}` : '';
  const evidence = e.evidence && Object.keys(e.evidence).length ? JSON.stringify(e.evidence, null, 2) : '';
  return h('li', { class: 'event', testid: 'node-event', dataset: { type, node: e.node_name, id: String(e.id) } },
    h('div', { class: 'event-head' },
      badge(type.toLowerCase().replace(/_/g, ' '), EVENT_KIND[type] || 'neutral'),
      h('strong', null, ` ${e.node_name}`),
      h('span', { class: 'muted small', title: fmtTime(e.time) }, ` ${fmtAge(e.time)} ago`)),
    h('div', { class: 'event-reason' }, e.reason || ''),
    actor ? h('div', { class: 'muted small' }, `by ${actor}`) : null,
    evidence ? h('details', null, h('summary', { class: 'small' }, 'evidence'), h('pre', { class: 'evidence' }, evidence)) : null);
}
