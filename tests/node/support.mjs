// support.mjs — loading the wasm ES module in node, reading .npy files, running the native CLI.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const wasmDir = process.env.VITLENS_WASM_DIR || path.join(repo, 'build-wasm/wasm');
export const nativeDir = process.env.VITLENS_NATIVE_BUILD || path.join(repo, 'build');
// VITLENS_WASM_VARIANT=relaxed runs the tests on vitlens-relaxed.js / vitlens-mt-relaxed.js (the
// relaxed-SIMD GEMM; node 20 then needs --experimental-wasm-relaxed-simd).
export const variant = process.env.VITLENS_WASM_VARIANT === 'relaxed' ? '-relaxed' : '';

let modulePromise = null;

// The Emscripten glue (ENVIRONMENT=web,worker,node) expects CommonJS `require` and `__dirname`
// when it runs in node; an ES module has neither, so they are provided before importing it.
export function loadVitlens() {
  if (!modulePromise) {
    globalThis.require ??= createRequire(import.meta.url);
    globalThis.__dirname ??= wasmDir;
    modulePromise = import(pathToFileURL(path.join(wasmDir, `vitlens${variant}.js`)).href).then(({ default: create }) =>
      create({ wasmBinary: fs.readFileSync(path.join(wasmDir, `vitlens${variant}.wasm`)) }));
  }
  return modulePromise;
}

let mtPromise = null;

// The pthreads build vitlens-mt.js (or -relaxed), or null when this build directory has none
// (VITLENS_WASM_THREADS=OFF). Its pool keeps node alive: call vl.PThread.terminateAllThreads()
// when done.
export function loadVitlensMt() {
  const js = path.join(wasmDir, `vitlens-mt${variant}.js`);
  if (!fs.existsSync(js)) return Promise.resolve(null);
  if (!mtPromise) {
    globalThis.require ??= createRequire(import.meta.url);
    globalThis.__dirname ??= wasmDir;
    mtPromise = import(pathToFileURL(js).href).then(({ default: create }) =>
      create({ wasmBinary: fs.readFileSync(path.join(wasmDir, `vitlens-mt${variant}.wasm`)) }));
  }
  return mtPromise;
}

// Minimal .npy reader for the fixtures: little-endian f4/f8/u1, C order.
export function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not .npy`);
  const major = buf.readUInt8(6);
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const body = buf.subarray(start + hlen);
  const copy = new Uint8Array(body).buffer;
  const data = descr === '<f4' ? new Float32Array(copy) : descr === '<f8' ? new Float64Array(copy) : new Uint8Array(copy);
  return { shape, data };
}

export function nativeCli(...args) {
  const exe = path.join(nativeDir, 'vitlens');
  if (!fs.existsSync(exe)) throw new Error(`native CLI not built at ${exe} (set VITLENS_NATIVE_BUILD)`);
  return execFileSync(exe, args, { encoding: 'utf8' });
}

export function maxRelError(a, ref) {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    num = Math.max(num, Math.abs(a[i] - ref[i]));
    den = Math.max(den, Math.abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

export function tmpDir() {
  return fs.mkdtempSync(path.join(process.env.TMPDIR || '/tmp', 'vitlens-node-'));
}

// decodeImage gives 1, 3 or 4 channels; prepareRGBA takes RGBA.
export function toRGBA({ width, height, channels, data }) {
  const out = new Uint8Array(width * height * 4);
  for (let p = 0; p < width * height; p++) {
    for (let k = 0; k < 3; k++) out[p * 4 + k] = data[p * channels + (channels >= 3 ? k : 0)];
    out[p * 4 + 3] = channels === 4 ? data[p * 4 + 3] : 255;
  }
  return out;
}

// A model of tests/fixtures/engine/SHAPE (timm names), imported from its safetensors and config.json.
export function fixtureModel(vl, shape) {
  const dir = path.join(repo, 'tests/fixtures/engine', shape);
  return vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(dir, 'model_timm.safetensors'))),
    fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
}

// The DeiT-tiny shape with the random weights of `vitlens bench deit-tiny`, as .vitl bytes
// (written by the native CLI).
export function deitTinyBytes() {
  const tmp = tmpDir();
  const file = path.join(tmp, 'deit-tiny.vitl');
  nativeCli('convert', 'deit-tiny', '-o', file);
  const bytes = new Uint8Array(fs.readFileSync(file));
  fs.rmSync(tmp, { recursive: true });
  return bytes;
}
