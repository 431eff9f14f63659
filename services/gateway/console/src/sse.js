// Server-Sent Events over fetch(): EventSource cannot send the Authorization header.
// Parses event:, data:, id: and retry: lines; after a drop it reconnects with backoff, sending
// Last-Event-ID when the server gave ids; stops for good when its signal aborts.

import { authHeaders, errorFromResponse, isAbort, notifyUnauthorized } from './api.js';

// A parser fed text chunks; calls dispatch({event, data, id}) for each complete event.
export class SseParser {
  constructor(dispatch, onId, onRetry) {
    this.dispatch = dispatch;
    this.onId = onId || (() => {});
    this.onRetry = onRetry || (() => {});
    this.buffer = '';
    this.reset();
  }

  reset() {
    this.eventType = '';
    this.data = [];
    this.hasData = false;
    this.id = null;
  }

  feed(text) {
    this.buffer += text;
    // A lone \r at the end may be the first half of \r\n: keep it for the next chunk.
    let start = 0;
    for (;;) {
      let i = start;
      let end = -1;
      let next = -1;
      for (; i < this.buffer.length; i++) {
        const c = this.buffer.charCodeAt(i);
        if (c === 10) {
          end = i;
          next = i + 1;
          break;
        }
        if (c === 13) {
          if (i + 1 >= this.buffer.length) break; // wait: \r\n may be split
          end = i;
          next = this.buffer.charCodeAt(i + 1) === 10 ? i + 2 : i + 1;
          break;
        }
      }
      if (end < 0) break;
      this.line(this.buffer.slice(start, end));
      start = next;
    }
    this.buffer = this.buffer.slice(start);
  }

  line(line) {
    if (line === '') {
      if (this.hasData) {
        this.dispatch({ event: this.eventType || 'message', data: this.data.join('\n'), id: this.id });
      }
      this.eventType = '';
      this.data = [];
      this.hasData = false;
      return;
    }
    if (line.startsWith(':')) return; // a comment: keepalive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        this.data.push(value);
        this.hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.id = value;
          this.onId(value);
        }
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.onRetry(Number(value));
        break;
      default:
        break; // unknown fields are ignored, as EventSource does
    }
  }
}

// Opens a stream. Options:
//   url: a string, or a function of the last event id (null when none) giving the URL for each
//     (re)connection
//   signal: an AbortSignal that ends it for good (page change)
//   onEvent({event, data, id}): each event
//   onOpen(): each time a connection is answered 200
//   onEnd(): the server ended the stream; return false not to reconnect
//   onError(err): a failed connection or read; return false not to reconnect. 4xx answers other
//     than 408/429 are not retried; a 401 also goes to the app's login handler.
//   onStatus(state): 'connecting' | 'open' | 'retrying' | 'closed'
//   lastEventId: to resume after
// Returns {close(), lastEventId(), forgetLastEventId()} (the next connection starts afresh).
//
// onEvent: jsonEvents('log', (line) => ...) takes the events of one name and hands on their
// data as parsed JSON (an event whose data does not parse is skipped).
export function jsonEvents(name, handle) {
  return (ev) => {
    if (ev.event !== name) return;
    let data;
    try {
      data = JSON.parse(ev.data);
    } catch {
      return;
    }
    handle(data);
  };
}

export function openEventStream(opts) {
  const controller = new AbortController();
  const outer = opts.signal;
  if (outer) {
    if (outer.aborted) controller.abort();
    else outer.addEventListener('abort', () => controller.abort(), { once: true });
  }
  let lastId = opts.lastEventId || null;
  let retryMs = null;
  let backoff = 500;
  const status = (s) => opts.onStatus && opts.onStatus(s);

  const sleep = (ms) =>
    new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      controller.signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    });

  async function connectOnce() {
    const url = typeof opts.url === 'function' ? opts.url(lastId) : opts.url;
    const headers = { Accept: 'text/event-stream', ...authHeaders() };
    if (lastId !== null && lastId !== '') headers['Last-Event-ID'] = lastId;
    status('connecting');
    const res = await fetch(url, { headers, signal: controller.signal, cache: 'no-store' });
    if (!res.ok) {
      const err = await errorFromResponse(res, url);
      if (res.status === 401) notifyUnauthorized(err);
      err.permanent = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
      throw err;
    }
    status('open');
    if (opts.onOpen) opts.onOpen();
    let gotEvent = false;
    const parser = new SseParser(
      (ev) => {
        gotEvent = true;
        if (opts.onEvent) opts.onEvent(ev);
      },
      (id) => {
        lastId = id;
      },
      (ms) => {
        retryMs = ms;
      },
    );
    const reader = res.body.getReader();
    const decoder = new TextDecoder('utf-8');
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      if (gotEvent) backoff = 500; // a working stream: the next drop retries quickly
    }
    parser.feed(decoder.decode());
  }

  (async () => {
    while (!controller.signal.aborted) {
      let again = true;
      try {
        await connectOnce();
        if (controller.signal.aborted) break;
        again = opts.onEnd ? opts.onEnd() !== false : true;
      } catch (e) {
        if (controller.signal.aborted || isAbort(e)) break;
        const keepGoing = opts.onError ? opts.onError(e) !== false : true;
        again = keepGoing && !e.permanent;
      }
      if (!again || controller.signal.aborted) break;
      status('retrying');
      const delay = retryMs !== null ? retryMs : backoff;
      backoff = Math.min(backoff * 2, 15000);
      await sleep(delay * (0.8 + Math.random() * 0.4));
    }
    status('closed');
  })();

  return {
    close: () => controller.abort(),
    lastEventId: () => lastId,
    forgetLastEventId: () => {
      lastId = null;
    },
  };
}
