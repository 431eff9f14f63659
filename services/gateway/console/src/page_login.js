// Log in with an API key: checked with GET /api/v1/whoami, then kept in sessionStorage (this tab
// only, gone when it closes; never localStorage, never a cookie).
import { api, getKey, isAbort } from './api.js';
import { h } from './dom.js';

export function mountLogin(container, ctx) {
  const next = safeNext(ctx.query.get('next'));
  if (getKey() && ctx.session.whoami) {
    ctx.navigate(next, { replace: true });
    return null;
  }
  const input = h('input', {
    type: 'password',
    id: 'api-key',
    name: 'api-key',
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: 'tsk_…',
    required: true,
    testid: 'login-key',
  });
  const error = h('p', { class: 'login-error', testid: 'login-error', role: 'alert' });
  const message = ctx.loginMessage();
  if (message) error.textContent = message;
  const submit = h('button', { type: 'submit', class: 'primary', testid: 'login-submit' }, 'Log in');
  const form = h(
    'form',
    { class: 'login-card', testid: 'login-form' },
    h('h1', null, 'Tessera'),
    h('p', { class: 'muted' }, 'Log in with an API key (', h('code', null, 'mcli admin create-api-key'), ').'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    error,
    submit,
    h('p', { class: 'muted small' }, 'The key is kept in this tab only, until you log out or close it.'),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) {
      error.textContent = 'Enter an API key.';
      return;
    }
    submit.disabled = true;
    error.textContent = '';
    try {
      const who = await api('/api/v1/whoami', { key, signal: ctx.signal, noAuthRedirect: true });
      ctx.onLogin(who, key);
      ctx.navigate(next, { replace: true });
    } catch (err) {
      if (isAbort(err)) return;
      error.textContent =
        err.status === 401 ? `Refused: ${err.message}` : `Cannot log in: ${err.message}`;
      input.select();
    } finally {
      submit.disabled = false;
    }
  });
  container.classList.add('login-page');
  container.append(form);
  input.focus();
  return null;
}

// Only a path of this site: never an absolute URL (an open redirect).
function safeNext(next) {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/login')) return '/runs';
  return next;
}
