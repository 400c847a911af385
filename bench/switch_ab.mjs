// switch_ab.mjs — the page's image switch, two builds against each other: a gallery scene clicked
// once the page has finished the previous image (its grid included), to the main explanation
// received from the worker (the map is drawn at once and painted with the next frame) and to
// every view updated. The builds take turns page by page (A B, B A, …), each page clicking the
// same scenes in the same order; a pair is the same click in the two builds' pages of a turn.
//
//   node bench/switch_ab.mjs [--a-web DIR] [--a-wasm DIR] [--b-web DIR] [--b-wasm DIR]
//                            [--pages 8] [--clicks 8] [--gap MS] [--isolate] [--search S] [--json]
// --gap MS: each click MS ms after the previous click's main explanation arrived, while the page
// still works on that image (its grid's long methods), instead of once the page is idle.
// Directories as in startup_ab.mjs (ab.mjs); without --a-web only this checkout's page (or
// --b-web) runs, and its medians and quartiles are printed (bench/sitting.sh). Per click, ms after
// the click: `prepared` (the worker's answer to `prepare`: the image decoded and classified),
// `explained` (its answer to the main view's explain), `views` (every view has the explanation:
// <html data-explanations>), `done` (the page idle again, its grid's long methods finished; not
// with --gap), and the worker's own `prepareMs` and `explainMs`. Prints each build's
// medians and the pairs' median difference B − A with a 95 % bootstrap interval. Needs
// /usr/bin/chromium and playwright-core.
import { createRequire } from 'node:module';

import { pairedTable, parseAbArgs, printTable, quantile, startBuilds } from './ab.mjs';
import { CHROMIUM_ARGS, chromiumPath, modelsDir, openPage } from '../tests/browser/harness.mjs';

// Runs in the page before its scripts: times every request to the worker and its answer, the
// clicks, and the changes of the explanation counter.
function instrument() {
  const log = [];
  window.__switchLog = log;
  const Base = window.Worker;
  window.Worker = class extends Base {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        if (e.data?.type !== 'progress') log.push({ t: performance.now(), reply: e.data?.id, ms: e.data?.out?.ms });
      });
    }
    postMessage(msg, transfer) {
      log.push({ t: performance.now(), request: msg?.id, type: msg?.type, priority: Boolean(msg?.priority) });
      return super.postMessage(msg, transfer);
    }
  };
  document.addEventListener('click', () => log.push({ t: performance.now(), click: true }), true);
  addEventListener('DOMContentLoaded', () => {
    new MutationObserver(() => log.push({ t: performance.now(), views: true }))
      .observe(document.documentElement, { attributes: true, attributeFilter: ['data-explanations'] });
    new MutationObserver(() => log.push({ t: performance.now(), busy: !document.getElementById('busy').hidden }))
      .observe(document.getElementById('busy'), { attributes: true, attributeFilter: ['hidden'] });
  });
}

// Until the worker has nothing pending (the page's busy indicator hidden) for 300 ms.
async function waitIdle(page) {
  for (;;) {
    await page.waitForFunction(() => document.getElementById('busy').hidden, null, { timeout: 120_000 });
    await page.waitForTimeout(300);
    if (await page.evaluate(() => document.getElementById('busy').hidden)) return;
  }
}

// One click's times from the page's log; `done` (the page idle again: the grid's long methods
// included) only when the log was read once the page was idle.
function clickTimes(log, idle) {
  const t0 = log.find((e) => e.click)?.t;
  const requests = new Map(log.filter((e) => e.request !== undefined).map((e) => [e.request, e]));
  const answer = (pred) => log.find((e) => e.reply !== undefined && e.t > t0 && pred(requests.get(e.reply)));
  const prepared = answer((r) => r?.type === 'prepare');
  const explained = answer((r) => r?.type === 'explain' && r.priority);
  const views = log.find((e) => e.views && e.t > t0);
  if (t0 === undefined || !prepared || !explained || !views) throw new Error('a click was not answered: ' + JSON.stringify(log));
  const times = {
    prepared: prepared.t - t0, explained: explained.t - t0, views: views.t - t0,
    prepareMs: prepared.ms, explainMs: explained.ms,
  };
  if (idle) {
    const done = log.findLast((e) => e.busy === false && e.t > t0);
    if (!done) throw new Error('the page did not become idle after the click: ' + JSON.stringify(log));
    times.done = done.t - t0;
  }
  return times;
}

async function main() {
  const o = parseAbArgs(process.argv.slice(2), { '--pages': 8, '--clicks': 8, '--gap': null }, { aOptional: true });
  const { chromium } = createRequire(new URL('../tests/browser/harness.mjs', import.meta.url))('playwright-core');
  const models = modelsDir();
  const builds = await startBuilds(o, models.dir);
  for (const b of Object.values(builds)) b.clicks = [];
  const browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  try {
    for (let i = 0; i < o.pages; i++) {
      for (const k of (i % 2 ? ['B', 'A'] : ['A', 'B']).filter((x) => builds[x])) {
        const tab = await openPage({ browser }, { intercept: false });
        try {
          const { page } = tab;
          await page.addInitScript(instrument);
          await page.goto(builds[k].server.url + o.search);
          await page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
          await waitIdle(page);
          const n = await page.locator('#gallery .thumb').count();
          for (let c = 0; c < o.clicks; c++) {
            await page.evaluate(() => { window.__switchLog.length = 0; });
            const before = Number(await page.evaluate(() => document.documentElement.dataset.explanations));
            await page.click(`#gallery .thumb >> nth=${(c + 1) % n}`);
            await page.waitForFunction((m) => Number(document.documentElement.dataset.explanations) > m, before, { timeout: 60_000 });
            if (!o.gap) await waitIdle(page);
            const log = await page.evaluate(() => window.__switchLog.slice());
            const times = clickTimes(log, !o.gap);
            builds[k].clicks.push(times);
            if (o.gap) {
              const arrived = log.find((e) => e.click).t + times.explained; // the page's clock
              await page.waitForTimeout(Math.max(0, o.gap - (await page.evaluate((t) => performance.now() - t, arrived))));
            }
          }
        } finally {
          await tab.context.close();
        }
      }
    }
  } finally {
    await browser.close();
    for (const b of Object.values(builds)) await b.server.close();
  }
  const keys = ['prepared', 'explained', 'views', ...(o.gap ? [] : ['done']), 'prepareMs', 'explainMs'];
  const rows = builds.A ? pairedTable(builds.A.clicks, builds.B.clicks, keys) : [];
  if (o.json) {
    console.log(JSON.stringify({ pages: o.pages, clicks: o.clicks, isolate: o.isolate, ...builds, rows }, (key, v) => (key === 'server' ? undefined : v), 1));
    return;
  }
  for (const [k, b] of Object.entries(builds)) console.log(`${k}: ${b.web}, ${b.wasm}`);
  const what = `${builds.B.clicks.length} clicks per build (${o.pages} pages × ${o.clicks}${o.isolate ? ', cross-origin isolated' : ''}` +
    `${o.gap ? `, each ${o.gap} ms after the previous explanation` : ', each once the page is idle'}); ms after the click`;
  if (!builds.A) {
    console.log(`${what}, median [quartiles]:`);
    for (const key of keys) {
      const xs = builds.B.clicks.map((c) => c[key]);
      console.log(`  ${key.padEnd(12)} ${quantile(xs, 0.5).toFixed(1).padStart(7)} [${quantile(xs, 0.25).toFixed(1)} … ${quantile(xs, 0.75).toFixed(1)}]`);
    }
    return;
  }
  console.log(`${what}, medians; B − A, median of the pairs [95 % interval]:`);
  printTable(rows, 12);
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
