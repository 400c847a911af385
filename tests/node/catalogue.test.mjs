// catalogue.test.mjs — the bad-input catalogue (tests/catalogue/catalogue.mjs) through the
// wasm module's Embind API: each malformed input throws a JS Error whose message starts with the
// expected code and contains the expected fragment; after every failure a valid model still
// gives the same logits; and failing calls do not leak (malloc'd bytes and Embind handles are
// the same after the third and the sixth pass over the catalogue). Both builds: vitlens.js and,
// when built, the pthreads vitlens-mt.js (whose errors take another path, wasm/mt_errors.js).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { expectationFor, makeCatalogue } from '../catalogue/catalogue.mjs';
import { loadVitlens, loadVitlensMt, readNpy, tmpDir, toRGBA, variant } from './support.mjs';

const dir = tmpDir();
const { cases, base } = makeCatalogue(dir);
const at = (name) => path.join(dir, name);
const bytesOf = (name) => new Uint8Array(fs.readFileSync(at(name)));

// Runs f on an input prepared by `make` and deletes the input (also when f throws).
function withInput(make, f) {
  const x = make();
  try {
    return f(x);
  } finally {
    x.delete();
  }
}

// Feeds one case to the API; returns what a valid input gives (for the `ok` cases).
function feed(vl, good, input, c) {
  switch (c.entry) {
    case 'model': {
      const m = vl.Model.fromBytes(bytesOf(c.files.model));
      m.delete();
      return null;
    }
    case 'checkpoint': {
      const m = vl.Model.fromSafetensors(bytesOf(c.files.checkpoint), fs.readFileSync(at(c.files.config), 'utf8'));
      m.delete();
      return null;
    }
    case 'image': {
      const img = vl.decodeImage(bytesOf(c.files.image));
      return withInput(() => good.prepareRGBA(toRGBA(img), img.width, img.height), (x) => x.predict(2));
    }
    case 'npy': return withInput(() => good.prepare(new Float32Array(readNpy(at(c.files.input)).data)), (x) => x.predict(1));
    case 'options': {
      const { method, top, ...options } = c.options;
      return withInput(() => good.prepare(input), (x) => (top !== undefined ? x.predict(top) : x.explain(method, options)));
    }
    default: throw new Error(`${c.id}: unknown entry ${c.entry}`);
  }
}

const mt = await loadVitlensMt();
const engines = [[`vitlens${variant}.js`, loadVitlens], ...(mt ? [[`vitlens-mt${variant}.js`, loadVitlensMt]] : [])];
after(() => mt?.PThread.terminateAllThreads());

for (const [engine, load] of engines) {
test(`${engine}: the catalogue through the wasm API: specific errors, and the module keeps working`, async (t) => {
  const vl = await load();
  const good = vl.Model.fromBytes(bytesOf(base.model));
  const input = new Float32Array(readNpy(at(base.input)).data);
  const logits = withInput(() => good.prepare(input), (x) => Array.from(x.logits()));
  let checked = 0;
  try {
    for (const c of cases) {
      const want = expectationFor(c, 'wasm');
      if (want.skip) {
        t.diagnostic(`${c.id}: skipped (${want.skip})`);
        continue;
      }
      checked++;
      if (want.ok) {
        const top = feed(vl, good, input, c);
        assert.equal(top.length, 2, c.id);
        assert.ok(top.every((p) => Number.isFinite(p.logit) && p.prob >= 0 && p.prob <= 1), c.id);
      } else {
        assert.throws(() => feed(vl, good, input, c), (e) => {
          assert.ok(e instanceof Error, `${c.id}: threw ${e}`);
          assert.ok(e.message.startsWith(`${want.code}: `), `${c.id}: expected code ${want.code}, got "${e.message}"`);
          assert.ok(e.message.includes(want.message), `${c.id}: "${e.message}" lacks "${want.message}"`);
          return true;
        }, c.id);
      }
      assert.deepEqual(withInput(() => good.prepare(input), (x) => Array.from(x.logits())), logits, `${c.id}: the valid model still gives the same logits`);
    }
  } finally {
    good.delete();
  }
  t.diagnostic(`${checked} of ${cases.length} cases through the wasm API`);
  assert.ok(checked >= 30, `${checked} cases checked`);
});

test(`${engine}: failing calls do not leak wasm memory or Embind handles`, async (t) => {
  const vl = await load();
  const good = vl.Model.fromBytes(bytesOf(base.model));
  const input = new Float32Array(readNpy(at(base.input)).data);
  const failing = cases.filter((c) => !c.expect.ok && !expectationFor(c, 'wasm').skip);
  const pass = () => {
    for (const c of failing) assert.throws(() => feed(vl, good, input, c));
    return { allocated: vl.memoryStats().allocatedBytes, handles: vl.count_emval_handles() };
  };
  try {
    for (let i = 0; i < 2; i++) pass(); // caches and the trace reach their final sizes
    const third = pass();
    for (let i = 0; i < 2; i++) pass();
    const sixth = pass();
    t.diagnostic(`after 3 passes of ${failing.length} failing calls: ${third.allocated} bytes allocated, ${third.handles} handles; ` +
      `after 6: ${sixth.allocated} bytes, ${sixth.handles} handles`);
    assert.equal(sixth.allocated, third.allocated, 'malloc\'d bytes after 6 passes = after 3');
    assert.equal(sixth.handles, third.handles, 'Embind handles after 6 passes = after 3');
  } finally {
    good.delete();
  }
});
}

test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
