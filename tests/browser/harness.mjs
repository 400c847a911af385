// harness.mjs — what the browser tests share: the static server, Debian's chromium through
// playwright-core, a page with every request and console error recorded, the model and gallery
// to serve, and reading the page's downloads.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before } from 'node:test';
import { nativeCli, nativeDir, readNpy, repo, tmpDir, wasmDir } from '../node/support.mjs';
import { startServer } from '../../web/serve.mjs';

export const chromiumPath = process.env.VITLENS_CHROMIUM || '/usr/bin/chromium';
export const artifacts = path.join(repo, 'tests/artifacts');

// Flags from ../shared/TOOLCHAIN.md: without the networking ones chromium's own background
// connections are refused by the closed network and show up as errors.
export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

export function skipReason() {
  if (!fs.existsSync(chromiumPath)) return `chromium not found at ${chromiumPath} (scripts/install-deps.sh --test installs it)`;
  return false;
}

// The models folder to serve: $VITLENS_MODELS_DIR if set; else the shipped model and gallery
// when they exist; otherwise a tiny model trained for a few steps and a few test scenes, made
// with the native CLI, so that the page can be tested before the shipped model lands.
export function modelsDir() {
  if (process.env.VITLENS_MODELS_DIR) return { dir: path.resolve(process.env.VITLENS_MODELS_DIR), shipped: false };
  const shipped = path.join(repo, 'models');
  if (fs.existsSync(path.join(shipped, 'vitlens-scenes.vitl')) && fs.existsSync(path.join(shipped, 'gallery/labels.json')))
    return { dir: shipped, shipped: true };
  const exe = path.join(nativeDir, 'vitlens');
  const dir = tmpDir();
  const run = (...args) => execFileSync(exe, args, { stdio: 'pipe' });
  run('train', '--out', path.join(dir, 'train'), '--config', 'micro', '--steps', '20', '--threads', '1', '--log-every', '1000');
  fs.copyFileSync(path.join(dir, 'train/model-int8.vitl'), path.join(dir, 'vitlens-scenes.vitl'));
  run('scenes', '--split', 'test', '--n', '6', '--seed', '1', '--out', path.join(dir, 'gallery'));
  return { dir, shipped: false };
}

export async function launch({ isolate = false, models } = {}) {
  const require = createRequire(import.meta.url);
  const { chromium } = require('playwright-core');
  const server = await startServer({ port: 0, wasmDir, modelsDir: models, isolate });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  return { server, browser };
}

// The page served and opened once for the tests of a describe block: registers the block's
// before / after hooks; the returned session's models, env and tab are set before its first test.
export function appSession({ isolate = false } = {}) {
  const session = {};
  before(async () => {
    session.models = modelsDir();
    session.env = await launch({ models: session.models.dir, isolate });
    session.tab = await openApp(session.env);
  });
  after(async () => {
    await session.env?.browser.close();
    await session.env?.server.close();
  });
  return session;
}

// A fresh context and page; every request is recorded, and any that would leave 127.0.0.1 is
// aborted and recorded as offsite. touch: a phone (touch events, mobile viewport, 2 device pixels
// a CSS pixel). intercept: false leaves the requests alone (nothing recorded, nothing aborted), for
// timings: Playwright's interception holds every request of the page until node has answered it,
// which made the first explanation ~0.1 s later (measure.mjs).
export async function openPage(env, { viewport = { width: 1400, height: 1000 }, touch = false, intercept = true } = {}) {
  const phone = touch ? { hasTouch: true, isMobile: true, deviceScaleFactor: 2 } : {};
  const context = await env.browser.newContext({ viewport, acceptDownloads: true, ...phone });
  const requests = [];
  const offsite = [];
  const consoleErrors = [];
  if (intercept) await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || url.protocol === 'blob:' || url.hostname === '127.0.0.1') return route.continue();
    offsite.push(url.href);
    return route.abort();
  });
  if (intercept) context.on('request', (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') consoleErrors.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
  page.on('worker', (w) => w.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') consoleErrors.push(`worker ${m.type()}: ${m.text()}`);
  }));
  return { context, page, requests, offsite, consoleErrors };
}

// Opens the page (with the query string `search`, e.g. '?simd=plain') and waits for its first
// explanation. A `simd=` in the search is checked against the engine build the page chose.
export async function openApp(env, { search = '', viewport, touch = false } = {}) {
  const tab = await openPage(env, { viewport, touch });
  await tab.page.goto(env.server.url + search);
  await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
  const simd = new URLSearchParams(search).get('simd');
  if (simd) assert.equal(await tab.page.evaluate(() => document.documentElement.dataset.simd), simd);
  return tab;
}

// The page at a screen size (the views' tests: 1280×800, and 375×812 with `touch`).
export function openAt(env, viewport, touch = false, search = '') {
  return openApp(env, { viewport, touch, search });
}

// Loads model files (a .vitl, or a checkpoint with its config.json) through the page's "Load your
// own model…" and waits until the page has explained with it; fails with the page's error if one
// shows.
export async function loadModelFiles(page, files, timeout = 180_000) {
  const before = Number(await page.evaluate(() => document.documentElement.dataset.explanations ?? 0));
  await page.setInputFiles('#model-file', files);
  await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n ||
    !document.getElementById('error').hidden, before, { timeout });
  if (await page.isVisible('#error')) assert.fail(await page.textContent('#error-text'));
  await page.waitForFunction(() => document.documentElement.dataset.mainPending === 'false', null, { timeout });
}

// The page at 1280×800 (with the query string `search`) with a DeiT-tiny-shaped model loaded:
// `vitlens convert deit-tiny` written to `dir` (default: a fresh folder). { tab, page, dir, file }.
export async function openWithDeitTiny(env, { dir = tmpDir(), search = '' } = {}) {
  const file = path.join(dir, 'deit-tiny.vitl');
  nativeCli('convert', 'deit-tiny', '-o', file);
  const tab = await openAt(env, { width: 1280, height: 800 }, false, search);
  await loadModelFiles(tab.page, file);
  return { tab, page: tab.page, dir, file };
}

export function explanationCount(page) {
  return page.evaluate(() => Number(document.documentElement.dataset.explanations ?? 0));
}

// Runs `action` and waits until the page has drawn a newer explanation.
export async function afterNewExplanation(page, action) {
  const before = await explanationCount(page);
  await action();
  await page.waitForFunction((n) => Number(document.documentElement.dataset.explanations ?? 0) > n, before, { timeout: 60_000 });
}

export async function waitGridDone(page) {
  await page.waitForFunction(() => {
    const cells = [...document.querySelectorAll('#grid .cell')];
    return cells.length > 0 && cells.every((c) => c.dataset.state === 'done' || c.dataset.state === 'error');
  }, null, { timeout: 60_000 });
}

// Records the type and priority of every request the page sends its worker from now on
// (Worker.prototype.postMessage; read with sentRequests): a request a click sends must have
// priority, else it waits for every explain the all-methods grid has queued.
export function recordRequests(page) {
  return page.evaluate(() => {
    const post = Worker.prototype.postMessage;
    window.__sent = [];
    Worker.prototype.postMessage = function (msg, transfer) {
      window.__sent.push({ type: msg?.type, priority: Boolean(msg?.priority) });
      return post.call(this, msg, transfer);
    };
  });
}

export function sentRequests(page, type) {
  return page.evaluate((t) => window.__sent.filter((m) => m.type === t), type);
}

// Clicks the export button and reads the downloaded .npy.
export async function exportNpy(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-npy')]);
  return readNpy(await download.path());
}

// Chooses a method and waits until its explanation is the one drawn and nothing newer is pending.
export async function selectMethod(page, name) {
  const current = await page.$eval('#main-canvas', (c) => c.dataset.method);
  if (current !== name) await page.selectOption('#method', name);
  await waitExplained(page, name);
}

// Waits until the main view shows `method` (any, if omitted) and no main explanation is pending.
export async function waitExplained(page, method = null) {
  await page.waitForFunction((m) => document.documentElement.dataset.mainPending === 'false' &&
    (m === null ? Boolean(document.querySelector('#main-canvas').dataset.method) : document.querySelector('#main-canvas').dataset.method === m),
  method, { timeout: 60_000 });
}

export async function currentExplanation(page) {
  return page.$eval('#main-canvas', (c) => ({ method: c.dataset.method, target: Number(c.dataset.target) }));
}

// Puts `files` (a path or paths) into a hidden file input #test-model of the test's own, for
// testEngine({ input: true }).
export async function chooseTestModel(page, files) {
  await page.evaluate(() => {
    if (document.getElementById('test-model')) return;
    const input = document.createElement('input');
    input.type = 'file';
    input.multiple = true;
    input.id = 'test-model';
    input.hidden = true;
    document.body.append(input);
  });
  await page.setInputFiles('#test-model', files);
}

// A worker of the test's own in the page: the page's worker.js, another instance of the same
// engine build, for the numbers a view should draw. After installTestEngine(page), page-side
// `await testEngine(model)` starts it, loads `model` and prepares the first gallery scene:
// { call(type, input) → the reply's out, init, prep, done() }. model: {} (the shipped model),
// { url }, { input: true } (the files chosen in the page's #test-model: a .vitl, or a checkpoint
// and its config.json), or { checkpoint: byte array, config: JSON text }.
export async function installTestEngine(page) {
  await page.evaluate(() => {
    globalThis.testEngine = async ({ url = './models/vitlens-scenes.vitl', input = false, checkpoint, config } = {}) => {
      const w = new Worker('/worker.js', { type: 'module' });
      let id = 0;
      const call = (type, args) => new Promise((resolve, reject) => {
        const my = ++id;
        const listen = (e) => {
          if (e.data.id !== my || e.data.type === 'progress') return;
          w.removeEventListener('message', listen);
          if (e.data.type === 'result') resolve(e.data.out);
          else reject(new Error(`${e.data.err.code}: ${e.data.err.message}`));
        };
        w.addEventListener('message', listen);
        w.postMessage({ type, id: my, in: args });
      });
      const abs = (p) => new URL(p, location.href).href;
      const init = await call('init', { wasmUrl: abs('./wasm/vitlens.js'), wasmMtUrl: abs('./wasm/vitlens-mt.js'), simd: 'auto' });
      const chosen = input ? [...document.getElementById('test-model').files] : [];
      const st = chosen.find((f) => f.name.endsWith('.safetensors'));
      if (checkpoint) {
        await call('importModel', { checkpoint: { blob: new Blob([new Uint8Array(checkpoint)]) }, config: { blob: new Blob([config]) } });
      } else if (st) {
        await call('importModel', { checkpoint: { blob: st }, config: { blob: chosen.find((f) => f.name.endsWith('.json')) } });
      } else if (input) await call('loadModel', { source: { blob: chosen[0] } });
      else await call('loadModel', { source: { url: abs(url) } });
      const labels = await (await fetch('./models/gallery/labels.json')).json();
      const scene = (labels.scenes ?? labels.images ?? labels.items)[0].image;
      const prep = await call('prepare', { source: { url: abs(`./models/gallery/${scene}`) } });
      return { call, init, prep, done: () => w.terminate() };
    };
  });
}
