// A run's attempts and events on one time axis: a bar per attempt (waiting, then running, in
// the colour of how it ended) and a tick per event; the events also as a list below.
import { enumName, fmtDuration, fmtTime, h, num, parseTime } from './dom.js';

const END_KIND = {
  SUCCEEDED: 'ok',
  STOPPED: 'neutral',
  USER_EXIT: 'bad',
  SETUP_FAILED: 'bad',
  MAX_DURATION: 'warn',
  PREEMPTED: 'warn',
};

const EVENT_KIND = {
  NODE_FAILURE: 'bad',
  GPU_FAULT: 'bad',
  HANG_DETECTED: 'bad',
  STRAGGLER_DETECTED: 'warn',
  CONTROL_PLANE_FAULT: 'warn',
  PREEMPTED: 'warn',
  FAILED: 'bad',
  COMPLETED: 'ok',
  STARTED: 'active',
  REQUEUED: 'warn',
  LOSS_ROLLBACK: 'warn',
};

export function renderTimeline(run, attempts, events, { now = Date.now(), eventsOpen } = {}) {
  const t0 = parseTime(run.created_at) || now;
  const t1 = Math.max(t0 + 1000, parseTime(run.ended_at) || now);
  const span = t1 - t0;
  const pct = (t) => `${(((Math.min(Math.max(t, t0), t1) - t0) / span) * 100).toFixed(3)}%`;
  const width = (a, b) => `${Math.max(0.2, ((Math.min(b, t1) - Math.max(a, t0)) / span) * 100).toFixed(3)}%`;

  const sorted = [...attempts].sort((a, b) => num(a.resumption_index) - num(b.resumption_index));
  const rows = sorted.map((a) => {
    const created = parseTime(a.created_at) || t0;
    const started = parseTime(a.started_at);
    const ended = parseTime(a.ended_at);
    const endReason = enumName(a.end_reason, 'ATTEMPT_END_REASON_');
    const status = enumName(a.status, 'RUN_STATUS_');
    const kind = ended === null ? 'active' : END_KIND[endReason] || (endReason && endReason !== 'UNSPECIFIED' ? 'bad' : 'neutral');
    const nodes = (a.nodes || []).map((n) => n.node_name).join(', ');
    const bars = [];
    const waitEnd = started !== null ? started : ended !== null ? ended : now;
    bars.push(h('div', {
      class: 'tl-bar tl-wait',
      style: { left: pct(created), width: width(created, waitEnd) },
      title: `Attempt ${num(a.resumption_index)} waiting ${fmtDuration((waitEnd - created) / 1000)}`,
    }));
    if (started !== null) {
      const end = ended !== null ? ended : now;
      bars.push(h('div', {
        class: `tl-bar tl-run tl-${kind}`,
        style: { left: pct(started), width: width(started, end) },
        title: `Attempt ${num(a.resumption_index)} ran ${fmtDuration((end - started) / 1000)} on ${nodes || '-'}` +
          `, steps ${num(a.resumed_from_step)}–${num(a.last_step)}` +
          (ended !== null ? `\nEnded ${fmtTime(a.ended_at)}: ${endReason}${a.reason ? ` — ${a.reason}` : ''}` : '\nRunning'),
      }));
    }
    return h(
      'div',
      { class: 'tl-row', testid: 'timeline-attempt', dataset: { resumption: String(num(a.resumption_index)), status } },
      h('div', { class: 'tl-label' },
        h('strong', null, `#${num(a.resumption_index)}`), ' ',
        h('span', { class: 'muted' }, nodes || '—')),
      h('div', { class: 'tl-track' }, bars),
      h('div', { class: 'tl-end', title: a.reason || '' },
        ended === null ? (started === null ? 'waiting' : 'running') : `${endReason || status}${a.reason ? `: ${a.reason}` : ''}`),
    );
  });

  const ticks = events.map((e) => {
    const t = parseTime(e.time) || t0;
    const type = enumName(e.type, 'RUN_EVENT_TYPE_');
    return h('div', {
      class: `tl-tick tl-${EVENT_KIND[type] || 'neutral'}`,
      style: { left: pct(t) },
      title: `${fmtTime(e.time)} ${type}: ${e.message}`,
    });
  });

  const axis = h('div', { class: 'tl-row tl-axis' },
    h('div', { class: 'tl-label muted' }, 'events'),
    h('div', { class: 'tl-track' }, ticks),
    h('div', { class: 'tl-end muted' }, ''));
  const scale = h('div', { class: 'tl-row tl-scale muted small' },
    h('div', { class: 'tl-label' }),
    h('div', { class: 'tl-track tl-scale-track' },
      h('span', { class: 'tl-scale-start' }, fmtTime(run.created_at)),
      h('span', { class: 'tl-scale-end' }, run.ended_at ? fmtTime(run.ended_at) : 'now')),
    h('div', { class: 'tl-end' }, fmtDuration(span / 1000)));

  const list = h('table', { class: 'grid compact', testid: 'run-events' },
    h('thead', null, h('tr', null, h('th', null, 'Time'), h('th', null, 'Attempt'), h('th', null, 'Event'), h('th', null, 'Message'))),
    h('tbody', null, [...events].reverse().map((e) => {
      const type = enumName(e.type, 'RUN_EVENT_TYPE_');
      const details = Object.entries(e.details || {}).map(([k, v]) => `${k}=${v}`).join(' ');
      return h('tr', { testid: 'run-event', dataset: { type } },
        h('td', { class: 'nowrap' }, fmtTime(e.time)),
        h('td', { class: 'num' }, num(e.resumption_index) < 0 ? '—' : String(num(e.resumption_index))),
        h('td', null, h('span', { class: `badge badge-${EVENT_KIND[type] || 'neutral'}` }, type)),
        h('td', null, e.message || '', details ? h('div', { class: 'muted small' }, details) : null));
    })));

  return h('div', { class: 'timeline', testid: 'run-timeline' },
    h('div', { class: 'tl-chart' }, axis, rows, scale),
    h('details', { class: 'tl-events', open: eventsOpen !== undefined ? eventsOpen : events.length <= 30 }, h('summary', null, `${events.length} events`), list));
}
