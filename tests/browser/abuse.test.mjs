// abuse.test.mjs — the page under abuse (issue 8): every file of the bad-input catalogue
// (tests/catalogue/catalogue.mjs) dropped on the page gives a visible error with its code, the
// loaded model stays, and a gallery scene still explains afterwards; the worker refuses the
// catalogue's out-of-range options with their codes; and 1000 explanations in a row through the
// worker do not grow the wasm heap (figures printed as test diagnostics).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCatalogue } from '../catalogue/catalogue.mjs';
import { tmpDir } from '../node/support.mjs';
import { afterNewExplanation, explanationCount, launch, modelsDir, openApp, skipReason } from './harness.mjs';

const skip = skipReason();
if (skip) test('the page under abuse', { skip }, () => {});

// The bound of the 1000-explanation test: the heap may not grow at all (it grows in steps of
// megabytes, so any growth is a leak or a cache without bound), and the bytes malloc holds may
// differ by at most this much between the 10th and the 1000th explanation (a leak of 70 bytes per
// explanation would pass it).
const MAX_ALLOCATED_DRIFT = 64 * 1024;

// Drops files on the page as a user would: a DataTransfer of Files in a 'drop' event.
async function dropFiles(page, files) {
  const payload = files.map((f) => ({ name: path.basename(f), base64: fs.readFileSync(f).toString('base64') }));
  const dataTransfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const { name, base64 } of list) {
      const bin = atob(base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      dt.items.add(new File([bytes], name));
    }
    return dt;
  }, payload);
  await page.dispatchEvent('body', 'drop', { dataTransfer });
  await dataTransfer.dispose();
}

describe('the page under abuse', { skip }, () => {
  let env;
  let models;
  let tab;
  let labels;
  let dir;
  let catalogue;

  before(async () => {
    models = modelsDir();
    labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    dir = tmpDir();
    catalogue = makeCatalogue(dir);
    env = await launch({ models: models.dir });
    tab = await openApp(env);
  });

  after(async () => {
    await env?.browser.close();
    await env?.server.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('each catalogue file dropped on the page gives a visible error, and a gallery scene still explains', async (t) => {
    const { page } = tab;
    const info = await page.textContent('#model-info');
    const fileCases = catalogue.cases.filter((c) => c.entry !== 'options');
    let n = 0;
    for (const c of fileCases) {
      assert.equal(await page.isVisible('#error'), false, `${c.id}: no error is shown before the drop`);
      const files = Object.values(c.files).map((f) => path.join(dir, f));
      if (c.page.ok) {
        const before = await explanationCount(page);
        await dropFiles(page, files);
        await page.waitForFunction((k) => Number(document.documentElement.dataset.explanations ?? 0) > k ||
          !document.getElementById('error').hidden, before, { timeout: 60_000 });
        assert.equal(await page.isVisible('#error'), false, `${c.id}: ${await page.textContent('#error-text')}`);
        assert.match(await page.textContent('#labels'), new RegExp(c.files.image.replace('.', '\\.')), c.id);
      } else {
        await dropFiles(page, files);
        await page.waitForSelector('#error:not([hidden])', { timeout: 30_000 });
        const text = await page.textContent('#error-text');
        assert.ok(text.endsWith(`[${c.page.code}]`), `${c.id}: the page shows "${text}", expected code ${c.page.code}`);
        assert.match(text, new RegExp(`^Could not (load|open) ${c.id}`), c.id);
        // Model files reach the engine: the page shows the engine's own message.
        if (c.entry === 'model' || c.entry === 'checkpoint') assert.ok(text.includes(c.expect.message), `${c.id}: "${text}"`);
        assert.equal(await page.textContent('#model-info'), info, `${c.id}: the loaded model stays`);
      }
      const thumb = n++ % labels.scenes.length;
      await afterNewExplanation(page, () => page.click(`#gallery .thumb >> nth=${thumb}`));
      assert.equal(await page.isVisible('#error'), false, `${c.id}: the gallery scene explains without error`);
    }
    t.diagnostic(`${fileCases.length} catalogue files dropped`);
    assert.ok(fileCases.length >= 30);
    assert.deepEqual(tab.consoleErrors, []);
    assert.deepEqual(tab.offsite, []);
  });

  test('the worker refuses the catalogue\'s out-of-range options with their codes', async () => {
    const { page } = tab;
    const list = catalogue.cases.filter((c) => c.entry === 'options' && c.options.method)
      .map((c) => ({ id: c.id, method: c.options.method, options: (({ method, ...o }) => o)(c.options), code: c.expect.code }));
    // The catalogue's options are out of range for its base model, which a worker of its own loads.
    const bytes = (name) => fs.readFileSync(path.join(dir, name)).toString('base64');
    const out = await page.evaluate(async ({ cases, model, image }) => {
      const { WorkerClient } = await import('./client.js');
      const blob = (base64) => new Blob([Uint8Array.from(atob(base64), (ch) => ch.charCodeAt(0))]);
      const client = new WorkerClient();
      try {
        await client.call('init', { wasmUrl: new URL('./wasm/vitlens.js', location.href).href });
        await client.call('loadModel', { source: { blob: blob(model) } });
        const { image: id } = await client.call('prepare', { source: { blob: blob(image) } });
        const codeOf = (p) => p.then(() => 'ok', (e) => e.code);
        const results = [];
        for (const c of cases) results.push({ id: c.id, got: await codeOf(client.call('explain', { image: id, method: c.method, options: c.options })), want: c.code });
        results.push({ id: 'a valid request afterwards', got: await codeOf(client.call('explain', { image: id, method: 'rollout', options: {} })), want: 'ok' });
        return results;
      } finally {
        client.terminate();
      }
    }, { cases: list, model: bytes(catalogue.base.model), image: bytes(catalogue.base.image) });
    for (const r of out) assert.equal(r.got, r.want, r.id);
    assert.ok(out.length >= 10);
  });

  test('1000 explanations in a row do not grow the wasm heap', async (t) => {
    const { page } = tab;
    const images = labels.scenes.map((s) => s.image);
    const r = await page.evaluate(async (list) => {
      const { WorkerClient } = await import('./client.js');
      const client = new WorkerClient();
      try {
        await client.call('init', { wasmUrl: new URL('./wasm/vitlens.js', location.href).href });
        const { info } = await client.call('loadModel', { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } });
        const blobs = await Promise.all(list.map(async (img) => (await fetch(`./models/gallery/${img}`)).blob()));
        const stats = {};
        const t0 = performance.now();
        // As the page does: a new image is prepared (and the one it replaces released), then
        // explained; here for each class in turn, and the image changes with every class cycle.
        let image = null;
        for (let i = 1; i <= 1000; i++) {
          const target = (i - 1) % info.classes;
          if (target === 0) {
            if (image !== null) await client.call('release', { image });
            ({ image } = await client.call('prepare', { source: { blob: blobs[Math.floor((i - 1) / info.classes) % blobs.length] } }));
          }
          const ex = await client.call('explain', { image, method: 'raw-attention', options: { target } });
          if (ex.target !== target || !(ex.pixelMap.length > 0)) throw new Error(`explanation ${i} is wrong`);
          if (i === 10 || i === 1000) stats[i] = await client.call('stats');
        }
        return { stats, ms: performance.now() - t0, classes: info.classes };
      } finally {
        client.terminate();
      }
    }, images);
    const mib = (b) => `${(b / 2 ** 20).toFixed(2)} MiB`;
    t.diagnostic(`wasm heap after 10 explanations: ${r.stats[10].heapBytes} bytes (${mib(r.stats[10].heapBytes)}), ` +
      `malloc in use ${r.stats[10].allocatedBytes} bytes`);
    t.diagnostic(`wasm heap after 1000 explanations: ${r.stats[1000].heapBytes} bytes (${mib(r.stats[1000].heapBytes)}), ` +
      `malloc in use ${r.stats[1000].allocatedBytes} bytes; ${(r.ms / 1000).toFixed(2)} ms per explanation`);
    assert.equal(r.stats[1000].heapBytes, r.stats[10].heapBytes, 'the wasm heap did not grow between the 10th and the 1000th explanation');
    const drift = r.stats[1000].allocatedBytes - r.stats[10].allocatedBytes;
    assert.ok(Math.abs(drift) <= MAX_ALLOCATED_DRIFT, `malloc in use changed by ${drift} bytes (bound ${MAX_ALLOCATED_DRIFT})`);
    assert.deepEqual(tab.consoleErrors, []);
  });
  test('a cancelled prepare leaves no image behind in the worker', async (t) => {
    const { page } = tab;
    const r = await page.evaluate(async (img) => {
      const { WorkerClient } = await import('./client.js');
      const client = new WorkerClient();
      try {
        await client.call('init', { wasmUrl: new URL('./wasm/vitlens.js', location.href).href });
        await client.call('loadModel', { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } });
        const blob = await (await fetch(`./models/gallery/${img}`)).blob();
        const { image } = await client.call('prepare', { source: { blob } });
        await client.call('release', { image });
        const before = (await client.call('stats')).allocatedBytes;
        const outcomes = { cancelledInWorker: 0, droppedInPage: 0, releasedByClient: 0 };
        const post = client.worker.postMessage.bind(client.worker);
        client.worker.postMessage = (msg, transfer) => {
          if (msg.type === 'release') outcomes.releasedByClient++;
          return post(msg, transfer);
        };
        for (let i = 0; i < 20; i++) {
          // Cancelled while the worker prepares it (the worker frees the image) ...
          const a = client.call('prepare', { source: { blob } });
          client.cancel(a.id);
          await a.then(() => { throw new Error('a cancelled prepare resolved'); }, (e) => { if (e.code === 'cancelled') outcomes.cancelledInWorker++; });
          // ... and after the worker answered, before this thread read the answer (the client
          // drops it and releases the image).
          const b = client.call('prepare', { source: { blob } });
          for (const end = performance.now() + 300; performance.now() < end;);
          client.cancel(b.id);
          await b.then(() => { throw new Error('a cancelled prepare resolved'); }, (e) => { if (e.code === 'cancelled') outcomes.droppedInPage++; });
        }
        await client.call('stats'); // the releases the client sent are answered before this
        return { before, after: (await client.call('stats')).allocatedBytes, outcomes };
      } finally {
        client.terminate();
      }
    }, labels.scenes[0].image);
    t.diagnostic(`malloc in use ${r.before} → ${r.after} bytes after 40 cancelled prepares (${JSON.stringify(r.outcomes)})`);
    assert.equal(r.outcomes.cancelledInWorker, 20);
    assert.equal(r.outcomes.droppedInPage, 20);
    assert.ok(r.outcomes.releasedByClient >= 1, 'the page-side drop was exercised (a prepare answered during the 300 ms wait)');
    assert.ok(Math.abs(r.after - r.before) <= MAX_ALLOCATED_DRIFT, `malloc in use changed by ${r.after - r.before} bytes (bound ${MAX_ALLOCATED_DRIFT})`);
    assert.deepEqual(tab.consoleErrors, []);
  });
});
