// A sortable table shown 100 rows a page. The page owning it filters; the table sorts and pages.
import { h, replaceChildren } from './dom.js';

// columns: [{key, label, sort?: row => value (sortable when present), render: row => Node|string,
//            class?, title?}]
// opts: testid, rowKey(row), rowAttrs(row) (attributes of the <tr>), pageSize (100),
//       sort {key, dir: 1|-1}, onState({sort, page}) when the person sorts or pages, empty (text)
export function createTable(columns, opts = {}) {
  const pageSize = opts.pageSize || 100;
  const state = { sort: opts.sort || null, page: opts.page || 0 };
  let rows = [];

  const thead = h('thead');
  const tbody = h('tbody');
  const table = h('table', { class: 'grid', testid: opts.testid }, thead, tbody);
  const info = h('span', { class: 'pager-info', testid: `${opts.testid}-pager-info` });
  const prev = h('button', { class: 'small', type: 'button', testid: `${opts.testid}-prev`, onclick: () => go(-1) }, '‹ Prev');
  const next = h('button', { class: 'small', type: 'button', testid: `${opts.testid}-next`, onclick: () => go(1) }, 'Next ›');
  const pager = h('div', { class: 'pager' }, prev, info, next);
  const el = h('div', { class: 'table-wrap' }, h('div', { class: 'table-scroll' }, table), pager);

  function go(delta) {
    const pages = Math.max(1, Math.ceil(rows.length / pageSize));
    state.page = Math.min(pages - 1, Math.max(0, state.page + delta));
    render();
    if (opts.onState) opts.onState({ ...state });
  }

  function setSort(key) {
    if (state.sort && state.sort.key === key) state.sort = { key, dir: -state.sort.dir };
    else state.sort = { key, dir: 1 };
    state.page = 0;
    render();
    if (opts.onState) opts.onState({ ...state });
  }

  function renderHead() {
    const tr = h('tr');
    for (const c of columns) {
      const sorted = state.sort && state.sort.key === c.key ? state.sort.dir : 0;
      const arrow = sorted === 1 ? ' ▲' : sorted === -1 ? ' ▼' : '';
      const th = h('th', {
        class: [c.class, c.sort ? 'sortable' : ''].filter(Boolean).join(' '),
        title: c.title,
        'aria-sort': sorted === 1 ? 'ascending' : sorted === -1 ? 'descending' : c.sort ? 'none' : null,
        testid: `${opts.testid}-col-${c.key}`,
      });
      if (c.sort) {
        th.appendChild(h('button', { type: 'button', class: 'th-button', onclick: () => setSort(c.key) }, c.label + arrow));
      } else {
        th.textContent = c.label;
      }
      tr.appendChild(th);
    }
    replaceChildren(thead, tr);
  }

  function sorted() {
    if (!state.sort) return rows;
    const col = columns.find((c) => c.key === state.sort.key);
    if (!col || !col.sort) return rows;
    const dir = state.sort.dir;
    const keyed = rows.map((r, i) => ({ r, i, v: col.sort(r) }));
    const empty = (v) => v === undefined || v === null || v === '';
    keyed.sort((a, b) => {
      if (empty(a.v) !== empty(b.v)) return empty(a.v) ? 1 : -1; // empty last either way
      const c = compare(a.v, b.v);
      return c !== 0 ? c * dir : a.i - b.i;
    });
    return keyed.map((k) => k.r);
  }

  function render() {
    renderHead();
    const all = sorted();
    const pages = Math.max(1, Math.ceil(all.length / pageSize));
    if (state.page >= pages) state.page = pages - 1;
    const start = state.page * pageSize;
    const slice = all.slice(start, start + pageSize);
    const trs = slice.map((row) => {
      const tr = h('tr', opts.rowAttrs ? opts.rowAttrs(row) : null);
      for (const c of columns) {
        const content = c.render(row);
        tr.appendChild(h('td', { class: c.class }, content));
      }
      return tr;
    });
    if (trs.length === 0) {
      trs.push(h('tr', { class: 'empty' }, h('td', { colspan: columns.length, testid: `${opts.testid}-empty` }, opts.empty || 'Nothing to show.')));
    }
    replaceChildren(tbody, trs);
    info.textContent = all.length === 0 ? '0 rows' : `${start + 1}–${start + slice.length} of ${all.length}`;
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    pager.hidden = all.length <= pageSize;
  }

  return {
    el,
    setRows(newRows) {
      rows = newRows;
      render();
    },
    setState(s) {
      if (s.sort !== undefined) state.sort = s.sort;
      if (s.page !== undefined) state.page = s.page;
      render();
    },
    state: () => ({ ...state }),
    rowCount: () => rows.length,
  };
}

// Orders numbers numerically, strings naturally; empty values last.
export function compare(a, b) {
  const ea = a === undefined || a === null || a === '';
  const eb = b === undefined || b === null || b === '';
  if (ea || eb) return ea && eb ? 0 : ea ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: 'base' });
}
