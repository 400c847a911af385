// harness.mjs — what the browser tests share: the static server, Debian's chromium through
// playwright-core, a page with every request and console error recorded, the model and gallery
// to serve, and reading the page's downloads.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before } from 'node:test';
import { nativeDir, readNpy, repo, tmpDir, wasmDir } from '../node/support.mjs';
import { startServer } from '../../web/serve.mjs';

export const chromiumPath = process.env.VITLENS_CHROMIUM || '/usr/bin/chromium';
export const artifacts = path.join(repo, 'tests/artifacts');

// Flags from ../shared/TOOLCHAIN.md: without the networking ones chromium's own background
// connections are refused by the closed network and show up as errors.
const CHROMIUM_ARGS = [
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
// aborted and recorded as offsite.
export async function openPage(env, { viewport = { width: 1400, height: 1000 } } = {}) {
  const context = await env.browser.newContext({ viewport, acceptDownloads: true });
  const requests = [];
  const offsite = [];
  const consoleErrors = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || url.protocol === 'blob:' || url.hostname === '127.0.0.1') return route.continue();
    offsite.push(url.href);
    return route.abort();
  });
  context.on('request', (r) => requests.push(r.url()));
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
// explanation.
export async function openApp(env, { search = '' } = {}) {
  const tab = await openPage(env);
  await tab.page.goto(env.server.url + search);
  await tab.page.waitForFunction(() => document.documentElement.dataset.firstExplanationMs, null, { timeout: 60_000 });
  return tab;
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
