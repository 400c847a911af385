// threads.test.mjs — the pthreads build vitlens-mt.js in node: it reports its threads; every
// method that splits work gives the same map with 1 thread, with all of them, and as the
// single-threaded vitlens.js; a module made with deferThreads starts its threads on request;
// a thread request beyond the pool is capped, not deadlocked;
// cancellation works from a threaded call; the speed-up of the threaded methods is printed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { deitTinyBytes, loadVitlens, loadVitlensMt, maxRelError, repo, variant, wasmDir } from './support.mjs';

const mt = await loadVitlensMt();
const skip = mt ? false : 'vitlens-mt.js is not in this build (VITLENS_WASM_THREADS=OFF)';
const modelFile = path.join(repo, 'models/vitlens-scenes.vitl');

// The methods that use threads, with options that keep them quick.
const threaded = [
  ['integrated-gradients', { steps: 16 }],
  ['smoothgrad', { samples: 8, inner: 'saliency' }],
  ['attattr', { steps: 8 }],
  ['norm-based', {}],
];

// An Input of the test model, or of `bytes` (the tests call it `model`: explain and delete are all
// they use). The Model handle is deleted at once: its weights live on while the input needs them.
function setup(vl, bytes = new Uint8Array(fs.readFileSync(modelFile))) {
  const model = vl.Model.fromBytes(bytes);
  const info = model.info();
  const x = new Float32Array(info.channels * info.imageH * info.imageW);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37) + 0.3 * Math.cos(i * 0.011);
  const input = model.prepare(x);
  model.delete();
  return input;
}

function medianMs(f, n = 5) {
  f();
  const t = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    f();
    t.push(performance.now() - t0);
  }
  return t.sort((a, b) => a - b)[n >> 1];
}

describe('vitlens-mt.js (pthreads)', { skip }, () => {
  after(() => mt?.PThread?.terminateAllThreads());

  test('threads() is min(8, the hardware threads); the single-threaded build says 1', async () => {
    assert.equal(mt.threads(), Math.min(8, os.cpus().length));
    assert.equal((await loadVitlens()).threads(), 1);
  });

  test('each threaded method gives the same map with 1 thread, with all, and as vitlens.js', async () => {
    const single = setup(await loadVitlens());
    const model = setup(mt);
    try {
      for (const [method, o] of threaded) {
        const one = model.explain(method, { ...o, threads: 1 });
        const all = model.explain(method, { ...o, threads: mt.threads() });
        const ref = single.explain(method, o);
        assert.deepEqual(Array.from(all.pixelMap), Array.from(one.pixelMap), `${method}: threads change the map`);
        assert.ok(maxRelError(all.pixelMap, ref.pixelMap) <= 1e-6, `${method}: vitlens-mt differs from vitlens`);
        assert.equal(all.target, ref.target);
      }
    } finally {
      single.delete();
      model.delete();
    }
  });

  // Both models split their work: the linear layers in row ranges, the attention heads in
  // groups (DeiT-tiny's 3 heads on 2 threads: each head's query rows in blocks), the relevance
  // rules of both likewise (parallel.h, grain_for), and DeiT-tiny's backward products in column
  // blocks (gemm.h, gemm_split_macs).
  const splitMethods = ['transformer-attribution', 'grad-rollout', 'lrp', 'lrp:linear-rule=separate',
    'partial-lrp', 'attnlrp', 'saliency', 'attn-gradcam'];
  for (const [shape, bytes] of [['DeiT-tiny shape', deitTinyBytes], ['the shipped model', null]]) {
    test(`work split over the pool (${shape}) gives bit-identical logits, maps and relevance sums`, async () => {
      const inputs = [setup(await loadVitlens(), ...(bytes ? [bytes()] : [])), setup(mt, ...(bytes ? [bytes()] : []))];
      try {
        const [single, multi] = inputs;
        assert.deepEqual(Array.from(multi.logits()), Array.from(single.logits()));
        for (const method of splitMethods) {
          const a = single.explain(method, {}), b = multi.explain(method, {});
          assert.deepEqual(Array.from(b.tokenMap), Array.from(a.tokenMap), `${method}: the split changes the map`);
          if (a.pixelMap) assert.deepEqual(Array.from(b.pixelMap), Array.from(a.pixelMap), `${method}: the pixel map`);
          if (a.conservation) assert.deepEqual(b.conservation, a.conservation, `${method}: the conservation report`);
        }
      } finally {
        for (const input of inputs) input.delete();
      }
    });
  }

  test('transformer-attribution with its two passes side by side (small model) gives vitlens.js\'s map', async () => {
    // Below the split threshold the float backward and the double forward run on a thread each
    // (methods_lrp.cpp); a second target then reuses the double forward and redoes the backward.
    const inputs = [setup(await loadVitlens()), setup(mt)];
    try {
      const [single, multi] = inputs;
      const classes = single.logits().length;
      for (const target of [undefined, classes - 1, 0]) {
        const o = target === undefined ? {} : { target };
        const a = single.explain('transformer-attribution', o), b = multi.explain('transformer-attribution', o);
        assert.equal(b.target, a.target);
        assert.deepEqual(Array.from(b.tokenMap), Array.from(a.tokenMap), `target ${a.target}: the maps differ`);
      }
    } finally {
      for (const input of inputs) input.delete();
    }
  });

  test('ROAD with its two orders\' imputations side by side gives vitlens.js\'s figures, and goes on after a cancel', async () => {
    // road_curves (road.cpp) runs a step's two sparse solves on a thread each, then the two
    // forward passes over the pool; progress is reported on the calling thread.
    const inputs = [setup(await loadVitlens()), setup(mt)];
    try {
      const [single, multi] = inputs;
      const map = single.explain('rollout', {}).pixelMap;
      const want = single.faithfulness(map, { road: true, black: false });
      let calls = 0;
      assert.throws(() => multi.faithfulness(map, { road: true, black: false, onProgress: () => ++calls < 7 }), /^Error: cancelled: /);
      assert.equal(calls, 7);
      const fractions = [];
      const got = multi.faithfulness(map, { road: true, black: false, onProgress: (f) => { fractions.push(f); } });
      assert.equal(fractions.length, 18);
      assert.deepEqual(got, want);
      assert.deepEqual(multi.faithfulness(map, { road: true, black: false, roadSeed: 2 }),
                       single.faithfulness(map, { road: true, black: false, roadSeed: 2 }));
    } finally {
      for (const input of inputs) input.delete();
    }
  });

  test('a module made with deferThreads runs on one thread until startThreads(), then on all, alike', async (t) => {
    // As the page starts it (web/worker.js, wasm/threads.js): no Web Worker loads the engine
    // at start-up; startThreads() loads them and starts the pool's threads.
    const { default: create } = await import(pathToFileURL(path.join(wasmDir, `vitlens-mt${variant}.js`)).href);
    const late = await create({ wasmBinary: fs.readFileSync(path.join(wasmDir, `vitlens-mt${variant}.wasm`)), deferThreads: true });
    const inputs = [setup(await loadVitlens()), setup(late)];
    try {
      const [single, multi] = inputs;
      assert.equal(mt.activeThreads(), mt.threads());
      assert.equal(late.threads(), mt.threads());
      assert.equal(late.activeThreads(), 1);
      // lrp and transformer-attribution split inside the layers, integrated gradients its steps.
      const methods = ['lrp', 'transformer-attribution', 'integrated-gradients'];
      const maps = (input) => methods.map((m) => Array.from(input.explain(m, m === 'integrated-gradients' ? { steps: 8 } : {}).tokenMap));
      const before = maps(multi);
      assert.deepEqual(before.slice(0, 2), maps(single).slice(0, 2), 'one thread before startThreads(): vitlens.js\'s maps');
      const started = late.startThreads();
      assert.equal(late.startThreads(), started, 'a second call answers the same promise');
      assert.equal(await started, late.threads());
      assert.equal(late.activeThreads(), late.threads());
      assert.deepEqual(maps(multi), before, 'the same maps with all threads after startThreads()');
      const ms = (m) => medianMs(() => multi.explain(m, { steps: 16 }), 5);
      t.diagnostic(`after startThreads(): integrated-gradients (16 steps) ${ms('integrated-gradients').toFixed(1)} ms ` +
        `with ${late.activeThreads()} threads`);
    } finally {
      for (const input of inputs) input.delete();
      late.PThread.terminateAllThreads();
    }
  });

  test('a request for more threads than the pool is capped and still completes, 20 times over', () => {
    const model = setup(mt);
    try {
      const ref = model.explain('integrated-gradients', { steps: 8, threads: 1 });
      for (let i = 0; i < 20; i++) {
        const ex = model.explain('integrated-gradients', { steps: 8, threads: 64 });
        assert.deepEqual(Array.from(ex.pixelMap), Array.from(ref.pixelMap));
      }
    } finally {
      model.delete();
    }
  });

  test('a threaded call can be cancelled from onProgress, and the model keeps working', () => {
    const model = setup(mt);
    try {
      let calls = 0;
      assert.throws(() => model.explain('integrated-gradients', { steps: 32, onProgress: () => ++calls < 3 }),
        (e) => e instanceof Error && e.message.startsWith('cancelled'));
      assert.equal(calls, 3);
      const ex = model.explain('norm-based', {});
      assert.ok(ex.pixelMap.every(Number.isFinite));
      // The JS callback stays on the calling thread, also when a wrapper runs methods on workers.
      for (const [method, o] of threaded) {
        const seen = [];
        const withProgress = model.explain(method, { ...o, onProgress: (f) => { seen.push(f); } });
        const without = model.explain(method, o);
        assert.ok(seen.length > 0 && seen.every((f) => f >= 0 && f <= 1), `${method}: progress ${seen}`);
        assert.deepEqual(Array.from(withProgress.pixelMap), Array.from(without.pixelMap), method);
      }
    } finally {
      model.delete();
    }
  });

  test('speed-up of the threaded methods (printed, not asserted: the machine is shared)', (t) => {
    const model = setup(mt);
    try {
      for (const [method, o] of threaded) {
        const one = medianMs(() => model.explain(method, { ...o, threads: 1 }));
        const all = medianMs(() => model.explain(method, { ...o, threads: mt.threads() }));
        t.diagnostic(`${method}: 1 thread ${one.toFixed(1)} ms, ${mt.threads()} threads ${all.toFixed(1)} ms (${(one / all).toFixed(2)}×)`);
      }
    } finally {
      model.delete();
    }
  });
});
