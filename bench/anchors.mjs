// anchors.mjs — issue 15's anchors: vitlens against ONNX Runtime and PyTorch on the DeiT-tiny shape
// (224², patch 16, width 192, 12 blocks, 3 heads, MLP 768, 1000 classes; the random weights of
// `vitlens bench deit-tiny`), every contestant in one run on one machine, so that each ratio
// compares like with like (absolute times depend on the CPU; see TOOLCHAIN.md):
//   forward pass in chromium    the builds the page runs in chromium, vitlens-relaxed.js (1 thread;
//                               relaxed SIMD's fused multiply-add in the products) and
//                               vitlens-mt-relaxed.js (2 threads, cross-origin isolated page), and
//                               the plain SIMD128 vitlens.js (1 thread), against ONNX Runtime Web
//                               (wasm, SIMD) on 1 and 2; without the relaxed builds (no clang-16),
//                               vitlens.js and vitlens-mt.js
//   forward pass natively       build/vitlens against PyTorch 1.13 (Debian's, 1 thread) and
//                               onnxruntime-node (1 thread)
//   transformer-attribution     vitlens-relaxed.js and vitlens.js in chromium (and build/vitlens)
//                               against a float32 PyTorch transcription of the original code's
//                               steps (Chefer, Gur & Wolf, CVPR 2021), and a lean float32 version
//                               (bench/anchors_torch.py)
// Before timing it checks that the same model is timed (every contestant's logits within 1e-4 of
// the largest of vitlens's) and how far the PyTorch maps are from vitlens's (relative to the map's
// largest magnitude). The contestants take turns in rounds, in a rotating order (a shared machine's
// load falls on each alike); times are medians over every round; a ratio is the median over the
// rounds of the two contestants' medians in the same round (printed with its range).
//
//   cd bench && npm ci        (onnxruntime-web and onnxruntime-node, pinned: benchmarks only)
//   node bench/anchors.mjs [--rounds 5] [--iters 8] [--ta-iters 3] [--no-native-ta] [--json]
//                          [--wasm DIR] [--keep DIR] [--blas-core NAME]
// --iters: forward passes per contestant per round; --ta-iters: transformer-attribution runs;
// --blas-core: the OpenBLAS kernels PyTorch gets (OPENBLAS_CORETYPE), instead of OpenBLAS's own
// choice for this CPU (below, pythonEnv).
// Needs build/vitlens (VITLENS_NATIVE_BUILD), build-wasm/wasm (VITLENS_WASM_DIR or --wasm),
// /usr/bin/python3 with Debian's python3-torch and python3-onnx, /usr/bin/chromium and
// playwright-core from tests/browser (npm ci there). The models are written to a temporary
// directory (--keep DIR: there, and kept).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

import { startServer } from '../web/serve.mjs';
import { maxRelError, nativeDir, readNpy, repo, tmpDir } from '../tests/node/support.mjs';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

export function parseArgs(argv) {
  const o = { rounds: 5, iters: 8, taIters: 3, nativeTa: true, json: false, wasm: null, keep: null, blasCore: null };
  const numbers = { '--rounds': 'rounds', '--iters': 'iters', '--ta-iters': 'taIters' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a in numbers) {
      const v = Number(value());
      if (!Number.isInteger(v) || v < 1) throw new Error(`${a} takes a whole number ≥ 1`);
      o[numbers[a]] = v;
    } else if (a === '--no-native-ta') o.nativeTa = false;
    else if (a === '--json') o.json = true;
    else if (a === '--wasm') o.wasm = path.resolve(value());
    else if (a === '--keep') o.keep = path.resolve(value());
    else if (a === '--blas-core') o.blasCore = value();
    else if (a === '--help' || a === '-h') o.help = true;
    else throw new Error(`unknown option ${a} (see the head of bench/anchors.mjs)`);
  }
  return o;
}

const PYTHON = '/usr/bin/python3';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const LOGIT_TOL = 1e-4; // of the largest |logit|
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// ---------------------------------------------------------------------------------------------
// The models: vitlens's random DeiT-tiny, and the same weights exported to ONNX by PyTorch
// ---------------------------------------------------------------------------------------------

export function writeModels(dir) {
  const cli = path.join(nativeDir, 'vitlens');
  if (!fs.existsSync(cli)) throw new Error(`native CLI not built at ${cli} (set VITLENS_NATIVE_BUILD)`);
  execFileSync(cli, ['convert', 'deit-tiny', '-o', path.join(dir, 'model.vitl')]);
  const out = execFileSync(PYTHON, [path.join(repo, 'bench/anchors_torch.py'), 'prepare', dir],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(out.trim().split('\n').pop());
}

function lscpu() {
  return Object.fromEntries(execFileSync('lscpu', { encoding: 'utf8' }).split('\n')
    .map((l) => l.split(/:\s+/)).filter((kv) => kv.length === 2));
}

function cpuModel() {
  const info = lscpu();
  const flags = info.Flags ?? '';
  return `${info['Model name']} (family ${info['CPU family']}, model ${info.Model}; ` +
    `${flags.includes('avx512f') ? 'AVX-512' : 'no AVX-512'}), ${os.cpus().length} cores`;
}

// ---------------------------------------------------------------------------------------------
// Contestants: each has run(n) → n latencies in ms
// ---------------------------------------------------------------------------------------------

// The OpenBLAS kernels PyTorch's products get. Debian's PyTorch runs its products through the
// system BLAS (OpenBLAS, libopenblas0-openmp), which picks its kernels by CPU model at load time;
// on a CPU newer than it knows it falls back to its generic SSE3 ones ("Prescott"): on an Intel
// Xeon of family 6 model 207 (2026-12-02) a (197, 192)·(192, 768) product ran at 28 GFLOP/s
// instead of 118 with the AVX-512 ones, which made PyTorch's forward pass 2.9× and the original's
// transformer-attribution steps 2.4× too slow. So: when the probe reports that fallback on a CPU
// with AVX-512 (AVX2), ask for SkylakeX (Haswell) through OPENBLAS_CORETYPE. An OPENBLAS_CORETYPE
// inherited from the environment is dropped (a machine of 2026-12-02 set Haswell for every
// process: on its AVX-512 Zen 5 that product ran at 96 GFLOP/s instead of 183 with SkylakeX, and
// the anchor would have been too slow); --blas-core chooses a core on purpose. The core used is
// printed with the results.
const GENERIC_BLAS_CORES = ['Prescott', 'Katmai', 'Coppermine', 'Northwood', 'Banias', 'Core2', 'Penryn', 'Dunnington'];

function blasCore(env) {
  const probe = spawnSync(PYTHON, ['-c', 'import torch; torch.ones(8, 8) @ torch.ones(8, 8)'],
    { env: { ...env, OPENBLAS_VERBOSE: '2' }, encoding: 'utf8' });
  return /Core: (\S+)/.exec(`${probe.stdout}${probe.stderr}`)?.[1] ?? 'unknown (no OpenBLAS?)';
}

function pythonEnv(chosen) {
  const env = { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1' };
  const inherited = env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_CORETYPE;
  if (chosen) {
    const given = { ...env, OPENBLAS_CORETYPE: chosen };
    return { env: given, blas: `${blasCore(given)} (--blas-core ${chosen})` };
  }
  const own = ownBlasCore(env);
  return inherited ? { ...own, blas: `${own.blas}; OPENBLAS_CORETYPE=${inherited} from the environment not used` } : own;
}

// OpenBLAS's own choice of kernels, or the CPU's own where that choice is its generic fallback.
function ownBlasCore(env) {
  const detected = blasCore(env);
  if (!GENERIC_BLAS_CORES.includes(detected)) return { env, blas: detected };
  const flags = lscpu().Flags ?? '';
  const wanted = /\bavx512f\b/.test(flags) ? 'SkylakeX' : /\bavx2\b/.test(flags) ? 'Haswell' : null;
  if (!wanted) return { env, blas: detected };
  const forced = { ...env, OPENBLAS_CORETYPE: wanted };
  return { env: forced, blas: `${blasCore(forced)} (OpenBLAS detected ${detected}, its generic fallback for a CPU it does not know)` };
}

// PyTorch in one long-lived Python process (bench/anchors_torch.py serve), a JSON line per request.
async function startPython(dir, env) {
  const child = spawn(PYTHON, [path.join(repo, 'bench/anchors_torch.py'), 'serve', dir], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env,
  });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('anchors_torch.py serve exited');
    return JSON.parse(value);
  };
  const ready = await next();
  let queue = Promise.resolve();
  const ask = (req) => (queue = queue.then(() => {
    child.stdin.write(JSON.stringify(req) + '\n');
    return next();
  }));
  return { ready, ask, close: () => child.stdin.end() };
}

async function startOrtNode(onnxFile, x, threads) {
  const require = createRequire(path.join(repo, 'bench/package.json'));
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(onnxFile, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = { image: new ort.Tensor('float32', x, [1, 3, 224, 224]) };
  const forward = async () => (await session.run(feeds)).logits.data;
  for (let i = 0; i < 5; i++) await forward();
  return {
    version: ort.env.versions.node,
    logits: Array.from(await forward()),
    run: async (n) => {
      const ms = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await forward();
        ms.push(performance.now() - t0);
      }
      return ms;
    },
  };
}

// vitlens in a page: vitlens.js (plain page) or vitlens-mt.js (isolated). window.bench.forward(n)
// times a forward pass of a new input (prepare + predict, as bench/chromium_bench.mjs), .ta(n)
// a new input then one explain('transformer-attribution') (its backward and relevance passes);
// withTa: also its map, and warm that path up.
async function vitlensPage(browser, server, module, x, withTa) {
  const page = await browser.newPage();
  await page.goto(`${server.url}models/none`);
  const info = await page.evaluate(async ([module, xs, withTa]) => {
    const { default: create } = await import(`/wasm/${module}`);
    const vl = await create();
    const model = vl.Model.fromBytes(new Uint8Array(await (await fetch('/models/model.vitl')).arrayBuffer()));
    const x = new Float32Array(xs);
    const run = (method) => {
      const t0 = performance.now();
      const input = model.prepare(x);
      input.predict(1);
      if (method) input.explain(method, {});
      input.delete();
      return performance.now() - t0;
    };
    const input = model.prepare(x);
    const logits = Array.from(input.logits());
    const ta = withTa ? input.explain('transformer-attribution', {}) : null;
    input.delete();
    // Warm up until V8 has tiered the hot functions up from its baseline compiler.
    for (let i = 0, t0 = performance.now(); i < 10 || performance.now() - t0 < 2000; i++) run(null);
    for (let i = 0, t0 = performance.now(); withTa && (i < 3 || performance.now() - t0 < 1000); i++) run('transformer-attribution');
    globalThis.bench = {
      forward: (n) => Array.from({ length: n }, () => run(null)),
      ta: (n) => Array.from({ length: n }, () => run('transformer-attribution')),
    };
    return { logits, map: ta && Array.from(ta.tokenMap), target: ta?.target, threads: vl.threads(), isolated: self.crossOriginIsolated };
  }, [module, Array.from(x), withTa]);
  return { page, ...info, run: (kind) => (n) => page.evaluate(([k, n]) => globalThis.bench[k](n), [kind, n]) };
}

// ONNX Runtime Web's wasm backend (SIMD, threads when numThreads > 1) on the main thread of a page.
async function ortWebPage(browser, server, numThreads, x) {
  const page = await browser.newPage();
  await page.goto(`${server.url}models/none`);
  const info = await page.evaluate(async ([numThreads, xs]) => {
    const ort = await import('/wasm/ort.wasm.min.mjs');
    ort.env.wasm.numThreads = numThreads;
    ort.env.wasm.wasmPaths = '/wasm/';
    const session = await ort.InferenceSession.create('/models/model.onnx', {
      executionProviders: ['wasm'], graphOptimizationLevel: 'all',
    });
    const feeds = { image: new ort.Tensor('float32', new Float32Array(xs), [1, 3, 224, 224]) };
    const forward = async () => (await session.run(feeds)).logits.data;
    for (let i = 0, t0 = performance.now(); i < 10 || performance.now() - t0 < 2000; i++) await forward();
    globalThis.bench = async (n) => {
      const ms = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await forward();
        ms.push(performance.now() - t0);
      }
      return ms;
    };
    return { logits: Array.from(await forward()), version: ort.env.versions.web, isolated: self.crossOriginIsolated,
      threads: ort.env.wasm.numThreads };
  }, [numThreads, Array.from(x)]);
  return { page, ...info, run: (n) => page.evaluate((n) => globalThis.bench(n), n) };
}

// build/vitlens bench: each call prints the median of its runs (after 3 warm-ups), so the native
// vitlens figures are medians of the rounds' medians.
function nativeBench(modelFile, iters, withTa) {
  const args = ['bench', modelFile, '--iters', String(iters), '--json'];
  if (withTa) args.push('--methods=transformer-attribution');
  const r = JSON.parse(execFileSync(path.join(nativeDir, 'vitlens'), args, { encoding: 'utf8' }));
  return { forward: r.forward_ms.median, ta: r.methods_ms?.['transformer-attribution']?.median };
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.help) {
    console.log(fs.readFileSync(new URL(import.meta.url), 'utf8').split('\nimport ')[0]);
    return;
  }
  const started = Date.now();
  const log = (msg) => (o.json ? console.error : console.log)(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${msg}`);
  const wasmDir = o.wasm || process.env.VITLENS_WASM_DIR || path.join(repo, 'build-wasm/wasm');
  const ortDist = path.join(repo, 'bench/node_modules/onnxruntime-web/dist');
  if (!fs.existsSync(ortDist)) throw new Error('onnxruntime-web missing: run `npm ci` in bench/');
  const dir = o.keep ?? tmpDir();
  fs.mkdirSync(dir, { recursive: true });
  const loadStart = os.loadavg();

  log('writing the models (vitlens convert deit-tiny; torch.onnx.export of the same weights) …');
  const exported = writeModels(dir);
  const x = readNpy(path.join(dir, 'input.npy')).data;

  const servers = [];
  const serve = async (wasm, isolate) => {
    const s = await startServer({ port: 0, wasmDir: wasm, modelsDir: dir, isolate });
    servers.push(s);
    return s;
  };
  const require = createRequire(path.join(repo, 'tests/browser/package.json'));
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({ executablePath: process.env.VITLENS_CHROMIUM || '/usr/bin/chromium', args: CHROMIUM_ARGS });
  let py = null;
  try {
    log('starting (and warming up) PyTorch …');
    const python = pythonEnv(o.blasCore);
    log(`  OpenBLAS core: ${python.blas}`);
    py = await startPython(dir, python.env);
    log('… onnxruntime-node …');
    const ortNode = await startOrtNode(path.join(dir, 'model.onnx'), x, 1);
    const ortNode2 = await startOrtNode(path.join(dir, 'model.onnx'), x, 2);
    log('… vitlens in chromium …');
    // The page's builds in chromium (web/simd.js picks the relaxed-SIMD ones where the browser
    // accepts them, as chromium does by default), and the plain SIMD128 build for comparison.
    const relaxed = fs.existsSync(path.join(wasmDir, 'vitlens-relaxed.js')) && fs.existsSync(path.join(wasmDir, 'vitlens-mt-relaxed.js'));
    if (!relaxed) log('no relaxed-SIMD builds in the wasm folder: the page\'s figures are those of the plain builds');
    const plainServer = await serve(wasmDir, false);
    const vl1 = await vitlensPage(browser, plainServer, 'vitlens.js', x, true);
    const vlPage = relaxed ? await vitlensPage(browser, plainServer, 'vitlens-relaxed.js', x, true) : vl1;
    const vl2 = await vitlensPage(browser, await serve(wasmDir, true), relaxed ? 'vitlens-mt-relaxed.js' : 'vitlens-mt.js', x, false);
    log('… ONNX Runtime Web in chromium …');
    const ort1 = await ortWebPage(browser, await serve(ortDist, false), 1, x);
    const ort2 = await ortWebPage(browser, await serve(ortDist, true), 2, x);
    if (!vl2.isolated || !ort2.isolated) throw new Error('the isolated pages are not cross-origin isolated');

    log('checking the logits and the maps …');
    // The same model: every contestant's logits against vitlens.js's.
    const logits = {
      ...(relaxed ? { 'vitlens-relaxed.js (chromium)': vlPage.logits } : {}),
      [`${relaxed ? 'vitlens-mt-relaxed.js' : 'vitlens-mt.js'} (chromium)`]: vl2.logits, 'ONNX Runtime Web (1 thread)': ort1.logits,
      'ONNX Runtime Web (2 threads)': ort2.logits, 'onnxruntime-node': ortNode.logits,
      'PyTorch (float32)': py.ready.logits,
    };
    const logitCheck = Object.fromEntries(Object.entries(logits).map(([k, l]) => [k, maxRelError(l, vl1.logits)]));
    const bad = Object.entries(logitCheck).filter(([, e]) => !(e <= LOGIT_TOL));
    if (bad.length) throw new Error(`not the same model: logits off by ${bad.map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ')} of the largest`);

    // The maps: vitlens.js's transformer-attribution against the PyTorch versions.
    const maps = { vitlens_target: vl1.target };
    if (relaxed) maps.relaxed_vs_plain = maxRelError(vlPage.map, vl1.map);
    for (const kind of ['ta-faithful', 'ta-lean', 'ta-faithful-f64', 'ta-f64']) {
      const r = await py.ask({ map: kind });
      maps[kind] = { target: r.target, vs_vitlens: maxRelError(r.map, vl1.map), map: r.map };
    }
    for (const kind of ['ta-faithful', 'ta-lean', 'ta-faithful-f64'])
      maps[kind].vs_f64 = maxRelError(maps[kind].map, maps['ta-f64'].map);
    if (relaxed) maps.relaxed_vs_f64 = maxRelError(vlPage.map, maps['ta-f64'].map);
    for (const kind of ['ta-faithful', 'ta-lean', 'ta-faithful-f64', 'ta-f64']) delete maps[kind].map;
    // vitlens runs its relevance pass so as to agree with float64 (METHODS.md): within 1e-4 of the
    // largest against both float64 evaluations. The float32 ones are as far from vitlens as from
    // float64: that distance is the float32 floor of this input, not a disagreement.
    maps.vitlens_within_1e4_of_f64 = maps['ta-f64'].vs_vitlens <= 1e-4 && maps['ta-faithful-f64'].vs_vitlens <= 1e-4 &&
      !(maps.relaxed_vs_f64 > 1e-4);
    if (!maps.vitlens_within_1e4_of_f64) log('WARNING: vitlens\'s transformer-attribution map is more than 1e-4 from float64');

    // Contestants: [key, kind, run(n)]; kind picks the batch size. Those compared are neighbours.
    const contestants = [
      ['forward.chromium.vitlens_1t', 'fwd', vl1.run('forward')],
      ...(relaxed ? [['forward.chromium.vitlens_relaxed_1t', 'fwd', vlPage.run('forward')]] : []),
      ['forward.chromium.ort_web_1t', 'fwd', ort1.run],
      ['forward.chromium.vitlens_mt_2t', 'fwd', vl2.run('forward')],
      ['forward.chromium.ort_web_2t', 'fwd', ort2.run],
      ['forward.native.vitlens_1t', 'native', (n) => [nativeBench(path.join(dir, 'model.vitl'), n, false).forward]],
      ['forward.native.pytorch_1t', 'fwd', async (n) => (await py.ask({ run: 'forward', n })).ms],
      ['forward.native.ort_node_1t', 'fwd', ortNode.run],
      // Not an anchor: whether this machine has a second core free (threads pay off only then).
      ['forward.native.ort_node_2t', 'fwd', ortNode2.run],
      ['ta.chromium.vitlens_1t', 'ta', vl1.run('ta')],
      ...(relaxed ? [['ta.chromium.vitlens_relaxed_1t', 'ta', vlPage.run('ta')]] : []),
      ['ta.native.pytorch_faithful_1t', 'ta', async (n) => (await py.ask({ run: 'ta-faithful', n })).ms],
      ['ta.native.pytorch_lean_1t', 'ta', async (n) => (await py.ask({ run: 'ta-lean', n })).ms],
    ];
    if (o.nativeTa) contestants.push(['ta.native.vitlens_1t', 'native-ta', (n) => [nativeBench(path.join(dir, 'model.vitl'), n, true).ta]]);
    const batch = { fwd: o.iters, native: o.iters, ta: o.taIters, 'native-ta': o.taIters };
    const times = Object.fromEntries(contestants.map(([k]) => [k, []]));
    const perRound = Object.fromEntries(contestants.map(([k]) => [k, []])); // each round's median
    log('timing …');
    for (let r = 0; r < o.rounds; r++) {
      // Rotate the order each round so that no contestant always follows the same one.
      for (let i = 0; i < contestants.length; i++) {
        const [key, kind, run] = contestants[(i + r) % contestants.length];
        const ms = await run(batch[kind]);
        times[key].push(...ms);
        perRound[key].push(median(ms));
      }
      log(`round ${r + 1}/${o.rounds} done`);
    }
    const med = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, +median(v).toFixed(2)]));
    // A ratio pairs the two contestants' medians within each round (the load drifts between
    // rounds more than within one), then takes the median over the rounds; the range shows the noise.
    const paired = (a, b) => {
      const rs = perRound[a].map((v, r) => v / perRound[b][r]);
      return { median: +median(rs).toFixed(3), range: [+Math.min(...rs).toFixed(3), +Math.max(...rs).toFixed(3)] };
    };
    // The goals' ratios are those of the builds the page runs (relaxed SIMD in chromium).
    const page1 = relaxed ? 'relaxed_1t' : '1t';
    const mtName = relaxed ? 'vitlens-mt-relaxed' : 'vitlens-mt';
    const pairs = [
      [`forward, chromium: ${relaxed ? 'vitlens-relaxed' : 'vitlens'} 1t / ORT-web 1t (goal ≤ 0.45)`, `forward.chromium.vitlens_${page1}`, 'forward.chromium.ort_web_1t'],
      ...(relaxed ? [['forward, chromium: vitlens (plain SIMD128) 1t / ORT-web 1t', 'forward.chromium.vitlens_1t', 'forward.chromium.ort_web_1t']] : []),
      [`forward, chromium: ${mtName} 2t / ORT-web 1t (goal ≤ 0.3)`, 'forward.chromium.vitlens_mt_2t', 'forward.chromium.ort_web_1t'],
      [`forward, chromium: ${mtName} 2t / ORT-web 2t`, 'forward.chromium.vitlens_mt_2t', 'forward.chromium.ort_web_2t'],
      ['forward, native: vitlens / PyTorch', 'forward.native.vitlens_1t', 'forward.native.pytorch_1t'],
      ['forward, native: vitlens / onnxruntime-node', 'forward.native.vitlens_1t', 'forward.native.ort_node_1t'],
      [`transformer-attribution: ${relaxed ? 'vitlens-relaxed' : 'vitlens'} chromium / PyTorch faithful (goal ≤ 0.5)`, `ta.chromium.vitlens_${page1}`, 'ta.native.pytorch_faithful_1t'],
      ...(relaxed ? [['transformer-attribution: vitlens (plain SIMD128) chromium / PyTorch faithful', 'ta.chromium.vitlens_1t', 'ta.native.pytorch_faithful_1t']] : []),
      [`transformer-attribution: ${relaxed ? 'vitlens-relaxed' : 'vitlens'} chromium / PyTorch lean`, `ta.chromium.vitlens_${page1}`, 'ta.native.pytorch_lean_1t'],
      ...(o.nativeTa ? [['transformer-attribution: vitlens native / PyTorch faithful', 'ta.native.vitlens_1t', 'ta.native.pytorch_faithful_1t']] : []),
    ].map(([label, a, b]) => [label, paired(a, b)]);
    const ratios = Object.fromEntries(pairs.map(([label, r]) => [label, r.median]));
    const secondCore = +(1 / paired('forward.native.ort_node_2t', 'forward.native.ort_node_1t').median).toFixed(2);
    const out = {
      date: new Date().toISOString().slice(0, 10),
      cpu: cpuModel(),
      load_average: { start: loadStart.map((v) => +v.toFixed(2)), end: os.loadavg().map((v) => +v.toFixed(2)) },
      versions: { chromium: browser.version(), node: process.versions.node, torch: exported.torch, openblas_core: python.blas, onnx: exported.onnx_version,
        onnxruntime_web: ort1.version, onnxruntime_node: ortNode.version },
      settings: { rounds: o.rounds, iters: o.iters, ta_iters: o.taIters, relaxed_simd_builds: relaxed,
        threads: { [`${mtName}.js`]: vl2.threads, 'ORT-web': ort2.threads } },
      checks: { logits_max_rel_error_vs_vitlens: logitCheck, transformer_attribution_maps: maps },
      median_ms: med,
      samples: Object.fromEntries(Object.entries(times).map(([k, v]) => [k, v.length])),
      ratios,
      ratio_range_over_rounds: Object.fromEntries(pairs.map(([label, r]) => [label, r.range])),
      // onnxruntime-node's speed-up from a second thread: below 1, the second core was busy (a
      // fuzzer, builds) and the 2-thread figures say nothing about threading.
      second_core_check: { ort_node_1t_over_2t: secondCore, free: secondCore > 1.1 },
    };
    if (o.json) console.log(JSON.stringify(out, null, 2));
    else printTable(out);
  } finally {
    py?.close();
    await browser.close();
    for (const s of servers) await s.close();
    if (!o.keep) fs.rmSync(dir, { recursive: true, force: true });
  }
}

function printTable(out) {
  const m = out.median_ms;
  const row = (a, b, c) => console.log(`| ${a} | ${b} | ${c} |`.replace(/\d+\.\d+/g, (v) => (+v).toFixed(1)));
  console.log(`\n${out.date}, ${out.cpu}; load average ${out.load_average.start.join(' ')} → ${out.load_average.end.join(' ')}`);
  console.log(`chromium ${out.versions.chromium}, node ${out.versions.node}, torch ${out.versions.torch} with ` +
    `OpenBLAS core ${out.versions.openblas_core}, ` +
    `onnxruntime-web ${out.versions.onnxruntime_web}, onnxruntime-node ${out.versions.onnxruntime_node}; ` +
    `${out.settings.rounds} rounds, medians (ms)\n`);
  console.log('| workload | vitlens | anchor |\n|---|---:|---|');
  const relaxed = out.settings.relaxed_simd_builds;
  if (relaxed) row('forward, chromium, 1 thread (vitlens-relaxed.js)', m['forward.chromium.vitlens_relaxed_1t'], `ONNX Runtime Web: ${m['forward.chromium.ort_web_1t']}`);
  row(`forward, chromium, 1 thread (vitlens.js${relaxed ? ', plain SIMD128' : ''})`, m['forward.chromium.vitlens_1t'], `ONNX Runtime Web: ${m['forward.chromium.ort_web_1t']}`);
  row('forward, chromium, 2 threads (isolated)', m['forward.chromium.vitlens_mt_2t'], `ONNX Runtime Web: ${m['forward.chromium.ort_web_2t']}`);
  row('forward, native, 1 thread', m['forward.native.vitlens_1t'],
    `PyTorch: ${m['forward.native.pytorch_1t']}; onnxruntime-node: ${m['forward.native.ort_node_1t']}`);
  const anchorTa = `PyTorch, original's steps: ${m['ta.native.pytorch_faithful_1t']}; lean: ${m['ta.native.pytorch_lean_1t']}`;
  if (relaxed) row('transformer-attribution, chromium, 1 thread (vitlens-relaxed.js)', m['ta.chromium.vitlens_relaxed_1t'], anchorTa);
  row(`transformer-attribution, chromium, 1 thread (vitlens.js${relaxed ? ', plain SIMD128' : ''})`, m['ta.chromium.vitlens_1t'], anchorTa);
  if (m['ta.native.vitlens_1t'] !== undefined) row('transformer-attribution, native, 1 thread', m['ta.native.vitlens_1t'], '');
  console.log('\n| ratio (median over rounds of the paired medians) | |\n|---|---:|');
  for (const [k, v] of Object.entries(out.ratios)) {
    const [lo, hi] = out.ratio_range_over_rounds[k];
    console.log(`| ${k} | ${v.toFixed(2)} (rounds: ${lo.toFixed(2)}–${hi.toFixed(2)}) |`);
  }
  const sc = out.second_core_check;
  console.log(`\nonnxruntime-node, 1 thread / 2 threads: ${sc.ort_node_1t_over_2t}×` +
    (sc.free ? '' : ' — the second core was busy: the 2-thread figures say nothing about threading'));
  console.log('\nlogits, max |Δ| / max |logit| against vitlens.js:');
  for (const [k, v] of Object.entries(out.checks.logits_max_rel_error_vs_vitlens)) console.log(`  ${k}: ${v.toExponential(2)}`);
  const { vitlens_target: target, vitlens_within_1e4_of_f64: exact, relaxed_vs_plain: rvp, relaxed_vs_f64: rvf, ...maps } =
    out.checks.transformer_attribution_maps;
  if (rvp !== undefined) console.log(`vitlens-relaxed.js's transformer-attribution map: ${rvp.toExponential(2)} from vitlens.js's, ${rvf.toExponential(2)} from float64`);
  console.log(`transformer-attribution maps (vitlens's target ${target}; vitlens within 1e-4 of float64: ` +
    `${exact ? 'yes' : 'NO'}), max |Δ| / max |map|:`);
  for (const [k, v] of Object.entries(maps))
    console.log(`  ${k}: vs vitlens ${v.vs_vitlens.toExponential(2)}${v.vs_f64 !== undefined ? `, vs float64 ${v.vs_f64.toExponential(2)}` : ''} (target ${v.target})`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(e.stack || e.message);
    process.exit(1);
  });
}
