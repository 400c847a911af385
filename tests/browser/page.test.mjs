// page.test.mjs — the page in Debian's chromium (playwright-core): it starts with no console
// error and the first scene explained; every method renders; its maps equal the native CLI's;
// choosing another class changes a class-specific map; bad files give clear errors and the page
// keeps working; a checkpoint converts in the browser; the worker protocol reports errors and
// cancels; no request leaves 127.0.0.1. A screenshot goes to tests/artifacts/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { maxRelError, nativeCli, readNpy, repo, tmpDir } from '../node/support.mjs';
import {
  afterNewExplanation, artifacts, currentExplanation, exportNpy, launch, modelsDir, openApp, openPage, selectMethod,
  skipReason, waitExplained, waitGridDone,
} from './harness.mjs';

const skip = skipReason();
if (skip) test('the page in chromium', { skip }, () => {});

describe('the page', { skip }, () => {
  let env;
  let models;
  let tab;
  let labels;

  before(async () => {
    models = modelsDir();
    if (!models.shipped) console.log(`# the shipped model is not in this checkout: testing with a tiny model in ${models.dir}`);
    labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    env = await launch({ models: models.dir });
    tab = await openApp(env);
  });

  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  const firstImage = () => path.join(models.dir, 'gallery', labels.scenes[0].image);

  test('starts with the gallery shown and the first scene explained, with no console error', async () => {
    const { page } = tab;
    assert.equal(await page.locator('#gallery .thumb').count(), labels.scenes.length);
    const view = await currentExplanation(page);
    assert.ok(view.method, 'an explanation is drawn');
    assert.equal(await page.locator('#scores .score').count(), labels.class_names.length);
    assert.equal(await page.isVisible('#error'), false, await page.textContent('#error-text'));
    const spread = await page.$eval('#main-canvas', (c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4 * 97) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size;
    });
    assert.ok(spread > 20, `the overlay has ${spread} distinct colours`);
    // The start-up timeline (measure.mjs and bench/startup_ab.mjs read it): its stages in order,
    // and the worker's own times of its first calls.
    await page.waitForFunction(() => document.documentElement.dataset.timeline);
    const tl = JSON.parse(await page.evaluate(() => document.documentElement.dataset.timeline));
    const stages = ['script', 'engine', 'model', 'predicted', 'explained'].map((k) => tl[k]);
    assert.ok(stages.every((v, i) => Number.isFinite(v) && (i === 0 || v >= stages[i - 1])), JSON.stringify(tl));
    for (const k of ['loadModelMs', 'decodeMs', 'prepareMs', 'explainMs']) assert.ok(Number.isFinite(tl[k]) && tl[k] >= 0, `${k} in ${JSON.stringify(tl)}`);
    // The other thumbnails' images are requested once the first explanation is drawn (gallery.js).
    await page.waitForFunction(() => [...document.querySelectorAll('#gallery .thumb img')].every((i) => i.complete && i.naturalWidth > 0), null, { timeout: 10_000 });
    await waitGridDone(page);
    fs.mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'main-view.png') });
    await page.screenshot({ path: path.join(artifacts, 'full-page.png'), fullPage: true });
    assert.deepEqual(tab.consoleErrors, []);
  });

  test('every method renders in the grid', async () => {
    const { page } = tab;
    await waitGridDone(page);
    const cells = await page.$$eval('#grid .cell', (cs) => cs.map((c) => {
      const canvas = c.querySelector('canvas');
      const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let lo = 255;
      let hi = 0;
      for (let i = 0; i < d.length; i += 4) {
        lo = Math.min(lo, d[i]);
        hi = Math.max(hi, d[i]);
      }
      return { method: c.dataset.method, state: c.dataset.state, ms: Number(c.dataset.ms), range: hi - lo, title: c.title };
    }));
    assert.ok(cells.length >= 8, `${cells.length} methods`);
    for (const c of cells) {
      assert.equal(c.state, 'done', `${c.method}: ${c.title}`);
      assert.ok(c.range > 0, `${c.method} drew something`);
      assert.ok(Number.isFinite(c.ms));
    }
  });

  test('each method\'s map equals the native CLI\'s map (within 1e-4 of its largest value)', async (t) => {
    const { page } = tab;
    await afterNewExplanation(page, () => page.click('#gallery .thumb >> nth=0'));
    await page.waitForFunction((img) => document.querySelector('#gallery .thumb[aria-pressed=true]')?.dataset.image === img, labels.scenes[0].image);
    await waitExplained(page);
    const methods = await page.$$eval('#method option', (os) => os.map((o) => o.value));
    const dir = tmpDir();
    for (const method of methods) {
      await selectMethod(page, method);
      const { target } = await currentExplanation(page);
      const mine = await exportNpy(page);
      const ref = path.join(dir, `${method}.npy`);
      nativeCli('explain', path.join(models.dir, 'vitlens-scenes.vitl'), firstImage(), '--method', method,
        '--target', String(target), '--save-map', ref);
      const theirs = readNpy(ref);
      assert.deepEqual(mine.shape, theirs.shape, method);
      const err = maxRelError(mine.data, theirs.data);
      t.diagnostic(`${method} (class ${target}, ${theirs.shape.join('×')}): max relative difference ${err.toExponential(2)}`);
      assert.ok(err <= 1e-4, `${method}: max |page − CLI| / max |CLI| = ${err}`);
    }
  });

  test('choosing another class changes a class-specific map, and not raw attention', async () => {
    const { page } = tab;
    const maps = {};
    for (const method of ['transformer-attribution', 'raw-attention']) {
      await selectMethod(page, method);
      const { target } = await currentExplanation(page);
      const before = await exportNpy(page);
      const other = (target + 1) % labels.class_names.length;
      await afterNewExplanation(page, () => page.click(`#scores .score[data-class="${other}"]`));
      assert.equal((await currentExplanation(page)).target, other);
      assert.equal(await page.getAttribute(`#scores .score[data-class="${other}"]`, 'aria-pressed'), 'true');
      const afterMap = await exportNpy(page);
      maps[method] = maxRelError(afterMap.data, before.data);
      await afterNewExplanation(page, () => page.click(`#scores .score[data-class="${target}"]`));
    }
    assert.ok(maps['transformer-attribution'] > 1e-3, `transformer-attribution moved by ${maps['transformer-attribution']}`);
    assert.equal(maps['raw-attention'], 0);
  });

  test('a malformed model file shows a clear error, and the page keeps working', async () => {
    const { page } = tab;
    const info = await page.textContent('#model-info');
    await page.setInputFiles('#model-file', { name: 'broken.vitl', mimeType: 'application/octet-stream', buffer: Buffer.from('VITL but not really a model') });
    await page.waitForSelector('#error:not([hidden])');
    const text = await page.textContent('#error-text');
    assert.match(text, /Could not load broken\.vitl: .*\[(bad_format|truncated)\]/);
    assert.equal(await page.textContent('#model-info'), info, 'the previous model stays loaded');
    await afterNewExplanation(page, () => page.click('#gallery .thumb >> nth=1'));
    assert.equal(await page.isVisible('#error'), false);
  });

  test('a file that is not an image shows a clear error, and the page keeps working', async () => {
    const { page } = tab;
    await page.setInputFiles('#image-file', { name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('these are notes, not pixels') });
    await page.waitForSelector('#error:not([hidden])');
    assert.match(await page.textContent('#error-text'), /Could not open notes\.png: .*not an image.*\[bad_image\]/);
    await afterNewExplanation(page, () => page.click('#gallery .thumb >> nth=0'));
    assert.equal(await page.isVisible('#error'), false);
  });

  test('an uploaded image of another size is resized by the engine, its original shown', async () => {
    const { page } = tab;
    const file = path.join(repo, 'tests/fixtures/image');
    const png = fs.readdirSync(file).find((f) => f.endsWith('.png'));
    await afterNewExplanation(page, () => page.setInputFiles('#image-file', path.join(file, png)));
    assert.match(await page.textContent('#labels'), new RegExp(png.replace('.', '\\.')));
    assert.equal(await page.isVisible('#error'), false);
  });

  test('a safetensors checkpoint and its config.json are converted in the browser', async () => {
    const { page } = tab;
    const dir = path.join(repo, 'tests/fixtures/engine/nonsquare');
    await afterNewExplanation(page, () => page.setInputFiles('#model-file', [path.join(dir, 'model_timm.safetensors'), path.join(dir, 'config.json')]));
    assert.match(await page.textContent('#model-info'), /model_timm\.safetensors: 24×40×3 input, patch 8/);
    assert.equal(await page.locator('#scores .score').count(), 5);
    assert.equal(await page.isVisible('#model-reset'), true);
    await afterNewExplanation(page, () => page.click('#model-reset'));
    assert.match(await page.textContent('#model-info'), /the shipped model/);
  });

  test('the worker protocol: an engine error is reported with its code; cancellation; restart', async () => {
    const { page } = tab;
    const image = labels.scenes[0].image;
    const r = await page.evaluate(async (img) => {
      const { WorkerClient } = await import('./client.js');
      const client = new WorkerClient();
      const codeOf = (p) => p.then(() => 'ok', (e) => e.code);
      const wasmUrl = new URL('./wasm/vitlens.js', location.href).href;
      await client.call('init', { wasmUrl });
      await client.call('loadModel', { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } });
      const blob = await (await fetch(`./models/gallery/${img}`)).blob();
      const { image } = await client.call('prepare', { source: { blob } });
      const out = {};
      out.unknown = await codeOf(client.call('explain', { image, method: 'no-such-method' }));
      out.badOption = await codeOf(client.call('explain', { image, method: 'rollout', options: { discardRatio: 'lots' } }));
      const calls = [];
      for (let i = 0; i < 6; i++) calls.push(client.call('explain', { image, method: 'lrp' }));
      for (const c of calls.slice(1)) client.cancel(c.id);
      out.queue = await Promise.all(calls.map(codeOf));
      const running = client.call('explain', { image, method: 'attnlrp' });
      client.restart();
      out.restarted = await codeOf(running);
      await client.call('init', { wasmUrl });
      out.noModel = await codeOf(client.call('explain', { image, method: 'rollout' }));
      client.terminate();
      return out;
    }, image);
    assert.equal(r.unknown, 'bad_argument');
    assert.equal(r.badOption, 'bad_argument');
    assert.deepEqual(r.queue, ['ok', 'cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
    assert.equal(r.restarted, 'cancelled');
    assert.equal(r.noModel, 'not_ready');
  });

  test('no request leaves 127.0.0.1, and the worker\'s own requests are seen', async () => {
    assert.deepEqual(tab.offsite, []);
    assert.ok(tab.requests.some((u) => /\/wasm\/vitlens(-relaxed)?\.wasm$/.test(u)), 'the wasm fetch is recorded');
    assert.ok(tab.requests.some((u) => u.endsWith('/models/vitlens-scenes.vitl')), 'the model fetch is recorded');
    for (const u of tab.requests) assert.match(u, /^(http:\/\/127\.0\.0\.1:\d+\/|data:|blob:)/);
    assert.deepEqual(tab.consoleErrors, []);
  });

  test('a first scene the browser cannot decode is reported, decoded ahead or not', async () => {
    // gallery.js decodes the first scene while the engine starts (files.js, decode); a failure
    // there surfaces when the scene is opened, as any image's does.
    const t = await openPage(env);
    const first = labels.scenes[0].image;
    await t.context.route(`**/models/gallery/${first}`, (route) => route.fulfill({ status: 200, contentType: 'image/png', body: 'not a png' }));
    try {
      await t.page.goto(env.server.url);
      await t.page.waitForSelector('#error', { state: 'visible', timeout: 60_000 });
      const text = await t.page.textContent('#error-text');
      assert.ok(text.includes(`Could not open ${first}: `), text);
      assert.match(text, /not an image the browser can decode.*\[bad_image\]/);
      assert.equal(await t.page.getAttribute('html', 'data-first-explanation-ms'), null);
      assert.deepEqual(t.consoleErrors, [], 'no unhandled rejection of the early decode');
    } finally {
      await t.context.close();
    }
  });

  test('without the shipped model the page says so and shows the gallery at once', async () => {
    const t = await openPage(env);
    await t.context.route('**/models/vitlens-scenes.vitl', (route) => route.fulfill({ status: 404, body: 'not here' }));
    try {
      await t.page.goto(env.server.url);
      await t.page.waitForSelector('#error', { state: 'visible', timeout: 60_000 });
      assert.match(await t.page.textContent('#error-text'), /shipped model could not be loaded/);
      // No first explanation will come: the thumbnails are requested when the model fails
      // (app.js), not after gallery.js's 4 s fallback.
      const waited = await t.page.evaluate(async () => {
        const t0 = performance.now();
        const thumbs = () => [...document.querySelectorAll('#gallery .thumb img')];
        while (!(thumbs().length && thumbs().every((i) => i.complete && i.naturalWidth > 0))) {
          if (performance.now() - t0 > 3000) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        return { ms: performance.now() - t0, count: thumbs().length, loaded: thumbs().filter((i) => i.naturalWidth > 0).length };
      });
      assert.equal(waited.count, labels.scenes.length);
      assert.equal(waited.loaded, waited.count, `${waited.loaded} of ${waited.count} thumbnails loaded ${waited.ms.toFixed(0)} ms after the error`);
    } finally {
      await t.context.close();
    }
  });
});
