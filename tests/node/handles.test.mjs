// handles.test.mjs — inputs as handles (Model.prepare → Input) and the queries the page draws,
// computed by core: several inputs alive at once give what each gives alone, in any call order;
// the perturbation curve equals what `vitlens eval` records for the same scene and map; the
// attribution tree and the head scores equal `vitlens tree` and `vitlens heads`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { fixtureModel, loadVitlens, nativeCli, readNpy, repo, tmpDir, toRGBA } from './support.mjs';

const engine = path.join(repo, 'tests/fixtures/engine');
const scenesModel = path.join(repo, 'models/vitlens-scenes.vitl');

function preparePng(vl, model, file) {
  const img = vl.decodeImage(new Uint8Array(fs.readFileSync(file)));
  return model.prepareRGBA(toRGBA(img), img.width, img.height);
}

// Everything an input answers, as plain arrays (for deepEqual).
function answers(x, queries) {
  const out = [];
  for (const [method, options] of queries) {
    const ex = x.explain(method, options);
    out.push([method, ex.target, Array.from(ex.pixelMap), Array.from(ex.tokenMap)]);
  }
  out.push(['logits', Array.from(x.logits())]);
  out.push(['attention', x.attention().map((b) => b.map((a) => Array.from(a)))]);
  out.push(['grads', x.attentionGrads(1).map((b) => b.map((a) => Array.from(a)))]);
  return out;
}

test('several inputs alive at once give the same maps as one at a time, in any order', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'nonsquare');
  const base = new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data);
  const tensors = [base, base.map((v, i) => v + 0.3 * Math.sin(i)), base.map((v) => -v)];
  // Methods that cache the backward or relevance pass per target, asked for two targets.
  const queries = [['transformer-attribution', { target: 0 }], ['lrp', { target: 2 }], ['saliency', {}],
    ['attnlrp', { target: 2 }], ['transformer-attribution', { target: 3 }], ['rollout', {}], ['lrp', { target: 0 }]];
  try {
    const alone = tensors.map((t) => {
      const x = model.prepare(t);
      try {
        return answers(x, queries);
      } finally {
        x.delete();
      }
    });
    // All three alive; the queries interleaved one at a time, round robin, in reverse input order.
    const inputs = tensors.map((t) => model.prepare(t));
    try {
      const together = inputs.map(() => []);
      for (let q = 0; q < queries.length; q++) {
        for (let k = inputs.length - 1; k >= 0; k--) {
          const ex = inputs[k].explain(...queries[q]);
          together[k].push([queries[q][0], ex.target, Array.from(ex.pixelMap), Array.from(ex.tokenMap)]);
        }
      }
      for (let k = 0; k < inputs.length; k++) {
        together[k].push(['logits', Array.from(inputs[k].logits())]);
        together[k].push(['attention', inputs[k].attention().map((b) => b.map((a) => Array.from(a)))]);
        together[k].push(['grads', inputs[k].attentionGrads(1).map((b) => b.map((a) => Array.from(a)))]);
        assert.deepEqual(together[k], alone[k], `input ${k}`);
      }
      // The inputs differ, so sharing state would have shown.
      assert.notDeepEqual(alone[0][0][2], alone[2][0][2]);
      // A new input of the same tensor while the others live: the same again.
      const again = model.prepare(tensors[1]);
      assert.deepEqual(answers(again, queries), alone[1]);
      again.delete();
    } finally {
      for (const x of inputs) x.delete();
    }
  } finally {
    model.delete();
  }
});

test('an input keeps working after its Model handle is deleted; a deleted input throws', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'gray');
  const x = model.prepare(new Float32Array(readNpy(path.join(engine, 'gray', 'input.npy')).data));
  const before = x.explain('rollout', {}).pixelMap;
  model.delete();
  assert.deepEqual(x.explain('rollout', {}).pixelMap, before);
  x.delete();
  assert.throws(() => x.logits(), /deleted/);
});

test('the perturbation test: core\'s order and counts, checked arguments', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'nonsquare');
  const x = model.prepare(new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data));
  try {
    const { imageH: h, imageW: w, channels: c, mean, std } = model.info();
    const n = h * w;
    const map = new Float32Array(n); // all equal: raster order in both directions (lower index first)
    const pos = x.perturbation(map, { positive: true, inputs: true });
    const neg = x.perturbation(map, { positive: false, inputs: true });
    assert.deepEqual(pos.removed, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => Math.floor((n * s) / 10)));
    assert.deepEqual(pos.fraction, [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
    assert.deepEqual(Array.from(pos.inputs[9]), Array.from(neg.inputs[9]), 'ties go lowest index first both ways');
    const fill = (ch) => Math.fround(Math.fround(-mean[ch]) / std[ch]);
    for (let s = 0; s < 10; s++) {
      const xs = pos.inputs[s];
      for (let ch = 0; ch < c; ch++) {
        // exactly the first removed[s] pixels in raster order are black
        assert.equal(xs[ch * n + pos.removed[s] - 1] === fill(ch) || s === 0, true);
        if (pos.removed[s] < n) assert.notEqual(xs[ch * n + pos.removed[s]], fill(ch));
      }
    }
    assert.equal(pos.top[0], pos.target);
    assert.equal(pos.prob[0], x.predict(5).find((p) => p.class === pos.target).prob);
    let auc = 0;
    for (let s = 0; s < 9; s++) auc += 0.1 * 0.5 * (pos.prob[s] + pos.prob[s + 1]);
    assert.ok(Math.abs(pos.aucProb - 100 * auc) < 1e-9);
    assert.throws(() => x.perturbation(new Float32Array(5), {}), /^Error: bad_shape: the map has 5 values/);
    assert.throws(() => x.perturbation(map, { target: 99 }), /bad_argument: target class 99/);
    // Progress after each of the 9 forward passes; returning false stops the test (the page
    // withdraws its live perturbation curve this way for a view's request: web/background.js).
    const fractions = [];
    const withProgress = x.perturbation(map, { positive: true, onProgress: (f) => { fractions.push(f); } });
    assert.deepEqual(fractions, [1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => s / 9));
    assert.deepEqual(withProgress.prob, pos.prob);
    let calls = 0;
    assert.throws(() => x.perturbation(map, { onProgress: () => ++calls < 3 }), /^Error: cancelled: the perturbation test was cancelled/);
    assert.equal(calls, 3);
    assert.deepEqual(x.perturbation(map, { positive: true }).prob, pos.prob, 'a cancelled test leaves the input as it was');
    // A stopped test of another map goes on from the steps it ran (core's PerturbationKept), with
    // the same curve as a new input's; every step still reports.
    const ramp = map.map((_, i) => (i * 7919) % n);
    const fresh = model.prepare(new Float32Array(readNpy(path.join(engine, 'nonsquare', 'input.npy')).data));
    const whole = fresh.perturbation(ramp, { positive: false, inputs: true });
    fresh.delete();
    calls = 0;
    assert.throws(() => x.perturbation(ramp, { positive: false, onProgress: () => ++calls < 5 }), /^Error: cancelled: /);
    fractions.length = 0;
    assert.deepEqual(x.perturbation(ramp, { positive: false, inputs: true, onProgress: (f) => { fractions.push(f); } }), whole);
    assert.deepEqual(fractions, [1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => s / 9));
    assert.throws(() => x.perturbation(map, { onProgress: 3 }), /bad_argument: option onProgress must be a function/);
    assert.throws(() => x.perturbation(map, { postive: true }), /bad_argument: unknown option 'postive' \(perturbation takes positive, target, inputs, onProgress\)/);
    assert.equal(x.perturbation(map.fill(NaN), {}).nonfinite, true);
  } finally {
    x.delete();
    model.delete();
  }
});

test('the perturbation curve of the API equals `vitlens eval` for the same scene and map', async (t) => {
  const vl = await loadVitlens();
  const tmp = tmpDir();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  try {
    const n = 24;
    // The scenes `vitlens eval` scores (test split, its default seed 777) and its records.
    nativeCli('scenes', '--split', 'test', '--n', String(n), '--seed', '777', '--out', path.join(tmp, 'scenes'));
    nativeCli('eval', scenesModel, '--methods', 'lrp,oracle', '--n', String(n), '--no-compare', '--threads', '1',
      '--out', path.join(tmp, 'eval'));
    const records = fs.readFileSync(path.join(tmp, 'eval', 'scenes.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const labels = JSON.parse(fs.readFileSync(path.join(tmp, 'scenes', 'labels.json'), 'utf8'));
    // results.csv: the AUCs of the accuracy curves over the single-item scenes.
    const [head, ...rows] = fs.readFileSync(path.join(tmp, 'eval', 'results.csv'), 'utf8').trim().split('\n').map((l) => l.split(','));
    const csv = Object.fromEntries(rows.map((r) => [r[0], Object.fromEntries(head.map((k, i) => [k, Number(r[i])]))]));
    const aucSum = { lrp: [[0, 0], [0, 0]], oracle: [[0, 0], [0, 0]] }; // [c: predicted, target][d: positive, negative]
    let single = 0;
    for (const sc of labels.scenes) {
      if (sc.items.length !== 1) continue;
      single++;
      const x = preparePng(vl, model, path.join(tmp, 'scenes', sc.image));
      try {
        const gt = sc.items[0].class;
        const z = x.logits();
        const pred = z.indexOf(Math.max(...z)); // arg max, ties to the lower class as in eval.h
        // The maps: oracle = the item's mask; lrp = the native map of the predicted and of the true class.
        const mask = vl.decodeImage(new Uint8Array(fs.readFileSync(path.join(tmp, 'scenes', sc.items[0].mask))));
        const oracle = Float32Array.from({ length: mask.width * mask.height }, (_, p) => (mask.data[p * mask.channels] ? 1 : 0));
        const lrp = (cls) => {
          nativeCli('explain', scenesModel, path.join(tmp, 'scenes', sc.image), '--method', 'lrp', '--target', String(cls),
            '--save-map', path.join(tmp, 'map.npy'));
          return new Float32Array(readNpy(path.join(tmp, 'map.npy')).data);
        };
        const maps = { oracle: [oracle, oracle], lrp: [lrp(pred), gt === pred ? null : lrp(gt)] };
        maps.lrp[1] ??= maps.lrp[0];
        for (const method of ['lrp', 'oracle']) {
          const r = records.find((q) => q.scene === sc.index && q.method === method);
          assert.equal(r.pred, pred, `scene ${sc.index}: the predicted class`);
          for (let c = 0; c < 2; c++) {
            for (let d = 0; d < 2; d++) {
              const curve = x.perturbation(maps[method][c], { positive: d === 0, target: gt });
              assert.deepEqual(curve.top.slice(1), r.top[c][d], `scene ${sc.index} ${method} map ${c} direction ${d}`);
              aucSum[method][c][d] += curve.aucAccuracy;
            }
          }
        }
      } finally {
        x.delete();
      }
    }
    assert.ok(single >= 5, `${single} single-item scenes`);
    for (const method of ['lrp', 'oracle']) {
      const got = aucSum[method].map((cd) => cd.map((v) => v / single));
      const want = [[csv[method].pos_auc_predicted, csv[method].neg_auc_predicted], [csv[method].pos_auc_target, csv[method].neg_auc_target]];
      for (let c = 0; c < 2; c++) for (let d = 0; d < 2; d++) assert.ok(Math.abs(got[c][d] - want[c][d]) < 1e-5, `${method} AUC [${c}][${d}]: ${got[c][d]} vs ${want[c][d]}`);
      t.diagnostic(`${method}: AUC pos/neg (target map) ${got[1][0].toFixed(2)} / ${got[1][1].toFixed(2)} over ${single} scenes, as vitlens eval`);
    }
  } finally {
    model.delete();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('the attribution tree and head scores equal `vitlens tree` and `vitlens heads`', async () => {
  const vl = await loadVitlens();
  const tmp = tmpDir();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  const image = path.join(repo, 'models/gallery/scene_0000.png');
  const x = preparePng(vl, model, image);
  try {
    const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
    const native = JSON.parse(nativeCli('tree', scenesModel, image, '--steps', '20', '--threshold', '0.4'));
    const ex = x.explain('attattr', { steps: 20 });
    for (const tree of [x.attrTree({ steps: 20, threshold: 0.4 }), x.attrTree({ attattr: ex.attattr, target: ex.target })]) {
      assert.equal(tree.root, native.root);
      assert.equal(tree.target, native.target);
      assert.deepEqual(tree.grid, native.grid);
      assert.deepEqual(tree.nodes, native.nodes);
      assert.deepEqual(tree.edges.map((e) => [e.from, e.to, e.block]), native.edges.map((e) => [e.from, e.to, e.block]));
      tree.edges.forEach((e, i) => close(e.score, native.edges[i].score, `edge ${i}`));
    }
    assert.ok(native.edges.length > 0, 'a tree with edges');

    fs.mkdirSync(path.join(tmp, 'one'));
    fs.copyFileSync(image, path.join(tmp, 'one', 'scene_0000.png'));
    nativeCli('heads', scenesModel, '--images', path.join(tmp, 'one'), '--steps', '20', '--out', path.join(tmp, 'heads'));
    const heads = JSON.parse(fs.readFileSync(path.join(tmp, 'heads.json'), 'utf8'));
    for (const ours of [x.headScores({ steps: 20 }), x.headScores({ attattr: ex.attattr })]) {
      // the CLI's names for the same scores (it also writes the paper's baselines)
      const cli = { attattr: 'attattr', attention: 'attention-confidence', taylor: 'taylor-prob' };
      for (const kind of ['attattr', 'attention', 'taylor'])
        ours[kind].forEach((row, l) => row.forEach((v, h) => close(v, heads.scores[cli[kind]][l][h], `${kind} block ${l} head ${h}`)));
    }
    assert.throws(() => x.attrTree({ attattr: [[new Float32Array(3)]] }), /^Error: bad_shape: attattr must be/);
    assert.throws(() => x.attrTree({ threshold: 1 }), /bad_argument: option threshold/);
  } finally {
    x.delete();
    model.delete();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
