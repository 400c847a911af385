// vitb_chromium.mjs — a ViT-B/16 (86.6 M parameters, 17.6 GFLOP per forward pass) in the page, in
// Debian's chromium: the figures the README's "Bigger models" table reports.
//
//   node bench/vitb_chromium.mjs [--rounds 5] [--isolate] [--int8] [--simd plain]
//
// A random ViT-B/16 checkpoint with timm names (346 MB of F32, tests/node/checkpoints.mjs) is
// written to a temporary folder at start (nothing is downloaded). Then:
//   1. as a user: "Load your own model…" with the checkpoint and its config.json on the opened
//      page; the time to the converted model (the progress bar gone, the model panel updated) and
//      to the first explanation drawn over the page's image;
//   2. in the page's own worker protocol (a WorkerClient of the page, as bench/chromium_bench.mjs):
//      importModel (file read + conversion), the forward pass of a new image (prepare), every
//      single-pass method after a new image, transformer-attribution again, the teaching views'
//      data (teach: 12 × 12 heads of A and ∂y/∂A), and the engine's heap (it only grows: its size
//      after all this is the peak).
// --isolate serves COOP/COEP (the pthreads build); --int8 converts with storage 'int8'; --simd plain
// makes the page run the plain SIMD128 build where it would pick the relaxed-SIMD one (?simd=plain).
// Medians over --rounds; the CPU model is printed (timings differ by CPU and by the load).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { encodeCheckpoint, VIT_B16 } from '../tests/node/checkpoints.mjs';
import { tmpDir } from '../tests/node/support.mjs';
import { launch, modelsDir, openApp, skipReason } from '../tests/browser/harness.mjs';

const args = process.argv.slice(2);
const rounds = args.includes('--rounds') ? Number(args[args.indexOf('--rounds') + 1]) : 5;
const isolate = args.includes('--isolate');
const storage = args.includes('--int8') ? 'int8' : 'f32';
const search = args.includes('--simd') && args[args.indexOf('--simd') + 1] === 'plain' ? '?simd=plain' : '';

const skip = skipReason();
if (skip) {
  console.log(`skipped: ${skip}`);
  process.exit(0);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (xs) => `${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(', ')})`;

const dir = tmpDir();
const { bytes, config } = encodeCheckpoint(VIT_B16, 2026);
const files = { checkpoint: path.join(dir, 'vit-b16.safetensors'), config: path.join(dir, 'config.json') };
fs.writeFileSync(files.checkpoint, bytes);
fs.writeFileSync(files.config, JSON.stringify(config));
const checkpointMB = bytes.length / 2 ** 20;

const models = modelsDir();
const env = await launch({ models: models.dir, isolate });
try {
  // ---- 1. as a user --------------------------------------------------------------------------
  const user = { load: [], first: [] };
  for (let k = 0; k < Math.min(rounds, 3); k++) {
    const tab = await openApp(env, { search });
    const { page } = tab;
    if (storage === 'int8') await page.check('#model-int8');
    const before = Number(await page.evaluate(() => document.documentElement.dataset.explanations ?? 0));
    const t0 = Date.now();
    await page.setInputFiles('#model-file', [files.checkpoint, files.config]);
    await page.waitForFunction(() => /224×224×3 input/.test(document.getElementById('model-info').textContent) ||
      !document.getElementById('error').hidden, null, { timeout: 600_000 });
    user.load.push(Date.now() - t0);
    await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
      !document.getElementById('error').hidden, before, { timeout: 600_000 });
    user.first.push(Date.now() - t0);
    const error = await page.evaluate(() => (document.getElementById('error').hidden ? '' : document.getElementById('error').textContent));
    if (error) throw new Error(`the page showed an error: ${error}`);
    await tab.context.close();
  }

  // ---- 2. in the worker ----------------------------------------------------------------------
  const tab = await openApp(env, { search });
  const { page } = tab;
  await page.evaluate(() => {
    const input = document.createElement('input');
    input.type = 'file';
    input.multiple = true;
    input.id = 'bench-files';
    document.body.append(input);
  });
  await page.setInputFiles('#bench-files', [files.checkpoint, files.config]);
  const image = await page.getAttribute('#gallery .thumb >> nth=0', 'data-image');
  const r = await page.evaluate(async ({ img, rounds, storage, simd }) => {
    const [ckpt, cfg] = [...document.getElementById('bench-files').files].sort((a, b) => b.size - a.size);
    const { WorkerClient } = await import('./client.js');
    const client = new WorkerClient();
    const init = await client.call('init', {
      wasmUrl: new URL('./wasm/vitlens.js', location.href).href,
      wasmMtUrl: new URL('./wasm/vitlens-mt.js', location.href).href,
      simd,
    });
    const single = init.methods.filter((m) => !m.longRunning).map((m) => m.name);
    const blob = await (await fetch(`./models/gallery/${img}`)).blob();
    const out = { engine: init.engine, threads: init.threads, importMs: [], forward: [], cold: {}, again: [], teach: [], grid: [] };
    for (const n of single) out.cold[n] = [];
    for (let k = 0; k < Math.min(rounds, 3); k++) {
      const t = performance.now();
      await client.call('importModel', { checkpoint: { blob: ckpt }, config: { blob: cfg }, storage });
      out.importMs.push(performance.now() - t);
    }
    out.heapAfterLoad = (await client.call('stats')).heapBytes;
    for (let k = 0; k < rounds; k++) {
      for (const n of single) {
        const p = await client.call('prepare', { source: { blob } });
        if (n === single[0]) out.forward.push(p.ms);
        out.cold[n].push((await client.call('explain', { image: p.image, method: n })).ms);
        if (n === 'transformer-attribution') out.again.push((await client.call('explain', { image: p.image, method: n })).ms);
        await client.call('release', { image: p.image });
      }
      const p = await client.call('prepare', { source: { blob } });
      let t = performance.now();
      await client.call('teach', { image: p.image, grads: true });
      out.teach.push(performance.now() - t);
      t = performance.now();
      await Promise.all(single.map((n) => client.call('explain', { image: p.image, method: n })));
      out.grid.push(performance.now() - t);
      await client.call('release', { image: p.image });
    }
    out.stats = await client.call('stats');
    client.terminate();
    return out;
  }, { img: image, rounds, storage, simd: search ? 'plain' : 'auto' });
  await tab.context.close();

  const MB = 2 ** 20;
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  console.log(`ViT-B/16 in chromium ${env.browser.version()}, ${cpu}, ${r.engine} with ${r.threads} thread(s), ` +
    `${isolate ? 'cross-origin isolated' : 'not isolated'}, storage ${storage}; medians (runs)\n`);
  console.log(`checkpoint: ${checkpointMB.toFixed(0)} MB (F32, timm names)`);
  console.log(`page, "Load your own model…" → model converted: ${fmt(user.load)}`);
  console.log(`page, "Load your own model…" → first explanation drawn: ${fmt(user.first)}`);
  console.log(`worker importModel (file read + conversion): ${fmt(r.importMs)}`);
  console.log(`forward pass of a new image (prepare): ${fmt(r.forward)}`);
  console.log(`transformer-attribution after a new image: ${fmt(r.cold['transformer-attribution'])}; again: ${fmt(r.again)}`);
  console.log(`teaching views' data (12 blocks × 12 heads, A and ∂y/∂A): ${fmt(r.teach)}`);
  console.log(`all ${Object.keys(r.cold).length} single-pass methods on one image (the grid): ${fmt(r.grid)}`);
  console.log(`engine heap: ${(r.heapAfterLoad / MB).toFixed(0)} MB after loading, peak ${(r.stats.heapBytes / MB).toFixed(0)} MB ` +
    `(${(r.stats.allocatedBytes / MB).toFixed(0)} MB allocated at the end)\n`);
  console.log('| method (after a new image) | median ms |');
  console.log('|---|---|');
  for (const [n, xs] of Object.entries(r.cold)) console.log(`| ${n} | ${median(xs).toFixed(0)} |`);
} finally {
  await env.browser.close();
  await env.server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
