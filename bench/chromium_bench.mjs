// chromium_bench.mjs — latency of one or more wasm builds in Debian's chromium, single-threaded,
// one page per build: the forward pass (a new input: Model.prepare, or predictTensor in older
// builds) and, with --methods, every attribution method as a user waits for it after a new image
// (a new input, then one explain() call: the
// backward and relevance passes included), as bench/node_bench.mjs does in node. The builds take
// turns in short batches, so that the load of a shared machine falls on each alike; ratios are
// against the first build.
//
//   node bench/chromium_bench.mjs [--iters 30] [--rounds 6] [--model deit-tiny|FILE.vitl]
//                                 [--methods[=a,b,...]] WASM_DIR [WASM_DIR …]
// The default model is the DeiT-tiny shape with random weights, written by the native CLI
// (VITLENS_NATIVE_BUILD, default build/). Needs playwright-core from tests/browser (npm ci there).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

import { startServer } from '../web/serve.mjs';
import { nativeCli, repo, tmpDir } from '../tests/node/support.mjs';

const args = process.argv.slice(2);
const valued = ['--iters', '--rounds', '--model'];
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const iters = Number(opt('--iters', 30));
const rounds = Number(opt('--rounds', 6));
const modelArg = opt('--model', 'deit-tiny');
const methodsArg = args.find((a) => a === '--methods' || a.startsWith('--methods='));
const dirs = args.filter((a, i) => !a.startsWith('--') && !valued.includes(args[i - 1]));
if (dirs.length === 0) {
  throw new Error('usage: node bench/chromium_bench.mjs [--iters N] [--rounds R] [--model deit-tiny|FILE.vitl] ' +
    '[--methods[=a,b]] WASM_DIR [WASM_DIR …]');
}

const models = tmpDir();
if (modelArg === 'deit-tiny') nativeCli('convert', 'deit-tiny', '-o', path.join(models, 'model.vitl'));
else fs.copyFileSync(modelArg, path.join(models, 'model.vitl'));

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
    const methods = await page.evaluate(async (wanted) => {
      const { default: create } = await import('/wasm/vitlens.js');
      const vl = await create();
      const bytes = new Uint8Array(await (await fetch('/models/model.vitl')).arrayBuffer());
      const model = vl.Model.fromBytes(bytes);
      const info = model.info();
      const x = new Float32Array(info.channels * info.imageH * info.imageW);
      for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37);
      const names = wanted ?? vl.methods().map((m) => m.name);
      // One timed run: the forward pass alone (method null), or the forward pass then the method.
      // Builds before inputs became handles (Model.prepare) predict and explain on the model.
      const run = (method) => {
        const t0 = performance.now();
        if (model.prepare) {
          const input = model.prepare(x);
          input.predict(1);
          if (method) input.explain(method, {});
          input.delete();
        } else {
          model.predictTensor(x, 1);
          if (method) model.explain(method, {});
        }
        return performance.now() - t0;
      };
      // Warm up until V8 has tiered every hot function up from its baseline compiler.
      for (let i = 0, t0 = performance.now(); i < 10 || performance.now() - t0 < 2000; i++) run(null);
      for (const m of names)
        for (let i = 0, t0 = performance.now(); i < 3 || performance.now() - t0 < 1000; i++) run(m);
      globalThis.bench = (n, method) => Array.from({ length: n }, () => run(method));
      return names;
    }, methodsArg?.includes('=') ? methodsArg.split('=')[1].split(',') : methodsArg ? null : []);
    builds.push({ dir, server, page, methods, times: { forward: [] } });
  }
  const methods = builds[0].methods;
  const batch = Math.max(1, Math.ceil(iters / rounds));
  for (let r = 0; r < rounds; r++)
    for (const m of [null, ...methods])
      for (const b of builds) {
        const key = m ?? 'forward';
        b.times[key] ??= [];
        b.times[key].push(...(await b.page.evaluate(([n, method]) => globalThis.bench(n, method), [batch, m])));
      }

  const base = builds[0];
  const stats = (b, key) => ({
    median_ms: +median(b.times[key]).toFixed(2),
    min_ms: +Math.min(...b.times[key]).toFixed(2),
    median_ratio_to_first: +(median(base.times[key]) / median(b.times[key])).toFixed(2),
  });
  const out = {
    chromium: browser.version(),
    model: modelArg,
    iters: base.times.forward.length,
    note: methods.length ? 'methods: forward pass + one explain() call, as after a new image' : undefined,
    builds: builds.map((b) => ({
      dir: b.dir,
      forward: stats(b, 'forward'),
      ...(methods.length ? { methods: Object.fromEntries(methods.map((m) => [m, stats(b, m)])) } : {}),
    })),
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await browser.close();
  for (const b of builds) await b.server.close();
  fs.rmSync(models, { recursive: true });
}
