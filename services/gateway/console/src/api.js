// The REST API: the key (sessionStorage only), JSON calls, and errors as the gateway gives them
// ({"error": {"code": ..., "message": ...}}).

const KEY_ITEM = 'tessera.apiKey';

export function getKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM) || '';
  } catch {
    return '';
  }
}

export function setKey(key) {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function clearKey() {
  try {
    sessionStorage.removeItem(KEY_ITEM);
  } catch {
    // storage unavailable: nothing kept anyway
  }
}

export class ApiError extends Error {
  constructor(status, code, message, path) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.path = path;
  }
}

// Called with the ApiError of any 401: the app goes back to the login page with it.
let unauthorizedHandler = null;
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

export function notifyUnauthorized(err) {
  if (unauthorizedHandler) unauthorizedHandler(err);
}

export function authHeaders(key = getKey()) {
  return key ? { Authorization: `Bearer ${key}` } : {};
}

// Reads an error body (JSON with error.message, or text) into an ApiError.
export async function errorFromResponse(res, path) {
  let code = `HTTP_${res.status}`;
  let message = `${res.status} ${res.statusText || 'error'}`;
  let text = '';
  try {
    text = await res.text();
  } catch {
    // the body could not be read: the status line says enough
  }
  if (text) {
    try {
      const body = JSON.parse(text);
      const err = body && (body.error || body);
      if (err && typeof err.message === 'string' && err.message) message = err.message;
      if (err && typeof err.code === 'string' && err.code) code = err.code;
    } catch {
      message = `${message}: ${text.slice(0, 300)}`;
    }
  }
  return new ApiError(res.status, code, message, path);
}

// A JSON call: api('/api/v1/runs', {method: 'POST', body: {...}, signal, key, query}).
// Resolves to the parsed body; rejects with an ApiError (a 401 also goes to onUnauthorized,
// unless opts.noAuthRedirect).
export async function api(path, opts = {}) {
  const { method = 'GET', body, signal, key, query, noAuthRedirect = false } = opts;
  let url = path;
  if (query) {
    const qs = toQuery(query);
    if (qs) url += (url.includes('?') ? '&' : '?') + qs;
  }
  const headers = { Accept: 'application/json', ...authHeaders(key) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
      cache: 'no-store',
    });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'UNAVAILABLE', `cannot reach the gateway (${method} ${path}): ${e.message}`, path);
  }
  if (!res.ok) {
    const err = await errorFromResponse(res, path);
    if (res.status === 401 && !noAuthRedirect && unauthorizedHandler) unauthorizedHandler(err);
    throw err;
  }
  const text = await res.text();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(res.status, 'BAD_RESPONSE', `${method} ${path}: the reply is not JSON`, path);
  }
}

// {a: 1, b: [x, y], c: undefined} -> "a=1&b=x&b=y"
export function toQuery(params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => qs.append(k, String(x)));
    else qs.append(k, String(v));
  }
  return qs.toString();
}

export function isAbort(e) {
  return e && (e.name === 'AbortError' || e.name === 'TimeoutError');
}

// Every run the key may see, following next_page_token (1000 a page).
export async function listAllRuns(query, signal) {
  const runs = [];
  let token = '';
  for (let i = 0; i < 100; i++) {
    const page = await api('/api/v1/runs', {
      signal,
      query: { ...query, omit_parameters: true, page_size: 1000, page_token: token || undefined },
    });
    runs.push(...(page.runs || []));
    token = page.next_page_token || '';
    if (!token) break;
  }
  return runs;
}

export const enc = encodeURIComponent;
