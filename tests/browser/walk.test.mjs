// walk.test.mjs — issue 17 item 4 in Debian's chromium: "A guided walk". The page is opened with
// ?simd=plain, so that its worker runs the plain SIMD128 build vitlens.js — the same module this
// test loads in node (tests/node/support.mjs) to ask the engine for the walk itself, independently
// of the page: the same model file, the same scene decoded by the engine, the class the page
// explains. Keyboard only, the walk is taken from its first step to its last, and at every step
// the values drawn (the row over the tokens, the map, the matrix: the section's data attributes),
// Σ relevance, the counter, the marked piece of the formula, the tensors listed and the chart's
// points and marker are checked against the engine's (values to 1e-6 of their largest
// magnitude). On the shipped model (transformer-attribution, attnlrp, rollout; another query
// token), on a phone-sized touch screen (no horizontal scroll), on a DeiT-tiny-shaped model (draw
// and compute times) and on models with extra tokens and a non-square grid (distilled_hf: CLS +
// DIST, 3 × 4 patches; reg_gap: 4 registers, no CLS, gray). Screenshots: walk-1280x800.png,
// walk-375x812.png in tests/artifacts/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadVitlens, repo, toRGBA } from '../node/support.mjs';
import { afterNewExplanation, artifacts, launch, loadModelFiles, modelsDir, openAt as openAtSize, openWithDeitTiny, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the guided walk in chromium', { skip }, () => {});

const TOL = 1e-6;

// |a − b| ≤ 1e-6 of the largest magnitude of b, elementwise.
function closeArrays(a, b, what) {
  assert.ok(b, `${what}: the engine has values`);
  assert.equal(a.length, b.length, `${what}: length`);
  let scale = 0;
  for (const v of b) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < b.length; i++)
    if (!(Math.abs(a[i] - b[i]) <= TOL * Math.max(scale, 1e-30))) assert.fail(`${what}[${i}]: page ${a[i]} vs engine ${b[i]} (scale ${scale})`);
}

const openAt = (env, viewport, touch = false) => openAtSize(env, viewport, touch, '?simd=plain');

// The engine's walk in node: { model: .vitl path } or { checkpoint, config } (safetensors), the
// scene at `image`, the page's class and query; every step with its arrays as plain arrays.
async function engineWalk(source, image, method, target, query = -1) {
  const vl = await loadVitlens();
  const model = source.model
    ? vl.Model.fromBytes(new Uint8Array(fs.readFileSync(source.model)))
    : vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(source.checkpoint)), fs.readFileSync(source.config, 'utf8'));
  const img = vl.decodeImage(new Uint8Array(fs.readFileSync(image)));
  const x = model.prepareRGBA(toRGBA(img), img.width, img.height);
  try {
    const t0 = performance.now();
    const w = x.walk(method, { target, query });
    w.nodeMs = performance.now() - t0;
    return w;
  } finally {
    x.delete();
    model.delete();
  }
}

async function openWalk(page) {
  await page.focus('#walk-open > summary');
  await page.keyboard.press('Enter');
  await waitWalk(page);
}

// Waits until the walk shows `method` (any when null) for the page's current explanation.
async function waitWalk(page, method = null, query = null) {
  await page.waitForFunction(([m, q]) => {
    const d = document.getElementById('walk').dataset;
    return !document.getElementById('error').hidden ||
      (d.ready === 'true' && (m === null || d.method === m) && (q === null || d.query === String(q)));
  }, [method, query], { timeout: 180_000 });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
}

const shown = (page) => page.evaluate(() => {
  const w = document.getElementById('walk');
  const d = w.dataset;
  const mark = document.querySelector('#walk-formula mark');
  return {
    step: Number(d.step), steps: Number(d.steps), id: d.id, method: d.method, target: Number(d.target), query: Number(d.query),
    relevance: d.relevance === '' ? null : Number(d.relevance),
    row: d.row ? JSON.parse(d.row) : null, map: d.map ? JSON.parse(d.map) : null, matrix: d.matrix ? JSON.parse(d.matrix) : null,
    drawMs: Number(d.drawMs), engineMs: Number(d.engineMs), fetchMs: Number(d.fetchMs),
    counter: document.getElementById('walk-counter').textContent,
    title: document.getElementById('walk-title').textContent,
    formula: document.getElementById('walk-formula').textContent,
    mark: mark?.textContent ?? null,
    tensors: document.getElementById('walk-tensors').textContent,
    chips: [...document.querySelectorAll('#walk-prefix .walk-chip')].map((c) => ({ token: Number(c.dataset.token), value: Number(c.dataset.value), text: c.textContent })),
    sums: [...document.querySelectorAll('#walk-relevance .walk-sums td[data-value]')].map((t) => Number(t.dataset.value)),
    chartHidden: document.getElementById('walk-chart-fig').hidden,
    points: [...document.querySelectorAll('#walk-chart circle')].map((c) => ({ x: Number(c.dataset.x), y: Number(c.dataset.y) })),
    markX: document.querySelector('#walk-chart line.mark')?.dataset.x ?? null,
  };
});

// One step as drawn against the engine's.
function checkStep(s, e, k, n) {
  const at = `${e.method} step ${k + 1} (${e.steps[k].id})`;
  const want = e.steps[k];
  assert.equal(s.step, k, at);
  assert.equal(s.id, want.id, at);
  assert.equal(s.counter, `step ${k + 1} of ${n}`, at);
  assert.equal(s.title, want.title, at);
  assert.equal(s.mark, want.formula.mark, `${at}: the marked piece`);
  assert.equal(s.formula, want.formula.before + want.formula.mark + want.formula.after, at);
  for (const t of [...want.reads, ...want.writes]) {
    assert.ok(s.tensors.includes(t.name), `${at}: lists ${t.name}`);
    assert.ok(s.tensors.includes(`${t.dims} = ${t.shape.join(' × ')}`), `${at}: ${t.name}'s shape ${t.shape}`);
  }
  for (const key of ['row', 'map', 'matrix']) {
    if (want[key] === null) assert.equal(s[key], null, `${at}: no ${key}`);
    else closeArrays(s[key], want[key], `${at} ${key}`);
  }
  if (want.relevance === null) assert.equal(s.relevance, null, at);
  else {
    closeArrays([s.relevance], [want.relevance], `${at} Σ R`);
    closeArrays(s.sums, want.sums.map((x) => x.value), `${at} its parts`);
  }
  // The chart: one point per step with Σ R, at the engine's values; the marker on this step.
  const withR = e.steps.map((x, i) => [i + 1, x.relevance]).filter(([, r]) => r !== null);
  if (!withR.length) assert.ok(s.chartHidden, `${at}: no chart without relevance`);
  else {
    assert.equal(s.points.length, withR.length, `${at}: chart points`);
    s.points.forEach((p, i) => {
      assert.equal(p.x, withR[i][0]);
      closeArrays([p.y], [withR[i][1]], `${at}: chart point ${p.x}`);
    });
    assert.equal(s.markX, String(k + 1), `${at}: the marker`);
  }
  // The prefix tokens' values, beside the image.
  if (want.row) s.chips.forEach((c) => closeArrays([c.value], [want.row[c.token]], `${at} prefix token ${c.token}`));
}

// From the first step to the last with → only (Home first), checking each; returns the draw times.
async function walkAll(page, e) {
  const n = e.steps.length;
  await page.focus('#walk');
  await page.keyboard.press('Home');
  const draw = [];
  for (let k = 0; k < n; k++) {
    const s = await shown(page);
    assert.equal(s.steps, n);
    checkStep(s, e, k, n);
    draw.push(s.drawMs);
    if (k < n - 1) await page.keyboard.press('ArrowRight');
  }
  await page.keyboard.press('ArrowRight');
  assert.equal((await shown(page)).step, n - 1, '→ stops at the last step');
  return draw;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const stats = (xs) => `median ${median(xs).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms over ${xs.length} steps`;

// Chooses a method in the walk's menu with the keyboard (arrows on the focused select).
async function chooseMethod(page, method) {
  const names = await page.$$eval('#walk-method option', (os) => os.map((o) => o.value));
  const from = names.indexOf(await page.$eval('#walk-method', (s) => s.value));
  const to = names.indexOf(method);
  assert.ok(to >= 0, `${method} is in the walk's menu`);
  await page.focus('#walk-method');
  for (let k = from; k !== to; k += Math.sign(to - from)) await page.keyboard.press(to > from ? 'ArrowDown' : 'ArrowUp');
  await waitWalk(page, method);
}

const pageTarget = (page) => page.$eval('#main-canvas', (c) => Number(c.dataset.target));

describe('the guided walk', { skip }, () => {
  let env;
  let models;
  let scene;
  before(async () => {
    models = modelsDir();
    env = await launch({ models: models.dir });
    const labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    scene = path.join(models.dir, 'gallery', labels.scenes[0].image);
  });
  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('1280×800, keyboard only: every step of the three walks equals the engine\'s; another query token', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const model = { model: path.join(models.dir, 'vitlens-scenes.vitl') };
    assert.equal(await page.getAttribute('#walk', 'data-ready'), 'false', 'nothing computed while closed');
    assert.equal(await page.getAttribute('#walk', 'data-steps'), null);
    // The all-methods grid first, so that the times below are the walk's, not the queue's.
    await waitGridDone(page);
    const target = await pageTarget(page);
    const t0 = Date.now();
    await openWalk(page);
    t.diagnostic(`shipped model: the walk shown ${Date.now() - t0} ms after opening`);
    // The main view's method (the featured transformer-attribution) is the walk's first.
    assert.equal(await page.$eval('#walk-method', (s) => s.value), await page.$eval('#method', (s) => s.value));
    const times = [];
    for (const method of ['transformer-attribution', 'attnlrp', 'rollout']) {
      if (method !== 'transformer-attribution') await chooseMethod(page, method);
      const e = await engineWalk(model, scene, method, target);
      assert.equal(e.target, target);
      const draw = await walkAll(page, e);
      const s = await shown(page);
      times.push(`${method}: ${e.steps.length} steps, engine ${s.engineMs} ms in the worker (${e.nodeMs.toFixed(0)} ms in node), ` +
        `${s.fetchMs} ms to arrive; draw ${stats(draw)}`);
    }
    t.diagnostic(`shipped model (65 tokens, 6 blocks): ${times.join('; ')}`);

    // Home, End, PageUp / PageDown, and the buttons by keyboard.
    await chooseMethod(page, 'transformer-attribution');
    const e = await engineWalk(model, scene, 'transformer-attribution', target);
    await page.focus('#walk');
    await page.keyboard.press('End');
    assert.equal((await shown(page)).id, 'map');
    await page.keyboard.press('Home');
    assert.equal((await shown(page)).id, 'input');
    await page.keyboard.press('PageDown');
    assert.equal((await shown(page)).id, 'block.0.attn', 'PageDown: the first block');
    await page.keyboard.press('PageDown');
    assert.equal((await shown(page)).id, 'block.1.attn', 'PageDown: the next block');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('PageUp');
    assert.equal((await shown(page)).id, 'block.1.attn', 'PageUp: this block\'s start');
    await page.keyboard.press('PageUp');
    assert.equal((await shown(page)).id, 'block.0.attn', 'PageUp: the block before');
    await page.focus('#walk-next');
    await page.keyboard.press('Enter');
    assert.equal((await shown(page)).id, 'block.0.grad', 'Next by Enter');
    await page.keyboard.press('ArrowRight');
    assert.equal((await shown(page)).id, 'block.0.relevance', '→ on the buttons too');
    await page.focus('#walk-prev');
    await page.keyboard.press('Space');
    assert.equal((await shown(page)).id, 'block.0.grad', 'Previous by Space');
    checkStep(await shown(page), e, e.steps.findIndex((x) => x.id === 'block.0.grad'), e.steps.length);

    // The section with the last block's R_A step: matrix, relevance and chart.
    const k = e.steps.findIndex((x) => x.id === `block.${e.steps.at(-2).block}.relevance`);
    await page.focus('#walk');
    await page.keyboard.press('Home');
    for (let i = 0; i < k; i++) await page.keyboard.press('ArrowRight');
    checkStep(await shown(page), e, k, e.steps.length);
    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('section[aria-labelledby=h-walk]').screenshot({ path: path.join(artifacts, 'walk-1280x800.png') });

    // Another query token: a patch chosen on the image with the keyboard; the walk draws its rows.
    await page.focus('#main-canvas');
    await page.keyboard.press('ArrowRight');
    await page.waitForFunction(() => document.getElementById('walk').dataset.ready === 'true' &&
      document.getElementById('walk').dataset.query !== '-1', null, { timeout: 60_000 });
    const s = await shown(page);
    assert.ok(s.query > 0, `the walk follows the query token (${s.query})`);
    const eq = await engineWalk(model, scene, 'transformer-attribution', target, s.query);
    checkStep(s, eq, s.step, eq.steps.length);
    await page.focus('#walk');
    await page.keyboard.press('End');
    checkStep(await shown(page), eq, eq.steps.length - 1, eq.steps.length);
    await page.focus('#main-canvas');
    await page.keyboard.press('Escape');
    await waitWalk(page, 'transformer-attribution', -1);

    // Another class: the walk follows it.
    const other = (target + 1) % (await page.$$('#scores .score')).length;
    await page.click(`#scores .score[data-class="${other}"]`);
    await page.waitForFunction((c) => document.getElementById('walk').dataset.target === String(c) &&
      document.getElementById('walk').dataset.ready === 'true', other, { timeout: 60_000 });
    const eo = await engineWalk(model, scene, 'transformer-attribution', other);
    const so = await shown(page);
    checkStep(so, eo, so.step, eo.steps.length);
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('375×812 touch: taps step the walk, nothing scrolls sideways', async () => {
    const tab = await openAt(env, { width: 375, height: 812 }, true);
    const { page } = tab;
    await waitGridDone(page);
    const target = await pageTarget(page);
    await page.locator('#walk-open > summary').scrollIntoViewIfNeeded();
    await page.locator('#walk-open > summary').tap();
    await waitWalk(page);
    const e = await engineWalk({ model: path.join(models.dir, 'vitlens-scenes.vitl') }, scene, 'transformer-attribution', target);
    const n = e.steps.length;
    for (let k = 0; k < 6; k++) {
      checkStep(await shown(page), e, k, n);
      await page.locator('#walk-next').tap();
    }
    await page.locator('#walk-last').tap();
    checkStep(await shown(page), e, n - 1, n);
    for (let k = 0; k < 4; k++) await page.locator('#walk-prev').tap();
    // A relevance step with its chart for the screenshot.
    await page.locator('#walk-first').tap();
    const k = e.steps.findIndex((x) => x.id === 'block.0.relevance');
    for (let i = 0; i < k; i++) await page.locator('#walk-next').tap();
    checkStep(await shown(page), e, k, n);
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(widths.scroll <= widths.client, `no horizontal scroll (${widths.scroll} > ${widths.client})`);
    const box = await page.locator('#walk').boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= 375, `the walk fits the screen (${box.x} + ${box.width})`);
    await page.$eval('.walk-controls', (h) => h.scrollIntoView({ block: 'start' }));
    fs.mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'walk-375x812.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a DeiT-tiny-shaped model (197 tokens, 12 blocks, 3 heads): every step, compute and draw times', async (t) => {
    // The walk is opened while the all-methods grid still runs and the live perturbation test of
    // the explanation (18 forward passes, ~1.3 s) is less than half done: the walk's requests pass
    // the grid's queued explains, and the perturbation test and the grid's long methods are
    // withdrawn for them and asked again behind them (background.js).
    const { tab, page, dir, file } = await openWithDeitTiny(env, { search: '?simd=plain' });
    const target = await pageTarget(page);
    const times = [];
    const faith = await (await page.waitForFunction(() => {
      const d = document.getElementById('faith-note').dataset;
      return (d.state === 'running' && Number(d.percent) < 50) || d.state === 'done' ? { ...d } : null;
    }, null, { timeout: 60_000 })).jsonValue();
    assert.equal(faith.state, 'running', 'the walk is opened while the perturbation test runs');
    const t0 = Date.now();
    await openWalk(page);
    times.push(`first walk shown ${Date.now() - t0} ms after opening (the perturbation test at ${faith.percent} %)`);
    const withdrawn = await page.$eval('#faith-note', (n) => ({ ...n.dataset }));
    assert.ok(Number(withdrawn.restarts ?? 0) >= 1 && withdrawn.state !== 'done',
      `the perturbation test was withdrawn for the walk's request and not done before it (${JSON.stringify(withdrawn)})`);
    await page.waitForFunction(() => document.getElementById('faith-note').dataset.state === 'done', null, { timeout: 60_000 });
    assert.equal(await page.locator('#faith-strips .faith-strip').count(), 2, 'asked again, the perturbation test is drawn');
    for (const method of ['transformer-attribution', 'attnlrp', 'rollout']) {
      const t1 = Date.now();
      if (method !== 'transformer-attribution') await chooseMethod(page, method);
      const shownAfter = Date.now() - t1;
      const e = await engineWalk({ model: file }, scene, method, target);
      const draw = await walkAll(page, e);
      const s = await shown(page);
      times.push(`${method}: ${e.steps.length} steps; compute ${s.engineMs} ms in the worker (${s.fetchMs} ms to arrive` +
        `${method === 'transformer-attribution' ? '' : `, ${shownAfter} ms from the menu to the first step`}; ${e.nodeMs.toFixed(0)} ms in node); draw ${stats(draw)}`);
    }
    t.diagnostic(`DeiT-tiny: ${times.join('; ')}`);

    // Stop (the page's button), twice. First just after another class was chosen, while its
    // explanation is computed: the grid is not started again by the cancelled explanation.
    const runs = () => page.$eval('#grid', (g) => Number(g.dataset.runs ?? 0));
    const restarts = () => page.evaluate(() => Number(document.documentElement.dataset.workerRestarts ?? 0));
    const idle = () => page.waitForFunction(() => document.getElementById('status').textContent === 'Stopped' &&
      document.getElementById('busy').hidden, null, { timeout: 60_000 });
    const runs0 = await runs();
    await page.click('#scores .score:nth-child(2)');
    await page.click('#stop');
    await idle();
    await page.waitForTimeout(300);
    assert.equal(await runs(), runs0, 'the grid did not run again after a Stop');
    // Then while one of the grid's long methods runs: the client raises the cancel flags of what it
    // cancels, the engine stops at its next progress report, and the page is idle again without
    // a restart of the worker (which would load the model again).
    const restarts0 = await restarts();
    await afterNewExplanation(page, () => page.click('#scores .score:nth-child(1)'));
    await page.waitForFunction((n) => Number(document.getElementById('grid').dataset.runs ?? 0) > n, runs0);
    const long = await (await page.waitForFunction(() => [...document.querySelectorAll('#grid .cell[data-state="running"]')]
      .find((c) => parseInt(c.querySelector('.cell-ms').textContent, 10) < 50)?.dataset.method, null, { timeout: 120_000 })).jsonValue();
    const stoppedAt = Date.now();
    await page.click('#stop');
    await idle();
    t.diagnostic(`DeiT-tiny: Stop while the grid's ${long} ran: the page idle again after ${Date.now() - stoppedAt} ms`);
    assert.equal(await restarts(), restarts0, 'the worker was not restarted');
    assert.equal(await page.$eval(`#grid .cell[data-method="${long}"]`, (c) => c.dataset.state), 'stopped', `the grid's ${long} shows that it was stopped`);
    assert.equal(await page.isVisible('#error'), false, 'a Stop is not an error');
    // The page works on.
    await afterNewExplanation(page, () => page.click('#scores .score:nth-child(2)'));
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const name of ['distilled_hf', 'reg_gap']) {
    test(`${name} (extra tokens, non-square grid): every step equals the engine's; the prefix tokens named`, async () => {
      const dir = path.join(repo, 'tests/fixtures/variants', name);
      const source = { checkpoint: path.join(dir, 'model.safetensors'), config: path.join(dir, 'config.json') };
      const tab = await openAt(env, { width: 1280, height: 800 });
      const { page } = tab;
      await loadModelFiles(page, [source.checkpoint, source.config]);
      const target = await pageTarget(page);
      await openWalk(page);
      for (const method of ['transformer-attribution', 'attnlrp', 'rollout']) {
        if (method !== 'transformer-attribution') await chooseMethod(page, method);
        const e = await engineWalk(source, scene, method, target);
        await walkAll(page, e);
        // A step with a row: the prefix tokens are named beside the image.
        await page.focus('#walk');
        await page.keyboard.press('Home');
        await page.keyboard.press('PageDown');
        const s = await shown(page);
        const names = s.chips.map((c) => c.text.split(' ')[0]);
        assert.deepEqual(names, name === 'distilled_hf' ? ['CLS', 'DIST'] : ['REG0', 'REG1', 'REG2', 'REG3'], `${method}: prefix chips`);
        const grid = await page.$eval('#walk-canvas', (c) => [Number(c.dataset.gridH), Number(c.dataset.gridW)]);
        assert.deepEqual(grid, name === 'distilled_hf' ? [3, 4] : [4, 3], 'the patch grid');
      }
      assert.deepEqual(tab.consoleErrors, []);
      await tab.context.close();
    });
  }
});
