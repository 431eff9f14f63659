// Building the DOM without innerHTML: every string from the API goes in as text.

// h('div', {class: 'x', dataset: {testid: 'y'}, onclick: f}, child, 'text', [more children])
// Attributes: class, text (textContent), dataset, style (object), on<event> (a listener),
// testid (data-testid), and any other attribute (false/null/undefined leave it out).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'testid') el.dataset.testid = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = Boolean(v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replaceChildren(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// An in-app link: the router intercepts clicks on a[data-route].
export function link(href, text, attrs = {}) {
  return h('a', { href, 'data-route': '', ...attrs }, text);
}

// --- Formatting -----------------------------------------------------------------------------

// "RUN_STATUS_RUNNING" -> "RUNNING"
export function enumName(value, prefix) {
  if (value === undefined || value === null) return '';
  const s = String(value);
  return prefix && s.startsWith(prefix) ? s.slice(prefix.length) : s;
}

export function num(v) {
  if (v === undefined || v === null || v === '') return 0;
  const n = Number(v);
  return Number.isFinite(n) ? n : 0;
}

export function parseTime(t) {
  if (!t) return null;
  const ms = Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

// Seconds -> "3h 4m", "12m 5s", "8s", "<1s".
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '-';
  if (seconds < 0) seconds = 0;
  if (seconds < 1) return '<1s';
  const s = Math.round(seconds);
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${mm}m`;
  if (mm > 0) return `${mm}m ${ss}s`;
  return `${ss}s`;
}

export function fmtAge(time, now = Date.now()) {
  const ms = parseTime(time);
  if (ms === null) return '-';
  return fmtDuration((now - ms) / 1000);
}

export function fmtTime(time) {
  const ms = parseTime(time);
  if (ms === null) return '-';
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

export function fmtClock(time) {
  const ms = parseTime(time);
  if (ms === null) return '-';
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtNumber(v, digits = 4) {
  if (v === undefined || v === null || v === '' || !Number.isFinite(Number(v))) return '-';
  const n = Number(v);
  if (n !== 0 && (Math.abs(n) >= 1e6 || Math.abs(n) < 1e-3)) return n.toExponential(2);
  return Number(n.toPrecision(digits)).toString();
}

export function fmtPercent(fraction, digits = 1) {
  if (fraction === undefined || fraction === null || !Number.isFinite(Number(fraction))) return '-';
  return `${(Number(fraction) * 100).toFixed(digits)}%`;
}

export function fmtBytes(v) {
  const n = num(v);
  if (n <= 0) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(x >= 100 || i === 0 ? 0 : 1)} ${units[i]}`;
}

// A status word as a coloured badge: kind picks the colour (see app.css .badge-*).
export function badge(text, kind, attrs = {}) {
  return h('span', { class: `badge badge-${kind || 'neutral'}`, ...attrs }, text);
}

const RUN_STATUS_KIND = {
  PENDING: 'wait',
  QUEUED: 'wait',
  STARTING: 'active',
  RUNNING: 'active',
  TERMINATING: 'warn',
  COMPLETED: 'ok',
  STOPPED: 'neutral',
  FAILED: 'bad',
};

export function runStatusBadge(status, attrs = {}) {
  const s = enumName(status, 'RUN_STATUS_');
  return badge(s || 'UNKNOWN', RUN_STATUS_KIND[s] || 'neutral', attrs);
}

export const ACTIVE_RUN_STATUSES = ['PENDING', 'QUEUED', 'STARTING', 'RUNNING', 'TERMINATING'];
export const RUN_STATUSES = [...ACTIVE_RUN_STATUSES, 'COMPLETED', 'STOPPED', 'FAILED'];

export function isActiveRun(run) {
  return ACTIVE_RUN_STATUSES.includes(enumName(run && run.status, 'RUN_STATUS_'));
}

// A debounced call: at most one pending, run after `ms`.
export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      fn(...args);
    }, ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}
