// norm_stages.test.mjs — the teaching view's "Download stages (.npz)" for norm-based in Debian's
// chromium: the downloaded file holds every stage's (L, n, n) maps, the mixing ratios and the
// per-head atb maps, and they equal those of `vitlens explain --method norm-based --save-stages`
// on the same image within 1e-5 (wasm against native rounding); no console error.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readNpz } from '../node/npz.mjs';
import { maxRelError, nativeCli, tmpDir } from '../node/support.mjs';
import { launch, modelsDir, openApp, recordRequests, selectMethod, sentRequests, skipReason } from './harness.mjs';

const skip = skipReason();
if (skip) test('the norm-based stages download in chromium', { skip }, () => {});

describe('the norm-based stages download', { skip }, () => {
  let env;
  let tab;
  let models;

  before(async () => {
    models = modelsDir();
    env = await launch({ models: models.dir });
    tab = await openApp(env);
  });

  after(async () => {
    await env?.browser.close();
    await env?.server.close();
  });

  test('Download stages (.npz) writes what the CLI writes for the same image', async () => {
    const { page } = tab;
    await selectMethod(page, 'norm-based');
    const button = page.locator('#norm-stages-download');
    await button.waitFor({ timeout: 60_000 });
    await recordRequests(page);
    const [download] = await Promise.all([page.waitForEvent('download'), button.click()]);
    assert.deepEqual(await sentRequests(page, 'normStages'), [{ type: 'normStages', priority: true }], 'the click\'s request passes the grid\'s queue');
    const name = download.suggestedFilename();
    assert.match(name, /_norm-based_stages\.npz$/);
    const page_ = readNpz(new Uint8Array(fs.readFileSync(await download.path())));
    assert.deepEqual(Object.keys(page_), ['atb', 'atb_res', 'atb_res_ln', 'atb_res_ln_ff', 'layer', 'mixing_ratio', 'atb_heads']);
    const [L, n] = page_.atb.shape;
    assert.deepEqual(page_.mixing_ratio.shape, [L, 5, n]);
    assert.equal(page_.atb_heads.shape.length, 4);

    // The page's image is a gallery scene at the model's size: the CLI on the same file.
    const image = path.join(models.dir, 'gallery', name.replace(/_norm-based_stages\.npz$/, '.png'));
    assert.ok(fs.existsSync(image), `the page's image ${image}`);
    const tmp = tmpDir();
    try {
      const file = path.join(tmp, 'stages.npz');
      nativeCli('explain', path.join(models.dir, 'vitlens-scenes.vitl'), image, '--method', 'norm-based', '--save-stages', file);
      const cli = readNpz(new Uint8Array(fs.readFileSync(file)));
      for (const [key, a] of Object.entries(cli)) {
        assert.deepEqual(page_[key].shape, a.shape, key);
        const e = maxRelError(page_[key].data, a.data);
        assert.ok(e <= 1e-5, `${key}: page vs CLI ${e}`);
      }
    } finally {
      fs.rmSync(tmp, { recursive: true });
    }
    assert.deepEqual(tab.consoleErrors, []);
  });
});
