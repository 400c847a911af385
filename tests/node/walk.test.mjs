// walk.test.mjs — Input.walk (the guided walk through a method, core's method_walk) from JS: its
// steps carry explain()'s own intermediates and maps (equal as float32), its Σ relevance is the
// conservation report's (equal), the words and arrays cross the boundary intact (the same titles,
// formulas and values as the native CLI's `explain --walk`, values within 1e-4 of their largest
// magnitude: the two builds' float arithmetic differs), and what it refuses it refuses with a code.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { fixtureModel, loadVitlens, maxRelError, nativeCli, readNpy, repo, tmpDir } from './support.mjs';

const engine = path.join(repo, 'tests/fixtures/engine');

function input(vl, model, shape) {
  return model.prepare(new Float32Array(readNpy(path.join(engine, shape, 'input.npy')).data));
}

const equal = (a, b, what) => {
  assert.ok(a && b, `${what}: both present`);
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) assert.fail(`${what}[${i}]: ${a[i]} vs ${b[i]}`);
};

const byId = (w, id) => {
  const s = w.steps.find((x) => x.id === id);
  assert.ok(s, `no step ${id}`);
  return s;
};

// The query's row of an n×n matrix (CLS-pooled fixtures: row 0).
const row0 = (m, n) => m.subarray(0, n);

for (const shape of ['nonsquare', 'gray']) {
  test(`${shape}: transformer-attribution's walk carries explain's intermediates, map and report`, async () => {
    const vl = await loadVitlens();
    const model = fixtureModel(vl, shape);
    const x = input(vl, model, shape);
    try {
      const n = model.info().tokens;
      const L = model.info().depth;
      const w = x.walk('transformer-attribution', {});
      const ex = x.explain('transformer-attribution', { intermediates: true });
      assert.equal(w.method, 'transformer-attribution');
      assert.equal(w.target, ex.target);
      assert.equal(w.query, -1);
      assert.equal(w.steps.length, 1 + 3 + 6 * L + 1);
      assert.deepEqual(w.steps.slice(0, 4).map((s) => s.id), ['input', 'seed', 'head', 'norm']);
      for (let b = 0; b < L; b++) {
        const bi = ex.intermediates.blocks[b];
        for (const [id, key] of [['attn', 'attn'], ['grad', 'grad'], ['relevance', 'relevance'], ['step', 'step'], ['accumulated', 'accumulated']]) {
          const s = byId(w, `block.${b}.${id}`);
          equal(s.matrix, bi[key], `block ${b} ${id} matrix`);
          equal(s.row, row0(bi[key], n), `block ${b} ${id} row`);
          assert.equal(s.block, b);
          assert.ok(s.formula.mark.length > 0 && (s.formula.before + s.formula.mark + s.formula.after).includes(s.formula.mark));
        }
        const rel = byId(w, `block.${b}.relevance`);
        const softmax = ex.conservation.find((l) => l.layer === `blocks.${b}.attn.softmax`);
        assert.equal(rel.relevance, softmax.relevanceOut, `block ${b}: Σ R_A`);
        assert.equal(rel.sums.at(-1).value, ex.relevanceSums.blockInputs[b]);
        assert.deepEqual(rel.reads.map((t) => t.shape), [[n, model.info().dim], [model.info().heads, n, n],
          [model.info().heads, n, model.info().dim / model.info().heads]]);
      }
      const map = w.steps.at(-1);
      assert.equal(map.id, 'map');
      equal(map.map, ex.tokenMap, 'the map');
      assert.deepEqual(map.mapShape, [ex.gridH, ex.gridW]);
      assert.equal(byId(w, 'seed').relevance, 1);
      assert.equal(byId(w, 'head').relevance, ex.conservation.find((l) => l.layer === 'pool').relevanceIn);
      assert.equal(byId(w, 'block.0.attn').relevance, null, 'A is no relevance');
      assert.equal(byId(w, 'input').row, null);

      // Without matrices, and with another query token: that token's rows.
      const lean = x.walk('transformer-attribution:start-layer=1', { matrices: false, query: 3 });
      assert.ok(lean.steps.every((s) => s.matrix === null));
      assert.equal(lean.steps.length, 1 + 3 + 6 * (L - 1) + 1);
      const bi = ex.intermediates.blocks[L - 1];
      equal(byId(lean, `block.${L - 1}.attn`).row, bi.attn.subarray(3 * n, 4 * n), 'row 3 of E_h A');
    } finally {
      x.delete();
      model.delete();
    }
  });

  test(`${shape}: attnlrp's and rollout's walks; Σ relevance is the report's at every step`, async () => {
    const vl = await loadVitlens();
    const model = fixtureModel(vl, shape);
    const x = input(vl, model, shape);
    try {
      const L = model.info().depth;
      const w = x.walk('attnlrp', {});
      const ex = x.explain('attnlrp', { intermediates: true });
      assert.equal(w.steps.length, 1 + 3 + 9 * L + 2);
      assert.equal(w.seed, ex.relevanceSums.seed);
      const layerIn = (name) => ex.conservation.find((l) => l.layer === name).relevanceIn;
      for (let b = 0; b < L; b++) {
        for (const [id, layer] of [['add2', 'add2'], ['ff', 'mlp.fc1'], ['ln2', 'norm2'], ['residual2', 'clone2'], ['add1', 'add1'],
          ['attention', 'attn.A_v'], ['scores', 'attn.qkv'], ['ln1', 'norm1'], ['residual1', 'clone1']]) {
          const s = byId(w, `block.${b}.${id}`);
          assert.equal(s.relevance, layerIn(`blocks.${b}.${layer}`), `block ${b} ${id}`);
          assert.ok(s.conservation.length > 0);
        }
        equal(byId(w, `block.${b}.attention`).matrix, ex.intermediates.blocks[b].relevance, `block ${b} E_h R_A`);
      }
      assert.equal(byId(w, 'map').relevance, ex.relevanceSums.tokens);
      assert.equal(byId(w, 'pixels').relevance, ex.relevanceSums.image);
      equal(byId(w, 'map').map, ex.tokenMap, 'token map');
      equal(byId(w, 'pixels').map, ex.pixelMap, 'pixel map');
      assert.deepEqual(byId(w, 'pixels').mapShape, [ex.height, ex.width]);

      const r = x.walk('rollout:head-fusion=max', {});
      const rx = x.explain('rollout:head-fusion=max', { intermediates: true });
      assert.equal(r.seed, null);
      assert.ok(r.steps.every((s) => s.relevance === null));
      assert.equal(r.steps.length, 1 + 3 * L + 1);
      for (let b = 0; b < L; b++) {
        equal(byId(r, `block.${b}.step`).matrix, rx.intermediates.blocks[b].step, `rollout block ${b} Â`);
        equal(byId(r, `block.${b}.accumulated`).matrix, rx.intermediates.blocks[b].accumulated, `rollout block ${b} C`);
      }
      equal(r.steps.at(-1).map, rx.tokenMap, 'rollout map');
      assert.match(byId(r, 'block.0.fuse').formula.mark, /max_h A_0/);
    } finally {
      x.delete();
      model.delete();
    }
  });
}

test('the walk from JS is the native CLI\'s --walk: the same steps and words, values within 1e-4', async () => {
  const vl = await loadVitlens();
  const shape = 'nonsquare';
  const model = fixtureModel(vl, shape);
  const x = input(vl, model, shape);
  const tmp = tmpDir();
  try {
    const modelPath = path.join(tmp, 'm.vitl');
    nativeCli('import', path.join(engine, shape, 'model_timm.safetensors'), '--config', path.join(engine, shape, 'config.json'),
      '-o', modelPath);
    for (const method of ['transformer-attribution', 'attnlrp', 'rollout']) {
      const file = path.join(tmp, `${method}.json`);
      nativeCli('explain', modelPath, '--input', path.join(engine, shape, 'input.npy'), '--method', method, '--walk', file,
        '--walk-matrices');
      const cli = JSON.parse(fs.readFileSync(file, 'utf8'));
      const js = x.walk(method, {});
      assert.equal(js.steps.length, cli.steps.length, method);
      assert.equal(js.target, cli.target);
      js.steps.forEach((s, i) => {
        const c = cli.steps[i];
        const at = `${method} ${s.id}`;
        assert.equal(s.id, c.id, at);
        assert.equal(s.title, c.title, at);
        assert.deepEqual(s.formula, c.formula, at);
        assert.equal(s.equation, c.equation, at);
        assert.deepEqual(s.reads, c.reads, at);
        assert.deepEqual(s.writes, c.writes, at);
        assert.deepEqual(s.layers, c.layers, at);
        for (const key of ['row', 'matrix', 'map']) {
          if (s[key] === null) assert.ok(!c[key] || c[key].length === 0, `${at} ${key}`);
          else assert.ok(maxRelError(s[key], c[key]) <= 1e-4, `${at} ${key}: ${maxRelError(s[key], c[key])}`);
        }
        if (s.relevance === null) assert.equal(c.relevance, null, at);
        else assert.ok(Math.abs(s.relevance - c.relevance) <= 1e-4 * Math.max(1, Math.abs(c.relevance)), `${at} Σ R`);
      });
    }
    // The CLI refuses a walk it has not, and the walk's flags without --walk.
    const cli = (...args) => nativeCli('explain', modelPath, '--input', path.join(engine, shape, 'input.npy'), ...args);
    assert.throws(() => cli('--method', 'lrp', '--walk', path.join(tmp, 'x.json')), (e) =>
      /error \(bad_argument\): --walk: lrp has no guided walk/.test(String(e.stderr)));
    assert.throws(() => cli('--method', 'rollout', '--walk-query', '3'), (e) =>
      /error \(bad_argument\): --walk-query and --walk-matrices go with --walk FILE.json/.test(String(e.stderr)));
    assert.throws(() => cli('--method', 'rollout', '--walk', path.join(tmp, 'x.json'), '--walk-query', '99'), (e) =>
      /error \(bad_argument\): walk query 99 is not a token/.test(String(e.stderr)));
    assert.ok(!fs.existsSync(path.join(tmp, 'x.json')), 'no file for a refused walk');
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
    x.delete();
    model.delete();
  }
});

test('walk refuses another method, a query that is not a token, and options the method does not read', async () => {
  const vl = await loadVitlens();
  const model = fixtureModel(vl, 'gray');
  const x = input(vl, model, 'gray');
  try {
    assert.throws(() => x.walk('lrp', {}), /^Error: bad_argument: method 'lrp' has no guided walk; the walks are: transformer-attribution, attnlrp, rollout/);
    assert.throws(() => x.walk('rollout', { query: 17 }), /bad_argument: walk query 17 is not a token: the model has 17 tokens/);
    assert.throws(() => x.walk('rollout', { query: 1.5 }), /bad_argument: option query must be an integer/);
    assert.throws(() => x.walk('transformer-attribution', { headFusion: 'max' }), /bad_argument: .*head-fusion.* does not apply to transformer-attribution/);
    assert.throws(() => x.walk('rollout', { intermediates: true }), /bad_argument: walk takes no intermediates option/);
    assert.throws(() => x.walk('rollout', { matrices: 'yes' }), /bad_argument: option matrices must be a boolean/);
    assert.throws(() => x.walk('nope', {}), /bad_argument/);
    // The model's methods() say which have a walk.
    assert.deepEqual(vl.methods().filter((m) => m.walk).map((m) => m.name).sort(), ['attnlrp', 'rollout', 'transformer-attribution']);
    // A walk after errors still works, and walks do not leak (the first round fills the input's
    // cached passes, which stay).
    for (const m of ['transformer-attribution', 'attnlrp', 'rollout']) x.walk(m, {});
    const before = vl.memoryStats().allocatedBytes;
    for (let i = 0; i < 10; i++) x.walk(['transformer-attribution', 'attnlrp', 'rollout'][i % 3], {});
    assert.equal(vl.memoryStats().allocatedBytes, before, 'no bytes kept by the walks');
  } finally {
    x.delete();
    model.delete();
  }
});
