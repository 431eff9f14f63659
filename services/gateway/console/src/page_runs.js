// Runs: every run the key may see (GET /api/v1/runs, 1000 a page, parameters left out), filtered
// and sorted here, 100 rows a page. Live: GET /api/v1/runs/watch (SSE, a RunChange per run
// event) for status changes at once, and the active runs polled every 2 s for their progress
// (progress reports are not run events, so the watch does not carry them).
import { api, listAllRuns } from './api.js';
import {
  ACTIVE_RUN_STATUSES, RUN_STATUSES, debounce, enumName, fmtAge, fmtNumber, h, isActiveRun, link,
  num, parseTime, replaceChildren, runStatusBadge,
} from './dom.js';
import { jsonEvents, openEventStream } from './sse.js';
import { createTable } from './table.js';
import { liveIndicator } from './live.js';

const POLL_MS = 2000;
const FULL_RELOAD_MS = 30000;

export async function mountRuns(container, ctx) {
  const { signal } = ctx;
  const q = ctx.query;
  const filters = {
    status: q.get('status') || '',
    user: q.get('user') || '',
    cluster: q.get('cluster') || '',
    text: q.get('q') || '',
  };
  const runs = new Map(); // name -> Run
  let loaded = false;

  // --- Controls ---
  const statusSelect = h(
    'select',
    { testid: 'filter-status', 'aria-label': 'Status' },
    h('option', { value: '' }, 'Any status'),
    h('option', { value: 'active' }, 'Active'),
    RUN_STATUSES.map((s) => h('option', { value: s }, s.toLowerCase())),
  );
  statusSelect.value = filters.status;
  const userList = h('datalist', { id: 'run-users' });
  const clusterList = h('datalist', { id: 'run-clusters' });
  const userInput = h('input', { type: 'search', list: 'run-users', placeholder: 'User', value: filters.user, testid: 'filter-user', 'aria-label': 'User' });
  const clusterInput = h('input', { type: 'search', list: 'run-clusters', placeholder: 'Cluster', value: filters.cluster, testid: 'filter-cluster', 'aria-label': 'Cluster' });
  const textInput = h('input', { type: 'search', placeholder: 'Search names…', value: filters.text, testid: 'filter-text', 'aria-label': 'Search' });
  const summary = h('span', { class: 'muted', testid: 'runs-summary' });
  const live = liveIndicator();

  const sortParam = q.get('sort') || 'age'; // youngest first
  const table = createTable(columns(), {
    testid: 'runs-table',
    rowAttrs: (r) => ({ testid: 'run-row', dataset: { name: r.name, status: enumName(r.status, 'RUN_STATUS_') } }),
    sort: { key: sortParam.replace(/^-/, ''), dir: sortParam.startsWith('-') ? -1 : 1 },
    page: Math.max(0, num(q.get('page')) - 1),
    empty: 'No runs match.',
    onState: () => syncQuery(),
  });

  container.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Runs'), summary, live.el),
    h('div', { class: 'filters', testid: 'runs-filters' }, statusSelect, userInput, clusterInput, textInput, userList, clusterList),
    table.el,
  );

  function syncQuery() {
    const s = table.state();
    ctx.setQuery({
      status: filters.status,
      user: filters.user,
      cluster: filters.cluster,
      q: filters.text,
      sort: s.sort ? `${s.sort.dir < 0 ? '-' : ''}${s.sort.key}` : '',
      page: s.page > 0 ? s.page + 1 : '',
    });
  }

  const onFilter = () => {
    filters.status = statusSelect.value;
    filters.user = userInput.value.trim();
    filters.cluster = clusterInput.value.trim();
    filters.text = textInput.value.trim();
    table.setState({ page: 0 });
    render();
    syncQuery();
  };
  const onFilterSoon = debounce(onFilter, 150);
  statusSelect.addEventListener('change', onFilter);
  for (const input of [userInput, clusterInput, textInput]) input.addEventListener('input', onFilterSoon);

  // --- Rendering ---
  let frame = 0;
  function render() {
    frame = 0;
    const all = [...runs.values()];
    const matches = all.filter((r) => matchesFilters(r, filters));
    table.setRows(matches);
    const active = all.filter((r) => enumName(r.status, 'RUN_STATUS_') === 'RUNNING').length;
    const waiting = all.filter((r) => ['PENDING', 'QUEUED'].includes(enumName(r.status, 'RUN_STATUS_'))).length;
    summary.textContent = loaded
      ? `${matches.length === all.length ? '' : `${matches.length} of `}${all.length} runs · ${active} running · ${waiting} waiting`
      : 'Loading…';
    fillDatalist(userList, all.map((r) => r.user));
    fillDatalist(clusterList, all.map((r) => clusterOf(r)).filter(Boolean));
  }
  const scheduleRender = () => {
    if (!frame) frame = requestAnimationFrame(render);
  };

  // A newer version of a run replaces the one we have (the watch and the polls race).
  function merge(run) {
    const old = runs.get(run.name);
    if (old && num(old.version) > num(run.version)) return;
    if (old && !run.progress && old.progress && old.id === run.id) run = { ...run, progress: old.progress };
    runs.set(run.name, run);
  }

  async function loadAll() {
    const started = Date.now();
    const list = await listAllRuns({}, signal);
    const names = new Set(list.map((r) => r.name));
    for (const [name, r] of runs) {
      // Gone from the list: deleted (unless created since the list was read).
      if (!names.has(name) && (parseTime(r.created_at) || 0) < started - 5000) runs.delete(name);
    }
    list.forEach(merge);
    loaded = true;
    ctx.clearError('runs-load');
    scheduleRender();
  }

  async function pollActive() {
    const list = await listAllRuns({ status: ['STARTING', 'RUNNING', 'TERMINATING'] }, signal);
    list.forEach(merge);
    ctx.clearError('runs-poll');
    scheduleRender();
  }

  let watchWorks = false;
  function startWatch() {
    let opened = 0;
    openEventStream({
      url: '/api/v1/runs/watch',
      signal,
      onStatus: (s) => live.set(s === 'open' ? 'live' : s === 'closed' ? (watchWorks ? 'off' : 'polling') : 'connecting'),
      onOpen: () => {
        watchWorks = true;
        opened++;
        ctx.clearError('runs-watch');
        // The watch starts from now: what changed while it was down comes from the list.
        if (opened > 1) loadAll().catch((e) => ctx.showError(e, 'runs-load'));
      },
      onEvent: jsonEvents('run', (change) => {
        if (change && change.run) {
          merge(change.run);
          scheduleRender();
        }
      }),
      onError: (e) => {
        ctx.showError(e, 'runs-watch');
        if (e.permanent) watchWorks = false;
        return true;
      },
    });
  }

  // Polls: the active runs every 2 s (progress); everything every 30 s, or every 2 s while the
  // watch does not work.
  let lastFull = Date.now();
  const timer = setInterval(async () => {
    if (!loaded) return;
    try {
      if (!watchWorks || Date.now() - lastFull >= FULL_RELOAD_MS) {
        lastFull = Date.now();
        await loadAll();
      } else if ([...runs.values()].some((r) => isActiveRun(r))) {
        await pollActive();
      } else {
        scheduleRender(); // ages
      }
    } catch (e) {
      ctx.showError(e, 'runs-poll');
    }
  }, POLL_MS);

  render();
  startWatch();
  try {
    await loadAll();
  } catch (e) {
    ctx.showError(e, 'runs-load');
  }

  return () => {
    clearInterval(timer);
    if (frame) cancelAnimationFrame(frame);
  };
}

function clusterOf(r) {
  return (r.spec && r.spec.compute && r.spec.compute.cluster) || '';
}

function matchesFilters(r, f) {
  const status = enumName(r.status, 'RUN_STATUS_');
  if (f.status === 'active' && !ACTIVE_RUN_STATUSES.includes(status)) return false;
  if (f.status && f.status !== 'active' && status !== f.status) return false;
  const lc = (s) => String(s || '').toLowerCase();
  if (f.user && !lc(r.user).includes(lc(f.user))) return false;
  if (f.cluster && !lc(clusterOf(r)).includes(lc(f.cluster))) return false;
  if (f.text) {
    const t = lc(f.text);
    if (!lc(r.name).includes(t) && !lc(r.spec && r.spec.image).includes(t)) return false;
  }
  return true;
}

function fillDatalist(list, values) {
  const uniq = [...new Set(values)].sort().slice(0, 200);
  if (list.dataset.values === uniq.join('\n')) return;
  list.dataset.values = uniq.join('\n');
  replaceChildren(list, uniq.map((v) => h('option', { value: v })));
}

function progressOf(r) {
  const p = r.progress;
  if (!p) return null;
  return { step: num(p.step), total: num(p.total_steps), loss: p.loss };
}

export function progressBar(step, total, testid = 'run-progress') {
  const frac = total > 0 ? Math.min(1, step / total) : 0;
  return h(
    'div',
    { class: 'progress', testid, title: total > 0 ? `${(frac * 100).toFixed(1)}%` : 'total unknown', dataset: { step: String(step), total: String(total) } },
    h('div', { class: 'progress-bar', style: { width: `${(frac * 100).toFixed(1)}%` } }),
    h('span', { class: 'progress-text' }, total > 0 ? `${step}/${total}` : `${step}`),
  );
}

function columns() {
  return [
    {
      key: 'name',
      label: 'Name',
      sort: (r) => r.name,
      render: (r) => link(`/runs/${encodeURIComponent(r.name)}`, r.name, { testid: 'run-link' }),
    },
    {
      key: 'status',
      label: 'Status',
      sort: (r) => RUN_STATUSES.indexOf(enumName(r.status, 'RUN_STATUS_')),
      render: (r) => {
        const b = runStatusBadge(r.status, { testid: 'run-status' });
        if (num(r.resumption_index) > 0) {
          return [b, h('span', { class: 'muted small', title: 'resumptions' }, ` ↻${num(r.resumption_index)}`)];
        }
        return b;
      },
    },
    { key: 'user', label: 'User', sort: (r) => r.user, render: (r) => r.user },
    { key: 'cluster', label: 'Cluster', sort: (r) => clusterOf(r), render: (r) => clusterOf(r) || h('span', { class: 'muted' }, '—') },
    {
      key: 'gpus',
      label: 'GPUs',
      class: 'num',
      sort: (r) => num(r.spec && r.spec.compute && r.spec.compute.gpus),
      render: (r) => String(num(r.spec && r.spec.compute && r.spec.compute.gpus)),
    },
    {
      key: 'age',
      label: 'Age',
      // Oldest first when ascending.
      sort: (r) => -(parseTime(r.created_at) || 0),
      render: (r) => h('span', { title: r.created_at }, fmtAge(r.created_at)),
    },
    {
      key: 'progress',
      label: 'Progress',
      sort: (r) => {
        const p = progressOf(r);
        return p ? (p.total > 0 ? p.step / p.total : 0) : '';
      },
      render: (r) => {
        const p = progressOf(r);
        return p ? progressBar(p.step, p.total) : h('span', { class: 'muted' }, '—');
      },
    },
    {
      key: 'loss',
      label: 'Loss',
      class: 'num',
      sort: (r) => {
        const p = progressOf(r);
        return p && p.step > 0 ? num(p.loss) : '';
      },
      render: (r) => {
        const p = progressOf(r);
        return p && p.step > 0 ? h('span', { testid: 'run-loss' }, fmtNumber(p.loss)) : h('span', { class: 'muted' }, '—');
      },
    },
  ];
}
