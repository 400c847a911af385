// shapes.test.mjs — every view follows the loaded model. Checkpoints of several shapes (blocks,
// heads, patch grid, classes; gray and RGB, square and not, softmax and sigmoid; timm and Hugging
// Face names) are written at test time and loaded one after another through the page's own
// "Load your own model…" input, into one page whose views were left in the previous model's
// state (the last block stepped to, a query patch, a class chosen). For each: every method of the
// list explains; "Inside the model" shows the model's heads at every block and its blocks in
// every row, for the CLS token and for patches in the grid's corners; the grid of all methods, the
// perturbation view and AttAttr's head grid and tree are drawn; the raw map exports at the model's
// patch grid; a brush stroke is explained; the captions name a class of the loaded model; and
// nothing shows an error (the error bar, the grid's cells, the console). Last, the shipped model
// again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { repo, tmpDir } from '../node/support.mjs';
import { classNames, writeCheckpoint } from '../node/checkpoints.mjs';
import { afterNewExplanation, appSession, explanationCount, exportNpy, skipReason, waitGridDone } from './harness.mjs';

const skip = skipReason();
if (skip) test('the page with models of several shapes', { skip }, () => {});

// The first is the shape of the report (3 blocks, 5 heads, 40×56, 4 classes, Hugging Face names).
const SHAPES = [
  { name: 'hf-40x56-b3h5', naming: 'hf', imageH: 40, imageW: 56, channels: 3, patch: 8, dim: 20, depth: 3, heads: 5, mlpDim: 32, classes: 4, multiLabel: false },
  { name: 'gray-32-b2h2', naming: 'timm', imageH: 32, imageW: 32, channels: 1, patch: 8, dim: 16, depth: 2, heads: 2, mlpDim: 32, classes: 3, multiLabel: false },
  { name: 'sigmoid-24x40-b4h3', naming: 'hf', imageH: 24, imageW: 40, channels: 3, patch: 4, dim: 24, depth: 4, heads: 3, mlpDim: 48, classes: 6, multiLabel: true },
  { name: 'tall-48x24-b1h4', naming: 'timm', imageH: 48, imageW: 24, channels: 3, patch: 6, dim: 16, depth: 1, heads: 4, mlpDim: 32, classes: 12, multiLabel: true },
  { name: 'gray-16-b5h1', naming: 'hf', imageH: 16, imageW: 16, channels: 1, patch: 4, dim: 8, depth: 5, heads: 1, mlpDim: 16, classes: 2, multiLabel: false },
];

// Models with prefix tokens other than one CLS token: the variants reference's checkpoints
// (tests/fixtures/variants/<case>/), loaded from their own files. reg_gap has no class token, four
// registers and avg pooling (gray input); distilled_hf [CLS][DIST] and two heads; dinov2_reg
// [CLS][REG × 2] with token+avg pooling and LayerScale (BF16 weights).
const VARIANTS = ['reg_gap', 'distilled_hf', 'dinov2_reg'].map((fixture) => {
  const dir = path.join(repo, 'tests/fixtures/variants', fixture);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const c = meta.config;
  return {
    name: fixture, fixture, dir, imageH: c.image_h, imageW: c.image_w, channels: c.channels, patch: c.patch,
    depth: c.depth, heads: c.heads, classes: c.classes, multiLabel: false,
    names: Object.keys(config.id2label).sort((a, b) => a - b).map((k) => config.id2label[k]),
    firstToken: meta.variant_flags.class_token ? 'the CLS token' : 'register 0',
  };
});

// The per-head kinds of "Inside the model": each, when drawn, has one map per head.
const HEAD_KINDS = ['head-attn', 'head-grad', 'head-gradxa', 'head-relevance', 'head-gradxr', 'head-attattr'];

// Fails with what the page shows when its error bar is visible.
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

// The class a caption names: the text between “ and ” after `prefix`.
function namedClass(text, prefix) {
  const m = new RegExp(`${prefix}“([^”]*)”`).exec(text);
  return m ? m[1] : null;
}

// Hovers the centre of patch (gx, gy) of a gw×gh grid on the main canvas (scrolled into view).
async function hoverPatch(page, gx, gy, gw, gh) {
  const canvas = page.locator('#main-canvas');
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  await canvas.hover({ position: { x: ((gx + 0.5) / gw) * box.width, y: ((gy + 0.5) / gh) * box.height } });
}

// Per block of "Inside the model": the per-head maps of each kind, the block named, the query.
function teachState(page) {
  return page.evaluate((kinds) => ({
    block: Number(document.getElementById('block-out').textContent),
    blockMax: Number(document.getElementById('block').max),
    heads: Object.fromEntries(kinds.map((k) => [k, document.querySelectorAll(`#teach-block canvas[data-kind=${k}]`).length])),
    titles: [...document.querySelectorAll('#teach-block .teach-row strong')].map((s) => s.textContent),
    rows: [...document.querySelectorAll('#teach .teach-row')].map((r) => ({ kind: r.dataset.kind, figures: r.querySelectorAll('figure').length })),
    query: document.getElementById('teach-query').textContent,
    captions: [...document.querySelectorAll('#teach-block .formula')].map((f) => f.textContent).join('\n'),
  }), HEAD_KINDS);
}

describe('the page with models of several shapes', { skip }, () => {
  const app = appSession();
  const dir = skip ? null : tmpDir();
  after(() => dir && fs.rmSync(dir, { recursive: true, force: true }));

  // Leaves the views in a state that fits the current model only: the last block stepped to, the
  // query on the last patch, the last class chosen.
  async function disturb(page) {
    const last = Number(await page.getAttribute('#block', 'max'));
    for (let b = Number(await page.textContent('#block-out')); b < last; b++) await page.click('#block-next');
    const classes = await page.locator('#scores .score').count();
    const chosen = Number(await page.getAttribute('#scores .score[aria-pressed=true]', 'data-class'));
    await afterNewExplanation(page, () => page.click(`#scores .score[data-class="${chosen === classes - 1 ? 0 : classes - 1}"]`));
    await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
    const box = await page.locator('#main-canvas').boundingBox();
    await page.mouse.move(box.x + box.width + 40, box.y - 40);
    await page.focus('#main-canvas');
    for (let k = 0; k < 12; k++) {
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowDown');
    }
    assert.match(await page.textContent('#teach-query'), /^query: patch/);
  }

  test('every method and view follows each loaded model, with no error anywhere', async (t) => {
    const { page } = app.tab;
    const t0 = Date.now();
    const labels = JSON.parse(fs.readFileSync(path.join(app.models.dir, 'gallery/labels.json'), 'utf8'));
    const shippedNames = labels.class_names;
    const methods = await page.$$eval('#method option', (os) => os.map((o) => o.value));
    assert.ok(methods.length >= 8, `${methods.length} methods`);
    await waitGridDone(page);

    for (const shape of [...SHAPES, ...VARIANTS]) {
      const at = `${shape.name}`;
      const names = shape.names ?? classNames(shape);
      const gw = shape.imageW / shape.patch;
      const gh = shape.imageH / shape.patch;
      const files = shape.fixture
        ? { checkpoint: path.join(shape.dir, 'model.safetensors'), config: path.join(shape.dir, 'config.json') }
        : writeCheckpoint(dir, shape);
      await disturb(page);

      const before = await explanationCount(page);
      await page.setInputFiles('#model-file', [files.checkpoint, files.config]);
      await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
        !document.getElementById('error').hidden, before, { timeout: 60_000 });
      await assertNoError(page, `${at}: loading`);
      await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false');
      await assertNoError(page, `${at}: the first explanation`);
      assert.deepEqual(app.tab.consoleErrors, [], `${at}: loading`);

      // The model panel, the scores and the block stepper describe the loaded model.
      const info = await page.textContent('#model-info');
      assert.match(info, new RegExp(`${shape.imageH}×${shape.imageW}×${shape.channels} input, patch ${shape.patch} \\(${gh}×${gw} patches\\)`), at);
      assert.match(info, new RegExp(`${shape.depth} blocks × ${shape.heads} heads, ${shape.classes} classes, ${shape.multiLabel ? 'multi-label' : 'softmax'}`), at);
      const scores = await page.$$eval('#scores .score .score-name', (s) => s.map((x) => x.textContent));
      assert.deepEqual(scores, names, `${at}: the scores are the model's classes`);
      assert.match(await page.textContent('#scores-note'), shape.multiLabel ? /^Sigmoid/ : /^Softmax/, at);
      assert.equal(await page.textContent('#model-size'), `(${shape.imageW}×${shape.imageH})`, at);
      // The views were reset: the first block, the CLS token, the predicted class.
      let s = await teachState(page);
      assert.equal(s.blockMax, shape.depth - 1, `${at}: the block stepper's range`);
      assert.ok(s.block <= shape.depth - 1, `${at}: block ${s.block} of ${shape.depth}`);
      assert.equal(s.query, `query: ${shape.firstToken ?? 'the CLS token'}`, `${at}: the query patch of the previous model was dropped`);

      for (const method of methods) {
        const where = `${at}, ${method}`;
        await explainWith(page, method);
        // The captions name a class of the loaded model.
        const title = await page.textContent('#view-title');
        assert.ok(names.includes(namedClass(title, 'class ')), `${where}: the title names "${namedClass(title, 'class ')}" (${title})`);
        const timing = await page.textContent('#timing');
        assert.ok(names.includes(namedClass(timing, `${method} for `)), `${where}: the timing line "${timing}"`);
        const caption = await page.textContent('#labels');
        for (const n of shippedNames) assert.ok(!caption.includes(n), `${where}: the caption "${caption}" names the shipped model's class ${n}`);
        assert.equal(await page.textContent('#grid-size'), `(${gh}×${gw})`, where);
        // The perturbation curve of this map, named after a class of the model.
        await page.waitForFunction((m) => document.querySelector('#faith-note').textContent.startsWith(`— ${m},`) ||
          !document.getElementById('error').hidden, method, { timeout: 60_000 });
        await assertNoError(page, `${where}: perturbation`);
        assert.ok(names.includes(namedClass(await page.textContent('#faith-note'), `${method}, `)), `${where}: ${await page.textContent('#faith-note')}`);
        const strip = await page.$$eval('.faith-strip[data-order=positive] canvas', (cs) => cs.map((c) => `${c.width}×${c.height}`));
        assert.deepEqual(strip, Array(10).fill(`${shape.imageW}×${shape.imageH}`), `${where}: the perturbed images`);

        // "Inside the model": the model's heads in every per-head row, its blocks in every row.
        await waitHeads(page);
        await assertNoError(page, `${where}: per-head views`);
        s = await teachState(page);
        assert.equal(s.query, `query: ${shape.firstToken ?? 'the CLS token'}`, where);
        for (const k of HEAD_KINDS) assert.ok(s.heads[k] === 0 || s.heads[k] === shape.heads, `${where}: ${s.heads[k]} maps of ${k}, ${shape.heads} heads`);
        assert.equal(s.heads['head-attn'], shape.heads, where);
        for (const r of s.rows) assert.equal(r.figures, shape.depth, `${where}: the row ${r.kind} has ${r.figures} blocks`);
        const grad = /“([^”]*)”/.exec(s.captions);
        if (grad) assert.ok(names.includes(grad[1]), `${where}: ∇A is named for "${grad[1]}"`);
        // Options bounded by the model (block indices) offer its blocks.
        const blockChoices = await page.$$eval('#options label', (ls) => ls.filter((l) => /^(start layer|block)\b/.test(l.textContent))
          .map((l) => [...l.querySelectorAll('option')].map((o) => Number(o.value))));
        for (const c of blockChoices) assert.equal(Math.max(...c), shape.depth - 1, `${where}: block options ${c}`);
        if (await page.locator('.importance-grid').count()) {
          assert.equal(await page.locator('.importance-grid td').count(), shape.depth * shape.heads, `${where}: the head-importance grid`);
          assert.equal(await page.locator('#attr-tree').count(), 1, where);
        }
      }

      // Every block, head by head, for the CLS token and the grid's corner patches (the method of
      // the last loop step stays; transformer-attribution also shows ∇A, R_A and their products).
      await explainWith(page, methods.includes('transformer-attribution') ? 'transformer-attribution' : methods[0]);
      await waitHeads(page);
      await page.focus('#block');
      await page.keyboard.press('Home');
      for (let b = 0; b < shape.depth; b++) {
        if (b > 0) await page.click('#block-next');
        for (const [gx, gy] of [[0, 0], [gw - 1, gh - 1]]) {
          await hoverPatch(page, gx, gy, gw, gh);
          s = await teachState(page);
          const p = gy * gw + gx;
          assert.equal(s.query, `query: patch ${p} (row ${gy}, column ${gx})`, `${at}: block ${b}`);
          assert.equal(s.block, b, at);
          assert.ok(s.titles.every((x) => x.startsWith(`block ${b}:`)), `${at}: ${s.titles}`);
          for (const k of HEAD_KINDS) assert.ok(s.heads[k] === 0 || s.heads[k] === shape.heads, `${at}, block ${b}, patch ${p}: ${s.heads[k]} maps of ${k}`);
          assert.equal(s.heads['head-attn'], shape.heads, `${at}, block ${b}`);
        }
      }
      await page.click('#block-next');
      assert.equal((await teachState(page)).block, shape.depth - 1, `${at}: the stepper stops at the last block`);
      await assertNoError(page, `${at}: stepping the blocks`);

      // The raw map exported at the model's patch grid (a token-map method).
      const npy = await exportNpy(page);
      assert.deepEqual(npy.shape, [gh, gw], `${at}: the exported map`);

      // The grid of all methods: every cell drawn, none an error.
      await waitGridDone(page);
      const cells = await page.$$eval('#grid .cell', (cs) => cs.map((c) => ({ method: c.dataset.method, state: c.dataset.state, title: c.title })));
      assert.equal(cells.length, methods.length, at);
      for (const c of cells) assert.equal(c.state, 'done', `${at}: the grid's ${c.method}: ${c.title}`);

      // The teaching sections follow the model too: opened (they stay open for the next models),
      // each draws for this one with no error — the walk, heads off (its grid: every head of the
      // model), the whole matrices, the feed-forward's effect (every block) and the comparison.
      for (const id of ['walk-open', 'heads-open', 'mat-open', 'ff-open', 'cmp-open']) await page.$eval(`#${id}`, (d) => { d.open = true; });
      await page.waitForFunction(() => !document.getElementById('error').hidden || (
        document.getElementById('walk').dataset.ready === 'true' &&
        document.getElementById('heads-section').dataset.ready === 'true' &&
        document.getElementById('mat-canvas').dataset.ready === 'true' &&
        document.getElementById('ff-maps').dataset.ready === 'true' &&
        document.getElementById('cmp-open').dataset.ready === 'true'), null, { timeout: 180_000 });
      await assertNoError(page, `${at}: the teaching sections`);
      assert.equal(await page.locator('#heads-section button.heads-head').count(), shape.depth * shape.heads, `${at}: the heads-off grid`);
      assert.ok(Number(await page.$eval('#mat-canvas', (c) => c.dataset.block)) < shape.depth, `${at}: the matrix's block`);
      assert.deepEqual(app.tab.consoleErrors, [], `${at}: the teaching sections`);

      // The editor: a brush stroke is classified and explained with this model, then reverted.
      await page.check('input[name=tool][value=brush]');
      await afterNewExplanation(page, async () => {
        const box = await page.locator('#main-canvas').boundingBox();
        await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.3);
        await page.mouse.down();
        await page.mouse.move(box.x + box.width * 0.7, box.y + box.height * 0.6, { steps: 4 });
        await page.mouse.up();
      });
      await page.waitForFunction(() => !document.documentElement.dataset.live, null, { timeout: 60_000 });
      await assertNoError(page, `${at}: editing`);
      assert.match(await page.textContent('#labels'), /Edited\./, at);
      await afterNewExplanation(page, () => page.click('#edit-revert'));
      await page.waitForFunction(() => !document.documentElement.dataset.live, null, { timeout: 60_000 });
      await page.check('input[name=tool][value=inspect]');
      await assertNoError(page, `${at}: reverting`);
      assert.deepEqual(app.tab.consoleErrors, [], at);
      t.diagnostic(`${at}: ${methods.length} methods, ${shape.depth} blocks × ${shape.heads} heads, ${((Date.now() - t0) / 1000).toFixed(1)} s so far`);
    }

    // Back to the shipped model: its heads, blocks and classes again.
    await disturb(page);
    const before = await explanationCount(page);
    await page.click('#model-reset');
    await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
      !document.getElementById('error').hidden, before, { timeout: 60_000 });
    await assertNoError(page, 'the shipped model again');
    await waitHeads(page);
    const info = await page.textContent('#model-info');
    const depth = Number(/(\d+) blocks/.exec(info)[1]);
    const heads = Number(/× (\d+) heads/.exec(info)[1]);
    const s = await teachState(page);
    assert.equal(s.blockMax, depth - 1);
    assert.equal(s.heads['head-attn'], heads);
    for (const r of s.rows) assert.equal(r.figures, depth, `the shipped model: the row ${r.kind}`);
    assert.deepEqual(await page.$$eval('#scores .score .score-name', (x) => x.map((e) => e.textContent)), shippedNames);
    assert.ok(shippedNames.includes(namedClass(await page.textContent('#view-title'), 'class ')));
    await assertNoError(page, 'the shipped model again');
    assert.deepEqual(app.tab.consoleErrors, []);
    t.diagnostic(`${SHAPES.length + VARIANTS.length} shapes and back in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
});
