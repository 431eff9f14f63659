#!/usr/bin/env node
// Serves the console the way tessera-gateway does, for working on it without rebuilding the
// gateway: every file of src/ at /assets/<name>, uPlot's two files from node_modules at
// /assets/ too, index.html for every other GET outside /api/, and /api/ proxied to a gateway
// (responses streamed through, so Server-Sent Events flow as they come). No dependencies.
//
//   node dev/serve.mjs https://localhost:8080 --ca .state/tls/ca.pem [--port 8090] [--host 127.0.0.1]
//   node dev/serve.mjs http://127.0.0.1:8080 --port 0      # port 0: any free port (printed)
//
// Prints "console: http://HOST:PORT/" once it listens.
import { createServer, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const consoleDir = resolve(here, '..');
const srcDir = join(consoleDir, 'src');
const uplotDir = join(consoleDir, 'node_modules', 'uplot', 'dist');

// The gateway's policy, so that what works here works there.
const CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; " +
  "connect-src 'self'; frame-ancestors 'none'";

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
};

function usage(message) {
  if (message) console.error(`serve.mjs: ${message}`);
  console.error(
    'usage: node dev/serve.mjs GATEWAY_URL [--ca CA.pem] [--port PORT] [--host HOST]\n' +
      '  GATEWAY_URL: https://localhost:8080 (with --ca) or http://127.0.0.1:8080');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { port: 8090, host: '127.0.0.1', ca: null, upstream: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--ca') opts.ca = next();
    else if (a === '--port') opts.port = Number(next());
    else if (a === '--host') opts.host = next();
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('-')) usage(`unknown option ${a}`);
    else if (!opts.upstream) opts.upstream = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!opts.upstream) usage('the gateway URL is missing');
  let url;
  try {
    url = new URL(opts.upstream);
  } catch {
    usage(`not a URL: ${opts.upstream}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') usage('the gateway URL is http: or https:');
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage('bad --port');
  opts.upstream = url;
  return opts;
}

// The files the gateway serves at /assets/: src/ (flat) and uPlot's two.
function assetPath(name) {
  if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.')) return null;
  if (name === 'uPlot.esm.js' || name === 'uPlot.min.css') return join(uplotDir, name);
  const p = join(srcDir, name);
  try {
    return statSync(p).isFile() ? p : null;
  } catch {
    return null;
  }
}

function sendFile(res, path, method) {
  let body;
  try {
    body = readFileSync(path); // read on every request: edits show on reload
  } catch (e) {
    sendError(res, 500, `cannot read ${path}: ${e.message}`);
    return;
  }
  res.writeHead(200, {
    'Content-Type': TYPES[extname(path)] || 'application/octet-stream',
    'Content-Length': body.length,
    'Cache-Control': 'no-cache',
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
  });
  res.end(method === 'HEAD' ? undefined : body);
}

function sendError(res, status, message) {
  const body = JSON.stringify({ error: { code: status === 404 ? 'NOT_FOUND' : 'UNAVAILABLE', message } });
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function proxy(req, res, opts, ca) {
  const up = opts.upstream;
  const headers = { ...req.headers, host: up.host };
  delete headers.connection;
  delete headers['accept-encoding']; // keep SSE and errors plain text
  const request = up.protocol === 'https:' ? httpsRequest : httpRequest;
  const upstreamReq = request({
    protocol: up.protocol,
    hostname: up.hostname,
    port: up.port || (up.protocol === 'https:' ? 443 : 80),
    method: req.method,
    path: req.url,
    headers,
    ca: ca || undefined,
    servername: up.protocol === 'https:' ? up.hostname : undefined,
  });
  upstreamReq.on('response', (upRes) => {
    const out = { ...upRes.headers };
    delete out.connection;
    delete out['transfer-encoding'];
    res.writeHead(upRes.statusCode || 502, out);
    if (typeof res.flushHeaders === 'function') res.flushHeaders();
    upRes.on('data', (chunk) => res.write(chunk)); // written at once: events are not held back
    upRes.on('end', () => res.end());
    upRes.on('error', () => res.destroy());
  });
  upstreamReq.on('error', (e) => sendError(res, 502, `gateway ${up.origin}: ${e.message}`));
  // The browser went away (page change, aborted stream): end the upstream call too.
  res.on('close', () => {
    if (!res.writableFinished) upstreamReq.destroy();
  });
  req.pipe(upstreamReq);
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ca = opts.ca ? readFileSync(opts.ca) : null;
  const indexPath = join(srcDir, 'index.html');
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://console.invalid');
    if (url.pathname.startsWith('/api/') || url.pathname === '/healthz') {
      proxy(req, res, opts, ca);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, 405, `${req.method} ${url.pathname}: only GET outside /api/`);
      return;
    }
    if (url.pathname.startsWith('/assets/')) {
      const p = assetPath(url.pathname.slice('/assets/'.length));
      if (!p) {
        sendError(res, 404, `no asset ${url.pathname}`);
        return;
      }
      sendFile(res, p, req.method);
      return;
    }
    sendFile(res, indexPath, req.method);
  });
  server.listen(opts.port, opts.host, () => {
    const { port } = server.address();
    console.log(`console: http://${opts.host}:${port}/  (API: ${opts.upstream.origin})`);
    try {
      readdirSync(uplotDir);
    } catch {
      console.error(`serve.mjs: ${uplotDir} is missing: run npm install in ${consoleDir}`);
    }
  });
  const stop = () => {
    server.close();
    server.closeAllConnections(); // open event streams too
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
