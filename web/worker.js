// worker.js — the Web Worker that owns the vitlens wasm module and the loaded model.
//
// Protocol (a small typed union; see client.js for the main-thread side):
//   request  main → worker   { type, id, in }           type: init | loadModel | importModel |
//                                                             saveModel | prepare | release | explain | walk |
//                                                             teach | attattr | normStages | normFf | perturb |
//                                                             faithfulness | mask | prune | stats | cancel
//   reply    worker → main   { type: 'result', id, out }
//                            { type: 'error',  id, err: { code, message } }
//                            { type: 'progress', id, out: { fraction } }   (long methods, perturb,
//                                                                          faithfulness, prune and
//                                                                          importModel, 0…1)
// Requests run one at a time, in order, except that a request sent with `priority: true` (the
// page's main view) goes ahead of the non-priority explains queued at the end (the all-methods
// grid), never ahead of anything else. `cancel` (in: { id }) drops a queued request, or discards
// the result of the running one; both are answered with the error code 'cancelled'. A wasm call
// cannot be interrupted by a message: to stop a long one, the client either raises the request's
// cancel flag (`cancelFlag`: a SharedArrayBuffer of one Int32 when the page is cross-origin
// isolated, else a blob URL it revokes; the engine's onProgress callback reads it and returns
// false, cancelWatch below), or terminates this worker and starts another.
// Large arrays travel as transferred buffers. Engine errors ("code: message" JS Errors thrown
// by the bindings) become { code, message } in one place, toErr().
//
// Images are handles: `prepare` makes an engine Input (the image's forward pass and what the
// methods derive from it) and answers its id; every per-image request names it (`in.image`), so
// several images can be alive (the page's image, its edited copy, another one) and no answer
// depends on the order of requests. `release` deletes one; loading a model deletes them all.
// `mask` makes an image's copy with heads switched off (Input.withHeadMask), a handle of its own
// that any per-image request can name; an image has at most one (a newer mask replaces it), and
// releasing the image releases it too.
//
// Input size: `prepare` with `inputSize: 'aspect'` explains the image at its own aspect, with the
// loaded model resized by the engine (Model.aspectInputSize, Model.atInputSize: a copy of the
// weights with pos_embed resampled). That copy is kept for the next image of the same size, one
// at a time, and deleted when another size or another model replaces it. Every answer about an
// image is at the size of the model that saw it (prepare answers that model's info). If the copy
// cannot be made, `prepare` answers at the model's own size with the reason in `sizeError`.

import { relaxedSimdSupported, startEngine } from './simd.js';

let vitlens = null; // the wasm module
let model = null; // the loaded Model (wasm memory; .delete() when replaced)
let info = null;
let resized = null; // { model, info }: the loaded model at the last image's aspect (wasm memory; .delete() when replaced)
let registry = []; // methods(), to know which are long-running
const inputs = new Map(); // image id → { x: the engine's Input (wasm memory; .delete() when released), info: its model's }
let nextImage = 1;
const queue = [];
let running = null; // { id, cancelled }
let draining = false;
// The threaded engine starts without its worker threads (deferThreads, wasm/threads.js):
// each would load a second copy of the engine while the page loads, predicts and explains its
// first image, on the same cores (issue 15, start-up: the isolated page's first explanation came
// ~80 ms after the plain page's). They are started once the first request that is more than
// loading a model and predicting (an explanation, in the page) has been answered; until they run,
// every call runs on this thread, with the same results.
let threadsLater = false;
const beforeThreads = new Set(['init', 'loadModel', 'importModel', 'saveModel', 'prepare', 'release', 'stats']);

function startThreads() {
  if (!threadsLater) return;
  threadsLater = false;
  vitlens.startThreads().catch(() => {});  // without them the engine keeps to one thread
}

// Turns anything thrown into { code, message }: engine errors start with their code.
function toErr(e) {
  if (e && typeof e === 'object' && typeof e.code === 'string' && typeof e.message === 'string')
    return { code: e.code, message: e.message };
  const text = e instanceof Error ? e.message : String(e);
  const m = /^([a-z_]+): ([\s\S]*)$/.exec(text);
  return m ? { code: m[1], message: m[2] } : { code: 'internal', message: text };
}

function fail(code, message) {
  return Object.assign(new Error(message), { code });
}

function needModel() {
  if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
  if (!model) throw fail('not_ready', 'no model is loaded');
}

async function fetchBytes(url, what) {
  let res;
  try {
    res = await fetch(url);
  } catch (e) {
    throw fail('network', `could not fetch ${what} (${url}): ${e.message}`);
  }
  if (!res.ok) throw fail('network', `could not fetch ${what} (${url}): HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

// A source is { url } (fetched here) or { blob } (a File or Blob from the page).
async function sourceBytes(src, what) {
  if (src && src.blob) return new Uint8Array(await src.blob.arrayBuffer());
  if (src && src.url) return fetchBytes(src.url, what);
  throw fail('bad_argument', `no ${what} given`);
}

// The Input of a request's `image` id, with the info of the model that saw it: { x, info }.
function inputOf(image) {
  needModel();
  const entry = inputs.get(image);
  if (!entry) throw fail('bad_argument', `no image ${image}: prepare it first (it was released or its model replaced)`);
  return entry;
}

// Deletes the masked copy of image `image` (mask), if there is one.
function releaseMasked(image) {
  for (const [id, entry] of inputs) {
    if (entry.parent !== image) continue;
    entry.x.delete();
    inputs.delete(id);
  }
}

function releaseAll() {
  for (const { x } of inputs.values()) x.delete();
  inputs.clear();
}

// Deletes the resized copy (its inputs keep the weights they need until they are released).
function dropResized() {
  resized?.model.delete();
  resized = null;
}

function replaceModel(next) {
  releaseAll();
  dropResized();
  if (model) model.delete();
  model = next;
  info = model.info();
  return { info };
}

// Decodes any image the browser can decode into RGBA, composited over white (as the engine
// does with alpha), without colour-space conversion so that PNG pixels arrive unchanged.
async function decodeRGBA(blob) {
  let bitmap;
  try {
    bitmap = await createImageBitmap(blob, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  } catch {
    throw fail('bad_image', `${blob.name || 'the file'} is not an image this browser can decode (PNG, JPEG, GIF, WebP, BMP…)`);
  }
  const { width, height } = bitmap;
  if (width * height > 50e6) throw fail('limit', `the image is ${width}×${height}; at most 50 megapixels`);
  const canvas = new OffscreenCanvas(width, height);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  ctx.drawImage(bitmap, 0, 0);
  bitmap.close();
  return { rgba: ctx.getImageData(0, 0, width, height).data, width, height };
}

// The model that sees an image: the loaded one, or for inputSize 'aspect' the loaded one at
// `aspect` ([h, w], the engine's size for the image's aspect): { model, info }.
function modelFor(inputSize, [h, w]) {
  if (inputSize === 'model' || (h === info.imageH && w === info.imageW)) return { model, info };
  if (resized?.info.imageH !== h || resized?.info.imageW !== w) {
    dropResized();
    const m = model.atInputSize(h, w);
    try {
      resized = { model: m, info: m.info() };
    } catch (e) {
      m.delete();
      throw e;
    }
  }
  return resized;
}

// A model's input x as RGBA at that model's size (what the network sees), for display; the
// second argument is that model's info.
function modelView(x, { imageH: h, imageW: w, channels: c, mean, std }) {
  const out = new Uint8ClampedArray(w * h * 4);
  for (let p = 0; p < w * h; p++) {
    for (let k = 0; k < 3; k++) {
      const ch = c >= 3 ? k : 0;
      out[p * 4 + k] = Math.round((x[ch * w * h + p] * std[ch] + mean[ch]) * 255);
    }
    out[p * 4 + 3] = 255;
  }
  return out;
}

// The ArrayBuffers behind an explanation's arrays, each once: the per-head and per-block arrays of
// one output view one buffer (wasm/bindings.cpp, mats_shared), and a transfer list must not repeat one.
function buffersOf(ex) {
  const list = [ex.tokenMap.buffer, ex.pixelMap.buffer];
  for (const b of ex.intermediates?.blocks ?? []) {
    for (const k of ['attn', 'grad', 'relevance', 'step', 'accumulated']) if (b[k]) list.push(b[k].buffer);
    for (const a of [...(b.relevanceHeads ?? []), ...(b.productHeads ?? [])]) list.push(a.buffer);
  }
  for (const heads of ex.attattr ?? []) for (const a of heads) list.push(a.buffer);
  for (const b of ex.norm ?? []) for (const part of [b.maps, b.mixing]) for (const a of Object.values(part ?? {})) list.push(a.buffer);
  return [...new Set(list)];
}

// Whether a blob URL can be read now (a synchronous request: ~3 ms on a 2-vCPU VM); false once
// the page has revoked it.
function readable(url) {
  try {
    const req = new XMLHttpRequest();
    req.open('GET', url, false);
    req.send();
    return req.status === 200;
  } catch {
    return false;
  }
}

// Whether this worker can read the page's blob URLs (its probe URL, read once; views/util.js).
const probes = new Map();
function canRead(probe) {
  if (typeof probe !== 'string' || !probe.startsWith('blob:')) return false;
  if (!probes.has(probe)) probes.set(probe, readable(probe));
  return probes.get(probe);
}

// What a request's cancel flag (views/util.js) says, as a function: a shared Int32 (a cross-origin
// isolated page) read at every call; a plain page's { url, probe }: the URL read at most every
// 100 ms, raised once it cannot be read — when the probe can be (else the browser does not let a
// worker read the page's URLs, nothing cancels, and the page restarts the worker, stopLong).
function cancelWatch(flag) {
  if (typeof SharedArrayBuffer === 'function' && flag instanceof SharedArrayBuffer) {
    const a = new Int32Array(flag);
    return () => Atomics.load(a, 0) !== 0;
  }
  const url = flag?.url;
  if (typeof url !== 'string' || !url.startsWith('blob:') || !canRead(flag.probe)) return () => false;
  let lastRead = -Infinity;
  let first = true;
  let raised = false;
  return () => {
    const now = performance.now();
    if (!raised && now - lastRead >= 100) {
      lastRead = now;
      // A failed first read is tried twice more before it counts: the page registers a new URL
      // asynchronously (no such lag was seen, but a false cancel would lose the request).
      raised = !readable(url) && !(first && (readable(url) || readable(url)));
      first = false;
    }
    return raised;
  };
}

// The onProgress option of a long method: posts { type: 'progress' } at its first report, then at
// most every 100 ms and at the end, and returns false (cancel) once the client has raised the
// request's cancel flag. Each message redraws a progress readout, i.e. a frame of the page: posted
// at every 1 % as before, an image's grid sent ~200 and the page's main thread spent nearly as long
// drawing frames as the worker computed, on the two cores they share (the grid finished 0.16–0.39 s
// sooner in three of four A/B runs, 0.13 s later in one: docs/performance.md, 2026-12-03, fifth
// session).
function progressOption(id, cancelFlag) {
  const cancelled = cancelWatch(cancelFlag);
  let lastT = -Infinity;
  return (fraction) => {
    const now = performance.now();
    if (fraction >= 1 || now - lastT >= 100) {
      lastT = now;
      reply({ type: 'progress', id, out: { fraction } });
    }
    return !cancelled();
  };
}

// Starts the engine whose Emscripten glue is at `url` with its .wasm beside it, the .wasm's
// download and compilation started first, so that they overlap the glue's import instead of
// following it (the glue would fetch it only once imported and run). Resolves to the module;
// rejects when either part fails.
async function loadEngine(url, options = {}) {
  const wasmUrl = url.replace(/\.js$/, '.wasm');
  const compiled = fetch(wasmUrl).then((res) => {
    if (!res.ok) throw new Error(`${wasmUrl}: HTTP ${res.status}`);
    // compileStreaming needs the application/wasm type, which some static hosts do not send
    if (res.headers.get('Content-Type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(res);
    return res.arrayBuffer().then((bytes) => WebAssembly.compile(bytes));
  });
  compiled.catch(() => {}); // reported below, through `failed`
  const { default: createVitlens } = await import(url);
  let fail;
  const failed = new Promise((_, reject) => {
    fail = reject;
  });
  const started = createVitlens({
    ...options,
    // Emscripten's hook for a module compiled elsewhere: receive(instance, module) starts the
    // runtime (the threaded build also sends the module to its threads). Emscripten does not
    // see a failure here, so it rejects `failed` instead.
    instantiateWasm(imports, receive) {
      compiled.then(async (module) => receive(await WebAssembly.instantiate(module, imports), module)).catch(fail);
      return {};
    },
  });
  return Promise.race([started, failed]);
}

const handlers = {
  // Loads the engine: the pthreads build (wasmMtUrl) when this worker is cross-origin isolated
  // (SharedArrayBuffer available), else — or if that fails — the single-threaded one; of either
  // its relaxed-SIMD build where the browser accepts relaxed SIMD, unless simd is 'plain' (simd.js).
  async init({ wasmUrl, wasmMtUrl, simd = 'auto' }) {
    const t0 = performance.now();
    const relaxed = simd !== 'plain' && relaxedSimdSupported();
    let note = '';
    let started = null;
    if (wasmMtUrl && self.crossOriginIsolated === true) {
      try {
        started = await startEngine(wasmMtUrl, relaxed, (u) => loadEngine(u, { deferThreads: true }));
        threadsLater = true;
      } catch (e) {
        note = `the threaded engine did not start (${e.message || e}); using one thread`;
      }
    }
    try {
      started ??= await startEngine(wasmUrl, relaxed, (u) => loadEngine(u));
      vitlens = started.vitlens;
      registry = vitlens.methods();
      // The products' kernels run briefly now (~10 ms), so that V8 optimises them in the
      // background while the model loads rather than while the first image is predicted and
      // explained (gemm.h, gemm_warm_up): that prediction and explanation took 18 and 38 ms less
      // here (docs/performance.md, 2026-12-02, fifth session).
      vitlens.warmUp();
    } catch (e) {
      throw fail('not_ready', `could not load the engine from ${started?.url ?? wasmUrl} (${e.message || e}); is it built? (scripts/build.sh)`);
    }
    const { url } = started;
    return {
      out: {
        methods: registry, ms: performance.now() - t0, crossOriginIsolated: self.crossOriginIsolated === true,
        engine: url.slice(url.lastIndexOf('/') + 1), simd: started.simd, threads: vitlens.threads(), note,
      },
    };
  },

  // { info, ms: the engine's load of the bytes }
  async loadModel({ source }) {
    if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
    const bytes = await sourceBytes(source, 'the model');
    const t0 = performance.now();
    const out = replaceModel(vitlens.Model.fromBytes(bytes));
    return { out: { ...out, ms: performance.now() - t0 } };
  },

  // A safetensors checkpoint converted tensor by tensor from the file's bytes (which stay in this
  // worker's JS memory, never copied whole into the engine's), with progress and the shared cancel
  // flag as explain's; `storage: 'int8'` quantises the weights as an int8 .vitl file stores them.
  async importModel({ checkpoint, config, storage = 'f32', cancelFlag }) {
    if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
    const id = running?.id;
    const bytes = await sourceBytes(checkpoint, 'the checkpoint');
    const json = config.blob ? await config.blob.text() : new TextDecoder().decode(await sourceBytes(config, 'config.json'));
    const next = vitlens.Model.fromSafetensors(bytes, json, { onProgress: progressOption(id, cancelFlag), storage });
    return { out: replaceModel(next) };
  },

  // The loaded model as a .vitl file (f32, or int8 when it was loaded or imported as int8).
  async saveModel() {
    needModel();
    const bytes = model.save(info.storedInt8 ? 'int8' : 'f32');
    return { out: { bytes, storage: info.storedInt8 ? 'int8' : 'f32' }, transfer: [bytes.buffer] };
  },

  // Decodes an image and makes its engine Input at `inputSize` ('model': the model's own size;
  // 'aspect': the image's aspect): { image: id, predictions (by class), width, height (the
  // file's), info (the model that saw it: its imageH × imageW and tokens are the input's), aspect
  // ([h, w] the engine gives for the image's aspect), view (RGBA at info's size: what the network
  // sees), ms (its forward pass) and decodeMs (its decoding), and sizeError ({ code, message }) when
  // the resized model could not be made }.
  async prepare({ source, inputSize = 'model' }) {
    needModel();
    const blob = source.blob ?? new Blob([await sourceBytes(source, 'the image')]);
    const decodeStart = performance.now();
    const { rgba, width, height } = await decodeRGBA(blob);
    const decodeMs = performance.now() - decodeStart;
    if (inputSize !== 'model' && inputSize !== 'aspect') throw fail('bad_argument', `inputSize is 'model' or 'aspect', not '${inputSize}'`);
    const aspect = model.aspectInputSize(height, width);
    let seen = { model, info };
    let sizeError;
    try {
      seen = modelFor(inputSize, aspect);
    } catch (e) {
      sizeError = toErr(e);
    }
    const t0 = performance.now();
    const x = seen.model.prepareRGBA(rgba, width, height);
    const predictions = x.predict(seen.info.classes);
    const ms = performance.now() - t0;
    const image = nextImage++;
    inputs.set(image, { x, info: seen.info });
    const view = modelView(x.tensor(), seen.info);
    predictions.sort((a, b) => a.class - b.class);
    return { out: { image, predictions, width, height, info: seen.info, aspect, view, ms, decodeMs, sizeError }, transfer: [view.buffer] };
  },

  // Deletes an image's Input, and its masked copy (unknown ids are ignored: releasing twice is harmless).
  async release({ image }) {
    inputs.get(image)?.x.delete();
    inputs.delete(image);
    releaseMasked(image);
    return { out: {} };
  },

  async explain({ image, method, options, cancelFlag }) {
    const { x } = inputOf(image);
    const t0 = performance.now();
    const long = registry.find((m) => m.name === method.split(':')[0])?.longRunning; // a name or a method spec
    const plain = options && typeof options === 'object' && !Array.isArray(options);
    if (long && plain) options = { ...options, onProgress: progressOption(running?.id, cancelFlag) };
    const ex = x.explain(method, options ?? {});
    ex.ms = performance.now() - t0;
    return { out: ex, transfer: buffersOf(ex) };
  },

  // The guided walk through a method on the image (Input.walk: core's method_walk): its steps, each
  // row, matrix and map a transferred Float32Array; `options` the method's and the walk's (query,
  // matrices).
  async walk({ image, method, options }) {
    const { x } = inputOf(image);
    const t0 = performance.now();
    const w = x.walk(method, options ?? {});
    w.ms = performance.now() - t0;
    const transfer = [];
    for (const s of w.steps) for (const k of ['row', 'matrix', 'map']) if (s[k]) transfer.push(s[k].buffer);
    return { out: w, transfer };
  },

  // The teaching views: per block, per head, A and (when `grads`) ∂y_t/∂A of the image.
  async teach({ image, target = -1, grads = false }) {
    const { x } = inputOf(image);
    const attn = x.attention();
    const g = grads ? x.attentionGrads(target) : null;
    const transfer = new Set();  // each output's arrays view one buffer
    for (const blocks of [attn, g ?? []]) for (const heads of blocks) for (const a of heads) transfer.add(a.buffer);
    return { out: { attn, grads: g }, transfer: [...transfer] };
  },

  // The norm-based stages of the image as the .npz `vitlens explain --save-stages` writes: the
  // explanation's `norm` (sent back) and the image's per-head atb maps, encoded by the engine.
  async normStages({ image, norm }) {
    const { x } = inputOf(image);
    const bytes = vitlens.encodeNormStages(norm, x.normHeads());
    return { out: bytes, transfer: [bytes.buffer] };
  },

  // The feed-forward's effect on the image (the page's "The feed-forward's effect"): the norm-based
  // maps (an explanation's `norm`: sent back when the page has them, else computed here, with
  // progress and the shared cancel flag as explain's) and the engine's per-block summary of the
  // FF's transition (normImageSummary: context shares, Spearman ρ, mixing means). Answers
  // { norm (only when computed here), summary, ms: { explain, summary } }.
  async normFf({ image, norm, cancelFlag }) {
    const { x } = inputOf(image);
    const ms = { explain: 0, summary: 0 };
    let computed = null;
    if (!norm) {
      const t0 = performance.now();
      computed = x.explain('norm-based', { onProgress: progressOption(running?.id, cancelFlag) }).norm;
      ms.explain = performance.now() - t0;
    }
    const t1 = performance.now();
    const summary = vitlens.normImageSummary(norm ?? computed);
    ms.summary = performance.now() - t1;
    const transfer = [];
    for (const b of summary) transfer.push(b.shareBefore.buffer, b.shareAfter.buffer, b.rhoQuery.buffer);
    if (computed) for (const b of computed) for (const part of [b.maps, b.mixing]) for (const a of Object.values(part)) transfer.push(a.buffer);
    return { out: { norm: computed, summary, ms }, transfer };
  },

  // What the engine builds on an attattr explanation of the image (its `attattr`, sent back):
  // the attribution tree { root, nodes, edges: [{ from, to, block, score }] } and the head scores
  // { attattr, attention, taylor } (depth × heads).
  async attattr({ image, attattr, target = -1, threshold = 0.4 }) {
    const { x } = inputOf(image);
    return { out: { tree: x.attrTree({ attattr, target, threshold }), heads: x.headScores({ attattr, target }) } };
  },

  // The perturbation test of the image by the engine (what `vitlens eval` runs): pixels ranked by
  // `map` (H×W at the size of the model that saw the image) are set to black, floor(n·k/10) of them for k = 0…9, most
  // relevant first ("positive") and least relevant first ("negative"). Per order: the engine's
  // curve (fraction, removed, top, prob, logit, correct, aucProb, aucAccuracy) and the perturbed
  // images as RGBA (views). Progress over both orders, and the shared cancel flag.
  async perturb({ image, map, target = -1, cancelFlag }) {
    const { x, info: seen } = inputOf(image);
    const t0 = performance.now();
    const out = { steps: [], ms: 0 };
    const transfer = [];
    const progress = progressOption(running?.id, cancelFlag);
    for (const [k, order] of ['positive', 'negative'].entries()) {
      const onProgress = (f) => progress((k + f) / 2);
      const { inputs: perturbed, ...curve } = x.perturbation(map, { positive: order === 'positive', target, inputs: true, onProgress });
      const views = perturbed.map((p) => modelView(p, seen));
      for (const v of views) transfer.push(v.buffer);
      out.steps.push({ order, ...curve, views });
    }
    out.ms = performance.now() - t0;
    return { out, transfer };
  },

  // Heads off by hand: the image `image` with the heads `mask` switches off (depth × heads numbers,
  // block by block, 1 on and 0 off) as a new image handle (Input.withHeadMask: its prediction and
  // every explanation are of the masked model): { image: id, predictions (by class), top (the
  // engine's `top` best classes, best first), mask (the engine's) }. Release it like any image.
  async mask({ image, mask, top = 5 }) {
    const { x, info: seen } = inputOf(image);
    const masked = x.withHeadMask(mask);
    // One masked copy per image: a newer one replaces the last (whose requests are stale by then),
    // so that a copy whose answer was cancelled is not left behind.
    releaseMasked(image);
    const id = nextImage++;
    inputs.set(id, { x: masked, info: seen, parent: image });
    const best = masked.predict(seen.classes);
    const predictions = [...best].sort((a, b) => a.class - b.class);
    return { out: { image: id, predictions, top: best.slice(0, Math.max(1, top)), mask: Array.from(masked.headMask()) } };
  },

  // One image's pruning curve (Input.pruningCurve): from every head on, the heads of `order` (flat
  // l·H + h) or of a ranking of this image's heads ('attattr', 'attention-confidence', …; for
  // attattr the explanation's `attattr` may be sent back) switched off one after another, the
  // first `count` only: { target, original, ranking, order, heads, prob, logit, top, firstChange,
  // scores, ms }. Progress and the shared cancel flag as explain's.
  async prune({ image, order, ranking, target = -1, attattr, count, cancelFlag }) {
    const { x } = inputOf(image);
    const t0 = performance.now();
    const options = { target, onProgress: progressOption(running?.id, cancelFlag) };
    if (order !== undefined) options.order = order;
    if (ranking !== undefined) options.ranking = ranking;
    if (attattr !== undefined) options.attattr = attattr;
    if (count !== undefined) options.count = count;
    const curve = x.pruningCurve(options);
    curve.ms = performance.now() - t0;
    return { out: curve };
  },

  // Every faithfulness figure of `map` (H×W at the size of the model that saw the image) for class
  // `target`, by the engine's Input.faithfulness (core's map_faithfulness: what `vitlens eval`
  // records per sample): the perturbation test (`black`) and ROAD (`road`) in both orders with their
  // SRGs, and with `masks` ({ own, other }: sources of object mask images, read by the engine at the
  // input's size) the mask figures. Reports progress after each forward pass and stops at the
  // shared cancel flag, as long explains do.
  async faithfulness({ image, map, target = -1, black = true, road = false, masks = null, cancelFlag }) {
    const { x } = inputOf(image);
    const id = running?.id;
    const options = { target, black, road, onProgress: progressOption(id, cancelFlag) };
    if (masks?.own) options.mask = x.maskFromImage(await sourceBytes(masks.own, 'the object’s mask'));
    if (masks?.other) options.otherMask = x.maskFromImage(await sourceBytes(masks.other, 'the other object’s mask'));
    const t0 = performance.now();
    const out = x.faithfulness(map, options);
    out.ms = performance.now() - t0;
    return { out };
  },

  // The wasm heap's size and the bytes malloc holds, and the threads an explanation uses now:
  // { heapBytes, allocatedBytes, activeThreads } (leak tests, the threads' start).
  async stats() {
    if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
    return { out: { ...vitlens.memoryStats(), activeThreads: vitlens.activeThreads() } };
  },
};

function reply(msg, transfer = []) {
  self.postMessage(msg, transfer);
}

// Lets queued messages (cancel in particular) arrive between two requests.
function nextTask() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => resolve();
    ch.port2.postMessage(null);
  });
}

async function drain() {
  if (draining) return;
  draining = true;
  while (queue.length) {
    const msg = queue.shift();
    running = { id: msg.id, cancelled: false };
    try {
      const handler = handlers[msg.type];
      if (!handler) throw fail('bad_argument', `unknown request type '${msg.type}'`);
      const { out, transfer } = await handler(msg.in ?? {});
      if (running.cancelled) {
        // The page never learns of an image prepared for a cancelled request: freed here.
        if (msg.type === 'prepare') await handlers.release({ image: out.image });
        reply({ type: 'error', id: msg.id, err: { code: 'cancelled', message: 'cancelled' } });
      } else {
        reply({ type: 'result', id: msg.id, out }, transfer);
      }
    } catch (e) {
      reply({ type: 'error', id: msg.id, err: running.cancelled ? { code: 'cancelled', message: 'cancelled' } : toErr(e) });
    }
    running = null;
    if (!beforeThreads.has(msg.type)) startThreads();
    await nextTask();
  }
  draining = false;
}

self.onmessage = (event) => {
  const msg = event.data;
  if (msg.type === 'cancel') {
    const target = msg.in?.id;
    const i = queue.findIndex((q) => q.id === target);
    if (i >= 0) {
      queue.splice(i, 1);
      reply({ type: 'error', id: target, err: { code: 'cancelled', message: 'cancelled' } });
    } else if (running && running.id === target) {
      running.cancelled = true;
    }
    return;
  }
  let at = queue.length;
  if (msg.priority) while (at > 0 && queue[at - 1].type === 'explain' && !queue[at - 1].priority) at--;
  queue.splice(at, 0, msg);
  drain();
};
