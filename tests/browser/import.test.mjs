// import.test.mjs — converting a checkpoint in the page: the progress bar, "convert to int8", saving
// the model as a .vitl file and loading that file back, and a failed conversion that leaves the
// loaded model in place. The checkpoints are small (tests/node/checkpoints.mjs, made at test time);
// the ViT-B/16 figures come from bench/vitb_chromium.mjs and tests/node/vitb.test.mjs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { tmpDir } from '../node/support.mjs';
import { writeCheckpoint } from '../node/checkpoints.mjs';
import { appSession, recordRequests, sentRequests, skipReason } from './harness.mjs';

const skip = skipReason();
if (skip) test('converting a checkpoint in the page', { skip }, () => {});

const SHAPE = { name: 'import-32x48', naming: 'timm', imageH: 32, imageW: 48, channels: 3, patch: 8, dim: 32, depth: 2, heads: 4, mlpDim: 64, classes: 5, multiLabel: false };

// Waits until the page has drawn an explanation newer than `before`, or shows an error.
async function waitExplainedAfter(page, before) {
  await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
    !document.getElementById('error').hidden, before, { timeout: 60_000 });
  await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false' || !document.getElementById('error').hidden);
}

async function errorText(page) {
  return (await page.isVisible('#error')) ? page.textContent('#error-text') : '';
}

describe('converting a checkpoint in the page', { skip }, () => {
  const app = appSession();
  const dir = skip ? null : tmpDir();
  after(() => dir && fs.rmSync(dir, { recursive: true, force: true }));

  test('int8 conversion with progress, then Save model, then the saved file loads', async () => {
    const { page } = app.tab;
    const files = writeCheckpoint(dir, SHAPE, 3);
    // Every progress report the page shows (the bar is hidden again once the model is loaded).
    await page.evaluate(() => {
      window.importSeen = [];
      new MutationObserver(() => window.importSeen.push(Number(document.documentElement.dataset.importProgress)))
        .observe(document.documentElement, { attributeFilter: ['data-import-progress'] });
    });
    await page.check('#model-int8');
    let before = Number(await page.evaluate(() => document.documentElement.dataset.explanations ?? 0));
    await page.setInputFiles('#model-file', [files.checkpoint, files.config]);
    await waitExplainedAfter(page, before);
    assert.equal(await errorText(page), '');
    const info = await page.textContent('#model-info');
    assert.match(info, /^import-32x48\.safetensors: 32×48×3 input, patch 8 \(4×6 patches\).*, int8\.$/);
    const seen = await page.evaluate(() => window.importSeen);
    assert.ok(seen.length >= 2 && seen[0] === 0 && seen.at(-1) === 1, `progress shown: ${seen.join(', ')}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1], `progress goes back: ${seen.join(', ')}`);
    assert.equal(await page.isVisible('#model-progress-row'), false);

    // Save model → an int8 .vitl of the model (a quarter of the F32 weights, plus its header).
    await recordRequests(page);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#model-save')]);
    assert.deepEqual(await sentRequests(page, 'saveModel'), [{ type: 'saveModel', priority: true }], 'the click\'s request passes the grid\'s queue');
    assert.equal(download.suggestedFilename(), 'import-32x48-int8.vitl');
    const saved = path.join(dir, 'saved.vitl');
    await download.saveAs(saved);
    const bytes = fs.readFileSync(saved);
    assert.equal(bytes.subarray(0, 4).toString('latin1'), 'VITL');
    const f32 = fs.statSync(files.checkpoint).size;
    assert.ok(bytes.length < 0.6 * f32, `${bytes.length} bytes saved for a ${f32}-byte F32 checkpoint`);

    // Loaded back: the same model, and the same scores as the converted one.
    const scores = () => page.$$eval('#scores .score', (els) => els.map((e) => e.textContent));
    const converted = await scores();
    before = Number(await page.evaluate(() => document.documentElement.dataset.explanations ?? 0));
    await page.setInputFiles('#model-file', [saved]);
    await waitExplainedAfter(page, before);
    assert.equal(await errorText(page), '');
    assert.equal(await page.textContent('#model-info'), info.replace('import-32x48.safetensors', 'saved.vitl'));
    assert.deepEqual(await scores(), converted);
    await page.uncheck('#model-int8');
  });

  test('a truncated checkpoint: a clear error, and the loaded model stays', async () => {
    const { page } = app.tab;
    const files = writeCheckpoint(dir, { ...SHAPE, name: 'truncated' }, 4);
    const whole = fs.readFileSync(files.checkpoint);
    fs.writeFileSync(files.checkpoint, whole.subarray(0, Math.floor(whole.length * 0.7)));
    const info = await page.textContent('#model-info');
    await page.setInputFiles('#model-file', [files.checkpoint, files.config]);
    await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: 60_000 });
    assert.match(await errorText(page), /truncated/);
    assert.equal(await page.isVisible('#model-progress-row'), false);
    assert.equal(await page.textContent('#model-info'), info);
    assert.equal(app.tab.offsite.length, 0);
  });
});
