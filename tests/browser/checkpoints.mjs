// checkpoints.mjs — small ViT checkpoints of any shape, written at test time: a safetensors file
// with timm or Hugging Face names and a Hugging-Face-style config.json, which the page's "Load
// your own model…" converts in the browser. The weights are seeded uniform noise (fan-in scaled,
// as tests/reference/vit_ref.py draws them): the tests need models of a shape, not good ones.
import fs from 'node:fs';
import path from 'node:path';

// A shape: { name, naming: 'timm' | 'hf', imageH, imageW, channels, patch, dim, depth, heads,
// mlpDim, classes, multiLabel }. Class names are `${name}:${i}`, so that a caption naming one can
// be told from the shipped model's classes.
export function classNames(shape) {
  return Array.from({ length: shape.classes }, (_, i) => `${shape.name}:${i}`);
}

// mulberry32: a small seeded generator, u in [0, 1).
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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

// safetensors: an 8-byte little-endian header length, the JSON header (padded to 8), F32 data.
function encodeSafetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const { name, shape, data } of tensors) {
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.byteLength] };
    offset += data.byteLength;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(text.length));
  return Buffer.concat([head, Buffer.from(text, 'utf8'), ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))]);
}

// Writes DIR/<name>.safetensors and DIR/<name>.json; returns their paths.
export function writeCheckpoint(dir, shape, seed = 1) {
  const u = generator(seed);
  const tensors = [];
  for (const [name, dims, kind] of timmTensors(shape)) {
    const count = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(count);
    const scale = kind === 'weight' ? Math.sqrt(3 / (count / dims[0])) : kind === 'ln' ? 0.2 : kind === 'bias' ? 0.1 : 0.5;
    for (let i = 0; i < count; i++) data[i] = (kind === 'ln' ? 1 : 0) + scale * (2 * u() - 1);
    if (shape.naming === 'timm') {
      tensors.push({ name, shape: dims, data });
    } else {
      const names = hfNames(name);
      const rows = dims[0] / names.length;
      const per = count / names.length;
      names.forEach((n, k) => tensors.push({ name: n, shape: [rows, ...dims.slice(1)], data: data.subarray(k * per, (k + 1) * per) }));
    }
  }
  const labels = classNames(shape);
  const config = {
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
  const checkpoint = path.join(dir, `${shape.name}.safetensors`);
  const json = path.join(dir, `${shape.name}.json`);
  fs.writeFileSync(checkpoint, encodeSafetensors(tensors));
  fs.writeFileSync(json, JSON.stringify(config, null, 2));
  return { checkpoint, config: json };
}
