// methods.test.mjs — the wasm module's explain() and methods(): every method against the float64
// reference fixtures, native and wasm maps within 1e-5 of each other (the CLI's --save-map on the
// same model and input), the intermediates, and option errors as JS Errors.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { fixtureModel, loadVitlens, maxRelError, nativeCli, readNpy, repo, tmpDir } from './support.mjs';

const engine = path.join(repo, 'tests/fixtures/engine');
const methods = path.join(repo, 'tests/fixtures/methods');


// A fixture's method and options (the reference's names) as a method spec "NAME:key=value…".
function specFromFixture(method, o) {
  const keys = { fusion: 'head-fusion', discard_ratio: 'discard-ratio', start_layer: 'start-layer', block: 'block',
    weight: 'weight', linear_rule: 'linear-rule', add_rule: 'add-rule' };
  let spec = method;
  for (const [k, v] of Object.entries(o)) {
    assert.ok(keys[k], `fixture option ${k}`);
    spec += `:${keys[k]}=${v}`;
  }
  return spec;
}

test('methods() lists the registry', async () => {
  const vl = await loadVitlens();
  const list = vl.methods();
  assert.deepEqual(list.map((m) => m.name), ['raw-attention', 'rollout', 'attn-gradcam', 'grad-rollout',
    'transformer-attribution', 'partial-lrp', 'lrp', 'attnlrp', 'attattr', 'norm-based', 'saliency',
    'grad-x-input', 'integrated-gradients', 'smoothgrad']);
  const ig = list.find((m) => m.name === 'integrated-gradients');
  assert.equal(ig.longRunning, true);
  assert.ok(ig.options.includes('quadrature') && ig.options.includes('steps'));
  const rollout = list.find((m) => m.name === 'rollout');
  assert.ok(rollout.options.includes('headFusion'));
  assert.equal(rollout.classSpecific, false);
  assert.equal(list.find((m) => m.name === 'lrp').nativePixels, true);
});

for (const shape of ['nonsquare', 'gray']) {
  test(`${shape}: explain() matches the float64 reference and the native CLI`, async () => {
    const vl = await loadVitlens();
    const model = fixtureModel(vl, shape);
    const input = new Float32Array(readNpy(path.join(engine, shape, 'input.npy')).data);
    const index = JSON.parse(fs.readFileSync(path.join(methods, shape, 'index.json'), 'utf8'));
    const tmp = tmpDir();
    let x = null;
    try {
      x = model.prepare(input);
      const modelPath = path.join(tmp, 'm.vitl');
      nativeCli('import', path.join(engine, shape, 'model_timm.safetensors'), '--config',
        path.join(engine, shape, 'config.json'), '-o', modelPath);
      for (const e of index) {
        const tokens = e.method === 'attnlrp-tokens';
        const method = tokens ? 'attnlrp' : e.method;
        const spec = specFromFixture(method, e.options);
        const ex = x.explain(spec, { target: e.target });
        const pixels = (method === 'lrp' || method === 'attnlrp') && !tokens;
        const ours = pixels ? ex.pixelMap : ex.tokenMap;
        assert.deepEqual(pixels ? [ex.height, ex.width] : [ex.gridH, ex.gridW], e.shape);
        const ref = readNpy(path.join(methods, shape, e.file)).data;
        assert.ok(maxRelError(ours, ref) <= 1e-4, `${e.file} (${spec}): ${maxRelError(ours, ref)}`);
        if (tokens) continue;
        // The same map from the native CLI given the same spec (raw .npy), within 1e-5.
        nativeCli('explain', modelPath, '--input', path.join(engine, shape, 'input.npy'), '--method', spec,
          '--target', String(e.target), '--save-map', path.join(tmp, 'map.npy'));
        const native = readNpy(path.join(tmp, 'map.npy')).data;
        assert.ok(maxRelError(ours, native) <= 1e-5, `${e.file} (${spec}): wasm vs native ${maxRelError(ours, native)}`);
      }
    } finally {
      x?.delete();
      model.delete();
      fs.rmSync(tmp, { recursive: true });
    }
  });
}

test('explain(): intermediates, conservation and errors', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'nonsquare');
  let x = null;
  try {
    // The model holds no input: explain and the other per-input queries are methods of an Input.
    assert.equal(model.explain, undefined);
    x = model.prepare(new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data));
    const ex = x.explain('transformer-attribution', { intermediates: true });
    assert.equal(ex.intermediates.tokens, 16);
    assert.equal(ex.intermediates.blocks.length, 3);
    for (const b of ex.intermediates.blocks) {
      for (const key of ['attn', 'grad', 'relevance', 'step', 'accumulated']) assert.equal(b[key].length, 256, key);
    }
    // Every array of the output views one ArrayBuffer (one allocation; .d.ts), side by side: none
    // overlaps another.
    const views = ex.intermediates.blocks.flatMap((b) =>
      [b.attn, b.grad, b.relevance, b.step, b.accumulated, ...b.relevanceHeads, ...b.productHeads]);
    assert.ok(views.every((v) => v.buffer === views[0].buffer), 'one buffer');
    const spans = views.map((v) => [v.byteOffset, v.byteOffset + v.byteLength]).sort((a, b) => a[0] - b[0]);
    spans.forEach((s, i) => assert.ok(i === 0 || s[0] >= spans[i - 1][1], 'no two arrays overlap'));
    assert.equal(spans.at(-1)[1], views[0].buffer.byteLength, 'nothing else in the buffer');
    // Per-head R_A: its head mean is `relevance`, and with each head's ∇A it rebuilds the block's
    // factor I + E_h[(∇A_h ⊙ R_A,h)⁺] (Chefer et al. 2021, Eq. 13–14).
    const heads = model.info().heads;
    const grads = x.attentionGrads(ex.target);
    ex.intermediates.blocks.forEach((b, l) => {
      assert.equal(b.relevanceHeads.length, heads, `block ${l}: R_A per head`);
      for (let i = 0; i < 256; i++) {
        let mean = 0;
        let bar = 0;
        for (let h = 0; h < heads; h++) {
          mean += b.relevanceHeads[h][i] / heads;
          bar += Math.max(0, b.relevanceHeads[h][i] * grads[l][h][i]) / heads;
        }
        const eye = i % 17 === 0 ? 1 : 0;
        assert.ok(Math.abs(mean - b.relevance[i]) <= 1e-6 * (1 + Math.abs(b.relevance[i])), `block ${l}: mean of R_A heads`);
        assert.ok(Math.abs(eye + bar - b.step[i]) <= 1e-5 * (1 + Math.abs(b.step[i])), `block ${l}: I + Ā at ${i}: ${eye + bar} vs ${b.step[i]}`);
      }
    });
    assert.deepEqual(x.explain('grad-rollout', { intermediates: true }).intermediates.blocks[0].relevanceHeads, []);
    // attentionGrads reads the gradients the methods keep (one backward pass per class): a class
    // explained in between does not change another class's, which equal a new input's.
    const other = (ex.target + 1) % model.info().classes;
    const flat = (g) => g.flatMap((b) => b.flatMap((a) => Array.from(a)));
    x.explain('saliency', { target: other });
    assert.deepEqual(flat(x.attentionGrads(ex.target)), flat(grads));
    const y = model.prepare(new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data));
    try {
      assert.deepEqual(flat(x.attentionGrads(other)), flat(y.attentionGrads(other)));
    } finally {
      y.delete();
    }
    // transformer-attribution's pass stops at block 0's R_A (its attention core): neither block 0's
    // input nor the tokens are reached; lrp resumes the same pass to the pixels.
    assert.equal(ex.relevanceSums.tokens, null);
    assert.equal(ex.relevanceSums.blockInputs[0], null);
    assert.ok(Math.abs(ex.relevanceSums.blockInputs[1] - 1) < 1e-6);
    assert.equal(ex.conservation.at(-1).layer, 'blocks.0.attn.q_kT');
    const whole = x.explain('lrp', { target: ex.target });
    assert.ok(Math.abs(whole.relevanceSums.tokens - 1) < 1e-6);
    assert.deepEqual(whole.conservation.slice(0, ex.conservation.length), ex.conservation);
    assert.equal(ex.conservation[0].layer, 'head');
    // The report's layers (made in objects.js from one string and one Float64Array): plain
    // objects, the names in propagation order from the head down, the first layer's sum out the
    // seed's, and fc2's sum in the activation's sum out (the two share an end).
    for (const l of ex.conservation) {
      assert.deepEqual(Object.keys(l), ['layer', 'relevanceOut', 'relevanceIn']);
      assert.equal(typeof l.layer, 'string');
      assert.ok(l.layer.length > 0 && !l.layer.includes('\n'));
      assert.ok(Number.isFinite(l.relevanceOut) && Number.isFinite(l.relevanceIn));
    }
    assert.equal(ex.conservation[0].relevanceOut, ex.relevanceSums.seed);
    assert.deepEqual(ex.conservation.slice(1, 5).map((l) => l.layer), ['pool', 'norm', 'blocks.2.add2', 'blocks.2.mlp.fc2']);
    const fc2 = ex.conservation.findIndex((l) => l.layer === 'blocks.1.mlp.fc2');
    assert.equal(ex.conservation[fc2 + 1].relevanceOut, ex.conservation[fc2].relevanceIn);
    assert.equal(x.explain('rollout', {}).conservation.length, 0);
    assert.equal(x.explain('rollout', {}).intermediates, undefined);
    assert.throws(() => x.explain('nope', {}), /^Error: bad_argument: unknown method 'nope'/);
    assert.throws(() => x.explain('rollout', { startLayer: 3 }), /start-layer 3 is out of range/);
    assert.throws(() => x.explain('rollout', { headFusion: 'median' }), /head-fusion must be one of mean, max, min/);
    assert.throws(() => x.explain('lrp', { target: 9 }), /target 9 is out of range/);
    assert.throws(() => x.explain('lrp', { target: 'x' }), /target needs an integer, got 'x'/);
    // Method specs: the spec's options and the options object combine; a key given both ways is refused.
    const spec = x.explain('transformer-attribution:start-layer=1:weight=attn', { target: 0 });
    const apart = x.explain('transformer-attribution', { target: 0, startLayer: 1, weight: 'attn' });
    assert.equal(spec.method, 'transformer-attribution');
    assert.deepEqual(spec.tokenMap, apart.tokenMap);
    assert.deepEqual(x.explain('transformer-attribution:no-grad', {}).tokenMap,
      x.explain('transformer-attribution', { noGrad: true }).tokenMap);
    assert.deepEqual(x.explain('transformer-attribution', { noGrad: true }).tokenMap,
      x.explain('transformer-attribution', { weight: 'none' }).tokenMap);
    assert.throws(() => x.explain('transformer-attribution:start-layer=1', { startLayer: 1 }),
      /^Error: bad_argument: start-layer is given twice: in the method spec 'transformer-attribution:start-layer=1' and apart from it/);
    assert.throws(() => x.explain('transformer-attribution:no-grad', { weight: 'attn' }), /weight is given twice/);
    assert.throws(() => x.explain('lrp:no-grad', {}), /weight does not apply to lrp/);
    assert.throws(() => x.explain('rollout:head-fusion', {}), /head-fusion needs a value/);
    assert.throws(() => x.explain('transformer-attribution', { noGrad: false }), /no-grad stands for weight=none/);
    // weight "attn": each block's factor is I + E_h[(A_h ⊙ R_A,h)⁺] (the paper's text, ∇A replaced by A).
    const attnEx = x.explain('transformer-attribution:weight=attn', { intermediates: true });
    const attention = x.attention();
    attnEx.intermediates.blocks.forEach((b, l) => {
      for (let i = 0; i < 256; i++) {
        let bar = 0;
        for (let h = 0; h < heads; h++) bar += Math.max(0, b.relevanceHeads[h][i] * attention[l][h][i]) / heads;
        const eye = i % 17 === 0 ? 1 : 0;
        assert.ok(Math.abs(eye + bar - b.step[i]) <= 1e-5 * (1 + Math.abs(b.step[i])), `attn, block ${l}: I + Ā at ${i}`);
      }
    });
    // A method option takes a spec: smoothgrad over rollout with max fusion, no noise = that map.
    const smooth = x.explain('smoothgrad', { inner: 'rollout:head-fusion=max', samples: 2, noise: 0 });
    assert.ok(maxRelError(smooth.tokenMap, x.explain('rollout:head-fusion=max', {}).tokenMap) <= 1e-6);
    assert.deepEqual(x.explain('smoothgrad:inner=(rollout:head-fusion=max):samples=2:noise=0', {}).tokenMap, smooth.tokenMap);
  } finally {
    x?.delete();
    model.delete();
  }
});

test('explain(): the per-head terms of Ā_b (productHeads) through the API', async () => {
  // grad-rollout's (∇A_h ⊙ A_h)⁺ is exact against the per-head A and ∇A (one float rounding of a
  // product that is exact in double); transformer-attribution's (W_h ⊙ R_A,h)⁺ is formed by core
  // from its double R_A, of which relevanceHeads is the float copy: within 1.5e-7 relative. Their
  // head mean + I is the step, within 2.5e-7 relative (two float roundings).
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'nonsquare');
  let x = null;
  try {
    x = model.prepare(new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data));
    const heads = model.info().heads;
    const attention = x.attention();
    const cases = [
      ['grad-rollout', (ex, l, h, i) => attention[l][h][i], 0],
      ['transformer-attribution', (ex, l, h, i) => ex.intermediates.blocks[l].relevanceHeads[h][i], 1.5e-7],
      ['transformer-attribution:weight=attn', (ex, l, h, i) => ex.intermediates.blocks[l].relevanceHeads[h][i], 1.5e-7],
    ];
    for (const [spec, factor, tol] of cases) {
      const ex = x.explain(spec, { intermediates: true });
      const grads = x.attentionGrads(ex.target);
      const weight = spec.endsWith('weight=attn') ? attention : grads;
      let positive = 0;
      ex.intermediates.blocks.forEach((b, l) => {
        assert.equal(b.productHeads.length, heads, `${spec}, block ${l}: one term per head`);
        for (let i = 0; i < 256; i++) {
          let bar = 0;
          for (let h = 0; h < heads; h++) {
            const want = Math.fround(Math.max(0, weight[l][h][i] * factor(ex, l, h, i)));
            const got = b.productHeads[h][i];
            assert.ok(Math.abs(got - want) <= tol * want, `${spec}, block ${l}, head ${h}, entry ${i}: ${got} vs ${want}`);
            bar += got / heads;
            if (got > 0) positive++;
          }
          const step = (i % 17 === 0 ? 1 : 0) + bar;
          assert.ok(Math.abs(step - b.step[i]) <= 2.5e-7 * step, `${spec}, block ${l}: I + mean_h at ${i}: ${step} vs ${b.step[i]}`);
        }
      });
      assert.ok(positive > 0, `${spec}: some terms are positive`);
    }
    // Only the blocks a method uses carry the terms; methods without them give none.
    const one = x.explain('transformer-attribution:block=1', { intermediates: true }).intermediates.blocks;
    assert.deepEqual(one.map((b) => b.productHeads.length), [0, heads, 0]);
    for (const method of ['rollout', 'partial-lrp']) {
      for (const b of x.explain(method, { intermediates: true }).intermediates.blocks) assert.deepEqual(b.productHeads, [], method);
    }
  } finally {
    x?.delete();
    model.delete();
  }
});
