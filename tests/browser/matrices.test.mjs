// matrices.test.mjs — issue 17 item 1 in Debian's chromium: the "Whole matrices" view. Every
// value it shows, for cells picked with the keyboard, the mouse and a tap, is checked against the
// engine to 1e-6: the test starts its own worker (web/worker.js, the same engine build in the same
// browser) with the same model and scene and asks it for A, ∇A (teach), transformer-attribution's
// and grad-rollout's intermediates; for a head mean the shown terms are the engine's per-head
// values and the result is the engine's mean; the colour drawn in a cell is the colour map of the
// engine's value min-max normalised over the engine's matrix. Then a model with a distillation
// token (tests/fixtures/variants/distilled_hf): its CLS and DIST rows are labelled, and its values
// checked the same way. Screenshots at 1280×800 and 375×812 (touch) go to tests/artifacts/; the
// draw times are printed as diagnostics.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repo } from '../node/support.mjs';
import { artifacts, chooseTestModel, installTestEngine, launch, modelsDir, openAt, openWithDeitTiny, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the whole-matrices view in chromium', { skip }, () => {});

const TOL = 1e-6;
const close = (a, b) => Math.abs(a - b) <= TOL * Math.max(1, Math.abs(b));

// Opens the section with the keyboard (Tab to its summary, Enter) and waits for the matrix.
async function openView(page) {
  await page.focus('#mat-open > summary');
  await page.keyboard.press('Enter');
  await waitReady(page);
}

async function waitReady(page) {
  await page.waitForFunction(() => document.getElementById('mat-canvas').dataset.ready === 'true' ||
    !document.getElementById('error').hidden, null, { timeout: 120_000 });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
}

async function choose(page, quantity, block, head) {
  await page.selectOption('#mat-quantity', quantity);
  await page.selectOption('#mat-block', String(block));
  await page.selectOption('#mat-head', String(head));
  await page.waitForFunction(([q, b, h]) => {
    const d = document.getElementById('mat-canvas').dataset;
    return d.ready === 'true' && d.quantity === q && d.block === String(b) && d.head === String(h);
  }, [quantity, block, head], { timeout: 120_000 });
}

const readout = (page) => page.evaluate(() => {
  const box = document.getElementById('mat-readout');
  return { ...box.dataset, text: box.textContent, formula: box.querySelector('.mat-formula').textContent };
});

// The engine's own numbers: a fresh worker in the page with the same engine, model and scene
// (the model from /models/, or from the given files' bytes), and per cell what the view should show.
async function engineValues(page, { files = null, target }) {
  await installTestEngine(page);
  return page.evaluate(async ({ files, target }) => {
    const { call, init, prep, done } = await testEngine(files ?? {});
    const heads = await call('teach', { image: prep.image, target, grads: true });
    const ta = await call('explain', { image: prep.image, method: 'transformer-attribution', options: { target, intermediates: true } });
    const gr = await call('explain', { image: prep.image, method: 'grad-rollout', options: { target, intermediates: true } });
    done();
    const plain = (a) => Array.from(a);
    return {
      simd: init.simd, n: prep.info.tokens,
      attn: heads.attn.map((b) => b.map(plain)), grads: heads.grads.map((b) => b.map(plain)),
      ta: ta.intermediates.blocks.map((b) => ({ attn: plain(b.attn), grad: plain(b.grad), relevance: plain(b.relevance), step: plain(b.step), relevanceHeads: b.relevanceHeads.map(plain), productHeads: b.productHeads.map(plain) })),
      gr: gr.intermediates.blocks.map((b) => ({ step: plain(b.step), productHeads: b.productHeads.map(plain) })),
    };
  }, { files, target });
}

// The engine's matrix for the view's (quantity, block, head).
function engineMatrix(e, q, b, h) {
  const mean = h === 'mean';
  switch (q) {
    case 'attn': return mean ? e.ta[b].attn : e.attn[b][h];
    case 'grad': return mean ? e.ta[b].grad : e.grads[b][h];
    case 'relevance': return mean ? e.ta[b].relevance : e.ta[b].relevanceHeads[h];
    case 'gradxa': return mean ? e.gr[b].step : e.gr[b].productHeads[h];
    case 'gradxr': return mean ? e.ta[b].step : e.ta[b].productHeads[h];
    default: throw new Error(q);
  }
}

// Checks the readout of the cursor cell against the engine: the value (exactly, as float32), the
// value written in the formula (1e-6), for one head's product that it is max(0, ∇A·X) of the
// engine's per-head factors the formula writes (1e-6), and for a head mean its terms (the engine's
// per-head values) and that the engine's mean is δ_ij + Σ terms / H (1e-6).
function checkCell(r, e, heads) {
  const q = r.quantity;
  const b = Number(r.block);
  const h = r.head === 'mean' ? 'mean' : Number(r.head);
  const i = Number(r.i);
  const j = Number(r.j);
  const k = i * e.n + j;
  const want = engineMatrix(e, q, b, h)[k];
  const at = `${q} block ${b} head ${h} cell (${i}, ${j})`;
  assert.ok(close(Number(r.value), want), `${at}: ${r.value} vs the engine's ${want}`);
  const written = Number(/= (\S+)\s*(\(|$)/.exec(r.formula.slice(r.formula.lastIndexOf('= ')))[1]);
  assert.ok(close(written, want), `${at}: the formula writes ${written}, the engine has ${want}`);
  if (h !== 'mean' && (q === 'gradxa' || q === 'gradxr')) {
    const x = q === 'gradxa' ? e.attn[b][h][k] : e.ta[b].relevanceHeads[h][k];
    assert.ok(close(want, Math.max(0, e.grads[b][h][k] * x)), `${at}: the engine's product ${want} vs max(0, ∇A·X) of its factors`);
  }
  if (h === 'mean') {
    const terms = JSON.parse(r.terms);
    assert.equal(terms.length, heads, `${at}: one term per head`);
    terms.forEach((t, hh) => assert.ok(close(t, engineMatrix(e, q, b, hh)[k]), `${at}: term ${hh}`));
    const sum = terms.reduce((a, x) => a + x, 0) / heads + ((q === 'gradxa' || q === 'gradxr') && i === j ? 1 : 0);
    assert.ok(close(sum, want), `${at}: the engine's mean ${want} vs the mean of the terms ${sum}`);
  }
  return at;
}

// The colour drawn at the centre of the cursor cell equals the colour map of the engine's value
// normalised over the engine's matrix (±1 per channel for rounding at a LUT boundary).
async function checkColour(page, e) {
  const d = await page.$eval('#mat-canvas', (c) => ({ ...c.dataset }));
  const mat = engineMatrix(e, d.quantity, Number(d.block), d.head === 'mean' ? 'mean' : Number(d.head));
  let min = Infinity;
  let max = -Infinity;
  mat.forEach((v, k) => {
    if (d.offDiagonal === 'true' && k % (e.n + 1) === 0) return;
    min = Math.min(min, v);
    max = Math.max(max, v);
  });
  const k = Number(d.i) * e.n + Number(d.j);
  const got = await page.evaluate(async ({ v, min, max }) => {
    const { COLORMAPS } = await import('/render.js');
    const c = document.getElementById('mat-canvas');
    const d = c.dataset;
    const dpr = c.width / c.clientWidth;
    const s = Number(d.scale);
    const x = (44 + (Number(d.j) + 0.5 - Number(d.x0)) * s) * dpr;
    const y = (24 + (Number(d.i) + 0.5 - Number(d.y0)) * s) * dpr;
    const px = c.getContext('2d').getImageData(Math.floor(x), Math.floor(y), 1, 1).data;
    const lut = COLORMAPS[d.cmap];
    const t = Math.round(Math.min(1, Math.max(0, (v - min) / (max > min ? max - min : 1))) * 255) * 3;
    return { px: [px[0], px[1], px[2]], want: [lut[t], lut[t + 1], lut[t + 2]], scale: s };
  }, { v: mat[k], min, max });
  assert.ok(got.scale >= 8, `zoomed in far enough to read a cell (${got.scale} px)`);
  got.px.forEach((c, ch) => assert.ok(Math.abs(c - got.want[ch]) <= 1, `colour ${got.px} vs ${got.want}`));
  assert.ok(close(Number(d.min), min) && close(Number(d.max), max), 'the colour range is the engine matrix\'s');
}

describe('the whole-matrices view', { skip }, () => {
  let env;
  before(async () => {
    env = await launch({ models: modelsDir().dir });
  });
  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('1280×800, keyboard and mouse: every quantity per head and its head mean equals the engine\'s', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const info = await page.textContent('#model-info');
    const depth = Number(/(\d+) blocks/.exec(info)[1]);
    const heads = Number(/× (\d+) heads/.exec(info)[1]);
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    const t0 = Date.now();
    await openView(page);
    t.diagnostic(`first matrix (A, block 0, head 0) shown ${Date.now() - t0} ms after opening; draw ${await page.getAttribute('#mat-canvas', 'data-draw-ms')} ms`);
    const e = await engineValues(page, { target });
    assert.equal(Number(await page.getAttribute('#mat-canvas', 'data-n')), e.n);

    // Keyboard: Home, then arrows; every quantity, a head and the mean, the first and last block.
    await page.focus('#mat-canvas');
    await page.keyboard.press('Home');
    for (let k = 0; k < 3; k++) await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    const drawMs = [];
    for (const q of ['attn', 'grad', 'relevance', 'gradxa', 'gradxr']) {
      for (const [b, h] of [[0, heads - 1], [depth - 1, 'mean'], [depth - 1, 0]]) {
        await choose(page, q, b, h);
        drawMs.push(Number(await page.getAttribute('#mat-canvas', 'data-draw-ms')));
        await page.focus('#mat-canvas');
        await page.keyboard.press('ArrowRight');
        const r = await readout(page);
        assert.equal(r.i, '2');
        assert.equal(r.j, '4');
        checkCell(r, e, heads);
        await page.keyboard.press('ArrowLeft');
      }
    }
    t.diagnostic(`draw times (ms, n = ${e.n}, engine build ${e.simd}): median ${drawMs.sort((a, b) => a - b)[drawMs.length >> 1]}, max ${Math.max(...drawMs)}`);

    // The mean of (∇A ⊙ R_A)⁺ on the diagonal and off it, and a CLS cell.
    await choose(page, 'gradxr', depth - 1, 'mean');
    await page.focus('#mat-canvas');
    await page.keyboard.press('End');
    checkCell(await readout(page), e, heads);
    await page.keyboard.press('Home');
    const cls = await readout(page);
    checkCell(cls, e, heads);
    assert.match(cls.text, /query i = 0: the CLS token; key j = 0: the CLS token/);
    assert.match(cls.formula, /^\(I \+ Ā_\d+\)\[0, 0\] = δ_ij \+ mean_h \(∇A ⊙ R_A\)⁺ = 1 \+ \(/);

    // Zoom with the keyboard, the cell's colour; pan with Shift+arrows.
    await choose(page, 'attn', 0, 0);
    await page.focus('#mat-canvas');
    for (let k = 0; k < 5; k++) await page.keyboard.press('+');
    for (let k = 0; k < 6; k++) await page.keyboard.press('ArrowDown');
    for (let k = 0; k < 7; k++) await page.keyboard.press('ArrowRight');
    await page.waitForTimeout(50);
    checkCell(await readout(page), e, heads);
    await checkColour(page, e);
    const before = await page.$eval('#mat-canvas', (c) => Number(c.dataset.x0));
    await page.keyboard.press('Shift+ArrowRight');
    await page.waitForTimeout(50);
    assert.ok(await page.$eval('#mat-canvas', (c) => Number(c.dataset.x0)) > before, 'Shift+ArrowRight pans');
    await page.keyboard.press('0');

    // The mouse: hovering a cell names it, outlines its patches on the image, and matches the engine.
    const box = await page.locator('#mat-canvas').boundingBox();
    const d = await page.$eval('#mat-canvas', (c) => ({ ...c.dataset }));
    const [ci, cj] = [e.n - 3, 1 + ((e.n / 2) | 0)];
    await page.mouse.move(box.x + 44 + (cj + 0.5) * Number(d.scale), box.y + 24 + (ci + 0.5) * Number(d.scale));
    await page.waitForFunction(([i, j]) => document.getElementById('mat-readout').dataset.i === String(i) &&
      document.getElementById('mat-readout').dataset.j === String(j), [ci, cj]);
    checkCell(await readout(page), e, heads);
    const prefix = e.n - Number(/\((\d+)×(\d+) patches\)/.exec(info).slice(1).reduce((a, x) => a * x, 1));
    assert.equal(await page.getAttribute('#mat-image', 'data-query-patch'), String(ci - prefix));
    assert.equal(await page.getAttribute('#mat-image', 'data-key-patch'), String(cj - prefix));
    await page.mouse.wheel(0, -400);
    await page.waitForTimeout(100);
    assert.ok(Number(await page.getAttribute('#mat-canvas', 'data-scale')) > Number(d.scale), 'the wheel zooms in');
    await page.mouse.move(box.x + 44 + (cj + 0.5) * Number(d.scale), box.y + 24 + (ci + 0.5) * Number(d.scale));

    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('section[aria-labelledby=h-mat]').screenshot({ path: path.join(artifacts, 'matrices-1280x800.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('375×812 touch: a tap picks a cell; Attr and a norm-based stage draw', async (t) => {
    const tab = await openAt(env, { width: 375, height: 812 }, true);
    const { page } = tab;
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    // The sections above settle first (the grid and the per-head views change the page's height).
    await waitGridDone(page);
    await page.waitForFunction(() => document.documentElement.dataset.teachKey);
    await openView(page);
    const e = await engineValues(page, { target });
    const heads = e.attn[0].length;
    await choose(page, 'gradxr', 0, 'mean');
    const box = await page.locator('#mat-canvas').boundingBox();
    assert.ok(box.width <= 375, `the matrix fits the screen (${box.width} px)`);
    const s = Number(await page.getAttribute('#mat-canvas', 'data-scale'));
    await page.touchscreen.tap(box.x + 44 + 5.5 * s, box.y + 24 + 3.5 * s);
    await page.waitForFunction(() => document.getElementById('mat-readout').dataset.i === '3');
    const r = await readout(page);
    assert.equal(r.j, '5');
    checkCell(r, e, heads);
    for (const q of ['attattr', 'norm:layer']) {
      await page.selectOption('#mat-quantity', q);
      await page.waitForFunction((qq) => !document.getElementById('error').hidden || (document.getElementById('mat-canvas').dataset.quantity === qq &&
        document.getElementById('mat-canvas').dataset.ready === 'true'), q, { timeout: 180_000 });
      if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
      t.diagnostic(`${q}: draw ${await page.getAttribute('#mat-canvas', 'data-draw-ms')} ms; ${await page.textContent('#mat-note')}`);
      assert.ok(Number.isFinite(Number((await readout(page)).value)), `${q}: a value`);
    }

    // A one-finger drag pans, a two-finger pinch zooms (pointer events as a touch screen sends them).
    const touch = (type, id, x, y) => page.$eval('#mat-canvas', (c, [type, id, x, y]) => c.dispatchEvent(new PointerEvent(type, {
      pointerId: id, pointerType: 'touch', clientX: x, clientY: y, bubbles: true, isPrimary: id === 1,
    })), [type, id, x, y]);
    const viewOf = () => page.$eval('#mat-canvas', (c) => ({ scale: Number(c.dataset.scale), x0: Number(c.dataset.x0), y0: Number(c.dataset.y0) }));
    const frame = () => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const b2 = await page.locator('#mat-canvas').boundingBox();
    const [cx, cy] = [b2.x + b2.width / 2, b2.y + b2.height / 2];
    const v0 = await viewOf();
    await touch('pointerdown', 1, cx - 20, cy);
    await touch('pointerdown', 2, cx + 20, cy);
    for (let k = 1; k <= 4; k++) {
      await touch('pointermove', 1, cx - 20 - 15 * k, cy);
      await touch('pointermove', 2, cx + 20 + 15 * k, cy);
    }
    await touch('pointerup', 1, cx - 80, cy);
    await touch('pointerup', 2, cx + 80, cy);
    await frame();
    const v1 = await viewOf();
    assert.ok(v1.scale > v0.scale * 2, `a pinch apart zooms in (${v0.scale} → ${v1.scale} px per cell)`);
    await touch('pointerdown', 1, cx, cy);
    for (let k = 1; k <= 4; k++) await touch('pointermove', 1, cx - 15 * k, cy - 15 * k);
    await touch('pointerup', 1, cx - 60, cy - 60);
    await frame();
    const v2 = await viewOf();
    assert.ok(v2.x0 > v1.x0 && v2.y0 > v1.y0, `a drag up and left pans right and down (${JSON.stringify(v1)} → ${JSON.stringify(v2)})`);
    assert.equal((await readout(page)).i, '3', 'a drag does not move the cursor');

    // The phone's screen as it looks with the matrix open.
    await page.$eval('#h-mat', (h) => h.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: path.join(artifacts, 'matrices-375x812.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a DeiT-tiny-shaped model (197 tokens, 12 blocks, 3 heads): draw times, and a cell equals the engine\'s', async (t) => {
    const { tab, page, dir, file } = await openWithDeitTiny(env);
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    // The view is opened while one of the grid's long methods runs (less than half done, so that it
    // does not end first): its request stops that method, which the grid asks for again behind it
    // (views/grid.js) and still completes.
    const running = await page.waitForFunction(() => [...document.querySelectorAll('#grid .cell[data-state="running"]')]
      .find((c) => parseInt(c.querySelector('.cell-ms').textContent, 10) < 50)?.dataset.method, null, { timeout: 120_000 });
    const stopped = await running.jsonValue();
    const t0 = Date.now();
    await openView(page);
    t.diagnostic(`DeiT-tiny: A block 0 head 0 shown ${Date.now() - t0} ms after opening, the grid's ${stopped} running (engine + draw); draw ${await page.getAttribute('#mat-canvas', 'data-draw-ms')} ms`);
    const restarts = await page.$eval(`#grid .cell[data-method="${stopped}"]`, (c) => ({ n: Number(c.dataset.restarts ?? 0), state: c.dataset.state }));
    assert.ok(restarts.n >= 1, `the grid's ${stopped} was stopped for the view's request (restarts ${restarts.n}, state ${restarts.state})`);
    assert.equal(await page.getAttribute('#mat-canvas', 'data-n'), '197');
    assert.equal(await page.locator('#mat-block option').count(), 12);
    assert.equal(await page.locator('#mat-head option').count(), 4, 'three heads and their mean');
    const timings = [];
    for (const q of ['grad', 'gradxr', 'gradxa']) {
      const t1 = Date.now();
      await choose(page, q, 11, 'mean');
      timings.push(`${q}: ${Date.now() - t1} ms to show (${await page.textContent('#mat-note')})`);
    }
    t.diagnostic(`DeiT-tiny, block 11 head mean: ${timings.join('; ')}`);
    await choose(page, 'attn', 5, 1);
    await page.focus('#mat-canvas');
    for (let k = 0; k < 3; k++) await page.keyboard.press('+');
    await page.keyboard.press('End');
    const r = await readout(page);
    // The engine's value of that cell, from a worker of the test's own with the same file.
    await chooseTestModel(page, file);
    await installTestEngine(page);
    const want = await page.evaluate(async ({ target, k }) => {
      const { call, prep, done } = await testEngine({ input: true });
      const heads = await call('teach', { image: prep.image, target, grads: false });
      done();
      return heads.attn[5][1][k];
    }, { target, k: 197 * 197 - 1 });
    assert.equal(r.i, '196');
    assert.ok(close(Number(r.value), want), `A_5,1[196, 196]: ${r.value} vs the engine's ${want}`);
    await page.locator('section[aria-labelledby=h-mat]').screenshot({ path: path.join(artifacts, 'matrices-deit-tiny.png') });
    // Every method of the grid still completes, the stopped one included.
    await page.waitForFunction(() => [...document.querySelectorAll('#grid .cell')].every((c) => c.dataset.state === 'done' || c.dataset.state === 'error'), null, { timeout: 240_000 });
    for (const c of await page.$$eval('#grid .cell', (cs) => cs.map((c) => ({ method: c.dataset.method, state: c.dataset.state, title: c.title }))))
      assert.equal(c.state, 'done', `the grid's ${c.method}: ${c.title}`);
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a model with a distillation token: CLS and DIST rows labelled, values equal the engine\'s', async () => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const dir = path.join(repo, 'tests/fixtures/variants/distilled_hf');
    const before = Number(await page.evaluate(() => document.documentElement.dataset.explanations ?? 0));
    await page.setInputFiles('#model-file', [path.join(dir, 'model.safetensors'), path.join(dir, 'config.json')]);
    await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
      !document.getElementById('error').hidden, before, { timeout: 60_000 });
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    await openView(page);
    const e = await engineValues(page, {
      target,
      files: { checkpoint: [...fs.readFileSync(path.join(dir, 'model.safetensors'))], config: fs.readFileSync(path.join(dir, 'config.json'), 'utf8') },
    });
    const heads = e.attn[0].length;
    const legend = await page.textContent('#mat-legend');
    assert.match(legend, /0: CLS \(the CLS token\)/);
    assert.match(legend, /1: DIST \(the distillation token\)/);
    await choose(page, 'attn', 0, 'mean');
    await page.focus('#mat-canvas');
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowDown');
    let r = await readout(page);
    assert.match(r.text, /query i = 1: the distillation token; key j = 0: the CLS token/);
    checkCell(r, e, heads);
    assert.match(await page.textContent('#mat-image-note'), /query: the distillation token \(no patch\); key: the CLS token \(no patch\)/);
    await choose(page, 'gradxr', 1, 'mean');
    await page.focus('#mat-canvas');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    r = await readout(page);
    checkCell(r, e, heads);
    assert.equal(await page.getAttribute('#mat-image', 'data-key-patch'), '0');
    await page.locator('section[aria-labelledby=h-mat]').screenshot({ path: path.join(artifacts, 'matrices-distilled.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });
});
