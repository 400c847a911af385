// compare.js — "Compare two methods": two methods' maps of the same image and class side by side
// over the image, their difference, one plot of both maps' perturbation and ROAD curves, and a
// table of every faithfulness figure of both, the better one marked, with its direction.
//
// Where each number comes from (the view draws; it computes no figure):
//   the maps a and b          the worker's `explain` (Input.explain: each method's pixel map at
//                             the input's size), for the explained class
//   every curve and figure    the worker's `faithfulness` (Input.faithfulness: core's
//                             map_faithfulness, what `vitlens eval` records per sample), for the
//                             explained class, against the scene's object masks where it has some
//   the difference            drawn here: n_a − n_b with n = (m − min)/(max − min) (render.js
//                             normalise; a constant map is all 0), in [−1, 1] on a diverging scale
// The section computes only while open. Another image, class or model drops what it holds; a newer
// request cancels the ones in flight and the answers of an older run are dropped. ROAD (a sparse
// solve per step) runs by itself for inputs up to ROAD_AUTO_PIXELS pixels, above that behind the
// "Run ROAD" button. Keys on the difference: arrows move the pixel read out (Shift: a patch).
import { on } from '../events.js';
import { drawColorbar, drawOverlay, normalise } from '../render.js';
import { chartLegend, ORDER_NAMES, perturbationChart } from '../teach.js';
import { $, cancelFlag, fitCanvas, stopLong } from './util.js';

// ROAD by itself up to 128 × 128 pixels (the shipped model's 64 × 64: well under a second for
// both maps); a 224 × 224 input takes seconds per map (README, "The page").
const ROAD_AUTO_PIXELS = 128 * 128;
const COLOURS = { a: { black: '#cf222e', road: '#f08a93' }, b: { black: '#1f6feb', road: '#79a9f2' } };
const FILL_NAMES = { black: 'black fill', road: 'ROAD' };
const SIDES = ['a', 'b'];

// The rows of the table: the figure, which way is better, where it is in Input.faithfulness's
// answer (undefined: not computed), how many decimals to show, and what it needs.
const FIGURES = [
  { key: 'black-positive', label: 'perturbation AUC, most relevant first', better: 'lower', digits: 2, get: (f) => f.black?.positive.aucProb },
  { key: 'black-negative', label: 'perturbation AUC, least relevant first', better: 'higher', digits: 2, get: (f) => f.black?.negative.aucProb },
  { key: 'srg-black', label: 'SRG, black fill', better: 'higher', digits: 2, get: (f) => f.black?.srg },
  { key: 'road-positive', label: 'ROAD AUC, most relevant first (MoRF)', better: 'lower', digits: 2, get: (f) => f.road?.positive.aucProb, needs: 'road' },
  { key: 'road-negative', label: 'ROAD AUC, least relevant first (LeRF)', better: 'higher', digits: 2, get: (f) => f.road?.negative.aucProb, needs: 'road' },
  { key: 'srg-road', label: 'SRG, ROAD', better: 'higher', digits: 2, get: (f) => f.road?.srg, needs: 'road' },
  { key: 'mass', label: 'relevance mass accuracy', better: 'higher', digits: 3, get: (f) => f.mask?.massAccuracy, needs: 'mask' },
  { key: 'rank', label: 'relevance rank accuracy', better: 'higher', digits: 3, get: (f) => f.mask?.rankAccuracy, needs: 'mask' },
  { key: 'pointing', label: 'pointing game', better: 'higher', digits: 3, get: (f) => f.mask?.pointing, needs: 'mask' },
  { key: 'pixel-accuracy', label: 'segmentation: pixel accuracy', better: 'higher', digits: 3, get: (f) => f.mask?.pixelAccuracy, needs: 'mask' },
  { key: 'miou', label: 'segmentation: mIoU', better: 'higher', digits: 3, get: (f) => f.mask?.miou, needs: 'mask' },
  { key: 'ap', label: 'segmentation: AP', better: 'higher', digits: 3, get: (f) => f.mask?.ap, needs: 'mask' },
  { key: 'share', label: 'class share against the other object', better: 'higher', digits: 3, get: (f) => f.mask?.share ?? undefined, needs: 'share' },
];

export function createCompareView(app) {
  const chosen = { a: null, b: null }; // the methods picked (null: follow the main view)
  let imageKey = ''; // `${image}:${class}:${h}×${w}`: what `cache` belongs to
  let cache = new Map(); // spec → { ex, faith } for imageKey
  const roadAsked = new Set(); // imageKeys whose ROAD was asked for with the button
  let run = 0; // counts runs; an older run's answers are dropped
  let inFlight = ''; // what the run in flight computes (image, class, specs, ROAD), '' when none
  let pending = []; // [{ id, flag }] the requests of this view in flight
  let current = null; // the request whose progress is shown: { id, flag }
  let halted = false; // Cancel was pressed: nothing is computed until the user asks again
  let shown = null; // what is drawn (see draw)
  let cursor = { x: 0, y: 0 }; // the pixel read out, in input pixels

  const open = () => $('cmp-open').open;

  on('model-changed', ({ reloaded }) => {
    if (!reloaded) reset();
  });
  on('explained', () => refresh());
  on('explains-cancelled', () => cancelRun());
  on('method-changed', () => syncPickers());
  $('cmp-open').addEventListener('toggle', () => {
    halted = false;
    refresh();
  });
  for (const side of SIDES) {
    $(`cmp-${side}`).addEventListener('change', () => {
      chosen[side] = $(`cmp-${side}`).value;
      ask();
    });
    $(`cmp-${side}-options`).addEventListener('change', () => ask());
  }
  $('cmp-swap').addEventListener('click', () => {
    const [a, b] = [methodOf('a'), methodOf('b')];
    [chosen.a, chosen.b] = [b, a];
    const [oa, ob] = [$('cmp-a-options').value, $('cmp-b-options').value];
    $('cmp-a-options').value = ob;
    $('cmp-b-options').value = oa;
    ask();
  });
  $('cmp-road').addEventListener('click', () => {
    roadAsked.add(imageKey);
    ask();
  });
  $('cmp-cancel').addEventListener('click', async () => {
    const req = current;
    halted = true;
    $('cmp-cancel').disabled = true;
    setNote('Cancelled: choose a method, or press Run ROAD, to compute again.');
    cancelRun();
    if (req) await stopLong(app, req.id, req.flag);
  });
  $('cmp-download').addEventListener('click', download);
  for (const id of ['opacity', 'threshold', 'cmap']) $(id).addEventListener(id === 'cmap' ? 'change' : 'input', () => {
    if (shown) drawMaps();
  });

  // ---- the two methods -------------------------------------------------------------------
  function buildPickers() {
    for (const side of SIDES) {
      $(`cmp-${side}`).replaceChildren(...app.methods.map((m) => new Option(m.longRunning ? `${m.name} (long)` : m.name, m.name)));
    }
  }

  // The method of map a or b: the one picked, else the main view's for a and the next one in the
  // method table for b.
  function methodOf(side) {
    if (chosen[side]) return chosen[side];
    const names = app.methods.map((m) => m.name);
    const main = app.views.options.method ?? names[0];
    if (side === 'a') return main;
    const a = methodOf('a');
    return names[(names.indexOf(a) + 1) % names.length];
  }

  // The spec sent to the engine: the name, then the options written beside it ("name:key=value…").
  function specOf(side) {
    const options = $(`cmp-${side}-options`).value.trim().replace(/^:+/, '');
    return options ? `${methodOf(side)}:${options}` : methodOf(side);
  }

  function syncPickers() {
    if (!app.methods.length) return;
    if (!$('cmp-a').options.length) buildPickers();
    for (const side of SIDES) $(`cmp-${side}`).value = methodOf(side);
  }

  // A control was used: compute again even after a Cancel.
  function ask() {
    halted = false;
    refresh();
  }

  // ---- computing -------------------------------------------------------------------------
  function reset() {
    cancelRun();
    imageKey = '';
    cache = new Map();
    shown = null;
    for (const id of ['cmp-map-a', 'cmp-map-b', 'cmp-diff']) $(id).getContext('2d').clearRect(0, 0, $(id).width, $(id).height);
    $('cmp-plot').replaceChildren();
    $('cmp-legend').replaceChildren();
    $('cmp-table').replaceChildren();
    $('cmp-readout').textContent = '';
    $('cmp-mask-note').textContent = '';
    $('cmp-download').disabled = true;
    setNote('');
    delete $('cmp-open').dataset.ready;
  }

  // Cancels this view's requests in flight; their answers, if any come, are dropped.
  function cancelRun() {
    run++;
    inFlight = '';
    for (const p of pending) app.client?.cancel(p.id); // their flags raised too
    pending = [];
    endProgress();
  }

  // The object masks of the current image for class `target`: { own, other } (sources for the
  // worker) or { why } when there is none.
  function masksFor(target) {
    const items = app.image?.items;
    if (!items?.length) return { why: 'this image has no ground-truth mask (the gallery’s scenes have them)' };
    if (app.editor?.edited) return { why: 'the scene was edited: its masks no longer describe it' };
    const name = app.className(target);
    const own = items.find((it) => it.name === name && it.mask);
    if (!own) return { why: `the scene has no object of the class “${name}”` };
    const other = items.find((it) => it !== own && it.mask && it.name !== name);
    const url = (u) => ({ url: new URL(u, location.href).href });
    return {
      own: url(own.mask), other: other ? url(other.mask) : undefined,
      text: `against the mask of the scene’s “${name}”` + (other ? ` (the class share against its “${other.name}”)` : ''),
    };
  }

  // One request of this view, with its progress shown and its cancel flag kept.
  async function request(type, input, label, thisRun) {
    const flag = cancelFlag();
    let p = null;
    p = app.call(type, { ...input, cancelFlag: flag }, [], { priority: true, onProgress: (f) => showProgress(p, label, f) });
    pending.push({ id: p.id, flag });
    current = { id: p.id, flag };
    showProgress(p, label, 0);
    try {
      return await p;
    } finally {
      pending = pending.filter((q) => q.id !== p.id);
      if (thisRun === run) endProgress();
    }
  }

  // Makes sure the cache holds `spec`'s map and figures (ROAD too when `road`).
  async function compute(side, spec, { image, target, road, masks, key, thisRun }) {
    const entry = cache.get(spec) ?? {};
    if (key === imageKey) cache.set(spec, entry); // each result is kept as it comes
    if (!entry.ex) {
      const m = app.methodInfo(spec.split(':')[0]);
      const options = m?.options.includes('target') ? { target } : {};
      entry.ex = await request('explain', { image, method: spec, options }, `map ${side}: ${spec}`, thisRun);
    }
    const { imageW: w, imageH: h } = app.inputInfo;
    if (entry.ex.width !== w || entry.ex.height !== h)
      throw Object.assign(new Error(`${spec}'s map is ${entry.ex.width}×${entry.ex.height}, not the input’s ${w}×${h}`), { code: 'bad_shape' });
    const base = { image, map: entry.ex.pixelMap.slice(), target, masks: masks.own ? { own: masks.own, other: masks.other } : null };
    if (!entry.faith) {
      entry.faith = await request('faithfulness', { ...base, road }, `map ${side}: ${road ? 'perturbation test and ROAD' : 'perturbation test'}`, thisRun);
    } else if (road && !entry.faith.road) {
      const more = await request('faithfulness', { ...base, black: false, road: true }, `map ${side}: ROAD`, thisRun);
      entry.faith = { ...entry.faith, road: more.road, ms: entry.faith.ms + more.ms };
      entry.roadMs = more.ms;
    }
    return entry;
  }

  async function refresh() {
    if (!open() || !app.explanation || app.imageId === null || !app.inputInfo || !app.methods.length) return;
    syncPickers();
    const target = app.explanation.target;
    const { imageH: h, imageW: w } = app.inputInfo;
    const key = `${app.imageId}:${target}:${h}×${w}`;
    if (key !== imageKey) {
      cancelRun();
      imageKey = key;
      cache = new Map();
    }
    const specs = { a: specOf('a'), b: specOf('b') };
    const auto = h * w <= ROAD_AUTO_PIXELS;
    const road = auto || roadAsked.has(key);
    const masks = masksFor(target);
    $('cmp-road').hidden = road;
    $('cmp-road').textContent = `Run ROAD (${h}×${w}: slow)`;
    if (halted) return;
    // The same computation already running (another "explained" while it runs): let it finish.
    const what = `${key}|${specs.a}|${specs.b}|${road}`;
    if (what === inFlight) return;
    cancelRun();
    inFlight = what;
    const thisRun = run;
    const ctx = { image: app.imageId, target, road, masks, key, thisRun };
    $('cmp-open').dataset.ready = 'false';
    const t0 = performance.now();
    const entries = {};
    try {
      for (const side of SIDES) {
        entries[side] = await compute(side, specs[side], ctx);
        if (thisRun !== run) return;
      }
    } catch (e) {
      if (thisRun !== run) return;
      inFlight = '';
      if (e.code === 'cancelled') {
        setNote(halted ? 'Cancelled: choose a method, or press Run ROAD, to compute again.' : 'Cancelled by a newer image or class.');
        return;
      }
      setNote(`The comparison failed: ${e.message}`);
      app.showError('Compare two methods', e);
      return;
    }
    inFlight = '';
    draw(specs, entries, { target, masks, road, auto, computeMs: performance.now() - t0 });
  }

  // ---- progress ----------------------------------------------------------------------------
  function showProgress(p, label, fraction) {
    if (!p || current?.id !== p.id) return;
    $('cmp-progress-row').hidden = false;
    $('cmp-cancel').disabled = false;
    $('cmp-progress').value = fraction;
    $('cmp-progress-text').textContent = `${label}${fraction > 0 ? `: ${Math.round(100 * fraction)} %` : '…'}`;
  }

  function endProgress() {
    current = null;
    $('cmp-progress-row').hidden = true;
  }

  function setNote(text) {
    $('cmp-note').textContent = text;
  }

  // ---- drawing -----------------------------------------------------------------------------
  // shown: { specs, a, b (cache entries), target, w, h, na, nb, diff, masks, road, auto, computeMs }
  function draw(specs, entries, { target, masks, road, auto, computeMs }) {
    const t0 = performance.now();
    const { imageW: w, imageH: h } = app.inputInfo;
    const [a, b] = [entries.a, entries.b];
    const na = normalise(a.ex.pixelMap);
    const nb = normalise(b.ex.pixelMap);
    const diff = new Float32Array(w * h); // (H·W) n_a − n_b, for display
    for (let i = 0; i < w * h; i++) diff[i] = na[i] - nb[i];
    shown = { specs, a, b, target, w, h, na, nb, diff, masks, road, auto, computeMs };
    cursor = { x: Math.min(cursor.x, w - 1), y: Math.min(cursor.y, h - 1) };
    drawMaps();
    plot();
    table();
    $('cmp-download').disabled = false;
    const drawMs = performance.now() - t0;
    const engineMs = SIDES.map((s) => `${s}: explain ${shown[s].ex.ms.toFixed(0)} ms, figures ${shown[s].faith.ms.toFixed(0)} ms`).join('; ');
    setNote(`Shown ${computeMs.toFixed(0)} ms after the request (in the engine, ${engineMs}; the rest is waiting for the worker; cached results are reused), drawn in ${drawMs.toFixed(1)} ms. ` +
      `${w}×${h} input; ROAD ${road ? (auto ? 'runs by itself at this size' : 'as asked') : 'not run (the button above runs it)'}; ` +
      'ROAD’s noise seed 0, σ 0.01.');
    // The engine's own times (the worker's, around each call), apart from the time spent queued.
    const engine = Object.fromEntries(SIDES.map((s) => [s, { explain: shown[s].ex.ms, figures: shown[s].faith.ms, road: shown[s].roadMs ?? null }]));
    Object.assign($('cmp-open').dataset, {
      ready: 'true', a: specs.a, b: specs.b, target: String(target), drawMs: drawMs.toFixed(2), computeMs: computeMs.toFixed(1),
      engine: JSON.stringify(engine),
      road: String(Boolean(a.faith.road && b.faith.road)), masked: String(Boolean(a.faith.mask)),
    });
    $('cmp-title').textContent = `“${app.className(target)}”: ${specs.a} vs ${specs.b}`;
  }

  // The three images (a, b, the difference) at the same size as each other, and the cursor.
  function drawMaps() {
    const { a, b, diff, w, h } = shown;
    const img = app.views.editor.imageSource();
    const display = app.views.explanation.display;
    const box = Math.min(200, Math.max(96, Math.floor(($('cmp-open').clientWidth - 24) / 2)));
    const layers = [
      ['cmp-map-a', a.ex.pixelMap, display],
      ['cmp-map-b', b.ex.pixelMap, display],
      ['cmp-diff', diff, { signed: true, cmap: 'diverging', limit: 1, opacity: 0.85 }], // mostly opaque: white is 0, the image shows faintly
    ];
    shown.bases = {};
    for (const [id, map, opts] of layers) {
      const c = $(id);
      fitCanvas(c, img?.width ?? w, img?.height ?? h, box);
      c.closest('figure').style.width = c.style.width; // captions wrap under their image
      drawOverlay(c, img, map, w, h, opts);
      const base = document.createElement('canvas');
      base.width = c.width;
      base.height = c.height;
      base.getContext('2d').drawImage(c, 0, 0);
      shown.bases[id] = base;
    }
    const bar = $('cmp-diff-bar');
    fitCanvas(bar, 200, 26, Math.min(200, box));
    drawColorbar(bar, 'diverging', -1, 1);
    for (const side of SIDES) {
      const { ex, faith } = shown[side];
      $(`cmp-cap-${side}`).textContent = `${side}: ${shown.specs[side]}${faith.nonfinite ? ' (non-finite values set to 0)' : ''} · ${ex.ms.toFixed(0)} ms`;
    }
    drawCursor();
  }

  function drawCursor() {
    if (!shown?.bases) return;
    const { w, h } = shown;
    for (const [id, base] of Object.entries(shown.bases)) {
      const c = $(id);
      const ctx = c.getContext('2d');
      ctx.drawImage(base, 0, 0);
      const sx = c.width / w;
      const sy = c.height / h;
      const r = Math.max(3, 2 * sx);
      const [cx, cy] = [(cursor.x + 0.5) * sx, (cursor.y + 0.5) * sy];
      ctx.lineWidth = Math.max(1.5, window.devicePixelRatio || 1);
      ctx.strokeStyle = '#000';
      ctx.strokeRect(cx - r - 1, cy - r - 1, 2 * r + 2, 2 * r + 2);
      ctx.strokeStyle = '#fff';
      ctx.strokeRect(cx - r, cy - r, 2 * r, 2 * r);
    }
    readout();
  }

  // The values at the cursor: each raw map, its normalised value and their difference.
  function readout() {
    const { a, b, na, nb, diff, w } = shown;
    const i = cursor.y * w + cursor.x;
    const box = $('cmp-readout');
    const f = (v) => (Math.abs(v) < 1e-3 && v !== 0 ? v.toExponential(3) : v.toFixed(4));
    box.textContent = `pixel (x ${cursor.x}, y ${cursor.y}): a = ${f(a.ex.pixelMap[i])} (normalised ${f(na[i])}), ` +
      `b = ${f(b.ex.pixelMap[i])} (normalised ${f(nb[i])}); a − b = ${f(na[i])} − ${f(nb[i])} = ${f(diff[i])}`;
    Object.assign(box.dataset, {
      x: String(cursor.x), y: String(cursor.y), a: String(a.ex.pixelMap[i]), b: String(b.ex.pixelMap[i]),
      na: String(na[i]), nb: String(nb[i]), diff: String(diff[i]),
    });
  }

  function setCursor(x, y) {
    if (!shown) return;
    cursor = { x: Math.min(shown.w - 1, Math.max(0, x)), y: Math.min(shown.h - 1, Math.max(0, y)) };
    drawCursor();
  }

  $('cmp-diff').addEventListener('keydown', (e) => {
    if (!shown) return;
    const step = e.shiftKey ? (app.inputInfo?.patch ?? 8) : 1;
    const move = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] }[e.key];
    if (move) setCursor(cursor.x + move[0], cursor.y + move[1]);
    else if (e.key === 'Home') setCursor(0, 0);
    else if (e.key === 'End') setCursor(shown.w - 1, shown.h - 1);
    else return;
    e.preventDefault();
  });
  const pointAt = (e) => {
    const r = e.currentTarget.getBoundingClientRect();
    setCursor(Math.floor(((e.clientX - r.left) / r.width) * shown.w), Math.floor(((e.clientY - r.top) / r.height) * shown.h));
  };
  for (const id of ['cmp-map-a', 'cmp-map-b', 'cmp-diff']) {
    $(id).addEventListener('pointermove', (e) => {
      if (shown && e.pointerType !== 'touch') pointAt(e);
    });
    $(id).addEventListener('pointerup', (e) => {
      if (shown) pointAt(e);
    });
  }

  // Both maps' curves in one chart: colour = map, light = ROAD, dashed = least relevant first.
  function plot() {
    const { specs, target } = shown;
    const series = [];
    for (const side of SIDES) {
      for (const fill of ['black', 'road']) {
        const orders = shown[side].faith[fill];
        if (!orders) continue;
        for (const order of ['positive', 'negative']) {
          const c = orders[order];
          series.push({
            name: `${side}-${fill}-${order}`, x: c.fraction, y: c.prob, colour: COLOURS[side][fill],
            dash: order === 'negative' ? '6 3' : '', stroke: fill === 'road' ? 1.5 : 2.5,
            text: `${side} (${specs[side]}), ${FILL_NAMES[fill]}, ${ORDER_NAMES[order]}: AUC ${c.aucProb.toFixed(2)}`,
          });
        }
      }
    }
    perturbationChart($('cmp-plot'), series, app.className(target), { legend: false, width: 460, height: 270 });
    chartLegend($('cmp-legend'), series);
  }

  // Every figure of both maps; the better value of each row marked (ties unmarked).
  function table() {
    const { specs, a, b, masks, road } = shown;
    const t = $('cmp-table');
    t.replaceChildren();
    const head = t.createTHead().insertRow();
    for (const text of ['figure', 'better', `a: ${specs.a}`, `b: ${specs.b}`]) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = text;
      head.append(th);
    }
    const body = t.createTBody();
    for (const fig of FIGURES) {
      const row = body.insertRow();
      row.dataset.figure = fig.key;
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = fig.label;
      row.append(th);
      row.insertCell().textContent = fig.better === 'lower' ? '↓ lower' : '↑ higher';
      const values = [fig.get(a.faith), fig.get(b.faith)];
      const ok = values.every((v) => typeof v === 'number');
      const best = !ok || values[0] === values[1] ? -1 : (fig.better === 'lower') === (values[0] < values[1]) ? 0 : 1;
      values.forEach((v, k) => {
        const cell = row.insertCell();
        if (typeof v === 'number') {
          cell.dataset.value = String(v);
          cell.textContent = v.toFixed(fig.digits) + (k === best ? ' ✓' : '');
          if (k === best) cell.className = 'better';
        } else {
          cell.textContent = fig.needs === 'road' && !road ? 'not run' : '–';
        }
      });
      if (ok) row.dataset.better = best < 0 ? 'tie' : SIDES[best];
    }
    $('cmp-mask-note').textContent = a.faith.mask
      ? `✓ marks the better map of each row. Mask figures ${masks.text}, as fractions of 1. AUCs and SRG are × 100, of the class’s probability.`
      : `✓ marks the better map of each row. No mask figures: ${masks.why}. AUCs and SRG are × 100, of the class’s probability.`;
  }

  // Both maps, their difference and every figure, as drawn, in one JSON file.
  function download() {
    if (!shown) return;
    const { specs, a, b, target, w, h, diff } = shown;
    const side = (s, e) => ({ spec: s, method: e.ex.method, target: e.ex.target, pixelMap: Array.from(e.ex.pixelMap), faithfulness: e.faith });
    const out = {
      image: app.image?.name ?? null, target, className: app.className(target), height: h, width: w,
      a: side(specs.a, a), b: side(specs.b, b),
      difference: { of: 'min-max normalised maps, a − b', values: Array.from(diff) },
    };
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([JSON.stringify(out)], { type: 'application/json' }));
    const stem = (app.image?.name ?? 'image').replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_');
    link.download = `${stem}-compare-${specs.a}-${specs.b}.json`.replace(/[^\w.-]+/g, '_');
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  return { refresh };
}
