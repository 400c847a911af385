// options.js — the "Method" panel: the method chooser, the chosen method's option controls and
// the list of methods in the footer. Owns the method chosen and the option values, and turns
// them into an explain request. The controls, ranges and defaults come from the engine's method
// table (methods()[i].optionSpecs); this file names no method and no option.
import { emit, on } from '../events.js';
import { $ } from './util.js';

// The constant images the page offers for an image option, as values in [0, 1] pixel space; the
// engine's default (black) is not sent.
const FILLS = { black: 0, grey: 0.5, white: 1 };

export function createOptionsView(app) {
  let method = null;
  const values = {}; // by jsKey, shared by the methods that read it; filled as the methods are shown

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
    method = app.methods.find((m) => m.featured)?.name ?? app.methods[0]?.name;
    sel.value = method;
    sel.addEventListener('change', () => choose(sel.value));
  }

  function choose(name) {
    method = name;
    $('method').value = name;
    build();
    emit('method-changed', { name });
  }

  // An option's first value: 0 where 0 stands for the method's default (so that one value serves
  // every method that reads the key), the engine's black for an image, else the table's default.
  function initialValue(spec) {
    if (spec.zeroIsDefault) return 0;
    if (spec.kind === 'image') return spec.defaultText;
    return spec.default;
  }

  // The explain request's options for method `m`: the class and the values of its options.
  function request(m) {
    const o = { target: app.target };
    for (const spec of ownSpecs(m)) {
      const v = values[spec.jsKey] ?? initialValue(spec);
      if (spec.kind !== 'image') o[spec.jsKey] = v;
      else if (v !== spec.defaultText) o[spec.jsKey] = baselineTensor(FILLS[v]);
    }
    return o;
  }

  // A constant baseline image as the engine wants it: C×H×W at the input's size, normalised, from
  // a value `v` in [0, 1] pixel space.
  function baselineTensor(v) {
    const { imageH: h, imageW: w, channels: c, mean, std } = app.inputInfo;
    const x = new Float32Array(c * h * w);
    for (let ch = 0; ch < c; ch++) x.fill((v - mean[ch]) / std[ch], ch * h * w, (ch + 1) * h * w);
    return x;
  }

  function changed(key, v) {
    values[key] = v;
    emit('options-changed', { key });
  }

  // The options the page draws controls for: those of method `m` that not every method has (the
  // class is chosen in the Prediction panel, the engine picks its threads).
  function ownSpecs(m) {
    return m.optionSpecs.filter((spec) => !app.methods.every((x) => x.options.includes(spec.jsKey)));
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
    const bound = (v, of) => (of === 'lastBlock' ? depth - 1 : of === 'lastClass' ? (app.info?.classes ?? 1) - 1 : v);
    const add = (spec, input, out) => {
      const l = document.createElement('label');
      l.title = spec.help;
      l.append(spec.key.replaceAll('-', ' ') + (spec.zeroIsDefault ? ` (0 = default${spec.default ? `, ${spec.defaultText}` : ''})` : ''), ' ', input);
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
    const numberInput = (key, min, max, step, round) => {
      const i = document.createElement('input');
      Object.assign(i, { type: 'number', min, max, step, value: values[key] });
      i.className = 'num';
      i.addEventListener('change', () => {
        const x = Number(i.value) || 0;
        const v = Math.min(max, Math.max(min, round ? Math.round(x) : x));
        i.value = String(v);
        changed(key, v);
      });
      return i;
    };
    const slider = (key, min, max) => {
      const r = document.createElement('input');
      Object.assign(r, { type: 'range', min, max, step: (max - min) / 20, value: values[key] });
      const out = document.createElement('output');
      out.textContent = String(values[key]);
      // A long method explains when the slider is let go; the others follow it.
      r.addEventListener('input', () => {
        out.textContent = r.value;
        if (!m.longRunning) changed(key, Number(r.value));
      });
      if (m.longRunning) r.addEventListener('change', () => changed(key, Number(r.value)));
      return [r, out];
    };
    const specs = ownSpecs(m);
    for (const spec of specs) {
      const key = spec.jsKey;
      if (!(key in values)) values[key] = initialValue(spec);
      const min = spec.zeroIsDefault ? 0 : bound(spec.min, spec.minOf);
      const max = bound(spec.max, spec.maxOf);
      if (spec.kind === 'integer' && spec.maxOf) {
        // Bounded by the model (a block index): one choice per value, the minimum named if it means something else.
        values[key] = Math.min(values[key], max);
        const choices = [...Array(max - min + 1).keys()].map((k) => min + k);
        add(spec, select(key, choices, choices.map((v) => (v === min && spec.minMeans ? spec.minMeans : String(v)))));
      } else if (spec.kind === 'integer') {
        add(spec, numberInput(key, min, max, 1, true));
      } else if (spec.kind === 'number' && max - min <= 1) {
        add(spec, ...slider(key, min, max));
      } else if (spec.kind === 'number') {
        add(spec, numberInput(key, min, max, 0.05, false));
      } else if (spec.kind === 'choice' || spec.kind === 'method') {
        if (!spec.choices.includes(values[key])) values[key] = spec.default;
        add(spec, select(key, spec.choices));
      } else if (spec.kind === 'image') {
        add(spec, select(key, Object.keys(FILLS), Object.keys(FILLS).map((k) => `${k} (${FILLS[k]}${k === spec.defaultText ? ', default' : ''})`)));
      } else if (spec.kind === 'flag') {
        const cb = document.createElement('input');
        cb.type = 'checkbox';
        cb.checked = values[key];
        cb.addEventListener('change', () => changed(key, cb.checked));
        add(spec, cb);
      }
    }
    if (!specs.length) {
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
