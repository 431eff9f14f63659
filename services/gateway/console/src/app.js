// The console's shell: the key and who it is, the header, the error banners, dialogs, and a
// router over the history API (the gateway answers every path outside /api/ with index.html).
import { api, clearKey, getKey, isAbort, onUnauthorized, setKey } from './api.js';
import { enumName, h, replaceChildren } from './dom.js';
import { mountLogin } from './page_login.js';
import { mountRuns } from './page_runs.js';
import { mountRun } from './page_run.js';
import { mountQueue } from './page_queue.js';
import { mountNodes } from './page_nodes.js';
import { mountHealth, mountSweep } from './page_health.js';

const main = document.getElementById('main');
const topbar = document.getElementById('topbar');
const banners = document.getElementById('banners');

const ROUTES = [
  { pattern: /^\/login$/, mount: mountLogin, nav: null, title: 'Log in', public: true },
  { pattern: /^\/(runs\/?)?$/, mount: mountRuns, nav: 'runs', title: 'Runs' },
  { pattern: /^\/runs\/([^/]+)$/, mount: mountRun, nav: 'runs', title: 'Run', params: ['name'] },
  { pattern: /^\/queue\/?$/, mount: mountQueue, nav: 'queue', title: 'Queue' },
  { pattern: /^\/nodes\/?$/, mount: mountNodes, nav: 'nodes', title: 'Nodes' },
  { pattern: /^\/health\/?$/, mount: mountHealth, nav: 'health', title: 'Health' },
  { pattern: /^\/health\/([^/]+)$/, mount: mountSweep, nav: 'health', title: 'Sweep', params: ['id'] },
];

// --- Banners ---------------------------------------------------------------------------------

const bannerByKey = new Map();

// Shows an error (an ApiError, an Error or text) until dismissed, or until clearError(key) when
// the same source works again. Identical messages are counted, not repeated.
function showBanner(kind, message, key) {
  const k = key || `${kind}:${message}`;
  const existing = bannerByKey.get(k);
  if (existing) {
    existing.message.textContent = message;
    if (existing.text === message) {
      existing.count++;
      existing.counter.textContent = existing.count > 1 ? ` (×${existing.count})` : '';
    } else {
      existing.text = message;
      existing.count = 1;
      existing.counter.textContent = '';
    }
    return;
  }
  const msg = h('span', { class: 'banner-message', testid: `${kind}-message` }, message);
  const counter = h('span', { class: 'banner-count' });
  const el = h(
    'div',
    { class: `banner banner-${kind}`, testid: kind === 'error' ? 'error-banner' : 'info-banner' },
    msg,
    counter,
    h('button', { type: 'button', class: 'banner-close', title: 'Dismiss', 'aria-label': 'Dismiss', onclick: () => remove() }, '×'),
  );
  const entry = { el, message: msg, counter, count: 1, text: message };
  const remove = () => {
    el.remove();
    bannerByKey.delete(k);
  };
  bannerByKey.set(k, entry);
  banners.appendChild(el);
}

export function showError(err, key) {
  if (isAbort(err)) return;
  let message;
  if (err && err.name === 'ApiError') {
    message = err.code && !err.code.startsWith('HTTP_') ? `${err.message} (${err.code})` : err.message;
  } else if (err instanceof Error) {
    message = err.message;
  } else {
    message = String(err);
  }
  showBanner('error', message, key);
  if (!(err && err.name === 'ApiError')) console.error(err);
}

export function clearError(key) {
  const e = bannerByKey.get(key);
  if (e) {
    e.el.remove();
    bannerByKey.delete(key);
  }
}

export function showInfo(message, key) {
  showBanner('info', message, key);
}

function clearBanners() {
  for (const e of bannerByKey.values()) e.el.remove();
  bannerByKey.clear();
}

// --- Dialogs ---------------------------------------------------------------------------------

// A modal: resolves to the input's value (prompt), true (confirm), or null when cancelled.
function dialog({ title, message, okLabel = 'OK', danger = false, input = null }) {
  return new Promise((resolve) => {
    const field = input
      ? h('input', { type: 'text', class: 'dialog-input', testid: 'dialog-input', value: input.value || '', placeholder: input.placeholder || '', 'aria-label': input.label || title })
      : null;
    const err = h('div', { class: 'dialog-error', testid: 'dialog-error' });
    const ok = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', testid: 'dialog-ok' }, okLabel);
    const cancel = h('button', { type: 'button', testid: 'dialog-cancel' }, 'Cancel');
    const form = h(
      'form',
      { class: 'dialog', role: 'dialog', 'aria-modal': 'true', testid: 'dialog' },
      h('h2', null, title),
      message ? h('p', null, message) : null,
      input && input.label ? h('label', null, input.label, field) : field,
      err,
      h('div', { class: 'dialog-buttons' }, cancel, ok),
    );
    const backdrop = h('div', { class: 'backdrop' }, form);
    const done = (value) => {
      backdrop.remove();
      document.removeEventListener('keydown', onKey);
      resolve(value);
    };
    const onKey = (e) => {
      if (e.key === 'Escape') done(null);
    };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (field) {
        const v = field.value.trim();
        if (input.required && !v) {
          err.textContent = `${input.label || 'A value'} is required.`;
          return;
        }
        done(v);
      } else {
        done(true);
      }
    });
    cancel.addEventListener('click', () => done(null));
    document.addEventListener('keydown', onKey);
    document.body.appendChild(backdrop);
    (field || ok).focus();
  });
}

export const confirmDialog = (opts) => dialog(opts).then((v) => v === true);
export const promptDialog = (opts) => dialog({ ...opts, input: opts.input || {} });

// --- Session ---------------------------------------------------------------------------------

const session = {
  whoami: null, // {user, role, node}
  get role() {
    return this.whoami ? enumName(this.whoami.role, 'ROLE_') : '';
  },
  // Cordon, drain, sweeps: operators and admins.
  get isOperator() {
    return this.role === 'ADMIN' || this.role === 'OPERATOR';
  },
  get user() {
    return this.whoami ? this.whoami.user : '';
  },
};

let loginMessage = '';

function logout(message) {
  clearKey();
  session.whoami = null;
  loginMessage = message || '';
  const here = location.pathname + location.search;
  const next = here.startsWith('/login') ? '/' : here;
  navigate(`/login${next && next !== '/' ? `?next=${encodeURIComponent(next)}` : ''}`, { replace: true });
}

onUnauthorized((err) => {
  if (!getKey()) return;
  logout(`Signed out: ${err.message}`);
});

function renderTopbar(active) {
  if (!session.whoami) {
    topbar.hidden = true;
    replaceChildren(topbar);
    return;
  }
  topbar.hidden = false;
  const navLink = (key, href, label) =>
    h('a', { href, 'data-route': '', class: active === key ? 'active' : '', testid: `nav-${key}`, 'aria-current': active === key ? 'page' : null }, label);
  replaceChildren(
    topbar,
    h('a', { href: '/runs', 'data-route': '', class: 'brand' }, 'Tessera'),
    h(
      'nav',
      { class: 'nav' },
      navLink('runs', '/runs', 'Runs'),
      navLink('queue', '/queue', 'Queue'),
      navLink('nodes', '/nodes', 'Nodes'),
      navLink('health', '/health', 'Health'),
    ),
    h(
      'div',
      { class: 'who' },
      h('span', { class: 'who-user', testid: 'whoami-user' }, session.user),
      h('span', { class: 'badge badge-role', testid: 'whoami-role' }, session.role.toLowerCase() || 'unknown'),
      h('button', { type: 'button', class: 'small', testid: 'logout', onclick: () => logout('Logged out.') }, 'Log out'),
    ),
  );
}

// --- Router ----------------------------------------------------------------------------------

let current = null; // {controller, cleanup}

export function navigate(path, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render();
}

// Updates the query string of the current page without re-rendering it (filters, sort, page).
export function setQuery(params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  }
  const s = qs.toString();
  history.replaceState(null, '', location.pathname + (s ? `?${s}` : ''));
}

function unmount() {
  if (!current) return;
  current.controller.abort();
  try {
    if (typeof current.cleanup === 'function') current.cleanup();
  } catch (e) {
    console.error(e);
  }
  current = null;
}

async function render() {
  unmount();
  clearBanners();
  const path = location.pathname;
  let route = null;
  let match = null;
  for (const r of ROUTES) {
    match = r.pattern.exec(path);
    if (match) {
      route = r;
      break;
    }
  }
  const controller = new AbortController();
  current = { controller, cleanup: null };
  if (route && !route.public && !getKey()) {
    logout('');
    return;
  }
  if (route && !route.public && !session.whoami) {
    replaceChildren(main, h('p', { class: 'muted' }, 'Loading…'));
    try {
      session.whoami = await api('/api/v1/whoami', { signal: controller.signal, noAuthRedirect: true });
    } catch (e) {
      if (isAbort(e)) return;
      if (e.status === 401) {
        logout(e.message);
        return;
      }
      renderTopbar(null);
      replaceChildren(
        main,
        h('div', { class: 'page' }, h('h1', null, 'Cannot reach Tessera'),
          h('p', null, 'The gateway did not answer who this key belongs to.'),
          h('button', { type: 'button', testid: 'retry', onclick: () => render() }, 'Try again')),
      );
      showError(e);
      return;
    }
    if (controller.signal.aborted) return;
  }
  renderTopbar(route ? route.nav : null);
  document.title = route ? `${route.title} · Tessera` : 'Not found · Tessera';
  const container = h('div', { class: 'page' });
  replaceChildren(main, container);
  if (!route) {
    container.append(h('h1', null, 'Not found'), h('p', null, 'No page at ', h('code', null, path), '. ', h('a', { href: '/runs', 'data-route': '' }, 'Runs')));
    return;
  }
  const params = {};
  (route.params || []).forEach((name, i) => {
    params[name] = decodeURIComponent(match[i + 1]);
  });
  const ctx = {
    params,
    query: new URLSearchParams(location.search),
    signal: controller.signal,
    session,
    navigate,
    setQuery,
    showError,
    clearError,
    showInfo,
    confirm: confirmDialog,
    prompt: promptDialog,
    loginMessage: () => {
      const m = loginMessage;
      loginMessage = '';
      return m;
    },
    onLogin(whoami, key) {
      setKey(key);
      session.whoami = whoami;
    },
  };
  const mine = current;
  try {
    const cleanup = await route.mount(container, ctx);
    if (mine === current && !controller.signal.aborted) mine.cleanup = cleanup;
    else if (typeof cleanup === 'function') cleanup(); // left while it loaded
  } catch (e) {
    if (!isAbort(e)) showError(e);
  }
}

// In-app links: a[data-route] (and any same-origin link outside /api/ and /assets/).
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/assets/')) return;
  e.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) navigate(url.pathname + url.search);
});

window.addEventListener('popstate', () => render());

render();
