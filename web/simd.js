// simd.js — which build of the engine this browser runs: the relaxed-SIMD one (vitlens-relaxed.js,
// vitlens-mt-relaxed.js: its GEMM uses f32x4/f64x2.relaxed_madd, a fused multiply-add on most
// CPUs) where the wasm engine accepts relaxed SIMD, else the plain SIMD128 one (vitlens.js,
// vitlens-mt.js). Chromium ships relaxed SIMD since 114; node 20 only with
// --experimental-wasm-relaxed-simd. No DOM: the worker and the node tests import it.

// The smallest module that uses f32x4.relaxed_madd (standard opcode 0xfd 0x105):
//   (module (func (param v128 v128 v128) (result v128)
//     (f32x4.relaxed_madd (local.get 0) (local.get 1) (local.get 2))))
export const RELAXED_MADD_MODULE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // type section: (v128 v128 v128) → v128
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x0a, 0x0d, 0x01, 0x0b, 0x00, // code section: one body of 11 bytes, no locals
  0x20, 0x00, 0x20, 0x01, 0x20, 0x02, // local.get 0, 1, 2
  0xfd, 0x85, 0x02, // f32x4.relaxed_madd (0xfd prefix, LEB128 0x105)
  0x0b, // end
]);

// Whether the engine accepts relaxed SIMD (`validate` is a parameter for the tests).
export function relaxedSimdSupported(validate = (bytes) => WebAssembly.validate(bytes)) {
  try {
    return validate(RELAXED_MADD_MODULE) === true;
  } catch {
    return false;
  }
}

// The relaxed-SIMD build beside a plain one: …/vitlens.js → …/vitlens-relaxed.js.
export function relaxedUrl(url) {
  return url.replace(/\.js$/, '-relaxed.js');
}

// Imports and starts the engine at `url`, or its relaxed-SIMD build when `relaxed`; when that one
// is missing (a site built without clang-16) or fails to start, the plain build.
// Answers { vitlens, url: the build that runs, simd: 'relaxed' | 'plain' }.
export async function startEngine(url, relaxed, load = async (u) => (await import(u)).default()) {
  if (relaxed) {
    try {
      return { vitlens: await load(relaxedUrl(url)), url: relaxedUrl(url), simd: 'relaxed' };
    } catch {
      // the plain build below
    }
  }
  return { vitlens: await load(url), url, simd: 'plain' };
}
