// The queue: GET /api/v1/queue every 2 s, in placement order, with why each run waits.
// Other users' runs come anonymised for a user key (the scheduler's choice).
import { api } from './api.js';
import { debounce, enumName, fmtAge, h, link, num, parseTime, runStatusBadge } from './dom.js';
import { createTable } from './table.js';
import { liveIndicator } from './live.js';

const POLL_MS = 2000;

export async function mountQueue(container, ctx) {
  const { signal } = ctx;
  let entries = [];
  const filter = h('input', { type: 'search', placeholder: 'Filter by run, user or reason…', value: ctx.query.get('q') || '', testid: 'queue-filter', 'aria-label': 'Filter' });
  const summary = h('span', { class: 'muted', testid: 'queue-summary' }, 'Loading…');
  const live = liveIndicator('polling');
  const table = createTable(
    [
      { key: 'position', label: '#', class: 'num', sort: (e) => num(e.position), render: (e) => h('span', { testid: 'queue-position' }, String(num(e.position) + 1)) },
      {
        key: 'name',
        label: 'Run',
        sort: (e) => e.run.name,
        render: (e) => (e.run.name && e.run.user === ctx.session.user) || ctx.session.isOperator
          ? link(`/runs/${encodeURIComponent(e.run.name)}`, e.run.name, { testid: 'queue-run' })
          : h('span', { testid: 'queue-run' }, e.run.name || '(hidden)'),
      },
      { key: 'status', label: 'Status', sort: (e) => enumName(e.run.status, 'RUN_STATUS_'), render: (e) => runStatusBadge(e.run.status) },
      { key: 'user', label: 'User', sort: (e) => e.run.user, render: (e) => e.run.user || '—' },
      { key: 'priority', label: 'Priority', sort: (e) => priorityRank(e.run), render: (e) => priorityName(e.run) },
      { key: 'gpus', label: 'GPUs', class: 'num', sort: (e) => gpus(e.run), render: (e) => String(gpus(e.run)) },
      { key: 'waiting', label: 'Waiting', sort: (e) => -(parseTime(e.run.created_at) || 0), render: (e) => fmtAge(e.run.created_at) },
      { key: 'reason', label: 'Why it waits', sort: (e) => e.waiting_reason, render: (e) => h('span', { testid: 'queue-reason' }, e.waiting_reason || '—') },
    ],
    {
      testid: 'queue-table',
      sort: { key: 'position', dir: 1 },
      rowAttrs: (e) => ({ testid: 'queue-row', dataset: { name: e.run.name || '' } }),
      empty: 'Nothing waits: every run is placed.',
    },
  );
  container.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Queue'), summary, live.el),
    h('div', { class: 'filters' }, filter),
    table.el,
  );

  function render() {
    const t = filter.value.trim().toLowerCase();
    const rows = t
      ? entries.filter((e) => [e.run.name, e.run.user, e.waiting_reason].some((s) => String(s || '').toLowerCase().includes(t)))
      : entries;
    table.setRows(rows);
    const gpusWaiting = entries.reduce((s, e) => s + gpus(e.run), 0);
    summary.textContent = `${entries.length} waiting · ${gpusWaiting} GPUs asked for`;
  }
  filter.addEventListener('input', debounce(() => {
    ctx.setQuery({ q: filter.value.trim() });
    render();
  }, 150));

  async function load() {
    const res = await api('/api/v1/queue', { signal });
    entries = (res.entries || []).map((e) => ({ ...e, run: e.run || {} }));
    ctx.clearError('queue');
    render();
  }

  let timer = null;
  const tick = async () => {
    try {
      await load();
    } catch (e) {
      ctx.showError(e, 'queue');
    }
    if (!signal.aborted) timer = setTimeout(tick, POLL_MS);
  };
  await tick();
  return () => clearTimeout(timer);
}

const PRIORITIES = ['HIGH', 'MEDIUM', 'LOW', 'LOWEST'];
function priorityName(run) {
  const p = enumName(run.spec && run.spec.scheduling && run.spec.scheduling.priority, 'PRIORITY_');
  return (p && p !== 'UNSPECIFIED' ? p : 'MEDIUM').toLowerCase();
}
function priorityRank(run) {
  const i = PRIORITIES.indexOf(priorityName(run).toUpperCase());
  return i < 0 ? 1 : i;
}
function gpus(run) {
  return num(run.spec && run.spec.compute && run.spec.compute.gpus);
}
