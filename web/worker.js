// worker.js — the Web Worker that owns the vitlens wasm module and the loaded model.
//
// Protocol (a small typed union; see client.js for the main-thread side):
//   request  main → worker   { type, id, in }           type: init | loadModel | importModel |
//                                                             setImage | explain | cancel
//   reply    worker → main   { type: 'result', id, out }
//                            { type: 'error',  id, err: { code, message } }
// Requests run one at a time, in order. `cancel` (in: { id }) drops a queued request, or discards
// the result of the running one; both are answered with the error code 'cancelled'. A wasm call
// cannot be interrupted: to stop a long one, the client terminates this worker and starts another.
// Large arrays travel as transferred buffers. Engine errors ("code: message" JS Errors thrown
// by the bindings) become { code, message } in one place, toErr().
//
// The model keeps the trace of the last setImage; explain requests refer to it, so the client
// orders setImage before the explains of that image (requests are processed in order).

let vitlens = null; // the wasm module
let model = null; // the loaded Model (wasm memory; .delete() when replaced)
let info = null;
const queue = [];
let running = null; // { id, cancelled }
let draining = false;

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

function replaceModel(next) {
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

// The model's input as RGBA at the model's size (what the network sees), for display.
function modelView(x) {
  const { imageH: h, imageW: w, channels: c, mean, std } = info;
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

function buffersOf(ex) {
  const list = [ex.tokenMap.buffer, ex.pixelMap.buffer];
  for (const b of ex.intermediates?.blocks ?? [])
    for (const k of ['attn', 'grad', 'relevance', 'step', 'accumulated']) if (b[k]) list.push(b[k].buffer);
  return list;
}

const handlers = {
  async init({ wasmUrl }) {
    const t0 = performance.now();
    try {
      const { default: create } = await import(wasmUrl);
      vitlens = await create();
    } catch (e) {
      throw fail('not_ready', `could not load the engine from ${wasmUrl} (${e.message || e}); is it built? (scripts/build.sh)`);
    }
    return {
      out: { methods: vitlens.methods(), ms: performance.now() - t0, crossOriginIsolated: self.crossOriginIsolated === true },
    };
  },

  async loadModel({ source }) {
    if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
    const bytes = await sourceBytes(source, 'the model');
    return { out: replaceModel(vitlens.Model.fromBytes(bytes)) };
  },

  async importModel({ checkpoint, config }) {
    if (!vitlens) throw fail('not_ready', 'the engine is not loaded yet');
    const bytes = await sourceBytes(checkpoint, 'the checkpoint');
    const json = config.blob ? await config.blob.text() : new TextDecoder().decode(await sourceBytes(config, 'config.json'));
    return { out: replaceModel(vitlens.Model.fromSafetensors(bytes, json)) };
  },

  async setImage({ source }) {
    needModel();
    const blob = source.blob ?? new Blob([await sourceBytes(source, 'the image')]);
    const { rgba, width, height } = await decodeRGBA(blob);
    const t0 = performance.now();
    const predictions = model.predictRGBA(rgba, width, height, info.classes);
    const ms = performance.now() - t0;
    const view = modelView(model.preprocessRGBA(rgba, width, height));
    predictions.sort((a, b) => a.class - b.class);
    return { out: { predictions, width, height, view, ms }, transfer: [view.buffer] };
  },

  async explain({ method, options }) {
    needModel();
    const t0 = performance.now();
    const ex = model.explain(method, options ?? {});
    ex.ms = performance.now() - t0;
    return { out: ex, transfer: buffersOf(ex) };
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
      if (running.cancelled) reply({ type: 'error', id: msg.id, err: { code: 'cancelled', message: 'cancelled' } });
      else reply({ type: 'result', id: msg.id, out }, transfer);
    } catch (e) {
      reply({ type: 'error', id: msg.id, err: running.cancelled ? { code: 'cancelled', message: 'cancelled' } : toErr(e) });
    }
    running = null;
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
  queue.push(msg);
  drain();
};
