// chromium_bench.mjs — forward-pass latency (predictTensor on the deit-tiny benchmark model) of
// one or more wasm builds in Debian's chromium, single-threaded, one page per build. The builds
// take turns in short batches, so that the load of a shared machine falls on each alike; ratios
// are against the first build.
//
//   node bench/chromium_bench.mjs [--iters 30] [--rounds 6] WASM_DIR [WASM_DIR …]
// Needs the native CLI (VITLENS_NATIVE_BUILD, default build/) to write the model, and
// playwright-core from tests/browser (npm ci there).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { startServer } from '../web/serve.mjs';
import { nativeCli, repo, tmpDir } from '../tests/node/support.mjs';

const args = process.argv.slice(2);
const opt = (name, def) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : def);
const iters = opt('--iters', 30);
const rounds = opt('--rounds', 6);
const dirs = args.filter((a, i) => !a.startsWith('--') && !['--iters', '--rounds'].includes(args[i - 1]));
if (dirs.length === 0) throw new Error('usage: node bench/chromium_bench.mjs [--iters N] [--rounds R] WASM_DIR [WASM_DIR …]');

const models = tmpDir();
nativeCli('convert', 'deit-tiny', '-o', path.join(models, 'deit-tiny.vitl'));

const require = createRequire(path.join(repo, 'tests/browser/package.json'));
const { chromium } = require('playwright-core');
const browser = await chromium.launch({
  executablePath: process.env.VITLENS_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const builds = [];
try {
  for (const dir of dirs) {
    const server = await startServer({ port: 0, wasmDir: path.resolve(dir), modelsDir: models });
    const page = await browser.newPage();
    // Any same-origin document will do (this one is a 404): the module is imported into it.
    await page.goto(`${server.url}models/none`);
    await page.evaluate(async () => {
      const { default: create } = await import('/wasm/vitlens.js');
      const vl = await create();
      const bytes = new Uint8Array(await (await fetch('/models/deit-tiny.vitl')).arrayBuffer());
      const model = vl.Model.fromBytes(bytes);
      const info = model.info();
      const x = new Float32Array(info.channels * info.imageH * info.imageW);
      for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);
      // Warm up until V8 has tiered every hot function up from its baseline compiler.
      for (let i = 0, t0 = performance.now(); i < 10 || performance.now() - t0 < 2000; i++) model.predictTensor(x, 1);
      globalThis.bench = (n) => {
        const t = [];
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          model.predictTensor(x, 1);
          t.push(performance.now() - t0);
        }
        return t;
      };
    });
    builds.push({ dir, server, page, times: [] });
  }
  const batch = Math.max(1, Math.ceil(iters / rounds));
  for (let r = 0; r < rounds; r++)
    for (const b of builds) b.times.push(...(await b.page.evaluate((n) => globalThis.bench(n), batch)));

  const base = builds[0];
  const out = {
    chromium: browser.version(),
    iters: base.times.length,
    builds: builds.map((b) => ({
      dir: b.dir,
      median_ms: +median(b.times).toFixed(2),
      min_ms: +Math.min(...b.times).toFixed(2),
      median_ratio_to_first: +(median(base.times) / median(b.times)).toFixed(2),
      min_ratio_to_first: +(Math.min(...base.times) / Math.min(...b.times)).toFixed(2),
    })),
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await browser.close();
  for (const b of builds) await b.server.close();
  fs.rmSync(models, { recursive: true });
}
