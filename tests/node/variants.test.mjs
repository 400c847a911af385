// variants.test.mjs — the wasm module on every model variant of the timm / Hugging Face families
// (tests/fixtures/variants/<case>/, from the float64 reference tests/reference/variants_ref.py):
// Model.fromSafetensors by each family's own names, atInputSize for the resized case, info()'s
// token layout, and every map of the fixture's index.json within 1e-4 of the reference.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { loadVitlens, maxRelError, readNpy, repo } from './support.mjs';

const variants = path.join(repo, 'tests/fixtures/variants');
const cases = ['deit3', 'distilled_timm', 'distilled_hf', 'reg_gap', 'avg_fcnorm_cls', 'dinov2', 'dinov2_reg',
  'clip', 'resized'];

// index.json's options (the CLI's names, values as text) as ExplainOptions, through methods()'s table.
function explainOptions(vl, method, options, target) {
  const specs = vl.methods().find((m) => m.name === method).optionSpecs;
  const out = { target };
  for (const [key, text] of Object.entries(options)) {
    if (key === 'baseline' && text === 'black') continue;  // the default; an image otherwise
    const spec = specs.find((s) => s.key === key);
    assert.ok(spec, `${method} has no option ${key}`);
    out[spec.jsKey] = spec.kind === 'integer' || spec.kind === 'number' ? Number(text)
      : spec.kind === 'flag' ? text === 'true' : text;
  }
  return out;
}

for (const name of cases) {
  test(`${name}: imported by its own names, every method within 1e-4 of the reference`, async () => {
    const vl = await loadVitlens();
    const dir = path.join(variants, name);
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
    const index = JSON.parse(fs.readFileSync(path.join(dir, 'index.json'), 'utf8'));
    let model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model.safetensors'))),
      fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    let x = null;
    try {
      if (meta.explained_image_size) {
        const resized = model.atInputSize(...meta.explained_image_size);
        model.delete();
        model = resized;
        assert.deepEqual(model.info().checkpointGrid, meta.checkpoint_grid);
      }
      const info = model.info();
      const flags = meta.variant_flags;
      assert.equal(info.prefix, flags.prefix);
      assert.equal(info.tokens, flags.prefix + (info.imageH / info.patch) * (info.imageW / info.patch));
      assert.equal(info.prefixKinds.filter((k) => k === 'reg').length, flags.registers);
      x = model.prepare(new Float32Array(readNpy(path.join(dir, 'input.npy')).data));
      const logits = readNpy(path.join(dir, 'logits.npy')).data;
      assert.ok(maxRelError(x.logits(), logits) <= 1e-5, `logits: ${maxRelError(x.logits(), logits)}`);
      let worst = { error: 0, file: '' };
      for (const e of index) {
        if (e.output === 'attattr') continue;  // the (L, H, n, n) tensor: native test
        const ex = x.explain(e.method, explainOptions(vl, e.method, e.options, e.target));
        const ours = e.output === 'pixel-map' ? ex.pixelMap : ex.tokenMap;
        const ref = readNpy(path.join(dir, e.file)).data;
        const error = maxRelError(ours, ref);
        assert.ok(error <= 1e-4, `${e.file} ${JSON.stringify(e.options)}: ${error}`);
        if (error > worst.error) worst = { error, file: e.file };
      }
      console.log(JSON.stringify({ case: name, maps: index.length, worst }));
    } finally {
      x?.delete();
      model.delete();
    }
  });
}
