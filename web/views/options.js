// options.js — the "Method" panel: the method chooser, the chosen method's option controls and
// the list of methods in the footer. Owns the method chosen and the option values, and turns
// them into an explain request. The controls are drawn from the option specs (method_text.js,
// to be replaced by the engine's method table); this file names no method and no option.
import { emit, on } from '../events.js';
import { OPTION_SPECS, PREFERRED_METHODS } from './method_text.js';
import { $ } from './util.js';

export function createOptionsView(app) {
  let method = null;
  const values = Object.fromEntries(Object.entries(OPTION_SPECS).map(([key, spec]) => [key, spec.default]));

  on('model-changed', () => build());

  function buildMethods() {
    const sel = $('method');
    sel.replaceChildren();
    const list = $('method-list');
    list.replaceChildren();
    for (const m of app.methods) {
      const o = document.createElement('option');
      o.value = m.name;
      o.textContent = m.longRunning ? `${m.name} (long)` : m.name;
      o.title = `${m.description}. ${m.paper}.`;
      sel.append(o);
      const dt = document.createElement('dt');
      dt.textContent = m.name;
      const dd = document.createElement('dd');
      dd.textContent = `${m.description}. ${m.paper}.${m.classSpecific ? '' : ' Not class-specific.'}`;
      list.append(dt, dd);
    }
    method = PREFERRED_METHODS.find((n) => app.methodInfo(n)) ?? app.methods[0]?.name;
    sel.value = method;
    sel.addEventListener('change', () => choose(sel.value));
  }

  function choose(name) {
    method = name;
    $('method').value = name;
    build();
    emit('method-changed', { name });
  }

  // The explain request's options for method `m`: the class and the values of its options.
  function request(m) {
    const o = { target: app.target };
    for (const key of m.options) {
      const spec = OPTION_SPECS[key];
      if (!spec) continue;
      if (spec.kind !== 'baseline') o[key] = values[key];
      else if (values[key] !== spec.default) o[key] = baselineTensor(spec.fill[values[key]]);
    }
    return o;
  }

  // A constant baseline image as the engine wants it: C×H×W, normalised, from a value `v` in
  // [0, 1] pixel space.
  function baselineTensor(v) {
    const { imageH: h, imageW: w, channels: c, mean, std } = app.info;
    const x = new Float32Array(c * h * w);
    for (let ch = 0; ch < c; ch++) x.fill((v - mean[ch]) / std[ch], ch * h * w, (ch + 1) * h * w);
    return x;
  }

  function changed(key, v) {
    values[key] = v;
    emit('options-changed', { key });
  }

  function build() {
    const m = app.methodInfo(method);
    const box = $('options');
    box.replaceChildren();
    if (!m) return;
    $('method-desc').textContent = `${m.description}. ${m.paper}.` +
      (m.classSpecific ? '' : ' This map does not depend on the class.') +
      (m.conserves ? ' Relevance is conserved layer by layer.' : '');
    const depth = app.info?.depth ?? 1;
    const blocks = [...Array(depth).keys()];
    const add = (label, input, out) => {
      const l = document.createElement('label');
      l.append(label, ' ', input);
      if (out) l.append(' ', out);
      box.append(l);
    };
    const select = (key, choices, labels) => {
      const s = document.createElement('select');
      choices.forEach((v, i) => {
        const o = document.createElement('option');
        o.value = String(v);
        o.textContent = labels ? labels[i] : String(v);
        s.append(o);
      });
      s.value = String(values[key]);
      s.addEventListener('change', () => changed(key, typeof values[key] === 'number' ? Number(s.value) : s.value));
      return s;
    };
    const numberInput = (key, min, max, step) => {
      const i = document.createElement('input');
      Object.assign(i, { type: 'number', min, max, step, value: values[key] });
      i.className = 'num';
      i.addEventListener('change', () => {
        const v = Math.min(max, Math.max(min, Math.round(Number(i.value) || 0)));
        i.value = String(v);
        changed(key, v);
      });
      return i;
    };
    const slider = (key, spec) => {
      const r = document.createElement('input');
      Object.assign(r, { type: 'range', min: spec.min, max: spec.max, step: spec.step, value: values[key] });
      const out = document.createElement('output');
      out.textContent = String(values[key]);
      r.addEventListener('input', () => {
        out.textContent = r.value;
        if (spec.live) changed(key, Number(r.value));
      });
      if (!spec.live) r.addEventListener('change', () => changed(key, Number(r.value)));
      return [r, out];
    };
    for (const key of m.options) {
      const spec = OPTION_SPECS[key];
      if (!spec) continue;
      const label = typeof spec.help === 'function' ? spec.help(m) : spec.help;
      if (spec.kind === 'block') {
        values[key] = Math.min(values[key], depth - 1);
        add(label, select(key, blocks));
      } else if (spec.kind === 'block-or-all') {
        values[key] = Math.min(values[key], depth - 1);
        add(label, select(key, [-1, ...blocks], ['all', ...blocks.map((b) => `only block ${b}`)]));
      } else if (spec.kind === 'choice' || spec.kind === 'baseline') {
        add(label, select(key, spec.choices, spec.labels));
      } else if (spec.kind === 'method') {
        const names = app.methods.filter((x) => x.name !== m.name && spec.choices.includes(x.name)).map((x) => x.name);
        if (!names.includes(values[key])) values[key] = names[0] ?? spec.default;
        add(label, select(key, names.length ? names : [spec.default]));
      } else if (spec.kind === 'int') {
        add(label, numberInput(key, spec.min, spec.max, 1));
      } else if (spec.kind === 'slider') {
        add(label, ...slider(key, spec));
      } else if (spec.kind === 'bool') {
        const cb = document.createElement('input');
        cb.type = 'checkbox';
        cb.checked = values[key];
        cb.addEventListener('change', () => changed(key, cb.checked));
        add(label, cb);
      }
    }
    if (!m.options.some((k) => k in OPTION_SPECS)) {
      const p = document.createElement('p');
      p.className = 'muted';
      p.textContent = 'No options besides the class.';
      box.append(p);
    }
  }

  return {
    buildMethods,
    choose,
    request,
    get method() { return method; },
  };
}
