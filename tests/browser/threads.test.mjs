// threads.test.mjs — the page served cross-origin isolated (COOP/COEP): its worker runs the
// pthreads build vitlens-mt.js with navigator.hardwareConcurrency threads (at most 8), says so,
// the threaded methods' maps still equal the native CLI's, and its errors (which take their own
// path there, wasm/mt_errors.js) reach the page with their codes. The plain page (page.test.mjs)
// runs vitlens.js on one thread.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { maxRelError, nativeCli, readNpy, tmpDir, wasmDir } from '../node/support.mjs';
import {
  afterNewExplanation, currentExplanation, exportNpy, launch, modelsDir, openApp, selectMethod, skipReason,
  waitExplained,
} from './harness.mjs';

const skip = skipReason() || (fs.existsSync(path.join(wasmDir, 'vitlens-mt.js')) ? false : 'vitlens-mt.js is not built');
if (skip) test('the page with threads', { skip }, () => {});

describe('the page with threads (cross-origin isolated)', { skip }, () => {
  let env;
  let tab;
  let models;
  let labels;

  before(async () => {
    models = modelsDir();
    labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    env = await launch({ models: models.dir, isolate: true });
    tab = await openApp(env);
  });

  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('the worker runs vitlens-mt.js with the hardware threads and says so', async () => {
    const { page } = tab;
    const hc = await page.evaluate(() => navigator.hardwareConcurrency);
    assert.equal(await page.evaluate(() => document.documentElement.dataset.threads), String(Math.min(8, hc)));
    assert.match(await page.textContent('#engine-info'), /vitlens-mt(-relaxed)?\.js/);
    assert.equal(await page.isVisible('#error'), false, await page.textContent('#error-text'));
    assert.deepEqual(tab.consoleErrors, []);
  });

  test('the worker starts its threads after the first explanation, not with the engine', async () => {
    // web/worker.js: the engine starts without its worker threads (deferThreads) and starts them
    // once the first explanation has been answered.
    const r = await tab.page.evaluate(async () => {
      const { WorkerClient } = await import('./client.js');
      const client = new WorkerClient();
      try {
        const init = await client.call('init', {
          wasmUrl: new URL('./wasm/vitlens.js', location.href).href,
          wasmMtUrl: new URL('./wasm/vitlens-mt.js', location.href).href,
        });
        await client.call('loadModel', { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } });
        const blob = await (await fetch('./models/gallery/' + document.querySelector('#gallery .thumb').dataset.image)).blob();
        const prepared = await client.call('prepare', { source: { blob } });
        const atStart = (await client.call('stats')).activeThreads;  // after a forward pass
        const lrp = await client.call('explain', { image: prepared.image, method: 'lrp' });
        const t0 = performance.now();
        let active = atStart;
        while (active < init.threads && performance.now() - t0 < 20_000) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          active = (await client.call('stats')).activeThreads;
        }
        const again = await client.call('explain', { image: (await client.call('prepare', { source: { blob } })).image, method: 'lrp' });
        return { threads: init.threads, atStart, active, same: again.tokenMap.every((v, i) => v === lrp.tokenMap[i]) };
      } finally {
        client.terminate();
      }
    });
    assert.ok(r.threads >= 2, `threads ${r.threads}`);
    assert.equal(r.atStart, 1, 'no worker thread before the first explanation');
    assert.equal(r.active, r.threads, 'every thread running after it');
    assert.ok(r.same, 'the same map with the threads running');
  });

  test('threaded methods give the native CLI\'s maps (within 1e-4 of the largest value)', async (t) => {
    const { page } = tab;
    await afterNewExplanation(page, () => page.click('#gallery .thumb >> nth=1'));
    await waitExplained(page);
    const image = path.join(models.dir, 'gallery', labels.scenes[1].image);
    const dir = tmpDir();
    for (const method of ['integrated-gradients', 'smoothgrad', 'attattr', 'norm-based']) {
      await selectMethod(page, method);
      const { target } = await currentExplanation(page);
      const mine = await exportNpy(page);
      const ref = path.join(dir, `${method}.npy`);
      nativeCli('explain', path.join(models.dir, 'vitlens-scenes.vitl'), image, '--method', method,
        '--target', String(target), '--save-map', ref);
      const theirs = readNpy(ref);
      assert.deepEqual(mine.shape, theirs.shape, method);
      const err = maxRelError(mine.data, theirs.data);
      t.diagnostic(`${method} (class ${target}): max relative difference ${err.toExponential(2)}`);
      assert.ok(err <= 1e-4, `${method}: max |page − CLI| / max |CLI| = ${err}`);
    }
    fs.rmSync(dir, { recursive: true });
    assert.deepEqual(tab.consoleErrors, []);
  });

  test('an engine error in vitlens-mt.js reaches the page with its code, and the page keeps working', async () => {
    const { page } = tab;
    const info = await page.textContent('#model-info');
    await page.setInputFiles('#model-file', { name: 'broken.vitl', mimeType: 'application/octet-stream', buffer: Buffer.from('VITL but not really a model') });
    await page.waitForSelector('#error:not([hidden])');
    assert.match(await page.textContent('#error-text'), /Could not load broken\.vitl: .*\[(bad_format|truncated)\]/);
    assert.equal(await page.textContent('#model-info'), info, 'the previous model stays loaded');
    await afterNewExplanation(page, () => page.click('#gallery .thumb >> nth=2'));
    assert.equal(await page.isVisible('#error'), false);
  });
});
