// api.test.mjs — the wasm module's Embind API in node: loading, predicting, errors, and agreement
// with the native build and the PyTorch reference.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { loadVitlens, maxRelError, nativeCli, readNpy, repo, tmpDir } from './support.mjs';

const fixtures = path.join(repo, 'tests/fixtures/engine');

for (const shape of ['nonsquare', 'gray']) {
  test(`${shape}: safetensors import in wasm matches the reference and the native CLI`, async () => {
    const vl = await loadVitlens();
    const dir = path.join(fixtures, shape);
    const config = fs.readFileSync(path.join(dir, 'config.json'), 'utf8');
    const input = readNpy(path.join(dir, 'input.npy'));
    const ref = readNpy(path.join(dir, 'logits.npy')).data;
    for (const file of ['model_timm.safetensors', 'model_hf.safetensors']) {
      const model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, file))), config);
      try {
        const x = model.prepare(new Float32Array(input.data));
        const top = x.predict(ref.length);
        assert.equal(top.length, ref.length);
        const logits = x.logits();
        x.delete();
        assert.ok(maxRelError(logits, ref) < 1e-5, `${file}: wasm vs reference ${maxRelError(logits, ref)}`);
        // top-k is sorted and consistent with the logits
        for (let i = 1; i < top.length; i++) assert.ok(top[i - 1].logit >= top[i].logit);
        assert.equal(top[0].name, model.info().classNames[top[0].class]);
      } finally {
        model.delete();
      }
    }

    // The native CLI on the same model file and input: within 1e-5.
    const tmp = tmpDir();
    const modelPath = path.join(tmp, 'm.vitl');
    nativeCli('import', path.join(dir, 'model_timm.safetensors'), '--config', path.join(dir, 'config.json'), '-o', modelPath);
    const native = JSON.parse(nativeCli('predict', modelPath, '--input', path.join(dir, 'input.npy'), '--top', String(ref.length), '--json'));
    const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(modelPath)));
    try {
      const x = model.prepare(new Float32Array(input.data));
      const wasm = x.predict(ref.length);
      x.delete();
      for (let i = 0; i < native.length; i++) {
        assert.equal(wasm[i].class, native[i].class);
        assert.ok(Math.abs(wasm[i].logit - native[i].logit) <= 1e-5 * Math.max(1, Math.abs(native[i].logit)),
          `class ${native[i].class}: wasm ${wasm[i].logit} native ${native[i].logit}`);
      }
    } finally {
      model.delete();
      fs.rmSync(tmp, { recursive: true });
    }
  });
}

test('model info, save and reload (f32 and int8)', async () => {
  const vl = await loadVitlens();
  const dir = path.join(fixtures, 'nonsquare');
  const model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model_timm.safetensors'))),
    fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const info = model.info();
  assert.deepEqual([info.imageH, info.imageW, info.channels, info.patch, info.depth, info.heads], [24, 40, 3, 8, 3, 4]);
  assert.equal(info.classNames.length, 5);
  const input = new Float32Array(readNpy(path.join(dir, 'input.npy')).data);
  const x = model.prepare(input);
  const logits = x.logits();
  x.delete();
  for (const storage of ['f32', 'int8']) {
    const bytes = model.save(storage);
    const again = vl.Model.fromBytes(bytes);
    const y = again.prepare(input);
    const err = maxRelError(y.logits(), logits);
    y.delete();
    assert.ok(storage === 'f32' ? err === 0 : err < 0.03, `${storage}: ${err}`);
    assert.equal(again.info().storedInt8, storage === 'int8');
    again.delete();
  }
  model.delete();
});

test('RGBA pixels of any size are resized and classified', async () => {
  const vl = await loadVitlens();
  const dir = path.join(fixtures, 'gray');
  const model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model_timm.safetensors'))),
    fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  for (const [w, h] of [[1, 1], [7, 300], [64, 48], [1000, 3]]) {
    const rgba = new Uint8Array(w * h * 4);
    for (let i = 0; i < rgba.length; i++) rgba[i] = (i * 37) & 255;
    const x = model.preprocessRGBA(rgba, w, h);
    assert.equal(x.length, 32 * 32);
    assert.ok(x.every(Number.isFinite));
    const input = model.prepareRGBA(rgba, w, h);
    assert.deepEqual(input.tensor(), x);
    const top = input.predict(3);
    assert.equal(top.length, 3);
    input.delete();
  }
  assert.throws(() => model.prepareRGBA(new Uint8Array(10), 4, 4), /^Error: bad_image: RGBA data has 10 bytes/);
  assert.throws(() => model.prepareRGBA(new Uint8Array(0), 0, 0), /bad_image/);
  assert.throws(() => model.prepare(new Float32Array(5)), /bad_shape: the tensor has 5 values/);
  const nan = new Float32Array(32 * 32).fill(NaN);
  assert.throws(() => model.prepare(nan), /bad_value: input contains NaN/);
  const zero = model.prepare(new Float32Array(32 * 32));
  assert.throws(() => zero.predict(0), /bad_argument/);
  zero.delete();
  model.delete();
});

test('warmUp runs the products\' kernels: 8 rounds of three products, each first element 8', async () => {
  const vl = await loadVitlens();
  assert.equal(vl.warmUp(), 192);
});

test('malformed model files throw JS Errors with their code, and the module keeps working', async () => {
  const vl = await loadVitlens();
  const cases = [
    [new Uint8Array(0), /^truncated: /],
    [new TextEncoder().encode('definitely not a model file, but long enough'), /^bad_format: .*wrong magic/],
  ];
  for (const [bytes, pattern] of cases) {
    assert.throws(() => vl.Model.fromBytes(bytes), (e) => e instanceof Error && pattern.test(e.message));
  }
  const dir = path.join(fixtures, 'nonsquare');
  const ckpt = new Uint8Array(fs.readFileSync(path.join(dir, 'model_timm.safetensors')));
  assert.throws(() => vl.Model.fromSafetensors(ckpt.subarray(0, ckpt.length >> 1), fs.readFileSync(path.join(dir, 'config.json'), 'utf8')),
    /^Error: truncated: /);
  assert.throws(() => vl.Model.fromSafetensors(ckpt, '{"patch_size": 8}'), /bad_config: config.json: 'hidden_size' is missing/);
  assert.throws(() => vl.decodeImage(new Uint8Array([1, 2, 3])), /bad_image/);
  // Still usable after the errors.
  const model = vl.Model.fromSafetensors(ckpt, fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  assert.equal(model.info().depth, 3);
  model.delete();
});
