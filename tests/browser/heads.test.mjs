// heads.test.mjs — issue 17 item 2 in Debian's chromium: "Heads off by hand". Heads are switched
// off with the keyboard (arrows, Space, Enter, Home on a block's button, "All on") and by touch;
// every number the section draws is checked against the engine to 1e-6: the test starts its own
// worker (web/worker.js, the same engine build in the same browser) with the same model and scene
// and asks it for the masked prediction (`mask`), the masked map (`explain` of that handle) and
// the three pruning curves (`prune`); the ranked curves are also checked against the native CLI
// (`vitlens heads MODEL IMAGE --curve … --json`, 1e-5: another build's rounding). Models: the
// shipped one (1280×800 and 375×812 touch; screenshots into tests/artifacts/), a DeiT-tiny-shaped
// one (12 blocks × 3 heads, 197 tokens), a 3 blocks × 5 heads model on a 5 × 7 patch grid
// (Hugging Face names), and models with prefix tokens (registers, a distillation token). The draw
// and compute times are printed as diagnostics.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeCheckpoint } from '../node/checkpoints.mjs';
import { nativeCli, repo, tmpDir } from '../node/support.mjs';
import { artifacts, chooseTestModel, installTestEngine, launch, loadModelFiles, modelsDir, openAt, openWithDeitTiny, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the heads-off view in chromium', { skip }, () => {});

const TOL = 1e-6;
const close = (a, b, tol = TOL) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

// Opens the section with the keyboard (its summary, Enter) and waits until everything is drawn.
async function openView(page) {
  await page.focus('#heads-open > summary');
  await page.keyboard.press('Enter');
  await waitDrawn(page, null);
}

// Waits until the section shows `mask` (a string of 0/1, or null: whatever it has) with both ranked curves.
async function waitDrawn(page, mask) {
  await page.waitForFunction((m) => {
    if (!document.getElementById('error').hidden) return true;
    const d = document.getElementById('heads-section').dataset;
    return d.ready === 'true' && (m === null || (d.shownMask === m && d.mask === m));
  }, mask, { timeout: 240_000 });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
}

// What the section shows: its mask, clicks, the listed classes, the map, the curves' points.
const shown = (page) => page.evaluate(() => {
  const d = document.getElementById('heads-section').dataset;
  const series = {};
  for (const g of document.querySelectorAll('#heads-curve g.series')) {
    series[g.dataset.key] = [...g.querySelectorAll('circle')].map((c) => ({ x: Number(c.dataset.x), y: Number(c.dataset.y), top: Number(c.dataset.top) }));
  }
  return {
    mask: d.mask, clicks: JSON.parse(d.clicks), target: Number(d.target), drawMs: Number(d.drawMs), computeMs: Number(d.computeMs), method: d.method,
    classes: [...document.querySelectorAll('#heads-pred li')].map((li) => ({ cls: Number(li.dataset.class), prob: Number(li.dataset.prob), delta: Number(li.dataset.delta) })),
    tokenMap: JSON.parse(document.getElementById('heads-map').dataset.tokenMap ?? '[]'),
    pressed: [...document.querySelectorAll('#heads-grid button.heads-head')].map((b) => b.getAttribute('aria-pressed')),
    blocks: [...document.querySelectorAll('#heads-grid button.heads-block')].map((b) => b.getAttribute('aria-pressed')),
    series,
  };
});

// The engine's own numbers for what the section should show: a fresh worker in the page with the
// same engine, model (the shipped one, the .vitl in #test-model with `vitl`, or a checkpoint's
// files) and scene.
async function engineValues(page, { files = null, vitl = false, mask, clicks, target, method }) {
  await installTestEngine(page);
  return page.evaluate(async ({ files, vitl, mask, clicks, target, method }) => {
    const { call, prep, done } = await testEngine(files ?? { input: vitl });
    const out = { full: prep.predictions.map((p) => p.prob) };
    const m = await call('mask', { image: prep.image, mask, top: 5 });
    out.masked = m.predictions.map((p) => p.prob);
    out.top = m.top.map((p) => p.class);
    const info = await call('explain', { image: m.image, method, options: { target } }).catch(() => call('explain', { image: m.image, method, options: {} }));
    out.tokenMap = Array.from(info.tokenMap);
    out.attattr = (await call('prune', { image: prep.image, ranking: 'attattr', target })).prob;
    out.confidence = (await call('prune', { image: prep.image, ranking: 'attention-confidence', target })).prob;
    const mine = await call('prune', { image: prep.image, order: clicks, target });
    out.clicks = mine.prob;
    out.clicksTop = mine.top;
    done();
    return out;
  }, { files, vitl, mask, clicks, target, method });
}

// Every drawn number against the engine's, to 1e-6.
function checkAgainst(s, e, where) {
  assert.ok(s.classes.length >= 1, `${where}: classes listed`);
  for (const c of s.classes) {
    assert.ok(close(c.prob, e.masked[c.cls]), `${where}: p(${c.cls}) ${c.prob} vs the engine's ${e.masked[c.cls]}`);
    assert.ok(close(c.delta, e.masked[c.cls] - e.full[c.cls]), `${where}: Δp(${c.cls}) ${c.delta} vs the engine's ${e.masked[c.cls] - e.full[c.cls]}`);
  }
  const listed = s.classes.map((c) => c.cls);
  assert.deepEqual(listed.slice(0, e.top.length), e.top, `${where}: the engine's top classes, in its order`);
  assert.equal(s.tokenMap.length, e.tokenMap.length, `${where}: the map's size`);
  const scale = Math.max(...e.tokenMap.map(Math.abs));
  s.tokenMap.forEach((v, i) => assert.ok(Math.abs(v - e.tokenMap[i]) <= TOL * Math.max(scale, 1e-30), `${where}: map[${i}] ${v} vs ${e.tokenMap[i]}`));
  for (const [key, want] of [['attattr', e.attattr], ['attention-confidence', e.confidence], ['clicks', e.clicks]]) {
    const pts = s.series[key];
    assert.ok(pts, `${where}: the ${key} curve is drawn`);
    assert.equal(pts.length, want.length, `${where}: ${key} has ${want.length} points`);
    pts.forEach((p, k) => {
      assert.equal(p.x, k);
      assert.ok(close(p.y, want[k]), `${where}: ${key} at k = ${k}: ${p.y} vs the engine's ${want[k]}`);
    });
  }
  s.series.clicks.forEach((p, k) => assert.equal(p.top, e.clicksTop[k], `${where}: the clicks' top-1 at ${k}`));
  // The clicks' last point is the masked model's probability of the class explained.
  assert.ok(close(s.series.clicks.at(-1).y, e.masked[s.target]), `${where}: the clicks' curve ends at the masked prediction`);
}

const maskString = (depth, heads, off) => {
  const m = new Array(depth * heads).fill(1);
  for (const f of off) m[f] = 0;
  return m.join('');
};

describe('the heads-off view', { skip }, () => {
  let env;
  before(async () => {
    env = await launch({ models: modelsDir().dir });
  });
  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('1280×800, the keyboard alone: heads and a block off, every number equals the engine\'s', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const info = await page.textContent('#model-info');
    const depth = Number(/(\d+) blocks/.exec(info)[1]);
    const heads = Number(/× (\d+) heads/.exec(info)[1]);
    const t0 = Date.now();
    await openView(page);
    t.diagnostic(`shipped model (${depth} × ${heads} heads): the section drawn ${Date.now() - t0} ms after opening (both ranked curves included)`);
    let s = await shown(page);
    assert.equal(s.pressed.length, depth * heads);
    assert.ok(s.pressed.every((p) => p === 'true') && s.blocks.every((p) => p === 'true'), 'every head on at first');
    assert.equal(s.series.clicks.length, 1, 'no click yet: one point');

    // The grid is one tab stop (block 0, head 0); ArrowRight, Space: head 0.1 off.
    await page.focus('#heads-grid button[tabindex="0"]');
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'block 0, head 0: on');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Space');
    // Two rows down, Enter: head 2.1 off; End, then Home: the block button; Space: block 2 off.
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.keyboard.press('End');
    assert.equal(await page.evaluate(() => document.activeElement.dataset.head), String(heads - 1));
    await page.keyboard.press('Home');
    assert.equal(await page.evaluate(() => document.activeElement.className), 'heads-block');
    await page.keyboard.press('Space');
    const clicks = [1, 2 * heads + 1, ...Array.from({ length: heads }, (_, h) => 2 * heads + h).filter((f) => f !== 2 * heads + 1)];
    const want = maskString(depth, heads, clicks);
    const t1 = Date.now();
    await waitDrawn(page, want);
    t.diagnostic(`three key presses later, the masked prediction, map and curve drawn ${Date.now() - t1} ms after the last (debounce ${150} ms included)`);
    s = await shown(page);
    assert.deepEqual(s.clicks, clicks, 'the clicks in the order switched off');
    assert.equal(s.blocks[2], 'false');
    assert.equal(s.blocks[0], 'mixed');
    assert.equal(s.pressed[1], 'false');
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    assert.equal(s.target, target, 'the class of the Explanation view');
    const e = await engineValues(page, { mask: want.split('').map(Number), clicks, target, method: s.method });
    checkAgainst(s, e, 'shipped model');
    t.diagnostic(`shipped model: draw ${s.drawMs} ms; the masked prediction, map (${s.method}) and clicks' curve ${s.computeMs} ms from request to answer`);

    // The ranked curves against the native CLI (another build: 1e-5).
    const scene = JSON.parse(fs.readFileSync(path.join(modelsDir().dir, 'gallery/labels.json'), 'utf8')).scenes[0].image;
    const cli = JSON.parse(nativeCli('heads', path.join(modelsDir().dir, 'vitlens-scenes.vitl'), path.join(modelsDir().dir, 'gallery', scene),
      '--curve', 'attattr,attention-confidence', '--target', String(target), '--json'));
    for (const [k, key] of [[0, 'attattr'], [1, 'attention-confidence']])
      s.series[key].forEach((p, i) => assert.ok(close(p.y, cli.curves[k].prob[i], 1e-5), `${key} at ${i}: ${p.y} vs the CLI's ${cli.curves[k].prob[i]}`));

    // Head 0.1 on again (Space on it): it leaves the clicks.
    await page.focus('#heads-grid button[data-block="0"][data-head="1"]');
    await page.keyboard.press('Space');
    const clicks2 = clicks.slice(1);
    await waitDrawn(page, maskString(depth, heads, clicks2));
    assert.deepEqual((await shown(page)).clicks, clicks2);

    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('#heads-section').screenshot({ path: path.join(artifacts, 'heads-1280x800.png') });

    // "All on" with the keyboard: the full model again, its numbers the page's own prediction.
    await page.focus('#heads-all-on');
    await page.keyboard.press('Enter');
    await waitDrawn(page, '1'.repeat(depth * heads));
    s = await shown(page);
    assert.ok(s.classes.every((c) => c.delta === 0), 'every head on: no change');
    assert.equal(s.series.clicks.length, 1);
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('375×812 touch: a tap switches a head off; the page does not scroll sideways', async (t) => {
    const tab = await openAt(env, { width: 375, height: 812 }, true);
    const { page } = tab;
    await waitGridDone(page);
    await page.locator('#heads-open > summary').scrollIntoViewIfNeeded();
    await page.locator('#heads-open > summary').tap();
    await waitDrawn(page, null);
    const info = await page.textContent('#model-info');
    const depth = Number(/(\d+) blocks/.exec(info)[1]);
    const heads = Number(/× (\d+) heads/.exec(info)[1]);
    const btn = page.locator(`#heads-grid button[data-block="${depth - 1}"][data-head="0"]`);
    await btn.scrollIntoViewIfNeeded();
    await btn.tap();
    const off = [(depth - 1) * heads];
    const want = maskString(depth, heads, off);
    await waitDrawn(page, want);
    const s = await shown(page);
    const e = await engineValues(page, { mask: want.split('').map(Number), clicks: off, target: s.target, method: s.method });
    checkAgainst(s, e, 'shipped model, touch');
    const width = await page.evaluate(() => document.scrollingElement.scrollWidth);
    assert.ok(width <= 375, `the page is ${width} px wide`);
    const box = await page.locator('#heads-curve').boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= 375, `the chart fits (${box.x} + ${box.width})`);
    t.diagnostic(`375 px: draw ${s.drawMs} ms, compute ${s.computeMs} ms`);
    await page.locator('#heads-section').screenshot({ path: path.join(artifacts, 'heads-375x812.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a DeiT-tiny-shaped model (12 blocks × 3 heads, 197 tokens): draw and compute times, values equal the engine\'s', async (t) => {
    const { tab, page, dir, file } = await openWithDeitTiny(env);
    // Opened while the all-methods grid still runs: the section's requests pass its queued
    // explains, and its long methods (seconds each on this model) are withdrawn for them
    // (views/grid.js), so the times below are the section's own.
    const t0 = Date.now();
    await page.focus('#heads-open > summary');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('heads-section').dataset.drawMs, null, { timeout: 240_000 });
    const first = Date.now() - t0;
    await waitDrawn(page, null);
    t.diagnostic(`DeiT-tiny: the section first drawn ${first} ms after opening, with both ranked curves ${Date.now() - t0} ms after (${await page.textContent('#heads-note')})`);
    let s = await shown(page);
    assert.equal(s.pressed.length, 36);
    assert.equal(s.blocks.length, 12);
    assert.equal(s.series.attattr.length, 37);
    await page.focus('#heads-grid button[tabindex="0"]');
    for (let k = 0; k < 5; k++) await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Space'); // 5.0
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Home');
    await page.keyboard.press('Enter'); // block 6
    const clicks = [15, 18, 19, 20];
    const want = maskString(12, 3, clicks);
    const t1 = Date.now();
    await waitDrawn(page, want);
    s = await shown(page);
    t.diagnostic(`DeiT-tiny: after the change, drawn ${Date.now() - t1} ms later; draw ${s.drawMs} ms, compute ${s.computeMs} ms (${s.method}); ${await page.textContent('#heads-note')}`);
    await chooseTestModel(page, file);
    const e = await engineValues(page, { vitl: true, mask: want.split('').map(Number), clicks, target: s.target, method: s.method });
    checkAgainst(s, e, 'DeiT-tiny');
    await page.locator('#heads-section').screenshot({ path: path.join(artifacts, 'heads-deit-tiny.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('3 blocks × 5 heads on a 5 × 7 grid, registers, a distillation token: the grid and the values follow', async (t) => {
    const dir = tmpDir();
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const shape = { name: 'hf-40x56-b3h5', naming: 'hf', imageH: 40, imageW: 56, channels: 3, patch: 8, dim: 20, depth: 3, heads: 5, mlpDim: 32, classes: 4, multiLabel: false };
    const made = writeCheckpoint(dir, shape);
    const cases = [
      { name: shape.name, checkpoint: made.checkpoint, config: made.config, depth: 3, heads: 5 },
      ...['dinov2_reg', 'distilled_hf'].map((v) => {
        const d = path.join(repo, 'tests/fixtures/variants', v);
        const c = JSON.parse(fs.readFileSync(path.join(d, 'meta.json'), 'utf8')).config;
        return { name: v, checkpoint: path.join(d, 'model.safetensors'), config: path.join(d, 'config.json'), depth: c.depth, heads: c.heads };
      }),
    ];
    let opened = false;
    for (const c of cases) {
      await loadModelFiles(page, [c.checkpoint, c.config]);
      if (!opened) {
        await openView(page);
        opened = true;
      } else await waitDrawn(page, '1'.repeat(c.depth * c.heads));
      let s = await shown(page);
      assert.equal(s.pressed.length, c.depth * c.heads, `${c.name}: ${c.depth} × ${c.heads} toggles`);
      assert.equal(s.blocks.length, c.depth);
      assert.deepEqual(s.clicks, [], `${c.name}: the previous model's heads were dropped`);
      // The last head of the last block, then the first block whole.
      await page.focus('#heads-grid button[tabindex="0"]');
      for (let k = 0; k < c.depth; k++) await page.keyboard.press('ArrowDown');
      await page.keyboard.press('End');
      await page.keyboard.press('Space');
      for (let k = 0; k < c.depth; k++) await page.keyboard.press('ArrowUp');
      await page.keyboard.press('Home');
      await page.keyboard.press('Space');
      const clicks = [c.depth * c.heads - 1, ...Array.from({ length: c.heads }, (_, h) => h)];
      const want = maskString(c.depth, c.heads, clicks);
      await waitDrawn(page, want);
      s = await shown(page);
      assert.deepEqual(s.clicks, clicks, c.name);
      const e = await engineValues(page, {
        mask: want.split('').map(Number), clicks, target: s.target, method: s.method,
        files: { checkpoint: [...fs.readFileSync(c.checkpoint)], config: fs.readFileSync(c.config, 'utf8') },
      });
      checkAgainst(s, e, c.name);
      t.diagnostic(`${c.name}: draw ${s.drawMs} ms, compute ${s.computeMs} ms`);
    }
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
