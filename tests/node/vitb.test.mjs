// vitb.test.mjs — a ViT-B/16 in the wasm module: 86.6 M parameters, 17.6 GFLOP per forward pass.
// A random checkpoint of that shape (timm names, F32, 346 MB; checkpoints.mjs) is made at test
// time, read by Model.fromSafetensors one tensor at a time with progress, classified and explained
// by transformer-attribution and the other single-pass methods; the maps agree with the native CLI
// on the same checkpoint, int8 storage keeps the top class, the API works on memory above 2 GB,
// and a browser that refuses to grow the engine's memory gets an out_of_memory Error naming what
// the model needs (and the module keeps working). One JSON line reports load, forward and
// transformer-attribution times and the wasm heap.
//
// Registered as its own CTest (wasm_node_vitb): on the 2-core machine it takes about a minute idle.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { encodeCheckpoint, VIT_B16 } from './checkpoints.mjs';
import { fixtureModel, loadVitlens, maxRelError, nativeCli, readNpy, tmpDir } from './support.mjs';

const MB = 1 << 20;
// Every method that runs on one forward pass (and its backward or relevance pass).
const SINGLE_PASS = ['transformer-attribution', 'raw-attention', 'rollout', 'attn-gradcam', 'grad-rollout', 'partial-lrp',
  'lrp', 'attnlrp', 'saliency', 'grad-x-input'];
// ViT-B/16's parameters: patch embedding, cls and pos, 12 blocks, final norm, head.
const PARAMS = 768 * 3 * 256 + 768 + 768 + 197 * 768 + 12 * (4 * 768 + 768 * 2304 + 2304 + 768 * 768 + 768 +
  2 * 768 * 3072 + 3072 + 768) + 2 * 768 + 1000 * 768 + 1000;

const figures = {}; // the JSON line
let vl;
let dir;
let ckpt; // { bytes, config }
let model;
let input;
let x; // the normalised input (C×H×W)
const maps = {}; // method → explanation

function writeNpyF32(file, shape, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')},), }`;
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

const ms = (t0) => Math.round(performance.now() - t0);
const heapMB = () => Math.round(vl.memoryStats().heapBytes / MB);

before(async () => {
  vl = await loadVitlens();
  dir = tmpDir();
  const t0 = performance.now();
  ckpt = encodeCheckpoint(VIT_B16, 2026);
  figures.checkpointMB = Math.round(ckpt.bytes.length / MB);
  figures.generateMs = ms(t0);
  // A random normalised input: seeded uniform noise in [−1.5, 1.5).
  x = new Float32Array(3 * 224 * 224);
  let s = 7;
  for (let i = 0; i < x.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) | 0;
    x[i] = 3 * ((s >>> 8) / 16777216) - 1.5;
  }
});

after(() => {
  input?.delete();
  model?.delete();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify({ vitb: figures }));
});

test('a ViT-B/16 checkpoint (346 MB) is read one tensor at a time, with progress', () => {
  const progress = [];
  const heapBefore = vl.memoryStats().heapBytes;
  const t0 = performance.now();
  model = vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config), { onProgress: (f) => { progress.push(f); } });
  figures.loadMs = ms(t0);
  figures.heapAfterLoadMB = heapMB();
  const info = model.info();
  assert.deepEqual([info.imageH, info.imageW, info.patch, info.dim, info.depth, info.heads, info.mlpDim, info.classes],
    [224, 224, 16, 768, 12, 12, 3072, 1000]);
  assert.equal(info.params, PARAMS);
  // One call per tensor (152), rising to 1.
  assert.equal(progress.length, 152);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1]);
  assert.equal(progress.at(-1), 1);
  // The checkpoint is never copied into the heap whole: the heap grew by the weights and little more.
  const grown = vl.memoryStats().heapBytes - heapBefore;
  assert.ok(grown < 4 * PARAMS + 64 * MB, `the heap grew by ${grown / MB} MB for ${4 * PARAMS / MB} MB of weights`);
  // The two-argument form still works, and a progress callback returning false cancels.
  let calls = 0;
  assert.throws(() => vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config), { onProgress: () => ++calls < 5 }),
    /^Error: cancelled: /);
  assert.equal(calls, 5);
  assert.throws(() => vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config), { progress: () => {} }),
    /^Error: bad_argument: unknown option 'progress'/);
});

test('predict and every single-pass method: shapes and finite maps', () => {
  assert.ok(model, 'the model loaded');
  let t0 = performance.now();
  input = model.prepare(x);
  const top = input.predict(5);
  figures.forwardMs = ms(t0);
  assert.equal(top.length, 5);
  const logits = input.logits();
  assert.equal(logits.length, 1000);
  assert.ok(logits.every(Number.isFinite));
  // Scaled like a real initialisation: the class softmax is spread, not saturated.
  assert.ok(top[0].prob < 0.5 && top[0].prob > 1e-3, `top probability ${top[0].prob}`);
  for (const method of SINGLE_PASS) {
    t0 = performance.now();
    const ex = input.explain(method, {});
    if (method === 'transformer-attribution') figures.transformerAttributionMs = ms(t0);
    (figures.methodsMs ??= {})[method] = ms(t0);
    assert.equal(ex.target, top[0].class, method);
    assert.deepEqual([ex.gridH, ex.gridW, ex.tokenMap.length], [14, 14, 196], method);
    assert.deepEqual([ex.height, ex.width, ex.pixelMap.length], [224, 224, 224 * 224], method);
    assert.ok(ex.tokenMap.every(Number.isFinite) && ex.pixelMap.every(Number.isFinite), `${method}: non-finite values`);
    assert.ok(ex.pixelMap.some((v) => v !== ex.pixelMap[0]), `${method}: a constant map`);
    maps[method] = ex;
  }
  figures.heapPeakMB = heapMB(); // the heap only grows: its size is the peak
  figures.allocatedMB = Math.round(vl.memoryStats().allocatedBytes / MB);
  // The teaching views' data: 12 blocks × 12 heads of 197×197.
  const attn = input.attention();
  assert.equal(attn.length, 12);
  assert.ok(attn.every((heads) => heads.length === 12 && heads.every((a) => a.length === 197 * 197)));
});

test('the maps agree with the native CLI on the same checkpoint', () => {
  assert.ok(maps['transformer-attribution'], 'the methods ran');
  const files = { ckpt: path.join(dir, 'vit-b16.safetensors'), config: path.join(dir, 'config.json'), model: path.join(dir, 'vit-b16.vitl'), x: path.join(dir, 'x.npy') };
  fs.writeFileSync(files.ckpt, ckpt.bytes);
  fs.writeFileSync(files.config, JSON.stringify(ckpt.config));
  writeNpyF32(files.x, [3, 224, 224], x);
  const t0 = performance.now();
  nativeCli('import', files.ckpt, '--config', files.config, '-o', files.model);
  fs.rmSync(files.ckpt);
  const pixels = new Set(vl.methods().filter((m) => m.nativePixels).map((m) => m.name));
  const errors = {};
  // Two methods (each CLI run loads the 346 MB model again): the rollout of the relevance and
  // gradients, and the relevance carried to the pixels. The other maps agree on the small shapes
  // of methods.test.mjs.
  for (const method of ['transformer-attribution', 'lrp']) {
    const out = path.join(dir, `${method}.npy`);
    nativeCli('explain', files.model, '--input', files.x, '--method', method, '--save-map', out);
    const native = readNpy(out).data;
    const ex = maps[method];
    const wasm = pixels.has(method) ? ex.pixelMap : ex.tokenMap;
    assert.equal(native.length, wasm.length, method);
    errors[method] = maxRelError(wasm, native);
    assert.ok(errors[method] <= 1e-4, `${method}: max |wasm − native| = ${errors[method]} of max |map|`);
  }
  figures.nativeMs = ms(t0);
  figures.maxRelErrorVsNative = Object.fromEntries(Object.entries(errors).map(([k, v]) => [k, Number(v.toExponential(2))]));
});

test("int8: save('int8') → fromBytes keeps the top class; storage 'int8' imports the same weights", () => {
  assert.ok(input, 'the input was prepared');
  const bytes = model.save('int8');
  figures.int8MB = Math.round(bytes.length / MB);
  assert.ok(bytes.length < 0.3 * ckpt.bytes.length, `${bytes.length} bytes`);
  const t0 = performance.now();
  const m8 = vl.Model.fromBytes(bytes);
  figures.int8LoadMs = ms(t0);
  try {
    assert.equal(m8.info().storedInt8, true);
    const x8 = m8.prepare(x);
    const [a, b] = [input.predict(2), x8.predict(1)[0]];
    const l8 = x8.logits();
    x8.delete();
    figures.int8LogitError = Number(maxRelError(l8, input.logits()).toExponential(2));
    assert.equal(b.class, a[0].class, `int8 top class ${b.class}, f32 ${a[0].class} (margin ${a[0].logit - a[1].logit})`);
    // Imported with storage 'int8': the same weights as the int8 file's, without the f32 copy.
    m8.delete();
    const t1 = performance.now();
    const direct = vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config), { storage: 'int8' });
    figures.int8ImportMs = ms(t1);
    try {
      assert.equal(direct.info().storedInt8, true);
      const xd = direct.prepare(x);
      const ld = xd.logits();
      xd.delete();
      assert.deepEqual(Array.from(ld), Array.from(l8));
    } finally {
      direct.delete();
    }
    assert.throws(() => vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config), { storage: 'f16' }),
      /^Error: bad_argument: option storage must be 'f32' or 'int8'/);
  } finally {
    if (!m8.isDeleted()) m8.delete();
  }
});

test('the API works on memory above 2 GB (pointers are unsigned in the glue)', () => {
  assert.ok(input, 'the input was prepared');
  // Fill the heap to 2.2 GB with copies of the model (imported tensor by tensor: no freed buffers
  // are left below), then make a new input, whose trace and maps lie above 2 GB, and compare it
  // with the first.
  const copies = [];
  try {
    while (vl.memoryStats().heapBytes < 2.2 * 1024 * MB) copies.push(vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config)));
    figures.heapAbove2GBMB = heapMB();
    const y = model.prepare(x);
    try {
      assert.deepEqual(Array.from(y.logits()), Array.from(input.logits()));
      assert.deepEqual(y.predict(3), input.predict(3));
      const ex = y.explain('grad-rollout', {});
      assert.deepEqual(Array.from(ex.tokenMap), Array.from(maps['grad-rollout'].tokenMap));
      assert.deepEqual(Array.from(ex.pixelMap), Array.from(maps['grad-rollout'].pixelMap));
      assert.equal(y.attention()[11][11].length, 197 * 197);
      assert.equal(model.info().classNames[999], 'vit-b16:999');
      assert.throws(() => y.explain('lrp', { target: 1000 }), /^Error: bad_argument: target 1000 is out of range/);
    } finally {
      y.delete();
    }
  } finally {
    for (const c of copies) c.delete();
  }
});

test('a browser that refuses to grow the memory: out_of_memory with what the model needs', () => {
  // WebAssembly.Memory.prototype.grow refuses beyond the current size + 100 MB, as a browser short of
  // memory does (the glue catches the RangeError; malloc returns null; operator new throws).
  const grow = WebAssembly.Memory.prototype.grow;
  const limit = vl.memoryStats().heapBytes + 100 * MB;
  // The freed copies of the previous test left room in the heap: take it, then ask for more.
  const filler = [];
  WebAssembly.Memory.prototype.grow = function (pages) {
    if (this.buffer.byteLength + pages * 65536 > limit) throw new RangeError('WebAssembly.Memory.grow(): Maximum memory size exceeded');
    return grow.call(this, pages);
  };
  try {
    assert.throws(() => {
      for (;;) filler.push(vl.Model.fromSafetensors(ckpt.bytes, JSON.stringify(ckpt.config)));
    }, (e) => {
      figures.outOfMemoryMessage = e.message;
      assert.match(e.message, /^out_of_memory: the model needs about 331 MB for its weights \(86567656 parameters as float32\); the engine's memory could not grow past \d+ MB: this browser allows at most that much here \(the engine itself may grow to 4096 MB\)/);
      return true;
    });
    assert.throws(() => model.save('f32'), /^Error: out_of_memory: the engine ran out of memory; /);
  } finally {
    WebAssembly.Memory.prototype.grow = grow;
    for (const m of filler) m.delete();
  }
  // The module did not abort: it loads and runs a model again.
  const small = fixtureModel(vl, 'gray');
  try {
    const info = small.info();
    const s = small.prepare(new Float32Array(info.channels * info.imageH * info.imageW));
    assert.equal(s.predict(1).length, 1);
    s.delete();
  } finally {
    small.delete();
  }
  const y = model.prepare(x);
  assert.deepEqual(Array.from(y.logits()), Array.from(input.logits()));
  y.delete();
});
