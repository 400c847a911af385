// app.js — the page's main thread: user interface and drawing only. Every engine call goes to
// the worker (worker.js through client.js); images are decoded off the main thread
// (createImageBitmap), and the worker receives the file itself, not its pixels.
import { VitlensError, WorkerClient } from './client.js';
import { encodeNpy, saveBlob } from './files.js';
import { drawColorbar, drawGrid, drawOverlay, formatNumber, minMax } from './render.js';

const SHIPPED_MODEL = './models/vitlens-scenes.vitl';
const GALLERY = './models/gallery/';
const WASM_URL = new URL('./wasm/vitlens.js', location.href).href;
const OPTION_KEYS = ['startLayer', 'headFusion', 'discardRatio', 'block', 'useGrad'];

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
  options: { startLayer: 0, headFusion: 'mean', discardRatio: 0, block: -1, useGrad: true },
  display: { cmap: 'jet', opacity: 0.55, threshold: 0 },
  explanation: null,
  query: 0,
  main: null, // the pending main explain request
  gridRun: 0,
  gridPending: [], // the grid's explain requests in flight
  firstShown: false,
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
function call(type, input, transfer) {
  const p = state.client.call(type, input, transfer);
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
    bitmap = await createImageBitmap(blob);
  } catch {
    showError(`Could not open ${name}`, new VitlensError('bad_image', 'this file is not an image the browser can decode (PNG, JPEG, GIF, WebP, BMP…)'));
    return;
  }
  state.image?.bitmap.close();
  state.image = { blob, bitmap, name, labels };
  markGallery(name);
  await predict();
}

async function predict() {
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
  state.predictions = out.predictions;
  state.predictMs = out.ms;
  state.target = argmax(out.predictions);
  state.explanation = null;
  drawModelInput(out.view);
  renderScores();
  drawMain();
  explainMain();
  runGrid();
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
  for (const b of $('scores').children) b.setAttribute('aria-pressed', String(Number(b.dataset.class) === cls));
  explainMain();
  runGrid();
}

// ---- explanations ------------------------------------------------------------------------

function methodInfo(name = state.method) {
  return state.methods.find((m) => m.name === name);
}

function methodOptions(m) {
  const o = { target: state.target };
  for (const k of m.options) if (k in state.options) o[k] = state.options[k];
  return o;
}

function cancelExplains() {
  state.client?.cancelAll('explain');
  state.gridRun++;
}

async function explainMain() {
  const m = methodInfo();
  if (!m || !state.predictions.length) return;
  if (state.main) state.client.cancel(state.main.id);
  setStatus(`Explaining with ${m.name}…`);
  const p = call('explain', { method: m.name, options: { ...methodOptions(m), intermediates: true } });
  state.main = p;
  try {
    const ex = await p;
    state.explanation = ex;
    drawMain();
    renderTeach();
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
  } finally {
    if (state.main === p) state.main = null;
  }
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
  const img = state.image?.bitmap;
  if (!img) return;
  fitCanvas(c, img.width, img.height, 448);
  const ex = state.explanation;
  drawOverlay(c, img, ex?.pixelMap, ex?.width, ex?.height, state.display);
  const m = methodInfo(ex?.method);
  const view = $('main-canvas');
  view.dataset.method = ex ? ex.method : '';
  view.dataset.target = ex ? String(ex.target) : '';
  $('view-title').textContent = ex ? `— ${ex.method}, class “${className(ex.target)}”${m && !m.classSpecific ? ' (does not depend on the class)' : ''}` : '';
  $('labels').textContent = state.image.labels ? `In this scene: ${state.image.labels.join(', ')}.` : `${state.image.name} (${img.width}×${img.height})`;
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
  state.gridPending = [];
  const cells = [...$('grid').children];
  for (const cell of cells) {
    cell.dataset.state = 'pending';
    cell.querySelector('.cell-ms').textContent = '…';
  }
  const img = state.image?.bitmap;
  await Promise.all(state.methods.map(async (m, i) => {
    const cell = cells[i];
    try {
      const p = call('explain', { method: m.name, options: { target: state.target } });
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
    o.textContent = m.name;
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
};

function queryRow(mat, n, q) {
  return mat.subarray(q * n + 1, q * n + n);
}

function renderTeach() {
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
    const row = document.createElement('div');
    row.className = 'teach-row';
    row.dataset.kind = key;
    const head = document.createElement('div');
    head.className = 'teach-head';
    head.innerHTML = '<strong></strong><br><span class="muted"></span>';
    head.querySelector('strong').textContent = title;
    head.querySelector('span').textContent = formula;
    row.append(head);
    blocks.forEach((b, i) => {
      if (!b[key]) return;
      const fig = document.createElement('figure');
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
  if (!blocks.length) box.textContent = 'This method reports no per-block intermediates.';
  renderConservation(ex);
}

function renderConservation(ex) {
  const box = $('conservation');
  box.replaceChildren();
  if (!ex || !ex.conservation?.length) return;
  const s = ex.relevanceSums;
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
  renderTeach();
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
  if (event.key === 'Escape') {
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
  $('main-canvas').addEventListener('pointermove', onCanvasPointer);
  $('main-canvas').addEventListener('pointerleave', () => setQuery(0));
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
  const img = state.image?.bitmap;
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
    await call('init', { wasmUrl: WASM_URL });
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
  wireInputs();
  mark('script');
  state.client = new WorkerClient();
  setStatus('Loading the engine…');
  const galleryP = loadGallery();
  const modelP = fetch(SHIPPED_MODEL).then((res) => (res.ok ? res.blob() : Promise.reject(
    new VitlensError('network', `${SHIPPED_MODEL}: HTTP ${res.status}`))));
  modelP.catch(() => {});
  try {
    const init = await call('init', { wasmUrl: WASM_URL });
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
