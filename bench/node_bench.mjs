// node_bench.mjs — median latency of the wasm build's forward pass in node and, with --methods,
// of every attribution method (one explain() call after a prediction, the page's path).
//
// usage: node --no-experimental-fetch bench/node_bench.mjs [MODEL.vitl | deit-tiny] [--iters N]
//                                                            [--methods[=a,b,...]]
// deit-tiny is generated natively first (vitlens import is not needed: the native CLI writes it).
// VITLENS_WASM_DIR and VITLENS_NATIVE_BUILD choose the builds (tests/node/support.mjs).
import fs from 'node:fs';

import { deitTinyBytes, loadVitlens } from '../tests/node/support.mjs';

const args = process.argv.slice(2);
const iters = Number(args.includes('--iters') ? args[args.indexOf('--iters') + 1] : 30);
const target = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--iters') || 'deit-tiny';

const bytes = target === 'deit-tiny' ? deitTinyBytes() : fs.readFileSync(target);

const vl = await loadVitlens();
const model = vl.Model.fromBytes(new Uint8Array(bytes));
const info = model.info();
const x = new Float32Array(info.channels * info.imageH * info.imageW);
for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);

function median(f) {
  // Warm up until V8 has tiered the hot functions up from its baseline compiler (a wasm function
  // running in Liftoff code stays there until it returns: a GEMM can run 2–3× slower).
  for (let i = 0, t0 = performance.now(); i < 3 || performance.now() - t0 < 1000; i++) f();
  const t = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    f();
    t.push(performance.now() - t0);
  }
  t.sort((a, b) => a - b);
  return { median: t[t.length >> 1], min: t[0], p90: t[Math.min(t.length - 1, Math.floor(t.length * 0.9))] };
}

// A new input and its prediction (builds before inputs became handles: predictTensor).
const predict = () => {
  if (!model.prepare) return { explain: (name, o) => model.explain(name, o), delete() {}, top: model.predictTensor(x, 1) };
  const input = model.prepare(x);
  input.predict(1);
  return input;
};
const fwd = median(() => predict().delete());
const out = { model: target, iters, forward_ms: fwd };
const methodsArg = args.find((a) => a === '--methods' || a.startsWith('--methods='));
if (methodsArg) {
  // --methods: every method; --methods=a,b: those.
  const names = methodsArg.includes('=') ? methodsArg.split('=')[1].split(',') : vl.methods().map((m) => m.name);
  // explain() reuses the input's forward pass, so each run prepares a new input first: the figure
  // is forward + the method, as a user waits for it.
  out.methods_ms = {};
  for (const name of names) {
    out.methods_ms[name] = median(() => {
      const input = predict();
      input.explain(name, {});
      input.delete();
    });
  }
  out.methods_ms['all listed, shared forward'] = median(() => {
    const input = predict();
    for (const name of names) input.explain(name, {});
    input.delete();
  });
}
console.log(JSON.stringify(out));
model.delete();
