// A run's output, live: GET /api/v1/runs/NAME/logs?follow=true as Server-Sent Events (event: log,
// data: a LogLine). Rank, node and attempt pick what the log service sends (the stream is opened
// again when they change); the search box filters the lines here. A batch's last event carries
// the cursor of what was sent as its id, so a dropped stream (or one at its maximum lifetime)
// goes on with Last-Event-ID from there, losing no line of a node that lags; a stream that ended
// with its attempt follows the next attempt from since=<the last line's time>. Lines seen twice
// (same attempt, rank, stream and sequence) are kept once.
import { enc } from './api.js';
import { debounce, fmtClock, h, num, replaceChildren } from './dom.js';
import { jsonEvents, openEventStream } from './sse.js';
import { liveIndicator } from './live.js';

const MAX_LINES = 10000; // kept in memory
const MAX_SHOWN = 5000; // in the DOM
const INITIAL_TAIL = 1000;

export function createLogViewer({ runName, ctx }) {
  const state = {
    attempt: 'latest', // or a resumption index as a string
    rank: '',
    node: '', // node_rank as a string
    search: '',
    runActive: true,
    attempts: [],
    ranks: 0,
  };
  let lines = [];
  let seen = new Set();
  let lastTime = '';
  let stream = null;
  let streamController = null;
  let pending = [];
  let frame = 0;

  const attemptSelect = h('select', { testid: 'log-attempt', 'aria-label': 'Attempt' }, h('option', { value: 'latest' }, 'Latest attempt'));
  const rankSelect = h('select', { testid: 'log-rank', 'aria-label': 'Rank' }, h('option', { value: '' }, 'All ranks'));
  const nodeSelect = h('select', { testid: 'log-node', 'aria-label': 'Node' }, h('option', { value: '' }, 'All nodes'));
  const search = h('input', { type: 'search', placeholder: 'Search lines…', testid: 'log-search', 'aria-label': 'Search the log' });
  const follow = h('input', { type: 'checkbox', checked: true, testid: 'log-follow' });
  const count = h('span', { class: 'muted small', testid: 'log-count' });
  const live = liveIndicator();
  const body = h('div', { class: 'log-body', testid: 'log-lines', role: 'log', 'aria-live': 'off', tabindex: '0' });
  const el = h(
    'section',
    { class: 'card logs', testid: 'logs' },
    h('div', { class: 'card-head' }, h('h2', null, 'Logs'), live.el, count),
    h('div', { class: 'filters' }, attemptSelect, nodeSelect, rankSelect, search, h('label', { class: 'inline' }, follow, ' Follow')),
    body,
  );

  attemptSelect.addEventListener('change', () => {
    state.attempt = attemptSelect.value;
    fillNodes();
    restart();
  });
  rankSelect.addEventListener('change', () => {
    state.rank = rankSelect.value;
    restart();
  });
  nodeSelect.addEventListener('change', () => {
    state.node = nodeSelect.value;
    restart();
  });
  search.addEventListener('input', debounce(() => {
    state.search = search.value;
    renderAll();
  }, 120));
  follow.addEventListener('change', () => {
    if (follow.checked) body.scrollTop = body.scrollHeight;
  });
  body.addEventListener('scroll', () => {
    const atBottom = body.scrollHeight - body.scrollTop - body.clientHeight < 30;
    if (atBottom !== follow.checked) follow.checked = atBottom; // scrolled up: stop following
  });

  function selectedAttempt() {
    if (state.attempt !== 'latest') return state.attempts.find((a) => String(num(a.resumption_index)) === state.attempt) || null;
    return state.attempts.length ? state.attempts[state.attempts.length - 1] : null;
  }

  function fillNodes() {
    const a = selectedAttempt();
    const nodes = a ? [...(a.nodes || [])].sort((x, y) => num(x.node_rank) - num(y.node_rank)) : [];
    const key = nodes.map((n) => `${n.node_rank}:${n.node_name}`).join(',');
    if (nodeSelect.dataset.key === key) return;
    nodeSelect.dataset.key = key;
    const keep = state.node;
    replaceChildren(
      nodeSelect,
      h('option', { value: '' }, 'All nodes'),
      nodes.map((n) => h('option', { value: String(num(n.node_rank)) }, `${n.node_name} (node rank ${num(n.node_rank)})`)),
    );
    nodeSelect.value = nodes.some((n) => String(num(n.node_rank)) === keep) ? keep : '';
    if (nodeSelect.value !== keep) state.node = nodeSelect.value;
  }

  function fillRanks(n) {
    if (n === state.ranks) return;
    state.ranks = n;
    const keep = state.rank;
    replaceChildren(rankSelect, h('option', { value: '' }, 'All ranks'), Array.from({ length: n }, (_, i) => h('option', { value: String(i) }, `rank ${i}`)));
    rankSelect.value = keep !== '' && Number(keep) < n ? keep : '';
  }

  function url(lastEventId) {
    const qs = new URLSearchParams({ follow: 'true' });
    if (lastEventId) {
      // The cursor (sent as Last-Event-ID) says where each stream goes on: no since, no tail.
    } else if (lastTime) qs.set('since', lastTime);
    else qs.set('tail', String(INITIAL_TAIL));
    if (state.rank !== '') qs.set('rank', state.rank);
    if (state.node !== '') qs.set('node_rank', state.node);
    if (state.attempt !== 'latest') qs.set('resumption', state.attempt);
    return `/api/v1/runs/${enc(runName)}/logs?${qs}`;
  }

  function restart() {
    if (streamController) streamController.abort();
    lines = [];
    seen = new Set();
    lastTime = '';
    pending = [];
    renderAll();
    start();
  }

  function start() {
    streamController = new AbortController();
    const mine = streamController;
    ctx.signal.addEventListener('abort', () => mine.abort(), { once: true });
    const addLine = jsonEvents('log', add);
    let endedWithError = false;
    const opened = openEventStream({
      url,
      signal: mine.signal,
      onStatus: (s) => {
        if (s === 'open') live.set('live');
        else if (s === 'closed') live.set('off');
        else live.set('connecting');
      },
      onOpen: () => {
        endedWithError = false;
        ctx.clearError('logs');
      },
      onEvent: (ev) => {
        if (ev.event === 'error') endedWithError = true; // e.g. the stream's maximum lifetime
        else addLine(ev);
      },
      // A clean end is the attempt's: follow the next one, from its start, while the run goes
      // on. An error event ends a stream that goes on from its cursor.
      onEnd: () => {
        if (!endedWithError) opened.forgetLastEventId();
        return state.attempt === 'latest' && state.runActive;
      },
      onError: (e) => {
        ctx.showError(e, 'logs');
        return true;
      },
    });
    stream = opened;
  }

  function add(line) {
    const key = `${num(line.resumption_index)}:${num(line.rank)}:${line.stream}:${line.sequence}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (line.time && (!lastTime || line.time > lastTime)) lastTime = line.time;
    lines.push(line);
    pending.push(line);
    if (lines.length > MAX_LINES) {
      const drop = lines.splice(0, lines.length - MAX_LINES);
      for (const d of drop) seen.delete(`${num(d.resumption_index)}:${num(d.rank)}:${d.stream}:${d.sequence}`);
    }
    if (!frame) frame = requestAnimationFrame(flush);
  }

  function matches(line) {
    if (!state.search) return true;
    return String(line.text || '').toLowerCase().includes(state.search.toLowerCase());
  }

  function lineEl(line) {
    const stderr = line.stream === 'LOG_STREAM_STDERR';
    const dropped = num(line.dropped_lines) > 0;
    return h(
      'div',
      {
        class: `log-line${stderr ? ' stderr' : ''}${dropped ? ' dropped' : ''}`,
        testid: 'log-line',
        dataset: { rank: String(num(line.rank)), node: line.node_name || '', attempt: String(num(line.resumption_index)) },
      },
      h('span', { class: 'log-time', title: line.time || '' }, fmtClock(line.time)),
      h('span', { class: 'log-src', title: `${line.node_name || ''} · attempt ${num(line.resumption_index)}` }, `${line.node_name || '?'} r${num(line.rank)}`),
      h('span', { class: 'log-text' }, line.text || ''),
    );
  }

  function updateCount() {
    const shown = body.childElementCount;
    count.textContent = state.search ? `${shown} of ${lines.length} lines match` : `${lines.length} lines`;
  }

  function flush() {
    frame = 0;
    const add = pending.filter(matches);
    pending = [];
    if (add.length) {
      const frag = document.createDocumentFragment();
      for (const l of add) frag.appendChild(lineEl(l));
      body.appendChild(frag);
      while (body.childElementCount > MAX_SHOWN) body.removeChild(body.firstChild);
      if (follow.checked) body.scrollTop = body.scrollHeight;
    }
    updateCount();
  }

  function renderAll() {
    pending = [];
    const shown = lines.filter(matches).slice(-MAX_SHOWN);
    replaceChildren(body, shown.map(lineEl));
    if (shown.length === 0) body.appendChild(h('div', { class: 'muted log-empty' }, lines.length ? 'No line matches.' : 'No output yet.'));
    if (follow.checked) body.scrollTop = body.scrollHeight;
    updateCount();
  }

  renderAll();

  return {
    el,
    // The run's attempts (describe), whether it is still active, and its rank count.
    update(attempts, runActive, ranks) {
      const wasActive = state.runActive;
      state.runActive = runActive;
      state.attempts = [...attempts].sort((a, b) => num(a.resumption_index) - num(b.resumption_index));
      const key = state.attempts.map((a) => num(a.resumption_index)).join(',');
      if (attemptSelect.dataset.key !== key) {
        attemptSelect.dataset.key = key;
        const keep = attemptSelect.value;
        replaceChildren(
          attemptSelect,
          h('option', { value: 'latest' }, 'Latest attempt'),
          state.attempts.map((a) => h('option', { value: String(num(a.resumption_index)) }, `Attempt ${num(a.resumption_index)}`)),
        );
        attemptSelect.value = [...attemptSelect.options].some((o) => o.value === keep) ? keep : 'latest';
      }
      fillNodes();
      fillRanks(ranks);
      if (!stream) start();
      else if (!wasActive && runActive && state.attempt === 'latest') restart(); // restarted run
    },
    destroy() {
      if (streamController) streamController.abort();
      if (frame) cancelAnimationFrame(frame);
    },
  };
}
