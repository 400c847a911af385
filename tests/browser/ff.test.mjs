// ff.test.mjs — issue 17 item 3 in Debian's chromium: "The feed-forward's effect". Every value the
// view draws — the query's row before and after the FF in both units (the context shares s and the
// raw norms N), the difference, the ρ written per block, the chart's mixing ratios (mean over
// tokens, and the query token's) and the readouts — is checked against two references obtained
// apart from the view: (1) the same wasm engine in a worker of the test's own (norm-based, then
// the engine's summary of those maps), to 1e-6 relative to max(1, |value|); (2) the native CLI
// `vitlens explain --method norm-based --save-stages F.npz --ff-summary --json` on the same model
// and image, whose shares the test works out from the maps, to 1e-5 (wasm and native products
// round differently; ρ to 1e-3). The colour of a cell is the colour map of its value. Every
// control is used with the keyboard; at 375×812 with touch a tap reads a cell and a chart point and
// the page does not scroll sideways. Models: the shipped one, a DeiT-tiny-shaped one (197 tokens,
// 12 blocks: progress, Cancel, Compute again) and a distilled one with a 3 × 4 patch grid (CLS and
// DIST keys in the prefix strip), then one with four registers and no class token. Screenshots go
// to tests/artifacts/; the compute and draw times are printed as diagnostics.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readNpz } from '../node/npz.mjs';
import { nativeCli, repo, tmpDir } from '../node/support.mjs';
import { artifacts, chooseTestModel, installTestEngine, launch, loadModelFiles, modelsDir, openAt, openWithDeitTiny, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the feed-forward view in chromium', { skip }, () => {});

const STAGES = ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer'];

// A reference: what the view should draw, from one engine. `tol` is the tolerance of its values
// (relative to max(1, |value|)), `rhoTol` of its ρ.
//   rowBefore / rowAfter(b, q)    row q of N_atb-res-ln / N_atb-res-ln-ff of block b
//   shareBefore / shareAfter(b, q) the context shares of that row
//   mixing(b, s, q), mixingMean(b, stage), rho(b) = { query: [n], flat, rows }

// The native engine on (model, image): the CLI's --save-stages maps and --ff-summary --json; the
// context shares s[q, j] = N[q, j] / Σ_{k≠q} N[q, k] are worked out here in float64.
function cliRef(model, image, dir) {
  const file = path.join(dir, `stages-${path.basename(model)}.npz`);
  const out = JSON.parse(nativeCli('explain', model, image, '--method', 'norm-based', '--save-stages', file, '--ff-summary', '--json'));
  const z = readNpz(new Uint8Array(fs.readFileSync(file)));
  const [L, n] = z.atb.shape;
  const row = (maps, b, q) => Array.from(maps.subarray((b * n + q) * n, (b * n + q + 1) * n));
  const shares = (r, q) => {
    const sum = r.reduce((a, v, j) => a + (j === q ? 0 : v), 0);
    return r.map((v, j) => (j === q || sum === 0 ? 0 : v / sum));
  };
  const sum = out.ff_summary.blocks;
  return {
    name: 'the native CLI', L, n,
    // The page runs the wasm engine, whose float32 products round differently from the native
    // build's (the CLI's maps and the page's agree to ~3e-6, as in norm_stages.test.mjs): 1e-5; and
    // a swap of two near-equal keys of a row moves its ρ by 12/(n³ − n), so ρ to 1e-3.
    tol: 1e-5, rhoTol: 1e-3,
    rowBefore: (b, q) => row(z.atb_res_ln.data, b, q),
    rowAfter: (b, q) => row(z.atb_res_ln_ff.data, b, q),
    shareBefore: (b, q) => shares(row(z.atb_res_ln.data, b, q), q),
    shareAfter: (b, q) => shares(row(z.atb_res_ln_ff.data, b, q), q),
    mixing: (b, s, q) => z.mixing_ratio.data[(b * 5 + s) * n + q],
    mixingMean: (b, st) => sum[b].mixing_mean[st],
    rho: (b) => ({ query: sum[b].rho_query, flat: sum[b].rho_flat, rows: sum[b].rho_rows }),
  };
}

// The same engine build as the page's, in a worker of the test's own started in the page (the
// page's worker.js, another instance): the model (its URL, or the files of the input #test-model),
// the first gallery scene, explain norm-based, then normFf on those maps; rows of the queries asked.
async function engineRef(page, { url = null, files = false, queries }) {
  await installTestEngine(page);
  const e = await page.evaluate(async ({ url, files, queries }) => {
    const { call, prep, done } = await testEngine(files ? { input: true } : { url });
    const ex = await call('explain', { image: prep.image, method: 'norm-based', options: {} });
    const { summary } = await call('normFf', { image: prep.image, norm: ex.norm });
    done();
    const n = prep.info.tokens;
    const rowOf = (a, q) => Array.from(a.subarray(q * n, (q + 1) * n));
    const perQuery = (f) => Object.fromEntries(queries.map((q) => [q, ex.norm.map((blk, b) => f(blk, summary[b], q))]));
    return {
      n, L: ex.norm.length,
      before: perQuery((blk, s, q) => rowOf(blk.maps['atb-res-ln'], q)),
      after: perQuery((blk, s, q) => rowOf(blk.maps['atb-res-ln-ff'], q)),
      shareBefore: perQuery((blk, s, q) => rowOf(s.shareBefore, q)),
      shareAfter: perQuery((blk, s, q) => rowOf(s.shareAfter, q)),
      mixing: ex.norm.map((blk) => Object.values(blk.mixing).map((m) => Array.from(m))),
      stages: Object.keys(ex.norm[0].mixing),
      mixingMean: summary.map((s) => s.mixingMean),
      rho: summary.map((s) => ({ query: Array.from(s.rhoQuery), flat: s.rhoFlat, rows: s.rhoRows })),
    };
  }, { url, files, queries });
  assert.deepEqual(e.stages, STAGES);
  const need = (table, q) => {
    if (!table[q]) throw new Error(`the engine reference has no rows of query ${q} (ask for it in queries)`);
    return table[q];
  };
  return {
    name: 'the same wasm engine', L: e.L, n: e.n, tol: 1e-6, rhoTol: 1e-6,
    rowBefore: (b, q) => need(e.before, q)[b],
    rowAfter: (b, q) => need(e.after, q)[b],
    shareBefore: (b, q) => need(e.shareBefore, q)[b],
    shareAfter: (b, q) => need(e.shareAfter, q)[b],
    mixing: (b, s, q) => e.mixing[b][s][q],
    mixingMean: (b, st) => e.mixingMean[b][st],
    rho: (b) => e.rho[b],
  };
}

const near = (a, b, tol) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

function checkRow(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: ${got.length} values drawn, ${want.length} expected`);
  got.forEach((v, j) => assert.ok(near(v, want[j], tol), `${what}, key ${j}: drawn ${v}, expected ${want[j]}`));
}

// Every panel drawn: { kind, block, values }.
const panels = (page) => page.$$eval('#ff-maps .ff-panel canvas', (cs) => cs.map((c) => ({
  kind: c.dataset.kind, block: Number(c.dataset.block), values: JSON.parse(c.dataset.values),
})));

// Checks every drawn panel and the ρ written beside it against each reference.
async function checkDrawn(page, refs, what) {
  const d = await page.$eval('#ff-maps', (b) => ({ ...b.dataset }));
  const q = Number(d.query);
  const drawn = await panels(page);
  const facts = await page.$$eval('#ff-maps .ff-facts', (ps) => ps.map((p) => ({ ...p.dataset })));
  assert.ok(drawn.length >= 3, `${what}: panels drawn`);
  for (const ref of refs) {
    assert.equal(Number(d.n), ref.n, `${what}: n`);
    for (const p of drawn) {
      const [wb, wa] = d.units === 'share' ? [ref.shareBefore(p.block, q), ref.shareAfter(p.block, q)] : [ref.rowBefore(p.block, q), ref.rowAfter(p.block, q)];
      const want = { before: wb, after: wa, diff: wa.map((v, j) => v - wb[j]) }[p.kind];
      checkRow(p.values, want, ref.tol, `${what}: block ${p.block} ${p.kind} (${d.units}, query ${q}) vs ${ref.name}`);
    }
    for (const f of facts) {
      const r = ref.rho(Number(f.block));
      const at = `${what}: block ${f.block} vs ${ref.name}`;
      assert.ok(near(Number(f.rhoQuery), r.query[q], ref.rhoTol), `${at}: ρ of row ${q} ${f.rhoQuery} vs ${r.query[q]}`);
      assert.ok(near(Number(f.rhoFlat), r.flat, ref.rhoTol), `${at}: ρ of the whole map ${f.rhoFlat} vs ${r.flat}`);
      assert.ok(near(Number(f.rhoRows), r.rows, ref.rhoTol), `${at}: mean ρ over rows ${f.rhoRows} vs ${r.rows}`);
    }
  }
  return { q, drawn: drawn.length };
}

// The chart's points: core's mean over tokens, or the query token's ratio.
async function checkChart(page, refs) {
  const points = await page.$$eval('#ff-chart circle', (cs) => cs.map((c) => ({ stage: c.dataset.series, block: Number(c.dataset.block), value: Number(c.dataset.value) })));
  const mode = await page.$eval('#ff-chart', (s) => s.dataset.mode);
  const q = Number(await page.$eval('#ff-maps', (b) => b.dataset.query));
  for (const ref of refs) {
    assert.equal(points.length, ref.L * 5, 'one point per block and stage');
    for (const p of points) {
      const want = mode === 'mean' ? ref.mixingMean(p.block, p.stage) : ref.mixing(p.block, STAGES.indexOf(p.stage), q);
      assert.ok(near(p.value, want, ref.tol), `chart (${mode}) block ${p.block} ${p.stage}: ${p.value} vs ${ref.name}'s ${want}`);
    }
  }
  return mode;
}

// Waits until the view has drawn (for `key`: a predicate on #ff-maps' dataset) or an error shows.
async function waitDrawn(page, want = {}) {
  await page.waitForFunction((w) => {
    if (!document.getElementById('error').hidden) return true;
    const d = document.getElementById('ff-maps').dataset;
    return d.ready === 'true' && Object.entries(w).every(([k, v]) => d[k] === String(v));
  }, want, { timeout: 300_000 });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
}

// Opens the section with the keyboard (its summary, Enter) and waits for the first drawing.
async function openView(page) {
  await page.focus('#ff-open > summary');
  await page.keyboard.press('Enter');
  await waitDrawn(page);
}

describe('the feed-forward view', { skip }, () => {
  let env;
  let models;
  let dir;
  let scene; // the first gallery scene: the page opens it first
  before(async () => {
    models = modelsDir();
    env = await launch({ models: models.dir });
    dir = tmpDir();
    const labels = JSON.parse(fs.readFileSync(path.join(models.dir, 'gallery/labels.json'), 'utf8'));
    scene = path.join(models.dir, 'gallery', (labels.scenes ?? labels.images ?? labels.items)[0].image);
  });
  after(async () => {
    await env?.browser.close();
    await env?.server.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('1280×800, the keyboard alone: maps, difference, ρ and mixing ratios equal the engine\'s', async (t) => {
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    const cli = cliRef(path.join(models.dir, 'vitlens-scenes.vitl'), scene, dir);
    const gridW = Math.round(Math.sqrt(cli.n - 1));
    const patchQuery = 2 + gridW; // from CLS, one patch right and one down on the image
    const refs = [await engineRef(page, { url: './models/vitlens-scenes.vitl', queries: [0, patchQuery] }), cli];
    const t0 = Date.now();
    await openView(page);
    const d0 = await page.$eval('#ff-maps', (b) => ({ ...b.dataset }));
    t.diagnostic(`shipped model (n = ${cli.n}, ${cli.L} blocks): shown ${Date.now() - t0} ms after opening; norm-based ${d0.explainMs} ms ` +
      `in the engine, summary ${d0.summaryMs} ms, request ${d0.fetchMs} ms; draw ${d0.drawMs} ms`);
    assert.equal(d0.query, '0');
    assert.equal(d0.units, 'share');
    let r = await checkDrawn(page, refs, 'CLS, block 0');
    assert.equal(r.drawn, 3);
    assert.equal(await checkChart(page, refs), 'mean');

    // The stepper: the range's arrow keys, then the ▶ button with Enter.
    await page.focus('#ff-block');
    await page.keyboard.press('ArrowRight');
    await waitDrawn(page, { block: 1 });
    await page.focus('#ff-next');
    await page.keyboard.press('Enter');
    await waitDrawn(page, { block: 2 });
    await checkDrawn(page, refs, 'CLS, block 2');
    assert.match(await page.textContent('#ff-chart-readout'), /^block 2, atb-res-ln-ff: r̄ = /);

    // The maps' own keys: arrows move the key read out, Page Down the block.
    await page.focus('#ff-maps');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    let ro = await page.$eval('#ff-readout', (p) => ({ ...p.dataset, text: p.textContent }));
    const k = Number(ro.key);
    assert.equal(k, 2 + gridW, 'from key 1 one right and one down');
    for (const ref of refs) {
      const [rb, ra] = [ref.shareBefore(2, 0), ref.shareAfter(2, 0)];
      assert.ok(near(Number(ro.before), rb[k], ref.tol) && near(Number(ro.after), ra[k], ref.tol) &&
        near(Number(ro.diff), ra[k] - rb[k], ref.tol), `readout ${ro.text} vs ${ref.name}`);
      const written = Number(/after − before = (\S+)$/.exec(ro.text)[1]);
      assert.ok(near(written, ra[k] - rb[k], ref.tol), `the readout writes ${written}, ${ref.name}'s difference is ${ra[k] - rb[k]}`);
    }
    await page.keyboard.press('PageDown');
    await waitDrawn(page, { block: 3 });
    ro = await page.$eval('#ff-readout', (p) => ({ ...p.dataset }));
    assert.equal(ro.block, '3');

    // The colour of the cursor's cell in the "after" panel: viridis of its value over [0, max].
    const colour = await page.evaluate(async () => {
      const { COLORMAPS } = await import('/render.js');
      const c = document.querySelector('#ff-maps canvas[data-kind=after]');
      const key = Number(document.getElementById('ff-readout').dataset.key);
      const values = JSON.parse(c.dataset.values);
      const cell = Number(c.dataset.cell);
      const side = Math.round(Math.sqrt(values.length - 1));
      const p = key - 1;
      const dpr = c.width / c.clientWidth;
      const x = (Number(c.dataset.x0) + ((p % side) + 0.5) * cell) * dpr;
      const y = (Math.floor(p / side) + 0.5) * cell * dpr;
      const px = c.getContext('2d').getImageData(Math.floor(x), Math.floor(y), 1, 1).data;
      const t = Math.round(Math.min(1, values[key] / Number(c.dataset.scaleMax)) * 255) * 3;
      const lut = COLORMAPS.viridis;
      return { px: [px[0], px[1], px[2]], want: [lut[t], lut[t + 1], lut[t + 2]], cell };
    });
    assert.ok(colour.cell >= 8, `cells of ${colour.cell} px`);
    colour.px.forEach((c, ch) => assert.ok(Math.abs(c - colour.want[ch]) <= 1, `colour ${colour.px} vs ${colour.want}`));

    // Raw norms instead of shares (the select with the keyboard).
    await page.focus('#ff-units');
    await page.keyboard.press('ArrowDown');
    await waitDrawn(page, { units: 'raw' });
    await checkDrawn(page, refs, 'CLS, block 3, raw norms');

    // The query follows the page's: the arrow keys on the image move it to a patch.
    await page.focus('#main-canvas');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    await waitDrawn(page, { query: patchQuery });
    assert.match(await page.textContent('#ff-query'), /query: patch/);
    await checkDrawn(page, refs, 'a patch query, raw norms');

    // All blocks at once (the checkbox with Space): one row of three panels per block.
    await page.focus('#ff-all');
    await page.keyboard.press('Space');
    await waitDrawn(page, { all: true });
    const dAll = await page.$eval('#ff-maps', (b) => ({ ...b.dataset }));
    t.diagnostic(`shipped model, all ${cli.L} blocks drawn in ${dAll.drawMs} ms`);
    r = await checkDrawn(page, refs, 'all blocks, raw norms');
    assert.equal(r.drawn, 3 * cli.L);
    await page.focus('#ff-units');
    await page.keyboard.press('ArrowUp');
    await waitDrawn(page, { units: 'share', all: true });
    await checkDrawn(page, refs, 'all blocks, shares');

    // The chart: the arrow keys pick a block and a stage; its values are core's; then the query's.
    await page.focus('#ff-chart');
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('ArrowDown');
    const cr = await page.$eval('#ff-chart-readout', (p) => ({ ...p.dataset }));
    assert.equal(cr.block, '2');
    assert.equal(cr.stage, 'atb-res-ln');
    for (const ref of refs) assert.ok(near(Number(cr.value), ref.mixingMean(2, 'atb-res-ln'), ref.tol), `chart readout vs ${ref.name}'s r̄`);
    await page.focus('#ff-mix-mode');
    await page.keyboard.press('ArrowDown');
    await page.waitForFunction(() => document.getElementById('ff-chart').dataset.mode === 'query');
    assert.equal(await checkChart(page, refs), 'query');
    assert.match(await page.textContent('#ff-chart-caption'), /mixing ratio of the query token \(patch/);
    await page.keyboard.press('ArrowUp');
    await page.waitForFunction(() => document.getElementById('ff-chart').dataset.mode === 'mean');
    // Escape on the image: the CLS token again; one block again.
    await page.focus('#main-canvas');
    await page.keyboard.press('Escape');
    await waitDrawn(page, { query: 0 });
    await page.focus('#ff-all');
    await page.keyboard.press('Space');
    await waitDrawn(page, { all: false });
    await checkDrawn(page, refs, 'CLS, block 2 again');

    fs.mkdirSync(artifacts, { recursive: true });
    await page.locator('section[aria-labelledby=h-ff]').screenshot({ path: path.join(artifacts, 'ff-1280x800.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('375×812 touch: taps read a cell and a chart point; no sideways scroll', async () => {
    const tab = await openAt(env, { width: 375, height: 812 }, true);
    const { page } = tab;
    const refs = [await engineRef(page, { url: './models/vitlens-scenes.vitl', queries: [0] }),
      cliRef(path.join(models.dir, 'vitlens-scenes.vitl'), scene, dir)];
    // The sections above settle first (the grid and the per-head views change the page's height).
    await waitGridDone(page);
    await page.waitForFunction(() => document.documentElement.dataset.teachKey);
    const summary = page.locator('#ff-open > summary');
    await summary.scrollIntoViewIfNeeded();
    const sb = await summary.boundingBox();
    await page.touchscreen.tap(sb.x + 20, sb.y + sb.height / 2);
    await waitDrawn(page);
    await checkDrawn(page, refs, '375 px');
    const diff = page.locator('#ff-maps canvas[data-kind=diff]');
    await diff.scrollIntoViewIfNeeded();
    const box = await diff.boundingBox();
    assert.ok(box.x + box.width <= 375, `the third panel fits the screen (${box.x + box.width} px)`);
    // Tap the cell of patch 5 (token 6) in the difference panel.
    const geo = await diff.evaluate((c) => ({ cell: Number(c.dataset.cell), x0: Number(c.dataset.x0) }));
    const gridW = Math.round(Math.sqrt(refs[1].n - 1));
    await page.touchscreen.tap(box.x + geo.x0 + ((5 % gridW) + 0.5) * geo.cell, box.y + (Math.floor(5 / gridW) + 0.5) * geo.cell);
    await page.waitForFunction(() => document.getElementById('ff-readout').dataset.key === '6');
    const ro = await page.$eval('#ff-readout', (p) => ({ ...p.dataset }));
    for (const ref of refs) {
      const want = ref.shareAfter(0, 0)[6] - ref.shareBefore(0, 0)[6];
      assert.ok(near(Number(ro.diff), want, ref.tol), `tapped difference ${ro.diff} vs ${ref.name}'s ${want}`);
    }
    // Tap a point of the chart: the last block's layer stage.
    const L = refs[0].L;
    const point = page.locator(`#ff-chart circle[data-series=layer][data-block="${L - 1}"]`);
    await point.scrollIntoViewIfNeeded();
    const pb = await point.boundingBox();
    await page.touchscreen.tap(pb.x + pb.width / 2, pb.y + pb.height / 2);
    await page.waitForFunction((b) => document.getElementById('ff-chart-readout').dataset.block === String(b) &&
      document.getElementById('ff-chart-readout').dataset.stage === 'layer', L - 1);
    const cr = await page.$eval('#ff-chart-readout', (p) => Number(p.dataset.value));
    for (const ref of refs) assert.ok(near(cr, ref.mixingMean(L - 1, 'layer'), ref.tol), `tapped point vs ${ref.name}`);
    const width = await page.evaluate(() => document.scrollingElement.scrollWidth);
    assert.ok(width <= 375, `no horizontal scroll (${width} px)`);
    await page.$eval('#h-ff', (h) => h.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: path.join(artifacts, 'ff-375x812.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a DeiT-tiny-shaped model (197 tokens, 12 blocks): progress, Cancel, Compute; times; values equal the engine\'s', async (t) => {
    const { tab, page, file } = await openWithDeitTiny(env, { dir });
    // Cancel while the maps are computed (the engine stops at its next progress report), past
    // block 2: the engine keeps the blocks it finished (ExplainState::norm).
    await page.focus('#ff-open > summary');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => Number(document.getElementById('ff-progress-row').dataset.fraction ?? 0) > 2 / 12, null, { timeout: 180_000 });
    assert.ok(await page.isVisible('#ff-progress-row'), 'the progress bar shows');
    await page.focus('#ff-cancel');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.getElementById('ff-retry').hidden, null, { timeout: 120_000 });
    assert.match(await page.textContent('#ff-note'), /Cancelled/);
    // The views' requests settled (the all-methods grid may still run: Compute's request passes it).
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false' && document.documentElement.dataset.viewRequests === '0', null, { timeout: 180_000 });
    const t0 = Date.now();
    await page.focus('#ff-retry');
    await page.keyboard.press('Enter');
    // Another view's request while the maps are computed (the matrices view's `teach`, ~0.1 s)
    // withdraws the request (background.js, rank 3): the view is drawn before the maps are done,
    // and the engine goes on from the block it was in, not from block 0.
    const progress = () => page.$eval('#ff-progress-row', (r) => ({ ...r.dataset }));
    const before = await (await page.waitForFunction(() => {
      const r = document.getElementById('ff-progress-row').dataset;
      return r.first !== undefined && Number(r.fraction) > Number(r.first) + 0.1 && Number(r.fraction) < 0.6 ? { ...r } : null;
    }, null, { timeout: 180_000 })).jsonValue();
    assert.ok(Number(before.first) >= 2 / 12, `Compute went on from the blocks done before Cancel (first progress ${before.first})`);
    const t1 = Date.now();
    await page.focus('#mat-open > summary');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('mat-canvas').dataset.ready === 'true', null, { timeout: 120_000 });
    const matrixMs = Date.now() - t1;
    const withdrawn = await progress();
    assert.equal(await page.$eval('#ff-maps', (b) => b.dataset.ready), 'false', 'the matrix was drawn before the maps were done');
    assert.ok(Number(withdrawn.restarts ?? 0) >= 1, `the maps' request was withdrawn for the view's (${JSON.stringify(withdrawn)})`);
    await waitDrawn(page);
    const resumed = await progress();
    assert.ok(Number(resumed.resumedAt) >= Math.floor(Number(before.fraction) * 12) / 12,
      `the maps went on from the block they were in (${before.fraction} before, ${resumed.resumedAt} after)`);
    const d = await page.$eval('#ff-maps', (b) => ({ ...b.dataset }));
    t.diagnostic(`DeiT-tiny (n = ${d.n}): shown ${Date.now() - t0} ms after Compute (first progress ${before.first}); ` +
      `the matrices view drawn ${matrixMs} ms after opening while the maps were computed (at ${Math.round(100 * before.fraction)} %, ` +
      `going on at ${Math.round(100 * resumed.resumedAt)} %); norm-based ${d.explainMs} ms in the engine, ` +
      `summary ${d.summaryMs} ms, request ${d.fetchMs} ms; draw ${d.drawMs} ms`);
    assert.equal(d.n, '197');
    assert.equal(await page.getAttribute('#ff-block', 'max'), '11');
    await chooseTestModel(page, file);
    const refs = [await engineRef(page, { files: true, queries: [0] }), cliRef(file, scene, dir)];
    await checkDrawn(page, refs, 'DeiT-tiny block 0');
    await checkChart(page, refs);
    await page.focus('#ff-block');
    await page.keyboard.press('End');
    await waitDrawn(page, { block: 11 });
    await checkDrawn(page, refs, 'DeiT-tiny block 11');
    await page.focus('#ff-all');
    await page.keyboard.press('Space');
    await waitDrawn(page, { all: true });
    const dAll = await page.$eval('#ff-maps', (b) => ({ ...b.dataset }));
    t.diagnostic(`DeiT-tiny, all 12 blocks drawn in ${dAll.drawMs} ms`);
    await checkDrawn(page, refs, 'DeiT-tiny, all blocks');
    await page.locator('section[aria-labelledby=h-ff]').screenshot({ path: path.join(artifacts, 'ff-deit-tiny.png') });
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });

  test('a distilled model with a 3 × 4 grid (CLS and DIST keys), then registers without CLS: values equal the engine\'s', async () => {
    const fixture = path.join(repo, 'tests/fixtures/variants/distilled_hf');
    const files = [path.join(fixture, 'model.safetensors'), path.join(fixture, 'config.json')];
    const vitl = path.join(dir, 'distilled.vitl');
    nativeCli('import', files[0], '--config', files[1], '-o', vitl);
    const tab = await openAt(env, { width: 1280, height: 800 });
    const { page } = tab;
    await loadModelFiles(page, files);
    await chooseTestModel(page, files);
    const patchQuery = 2 + 4 + 1; // from CLS, one patch right and one down on the 3 × 4 grid
    const refs = [await engineRef(page, { files: true, queries: [0, patchQuery] }), cliRef(vitl, scene, dir)];
    await openView(page);
    assert.equal(await page.$eval('#ff-maps', (b) => b.dataset.n), '14');
    await checkDrawn(page, refs, 'distilled, CLS');
    await checkChart(page, refs);
    const strip = await page.$eval('#ff-maps canvas[data-kind=before]', (c) => ({ cols: c.dataset.stripCols, h: c.clientHeight, cell: Number(c.dataset.cell) }));
    assert.equal(strip.cols, '1', 'CLS and DIST in one column beside the 3-row grid');
    assert.equal(strip.h, 3 * strip.cell);
    // The DIST key (token 1) read with the keyboard, then a patch query from the image.
    await page.focus('#ff-maps');
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowRight');
    const ro = await page.$eval('#ff-readout', (p) => ({ ...p.dataset, text: p.textContent }));
    assert.equal(ro.key, '1');
    assert.match(ro.text, /key j = 1: the distillation token/);
    for (const ref of refs) assert.ok(near(Number(ro.after), ref.shareAfter(0, 0)[1], ref.tol), `DIST's share after the FF vs ${ref.name}`);
    await page.focus('#main-canvas');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    await waitDrawn(page, { query: patchQuery });
    await checkDrawn(page, refs, 'distilled, patch query');
    await page.locator('section[aria-labelledby=h-ff]').screenshot({ path: path.join(artifacts, 'ff-distilled.png') });

    // Then, in the same open section, a model without a class token: four registers, gray, 4 × 3.
    const reg = path.join(repo, 'tests/fixtures/variants/reg_gap');
    const regFiles = [path.join(reg, 'model.safetensors'), path.join(reg, 'config.json')];
    const regVitl = path.join(dir, 'reg_gap.vitl');
    nativeCli('import', regFiles[0], '--config', regFiles[1], '-o', regVitl);
    await loadModelFiles(page, regFiles);
    await waitDrawn(page, { n: 16, query: 0 });
    assert.match(await page.textContent('#ff-query'), /query: register 0/);
    assert.match(await page.textContent('#ff-maps .ff-prefix'), /prefix tokens R0, R1, R2, R3/);
    await chooseTestModel(page, regFiles);
    const regRefs = [await engineRef(page, { files: true, queries: [0] }), cliRef(regVitl, scene, dir)];
    await checkDrawn(page, regRefs, 'registers, no class token');
    await checkChart(page, regRefs);
    assert.deepEqual(tab.consoleErrors, []);
    await tab.context.close();
  });
});
