// norm_stages.test.mjs — the page's "Download stages (.npz)" against the CLI's
// `explain --method norm-based --save-stages`: the wasm encoder (encodeNormStages) fed the arrays of
// the CLI's file writes that file byte for byte, and the wasm module's own maps of the same model
// and input (explain's norm, Input.normHeads) agree with the CLI's within 1e-5. The .npz is read
// here by a small stored-zip reader of its own (npz.mjs). The FF summary of the page's "The
// feed-forward's effect" (normImageSummary) fed the CLI's arrays equals `--ff-summary --json`
// (ρ and mixing means to 1e-12: the same core code on the same float32 maps), and its context
// shares equal N[i, j] / Σ_{k≠i} N[i, k] worked out here from the CLI's maps (1e-6).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { readNpz } from './npz.mjs';
import { fixtureModel, loadVitlens, maxRelError, nativeCli, readNpy, repo, tmpDir } from './support.mjs';

const engine = path.join(repo, 'tests/fixtures/engine');
const STAGES = ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer'];

// The file's arrays in the API's layout: norm (L × {maps, mixing}) and heads (L × H).
function toApi(arrays) {
  const [L, n] = arrays.atb.shape;
  const norm = [];
  for (let b = 0; b < L; b++) {
    const maps = {};
    const mixing = {};
    STAGES.forEach((st, s) => {
      maps[st] = arrays[st.replaceAll('-', '_')].data.slice(b * n * n, (b + 1) * n * n);
      mixing[st] = arrays.mixing_ratio.data.slice((b * 5 + s) * n, (b * 5 + s + 1) * n);
    });
    norm.push({ maps, mixing });
  }
  const H = arrays.atb_heads.shape[1];
  const heads = [];
  for (let b = 0; b < L; b++) {
    heads.push([]);
    for (let h = 0; h < H; h++) heads[b].push(arrays.atb_heads.data.slice(((b * H + h) * n) * n, ((b * H + h) * n + n) * n));
  }
  return { norm, heads };
}

for (const shape of ['nonsquare', 'gray']) {
  test(`${shape}: encodeNormStages writes the CLI's --save-stages file`, async () => {
    const vl = await loadVitlens();
    const tmp = tmpDir();
    const model = fixtureModel(vl, shape);
    let x = null;
    try {
      const modelPath = path.join(tmp, 'm.vitl');
      nativeCli('import', path.join(engine, shape, 'model_timm.safetensors'), '--config',
        path.join(engine, shape, 'config.json'), '-o', modelPath);
      const file = path.join(tmp, 'stages.npz');
      nativeCli('explain', modelPath, '--input', path.join(engine, shape, 'input.npy'), '--method', 'norm-based',
        '--save-stages', file);
      const cliBytes = new Uint8Array(fs.readFileSync(file));
      const cli = readNpz(cliBytes);
      assert.deepEqual(Object.keys(cli), ['atb', 'atb_res', 'atb_res_ln', 'atb_res_ln_ff', 'layer', 'mixing_ratio', 'atb_heads']);

      // the same arrays through the wasm encoder: the same bytes
      const api = toApi(cli);
      assert.deepEqual(vl.encodeNormStages(api.norm, api.heads), cliBytes);
      // without heads: the file without atb_heads
      assert.deepEqual(Object.keys(readNpz(vl.encodeNormStages(api.norm, []))).length, 6);

      // the wasm module's own maps of the same model and input, as the page computes them
      const input = new Float32Array(readNpy(path.join(engine, shape, 'input.npy')).data);
      x = model.prepare(input);
      const ex = x.explain('norm-based', {});
      const mine = readNpz(vl.encodeNormStages(ex.norm, x.normHeads()));
      for (const [name, a] of Object.entries(cli)) {
        assert.deepEqual(mine[name].shape, a.shape, name);
        const e = maxRelError(mine[name].data, a.data);
        assert.ok(e <= 1e-5, `${name}: wasm vs native ${e}`);
      }

      // the FF summary: the CLI's (native core) and the wasm module's on the CLI's arrays
      const cliSum = JSON.parse(nativeCli('explain', modelPath, '--input', path.join(engine, shape, 'input.npy'), '--method',
        'norm-based', '--ff-summary', '--json')).ff_summary;
      assert.equal(cliSum.transition, 'atb-res-ln → atb-res-ln-ff');
      const sum = vl.normImageSummary(api.norm);
      const [L, n] = cli.atb.shape;
      assert.equal(sum.length, L);
      assert.equal(cliSum.blocks.length, L);
      const near = (a, b, tol, what) => assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);
      sum.forEach((o, b) => {
        const c = cliSum.blocks[b];
        near(o.rhoFlat, c.rho_flat, 1e-12, `block ${b} ρ flat`);
        near(o.rhoRows, c.rho_rows, 1e-12, `block ${b} ρ rows`);
        assert.equal(o.rhoQuery.length, n);
        o.rhoQuery.forEach((r, i) => near(r, c.rho_query[i], 1e-12, `block ${b} ρ row ${i}`));
        for (const st of STAGES) near(o.mixingMean[st], c.mixing_mean[st], 1e-12, `block ${b} r̄ ${st}`);
        for (const [key, stage] of [['shareBefore', 'atb-res-ln'], ['shareAfter', 'atb-res-ln-ff']]) {
          const N = api.norm[b].maps[stage];
          assert.equal(o[key].length, n * n);
          for (let i = 0; i < n; i++) {
            let tot = 0;
            for (let j = 0; j < n; j++) if (j !== i) tot += N[i * n + j];
            for (let j = 0; j < n; j++) near(o[key][i * n + j], j === i ? 0 : N[i * n + j] / tot, 1e-6, `block ${b} ${key}[${i}, ${j}]`);
          }
        }
      });
      assert.throws(() => vl.normImageSummary([]), /bad_argument/);

      // bad input: a JS Error with the code
      assert.throws(() => vl.encodeNormStages([], []), /bad_argument/);
      const short = structuredClone(ex.norm);
      short[0].maps.atb = new Float32Array(3);
      assert.throws(() => vl.encodeNormStages(short, []), /bad_shape/);
      assert.throws(() => vl.normImageSummary(short), /bad_shape/);
      delete short[0].maps.atb;
      assert.throws(() => vl.normImageSummary(short), /bad_argument/);
      assert.throws(() => vl.encodeNormStages(short, []), /bad_argument/);
    } finally {
      x?.delete();
      model.delete();
      fs.rmSync(tmp, { recursive: true });
    }
  });
}

test('the CLI: --save-stages needs norm-based; analyze-ff writes its report', () => {
  const tmp = tmpDir();
  try {
    const model = path.join(repo, 'models/vitlens-scenes.vitl');
    const image = path.join(repo, 'models/gallery/scene_0000.png');
    assert.throws(() => nativeCli('explain', model, image, '--method', 'rollout', '--save-stages', path.join(tmp, 'x.npz')),
      /--save-stages needs --method norm-based/);
    assert.throws(() => nativeCli('explain', model, image, '--method', 'rollout', '--ff-summary'), /--ff-summary needs --method norm-based/);
    assert.throws(() => nativeCli('explain', model, image, '--method', 'norm-based', '--ff-summary', '--ff-query', '65'),
      /--ff-query must be a token index in \[0, 65\)/);
    const table = nativeCli('explain', model, image, '--method', 'norm-based', '--ff-summary', '--ff-query', '3');
    assert.match(table, /\| block \| ρ whole map \| ρ per row \(mean\) \| ρ row 3 \| r̄ atb \|/);
    assert.equal(table.trim().split('\n').filter((l) => /^\| \d+ \|/.test(l)).length, 6, 'one row per block');
    const out = path.join(tmp, 'ff');
    const printed = nativeCli('analyze-ff', model, '--n', '3', '--out', out, '--threads', '1');
    assert.match(printed, /over 3 images/);
    for (const f of ['report.md', 'report.csv', 'report.json', 'ff_spearman.svg', 'ff_pair_types.svg', 'ff_distance.svg', 'mixing.svg'])
      assert.ok(fs.existsSync(path.join(out, f)), f);
    const report = JSON.parse(fs.readFileSync(path.join(out, 'report.json'), 'utf8'));
    assert.equal(report.images, 3);
    assert.equal(report.blocks.length, 6);
    assert.equal(report.blocks[0].transitions.length, 6);
    assert.equal(fs.readFileSync(path.join(out, 'report.md'), 'utf8') + '\nwrote', printed.slice(0, printed.lastIndexOf('wrote') + 5));
    assert.throws(() => nativeCli('analyze-ff', model, '--n', '1', '--out', out, '--item-share', '0.3'), /item-share/);
  } finally {
    fs.rmSync(tmp, { recursive: true });
  }
});
