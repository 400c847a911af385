// compare.test.mjs — issue 17 item 5 in Debian's chromium: the "Compare two methods" view. Every
// number it draws is checked against the engine to 1e-6, the engine's numbers computed here in
// node with the wasm API (tests/node/support.mjs: vitlens.js, the build the page runs with
// ?simd=plain on a page that is not cross-origin isolated) for the same model, image, class and
// method specs, independently of the page: both maps and the difference of their min-max
// normalised maps (the view's download and its pixel read-out), every point of the eight curves
// (black fill and ROAD, both orders, both maps), every AUC of the legend and every figure of the
// table, with the better value marked by its direction. Every control is used with the keyboard;
// the 375×812 page is used by touch and has no horizontal scroll. Models: the shipped one (a scene
// with a mask: the mask figures apply), a DeiT-tiny-shaped one (224 × 224: ROAD behind its button,
// timed; Cancel), and a distilled [CLS][DIST] one with a non-square 12 × 16 input. Screenshots at
// 1280×800 and 375×812 go to tests/artifacts/; draw and compute times are printed as diagnostics.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadVitlens, repo, toRGBA } from '../node/support.mjs';
import { artifacts, launch, loadModelFiles, modelsDir, openAt as openAtSize, openWithDeitTiny, skipReason } from './harness.mjs';

const skip = skipReason();
if (skip) test('the compare view in chromium', { skip }, () => {});

const TOL = 1e-6;
const close = (a, b) => Math.abs(a - b) <= TOL * Math.max(1, Math.abs(b));
const SEARCH = '?simd=plain'; // the page's engine is then vitlens.js, as in node

// The table's rows and where their values are in Input.faithfulness's answer (the test's own list).
const FIGURES = {
  'black-positive': ['lower', (f) => f.black?.positive.aucProb],
  'black-negative': ['higher', (f) => f.black?.negative.aucProb],
  'srg-black': ['higher', (f) => f.black?.srg],
  'road-positive': ['lower', (f) => f.road?.positive.aucProb],
  'road-negative': ['higher', (f) => f.road?.negative.aucProb],
  'srg-road': ['higher', (f) => f.road?.srg],
  mass: ['higher', (f) => f.mask?.massAccuracy],
  rank: ['higher', (f) => f.mask?.rankAccuracy],
  pointing: ['higher', (f) => f.mask?.pointing],
  'pixel-accuracy': ['higher', (f) => f.mask?.pixelAccuracy],
  miou: ['higher', (f) => f.mask?.miou],
  ap: ['higher', (f) => f.mask?.ap],
  share: ['higher', (f) => f.mask?.share ?? undefined],
};

const openAt = (env, viewport, touch = false) => openAtSize(env, viewport, touch, SEARCH);

// Waits until the view shows specs (a, b) (any when null), or fails with the page's error.
async function waitReady(page, specs = null, timeout = 180_000) {
  await page.waitForFunction((s) => {
    if (!document.getElementById('error').hidden) return true;
    const d = document.getElementById('cmp-open').dataset;
    return d.ready === 'true' && (!s || (d.a === s[0] && d.b === s[1]));
  }, specs, { timeout });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
  return page.$eval('#cmp-open', (d) => ({ ...d.dataset }));
}

// Opens the section with the keyboard (Tab to its summary, Enter) and waits for both maps.
async function openView(page) {
  const t0 = Date.now();
  await page.focus('#cmp-open > summary');
  await page.keyboard.press('Enter');
  const d = await waitReady(page);
  return { ...d, wallMs: Date.now() - t0 };
}

// The engine's times of the maps shown (the worker's, around each call: explain, figures, ROAD).
function engineTimes(d) {
  const e = JSON.parse(d.engine);
  const f = (x) => (x === null ? '–' : `${x.toFixed(0)}`);
  return ['a', 'b'].map((s) => `${s}: explain ${f(e[s].explain)} ms, figures ${f(e[s].figures)} ms` + (e[s].road !== null ? ` (ROAD ${f(e[s].road)} ms)` : '')).join('; ');
}

// The engine's numbers in node: the scene prepared from its PNG, each spec's map for `target`, and
// Input.faithfulness with the scene's masks of that class (when the class is one of its objects).
async function engine({ model, scene, labels, specs, target, road, galleryDir }) {
  const vl = await loadVitlens();
  const m = model.bytes ? vl.Model.fromBytes(model.bytes) : vl.Model.fromSafetensors(model.checkpoint, model.config);
  const png = vl.decodeImage(new Uint8Array(fs.readFileSync(path.join(galleryDir, scene.image))));
  const x = m.prepareRGBA(toRGBA(png), png.width, png.height);
  try {
    const info = m.info();
    const name = info.classNames[target];
    const own = scene.items.find((it) => (it.class_name ?? labels.class_names[it.class]) === name);
    const other = own && scene.items.find((it) => it !== own && (it.class_name ?? labels.class_names[it.class]) !== name);
    const maskOf = (it) => x.maskFromImage(new Uint8Array(fs.readFileSync(path.join(galleryDir, it.mask))));
    const options = { target, road, ...(own ? { mask: maskOf(own) } : {}), ...(other ? { otherMask: maskOf(other) } : {}) };
    const methods = vl.methods();
    const out = { info, masked: Boolean(own) };
    for (const [side, spec] of Object.entries(specs)) {
      const reads = methods.find((q) => q.name === spec.split(':')[0]).options.includes('target');
      const ex = x.explain(spec, reads ? { target } : {});
      out[side] = { map: Array.from(ex.pixelMap), faith: x.faithfulness(ex.pixelMap, options) };
    }
    return out;
  } finally {
    x.delete();
    m.delete();
  }
}

function normalised(map) {
  const min = Math.min(...map);
  const max = Math.max(...map);
  return map.map((v) => (max > min ? (v - min) / (max - min) : 0));
}

// Compares two values of Input.faithfulness's answer (numbers to 1e-6, the rest exactly).
function sameFigures(got, want, at) {
  if (typeof want === 'number') {
    assert.ok(close(got, want), `${at}: ${got} vs the engine's ${want}`);
  } else if (want && typeof want === 'object') {
    assert.deepEqual(Object.keys(got).filter((k) => k !== 'ms').sort(), Object.keys(want).sort(), at);
    for (const k of Object.keys(want)) sameFigures(got[k], want[k], `${at}.${k}`);
  } else {
    assert.equal(got, want, at);
  }
}

// Everything the view drew against the engine: the download (both maps, the difference and the
// figures), every curve point, the legend's AUCs, the table, and the read-out at the cursor.
async function checkDrawn(page, core, specs) {
  const [download] = await Promise.all([page.waitForEvent('download'), (async () => {
    await page.focus('#cmp-download');
    await page.keyboard.press('Enter');
  })()]);
  const got = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
  const na = normalised(core.a.map);
  const nb = normalised(core.b.map);
  for (const side of ['a', 'b']) {
    assert.equal(got[side].spec, specs[side]);
    assert.equal(got[side].pixelMap.length, core[side].map.length);
    got[side].pixelMap.forEach((v, i) => assert.ok(close(v, core[side].map[i]), `map ${side} pixel ${i}: ${v} vs ${core[side].map[i]}`));
    sameFigures(got[side].faithfulness, core[side].faith, `${side} figures`);
  }
  got.difference.values.forEach((v, i) => assert.ok(close(v, na[i] - nb[i]), `difference pixel ${i}: ${v} vs ${na[i] - nb[i]}`));

  // The chart: eight curves of ten points (four without ROAD), each the engine's probabilities.
  let points = 0;
  for (const side of ['a', 'b']) {
    for (const fill of ['black', 'road']) {
      for (const order of ['positive', 'negative']) {
        const name = `${side}-${fill}-${order}`;
        const ys = await page.$$eval(`#cmp-plot circle[data-series="${name}"]`, (cs) => cs.map((c) => Number(c.dataset.y)));
        const want = core[side].faith[fill]?.[order];
        if (!want) {
          assert.equal(ys.length, 0, `${name}: not drawn without ROAD`);
          continue;
        }
        assert.equal(ys.length, 10, name);
        ys.forEach((y, k) => assert.ok(close(y, want.prob[k]), `${name} step ${k}: ${y} vs ${want.prob[k]}`));
        points += ys.length;
        const legend = await page.textContent(`#cmp-legend li[data-series="${name}"]`);
        assert.ok(legend.endsWith(`AUC ${want.aucProb.toFixed(2)}`), `${name}: legend “${legend}”, AUC ${want.aucProb}`);
      }
    }
  }

  // The table: each figure of both maps, the better one marked by the row's direction.
  const rows = await page.$$eval('#cmp-table tbody tr', (trs) => trs.map((tr) => ({
    key: tr.dataset.figure, better: tr.dataset.better, direction: tr.cells[1].textContent,
    values: [...tr.querySelectorAll('td[data-value]')].map((td) => Number(td.dataset.value)),
    marked: [...tr.querySelectorAll('td')].slice(1).map((td) => td.classList.contains('better')),
  })));
  assert.deepEqual(rows.map((r) => r.key), Object.keys(FIGURES));
  let figures = 0;
  for (const r of rows) {
    const [direction, get] = FIGURES[r.key];
    const want = [get(core.a.faith), get(core.b.faith)];
    if (want.some((v) => typeof v !== 'number')) {
      assert.equal(r.values.length, want.filter((v) => typeof v === 'number').length, `${r.key}: shown only where computed`);
      continue;
    }
    assert.match(r.direction, direction === 'lower' ? /lower/ : /higher/, r.key);
    r.values.forEach((v, k) => assert.ok(close(v, want[k]), `${r.key} ${'ab'[k]}: ${v} vs ${want[k]}`));
    const best = want[0] === want[1] ? 'tie' : (direction === 'lower') === (want[0] < want[1]) ? 'a' : 'b';
    assert.equal(r.better, best, `${r.key}: better`);
    assert.deepEqual(r.marked, [best === 'a', best === 'b'], `${r.key}: marked`);
    figures += 2;
  }

  // The read-out: Home, then the arrows and Shift+arrows (a patch) on the difference.
  await page.focus('#cmp-diff');
  await page.keyboard.press('Home');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Shift+ArrowDown');
  await page.keyboard.press('ArrowDown');
  const r = await page.$eval('#cmp-readout', (e) => ({ ...e.dataset }));
  const patch = core.info.patch;
  assert.deepEqual([r.x, r.y], ['2', String(patch + 1)]);
  const i = (patch + 1) * core.info.imageW + 2;
  assert.ok(close(Number(r.a), core.a.map[i]) && close(Number(r.b), core.b.map[i]), 'the read-out\'s raw values');
  assert.ok(close(Number(r.na), na[i]) && close(Number(r.nb), nb[i]) && close(Number(r.diff), na[i] - nb[i]), 'the read-out\'s normalised values');
  await page.keyboard.press('End');
  assert.equal(await page.getAttribute('#cmp-readout', 'data-x'), String(core.info.imageW - 1));
  return { points, figures };
}

describe('the compare view', { skip }, () => {
  let env;
  let models;
  let labels;
  let galleryDir;
  before(async () => {
    models = modelsDir();
    env = await launch({ models: models.dir });
    galleryDir = path.join(models.dir, 'gallery');
    labels = JSON.parse(fs.readFileSync(path.join(galleryDir, 'labels.json'), 'utf8'));
  });
  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });
  const shipped = () => ({ bytes: new Uint8Array(fs.readFileSync(path.join(models.dir, 'vitlens-scenes.vitl'))) });

  test('1280×800, keyboard: both maps, their difference, every curve and figure equal the engine\'s', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    const main = await page.$eval('#method', (s) => s.value);
    const names = await page.$$eval('#method option', (os) => os.map((o) => o.value));
    const opened = await openView(page);
    // The defaults: the main view's method and the next one.
    const specs = { a: main, b: names[(names.indexOf(main) + 1) % names.length] };
    assert.deepEqual([opened.a, opened.b], [specs.a, specs.b]);
    assert.equal(opened.road, 'true', 'ROAD runs by itself at 64 × 64');
    t.diagnostic(`shipped model, ${specs.a} vs ${specs.b}: shown ${opened.wallMs} ms after opening (queue included); engine ${engineTimes(opened)}; drawn in ${opened.drawMs} ms`);
    const scene = labels.scenes[0];
    let core = await engine({ model: shipped(), scene, labels, specs, target, road: true, galleryDir });
    // The model's class names name the scene's objects: the mask of the explained class's object applies.
    assert.equal(opened.masked, String(core.masked));
    if (models.shipped) assert.equal(core.masked, true, 'the shipped model explains the scene\'s own object');
    const counts = await checkDrawn(page, core, specs);
    t.diagnostic(`checked ${counts.points} curve points and ${counts.figures} table values`);
    if (models.shipped) assert.match(await page.textContent('#cmp-mask-note'), /against the mask of the scene’s “/);

    // Map b with the keyboard (the next method), then options typed into a's field (Enter).
    await page.focus('#cmp-b');
    await page.keyboard.press('ArrowDown');
    specs.b = names[(names.indexOf(specs.b) + 1) % names.length];
    let d = await waitReady(page, [specs.a, specs.b]);
    t.diagnostic(`b → ${specs.b}: shown ${d.computeMs} ms after the request (a reused); engine ${engineTimes(d)}; drawn in ${d.drawMs} ms`);
    await page.selectOption('#cmp-a', 'rollout');
    await waitReady(page, ['rollout', specs.b]);
    await page.focus('#cmp-a-options');
    await page.keyboard.type('head-fusion=max:discard-ratio=0.5');
    await page.keyboard.press('Enter');
    specs.a = 'rollout:head-fusion=max:discard-ratio=0.5';
    d = await waitReady(page, [specs.a, specs.b]);
    core = await engine({ model: shipped(), scene, labels, specs, target, road: true, galleryDir });
    await checkDrawn(page, core, specs);

    // Swap with the keyboard: the same numbers, the columns exchanged.
    await page.focus('#cmp-swap');
    await page.keyboard.press('Enter');
    d = await waitReady(page, [specs.b, specs.a]);
    assert.equal(await page.$eval('#cmp-a-options', (i) => i.value), '', 'the options move with their method');
    const swapped = { a: core.b, b: core.a, info: core.info };
    await checkDrawn(page, swapped, { a: specs.b, b: specs.a });
    t.diagnostic(`after the swap (all reused): drawn in ${d.drawMs} ms`);

    // A bad option is the engine's error, in the error bar; the good one again draws from the cache.
    await page.fill('#cmp-b-options', '');
    await page.focus('#cmp-b-options');
    await page.keyboard.type('no-such-option=1');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: 60_000 });
    assert.match(await page.textContent('#error-text'), /Compare two methods: .*no-such-option.*\[bad_argument\]/);
    await page.click('#error-close');
    await page.fill('#cmp-b-options', 'head-fusion=max:discard-ratio=0.5');
    await page.focus('#cmp-b-options');
    await page.keyboard.press('Enter');
    await waitReady(page, [specs.b, specs.a]);

    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('section[aria-labelledby=h-cmp]').screenshot({ path: path.join(artifacts, 'compare-1280x800.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('375×812 touch: no horizontal scroll, a tap reads a pixel, another class follows', async (t) => {
    const tab = await openAt(env, { width: 375, height: 812 }, true);
    const { page } = tab;
    await page.locator('#cmp-open > summary').tap();
    const d = await waitReady(page);
    t.diagnostic(`375×812: engine ${engineTimes(d)}; drawn in ${d.drawMs} ms`);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), 375, 'no horizontal scroll');
    await page.locator('#cmp-diff').scrollIntoViewIfNeeded();
    const box = await page.locator('#cmp-diff').boundingBox();
    assert.ok(box.x + box.width <= 375);
    await page.touchscreen.tap(box.x + box.width * 0.75, box.y + box.height * 0.25);
    await page.waitForFunction(() => Number(document.getElementById('cmp-readout').dataset.x) > 0);
    const r = await page.$eval('#cmp-readout', (e) => ({ ...e.dataset }));
    const [h, w] = (await page.$eval('#main-canvas', (c) => c.dataset.input)).split('x').map(Number);
    assert.ok(Math.abs(Number(r.x) - 0.75 * w) <= 2 && Math.abs(Number(r.y) - 0.25 * h) <= 2, `the tapped pixel (${r.x}, ${r.y})`);

    // Another class (a tap on its bar) drops the maps and computes them for that class.
    const target = Number(d.target);
    const other = (target + 1) % 10;
    await page.locator(`#scores .score[data-class="${other}"]`).tap();
    const d2 = await page.waitForFunction((c) => {
      const ds = document.getElementById('cmp-open').dataset;
      return ds.ready === 'true' && ds.target === String(c) ? { ...ds } : null;
    }, other, { timeout: 120_000 }).then((h) => h.jsonValue());
    const core = await engine({ model: shipped(), scene: labels.scenes[0], labels, specs: { a: d2.a, b: d2.b }, target: other, road: true, galleryDir });
    const ys = await page.$$eval('#cmp-plot circle[data-series="a-black-positive"]', (cs) => cs.map((c) => Number(c.dataset.y)));
    ys.forEach((y, k) => assert.ok(close(y, core.a.faith.black.positive.prob[k]), `class ${other}, step ${k}`));
    if (!core.masked) assert.match(await page.textContent('#cmp-mask-note'), /no object of the class/);
    await page.$eval('#h-cmp', (h) => h.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: path.join(artifacts, 'compare-375x812.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a DeiT-tiny-shaped model (224 × 224): ROAD behind its button, times, Cancel', async (t) => {
    const { tab, page, dir, file } = await openWithDeitTiny(env, { search: SEARCH });
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    const d = await openView(page);
    t.diagnostic(`DeiT-tiny, ${d.a} vs ${d.b} (perturbation test only): shown ${d.wallMs} ms after opening (queue included); engine ${engineTimes(d)}; drawn in ${d.drawMs} ms`);
    assert.equal(d.road, 'false');
    assert.equal(await page.isVisible('#cmp-road'), true, 'the Run ROAD button');
    assert.match(await page.textContent('#cmp-table'), /not run/);
    assert.match(await page.textContent('#cmp-mask-note'), /no object of the class/);
    const specs = { a: d.a, b: d.b };
    const model = { bytes: new Uint8Array(fs.readFileSync(file)) };
    const core = await engine({ model, scene: labels.scenes[0], labels, specs, target, road: true, galleryDir });
    const noRoad = { ...core, a: { ...core.a, faith: { ...core.a.faith, road: null } }, b: { ...core.b, faith: { ...core.b.faith, road: null } } };
    await checkDrawn(page, noRoad, specs);

    // Run ROAD with the keyboard: progress, then the ROAD curves and figures.
    const t0 = Date.now();
    await page.focus('#cmp-road');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.getElementById('cmp-progress-row').hidden, null, { timeout: 30_000 });
    const withRoad = await page.waitForFunction(() => {
      const ds = document.getElementById('cmp-open').dataset;
      return ds.ready === 'true' && ds.road === 'true' ? { ...ds } : null;
    }, null, { timeout: 300_000 }).then((h) => h.jsonValue());
    t.diagnostic(`DeiT-tiny, ROAD of both maps: shown ${Date.now() - t0} ms after the button (queue included); engine ${engineTimes(withRoad)}; drawn in ${withRoad.drawMs} ms`);
    assert.equal(await page.isVisible('#cmp-road'), false);
    await checkDrawn(page, core, specs);

    // Cancel, with the keyboard, a computation in flight (another map b): the page stays usable.
    // The grid may still run: the view's request passes it and its long methods are withdrawn
    // (views/grid.js), so the view's own request is the one running.
    await page.selectOption('#cmp-b', 'rollout');
    await page.waitForFunction(() => !document.getElementById('cmp-progress-row').hidden, null, { timeout: 30_000 });
    await page.focus('#cmp-cancel');
    const cancelledAt = Date.now();
    await page.keyboard.press('Space');
    await page.waitForFunction(() => /Cancelled/.test(document.getElementById('cmp-note').textContent), null, { timeout: 30_000 });
    // The engine stops at its next progress report, also without cross-origin isolation (the cancel
    // flag is then a blob URL the worker reads, flags.js), or a short call ends within stopLong's
    // 3 s: app.stop is not called. Past that deadline (and app.stop's 1 s) its 'Stopped' would
    // have shown.
    await page.waitForFunction(() => document.documentElement.dataset.viewRequests === '0' && document.documentElement.dataset.mainPending === 'false', null, { timeout: 180_000 });
    await page.waitForTimeout(Math.max(0, cancelledAt + 4500 - Date.now()));
    assert.notEqual(await page.textContent('#status'), 'Stopped', 'the page was not stopped');
    assert.equal(await page.evaluate(() => document.documentElement.dataset.workerRestarts), undefined, 'the worker was not restarted');
    assert.equal(await page.isVisible('#error'), false, 'a cancel is not an error');
    await page.focus('#cmp-b');
    await page.keyboard.press('ArrowUp');
    await waitReady(page, null, 300_000);
    await page.locator('section[aria-labelledby=h-cmp]').screenshot({ path: path.join(artifacts, 'compare-deit-tiny.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a distilled model ([CLS][DIST], 12 × 16 input): the maps and figures equal the engine\'s', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const dir = path.join(repo, 'tests/fixtures/variants/distilled_hf');
    const checkpoint = path.join(dir, 'model.safetensors');
    const config = path.join(dir, 'config.json');
    await loadModelFiles(page, [checkpoint, config]);
    const target = Number(await page.$eval('#main-canvas', (c) => c.dataset.target));
    const d = await openView(page);
    t.diagnostic(`distilled 12×16: engine ${engineTimes(d)}; drawn in ${d.drawMs} ms`);
    assert.equal(d.road, 'true');
    const specs = { a: d.a, b: d.b };
    const model = { checkpoint: new Uint8Array(fs.readFileSync(checkpoint)), config: fs.readFileSync(config, 'utf8') };
    const core = await engine({ model, scene: labels.scenes[0], labels, specs, target, road: true, galleryDir });
    assert.deepEqual([core.info.imageH, core.info.imageW], [12, 16]);
    assert.deepEqual(core.info.prefixKinds, ['cls', 'dist']);
    await checkDrawn(page, core, specs);
    // The read-out's last pixel is the 12 × 16 input's (the images show the square scene, squeezed
    // to the input by the engine, as the main view does).
    assert.deepEqual([await page.getAttribute('#cmp-readout', 'data-x'), await page.getAttribute('#cmp-readout', 'data-y')], ['15', '11']);
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });
});
