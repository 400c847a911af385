// long_methods.test.mjs — the long methods through the wasm module's explain(): integrated-gradients
// and smoothgrad against the float64 reference fixtures (tests/fixtures/gradient/), onProgress
// reports rising to 1, and cancellation (onProgress returns false) as an Error "cancelled: …"
// after which the model keeps working.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { loadVitlens, maxRelError, readNpy, repo } from './support.mjs';

const engine = path.join(repo, 'tests/fixtures/engine');
const gradient = path.join(repo, 'tests/fixtures/gradient');
const TOL = 1e-4;  // max |wasm − ref| / max |ref| against the float64 reference

function loadCase(vl, shape) {
  const dir = path.join(engine, shape);
  const model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model_timm.safetensors'))),
    fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const input = new Float32Array(readNpy(path.join(dir, 'input.npy')).data);
  const index = JSON.parse(fs.readFileSync(path.join(gradient, shape, 'index.json'), 'utf8'));
  const meta = JSON.parse(fs.readFileSync(path.join(gradient, shape, 'meta.json'), 'utf8'));
  const baseline = new Float32Array(readNpy(path.join(gradient, shape, 'baseline.npy')).data);
  return { model, input, index, meta, baseline, dir: path.join(gradient, shape) };
}

function jsOptions(c, o) {
  const out = { target: c.meta.target };
  for (const k of ['steps', 'quadrature', 'inner', 'samples', 'noise', 'seed']) if (o[k] !== undefined) out[k] = o[k];
  if (o.baseline === 'image') out.baseline = c.baseline;
  return out;
}

test('integrated-gradients reports progress up to 1 and matches the reference', async () => {
  const vl = await loadVitlens();
  const c = loadCase(vl, 'nonsquare');
  try {
    c.x = c.model.prepare(c.input);
    const e = c.index.find((v) => v.variant === 'ig-gauss-legendre-black');
    const seen = [];
    const ex = c.x.explain('integrated-gradients', { ...jsOptions(c, e.options), onProgress: (f) => { seen.push(f); return true; } });
    assert.equal(seen.length, e.options.steps);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `progress not rising: ${seen}`);
    assert.equal(seen.at(-1), 1);
    const ref = readNpy(path.join(c.dir, e.file));
    assert.ok(maxRelError(ex.pixelMap, ref.data) <= TOL);
    for (const [ours, theirs] of [['attributionSum', 'attribution_sum'], ['fInput', 'f_input'], ['fBaseline', 'f_baseline'], ['gap', 'gap']])
      assert.ok(Math.abs(ex.completeness[ours] - e.completeness[theirs]) <= TOL * Math.max(1, Math.abs(e.completeness[theirs])), ours);
  } finally {
    c.x?.delete();
    c.model.delete();
  }
});

test('every gradient variant matches the float64 reference in wasm', async () => {
  const vl = await loadVitlens();
  for (const shape of ['nonsquare', 'gray']) {
    const c = loadCase(vl, shape);
    try {
      c.x = c.model.prepare(c.input);
      for (const e of c.index) {
        const ex = c.x.explain(e.method, jsOptions(c, e.options));
        const err = maxRelError(ex.pixelMap, readNpy(path.join(c.dir, e.file)).data);
        assert.ok(err <= TOL, `${shape} ${e.variant}: ${err}`);
        assert.equal(ex.completeness !== undefined, e.completeness !== undefined, `${shape} ${e.variant}`);
      }
    } finally {
      c.x?.delete();
    c.model.delete();
    }
  }
});

test('returning false from onProgress cancels with "cancelled:" and the model still works', async () => {
  const vl = await loadVitlens();
  const c = loadCase(vl, 'gray');
  try {
    c.x = c.model.prepare(c.input);
    for (const [method, extra] of [['integrated-gradients', { steps: 10 }],
      ['smoothgrad', { inner: 'integrated-gradients', samples: 3, steps: 4 }]]) {
      let calls = 0;
      assert.throws(() => c.x.explain(method, { ...extra, onProgress: () => ++calls < 3 }),
        (e) => e instanceof Error && e.message.startsWith('cancelled:'));
      assert.equal(calls, 3, `${method}: progress after cancelling`);
      const seen = [];
      const ex = c.x.explain(method, { ...extra, onProgress: (f) => { seen.push(f); } });
      assert.equal(seen.at(-1), 1);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1]);
      assert.ok(ex.pixelMap.some((v) => v !== 0));
    }
    const top = c.x.predict(1);
    assert.equal(top[0].class, c.meta.target);
    const sal = c.x.explain('saliency', {});
    const e = c.index.find((v) => v.variant === 'saliency');
    assert.ok(maxRelError(sal.pixelMap, readNpy(path.join(c.dir, e.file)).data) <= TOL);
  } finally {
    c.x?.delete();
    c.model.delete();
  }
});
