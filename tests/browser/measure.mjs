// measure.mjs — figures for the page in chromium: time from opening the page to the first drawn
// explanation (fresh browser context each time, so nothing is cached), and per-method latency
// in the worker for the shipped model (or the tiny stand-in the tests use when it is absent).
//
//   node tests/browser/measure.mjs [--runs 5] [--rounds 15] [--isolate]
// Per method: "after a new image" = the first call after a forward pass (pays for the backward
// and relevance passes when the method needs them); "again" = the same call repeated (they are
// reused); "as the explanation view asks" = the first call after a forward pass with the teaching
// views' intermediates (per block A, ∂y/∂A, relevance, steps and their product), which the page's
// explanation view requests; "grid" = a forward pass, then every method once, as the page's grid
// does (without intermediates).
// --isolate serves COOP/COEP: the worker runs the pthreads build vitlens-mt.js (and has 5 µs
// timers instead of 100 µs). The page is opened as a user's browser opens it, without the tests'
// request interception (harness.mjs, openPage), which delays each request through node: the
// first explanation came ~0.1 s later with it; --intercept measures that way.
import { launch, modelsDir, openPage, skipReason } from './harness.mjs';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const runs = opt('--runs', 5);
const rounds = opt('--rounds', 15);
const isolate = args.includes('--isolate');
const intercept = args.includes('--intercept');

const skip = skipReason();
if (skip) {
  console.log(`skipped: ${skip}`);
  process.exit(0);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const models = modelsDir();
const env = await launch({ models: models.dir, isolate });
try {
  const first = [];
  const timelines = [];
  let image = null;
  for (let i = 0; i < runs; i++) {
    const tab = await openPage(env, { intercept });
    await tab.page.goto(env.server.url);
    await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
    first.push(Number(await tab.page.evaluate(() => document.documentElement.dataset.firstExplanationMs)));
    timelines.push(await tab.page.evaluate(() => document.documentElement.dataset.timeline));
    image ??= await tab.page.getAttribute('#gallery .thumb >> nth=0', 'data-image');
    await tab.context.close();
  }

  const tab = await openPage(env, { intercept });
  await tab.page.goto(env.server.url);
  await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
  const info = await tab.page.textContent('#model-info');
  const r = await tab.page.evaluate(async ({ img, rounds }) => {
    const { WorkerClient } = await import('./client.js');
    const client = new WorkerClient();
    // As the page does: the pthreads build when cross-origin isolated (--isolate).
    const init = await client.call('init', {
      wasmUrl: new URL('./wasm/vitlens.js', location.href).href,
      wasmMtUrl: new URL('./wasm/vitlens-mt.js', location.href).href,
    });
    await client.call('loadModel', { source: { url: new URL('./models/vitlens-scenes.vitl', location.href).href } });
    const blob = await (await fetch(`./models/gallery/${img}`)).blob();
    const names = init.methods.map((m) => m.name);
    const longNames = new Set(init.methods.filter((m) => m.longRunning).map((m) => m.name));
    const out = { forward: [], cold: {}, warm: {}, viewed: {}, gridWorker: [], gridWall: [], fastWorker: [], fastWall: [], isolated: self.crossOriginIsolated, engine: init.engine, threads: init.threads };
    for (const n of names) {
      out.cold[n] = [];
      out.warm[n] = [];
      out.viewed[n] = [];
    }
    for (let w = 0; w < 3; w++) {
      const { image } = await client.call('prepare', { source: { blob } });
      for (const n of names) await client.call('explain', { image, method: n });
      await client.call('release', { image });
    }
    // The threaded engine starts its worker threads after the first explanation (web/worker.js):
    // time the methods with all of them running.
    for (const t0 = performance.now(); performance.now() - t0 < 20_000;) {
      const { activeThreads } = await client.call('stats');
      if (activeThreads === undefined || activeThreads >= init.threads) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    out.activeThreads = (await client.call('stats')).activeThreads;
    for (let k = 0; k < rounds; k++) {
      for (const n of names) {
        const prepared = await client.call('prepare', { source: { blob } });
        out.forward.push(prepared.ms);
        out.cold[n].push((await client.call('explain', { image: prepared.image, method: n })).ms);
        out.warm[n].push((await client.call('explain', { image: prepared.image, method: n })).ms);
        await client.call('release', { image: prepared.image });
        const viewed = await client.call('prepare', { source: { blob } });
        out.viewed[n].push((await client.call('explain', { image: viewed.image, method: n, options: { intermediates: true } })).ms);
        await client.call('release', { image: viewed.image });
      }
      const grid = (await client.call('prepare', { source: { blob } })).image;
      const t = performance.now();
      const all = await Promise.all(names.map((n) => client.call('explain', { image: grid, method: n })));
      out.gridWall.push(performance.now() - t);
      out.gridWorker.push(all.reduce((s, e) => s + e.ms, 0));
      // The same for the single-pass methods only (not longRunning): the grid as it fills first.
      const fastImage = (await client.call('prepare', { source: { blob } })).image;
      const t2 = performance.now();
      const fast = await Promise.all(names.filter((n) => !longNames.has(n)).map((n) => client.call('explain', { image: fastImage, method: n })));
      await client.call('release', { image: grid });
      await client.call('release', { image: fastImage });
      out.fastWall.push(performance.now() - t2);
      out.fastWorker.push(fast.reduce((s, e) => s + e.ms, 0));
    }
    client.terminate();
    return out;
  }, { img: image, rounds });

  console.log(`model: ${info}`);
  console.log(`chromium ${env.browser.version()}, ${r.isolated ? 'cross-origin isolated' : 'not isolated'}, ${r.engine} with ${r.threads} thread(s) (${r.activeThreads ?? r.threads} running when timed), ${rounds} rounds, medians\n`);
  console.log(`time from opening the page to the first explanation${intercept ? ' (requests intercepted, as in the tests)' : ''}: median ${median(first).toFixed(0)} ms (runs: ${first.join(', ')} ms)`);
  console.log(`  stages, ms since navigation: ${timelines.join('  ')}`);
  console.log(`forward pass (prepareRGBA, 64×64 input): ${median(r.forward).toFixed(2)} ms\n`);
  console.log('| method | after a new image (ms) | again (ms) | after a new image, as the explanation view asks (ms) |');
  console.log('|---|---|---|---|');
  for (const n of Object.keys(r.cold)) console.log(`| ${n} | ${median(r.cold[n]).toFixed(2)} | ${median(r.warm[n]).toFixed(2)} | ${median(r.viewed[n]).toFixed(2)} |`);
  console.log(`\nall-methods grid after a new image: ${median(r.gridWorker).toFixed(1)} ms in the worker, ${median(r.gridWall).toFixed(1)} ms seen by the page`);
  console.log(`single-pass methods only (not long-running): ${median(r.fastWorker).toFixed(1)} ms in the worker, ${median(r.fastWall).toFixed(1)} ms seen by the page`);
} finally {
  await env.browser.close();
  await env.server.close();
}
