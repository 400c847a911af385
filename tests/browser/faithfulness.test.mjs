// faithfulness.test.mjs — the page's perturbation curve shows core's numbers: the points and the
// AUCs drawn for the main view's map equal what the engine's Input.perturbation gives in node for
// the same image and the exported map (tests/node/handles.test.mjs ties that call to
// `vitlens eval`). The page computes nothing of it itself.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadVitlens, toRGBA } from '../node/support.mjs';
import { appSession, currentExplanation, exportNpy, selectMethod, skipReason } from './harness.mjs';

const skip = skipReason();
if (skip) test('the faithfulness view in chromium', { skip }, () => {});

describe('the faithfulness view', { skip }, () => {
  const app = appSession();

  test('the perturbation curve and its AUCs are the engine\'s for the image and the map', async () => {
    const { page } = app.tab;
    await selectMethod(page, 'lrp'); // a map at the input's pixels: the export is what the page perturbs
    // The curve drawn is lrp's (the note names the method of the curve it describes).
    await page.waitForFunction(() => document.querySelector('#faith-note').textContent.startsWith('— lrp,'), null, { timeout: 60_000 });
    const { target } = await currentExplanation(page);
    const curve = (name) => page.$$eval(`#faith-plot circle[data-series="${name}"]`, (cs) => cs.map((c) => Number(c.dataset.y)));
    const drawn = { positive: await curve('most relevant first'), negative: await curve('least relevant first') };
    const note = await page.textContent('#faith-note');
    const map = await exportNpy(page);

    const labels = JSON.parse(fs.readFileSync(path.join(app.models.dir, 'gallery/labels.json'), 'utf8'));
    const vl = await loadVitlens();
    const model = vl.Model.fromBytes(new Uint8Array(fs.readFileSync(path.join(app.models.dir, 'vitlens-scenes.vitl'))));
    const img = vl.decodeImage(new Uint8Array(fs.readFileSync(path.join(app.models.dir, 'gallery', labels.scenes[0].image))));
    const x = model.prepareRGBA(toRGBA(img), img.width, img.height);
    try {
      const info = model.info();
      assert.deepEqual(map.shape, [info.imageH, info.imageW]);
      for (const order of ['positive', 'negative']) {
        const core = x.perturbation(new Float32Array(map.data), { positive: order === 'positive', target });
        assert.equal(drawn[order].length, 10);
        drawn[order].forEach((y, k) => assert.ok(Math.abs(y - core.prob[k]) < 1e-6, `${order} ${k}: page ${y}, core ${core.prob[k]}`));
        const shown = order === 'positive' ? /AUC ([\d.]+) most relevant first/.exec(note)[1] : /([\d.]+) least relevant first/.exec(note)[1];
        assert.equal(shown, core.aucProb.toFixed(1), `${order} AUC`);
      }
    } finally {
      x.delete();
      model.delete();
    }
    assert.deepEqual(app.tab.consoleErrors, []);
  });
});
