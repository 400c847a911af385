// startup_ab.mjs — the page's start-up, two builds against each other: opening the page to its
// first explanation drawn (the page's `data-first-explanation-ms`), a fresh browser context per
// page so nothing is cached, the two builds taking turns (A B, B A, …) so that a shared machine's
// load falls on both alike. Each build is a web/ directory (the page and its serve.mjs) and a
// directory of wasm modules; both are served at once, on two ports.
//
//   node bench/startup_ab.mjs --a-web DIR [--a-wasm DIR] [--b-web DIR] [--b-wasm DIR]
//                             [--pages 16] [--isolate] [--search '?simd=plain'] [--json]
// --b-web defaults to this checkout's web/, each --…-wasm to build-wasm/wasm; e.g. A = a copy of
// web/ from another commit (git worktree), B = the working tree. Prints each build's median and
// quartiles and the median of the per-pair differences B − A (the figure to quote: each pair ran
// within a second or two of each other) with a 95 % bootstrap interval of that median: on a shared
// 2-vCPU VM a page's first explanation spreads by ±150–200 ms, so 16–48 pairs resolve only
// differences of ~70–160 ms (docs/performance.md, 2026-12-03, third session). The same for the
// page's start-up stages and the worker's own times of its first calls (the page's timeline:
// loadModelMs, decodeMs, prepareMs, explainMs), which spread less and say where a difference
// comes from. Needs /usr/bin/chromium and playwright-core from tests/browser (npm ci there).
import { createRequire } from 'node:module';

import { medianInterval, pairedTable, parseAbArgs, printTable, quantile, startBuilds } from './ab.mjs';
import { CHROMIUM_ARGS, chromiumPath, modelsDir, openPage } from '../tests/browser/harness.mjs';

async function main() {
  const o = parseAbArgs(process.argv.slice(2));
  const { chromium } = createRequire(new URL('../tests/browser/harness.mjs', import.meta.url))('playwright-core');
  const models = modelsDir();
  const builds = await startBuilds(o, models.dir);
  for (const b of Object.values(builds)) {
    b.ms = [];
    b.timelines = [];
  }
  const browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  try {
    for (let i = 0; i < o.pages; i++) {
      for (const k of i % 2 ? ['B', 'A'] : ['A', 'B']) {
        const tab = await openPage({ browser }, { intercept: false });
        try {
          await tab.page.goto(builds[k].server.url + o.search);
          await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
          builds[k].ms.push(Number(await tab.page.evaluate(() => document.documentElement.dataset.firstExplanationMs)));
          builds[k].timelines.push(JSON.parse(await tab.page.evaluate(() => document.documentElement.dataset.timeline ?? '{}')));
        } finally {
          await tab.context.close();
        }
      }
    }
  } finally {
    await browser.close();
    for (const b of Object.values(builds)) await b.server.close();
  }
  const diff = builds.A.ms.map((a, i) => builds.B.ms[i] - a);
  const out = {
    pages: o.pages, isolate: o.isolate, search: o.search,
    A: { web: o.aWeb, wasm: o.aWasm, ms: builds.A.ms, timelines: builds.A.timelines },
    B: { web: o.bWeb, wasm: o.bWasm, ms: builds.B.ms, timelines: builds.B.timelines },
    median_b_minus_a: quantile(diff, 0.5),
    median_interval_95: medianInterval(diff),
    stages: stageTable(builds.A.timelines, builds.B.timelines),
  };
  if (o.json) {
    console.log(JSON.stringify(out, null, 1));
    return;
  }
  for (const k of ['A', 'B']) {
    const ms = builds[k].ms;
    console.log(`${k} (${builds[k].web}, ${builds[k].wasm}): first explanation a median ${quantile(ms, 0.5).toFixed(0)} ms ` +
      `(quartiles ${quantile(ms, 0.25).toFixed(0)}–${quantile(ms, 0.75).toFixed(0)}, ${ms.length} pages)`);
  }
  const [lo, hi] = out.median_interval_95;
  console.log(`B − A, median of the ${diff.length} pairs: ${out.median_b_minus_a.toFixed(0)} ms ` +
    `(95 % bootstrap interval ${lo.toFixed(0)} … ${hi.toFixed(0)} ms)`);
  if (out.stages.length) console.log('the timeline (medians; B − A, median of the pairs [95 % interval]):');
  printTable(out.stages);
}

// Per stage of the page's timeline that both builds record on every page: the builds' medians and
// the median of the pairs' differences with its interval. The stages are ms since navigation and,
// derived here, the time from the engine ready to the first explanation drawn; the *Ms keys are
// the worker's own times of the first calls.
function stageTable(ta, tb) {
  const withDerived = (t) => ({ ...t, 'engine → explained': t.explained - t.engine });
  const keys = ['script', 'engine', 'model', 'predicted', 'explained', 'engine → explained', 'loadModelMs', 'decodeMs', 'prepareMs', 'explainMs'];
  return pairedTable(ta.map(withDerived), tb.map(withDerived), keys);
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
