// simd.test.mjs — which engine build the page's worker picks (web/simd.js): chromium validates
// relaxed SIMD, so the worker runs vitlens-relaxed.js and says so; with ?simd=plain it runs
// vitlens.js; and where WebAssembly.validate refuses the probe (a browser without relaxed SIMD:
// the worker script is served with validate stubbed, since chromium 156 ignores
// --js-flags=--no-experimental-wasm-relaxed-simd) it runs vitlens.js, as it does when
// vitlens-relaxed.wasm cannot be fetched (answered 404 here). Each build's
// transformer-attribution and grad-rollout maps equal the native CLI's. (page.test.mjs runs every
// method on the default, relaxed, build; threads.test.mjs the isolated page's vitlens-mt-relaxed.js.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { maxRelError, nativeCli, readNpy, tmpDir, wasmDir } from '../node/support.mjs';
import { currentExplanation, exportNpy, launch, modelsDir, openApp, openPage, selectMethod, skipReason } from './harness.mjs';

const skip = skipReason() || (fs.existsSync(path.join(wasmDir, 'vitlens-relaxed.js')) ? false : 'vitlens-relaxed.js is not built (no clang++-16)');
if (skip) test('the engine build the page picks', { skip }, () => {});

const cases = [
  { name: 'chromium with relaxed SIMD', engine: 'vitlens-relaxed.js', simd: 'relaxed' },
  { name: 'chromium, ?simd=plain', search: '?simd=plain', engine: 'vitlens.js', simd: 'plain' },
  { name: 'WebAssembly.validate refusing relaxed SIMD', refuse: true, engine: 'vitlens.js', simd: 'plain' },
  { name: 'vitlens-relaxed.wasm failing to load', brokenWasm: true, engine: 'vitlens.js', simd: 'plain' },
];

// The page opened with its worker's WebAssembly.validate answering false (prepended to worker.js,
// before anything calls it: the worker's imports only define functions).
async function openRefusingRelaxed(env) {
  const tab = await openPage(env);
  await tab.context.route('**/worker.js', async (route) => {
    const response = await route.fetch();
    route.fulfill({ response, body: `WebAssembly.validate = () => false;\n${await response.text()}` });
  });
  await tab.page.goto(env.server.url);
  await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
  return tab;
}

// The page opened with vitlens-relaxed.wasm answered 404: the worker, which fetches and compiles
// it beside the glue's import (web/worker.js, loadEngine), must fall back to the plain build.
async function openWithoutRelaxedWasm(env) {
  const tab = await openPage(env);
  await tab.context.route('**/vitlens-relaxed.wasm', (route) => route.fulfill({ status: 404, body: 'not here' }));
  await tab.page.goto(env.server.url);
  await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
  return tab;
}

for (const c of cases) {
  describe(`the engine build: ${c.name}`, { skip }, () => {
    let env;
    let tab;
    let models;
    let labels;

    before(async () => {
      models = modelsDir();
      labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
      env = await launch({ models: models.dir });
      if (c.refuse) tab = await openRefusingRelaxed(env);
      else if (c.brokenWasm) tab = await openWithoutRelaxedWasm(env);
      else tab = await openApp(env, { search: c.search });
    });

    after(async () => {
      await env?.browser.close();
      await env?.server.close();
    });

    test(`the worker runs ${c.engine} and the page says so`, async () => {
      const { page } = tab;
      assert.equal(await page.evaluate(() => document.documentElement.dataset.simd), c.simd);
      assert.match(await page.textContent('#engine-info'), new RegExp(`Engine: ${c.engine.replace('.', '\\.')},`));
      assert.ok(tab.requests.some((u) => u.endsWith(`/wasm/${c.engine.replace(/\.js$/, '.wasm')}`)));
      // the 404 the test itself answered is the only error allowed
      assert.deepEqual(tab.consoleErrors.filter((m) => !(c.brokenWasm && /404/.test(m))), []);
    });

    test('its maps equal the native CLI\'s (within 1e-4 of the largest value)', async (t) => {
      const { page } = tab;
      const shown = await page.evaluate(() => document.querySelector('#gallery .thumb[aria-pressed=true]')?.dataset.image);
      assert.equal(shown, labels.scenes[0].image, 'the page opens with the first scene');
      const image = path.join(models.dir, 'gallery', labels.scenes[0].image);
      const dir = tmpDir();
      for (const method of ['transformer-attribution', 'grad-rollout']) {
        await selectMethod(page, method);
        const { target } = await currentExplanation(page);
        const mine = await exportNpy(page);
        const ref = path.join(dir, `${method}.npy`);
        nativeCli('explain', path.join(models.dir, 'vitlens-scenes.vitl'), image, '--method', method,
          '--target', String(target), '--save-map', ref);
        const theirs = readNpy(ref);
        const err = maxRelError(mine.data, theirs.data);
        t.diagnostic(`${c.engine}, ${method} (class ${target}): max relative difference ${err.toExponential(2)}`);
        assert.ok(err <= 1e-4, `${method}: max |page − CLI| / max |CLI| = ${err}`);
      }
      fs.rmSync(dir, { recursive: true });
    });
  });
}
