// A run spec (the API's JSON) as YAML, the way a run file writes it: empty and default fields
// left out, multi-line strings as literal blocks.

export function pruneEmpty(value) {
  if (Array.isArray(value)) {
    const out = value.map(pruneEmpty).filter((v) => v !== undefined);
    return out.length ? out : undefined;
  }
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      const p = pruneEmpty(v);
      if (p !== undefined) out[k] = p;
    }
    return Object.keys(out).length ? out : undefined;
  }
  if (value === '' || value === 0 || value === false || value === null || value === '0') return undefined;
  if (value === 'PRIORITY_UNSPECIFIED') return undefined;
  return value;
}

const PLAIN = /^[A-Za-z_./$][A-Za-z0-9_ ./:${}@+-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|-?\d[\d_.e+-]*)$/i;

function scalar(v) {
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v === null || v === undefined) return 'null';
  const s = String(v);
  if (s !== '' && PLAIN.test(s) && !RESERVED.test(s) && !s.endsWith(' ') && !s.includes(': ') && !s.includes(' #')) return s;
  return JSON.stringify(s);
}

function key(k) {
  return /^[A-Za-z_][A-Za-z0-9_.-]*$/.test(k) ? k : JSON.stringify(k);
}

function lines(value, indent) {
  const pad = ' '.repeat(indent);
  const out = [];
  if (Array.isArray(value)) {
    if (value.length === 0) return [`${pad}[]`];
    for (const item of value) {
      if (item && typeof item === 'object' && Object.keys(item).length) {
        const sub = lines(item, indent + 2);
        out.push(`${pad}- ${sub[0].trimStart()}`, ...sub.slice(1));
      } else {
        out.push(`${pad}- ${inline(item)}`);
      }
    }
    return out;
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0) return [`${pad}{}`];
    for (const [k, v] of entries) {
      if (typeof v === 'string' && v.includes('\n')) {
        out.push(`${pad}${key(k)}: |${v.endsWith('\n') ? '' : '-'}`);
        const body = v.endsWith('\n') ? v.slice(0, -1) : v;
        for (const l of body.split('\n')) out.push(l ? `${pad}  ${l}` : '');
      } else if (v && typeof v === 'object' && (Array.isArray(v) ? v.length : Object.keys(v).length)) {
        if (Array.isArray(v) && v.every((x) => x === null || typeof x !== 'object') && v.length <= 8) {
          out.push(`${pad}${key(k)}: [${v.map(inline).join(', ')}]`);
        } else {
          out.push(`${pad}${key(k)}:`, ...lines(v, indent + 2));
        }
      } else {
        out.push(`${pad}${key(k)}: ${inline(v)}`);
      }
    }
    return out;
  }
  return [`${pad}${inline(value)}`];
}

function inline(v) {
  if (Array.isArray(v)) return v.length ? `[${v.map(inline).join(', ')}]` : '[]';
  if (v && typeof v === 'object') return Object.keys(v).length ? JSON.stringify(v) : '{}';
  return scalar(v);
}

export function toYaml(value) {
  return `${lines(value, 0).join('\n')}\n`;
}
