// app.js — the page's main thread: user interface and drawing only. Every engine call goes to
// the worker (worker.js through client.js); images are decoded off the main thread
// (createImageBitmap), and the worker receives the file itself, not its pixels.
import { VitlensError, WorkerClient } from './client.js';
import { encodeNpy, saveBlob } from './files.js';
import { SceneEditor } from './editor.js';
import { drawColorbar, drawGrid, drawOverlay, formatNumber, minMax } from './render.js';
import { attributionTree, drawTree, headImportance, lineChart, perturbationAuc } from './teach.js';

const SHIPPED_MODEL = './models/vitlens-scenes.vitl';
const GALLERY = './models/gallery/';
const WASM_URL = new URL('./wasm/vitlens.js', location.href).href;
// The pthreads build, used by the worker when the page is cross-origin isolated (COOP/COEP).
const WASM_MT_URL = new URL('./wasm/vitlens-mt.js', location.href).href;
const OPTION_KEYS = ['startLayer', 'headFusion', 'discardRatio', 'block', 'useGrad', 'steps', 'quadrature', 'baseline',
  'stage', 'inner', 'samples', 'noise', 'seed'];
// In-engine cancellation needs a SharedArrayBuffer, which only a cross-origin isolated page has.
const CAN_SHARE = self.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
const NORM_STAGES = ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer'];

const $ = (id) => document.getElementById(id);

const state = {
  client: null,
  methods: [],
  info: null,
  modelSpec: null, // how the current model was loaded, to load it again after a worker restart
  image: null, // { blob, bitmap, name, labels }
  predictions: [],
  predictMs: 0,
  target: -1,
  method: null,
  options: {
    startLayer: 0, headFusion: 'mean', discardRatio: 0, block: -1, useGrad: true,
    steps: 0, quadrature: 'gauss-legendre', baseline: 'black', stage: 'layer', inner: 'saliency', samples: 0, noise: 0.15, seed: 0,
  },
  display: { cmap: 'jet', opacity: 0.55, threshold: 0 },
  explanation: null,
  query: 0,
  main: null, // the pending main explain request
  gridRun: 0,
  gridPending: [], // the grid's explain requests in flight
  firstShown: false,
  editor: null, // the scene editor (editor.js): the image as edited, drawn everywhere instead of the original
  live: { running: false, dirty: false, final: false }, // the live update after edits: one request at a time
  imageVersion: 0, // counts predictions, so that the per-head views know when to ask again
  progress: null, // the long main explain running: { id, name, flag }
  gridFlag: null, // the grid run's shared cancel flag (cross-origin isolated pages only)
  teachData: null, // { key, attn, grads }: per block, per head A and ∂y_t/∂A of the current image
  teachP: null,
  teachBlock: 0,
  perturbP: null,
  perturbation: null,
  timeline: {}, // start-up stages, ms since navigation (reported with the first explanation)
};

function mark(stage) {
  state.timeline[stage] ??= Math.round(performance.now());
}

// ---- status and errors ------------------------------------------------------------------

function setStatus(text) {
  $('status').textContent = text;
}

function showError(what, e) {
  if (e instanceof VitlensError && e.code === 'cancelled') return;
  const code = e?.code ? ` [${e.code}]` : '';
  $('error-text').textContent = `${what}: ${e?.message ?? e}${code}`;
  $('error').hidden = false;
  setStatus('Ready (see the error above)');
}

function clearError() {
  $('error').hidden = true;
}

function updateBusy() {
  const busy = state.client?.busy ?? false;
  $('busy').hidden = !busy;
  $('stop').disabled = !busy;
}

// A call to the worker that keeps the busy indicator right.
function call(type, input, transfer, hooks) {
  const p = state.client.call(type, input, transfer, hooks);
  updateBusy();
  const done = () => setTimeout(updateBusy, 0);
  p.then(done, done);
  return p;
}

// ---- model ------------------------------------------------------------------------------

function describeModel(info) {
  const kind = info.multiLabel ? 'multi-label (sigmoid)' : 'softmax';
  return `${info.imageH}×${info.imageW}×${info.channels} input, patch ${info.patch} (${info.imageH / info.patch}×${info.imageW / info.patch} patches), ` +
    `width ${info.dim}, ${info.depth} blocks × ${info.heads} heads, ${info.classes} classes, ${kind}, ` +
    `${(info.params / 1e3).toFixed(1)}k parameters${info.storedInt8 ? ', int8' : ''}.`;
}

async function loadModel(spec) {
  setStatus(`Loading ${spec.label}…`);
  const out = spec.kind === 'vitl'
    ? await call('loadModel', { source: spec.source })
    : await call('importModel', { checkpoint: spec.checkpoint, config: spec.config });
  state.info = out.info;
  state.modelSpec = spec;
  $('model-info').textContent = `${spec.label}: ${describeModel(out.info)}`;
  $('model-info').title = out.info.provenance || '';
  $('model-reset').hidden = spec.shipped === true;
  buildOptions();
  setTeachBlock(state.teachBlock);
  return out.info;
}

async function changeModel(spec) {
  clearError();
  cancelExplains();
  try {
    await loadModel(spec);
  } catch (e) {
    showError(`Could not load ${spec.label}`, e);
    return;
  }
  if (state.image) await predict();
  else setStatus('Ready');
}

function onModelFiles(files) {
  const list = [...files];
  if (!list.length) return;
  const byExt = (ext) => list.find((f) => f.name.toLowerCase().endsWith(ext));
  const vitl = byExt('.vitl');
  const ckpt = byExt('.safetensors');
  const config = byExt('.json');
  if (vitl) changeModel({ kind: 'vitl', source: { blob: vitl }, label: vitl.name });
  else if (ckpt && config) changeModel({ kind: 'safetensors', checkpoint: { blob: ckpt }, config: { blob: config }, label: ckpt.name });
  else if (ckpt) showError('Could not load the model', new VitlensError('bad_argument', 'choose the .safetensors checkpoint and its config.json together'));
  else changeModel({ kind: 'vitl', source: { blob: list[0] }, label: list[0].name });
}

// ---- image and prediction ----------------------------------------------------------------

async function setImage(blob, name, labels = null) {
  clearError();
  let bitmap;
  try {
    bitmap = await createImageBitmap(blob, { colorSpaceConversion: 'none' }); // the pixels the worker sees
  } catch {
    showError(`Could not open ${name}`, new VitlensError('bad_image', 'this file is not an image the browser can decode (PNG, JPEG, GIF, WebP, BMP…)'));
    return;
  }
  state.image?.bitmap.close();
  state.image = { blob, bitmap, name, labels };
  state.targetChosen = false;
  state.editor.load(bitmap, bitmap.width / (state.info?.imageW ?? bitmap.width));
  updateEditButtons();
  markGallery(name);
  await predict();
}

// What is drawn as the image: the editor's copy (the original until it is edited).
function imageSource() {
  return state.image ? state.editor.canvas : null;
}

// Classifies the current image (state.image.blob), then explains it; resolves once the main
// explanation is drawn. `grid: false` skips the all-methods grid (live updates while editing).
async function predict({ grid = true } = {}) {
  if (!state.info) {
    drawMain();
    setStatus('No model is loaded: load one under “Model”.');
    return;
  }
  cancelExplains();
  setStatus(`Classifying ${state.image.name}…`);
  let out;
  try {
    out = await call('setImage', { source: { blob: state.image.blob } });
  } catch (e) {
    showError(`Could not classify ${state.image.name}`, e);
    return;
  }
  mark('predicted');
  state.imageVersion++;
  state.predictions = out.predictions;
  state.predictMs = out.ms;
  if (!(state.editor.edited && state.targetChosen && state.target < out.predictions.length)) state.target = argmax(out.predictions);
  if (!state.editor.edited) state.explanation = null;
  drawModelInput(out.view);
  renderScores();
  drawMain();
  const main = explainMain();
  // The grid (long methods included) queues behind the main view's explanation, per-head views and
  // perturbation curve, which are requested as soon as the explanation arrives.
  if (grid) main.then(() => runGrid());
  return main;
}

function argmax(preds) {
  let best = preds[0];
  for (const p of preds) if (p.logit > best.logit) best = p;
  return best.class;
}

function drawModelInput(view) {
  const { imageW: w, imageH: h } = state.info;
  const small = document.createElement('canvas');
  small.width = w;
  small.height = h;
  small.getContext('2d').putImageData(new ImageData(view, w, h), 0, 0);
  const c = $('model-input');
  fitCanvas(c, w, h, 128);
  const ctx = c.getContext('2d');
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, 0, 0, c.width, c.height);
  $('model-size').textContent = `(${w}×${h})`;
}

function renderScores() {
  const box = $('scores');
  box.replaceChildren();
  const multi = state.info.multiLabel;
  $('scores-note').textContent = `${multi ? 'Sigmoid per class (multi-label)' : 'Softmax'} probability; click a class to explain it.`;
  for (const p of state.predictions) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'score';
    b.dataset.class = p.class;
    b.dataset.prob = String(p.prob);
    b.setAttribute('aria-pressed', String(p.class === state.target));
    b.title = `logit ${p.logit.toFixed(3)}`;
    const name = document.createElement('span');
    name.className = 'score-name';
    name.textContent = p.name;
    const bar = document.createElement('span');
    bar.className = 'score-bar';
    const fill = document.createElement('span');
    fill.style.width = `${(100 * p.prob).toFixed(1)}%`;
    if (multi ? p.prob >= 0.5 : p.class === argmax(state.predictions)) fill.className = 'present';
    bar.append(fill);
    const value = document.createElement('span');
    value.className = 'score-value';
    value.textContent = (100 * p.prob).toFixed(1) + '%';
    b.append(name, bar, value);
    b.addEventListener('click', () => chooseClass(p.class));
    box.append(b);
  }
}

function chooseClass(cls) {
  if (cls === state.target) return;
  state.target = cls;
  state.targetChosen = true;
  for (const b of $('scores').children) b.setAttribute('aria-pressed', String(Number(b.dataset.class) === cls));
  cancelExplains();
  explainMain().then(() => runGrid());
}

// ---- explanations ------------------------------------------------------------------------

function methodInfo(name = state.method) {
  return state.methods.find((m) => m.name === name);
}

function methodOptions(m) {
  const o = { target: state.target };
  for (const k of m.options) if (k in state.options && k !== 'baseline') o[k] = state.options[k];
  if (m.options.includes('baseline') && state.options.baseline !== 'black') o.baseline = baselineTensor(state.options.baseline);
  return o;
}

// An integrated-gradients baseline as the engine wants it: C×H×W, normalised. 'white' is 1 and
// 'grey' 0.5 in [0, 1] pixel space; 'black' (0) is the engine's default and is not sent.
function baselineTensor(kind) {
  const { imageH: h, imageW: w, channels: c, mean, std } = state.info;
  const v = kind === 'white' ? 1 : 0.5;
  const x = new Float32Array(c * h * w);
  for (let ch = 0; ch < c; ch++) x.fill((v - mean[ch]) / std[ch], ch * h * w, (ch + 1) * h * w);
  return x;
}

// A shared one-Int32 cancel flag for a long explain (null when the page is not isolated).
function cancelFlag() {
  return CAN_SHARE ? new SharedArrayBuffer(4) : null;
}

function cancelExplains() {
  state.client?.cancelAll('explain');
  state.client?.cancelAll('perturb');
  if (state.gridFlag) Atomics.store(new Int32Array(state.gridFlag), 0, 1);
  state.gridFlag = null;
  state.gridRun++;
}

async function explainMain() {
  const m = methodInfo();
  if (!m || !state.predictions.length) return;
  if (state.main) {
    state.client.cancel(state.main.id);
    if (state.progress?.flag) Atomics.store(new Int32Array(state.progress.flag), 0, 1);
  }
  setStatus(`Explaining with ${m.name}…`);
  const flag = m.longRunning ? cancelFlag() : null;
  let p = null;
  const hooks = { priority: true, onProgress: m.longRunning ? (f) => showProgress(p, f) : undefined };
  p = call('explain', { method: m.name, options: { ...methodOptions(m), intermediates: true }, cancelFlag: flag }, [], hooks);
  state.main = p;
  markMainPending();
  if (m.longRunning) startProgress(p, m.name, flag);
  try {
    const ex = await p;
    // A newer request replaced this one while the worker was finishing it: its result is stale
    // (another method, image or class), so it must not be drawn over the newer one.
    if (state.main !== p) return;
    state.explanation = ex;
    drawMain();
    renderTeach();
    fetchTeach(ex);
    runPerturbation(ex);
    const total = ex.ms.toFixed(1);
    $('timing').textContent = `${m.name} for “${className(ex.target)}”: ${total} ms in the worker (the forward pass of this image: ${state.predictMs.toFixed(1)} ms)` +
      (state.firstShown ? '.' : '; the first calls also pay for the browser compiling the engine’s code.');
    $('export-png').disabled = false;
    $('export-npy').disabled = false;
    const root = document.documentElement;
    root.dataset.explanations = String(Number(root.dataset.explanations ?? 0) + 1);
    if (!state.firstShown) {
      state.firstShown = true;
      mark('explained');
      root.dataset.firstExplanationMs = String(state.timeline.explained);
      root.dataset.timeline = JSON.stringify(state.timeline);
    }
    setStatus('Ready');
  } catch (e) {
    showError(`${m.name} failed`, e);
    if (e.code === 'cancelled' && state.main === p) setStatus(`${m.name} was cancelled`);
  } finally {
    if (state.main === p) state.main = null;
    markMainPending();
    endProgress(p);
  }
}

// <html data-main-pending> says whether the main view's explanation is still being computed
// (the browser tests wait on it; a stale result is never drawn).
function markMainPending() {
  document.documentElement.dataset.mainPending = state.main ? 'true' : 'false';
}

// ---- progress and cancel of long methods -------------------------------------------------

function startProgress(p, name, flag) {
  state.progress = { id: p.id, name, flag };
  $('progress-row').hidden = false;
  $('progress').value = 0;
  $('progress-text').textContent = `${name}: starting…`;
  $('cancel').disabled = false;
  document.documentElement.dataset.progress = '0';
}

function showProgress(p, fraction) {
  if (!p || state.progress?.id !== p.id) return;
  $('progress').value = fraction;
  $('progress-text').textContent = `${state.progress.name}: ${Math.round(100 * fraction)} %`;
  document.documentElement.dataset.progress = String(fraction);
}

function endProgress(p) {
  if (state.progress?.id !== p.id) return;
  state.progress = null;
  $('progress-row').hidden = true;
}

// Cancels the long method running in the main view: in the engine through the shared flag when
// the page is cross-origin isolated (the engine stops at its next progress report), otherwise —
// or if the engine does not stop within 3 s — by restarting the worker.
async function cancelLong() {
  const pr = state.progress;
  if (!pr) return;
  $('cancel').disabled = true;
  $('progress-text').textContent = `${pr.name}: cancelling…`;
  if (pr.flag) {
    Atomics.store(new Int32Array(pr.flag), 0, 1);
    const deadline = performance.now() + 3000;
    while (state.client.pending.has(pr.id) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (!state.client.pending.has(pr.id)) return;
  }
  await stop();
}

function className(c) {
  return state.info?.classNames[c] ?? `class ${c}`;
}

function fitCanvas(canvas, w, h, box) {
  const s = box / Math.max(w, h);
  const cssW = Math.max(1, Math.round(w * s));
  const cssH = Math.max(1, Math.round(h * s));
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
}

function drawMain() {
  const c = $('main-canvas');
  const img = imageSource();
  if (!img) return;
  fitCanvas(c, img.width, img.height, 448);
  const ex = state.explanation;
  drawOverlay(c, img, ex?.pixelMap, ex?.width, ex?.height, state.display);
  const m = methodInfo(ex?.method);
  const view = $('main-canvas');
  view.dataset.method = ex ? ex.method : '';
  view.dataset.target = ex ? String(ex.target) : '';
  $('view-title').textContent = ex ? `— ${ex.method}, class “${className(ex.target)}”${m && !m.classSpecific ? ' (does not depend on the class)' : ''}` : '';
  $('labels').textContent = (state.image.labels ? `In this scene: ${state.image.labels.join(', ')}.` : `${state.image.name} (${img.width}×${img.height})`) +
    (state.editor.edited ? ' Edited.' : '');
  outlineSelection(c);
  if (!ex) return;
  if (state.query > 0) outlinePatch(c, ex);
  const { min, max } = minMax(ex.pixelMap);
  drawColorbar($('colorbar'), state.display.cmap, min, max);
  if (max <= min) $('view-title').textContent += ` — the map is constant (${formatNumber(min)}) everywhere`;
  const tm = $('token-map');
  fitCanvas(tm, ex.gridW, ex.gridH, 128);
  drawGrid(tm, ex.tokenMap, ex.gridW, ex.gridH, { cmap: state.display.cmap });
  $('grid-size').textContent = `(${ex.gridH}×${ex.gridW})`;
}

function outlineSelection(canvas) {
  const r = state.editor.selectionRect();
  if (!r) return;
  const sx = canvas.width / state.editor.width;
  const sy = canvas.height / state.editor.height;
  const ctx = canvas.getContext('2d');
  ctx.lineWidth = Math.max(1, window.devicePixelRatio || 1);
  ctx.setLineDash([4, 3]);
  ctx.strokeStyle = '#fff';
  ctx.strokeRect(r.x * sx, r.y * sy, r.w * sx, r.h * sy);
  ctx.lineDashOffset = 3.5;
  ctx.strokeStyle = '#000';
  ctx.strokeRect(r.x * sx, r.y * sy, r.w * sx, r.h * sy);
  ctx.setLineDash([]);
  ctx.lineDashOffset = 0;
}

function outlinePatch(canvas, ex) {
  const q = state.query - 1;
  const cw = canvas.width / ex.gridW;
  const ch = canvas.height / ex.gridH;
  const ctx = canvas.getContext('2d');
  ctx.strokeStyle = '#fff';
  ctx.lineWidth = 2 * (window.devicePixelRatio || 1);
  ctx.strokeRect((q % ex.gridW) * cw, Math.floor(q / ex.gridW) * ch, cw, ch);
}

// ---- the grid of all methods -------------------------------------------------------------

function buildGrid() {
  const grid = $('grid');
  grid.replaceChildren();
  for (const m of state.methods) {
    const cell = document.createElement('button');
    cell.type = 'button';
    cell.className = 'cell';
    cell.dataset.method = m.name;
    cell.title = `${m.description} — ${m.paper}`;
    const c = document.createElement('canvas');
    c.width = 128;
    c.height = 128;
    const name = document.createElement('span');
    name.className = 'cell-name';
    name.textContent = m.name;
    const ms = document.createElement('span');
    ms.className = 'cell-ms muted';
    cell.append(c, name, ms);
    cell.addEventListener('click', () => {
      $('method').value = m.name;
      chooseMethod(m.name);
    });
    grid.append(cell);
  }
}

async function runGrid() {
  const run = ++state.gridRun;
  for (const p of state.gridPending) state.client.cancel(p.id);
  if (state.gridFlag) Atomics.store(new Int32Array(state.gridFlag), 0, 1);
  const flag = cancelFlag();
  state.gridFlag = flag;
  state.gridPending = [];
  const cells = [...$('grid').children];
  for (const cell of cells) {
    cell.dataset.state = 'pending';
    cell.querySelector('.cell-ms').textContent = '…';
  }
  const img = imageSource();
  await Promise.all(state.methods.map(async (m, i) => {
    const cell = cells[i];
    try {
      const hooks = m.longRunning ? {
        onProgress: (f) => {
          if (run === state.gridRun) cell.querySelector('.cell-ms').textContent = `${Math.round(100 * f)} %…`;
        },
      } : undefined;
      const p = call('explain', { method: m.name, options: { target: state.target }, cancelFlag: m.longRunning ? flag : null }, [], hooks);
      state.gridPending.push(p);
      const ex = await p;
      if (run !== state.gridRun) return;
      const c = cell.querySelector('canvas');
      fitCanvas(c, img.width, img.height, 128);
      drawOverlay(c, img, ex.pixelMap, ex.width, ex.height, state.display);
      const { min, max } = minMax(ex.pixelMap);
      cell.querySelector('.cell-ms').textContent = `${ex.ms.toFixed(1)} ms${max > min ? '' : ' · constant map'}`;
      cell.dataset.ms = ex.ms.toFixed(3);
      cell.dataset.state = 'done';
    } catch (e) {
      if (run !== state.gridRun || e.code === 'cancelled') return;
      cell.dataset.state = 'error';
      cell.querySelector('.cell-ms').textContent = `error: ${e.code}`;
      cell.title = e.message;
    }
  }));
}

// ---- method and options ------------------------------------------------------------------

function buildMethods() {
  const sel = $('method');
  sel.replaceChildren();
  const list = $('method-list');
  list.replaceChildren();
  for (const m of state.methods) {
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
  const preferred = ['transformer-attribution', 'rollout'].find((n) => methodInfo(n)) ?? state.methods[0]?.name;
  state.method = preferred;
  sel.value = preferred;
  sel.addEventListener('change', () => chooseMethod(sel.value));
}

function chooseMethod(name) {
  state.method = name;
  buildOptions();
  explainMain();
}

function buildOptions() {
  const m = methodInfo();
  const box = $('options');
  box.replaceChildren();
  if (!m) return;
  $('method-desc').textContent = `${m.description}. ${m.paper}.` +
    (m.classSpecific ? '' : ' This map does not depend on the class.') +
    (m.conserves ? ' Relevance is conserved layer by layer.' : '');
  const depth = state.info?.depth ?? 1;
  const blocks = [...Array(depth).keys()];
  const add = (label, input, out) => {
    const l = document.createElement('label');
    l.append(label, ' ', input);
    if (out) l.append(' ', out);
    box.append(l);
  };
  const numberInput = (key, min, max, step) => {
    const i = document.createElement('input');
    Object.assign(i, { type: 'number', min, max, step, value: state.options[key] });
    i.className = 'num';
    i.addEventListener('change', () => {
      const v = Math.min(max, Math.max(min, Math.round(Number(i.value) || 0)));
      i.value = String(v);
      state.options[key] = v;
      explainMain();
    });
    return i;
  };
  const select = (key, values, labels) => {
    const s = document.createElement('select');
    values.forEach((v, i) => {
      const o = document.createElement('option');
      o.value = String(v);
      o.textContent = labels ? labels[i] : String(v);
      s.append(o);
    });
    s.value = String(state.options[key]);
    s.addEventListener('change', () => {
      state.options[key] = typeof state.options[key] === 'number' ? Number(s.value) : s.value;
      explainMain();
    });
    return s;
  };
  for (const key of m.options) {
    if (key === 'startLayer') {
      state.options.startLayer = Math.min(state.options.startLayer, depth - 1);
      add('start block', select('startLayer', blocks));
    } else if (key === 'headFusion') {
      add('head fusion', select('headFusion', ['mean', 'max', 'min']));
    } else if (key === 'block') {
      state.options.block = Math.min(state.options.block, depth - 1);
      add('blocks', select('block', [-1, ...blocks], ['all', ...blocks.map((b) => `only block ${b}`)]));
    } else if (key === 'discardRatio') {
      const r = document.createElement('input');
      Object.assign(r, { type: 'range', min: 0, max: 0.95, step: 0.05, value: state.options.discardRatio });
      const out = document.createElement('output');
      out.textContent = String(state.options.discardRatio);
      r.addEventListener('input', () => {
        state.options.discardRatio = Number(r.value);
        out.textContent = r.value;
        explainMain();
      });
      add('discard ratio', r, out);
    } else if (key === 'useGrad') {
      const cb = document.createElement('input');
      cb.type = 'checkbox';
      cb.checked = state.options.useGrad;
      cb.addEventListener('change', () => {
        state.options.useGrad = cb.checked;
        explainMain();
      });
      add('weight by gradients (∇A ⊙ R_A)', cb);
    } else if (key === 'steps') {
      const def = m.name === 'attattr' ? 20 : 32;
      add(`steps (0 = default, ${def})`, numberInput('steps', 0, 1024, 1));
    } else if (key === 'quadrature') {
      add('quadrature', select('quadrature', ['gauss-legendre', 'left', 'right', 'middle']));
    } else if (key === 'baseline') {
      add('baseline', select('baseline', ['black', 'grey', 'white'], ['black (0, default)', 'grey (0.5)', 'white (1)']));
    } else if (key === 'stage') {
      add('stage rolled out', select('stage', NORM_STAGES));
    } else if (key === 'inner') {
      const inner = state.methods.filter((x) => x.name !== m.name && ['saliency', 'grad-x-input', 'integrated-gradients'].includes(x.name)).map((x) => x.name);
      if (!inner.includes(state.options.inner)) state.options.inner = inner[0] ?? 'saliency';
      add('inner method', select('inner', inner.length ? inner : ['saliency']));
    } else if (key === 'samples') {
      add('samples (0 = default)', numberInput('samples', 0, 512, 1));
    } else if (key === 'noise') {
      const r = document.createElement('input');
      Object.assign(r, { type: 'range', min: 0, max: 0.5, step: 0.05, value: state.options.noise });
      const out = document.createElement('output');
      out.textContent = String(state.options.noise);
      r.addEventListener('change', () => {
        state.options.noise = Number(r.value);
        out.textContent = r.value;
        explainMain();
      });
      r.addEventListener('input', () => { out.textContent = r.value; });
      add('noise σ (of the input range)', r, out);
    } else if (key === 'seed') {
      add('noise seed', numberInput('seed', 0, 2 ** 31, 1));
    }
  }
  if (!m.options.some((k) => OPTION_KEYS.includes(k))) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = 'No options besides the class.';
    box.append(p);
  }
}

// ---- teaching views ----------------------------------------------------------------------

const STEP_FORMULA = {
  rollout: 'Â_b = rownorm(fuse_h(A_b) + I)',
  'grad-rollout': 'Â_b = I + E_h[(∇A_b ⊙ A_b)⁺]',
  'transformer-attribution': 'Â_b = I + E_h[(∇A_b ⊙ R_A_b)⁺]',
  'norm-based': 'Â_b = rownorm(N_b[stage]): the block’s norm map, row-normalised',
};

// The formula beside each norm-based stage (Kobayashi et al. 2020, 2021, 2024); N[i, j] = ‖z_(i←j)‖₂.
const NORM_FORMULA = {
  atb: 'a_(i←j) = Σ_h A_h,ij · ((LN₁(x_j)·W_V^h + b_V^h)·W_O^h)',
  'atb-res': 'x′_(i←j) = a_(i←j) + δ_ij · x_i',
  'atb-res-ln': 'g_(i←j) = γ₂ ⊙ (x′_(i←j) − mean(x′_(i←j))) / std(x′_i)',
  'atb-res-ln-ff': 'f_(i←j) = (h_(i←j) ⊙ GELU(h_i)/h_i)·W₂,  h_(i←j) = g_(i←j)·W₁',
  layer: 'y_(i←j) = x′_(i←j) + f_(i←j)',
};

// Methods whose maps use ∂y_t/∂A: the per-head gradients are fetched for them.
const USES_GRADS = new Set(['attn-gradcam', 'grad-rollout', 'transformer-attribution']);

function queryRow(mat, n, q) {
  return mat.subarray(q * n + 1, q * n + n);
}

// The rows over all blocks, then the chosen block's per-head views; `extras` also redraws what does
// not depend on the query patch (the conservation chart, AttAttr's importance grid and tree).
function renderTeach({ extras = true } = {}) {
  const ex = state.explanation;
  const box = $('teach');
  box.replaceChildren();
  const blocks = ex?.intermediates?.blocks ?? [];
  const n = ex?.intermediates?.tokens ?? 0;
  $('teach-query').textContent = state.query === 0 ? 'query: the CLS token' :
    `query: patch ${state.query - 1} (row ${Math.floor((state.query - 1) / ex.gridW)}, column ${(state.query - 1) % ex.gridW})`;
  const rows = [
    ['attn', 'A_b', 'attention, softmax(q·kᵀ/√d_h), mean over heads'],
    ['grad', '∇A_b', '∂y_t/∂A_b, gradient of the class logit, mean over heads'],
    ['relevance', 'R_A_b', 'LRP relevance at the attention probabilities, mean over heads'],
    ['step', 'this block’s factor', STEP_FORMULA[ex?.method] ?? 'the factor of the product'],
    ['accumulated', 'accumulated', 'C_b = Â_b · C_(b−1): the product so far (row of the query)'],
  ];
  for (const [key, title, formula] of rows) {
    if (!blocks.length || !blocks.some((b) => b[key])) continue;
    const row = teachRow(key, title, formula);
    blocks.forEach((b, i) => {
      if (!b[key]) return;
      const fig = document.createElement('figure');
      if (i > state.teachBlock) fig.className = 'later';
      if (i === state.teachBlock) fig.classList.add('current');
      const c = document.createElement('canvas');
      fitCanvas(c, ex.gridW, ex.gridH, 72);
      drawGrid(c, queryRow(b[key], n, state.query), ex.gridW, ex.gridH, { cmap: 'viridis', outline: state.query - 1 });
      const cap = document.createElement('figcaption');
      cap.textContent = `block ${i}`;
      fig.append(c, cap);
      row.append(fig);
    });
    box.append(row);
  }
  if (!blocks.length) box.textContent = 'This method reports no per-block intermediates (head means); the per-head views above are the model’s own.';
  renderTeachBlock();
  if (!extras) return;
  renderConservation(ex);
  renderTeachExtra(ex);
}

// A small figure: a query row over the patch grid, a caption, and a data-kind for the tests.
function gridFigure(row, ex, caption, kind) {
  const fig = document.createElement('figure');
  const c = document.createElement('canvas');
  fitCanvas(c, ex.gridW, ex.gridH, 72);
  drawGrid(c, row, ex.gridW, ex.gridH, { cmap: 'viridis', outline: state.query - 1 });
  c.dataset.kind = kind;
  const cap = document.createElement('figcaption');
  cap.textContent = caption;
  fig.append(c, cap);
  return fig;
}

function teachRow(kind, title, formula) {
  const row = document.createElement('div');
  row.className = 'teach-row';
  row.dataset.kind = kind;
  const head = document.createElement('div');
  head.className = 'teach-head';
  head.innerHTML = '<strong></strong><br><span class="formula"></span>';
  head.querySelector('strong').textContent = title;
  head.querySelector('span').textContent = formula;
  row.append(head);
  return row;
}

// The chosen block's per-head views: A (always), ∇A (methods that use it), AttAttr's Attr per
// head and the norm-based stages (when the method is one of those).
function renderTeachBlock() {
  const box = $('teach-block');
  box.replaceChildren();
  const ex = state.explanation;
  const td = state.teachData;
  if (!ex || !state.info) return;
  const b = Math.min(state.teachBlock, state.info.depth - 1);
  const n = 1 + ex.gridW * ex.gridH;
  const q = state.query;
  if (td?.attn?.[b]) {
    const row = teachRow('head-attn', `block ${b}: attention per head`, 'A_b,h = softmax(q_h·k_hᵀ/√d_h); the query’s row, without the CLS key');
    td.attn[b].forEach((a, h) => row.append(gridFigure(queryRow(a, n, q), ex, `head ${h}`, 'head-attn')));
    box.append(row);
  }
  if (td?.grads?.[b]) {
    const row = teachRow('head-grad', `block ${b}: ∇A per head`, `∇A_b,h = ∂y_t/∂A_b,h for “${className(ex.target)}”`);
    td.grads[b].forEach((g, h) => row.append(gridFigure(queryRow(g, n, q), ex, `head ${h}`, 'head-grad')));
    box.append(row);
    if (td.attn?.[b]) {
      const row2 = teachRow('head-gradxa', `block ${b}: (∇A ⊙ A)⁺ per head`, 'what grad-rollout averages over heads: E_h[(∇A_b ⊙ A_b)⁺]');
      td.grads[b].forEach((g, h) => {
        const a = td.attn[b][h];
        const r = queryRow(g, n, q).map((v, j) => Math.max(0, v * a[q * n + 1 + j]));
        row2.append(gridFigure(r, ex, `head ${h}`, 'head-gradxa'));
      });
      box.append(row2);
    }
  }
  const rHeads = ex.intermediates?.blocks?.[b]?.relevanceHeads;
  if (rHeads?.length) {
    const row = teachRow('head-relevance', `block ${b}: R_A per head`, 'R_A_b,h = the LRP relevance reaching head h’s attention (Chefer et al. 2021); the query’s row');
    rHeads.forEach((r, h) => row.append(gridFigure(queryRow(r, n, q), ex, `head ${h}`, 'head-relevance')));
    box.append(row);
    if (td?.grads?.[b] && ex.method === 'transformer-attribution') {
      const row2 = teachRow('head-gradxr', `block ${b}: (∇A ⊙ R_A)⁺ per head`, 'what transformer-attribution averages over heads: Ā_b = E_h[(∇A_b ⊙ R_A_b)⁺]');
      rHeads.forEach((r, h) => {
        const g = td.grads[b][h];
        const v = queryRow(r, n, q).map((x, j) => Math.max(0, x * g[q * n + 1 + j]));
        row2.append(gridFigure(v, ex, `head ${h}`, 'head-gradxr'));
      });
      box.append(row2);
    }
  }
  if (ex.attattr?.[b]) {
    const row = teachRow('head-attattr', `block ${b}: AttAttr per head`, 'Attr_b,h = A_b,h ⊙ (1/m) Σ_k ∂F(α_k·A_b)/∂A_b,h, α_k = k/m');
    ex.attattr[b].forEach((a, h) => row.append(gridFigure(queryRow(a, n, q), ex, `head ${h}`, 'head-attattr')));
    box.append(row);
  }
  if (ex.norm?.[b]) {
    const row = teachRow('norm-stages', `block ${b}: norm-based stages`, 'N[i, j] = ‖z_(i←j)‖₂ at each stage; r = mixing ratio of the query token');
    for (const st of NORM_STAGES) {
      const map = ex.norm[b].maps?.[st];
      if (!map) continue;
      const fig = gridFigure(queryRow(map, n, q), ex, '', 'norm-stage');
      const mix = ex.norm[b].mixing?.[st];
      fig.querySelector('figcaption').innerHTML = '<strong></strong><br><span class="formula"></span>';
      fig.querySelector('strong').textContent = `${st}${mix ? ` (r = ${formatNumber(mix[q])})` : ''}`;
      fig.querySelector('.formula').textContent = NORM_FORMULA[st];
      fig.className = 'norm-fig';
      row.append(fig);
    }
    box.append(row);
  }
  if (!td) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = 'Loading the per-head views…';
    box.append(p);
  }
}

// Asks the worker for each head's A (and ∂y_t/∂A when the method uses it) of the current image.
async function fetchTeach(ex) {
  const grads = USES_GRADS.has(ex.method);
  const key = `${state.imageVersion}:${grads ? ex.target : '-'}`;
  if (state.teachData?.key === key || (state.teachData?.grads && state.teachData.key === `${state.imageVersion}:${ex.target}`)) {
    renderTeachBlock();
    return;
  }
  if (state.teachP) state.client.cancel(state.teachP.id);
  const p = call('teach', { target: ex.target, grads }, [], { priority: true });
  state.teachP = p;
  try {
    const out = await p;
    state.teachData = { key, ...out };
    renderTeachBlock();
    document.documentElement.dataset.teachKey = key;
  } catch (e) {
    if (e.code !== 'cancelled') showError('The per-head views failed', e);
  } finally {
    if (state.teachP === p) state.teachP = null;
  }
}

// AttAttr's head importance (max over i, j per block and head, this image) and the attribution
// tree over the image.
function renderTeachExtra(ex) {
  const box = $('teach-extra');
  box.replaceChildren();
  if (!ex?.attattr?.length) return;
  const imp = headImportance(ex.attattr);
  const fig = document.createElement('figure');
  fig.className = 'importance';
  const table = document.createElement('table');
  table.className = 'importance-grid';
  table.setAttribute('aria-label', 'head importance: max over i, j of Attr per block and head');
  const all = imp.flat();
  const lo = Math.min(...all);
  const hi = Math.max(...all);
  const head = document.createElement('tr');
  head.innerHTML = '<th></th>' + imp[0].map((_, h) => `<th>head ${h}</th>`).join('');
  table.append(head);
  imp.forEach((heads, b) => {
    const tr = document.createElement('tr');
    tr.innerHTML = `<th>block ${b}</th>`;
    for (const v of heads) {
      const td = document.createElement('td');
      const t = hi > lo ? (v - lo) / (hi - lo) : 0;
      td.style.background = `rgba(31, 111, 235, ${(0.1 + 0.9 * t).toFixed(3)})`;
      td.style.color = t > 0.55 ? '#fff' : '';
      td.textContent = formatNumber(v);
      tr.append(td);
    }
    table.append(tr);
  });
  const cap = document.createElement('figcaption');
  cap.textContent = 'Head importance for this image: I_b,h = max_i,j Attr_b,h[i, j] (Hao et al. sum it over a data set).';
  fig.append(table, cap);

  const n = 1 + ex.gridW * ex.gridH;
  const tree = attributionTree(ex.attattr, n, 0.4);
  const tfig = document.createElement('figure');
  tfig.className = 'tree';
  const c = document.createElement('canvas');
  c.id = 'attr-tree';
  c.dataset.edges = String(tree.edges.length);
  c.dataset.root = String(tree.root);
  const img = imageSource();
  fitCanvas(c, img.width, img.height, 256);
  drawTree(c, img, tree, ex.gridW, ex.gridH, ex.attattr.length);
  const tcap = document.createElement('figcaption');
  tcap.innerHTML = '<strong>Attribution tree</strong> (circle = root; arrows point from a patch to the patch it informs, lighter = higher block)<br>' +
    '<span class="formula">M_l = Σ_h Attr_l,h / max over rows i ≥ 1; keep M_l[i, j] &gt; 0.4; root = the patch j with the largest Σ_i Σ_h Attr_L,h[i, j]; ' +
    'from block L−1 down, i → j when i is in the tree and j is not (one parent each)</span>';
  tfig.append(c, tcap);
  box.append(fig, tfig);
}

function renderConservation(ex) {
  const box = $('conservation');
  box.replaceChildren();
  if (!ex || !ex.conservation?.length) return;
  const s = ex.relevanceSums;
  const chartBox = document.createElement('figure');
  chartBox.className = 'cons-chart';
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.id = 'conservation-chart';
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'sum of relevance per layer');
  const layers = ex.conservation.map((l) => l.layer);
  // Only the block boundaries and the ends are named on the axis; every point has its layer as a tooltip.
  const named = layers.map((l) => (/^(head|patch_embed|blocks\.\d+\.add2)$/.test(l) ? l : ''));
  lineChart(svg, [{ name: 'Σ R in', x: layers.map((_, i) => i), y: ex.conservation.map((l) => l.relevanceIn), colour: '#1f6feb' }], {
    width: Math.min(1100, Math.max(440, 8 * layers.length + 80)), height: 230, yLabel: 'Σ relevance (propagation order →)', xLabels: named, refLine: s?.seed,
  });
  svg.querySelectorAll('circle').forEach((c, i) => {
    const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
    title.textContent = `${layers[i]}: Σ R in ${formatNumber(ex.conservation[i].relevanceIn)}, out ${formatNumber(ex.conservation[i].relevanceOut)}`;
    c.append(title);
  });
  const cap = document.createElement('figcaption');
  cap.innerHTML = '<span class="formula">Σ_i R_i^(in) = Σ_j R_j^(out) at every layer (dashed: the seed)</span>';
  chartBox.append(svg, cap);
  box.append(chartBox);
  const details = document.createElement('details');
  const summary = document.createElement('summary');
  summary.textContent = 'Conservation: Σ relevance layer by layer (LRP) — ' +
    (s ? `seed ${formatNumber(s.seed)}, at the tokens E0 ${formatNumber(s.tokens)}, at the image ${formatNumber(s.image)}` : '');
  const table = document.createElement('table');
  table.innerHTML = '<thead><tr><th>layer</th><th>Σ R out</th><th>Σ R in</th><th></th></tr></thead>';
  const body = document.createElement('tbody');
  const scale = Math.max(1e-12, ...ex.conservation.map((l) => Math.abs(l.relevanceIn)));
  for (const l of ex.conservation) {
    const tr = document.createElement('tr');
    const bar = `<span class="cons-bar" style="width:${(100 * Math.abs(l.relevanceIn) / scale).toFixed(1)}%"></span>`;
    tr.innerHTML = `<td></td><td>${formatNumber(l.relevanceOut)}</td><td>${formatNumber(l.relevanceIn)}</td><td class="cons-cell">${bar}</td>`;
    tr.firstChild.textContent = l.layer;
    body.append(tr);
  }
  table.append(body);
  details.append(summary, table);
  box.append(details);
}

function setQuery(q) {
  if (q === state.query) return;
  state.query = q;
  drawMain();
  renderTeach({ extras: false });
}

function setTeachBlock(b) {
  const depth = state.info?.depth ?? 1;
  state.teachBlock = Math.min(depth - 1, Math.max(0, b));
  $('block').max = String(depth - 1);
  $('block').value = String(state.teachBlock);
  $('block-out').textContent = String(state.teachBlock);
  renderTeach();
}

// ---- faithfulness: the perturbation curve ------------------------------------------------

async function runPerturbation(ex) {
  const { imageW: w, imageH: h } = state.info;
  if (ex.width !== w || ex.height !== h) {
    $('faith-note').textContent = `(the map is ${ex.width}×${ex.height}, not the model’s ${w}×${h}: not computed)`;
    return;
  }
  if (state.perturbP) state.client.cancel(state.perturbP.id);
  const p = call('perturb', { map: ex.pixelMap.slice(), target: ex.target }, [], { priority: true });
  state.perturbP = p;
  try {
    const out = await p;
    if (state.explanation !== ex) return;
    state.perturbation = out;
    renderPerturbation(ex, out);
  } catch (e) {
    if (e.code !== 'cancelled') showError('The perturbation test failed', e);
  } finally {
    if (state.perturbP === p) state.perturbP = null;
  }
}

function renderPerturbation(ex, out) {
  const [pos, neg] = out.steps;
  const names = { positive: 'most relevant first', negative: 'least relevant first' };
  lineChart($('faith-plot'), [
    { name: names.positive, x: pos.fraction, y: pos.prob, colour: '#cf222e' },
    { name: names.negative, x: neg.fraction, y: neg.prob, colour: '#1f6feb', dash: '5 3' },
  ], { width: 440, height: 250, xLabel: 'fraction of pixels removed', yLabel: `p(“${className(ex.target)}”)`, yMin: 0, yMax: 1,
    xTicks: [0, 0.2, 0.4, 0.6, 0.8] });
  const aucP = perturbationAuc(pos.fraction, pos.prob);
  const aucN = perturbationAuc(neg.fraction, neg.prob);
  $('faith-note').textContent = `— ${ex.method}, “${className(ex.target)}”: AUC ${aucP.toFixed(1)} most relevant first (lower is better), ` +
    `${aucN.toFixed(1)} least relevant first (higher is better); ${out.ms.toFixed(0)} ms for 20 forward passes`;
  const strips = $('faith-strips');
  strips.replaceChildren();
  const { imageW: w, imageH: h } = state.info;
  for (const curve of out.steps) {
    const row = document.createElement('div');
    row.className = 'faith-strip';
    row.dataset.order = curve.order;
    const label = document.createElement('span');
    label.className = 'muted strip-label';
    label.textContent = names[curve.order];
    row.append(label);
    curve.views.forEach((view, k) => {
      const fig = document.createElement('figure');
      const c = document.createElement('canvas');
      c.width = w;
      c.height = h;
      c.getContext('2d').putImageData(new ImageData(view, w, h), 0, 0);
      const cap = document.createElement('figcaption');
      cap.textContent = `${Math.round(100 * curve.fraction[k])} % · ${(100 * curve.prob[k]).toFixed(0)} %`;
      fig.append(c, cap);
      row.append(fig);
    });
    strips.append(row);
  }
  const root = document.documentElement;
  root.dataset.perturbations = String(Number(root.dataset.perturbations ?? 0) + 1);
}

// ---- the scene editor --------------------------------------------------------------------

const TOOL_HINTS = {
  inspect: 'Inspect: hover a patch (or focus the image and use the arrow keys) to choose the query patch of the views below.',
  brush: 'Brush: paint on the image with the colour and size chosen; the explanation follows as you paint.',
  move: 'Move: drag a rectangle to select pixels, then drag inside it (or use the arrow keys) to move them; the hole takes the colour around it.',
};

function updateEditButtons() {
  $('edit-undo').disabled = !state.editor.undoStack.length;
  $('edit-revert').disabled = !state.editor.edited;
}

// After every edit: the new pixels are drawn at once under the previous map, and the image is
// classified and explained again — one request at a time, the latest edit winning. The grid
// waits for the end of a stroke or a drag.
function onEdit(final) {
  drawMain();
  updateEditButtons();
  state.live.dirty = true;
  if (final) state.live.final = true;
  if (!state.live.running) liveLoop();
}

async function liveLoop() {
  state.live.running = true;
  document.documentElement.dataset.live = '1';
  try {
    while (state.live.dirty && state.image) {
      state.live.dirty = false;
      const final = state.live.final;
      state.live.final = false;
      state.image.blob = await state.editor.toBlob();
      await predict({ grid: final });
    }
  } finally {
    state.live.running = false;
    delete document.documentElement.dataset.live;
  }
}

function imagePoint(event) {
  const r = $('main-canvas').getBoundingClientRect();
  return [((event.clientX - r.left) / r.width) * state.editor.width, ((event.clientY - r.top) / r.height) * state.editor.height];
}

function onCanvasDown(event) {
  if (!state.image || state.editor.tool === 'inspect' || event.button !== 0) return;
  if (state.editor.pointerDown(...imagePoint(event))) {
    event.currentTarget.setPointerCapture(event.pointerId);
    event.preventDefault();
    drawMain();
  }
}

function onCanvasMove(event) {
  if (!state.image) return;
  if (state.editor.tool === 'inspect') {
    onCanvasPointer(event);
    return;
  }
  if (state.editor.pointerMove(...imagePoint(event)) && state.editor.drag?.kind === 'select') drawMain();
}

function onCanvasUp() {
  if (state.editor.pointerUp()) drawMain();
}

function chooseTool(tool) {
  state.editor.setTool(tool);
  $('tool-hint').textContent = TOOL_HINTS[tool];
  $('main-canvas').dataset.tool = tool;
  drawMain();
}

function onCanvasPointer(event) {
  const ex = state.explanation;
  if (!ex) return;
  const r = event.currentTarget.getBoundingClientRect();
  const gx = Math.floor(((event.clientX - r.left) / r.width) * ex.gridW);
  const gy = Math.floor(((event.clientY - r.top) / r.height) * ex.gridH);
  if (gx < 0 || gy < 0 || gx >= ex.gridW || gy >= ex.gridH) return;
  setQuery(1 + gy * ex.gridW + gx);
}

function onCanvasKey(event) {
  const ex = state.explanation;
  if (!ex) return;
  const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
  if (moves[event.key] && state.editor.tool === 'move' && state.editor.selectionRect()) {
    const step = Math.max(1, Math.round(state.editor.scale));
    state.editor.nudge(moves[event.key][0] * step, moves[event.key][1] * step);
    event.preventDefault();
    return;
  }
  if (event.key === 'Escape' && state.editor.sel) {
    state.editor.sel = null;
    drawMain();
  } else if (event.key === 'Escape') {
    setQuery(0);
  } else if (moves[event.key]) {
    const q = state.query === 0 ? 0 : state.query - 1;
    const gx = Math.min(ex.gridW - 1, Math.max(0, (q % ex.gridW) + moves[event.key][0]));
    const gy = Math.min(ex.gridH - 1, Math.max(0, Math.floor(q / ex.gridW) + moves[event.key][1]));
    setQuery(1 + gy * ex.gridW + gx);
  } else {
    return;
  }
  event.preventDefault();
}

// ---- gallery -----------------------------------------------------------------------------

async function loadGallery() {
  const box = $('gallery');
  let labels;
  try {
    const res = await fetch(GALLERY + 'labels.json');
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    labels = await res.json();
  } catch (e) {
    box.textContent = `No gallery (${GALLERY}labels.json: ${e.message}). Drop or choose an image instead.`;
    return [];
  }
  const scenes = labels.scenes ?? [];
  for (const s of scenes) {
    const names = (s.items ?? []).map((it) => it.class_name ?? labels.class_names?.[it.class] ?? String(it.class));
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'thumb';
    b.dataset.image = s.image;
    b.title = `${s.image}: ${names.join(', ')}`;
    const img = document.createElement('img');
    img.src = GALLERY + s.image;
    img.alt = `scene ${s.index ?? ''}: ${names.join(', ')}`;
    img.width = 64;
    img.height = 64;
    b.append(img);
    b.addEventListener('click', () => openGalleryScene(s.image, names));
    box.append(b);
  }
  markGallery(null);
  box.addEventListener('keydown', onGalleryKey);
  return scenes.map((s) => ({ image: s.image, names: (s.items ?? []).map((it) => it.class_name ?? String(it.class)) }));
}

async function openGalleryScene(image, names) {
  let blob;
  try {
    const res = await fetch(GALLERY + image);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    blob = await res.blob();
  } catch (e) {
    showError(`Could not fetch ${image}`, e);
    return;
  }
  await setImage(blob, image, names);
}

// The gallery is one Tab stop (the chosen scene); arrow keys, Home and End move within it.
function markGallery(name) {
  const thumbs = [...$('gallery').querySelectorAll('.thumb')];
  const chosen = thumbs.some((b) => b.dataset.image === name);
  thumbs.forEach((b, i) => {
    b.setAttribute('aria-pressed', String(b.dataset.image === name));
    b.tabIndex = b.dataset.image === name || (!chosen && i === 0) ? 0 : -1;
  });
}

function onGalleryKey(event) {
  const thumbs = [...$('gallery').querySelectorAll('.thumb')];
  const i = thumbs.indexOf(document.activeElement);
  if (i < 0) return;
  const perRow = Math.max(1, Math.round($('gallery').clientWidth / thumbs[0].offsetWidth));
  const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -perRow, ArrowDown: perRow, Home: -i, End: thumbs.length - 1 - i }[event.key];
  if (step === undefined) return;
  event.preventDefault();
  const next = thumbs[Math.min(thumbs.length - 1, Math.max(0, i + step))];
  for (const b of thumbs) b.tabIndex = b === next ? 0 : -1;
  next.focus();
}

// ---- files: drop, paste, choose ----------------------------------------------------------

function isModelFile(f) {
  return /\.(vitl|safetensors|json)$/i.test(f.name);
}

function onFiles(files) {
  const list = [...files];
  if (!list.length) return;
  if (list.some(isModelFile)) onModelFiles(list);
  else setImage(list[0], list[0].name || 'pasted image');
}

function wireInputs() {
  $('image-file').addEventListener('change', (e) => {
    if (e.target.files[0]) setImage(e.target.files[0], e.target.files[0].name);
    e.target.value = '';
  });
  $('model-file').addEventListener('change', (e) => {
    onModelFiles(e.target.files);
    e.target.value = '';
  });
  $('model-reset').addEventListener('click', () => changeModel(shippedSpec()));
  document.addEventListener('dragover', (e) => {
    e.preventDefault();
    document.body.classList.add('dragging');
  });
  document.addEventListener('dragleave', (e) => {
    if (!e.relatedTarget) document.body.classList.remove('dragging');
  });
  document.addEventListener('drop', (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    onFiles(e.dataTransfer.files);
  });
  document.addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.files ?? [])];
    if (files.length) {
      e.preventDefault();
      onFiles(files);
    }
  });
  $('error-close').addEventListener('click', clearError);
  const slider = (id, key) => {
    $(id).addEventListener('input', () => {
      state.display[key] = Number($(id).value);
      $(`${id}-out`).textContent = $(id).value;
      drawMain();
    });
  };
  slider('opacity', 'opacity');
  slider('threshold', 'threshold');
  $('cmap').addEventListener('change', () => {
    state.display.cmap = $('cmap').value;
    drawMain();
  });
  $('main-canvas').addEventListener('pointermove', onCanvasMove);
  $('main-canvas').addEventListener('pointerdown', onCanvasDown);
  $('main-canvas').addEventListener('pointerup', onCanvasUp);
  $('main-canvas').addEventListener('pointercancel', onCanvasUp);
  $('main-canvas').addEventListener('pointerleave', () => {
    if (state.editor.tool === 'inspect') setQuery(0);
  });
  for (const r of document.querySelectorAll('input[name=tool]')) r.addEventListener('change', () => chooseTool(r.value));
  $('brush-colour').addEventListener('input', () => { state.editor.colour = $('brush-colour').value; });
  $('brush-size').addEventListener('input', () => {
    state.editor.size = Number($('brush-size').value);
    $('brush-size-out').textContent = $('brush-size').value;
  });
  $('edit-undo').addEventListener('click', () => state.editor.undo());
  $('edit-revert').addEventListener('click', () => state.editor.revert());
  $('cancel').addEventListener('click', cancelLong);
  $('block').addEventListener('input', () => setTeachBlock(Number($('block').value)));
  $('block-prev').addEventListener('click', () => setTeachBlock(state.teachBlock - 1));
  $('block-next').addEventListener('click', () => setTeachBlock(state.teachBlock + 1));
  $('main-canvas').addEventListener('keydown', onCanvasKey);
  $('export-png').addEventListener('click', exportPng);
  $('export-npy').addEventListener('click', exportNpy);
  $('stop').addEventListener('click', stop);
}

// ---- export ------------------------------------------------------------------------------

function exportBase() {
  const ex = state.explanation;
  const stem = (state.image?.name ?? 'image').replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_');
  return `${stem}_${ex.method}_class${ex.target}`;
}

function exportPng() {
  const ex = state.explanation;
  const img = imageSource();
  if (!ex || !img) return;
  const long = Math.min(1024, Math.max(512, img.width, img.height));
  const s = long / Math.max(img.width, img.height);
  const c = document.createElement('canvas');
  c.width = Math.round(img.width * s);
  c.height = Math.round(img.height * s);
  drawOverlay(c, img, ex.pixelMap, ex.width, ex.height, state.display);
  c.toBlob((blob) => saveBlob(blob, `${exportBase()}.png`), 'image/png');
}

// The raw map as the CLI's --save-map writes it: the token grid, or pixels for methods that
// compute the map at the input.
function exportNpy() {
  const ex = state.explanation;
  if (!ex) return;
  const pixels = methodInfo(ex.method)?.nativePixels;
  const bytes = pixels ? encodeNpy(ex.pixelMap, [ex.height, ex.width]) : encodeNpy(ex.tokenMap, [ex.gridH, ex.gridW]);
  saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${exportBase()}.npy`);
}

// ---- stopping ----------------------------------------------------------------------------

// Which engine build the worker runs and with how many threads (<html data-threads> for tests).
function showEngine(init) {
  document.documentElement.dataset.threads = String(init.threads);
  $('engine-info').textContent = init.threads > 1
    ? `Engine: ${init.engine}, ${init.threads} threads (the page is cross-origin isolated).`
    : `Engine: ${init.engine}, one thread${init.crossOriginIsolated ? '' : ' (the page is not cross-origin isolated: served with COOP/COEP headers, as scripts/start.sh does, it uses threads)'}.`;
  if (init.note) showError('Threads are off', new VitlensError('not_ready', init.note));
}

// Cancels what is queued; if the worker is still inside a wasm call after a moment, it is
// replaced by a fresh one (engine and model loaded again).
async function stop() {
  state.client.cancelAll();
  await new Promise((r) => setTimeout(r, 400));
  if (!state.client.busy) return;
  state.client.restart();
  updateBusy();
  setStatus('Restarting the engine…');
  try {
    showEngine(await call('init', { wasmUrl: WASM_URL, wasmMtUrl: WASM_MT_URL }));
    if (state.modelSpec) await loadModel(state.modelSpec);
    if (state.image && state.info) {
      const out = await call('setImage', { source: { blob: state.image.blob } });
      state.predictions = out.predictions;
    }
    setStatus('Stopped');
  } catch (e) {
    showError('Could not restart the engine', e);
  }
}

// ---- start -------------------------------------------------------------------------------

function shippedSpec() {
  return { kind: 'vitl', source: { url: new URL(SHIPPED_MODEL, location.href).href }, label: 'the shipped model', shipped: true };
}

async function main() {
  state.editor = new SceneEditor(onEdit);
  state.editor.size = Number($('brush-size').value);
  wireInputs();
  mark('script');
  state.client = new WorkerClient();
  setStatus('Loading the engine…');
  const galleryP = loadGallery();
  const modelP = fetch(SHIPPED_MODEL).then((res) => (res.ok ? res.blob() : Promise.reject(
    new VitlensError('network', `${SHIPPED_MODEL}: HTTP ${res.status}`))));
  modelP.catch(() => {});
  try {
    const init = await call('init', { wasmUrl: WASM_URL, wasmMtUrl: WASM_MT_URL });
    showEngine(init);
    mark('engine');
    state.methods = init.methods;
    buildMethods();
    buildGrid();
  } catch (e) {
    showError('The engine could not start', e);
    return;
  }
  try {
    await loadModel({ ...shippedSpec(), source: { blob: await modelP } });
    mark('model');
  } catch (e) {
    showError('The shipped model could not be loaded (load your own under “Model”)', e);
  }
  const scenes = await galleryP;
  if (scenes.length && state.info) await openGalleryScene(scenes[0].image, scenes[0].names);
  else if (state.info) setStatus('Ready: drop or choose an image.');
}

main();
