// The console's first load with many runs, in headless Chromium: from navigating to /runs (the
// key already in the tab's session) until the runs table shows every run's count and its first
// page of rows. Also the console's login page from the same gateway (its files and a render, no
// API data), the bound of what the console costs by itself. Run by console_load.sh, which sets CONSOLE_URL,
// TESSERA_ADMIN_KEY and RUNS (how many runs the cluster holds).
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(resolve(here, '../../services/gateway/console'), 'package.json'));
const { chromium } = require('playwright-core');

const BASE = process.env.CONSOLE_URL.replace(/\/$/, '');
const KEY = process.env.TESSERA_ADMIN_KEY;
const RUNS = Number(process.env.RUNS);
const TIMES = Number(process.env.TIMES || 5);

const args = typeof process.getuid === 'function' && process.getuid() === 0 ? ['--no-sandbox'] : [];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });

// One cold load (a new browser context: nothing cached) of `path`, until `done` holds.
async function load(path, done, withKey = true) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, ignoreHTTPSErrors: true });
  if (withKey) await context.addInitScript((key) => sessionStorage.setItem('tessera.apiKey', key), KEY);
  const page = await context.newPage();
  const start = Date.now();
  await page.goto(`${BASE}${path}`);
  await page.waitForFunction(done, RUNS, { timeout: 30000, polling: 'raf' });
  const ms = Date.now() - start;
  const rows = await page.locator('[data-testid="run-row"]').count();
  await context.close();
  return { ms, rows };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const runsShown = (n) => {
  const s = document.querySelector('[data-testid="runs-summary"]');
  return s && new RegExp(`(^| )${n} runs`).test(s.textContent) && document.querySelectorAll('[data-testid="run-row"]').length > 0;
};
// The bound: the same console's own files and first render, with no API data (no key: the login
// page).
const loginShown = () => document.querySelector('[data-testid="login-form"]') !== null;

const full = [];
const bare = [];
let rows = 0;
for (let i = 0; i < TIMES; i++) {
  const r = await load('/runs', runsShown);
  full.push(r.ms);
  rows = r.rows;
  bare.push((await load('/runs', loginShown, false)).ms);
}
await browser.close();
const m = median(full);
console.log(`console first load, ${RUNS} runs: median ${m} ms over ${TIMES} cold loads (${full.join(', ')} ms), ${rows} rows on the first page`);
console.log(`  target 1,000 ms: ${(m / 1000).toFixed(2)} of the bound`);
console.log(`  the console alone (its files and the login page, no API data): median ${median(bare)} ms; the runs page ${(m / median(bare)).toFixed(1)}x that`);
