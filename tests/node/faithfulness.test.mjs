// faithfulness.test.mjs — Input.faithfulness (core's map_faithfulness) and Input.maskFromImage
// through the wasm API: the curves are the perturbation test's (Input.perturbation: the same pixels
// removed, the same arg-max classes), the AUCs, SRG and the mask figures re-derived here from the
// returned curves and the map by their definitions (METHODS.md, metrics/faithfulness.h), the
// figures equal the native CLI's `vitlens faithfulness` for the same image, and the options are
// checked (unknown keys, sizes, progress and cancel).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { loadVitlens, nativeCli, repo, toRGBA } from './support.mjs';

const scenesModel = path.join(repo, 'models/vitlens-scenes.vitl');
const gallery = path.join(repo, 'models/gallery');

function preparePng(vl, model, file) {
  const img = vl.decodeImage(new Uint8Array(fs.readFileSync(file)));
  return model.prepareRGBA(toRGBA(img), img.width, img.height);
}

// The trapezoid over p = 0, 0.1, …, 0.9, × 100 (perturbation_auc).
const auc = (y) => 100 * y.slice(0, 9).reduce((s, v, i) => s + 0.05 * (v + y[i + 1]), 0);
// SRG (Blücher et al. 2024) as faithfulness.h defines it: the trapezoids of LeRF − MoRF over the ten
// steps and the half interval to p = 1, where the curves meet.
const srg = (lerf, morf) => {
  const d = lerf.map((v, i) => v - morf[i]);
  return 100 * (d.slice(0, 9).reduce((s, v, i) => s + 0.05 * (v + d[i + 1]), 0) + 0.05 * d[9]);
};

test('Input.faithfulness: the perturbation test\'s curves, AUCs, SRG and the mask figures by their definitions', async () => {
  const vl = await loadVitlens();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  const x = preparePng(vl, model, path.join(gallery, 'scene_0000.png'));
  try {
    const { imageH: h, imageW: w } = model.info();
    const n = h * w;
    const png = vl.decodeImage(new Uint8Array(fs.readFileSync(path.join(gallery, 'scene_0000_mask_0.png'))));
    const mask = x.maskFromImage(new Uint8Array(fs.readFileSync(path.join(gallery, 'scene_0000_mask_0.png'))));
    assert.equal(mask.length, n);
    // The mask at the image's own size: a pixel is object when any colour channel is nonzero.
    for (let p = 0; p < n; p++) {
      const on = [0, 1, 2].some((k) => png.data[p * png.channels + Math.min(k, png.channels - 1)] !== 0);
      assert.equal(mask[p], on ? 1 : 0, `mask pixel ${p}`);
    }
    for (const method of ['transformer-attribution', 'saliency']) {
      const ex = x.explain(method, {});
      const map = ex.pixelMap;
      const target = ex.target;
      const f = x.faithfulness(map, { target, road: true, mask });
      assert.equal(f.target, target);
      assert.equal(f.nonfinite, false);
      for (const fill of ['black', 'road']) {
        for (const order of ['positive', 'negative']) {
          const c = f[fill][order];
          const at = `${method} ${fill} ${order}`;
          assert.equal(c.positive, order === 'positive', at);
          assert.deepEqual(c.removed, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => Math.floor((n * s) / 10)), at);
          assert.deepEqual(c.fraction, [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], at);
          c.top.forEach((t, s) => assert.equal(c.correct[s], t === target ? 1 : 0, `${at} step ${s}`));
          assert.ok(Math.abs(c.aucProb - auc(c.prob)) < 1e-9, `${at}: AUC ${c.aucProb} vs ${auc(c.prob)}`);
          assert.ok(Math.abs(c.aucAccuracy - auc(c.correct)) < 1e-9, `${at}: accuracy AUC`);
          if (fill === 'black') {
            // The same removal as Input.perturbation (the page's "Faithfulness, live"), whose prob is
            // the float softmax / sigmoid (this one is core's double curve_probabilities).
            const p = x.perturbation(map, { positive: order === 'positive', target });
            assert.deepEqual(c.top, p.top, at);
            c.prob.forEach((v, s) => assert.ok(Math.abs(v - p.prob[s]) < 1e-6, `${at} step ${s}: ${v} vs ${p.prob[s]}`));
          }
        }
        assert.ok(Math.abs(f[fill].srg - srg(f[fill].negative.prob, f[fill].positive.prob)) < 1e-9, `${method} ${fill} SRG`);
      }
      // ROAD's first step is the clean input, as the black fill's; its later steps are other images.
      assert.equal(f.road.positive.prob[0], f.black.positive.prob[0]);
      assert.notDeepEqual(f.road.positive.prob, f.black.positive.prob);
      assert.equal(f.road.noise, 0.01);
      assert.equal(f.road.seed, 0);
      // The mask figures from the map and the mask by their definitions.
      let inside = 0;
      let total = 0;
      let max = -Infinity;
      for (let p = 0; p < n; p++) {
        total += Math.max(0, map[p]);
        if (mask[p]) inside += Math.max(0, map[p]);
        max = Math.max(max, map[p]);
      }
      const maxima = [...map.keys()].filter((p) => map[p] === max);
      const m = f.mask;
      assert.ok(Math.abs(m.massAccuracy - inside / total) < 1e-9, `${method} mass accuracy ${m.massAccuracy} vs ${inside / total}`);
      assert.ok(Math.abs(m.pointing - maxima.filter((p) => mask[p]).length / maxima.length) < 1e-12, `${method} pointing`);
      assert.equal(m.maskPixels, mask.reduce((s, v) => s + (v ? 1 : 0), 0));
      assert.ok(Math.abs(m.miou - (m.iouBackground + m.iouObject) / 2) < 1e-12);
      for (const k of ['rankAccuracy', 'pixelAccuracy', 'ap']) assert.ok(m[k] >= 0 && m[k] <= 1, `${method} ${k} = ${m[k]}`);
      assert.equal(m.share, null, 'no second object: no class share');
    }
  } finally {
    x.delete();
    model.delete();
  }
});

test('Input.faithfulness equals the native `vitlens faithfulness` for the same scene', async (t) => {
  const vl = await loadVitlens();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  // A two-item scene: the map of its first item's class against that item, the class share
  // against the other.
  const labels = JSON.parse(fs.readFileSync(path.join(gallery, 'labels.json'), 'utf8'));
  const scene = labels.scenes.find((s) => s.items.length === 2);
  const [own, other] = scene.items.map((it) => path.join(gallery, it.mask));
  const target = scene.items[0].class;
  const x = preparePng(vl, model, path.join(gallery, scene.image));
  try {
    const methods = ['rollout', 'grad-rollout'];
    const native = JSON.parse(nativeCli('faithfulness', scenesModel, path.join(gallery, scene.image), '--methods', methods.join(','),
      '--target', String(target), '--mask', own, '--other-mask', other, '--road', '--json'));
    assert.equal(native.target, target);
    const mask = x.maskFromImage(new Uint8Array(fs.readFileSync(own)));
    const otherMask = x.maskFromImage(new Uint8Array(fs.readFileSync(other)));
    let worst = 0;
    methods.forEach((method, k) => {
      const ex = x.explain(method, { target });
      const f = x.faithfulness(ex.pixelMap, { target, road: true, mask, otherMask });
      const nat = native.methods[k];
      assert.equal(nat.spec, method);
      // The native and the wasm maps differ in the last bits (another GEMM), which can reorder
      // pixels of nearly equal relevance: probabilities and mask figures agree to 1e-4, AUCs and SRG
      // (× 100) to 1e-2 (measured: 2e-6 at most).
      const near = (a, b, tol, what) => {
        worst = Math.max(worst, Math.abs(a - b) / tol);
        assert.ok(Math.abs(a - b) <= tol, `${method} ${what}: wasm ${a}, native ${b}`);
      };
      for (const fill of ['black', 'road']) {
        for (const order of ['positive', 'negative']) {
          near(f[fill][order].aucProb, nat[fill][order].auc_prob, 1e-2, `${fill} ${order} AUC`);
          f[fill][order].prob.forEach((v, s) => near(v, nat[fill][order].prob[s], 1e-4, `${fill} ${order} step ${s}`));
        }
        near(f[fill].srg, nat[fill].srg, 1e-2, `${fill} SRG`);
      }
      const pairs = { massAccuracy: 'mass_accuracy', rankAccuracy: 'rank_accuracy', pointing: 'pointing', pixelAccuracy: 'pixel_accuracy',
        miou: 'miou', ap: 'ap', share: 'share' };
      for (const [js, cli] of Object.entries(pairs)) near(f.mask[js], nat.mask[cli], 1e-4, js);
      assert.ok(f.mask.share > 0 && f.mask.share < 1);
    });
    t.diagnostic(`largest difference wasm − native: ${worst.toFixed(3)} of the tolerance`);
  } finally {
    x.delete();
    model.delete();
  }
});

test('Input.faithfulness: options, sizes, progress and cancel', async () => {
  const vl = await loadVitlens();
  const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(scenesModel)));
  const x = preparePng(vl, model, path.join(gallery, 'scene_0000.png'));
  try {
    const { imageH: h, imageW: w, classes } = model.info();
    const map = x.explain('rollout', {}).pixelMap;
    const plain = x.faithfulness(map, {});
    assert.equal(plain.road, null);
    assert.equal(plain.mask, null);
    assert.ok(plain.black.positive.prob.length === 10);
    assert.equal(x.faithfulness(map, { black: false }).black, null);
    const fractions = [];
    x.faithfulness(map, { road: true, onProgress: (f) => { fractions.push(f); } });
    assert.equal(fractions.length, 36);
    assert.equal(fractions.at(-1), 1);
    assert.ok(fractions.every((f, i) => i === 0 || f > fractions[i - 1]));
    let calls = 0;
    assert.throws(() => x.faithfulness(map, { road: true, onProgress: () => ++calls < 3 }), /^Error: cancelled: /);
    assert.equal(calls, 3);
    // The perturbation steps the input keeps from Input.perturbation are read: the same figures as
    // a new input's.
    const other = x.explain('raw-attention', {}).pixelMap;
    for (const positive of [true, false]) x.perturbation(other, { positive });
    const y = preparePng(vl, model, path.join(gallery, 'scene_0000.png'));
    try {
      assert.deepEqual(x.faithfulness(other, {}), y.faithfulness(other, {}));
    } finally {
      y.delete();
    }
    // ROAD stopped after 13 of its 18 passes (the second order's 4th), asked again: it goes on from the
    // steps kept, still reports every pass, and gives a new input's figures.
    const roadOnly = { black: false, road: true, roadSeed: 5 };
    calls = 0;
    assert.throws(() => x.faithfulness(other, { ...roadOnly, onProgress: () => ++calls < 13 }), /^Error: cancelled: /);
    const resumed = [];
    const again = x.faithfulness(other, { ...roadOnly, onProgress: (f) => { resumed.push(f); } });
    assert.equal(resumed.length, 18);
    const z = preparePng(vl, model, path.join(gallery, 'scene_0000.png'));
    try {
      assert.deepEqual(again, z.faithfulness(other, roadOnly));
    } finally {
      z.delete();
    }
    assert.throws(() => x.faithfulness(map, { bogus: 1 }), /bad_argument: unknown option 'bogus' \(faithfulness takes target, black, road/);
    assert.throws(() => x.faithfulness(map, { target: classes }), /bad_argument: target class/);
    assert.throws(() => x.faithfulness(new Float32Array(5), {}), /^Error: bad_shape: the map has 5 values/);
    assert.throws(() => x.faithfulness(map, { mask: new Uint8Array(7) }), /bad_shape: option mask must hold 4096 bytes/);
    assert.throws(() => x.faithfulness(map, { otherMask: new Uint8Array(h * w) }), /bad_argument: the class share needs the explained object's mask/);
    assert.throws(() => x.faithfulness(map, { roadSeed: -1 }), /bad_argument: option roadSeed/);
    assert.throws(() => x.faithfulness(map, { onProgress: 3 }), /bad_argument: option onProgress must be a function/);
    assert.throws(() => x.maskFromImage(new Uint8Array([1, 2, 3])), /^Error: bad_image: /);
    const bad = Float32Array.from(map);
    bad[5] = NaN;
    assert.equal(x.faithfulness(bad, {}).nonfinite, true);
    // Seeds: another seed, other noise, other ROAD curves; the same seed, the same curves.
    const r0 = x.faithfulness(map, { black: false, road: true, roadSeed: 3 });
    const r1 = x.faithfulness(map, { black: false, road: true, roadSeed: 3 });
    const r2 = x.faithfulness(map, { black: false, road: true, roadSeed: 4, roadNoise: 0.05 });
    assert.deepEqual(r0.road, r1.road);
    assert.notDeepEqual(r0.road.positive.prob, r2.road.positive.prob);
    assert.equal(r2.road.noise, 0.05);
  } finally {
    x.delete();
    model.delete();
  }
});
