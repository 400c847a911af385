// heads.test.mjs — heads switched off by hand through the API: Input.withHeadMask gives the
// masked model's prediction and maps, equal to `vitlens explain --heads-off` for the same image;
// Input.pruningCurve equals `vitlens heads MODEL IMAGE --curve …` (rankings and orders by hand);
// the original input is unchanged, and bad masks and options are refused with their reasons.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { fixtureModel, loadVitlens, maxRelError, nativeCli, readNpy, repo, tmpDir, toRGBA } from './support.mjs';

const scenesModel = path.join(repo, 'models/vitlens-scenes.vitl');
const scene = path.join(repo, 'models/gallery/scene_0000.png');
const nonsquareInput = path.join(repo, 'tests/fixtures/engine/nonsquare/input.npy');

function preparePng(vl, model, file) {
  const img = vl.decodeImage(new Uint8Array(fs.readFileSync(file)));
  return model.prepareRGBA(toRGBA(img), img.width, img.height);
}

// The mask (1 on, 0 off) of "B.H,B.*" for `heads` heads per block, and the flat indices in order.
function maskOf(text, depth, heads) {
  const flat = [];
  for (const entry of text.split(',')) {
    const [b, h] = entry.split('.');
    if (h === '*') for (let k = 0; k < heads; k++) flat.push(Number(b) * heads + k);
    else flat.push(Number(b) * heads + Number(h));
  }
  const mask = new Array(depth * heads).fill(1);
  for (const f of flat) mask[f] = 0;
  return { mask, flat };
}

function cliJson(...args) {
  return JSON.parse(nativeCli(...args));
}

test('a masked input explains as `vitlens explain --heads-off`, and leaves the original unchanged', async () => {
  const vl = await loadVitlens();
  // The nonsquare fixture (3 blocks × 4 heads, 3 × 5 patches) as a .vitl file for the CLI.
  const dir = tmpDir();
  const engine = path.join(repo, 'tests/fixtures/engine/nonsquare');
  const nonsquare = path.join(dir, 'nonsquare.vitl');
  nativeCli('import', path.join(engine, 'model_timm.safetensors'), '--config', path.join(engine, 'config.json'), '-o', nonsquare);
  for (const [name, file, prepare, inputArgs, off] of [
    ['shipped model', scenesModel, (m) => preparePng(vl, m, scene), [scene], '5.*,0.1'],
    ['nonsquare 3×4 heads', nonsquare, (m) => m.prepare(new Float32Array(readNpy(nonsquareInput).data)), ['--input', nonsquareInput], '0.1,1.*,2.2'],
  ]) {
    const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(file)));
    const info = model.info();
    const x = prepare(model);
    const { mask, flat } = maskOf(off, info.depth, info.heads);
    const before = x.explain('transformer-attribution', {});
    const masked = x.withHeadMask(mask);
    try {
      assert.deepEqual(Array.from(masked.headMask()), mask, name);
      assert.deepEqual(Array.from(x.headMask()), new Array(info.depth * info.heads).fill(1), `${name}: the original has every head on`);
      for (const method of ['transformer-attribution', 'rollout', 'saliency', 'attnlrp', 'attattr']) {
        const ours = masked.explain(method, {});
        const cli = cliJson('explain', file, ...inputArgs, '--method', method, '--heads-off', off, '--json');
        assert.deepEqual(cli.heads_off, flat.map((f) => `${Math.floor(f / info.heads)}.${f % info.heads}`), name);
        assert.equal(ours.target, cli.target, `${name}, ${method}: the masked model's class`);
        const map = vl.methods().find((m) => m.name === method).nativePixels ? ours.pixelMap : ours.tokenMap;
        // wasm and native differ in their GEMM kernels' rounding: 1e-5, as methods.test.mjs allows.
        const err = maxRelError(map, cli.map);
        assert.ok(err < 1e-5, `${name}, ${method}: ${err} against the CLI`);
      }
      // The unmasked input explains as before, and differs from the masked one.
      const after = x.explain('transformer-attribution', {});
      assert.deepEqual(Array.from(after.tokenMap), Array.from(before.tokenMap), `${name}: the original is unchanged`);
      assert.ok(maxRelError(masked.explain('transformer-attribution', { target: before.target }).tokenMap, before.tokenMap) > 1e-3, `${name}: the mask matters`);
      // Its prediction is the masked model's: the last point of the curve over the same heads.
      const top = masked.predict(1)[0];
      const curve = x.pruningCurve({ order: maskOf(off, info.depth, info.heads).flat, target: top.class });
      assert.ok(Math.abs(curve.prob.at(-1) - top.prob) < 1e-6, `${name}: p ${top.prob} vs the curve's ${curve.prob.at(-1)}`);
      assert.equal(curve.top.at(-1), top.class);
    } finally {
      masked.delete();
      x.delete();
      model.delete();
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('pruningCurve equals `vitlens heads MODEL IMAGE --curve`, for rankings and for an order by hand', async () => {
  const vl = await loadVitlens();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  const info = model.info();
  const x = preparePng(vl, model, scene);
  try {
    const cli = cliJson('heads', scenesModel, scene, '--curve', 'attattr,attention-confidence', '--json');
    const byHand = cliJson('heads', scenesModel, scene, '--curve', '3.1,0.*,5.2', '--target', '4', '--json');
    const scores = x.headScores({ steps: 20 });
    const attattr = x.explain('attattr', {}).attattr;
    for (const [ranking, cliCurve, grid] of [['attattr', cli.curves[0], scores.attattr], ['attention-confidence', cli.curves[1], scores.attention]]) {
      for (const options of [{ ranking }, { ranking, attattr }]) {
        const ours = x.pruningCurve(options);
        assert.equal(ours.ranking, ranking);
        assert.equal(ours.target, cli.target);
        assert.equal(ours.original, cli.prediction);
        assert.deepEqual(ours.order, cliCurve.flat, `${ranking}: the order`);
        assert.deepEqual(ours.heads, cliCurve.order);
        assert.equal(ours.prob.length, info.depth * info.heads + 1);
        ours.prob.forEach((p, k) => assert.ok(Math.abs(p - cliCurve.prob[k]) < 1e-6, `${ranking}, k = ${k}: ${p} vs ${cliCurve.prob[k]}`));
        assert.deepEqual(ours.top, cliCurve.top);
        assert.equal(ours.firstChange, cliCurve.first_change);
        // The scores ranked are headScores' (core's head_scores_add), lowest first.
        assert.deepEqual(ours.scores, grid);
        const flat = grid.flat();
        for (let k = 1; k < ours.order.length; k++) assert.ok(flat[ours.order[k - 1]] <= flat[ours.order[k]], `${ranking}: ascending at ${k}`);
      }
    }
    const order = maskOf('3.1,0.*,5.2', info.depth, info.heads).flat;
    const ours = x.pruningCurve({ order, target: 4 });
    assert.equal(ours.ranking, 'order');
    assert.deepEqual(ours.heads, byHand.curves[0].order);
    ours.prob.forEach((p, k) => assert.ok(Math.abs(p - byHand.curves[0].prob[k]) < 1e-6, `by hand, k = ${k}`));
    ours.logit.forEach((z, k) => assert.ok(Math.abs(z - byHand.curves[0].logit[k]) < 1e-5, `by hand, logit k = ${k}`));
    // count: the first heads only; the same points.
    const short = x.pruningCurve({ ranking: 'attention-confidence', count: 3 });
    assert.equal(short.prob.length, 4);
    assert.deepEqual(short.prob, x.pruningCurve({ ranking: 'attention-confidence' }).prob.slice(0, 4));
  } finally {
    x.delete();
    model.delete();
  }
});

test('bad masks and options are refused with their reasons', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'nonsquare');
  const x = model.prepare(new Float32Array(readNpy(nonsquareInput).data));
  const masked = x.withHeadMask([1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
  try {
    assert.throws(() => x.withHeadMask([1, 0, 1]), /^Error: bad_argument: the head mask must be 3 × 4 = 12 numbers/);
    assert.throws(() => x.withHeadMask(new Array(12).fill(0.5)), /^Error: bad_argument: the head mask must be .*entry 0 is not/);
    assert.throws(() => x.withHeadMask('0.1'), /^Error: bad_argument: the head mask must be/);
    const all = x.withHeadMask(null);
    assert.deepEqual(Array.from(all.explain('rollout', {}).tokenMap), Array.from(x.explain('rollout', {}).tokenMap), 'null: every head on');
    all.delete();
    assert.throws(() => x.pruningCurve({}), /^Error: bad_argument: pruningCurve needs either order or ranking/);
    assert.throws(() => x.pruningCurve({ order: [0], ranking: 'attattr' }), /^Error: bad_argument: pruningCurve needs either/);
    assert.throws(() => x.pruningCurve({ order: [0, 12] }), /^Error: bad_argument: option order: entry 1 is not a head index 0…11/);
    assert.throws(() => x.pruningCurve({ order: [3, 3] }), /^Error: bad_argument: the pruning order: head 0.3 is named twice/);
    assert.throws(() => x.pruningCurve({ ranking: 'loudest' }), /^Error: bad_argument: unknown head ranking 'loudest'/);
    assert.throws(() => x.pruningCurve({ order: [1], target: 5 }), /^Error: bad_argument: target class 5 is out of range/);
    assert.throws(() => masked.pruningCurve({ ranking: 'attention-confidence' }), /^Error: bad_argument: the ranking needs the forward pass with every head on/);
    assert.throws(() => masked.perturbation(new Float32Array(24 * 40), {}), /^Error: bad_argument: the perturbation test runs the model with every head on/);
    // Progress: the attattr ranking's matrices, then the curve, up to 1; false cancels.
    const fractions = [];
    x.pruningCurve({ ranking: 'attattr', steps: 3, onProgress: (f) => { fractions.push(f); } });
    assert.ok(fractions.length >= 12 && fractions.every((f, k) => k === 0 || f >= fractions[k - 1]), `ascending: ${fractions}`);
    assert.ok(Math.abs(fractions.at(-1) - 1) < 1e-12 && fractions.some((f) => Math.abs(f - 0.7) < 1e-12), `${fractions}`);
    // (steps 2: matrices the input does not keep yet, whose first unit's report stops them)
    assert.throws(() => x.pruningCurve({ ranking: 'attattr', steps: 2, onProgress: () => false }), /^Error: cancelled: /);
    assert.throws(() => x.pruningCurve({ order: [1, 2], onProgress: () => false }), /^Error: cancelled: the pruning curve was cancelled/);
    // The input keeps what its attattr passes computed (ExplainState::attattr): a ranking after an
    // attattr explanation of the same class and steps reports only the curve's progress (0.7 on),
    // and a stopped ranking goes on from the units it finished, with the same curve.
    const fresh = (f) => {
      const v = model.prepare(new Float32Array(readNpy(nonsquareInput).data));
      try {
        return f(v);
      } finally {
        v.delete();
      }
    };
    const y = model.prepare(new Float32Array(readNpy(nonsquareInput).data));
    try {
      const target = y.predict(1)[0].class;
      const whole = fresh((v) => v.pruningCurve({ ranking: 'attattr', steps: 3, target }));
      y.explain('attattr', { steps: 3, target });
      const after = [];
      assert.deepEqual(y.pruningCurve({ ranking: 'attattr', steps: 3, target, onProgress: (f) => { after.push(f); } }), whole);
      assert.ok(after.length > 0 && after.every((f) => f >= 0.7 - 1e-12), `only the curve's progress: ${after}`);
      const z = model.prepare(new Float32Array(readNpy(nonsquareInput).data));
      try {
        let calls = 0;
        assert.throws(() => z.pruningCurve({ ranking: 'attattr', steps: 3, target, onProgress: () => ++calls < 2 }), /^Error: cancelled: /);
        const resumed = [];
        assert.deepEqual(z.pruningCurve({ ranking: 'attattr', steps: 3, target, onProgress: (f) => { resumed.push(f); } }), whole);
        // two units were done: the reports of the first two are not made again
        assert.deepEqual(resumed, fractions.slice(2), `went on from the units done: ${resumed} (from scratch: ${fractions})`);
      } finally {
        z.delete();
      }
    } finally {
      y.delete();
    }
    // The input keeps its last curves' steps (core's PruningKept): a stopped curve goes on from the
    // step it was in, a head added to the order costs one step, heads dropped from its end none;
    // the same curves as a new input's.
    fresh((v) => {
      const order = [4, 9, 2, 7];
      const curve = (o) => fresh((u) => u.pruningCurve({ order: o }));
      let calls = 0;
      assert.throws(() => v.pruningCurve({ order, onProgress: () => ++calls < 2 }), /^Error: cancelled: the pruning curve was cancelled/);
      const reports = [];
      const onProgress = (f) => { reports.push(f); };
      assert.deepEqual(v.pruningCurve({ order, onProgress }), curve(order));
      assert.deepEqual(reports, [3 / 4, 1]);
      reports.length = 0;
      assert.deepEqual(v.pruningCurve({ order: [...order, 11], onProgress }), curve([...order, 11]));
      assert.deepEqual(reports, [1]);
      reports.length = 0;
      assert.deepEqual(v.pruningCurve({ order: order.slice(0, 2), onProgress }), curve(order.slice(0, 2)));
      assert.deepEqual(reports, []);
    });
    assert.throws(() => x.pruningCurve({ order: [1], onProgress: 3 }), /^Error: bad_argument: option onProgress must be a function/);
    // An order on a masked input starts from every head on, as on the original.
    assert.deepEqual(masked.pruningCurve({ order: [1, 11] }), x.pruningCurve({ order: [1, 11] }));
    // A masked input's attention is 0 for the heads off, and the others' are the masked model's.
    const attn = masked.attention();
    assert.ok(attn[0][1].every((v) => v === 0) && attn[2][3].every((v) => v === 0));
    assert.ok(attn[1][0].some((v) => v !== 0));
  } finally {
    masked.delete();
    x.delete();
    model.delete();
  }
});
