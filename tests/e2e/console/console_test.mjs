// The web console in headless Chromium against a running local cluster; run by
// console_test.sh, which starts the cluster and sets:
//   CONSOLE_URL            where the console is served (dev/serve.mjs, or the gateway itself)
//   TESSERA_ADMIN_KEY      the cluster's admin key
//   MCLI, TESSERA_CONFIG   mcli and its settings (the same admin key)
//   TESSERA_TEST_RUN_YAML  a training run that reports progress for longer than the test
//   TESSERA_ARTIFACTS_DIR  where the screenshots go
// Each check prints "PASS name (seconds)" or "FAIL name: why"; the exit status is 1 if any failed.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const consoleDir = resolve(here, '../../../services/gateway/console');
const require = createRequire(join(consoleDir, 'package.json'));
const { chromium } = require('playwright-core');

function env(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`console_test.mjs: ${name} is not set (run console_test.sh)`);
    process.exit(2);
  }
  return v;
}

const BASE = env('CONSOLE_URL').replace(/\/$/, '');
const ADMIN_KEY = env('TESSERA_ADMIN_KEY');
const MCLI = env('MCLI');
const RUN_YAML = env('TESSERA_TEST_RUN_YAML');
const ARTIFACTS = env('TESSERA_ARTIFACTS_DIR');
mkdirSync(ARTIFACTS, { recursive: true });

// mcli's notes on stderr ("Keep the secret now ...") stay out of the test's output.
const mcli = (...args) =>
  execFileSync(MCLI, args, { encoding: 'utf8', timeout: 30000, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const mcliJson = (...args) => JSON.parse(mcli(...args, '-o', 'json'));

// --- Steps ----------------------------------------------------------------------------------

const results = [];
const t0 = Date.now();

async function step(name, fn, { needs = [] } = {}) {
  const missing = needs.filter((n) => !results.find((r) => r.name === n && r.ok));
  if (missing.length) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: skipped, needs ${missing.join(', ')}`);
    return;
  }
  const start = Date.now();
  try {
    const note = await fn();
    results.push({ name, ok: true });
    console.log(`PASS ${name} (${((Date.now() - start) / 1000).toFixed(1)} s)${note ? `: ${note}` : ''}`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: ${String((e && e.message) || e).split('\n').slice(0, 6).join('\n  ')}`);
    await shot(`failed-${name}.png`).catch(() => {});
  }
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

// --- Browser --------------------------------------------------------------------------------

const args = [];
if (typeof process.getuid === 'function' && process.getuid() === 0) args.push('--no-sandbox');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args,
});
const contextOptions = {
  viewport: { width: 1440, height: 900 },
  // The local cluster's CA is not in Chromium's store; the gateway's certificate is for localhost.
  ignoreHTTPSErrors: BASE.startsWith('https:'),
};
const context = await browser.newContext(contextOptions);
let page = await context.newPage();
const pageErrors = [];
function watchPage(p) {
  p.on('pageerror', (e) => pageErrors.push(e.message));
  p.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[134]/.test(m.text())) pageErrors.push(m.text());
  });
}
watchPage(page);

async function shot(file) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(ARTIFACTS, file), fullPage: true });
}

const tid = (id) => `[data-testid="${id}"]`;

let runName = '';
let runNode = '';
let otherNode = '';

try {
  await step('login-refuses-wrong-key', async () => {
    await page.goto(`${BASE}/runs`);
    await page.waitForSelector(tid('login-form'));
    expect(new URL(page.url()).pathname === '/login', `not sent to /login: ${page.url()}`);
    await page.fill(tid('login-key'), 'tsk_not_a_key');
    await page.click(tid('login-submit'));
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.trim() !== '', tid('login-error'), { timeout: 5000 });
    const message = await page.textContent(tid('login-error'));
    expect(/invalid API key/i.test(message), `unexpected message "${message}"`);
    expect(await page.isHidden(tid('whoami-user')).catch(() => true), 'logged in with a wrong key');
    await shot('login.png');
    return `"${message.trim()}"`;
  });

  await step('login-with-admin-key', async () => {
    await page.fill(tid('login-key'), ADMIN_KEY);
    await page.click(tid('login-submit'));
    await page.waitForSelector(tid('runs-table'), { timeout: 10000 });
    const who = mcliJson('whoami');
    const user = await page.textContent(tid('whoami-user'));
    const role = await page.textContent(tid('whoami-role'));
    expect(user === who.user, `header says user "${user}", not "${who.user}"`);
    expect(role === 'admin', `header says role "${role}"`);
    expect(new URL(page.url()).pathname === '/runs', `not back on /runs: ${page.url()}`);
    const stored = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: localStorage.length, cookie: document.cookie }));
    expect(stored.local === 0 && stored.cookie === '' && stored.session.length === 1, `the key is kept elsewhere than sessionStorage: ${JSON.stringify(stored)}`);
    return `${user} (${role})`;
  });

  await step('submitted-run-appears-live', async () => {
    const before = await page.locator(tid('run-row')).count();
    const started = Date.now();
    runName = mcli('run', '-f', RUN_YAML).split('\n').pop().trim();
    expect(/^console-train-/.test(runName), `mcli printed "${runName}"`);
    // No reload: the watch (or the poll) brings it.
    await page.waitForSelector(`${tid('run-row')}[data-name="${runName}"]`, { timeout: 10000 });
    const seen = Date.now() - started;
    await page.waitForSelector(`${tid('run-row')}[data-name="${runName}"][data-status="RUNNING"]`, { timeout: 30000 });
    await page.waitForSelector(`${tid('run-row')}[data-name="${runName}"] ${tid('run-progress')}`, { timeout: 20000 });
    expect((await page.locator(tid('run-row')).count()) === before + 1, 'row count did not grow by one');
    await shot('runs.png');
    return `${runName} shown ${seen} ms after submit`;
  }, { needs: ['login-with-admin-key'] });

  await step('run-logs-stream', async () => {
    await page.click(`${tid('run-row')}[data-name="${runName}"] ${tid('run-link')}`);
    await page.waitForSelector(tid('run-name'));
    expect(new URL(page.url()).pathname === `/runs/${runName}`, `on ${page.url()}`);
    await page.waitForSelector(tid('log-line'), { timeout: 30000 });
    const first = await page.locator(tid('log-line')).count();
    // Live: more lines come without a reload.
    await page.waitForFunction(
      ([sel, n]) => document.querySelectorAll(sel).length > n,
      [tid('log-line'), first],
      { timeout: 15000 },
    );
    const text = await page.locator(tid('log-lines')).innerText();
    expect(/step \d+\/100000: loss/.test(text), 'no training step in the log');
    // The search box filters what is shown.
    await page.fill(tid('log-search'), 'checkpoint: step');
    await page.waitForFunction((sel) => {
      const lines = [...document.querySelectorAll(sel)];
      return lines.length > 0 && lines.every((l) => l.textContent.includes('checkpoint: step'));
    }, tid('log-line'), { timeout: 5000 });
    await page.fill(tid('log-search'), '');
    return `${first} lines at first, then more`;
  }, { needs: ['submitted-run-appears-live'] });

  await step('log-follow-resumes-from-its-cursor', async () => {
    // The server ends every stream within 20 s (console_test.sh): the follow opens again with
    // the last event's id (the cursor of what it received), with no since or tail, and goes on.
    const logsPath = `/api/v1/runs/${encodeURIComponent(runName)}/logs`;
    const resumed = new Promise((resolve) => {
      const onRequest = (req) => {
        const id = req.headers()['last-event-id'];
        if (!id || new URL(req.url()).pathname !== logsPath) return;
        page.off('request', onRequest);
        resolve({ url: new URL(req.url()), id });
      };
      page.on('request', onRequest);
    });
    const before = await page.locator(tid('log-line')).count();
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('no follow reopened with Last-Event-ID within 45 s')), 45000);
    });
    const { url, id } = await Promise.race([resumed, timeout]).finally(() => clearTimeout(timer));
    expect(id.startsWith('c1.'), `Last-Event-ID is not a log cursor: ${id}`);
    expect(!url.searchParams.has('since') && !url.searchParams.has('tail'), `a resumed follow also asked for ${url.search}`);
    await page.waitForFunction(
      ([sel, n]) => document.querySelectorAll(sel).length > n,
      [tid('log-line'), before],
      { timeout: 20000 },
    );
    return `reopened with a ${id.length}-byte cursor, and lines kept coming`;
  }, { needs: ['run-logs-stream'] });

  await step('chart-draws-points', async () => {
    await page.waitForFunction((sel) => Number(document.querySelector(sel)?.dataset.points || 0) >= 3, tid('chart-loss'), { timeout: 30000 });
    for (const c of ['chart-loss', 'chart-mfu', 'chart-tokens', 'chart-lr']) {
      expect(await page.locator(`${tid(c)} canvas`).count() > 0, `${c} has no canvas`);
    }
    return `${await page.getAttribute(tid('chart-loss'), 'data-points')} loss points`;
  }, { needs: ['run-logs-stream'] });

  await step('resumption-marker-after-fault', async () => {
    const d = mcliJson('describe', 'run', runName);
    runNode = ((d.run || d.description?.run || {}).nodes || [])[0]?.node_name;
    expect(runNode, 'the run has no node');
    otherNode = runNode === 'node-0' ? 'node-1' : 'node-0';
    mcli('admin', 'inject-fault', runNode, '--kind', 'xid');
    const marker = `${tid('chart-loss')} ${tid('resumption-marker')}`;
    await page.waitForSelector(marker, { timeout: 60000 });
    // It resumed on the other node and goes on training.
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('running'), tid('run-timeline'), { timeout: 30000 });
    await page.hover(marker);
    await page.waitForSelector(`${tid('marker-tooltip')}:not([hidden])`, { timeout: 5000 });
    const tip = await page.textContent(tid('marker-tooltip'));
    expect(/GPU_FAULT/.test(tip) && tip.includes(runNode), `tooltip says "${tip}"`);
    const interruption = await page.textContent(tid('interruptions'));
    expect(/gpu_fault/i.test(interruption), `interruptions table: ${interruption}`);
    await page.mouse.move(5, 5);
    await shot('run.png');
    return `fault on ${runNode}: "${tip.split('\n')[1]}"`;
  }, { needs: ['chart-draws-points'] });

  await step('cordon-shows-on-nodes-page-within-2s', async () => {
    await page.click(tid('nav-nodes'));
    await page.waitForSelector(`${tid('node-row')}[data-name="${otherNode}"]`);
    await page.waitForSelector(`${tid('live-status')}[data-state="live"]`, { timeout: 10000 });
    expect(await page.locator(tid('node-cordon')).count() > 0, 'no Cordon buttons for an admin');
    const reason = `console test ${Date.now()}`;
    const started = Date.now();
    mcli('cordon', otherNode, '--reason', reason);
    await page.waitForFunction(
      ([row, ev, r]) => document.querySelector(row) && [...document.querySelectorAll(ev)].some((e) => e.textContent.includes(r)),
      [`${tid('node-row')}[data-name="${otherNode}"][data-admin-state="CORDONED"]`, `${tid('node-event')}[data-type="CORDONED"][data-node="${otherNode}"]`, reason],
      { timeout: 2000, polling: 50 },
    );
    const took = Date.now() - started;
    await shot('nodes.png');
    return `${otherNode} cordoned on the page ${took} ms after mcli cordon started`;
  }, { needs: ['resumption-marker-after-fault'] });

  await step('queue-shows-waiting-run', async () => {
    // Both nodes are cordoned now: a new run waits, and the queue says why.
    const waiting = mcli('run', '-f', resolve(here, '../../../deploy/samples/hello.yaml')).split('\n').pop().trim();
    await page.click(tid('nav-queue'));
    await page.waitForSelector(`${tid('queue-row')}[data-name="${waiting}"]`, { timeout: 10000 });
    const reason = await page.textContent(`${tid('queue-row')}[data-name="${waiting}"] ${tid('queue-reason')}`);
    expect(reason && reason !== '—', 'no waiting reason');
    await shot('queue.png');
    mcli('stop', 'run', waiting);
    return `${waiting}: "${reason}"`;
  }, { needs: ['login-with-admin-key'] });

  await step('health-sweep', async () => {
    // The node the cordon step took out (none when that step did not run).
    if (otherNode) mcli('uncordon', otherNode, '--reason', 'console test done');
    await page.click(tid('nav-health'));
    await page.waitForSelector(tid('sweeps-table'));
    await page.click(tid('sweep-now'));
    await page.waitForSelector(tid('sweep-detail'));
    const id = decodeURIComponent(new URL(page.url()).pathname.split('/').pop());
    expect(/^sw-/.test(id), `not on a sweep page: ${page.url()}`);
    await page.waitForSelector(`${tid('sweep-detail')} ${tid('sweep-result')}`, { timeout: 30000 });
    await page.waitForSelector(`${tid('sweep-detail')} ${tid('sweep-state')}:text("finished")`, { timeout: 30000 }).catch(() => {});
    const nodes = await page.locator(tid('sweep-node')).count();
    const figures = await page.locator(tid('sweep-result')).count();
    const state = await page.textContent(`${tid('sweep-detail')} ${tid('sweep-state')}`);
    expect(nodes >= 1, 'no per-node figures');
    await shot('sweep.png');
    await page.click('a[href="/health"]');
    await page.waitForSelector(`${tid('sweep-row')}[data-id="${id}"]`, { timeout: 5000 });
    await shot('health.png');
    return `${id} ${state}: ${figures} results on ${nodes} nodes`;
  }, { needs: ['login-with-admin-key'] });

  await step('stop-run-from-console', async () => {
    await page.goto(`${BASE}/runs/${encodeURIComponent(runName)}`);
    await page.click(tid('run-stop'));
    await page.click(tid('dialog-ok'));
    await page.waitForSelector(`${tid('run-status')}[data-status="STOPPED"]`, { timeout: 30000 });
    expect(await page.isEnabled(tid('run-delete')), 'Delete stays disabled on a stopped run');
    return 'STOPPED';
  }, { needs: ['resumption-marker-after-fault'] });

  await step('other-user-cannot-see-run', async () => {
    const out = mcli('admin', 'create-api-key', '--user', 'console-other', '--role', 'user', '--description', 'console test');
    const secret = (out.match(/Secret:\s*(\S+)/) || [])[1];
    expect(secret, `no secret in: ${out}`);
    const other = await browser.newContext(contextOptions); // its own sessionStorage
    const p = await other.newPage();
    watchPage(p);
    try {
      await p.goto(`${BASE}/login`);
      await p.fill(tid('login-key'), secret);
      await p.click(tid('login-submit'));
      await p.waitForSelector(tid('runs-table'));
      expect((await p.textContent(tid('whoami-user'))) === 'console-other', 'wrong user in the header');
      await p.waitForFunction((sel) => !document.querySelector(sel).textContent.includes('Loading'), tid('runs-summary'));
      expect((await p.locator(`${tid('run-row')}[data-name="${runName}"]`).count()) === 0, 'the admin\'s run is listed');
      await p.goto(`${BASE}/runs/${encodeURIComponent(runName)}`);
      await p.waitForSelector(tid('run-not-found'), { timeout: 10000 });
      const banner = await p.textContent(tid('error-banner'));
      expect(/not found/i.test(banner), `banner says "${banner}"`);
      await p.goto(`${BASE}/nodes`);
      await p.waitForSelector(tid('node-row'));
      expect((await p.locator(tid('node-cordon')).count()) === 0 && (await p.locator(tid('sweep-now')).count()) === 0, 'a user sees operator buttons');
    } finally {
      await other.close();
    }
    return 'not listed; its page says not found';
  }, { needs: ['submitted-run-appears-live'] });

  await step('logout-clears-key', async () => {
    await page.click(tid('logout'));
    await page.waitForSelector(tid('login-form'));
    const left = await page.evaluate(() => sessionStorage.length + localStorage.length);
    expect(left === 0, 'the key is still stored');
    await page.goto(`${BASE}/nodes`);
    await page.waitForSelector(tid('login-form'));
    return 'back on the login page';
  }, { needs: ['login-with-admin-key'] });

  await step('no-script-errors', async () => {
    expect(pageErrors.length === 0, pageErrors.slice(0, 5).join('\n'));
  });
} finally {
  await browser.close();
}

const failed = results.filter((r) => !r.ok);
console.log(`${results.length - failed.length}/${results.length} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS}`);
process.exit(failed.length ? 1 : 0);
