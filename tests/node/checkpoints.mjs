// checkpoints.mjs — ViT checkpoints of any shape, made at test time: a safetensors file with timm
// or Hugging Face names and a Hugging-Face-style config.json, which the page's "Load your own
// model…" (tests/browser) and Model.fromSafetensors (tests/node/vitb.test.mjs) convert. The
// weights are seeded uniform noise, fan-in scaled as tests/reference/vit_ref.py draws them (a
// real initialisation's variance, so that attention and the class softmax do not saturate): the
// tests need models of a shape, not good ones.
import fs from 'node:fs';
import path from 'node:path';

// ViT-B/16 (timm vit_base_patch16_224): 86.6 M parameters, 330 MB of F32.
export const VIT_B16 = {
  name: 'vit-b16', naming: 'timm', imageH: 224, imageW: 224, channels: 3, patch: 16, dim: 768, depth: 12, heads: 12,
  mlpDim: 3072, classes: 1000, multiLabel: false,
};

// A shape: { name, naming: 'timm' | 'hf', imageH, imageW, channels, patch, dim, depth, heads,
// mlpDim, classes, multiLabel }. Class names are `${name}:${i}`, so that a caption naming one can
// be told from the shipped model's classes.
export function classNames(shape) {
  return Array.from({ length: shape.classes }, (_, i) => `${shape.name}:${i}`);
}

// mulberry32, a small seeded generator of u in [0, 1): fills out[from … from + count) with
// offset + scale·(2u − 1) and returns the generator's next state. One loop with the state in a
// local int32: 86 M values take seconds, not the tens of seconds of a closure per value.
function fillUniform(out, from, count, scale, offset, state) {
  let a = state | 0;
  for (let i = from, end = from + count; i < end; i++) {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = offset + scale * (2 * (((t ^ (t >>> 14)) >>> 0) / 4294967296) - 1);
  }
  return a;
}

// [timm name, shape, kind] in timm's order; kind: weight (fan-in scaled), ln (1 ± 0.2), bias, token.
function timmTensors(s) {
  const d = s.dim;
  const n = 1 + (s.imageH / s.patch) * (s.imageW / s.patch);
  const list = [
    ['patch_embed.proj.weight', [d, s.channels, s.patch, s.patch], 'weight'],
    ['patch_embed.proj.bias', [d], 'bias'],
    ['cls_token', [1, 1, d], 'token'],
    ['pos_embed', [1, n, d], 'token'],
  ];
  for (let b = 0; b < s.depth; b++) {
    const p = `blocks.${b}.`;
    list.push(
      [`${p}norm1.weight`, [d], 'ln'], [`${p}norm1.bias`, [d], 'bias'],
      [`${p}attn.qkv.weight`, [3 * d, d], 'weight'], [`${p}attn.qkv.bias`, [3 * d], 'bias'],
      [`${p}attn.proj.weight`, [d, d], 'weight'], [`${p}attn.proj.bias`, [d], 'bias'],
      [`${p}norm2.weight`, [d], 'ln'], [`${p}norm2.bias`, [d], 'bias'],
      [`${p}mlp.fc1.weight`, [s.mlpDim, d], 'weight'], [`${p}mlp.fc1.bias`, [s.mlpDim], 'bias'],
      [`${p}mlp.fc2.weight`, [d, s.mlpDim], 'weight'], [`${p}mlp.fc2.bias`, [d], 'bias'],
    );
  }
  list.push(['norm.weight', [d], 'ln'], ['norm.bias', [d], 'bias'], ['head.weight', [s.classes, d], 'weight'], ['head.bias', [s.classes], 'bias']);
  return list;
}

// The Hugging Face ViTForImageClassification names of a timm tensor: qkv becomes query, key and
// value (each a third along the first dimension).
function hfNames(name) {
  const fixed = {
    'patch_embed.proj.weight': 'vit.embeddings.patch_embeddings.projection.weight',
    'patch_embed.proj.bias': 'vit.embeddings.patch_embeddings.projection.bias',
    cls_token: 'vit.embeddings.cls_token',
    pos_embed: 'vit.embeddings.position_embeddings',
    'norm.weight': 'vit.layernorm.weight',
    'norm.bias': 'vit.layernorm.bias',
    'head.weight': 'classifier.weight',
    'head.bias': 'classifier.bias',
  };
  if (fixed[name]) return [fixed[name]];
  const [, b, part] = /^blocks\.(\d+)\.(.*)$/.exec(name);
  const L = `vit.encoder.layer.${b}.`;
  const parts = {
    'norm1.weight': ['layernorm_before.weight'], 'norm1.bias': ['layernorm_before.bias'],
    'attn.qkv.weight': ['query', 'key', 'value'].map((x) => `attention.attention.${x}.weight`),
    'attn.qkv.bias': ['query', 'key', 'value'].map((x) => `attention.attention.${x}.bias`),
    'attn.proj.weight': ['attention.output.dense.weight'], 'attn.proj.bias': ['attention.output.dense.bias'],
    'norm2.weight': ['layernorm_after.weight'], 'norm2.bias': ['layernorm_after.bias'],
    'mlp.fc1.weight': ['intermediate.dense.weight'], 'mlp.fc1.bias': ['intermediate.dense.bias'],
    'mlp.fc2.weight': ['output.dense.weight'], 'mlp.fc2.bias': ['output.dense.bias'],
  };
  return parts[part].map((p) => L + p);
}

// The checkpoint in memory: { bytes (safetensors: an 8-byte little-endian header length, the JSON
// header padded to 8, the F32 data), config (config.json's object) }. The weights are drawn straight
// into the file's buffer, tensor after tensor in timm's order (Hugging Face's q, k and v are the
// thirds of timm's qkv), so that a 330 MB checkpoint is made in one allocation.
export function encodeCheckpoint(shape, seed = 1) {
  const header = {};
  const tensors = []; // what to draw, in file order: { count, scale, offset }
  let size = 0;
  for (const [name, dims, kind] of timmTensors(shape)) {
    const count = dims.reduce((a, b) => a * b, 1);
    const names = shape.naming === 'timm' ? [name] : hfNames(name);
    const per = count / names.length;
    names.forEach((n, k) => {
      const dimsOf = names.length === 1 ? dims : [dims[0] / names.length, ...dims.slice(1)];
      header[n] = { dtype: 'F32', shape: dimsOf, data_offsets: [size + 4 * k * per, size + 4 * (k + 1) * per] };
    });
    const scale = kind === 'weight' ? Math.sqrt(3 / (count / dims[0])) : kind === 'ln' ? 0.2 : kind === 'bias' ? 0.1 : 0.5;
    tensors.push({ count, scale, offset: kind === 'ln' ? 1 : 0 });
    size += 4 * count;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const bytes = new Uint8Array(8 + text.length + size);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(text.length), true);
  new TextEncoder().encodeInto(text, bytes.subarray(8, 8 + text.length));
  const data = new Float32Array(bytes.buffer, 8 + text.length, size / 4);
  let at = 0;
  let state = seed;
  for (const { count, scale, offset } of tensors) {
    // in pieces: V8 optimises a function called often, not one long-running call (measured 10×)
    for (let done = 0; done < count; done += 1 << 16) state = fillUniform(data, at + done, Math.min(1 << 16, count - done), scale, offset, state);
    at += count;
  }
  return { bytes, config: configOf(shape) };
}

function configOf(shape) {
  const labels = classNames(shape);
  return {
    architectures: ['ViTForImageClassification'],
    model_type: 'vit',
    image_size: shape.imageH === shape.imageW ? shape.imageH : [shape.imageH, shape.imageW],
    patch_size: shape.patch,
    num_channels: shape.channels,
    hidden_size: shape.dim,
    num_hidden_layers: shape.depth,
    num_attention_heads: shape.heads,
    intermediate_size: shape.mlpDim,
    hidden_act: 'gelu',
    id2label: Object.fromEntries(labels.map((l, i) => [String(i), l])),
    image_mean: Array(shape.channels).fill(0.5),
    image_std: Array(shape.channels).fill(0.25),
    ...(shape.multiLabel ? { problem_type: 'multi_label_classification' } : {}),
  };
}

// Writes DIR/<name>.safetensors and DIR/<name>.json; returns their paths.
export function writeCheckpoint(dir, shape, seed = 1) {
  const { bytes, config } = encodeCheckpoint(shape, seed);
  const checkpoint = path.join(dir, `${shape.name}.safetensors`);
  const json = path.join(dir, `${shape.name}.json`);
  fs.writeFileSync(checkpoint, bytes);
  fs.writeFileSync(json, JSON.stringify(config, null, 2));
  return { checkpoint, config: json };
}
