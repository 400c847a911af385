// simd.test.mjs — the choice between the relaxed-SIMD and the plain SIMD128 builds (web/simd.js):
// the picker with a stubbed WebAssembly.validate and a stubbed loader; its probe module against
// node's own validator with and without --experimental-wasm-relaxed-simd; and the built modules:
// vitlens-relaxed.wasm and vitlens-mt-relaxed.wasm hold relaxed-SIMD code (node rejects them
// without the flag), vitlens.wasm and vitlens-mt.wasm none. The maps of the relaxed builds are
// tested by the whole node suite run again on them (CTest wasm_node_api_relaxed).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { RELAXED_MADD_MODULE, relaxedSimdSupported, relaxedUrl, startEngine } from '../../web/simd.js';
import { wasmDir } from './support.mjs';

// WebAssembly.validate of a file (or of the probe module) in a fresh node, with or without the flag.
function validates(file, { relaxedFlag }) {
  const bytes = file ? `require('fs').readFileSync(${JSON.stringify(file)})` : `new Uint8Array(${JSON.stringify([...RELAXED_MADD_MODULE])})`;
  const args = [...(relaxedFlag ? ['--experimental-wasm-relaxed-simd'] : []), '-e', `console.log(WebAssembly.validate(${bytes}))`];
  return execFileSync(process.execPath, args, { encoding: 'utf8' }).trim() === 'true';
}

describe('the picker (stubbed)', () => {
  test('relaxed where validate accepts the probe, plain where it refuses or throws', () => {
    let seen = null;
    assert.equal(relaxedSimdSupported((bytes) => { seen = bytes; return true; }), true);
    assert.equal(seen, RELAXED_MADD_MODULE);
    assert.equal(relaxedSimdSupported(() => false), false);
    assert.equal(relaxedSimdSupported(() => { throw new Error('no WebAssembly'); }), false);
  });

  test('startEngine loads the relaxed build, or the plain one when told or when that fails', async () => {
    const url = 'http://127.0.0.1/wasm/vitlens-mt.js';
    assert.equal(relaxedUrl(url), 'http://127.0.0.1/wasm/vitlens-mt-relaxed.js');
    const loads = [];
    const load = async (u) => { loads.push(u); return { u }; };
    assert.deepEqual(await startEngine(url, true, load), { vitlens: { u: relaxedUrl(url) }, url: relaxedUrl(url), simd: 'relaxed' });
    assert.deepEqual(await startEngine(url, false, load), { vitlens: { u: url }, url, simd: 'plain' });
    assert.deepEqual(loads, [relaxedUrl(url), url]);
    const missing = async (u) => { if (u.endsWith('-relaxed.js')) throw new Error('404'); return { u }; };
    assert.deepEqual(await startEngine(url, true, missing), { vitlens: { u: url }, url, simd: 'plain' });
    await assert.rejects(startEngine(url, true, async () => { throw new Error('404'); }), /404/);
  });
});

describe('the probe module in node 20', () => {
  test('is valid with relaxed SIMD and refused without', () => {
    assert.equal(validates(null, { relaxedFlag: true }), true);
    assert.equal(validates(null, { relaxedFlag: false }), false);
  });
});

describe('the built modules', () => {
  for (const [plain, relaxed] of [['vitlens.wasm', 'vitlens-relaxed.wasm'], ['vitlens-mt.wasm', 'vitlens-mt-relaxed.wasm']]) {
    const skip = fs.existsSync(path.join(wasmDir, relaxed)) ? false : `${relaxed} is not built (no clang++-16)`;
    test(`${relaxed} uses relaxed SIMD, ${plain} does not`, { skip }, () => {
      assert.equal(validates(path.join(wasmDir, relaxed), { relaxedFlag: true }), true);
      assert.equal(validates(path.join(wasmDir, relaxed), { relaxedFlag: false }), false, `${relaxed} has no relaxed-SIMD code`);
      assert.equal(validates(path.join(wasmDir, plain), { relaxedFlag: false }), true, `${plain} needs relaxed SIMD`);
    });
  }
});
