// vitlens.d.ts — hand-written types for the Embind API in wasm/bindings.cpp.
//
// Errors: every call may throw a JS Error whose message starts with an error code
// ("bad_format: ...", "truncated: ...", "bad_argument: ..."). Model objects hold wasm memory:
// call .delete() when done.

export interface Prediction {
  class: number;
  name: string;
  logit: number;
  prob: number;
}

export interface ModelInfo {
  imageH: number;
  imageW: number;
  channels: number;
  patch: number;
  dim: number;
  depth: number;
  heads: number;
  mlpDim: number;
  classes: number;
  lnEps: number;
  multiLabel: boolean;
  params: number;
  storedInt8: boolean;
  provenance: string;
  classNames: string[];
  mean: number[];
  std: number[];
}

export interface DecodedImage {
  width: number;
  height: number;
  channels: number; // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  data: Uint8Array;
}

export interface Model {
  info(): ModelInfo;
  /** The model input (C×H×W, normalised) for RGBA pixels of any size. */
  preprocessRGBA(rgba: Uint8Array | Uint8ClampedArray, width: number, height: number): Float32Array;
  predictRGBA(rgba: Uint8Array | Uint8ClampedArray, width: number, height: number, k: number): Prediction[];
  /** A normalised C×H×W tensor, used exactly. */
  predictTensor(x: Float32Array, k: number): Prediction[];
  /** The logits of the last prediction. */
  logits(): Float32Array;
  /** The model as a .vitl file. */
  save(storage: "f32" | "int8"): Uint8Array;
  delete(): void;
}

export interface ModelStatic {
  /** Loads a .vitl model file. */
  fromBytes(bytes: Uint8Array): Model;
  /** Imports a timm or Hugging Face safetensors checkpoint with its config.json text. */
  fromSafetensors(checkpoint: Uint8Array, configJson: string): Model;
}

export interface VitlensModule {
  Model: ModelStatic;
  decodeImage(bytes: Uint8Array): DecodedImage;
}

export default function createVitlens(options?: { wasmBinary?: ArrayBuffer | Uint8Array; locateFile?: (path: string) => string }): Promise<VitlensModule>;
