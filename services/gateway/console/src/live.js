// A small "live" marker beside a page's title: whether its event stream is connected.
import { h } from './dom.js';

const LABELS = {
  live: 'Live',
  connecting: 'Connecting…',
  polling: 'Polling',
  off: 'Not live',
};

export function liveIndicator(initial = 'connecting') {
  const text = h('span', null);
  const el = h('span', { class: 'live', testid: 'live-status' }, h('span', { class: 'live-dot' }), text);
  const set = (state) => {
    el.dataset.state = state;
    text.textContent = LABELS[state] || state;
  };
  set(initial);
  return { el, set };
}
