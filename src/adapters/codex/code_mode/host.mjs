// pvisor's host of Codex code-mode cells (Codex CLI 0.149.0 `exec` / `wait`).
//
// One Node process per replay; one worker thread (a V8 isolate of its own, like Codex's
// code-mode host) per cell, so a busy cell never blocks the protocol and can be terminated.
// A cell runs as the ES module `exec_main.mjs` in a bare vm context holding only Codex's
// globals. No host object ever enters that realm: the globals are defined by a script run
// inside it and talk to this file through one callback that takes and returns primitives.
//
// Protocol (JSON lines). pvisor -> host:
//   {"op":"exec","cell":"1","source":"...","yield_ms":30000,"tools":[{"name","kind"}]}
//   {"op":"wait","cell":"1","yield_ms":10000,"terminate":false}
//   {"op":"tool_result","cell":"1","id":3,"ok":true,"value":"<JSON text>"|"<rejection text>"}
// host -> pvisor:
//   {"op":"tool","cell":"1","id":3,"tool":"exec_command","kind":"function","input":"{...}"}
//   {"op":"status","cell":"1","status":"completed|failed|yielded|terminated|missing","items":[...],"error":"..."}
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { createInterface } from 'node:readline';
import vm from 'node:vm';

const EXIT = '__codex_code_mode_exit__';
const GLOBALS_FILE = 'pvisor:codex-globals';

if (isMainThread) {
  main();
} else {
  cell();
}

function main() {
  // Lone surrogates become U+FFFD, as Codex's `to_rust_string_lossy` makes them.
  const wellFormed = (k, v) => (typeof v === 'string' ? v.toWellFormed() : v);
  const send = (m) => process.stdout.write(JSON.stringify(m, wellFormed) + '\n');
  const store = Object.create(null);
  const cells = new Map();

  function report(c, status) {
    if (c.observer && c.observer.timer) clearTimeout(c.observer.timer);
    c.observer = null;
    const m = { op: 'status', cell: c.id, status, items: c.items };
    c.items = [];
    if (status === 'failed') m.error = c.error;
    send(m);
    if (status !== 'yielded') cells.delete(c.id);
  }
  function observe(c, ms) {
    c.observer = { timer: setTimeout(() => report(c, 'yielded'), ms) };
  }
  function finish(c, status, error) {
    if (c.done) return;
    c.done = status;
    c.error = error;
    c.worker.terminate();
    if (c.observer) report(c, status);
  }
  function exec(m) {
    const c = { id: m.cell, items: [], done: null, error: null, observer: null };
    cells.set(c.id, c);
    c.worker = new Worker(new URL(import.meta.url), {
      workerData: { source: m.source, tools: m.tools, store: { ...store } },
      stdout: true,
      stderr: false,
    });
    observe(c, m.yield_ms);
    c.worker.on('message', (w) => {
      if (c.done) return;
      switch (w.op) {
        case 'item': c.items.push(w.item); break;
        case 'tool': send({ op: 'tool', cell: c.id, id: w.id, tool: w.tool, kind: w.kind, input: w.input }); break;
        case 'store': store[w.key] = w.value; break;
        case 'yield': if (c.observer) report(c, 'yielded'); break;
        case 'done': finish(c, w.status, w.error); break;
      }
    });
    c.worker.on('error', (e) => finish(c, 'failed', String((e && e.stack) || e)));
    c.worker.on('exit', () => finish(c, 'failed', 'the code mode cell ended unexpectedly'));
  }
  function wait(m) {
    const c = cells.get(m.cell);
    if (!c) return send({ op: 'status', cell: m.cell, status: 'missing', items: [] });
    if (m.terminate) {
      c.done = c.done || 'terminated';
      c.worker.terminate();
      c.observer = c.observer || {};
      return report(c, 'terminated');
    }
    if (c.observer) return; // already observed (Codex: the cell already has an active observer)
    if (c.done) {
      c.observer = {};
      return report(c, c.done);
    }
    observe(c, m.yield_ms);
  }
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    let m;
    try { m = JSON.parse(line); } catch { return; }
    if (m.op === 'exec') exec(m);
    else if (m.op === 'wait') wait(m);
    else if (m.op === 'tool_result') {
      const c = cells.get(m.cell);
      if (c && !c.done) c.worker.postMessage(m);
    }
  });
  rl.on('close', () => process.exit(0));
}

// ------------------------------------------------------------------ one cell (worker)

function errorText(e) {
  let s;
  try {
    s = e !== null && (typeof e === 'object' || typeof e === 'function') && typeof e.stack === 'string'
      ? e.stack
      : String(e);
  } catch {
    s = 'uncaught exception';
  }
  // Frames of pvisor's globals are native functions in Codex: they never show.
  const lines = s.split('\n');
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    if (/^\s+at /.test(l)) {
      if (l.includes(GLOBALS_FILE) || l.includes('node:') || l.includes('file://')) continue;
      if (/^\s+at (JSON\.)?stringify \(<anonymous>\)$/.test(l) && i + 1 < lines.length && lines[i + 1].includes(GLOBALS_FILE)) continue;
    }
    out.push(l);
  }
  return out.join('\n');
}

function globalsSource() {
  // Runs inside the cell's realm; `h` is the only way out and carries primitives only
  // (strings, numbers, and this realm's own functions as callbacks).
  return `(function (h, toolsJson, storeJson) {
  'use strict';
  const g = globalThis;
  const stringify = JSON.stringify, parse = JSON.parse, S = String, P = Promise;
  const isArray = Array.isArray;
  for (const k of ['Atomics', 'SharedArrayBuffer', 'WebAssembly', 'console']) delete g[k];
  function ser(v) {
    const t = typeof v;
    if (v === undefined || v === null || t === 'boolean' || t === 'number' || t === 'bigint' || t === 'string') return S(v);
    const s = stringify(v);
    return s === undefined ? 'undefined' : s;
  }
  const def = (name, f) => Object.defineProperty(g, name, { value: f, writable: true, configurable: true, enumerable: false });
  def('text', function text(v) { h('item', stringify({ type: 'input_text', text: ser(v) })); });
  def('image', function image(v, detail) {
    let url, d = detail;
    if (typeof v === 'string') url = v;
    else if (v !== null && typeof v === 'object') {
      if (typeof v.image_url === 'string') { url = v.image_url; if (d === undefined) d = v.detail; }
      else if (v.type === 'image' && typeof v.data === 'string') url = 'data:' + (v.mimeType || 'image/png') + ';base64,' + v.data;
    }
    if (url === undefined) throw new TypeError('image expects an image URL string, {image_url, detail}, or an image content block');
    h('item', stringify({ type: 'input_image', image_url: url, detail: d === undefined || d === null ? 'high' : S(d) }));
  });
  const store = parse(storeJson);
  const own = Object.prototype.hasOwnProperty;
  def('store', function store_(k, v) {
    const s = stringify(v);
    store[S(k)] = s;
    h('store', S(k), s === undefined ? 'null' : s);
  });
  def('load', function load(k) {
    const key = S(k);
    return own.call(store, key) && store[key] !== undefined ? parse(store[key]) : undefined;
  });
  def('setTimeout', function setTimeout(fn, ms, ...args) {
    if (typeof fn !== 'function') throw new TypeError('setTimeout expects a function');
    return h('timer', Number(ms) || 0, function () { try { fn(...args); } catch (e) { h('uncaught', e); } });
  });
  def('clearTimeout', function clearTimeout(id) { h('clear', Number(id)); });
  def('yield_control', function yield_control() { h('yield'); });
  def('exit', function exit() { throw '${EXIT}'; });
  for (const name of ['notify', 'audio', 'generatedImage']) {
    def(name, function () { throw name + ' is not replayed by pvisor'; });
  }
  const tools = {};
  const all = [];
  for (const t of parse(toolsJson)) {
    const name = t.name, kind = t.kind;
    all.push({ name: name, description: t.description || '' });
    tools[name.replace(/[^A-Za-z0-9_$]/g, '_')] = function (args) {
      let input;
      if (kind === 'freeform') {
        if (typeof args !== 'string') return P.reject('tool \`' + name + '\` expects a string input');
        input = args;
      } else if (args === undefined) {
        input = '{}';
      } else if (args !== null && typeof args === 'object' && !isArray(args)) {
        input = stringify(args);
      } else {
        return P.reject('tool \`' + name + '\` expects a JSON object for arguments');
      }
      return new P(function (resolve, reject) {
        h('tool', name, kind, input, function (v) { resolve(parse(v)); }, function (e) { reject(e); });
      });
    };
  }
  def('tools', tools);
  def('ALL_TOOLS', all);
})`;
}

async function cell() {
  const { source, tools, store } = workerData;
  let done = false;
  const finish = (status, error) => {
    if (done) return;
    done = true;
    parentPort.postMessage({ op: 'done', status, error });
  };
  process.on('unhandledRejection', () => {});
  process.on('uncaughtException', (e) => finish('failed', errorText(e)));
  const pending = new Map();
  const timers = new Map();
  let nextTool = 1, nextTimer = 1;
  parentPort.on('message', (m) => {
    if (m.op !== 'tool_result') return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    try { (m.ok ? p.resolve : p.reject)(m.value); } catch { /* the cell's callbacks never throw */ }
  });
  const h = (op, a, b, c, d, e) => {
    try {
      switch (op) {
        case 'item': parentPort.postMessage({ op: 'item', item: JSON.parse(a) }); return undefined;
        case 'store': parentPort.postMessage({ op: 'store', key: a, value: b }); return undefined;
        case 'yield': parentPort.postMessage({ op: 'yield' }); return undefined;
        case 'tool': {
          const id = nextTool++;
          pending.set(id, { resolve: d, reject: e });
          parentPort.postMessage({ op: 'tool', id, tool: a, kind: b, input: c });
          return undefined;
        }
        case 'timer': {
          const id = nextTimer++;
          timers.set(id, setTimeout(() => { timers.delete(id); b(); }, a));
          return id;
        }
        case 'clear': { clearTimeout(timers.get(a)); timers.delete(a); return undefined; }
        case 'uncaught': finish('failed', errorText(a)); return undefined;
      }
    } catch {
      return undefined;
    }
    return undefined;
  };
  const context = vm.createContext({}, { name: 'exec' });
  const install = vm.runInContext(globalsSource(), context, { filename: GLOBALS_FILE });
  install(h, JSON.stringify(tools), JSON.stringify(store));
  let module;
  try {
    module = new vm.SourceTextModule(source, {
      identifier: 'exec_main.mjs',
      context,
      importModuleDynamically: (spec) => { throw 'Unsupported import in exec: ' + spec; },
    });
  } catch (e) {
    return finish('failed', e && e.name ? `${e.name}: ${e.message}` : String(e));
  }
  try {
    await module.link((spec) => { throw { unsupported: spec }; });
  } catch (e) {
    return finish('failed', e && e.unsupported !== undefined ? `Unsupported import in exec: ${e.unsupported}` : errorText(e));
  }
  try {
    await module.evaluate();
    finish('completed');
  } catch (e) {
    if (e === EXIT) finish('completed');
    else finish('failed', errorText(e));
  }
}
