// aspect.test.mjs — the page explains an image at its own aspect: with the shipped model and a
// 300×180 (width × height) image made at test time, choosing "the image's own aspect" explains it
// on the grid the engine's Model.aspectInputSize gives (computed here by the same wasm build, in
// node); every method of the list and of the grid runs with no error; the perturbation images,
// the per-head views and the query patch follow the resized grid; the overlay keeps the image's
// aspect; choosing the model's size again restores the model's grid. Then, in a page whose worker
// cannot resize the model (its atInputSize made to throw), choosing the aspect shows the error and
// the page goes on at the model's size.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadVitlens } from '../node/support.mjs';
import { afterNewExplanation, artifacts, exportNpy, launch, modelsDir, openApp, openPage, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the page at the image\'s aspect', { skip }, () => {});

const IMAGE_W = 300;
const IMAGE_H = 180;

// A 300×180 PNG drawn in the page: a gallery scene scaled to the image's height on the left, the
// same scene mirrored on the right, a band of colour between them.
async function wideImage(page, scene) {
  const base64 = await page.evaluate(async ({ url, w, h }) => {
    const bitmap = await createImageBitmap(await (await fetch(url)).blob());
    const c = document.createElement('canvas');
    c.width = w;
    c.height = h;
    const ctx = c.getContext('2d');
    ctx.fillStyle = '#3a6';
    ctx.fillRect(0, 0, w, h);
    ctx.drawImage(bitmap, 0, 0, h, h);
    ctx.save();
    ctx.scale(-1, 1);
    ctx.drawImage(bitmap, -w, h / 4, h / 2, h / 2);
    ctx.restore();
    const blob = await new Promise((r) => c.toBlob(r, 'image/png'));
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let s = '';
    for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s);
  }, { url: `/models/gallery/${scene}`, w: IMAGE_W, h: IMAGE_H });
  return { name: 'wide.png', mimeType: 'image/png', buffer: Buffer.from(base64, 'base64') };
}

async function assertNoError(page, what) {
  if (await page.isVisible('#error')) assert.fail(`${what}: the page shows "${await page.textContent('#error-text')}"`);
}

// Chooses `method` in the main view and waits until it is drawn (or an error is shown).
async function explainWith(page, method) {
  if (await page.$eval('#main-canvas', (c) => c.dataset.method) !== method) await page.selectOption('#method', method);
  await page.waitForFunction((m) => !document.getElementById('error').hidden ||
    (document.documentElement.dataset.mainPending === 'false' && document.querySelector('#main-canvas').dataset.method === m), method, { timeout: 60_000 });
  await assertNoError(page, method);
}

// Waits until the per-head views of the current explanation are drawn (or an error is shown).
async function waitHeads(page) {
  await page.waitForFunction(() => !document.getElementById('error').hidden ||
    (document.querySelector('#teach-block canvas[data-kind=head-attn]') && !document.querySelector('#teach-block p.muted')), null, { timeout: 60_000 });
}

// What the main view and "Inside the model" show: the explanation's input and grid, the canvases'
// shapes (CSS pixels, width / height), the query.
function viewState(page) {
  return page.evaluate(() => {
    const shape = (c) => c.getBoundingClientRect().width / c.getBoundingClientRect().height;
    const main = document.getElementById('main-canvas');
    const teach = [...document.querySelectorAll('#teach canvas, #teach-block canvas')];
    return {
      input: main.dataset.input,
      grid: main.dataset.grid,
      gridSize: document.getElementById('grid-size').textContent,
      note: document.getElementById('input-note').textContent,
      mainShape: shape(main),
      modelInput: [document.getElementById('model-input').width, document.getElementById('model-input').height],
      teachShapes: teach.map((c) => c.width / c.height),
      teachCount: teach.length,
      query: document.getElementById('teach-query').textContent,
      aspectLabel: document.getElementById('input-size-aspect').textContent,
      checked: document.querySelector('input[name=input-size]:checked').value,
    };
  });
}

// Hovers the centre of patch (gx, gy) of a gw × gh grid on the main canvas.
async function hoverPatch(page, gx, gy, gw, gh) {
  const canvas = page.locator('#main-canvas');
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  await canvas.hover({ position: { x: ((gx + 0.5) / gw) * box.width, y: ((gy + 0.5) / gh) * box.height } });
}

describe('the page at the image\'s own aspect', { skip }, () => {
  let env;
  let models;
  let model; // the shipped model's size and the engine's size for the image: { H, W, patch, h, w }

  before(async () => {
    models = modelsDir();
    env = await launch({ models: models.dir });
    const vl = await loadVitlens();
    const m = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(path.join(models.dir, 'vitlens-scenes.vitl'))));
    const info = m.info();
    const [h, w] = m.aspectInputSize(IMAGE_H, IMAGE_W);
    m.delete();
    model = { H: info.imageH, W: info.imageW, patch: info.patch, h, w, heads: info.heads, depth: info.depth };
    assert.notDeepEqual([h, w], [info.imageH, info.imageW], 'the image\'s aspect gives another size than the model\'s');
  });

  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('every view follows the grid of the image\'s aspect, and the model\'s again', async (t) => {
    const tab = await openApp(env);
    const { page } = tab;
    const labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    const { H, W, patch, h, w } = model;
    const [gh, gw] = [h / patch, w / patch];
    const [GH, GW] = [H / patch, W / patch];
    const methods = await page.$$eval('#method option', (os) => os.map((o) => o.value));

    // The image at the model's size (the default): the model's grid, the image's shape on screen.
    await afterNewExplanation(page, async () => page.setInputFiles('#image-file', await wideImage(page, labels.scenes[1].image)));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    let s = await viewState(page);
    assert.equal(s.checked, 'model');
    assert.equal(s.input, `${H}x${W}`);
    assert.equal(s.grid, `${GH}x${GW}`);
    assert.match(s.note, new RegExp(`${H}×${W} pixels .*${GH}×${GW} patches: the model’s own input size`));
    assert.equal(s.aspectLabel, `(${h}×${w}, ${gh}×${gw} patches)`, 'the size offered is the engine\'s aspectInputSize');
    assert.ok(Math.abs(s.mainShape - IMAGE_W / IMAGE_H) < 0.02, `the overlay has the image's shape (${s.mainShape})`);

    // The image's own aspect: the engine's grid everywhere.
    await afterNewExplanation(page, () => page.check('input[name=input-size][value=aspect]'));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    await assertNoError(page, 'the image\'s aspect');
    s = await viewState(page);
    assert.equal(s.input, `${h}x${w}`, 'the map is at the size aspectInputSize gives');
    assert.equal(s.grid, `${gh}x${gw}`, 'the map\'s grid is the one aspectInputSize gives');
    assert.equal(s.gridSize, `(${gh}×${gw})`);
    assert.match(s.note, new RegExp(`${h}×${w} pixels .*${gh}×${gw} patches: the image’s aspect; pos_embed resampled from the checkpoint’s ${GH}×${GW} grid`));
    assert.deepEqual(s.modelInput.map((x) => x > 0), [true, true]);
    assert.ok(Math.abs(s.modelInput[0] / s.modelInput[1] - w / h) < 0.05, `what the model sees is ${s.modelInput}, ${w}×${h} pixels`);
    assert.ok(Math.abs(s.mainShape - IMAGE_W / IMAGE_H) < 0.02, `the overlay keeps the image's shape (${s.mainShape})`);
    assert.equal(s.query, 'query: the CLS token');

    for (const method of methods) {
      await explainWith(page, method);
      s = await viewState(page);
      assert.equal(s.grid, `${gh}x${gw}`, `${method}: the map's grid`);
      assert.equal(s.input, `${h}x${w}`, `${method}: the map's size`);
      // The perturbation test of this map, on images at the input's size.
      await page.waitForFunction((m) => document.querySelector('#faith-note').textContent.startsWith(`— ${m},`) ||
        !document.getElementById('error').hidden, method, { timeout: 60_000 });
      await assertNoError(page, `${method}: perturbation`);
      const strip = await page.$$eval('.faith-strip[data-order=positive] canvas', (cs) => cs.map((c) => `${c.width}×${c.height}`));
      assert.deepEqual(strip, Array(10).fill(`${w}×${h}`), `${method}: the perturbed images`);
      // "Inside the model": every map over the resized grid.
      await waitHeads(page);
      await assertNoError(page, `${method}: per-head views`);
      s = await viewState(page);
      assert.ok(s.teachCount >= model.heads, `${method}: ${s.teachCount} maps inside the model`);
      for (const r of s.teachShapes) assert.ok(Math.abs(r - gw / gh) < 0.1, `${method}: a map of shape ${r}, the grid ${gh}×${gw}`);
    }

    // The query patch indexes the resized grid: the last patch is gh·gw − 1.
    await explainWith(page, methods.includes('transformer-attribution') ? 'transformer-attribution' : methods[0]);
    await waitHeads(page);
    await hoverPatch(page, gw - 1, gh - 1, gw, gh);
    s = await viewState(page);
    assert.equal(s.query, `query: patch ${gh * gw - 1} (row ${gh - 1}, column ${gw - 1})`);
    assert.equal(await page.locator('#teach-block canvas[data-kind=head-attn]').count(), model.heads);
    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('main.layout').screenshot({ path: path.join(artifacts, 'aspect-view.png') });
    await page.locator('section[aria-labelledby=h-teach]').screenshot({ path: path.join(artifacts, 'aspect-teaching.png') });

    // The raw map exports at the resized grid (a token-map method).
    const npy = await exportNpy(page);
    assert.deepEqual(npy.shape, [gh, gw], 'the exported map');

    // The grid of all methods: every cell drawn at the image's shape, none an error.
    await waitGridDone(page);
    await page.locator('section[aria-labelledby=h-grid]').screenshot({ path: path.join(artifacts, 'aspect-grid.png') });
    await page.locator('section[aria-labelledby=h-faith]').screenshot({ path: path.join(artifacts, 'aspect-faithfulness.png') });
    const cells = await page.$$eval('#grid .cell', (cs) => cs.map((c) => {
      const r = c.querySelector('canvas').getBoundingClientRect();
      return { method: c.dataset.method, state: c.dataset.state, title: c.title, shape: r.width / r.height };
    }));
    assert.equal(cells.length, methods.length);
    for (const c of cells) {
      assert.equal(c.state, 'done', `the grid's ${c.method}: ${c.title}`);
      assert.ok(Math.abs(c.shape - IMAGE_W / IMAGE_H) < 0.03, `the grid's ${c.method} has the image's shape (${c.shape})`);
    }
    await assertNoError(page, 'the grid');

    // Back to the model's size: the model's grid again, the query back on the CLS token.
    await afterNewExplanation(page, () => page.check('input[name=input-size][value=model]'));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    await waitHeads(page);
    s = await viewState(page);
    assert.equal(s.input, `${H}x${W}`);
    assert.equal(s.grid, `${GH}x${GW}`);
    assert.equal(s.gridSize, `(${GH}×${GW})`);
    assert.equal(s.query, 'query: the CLS token');
    for (const r of s.teachShapes) assert.ok(Math.abs(r - GW / GH) < 0.1, `a map of shape ${r}, the model's grid ${GH}×${GW}`);
    assert.deepEqual(s.modelInput.map((x) => x > 0), [true, true]);
    assert.ok(Math.abs(s.modelInput[0] / s.modelInput[1] - W / H) < 0.05, `what the model sees is ${s.modelInput}`);
    await waitGridDone(page);
    for (const c of await page.$$eval('#grid .cell', (cs) => cs.map((c) => c.dataset.state))) assert.equal(c, 'done');
    await assertNoError(page, 'the model\'s size again');
    assert.deepEqual(tab.consoleErrors, []);
    t.diagnostic(`${IMAGE_W}×${IMAGE_H} image: ${h}×${w} pixels (${gh}×${gw} patches) at its aspect, ${H}×${W} (${GH}×${GW}) at the model's; ${methods.length} methods`);
    await tab.context.close();
  });

  test('the worker keeps one resized model at a time and frees it with its model', async (t) => {
    const tab = await openPage(env);
    const { page } = tab;
    await page.goto(env.server.url);
    const labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    const wide = (await wideImage(page, labels.scenes[1].image)).buffer.toString('base64');
    const r = await page.evaluate(async ({ wideBase64 }) => {
      const { WorkerClient } = await import('./client.js');
      const client = new WorkerClient();
      const wideBlob = new Blob([Uint8Array.from(atob(wideBase64), (ch) => ch.charCodeAt(0))], { type: 'image/png' });
      // The same picture turned a quarter: another aspect, so another resized model.
      const bitmap = await createImageBitmap(wideBlob);
      const c = new OffscreenCanvas(bitmap.height, bitmap.width);
      const ctx = c.getContext('2d');
      ctx.rotate(Math.PI / 2);
      ctx.drawImage(bitmap, 0, -bitmap.height);
      const tallBlob = await c.convertToBlob({ type: 'image/png' });
      const model = { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } };
      const allocated = async () => (await client.call('stats')).allocatedBytes;
      const codeOf = (p) => p.then(() => 'ok', (e) => e.code);
      try {
        await client.call('init', { wasmUrl: new URL('./wasm/vitlens.js', location.href).href });
        await client.call('loadModel', model);
        const prepare = async (blob, inputSize) => {
          const out = await client.call('prepare', { source: { blob }, inputSize });
          await client.call('release', { image: out.image });
          return out;
        };
        const atModel = await prepare(wideBlob, 'model');
        const noCopy = await allocated();
        const first = await prepare(wideBlob, 'aspect');
        const oneCopy = await allocated();
        let tall = null;
        for (let i = 0; i < 10; i++) {
          tall = await prepare(tallBlob, 'aspect');
          await prepare(wideBlob, 'aspect');
        }
        const afterAlternating = await allocated();
        const badSize = await codeOf(client.call('prepare', { source: { blob: wideBlob }, inputSize: 'square' }));
        await client.call('loadModel', model);
        await prepare(wideBlob, 'model');
        const reloaded = await allocated();
        return {
          model: [atModel.info.imageH, atModel.info.imageW], aspect: first.aspect, wideAt: [first.info.imageH, first.info.imageW],
          tallAt: [tall.info.imageH, tall.info.imageW], tallAspect: tall.aspect, view: first.view.length,
          noCopy, oneCopy, afterAlternating, reloaded, badSize,
        };
      } finally {
        client.terminate();
      }
    }, { wideBase64: wide });
    const { H, W, h, w } = model;
    assert.deepEqual(r.model, [H, W]);
    assert.deepEqual(r.aspect, [h, w]);
    assert.deepEqual(r.wideAt, [h, w], 'prepare answers the info of the resized model');
    assert.equal(r.view, h * w * 4, 'what the model sees is at the resized size');
    assert.deepEqual(r.tallAt, r.tallAspect);
    assert.notDeepEqual(r.tallAt, r.wideAt);
    assert.equal(r.badSize, 'bad_argument');
    const copy = r.oneCopy - r.noCopy;
    t.diagnostic(`malloc in use: ${r.noCopy} bytes at the model's size, +${copy} with a resized copy, ` +
      `${r.afterAlternating - r.oneCopy} after 20 more resizes, ${r.reloaded - r.noCopy} after loading the model again`);
    assert.ok(copy > 100_000, `the resized copy holds the weights (${copy} bytes)`);
    assert.ok(Math.abs(r.afterAlternating - r.oneCopy) <= 64 * 1024, 'one resized copy at a time');
    assert.ok(Math.abs(r.reloaded - r.noCopy) <= 64 * 1024, 'loading a model frees the resized copy');
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a model that cannot be resized: the page says so and stays at the model\'s size', async () => {
    const tab = await openPage(env);
    const { page } = tab;
    // The worker, served with its engine's atInputSize made to fail (as it does for a lack of
    // memory or a limit).
    await page.route('**/worker.js', async (route) => {
      const res = await route.fetch();
      const body = `${await res.text()}
const initForTest = handlers.init;
handlers.init = async (input) => {
  const out = await initForTest(input);
  vitlens.Model.prototype.atInputSize = () => { throw new Error('limit: refused by the test'); };
  return out;
};
`;
      await route.fulfill({ response: res, body });
    });
    await page.goto(env.server.url);
    await page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
    const labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    await afterNewExplanation(page, async () => page.setInputFiles('#image-file', await wideImage(page, labels.scenes[1].image)));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');

    await afterNewExplanation(page, () => page.check('input[name=input-size][value=aspect]'));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    assert.ok(await page.isVisible('#error'), 'the error is shown');
    const text = await page.textContent('#error-text');
    assert.match(text, new RegExp(`could not be resized to the image's aspect \\(${model.h}×${model.w}\\).*refused by the test \\[limit\\]`));
    const { H, W, patch } = model;
    let s = await viewState(page);
    assert.equal(s.checked, 'model', 'the choice is back at the model\'s size');
    assert.equal(s.grid, `${H / patch}x${W / patch}`);

    // The page goes on: another method explains at the model's size, and the grid runs.
    await page.click('#error-close');
    const methods = await page.$$eval('#method option', (os) => os.map((o) => o.value));
    const shown = await page.$eval('#main-canvas', (c) => c.dataset.method);
    const other = methods.find((m) => m !== shown);
    await explainWith(page, other);
    s = await viewState(page);
    assert.equal(s.grid, `${H / patch}x${W / patch}`);
    await waitGridDone(page);
    for (const c of await page.$$eval('#grid .cell', (cs) => cs.map((c) => c.dataset.state))) assert.equal(c, 'done');
    await assertNoError(page, 'after the failed resize');
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });
});
