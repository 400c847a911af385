// catalogue.mjs — the bad-input catalogue (issue 8): malformed model files, checkpoints and
// configs, images, .npy inputs and out-of-range options, made from real files at test time, with
// a manifest saying which entry point takes each one and which error it must give. Three
// harnesses read it: the native CLI (tests/catalogue/cli.test.mjs, also under ASan + UBSan), the
// wasm API in node (tests/node/catalogue.test.mjs) and the page in chromium
// (tests/browser/abuse.test.mjs).
//
// makeCatalogue(dir) writes the files into `dir` and returns { cases, base }; the manifest is
// also written to dir/manifest.json (NaN written as the string "NaN"). One case:
//   id, category, description
//   entry     'model' (a .vitl file) | 'checkpoint' (.safetensors + config.json) | 'image' |
//             'npy' (a model input tensor) | 'options' (explain or predict options)
//   files     { model } | { checkpoint, config } | { image } | { input }: file names in dir
//   options   entry 'options': { method, target, startLayer, block, discardRatio, headFusion }
//             for explain (the wasm API's names), or { top } for predict
//   expect    { code, message }: the error code and a fragment of its message; or { ok: true }
//             for hostile input that is valid and must work
//   cli, wasm { code?, message? } where that front end words the error differently, or { skip }
//             with the reason the entry point does not exist there
//   page      entry model/checkpoint/image/npy: what the page shows when the file is dropped on
//             it, { code } of the visible error, or { ok: true }
// The base files (base.vitl, base-int8.vitl from `vitlens import` of the engine fixture
// 'nonsquare': 24×40 RGB, patch 8, 3 blocks, 5 classes; base.npy its input; base.png a gallery
// scene) are valid, and each case changes one thing in one of them.
//
// Command line: node tests/catalogue/catalogue.mjs OUT_DIR   (uses the native CLI, see
// tests/node/support.mjs for VITLENS_NATIVE_BUILD)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { nativeCli, repo } from '../node/support.mjs';

export const fixtureDir = path.join(repo, 'tests/fixtures/engine/nonsquare');
export const categories = [
  'empty', 'truncated', 'magic-version', 'header-length', 'shape', 'nan-inf', 'dimensions',
  'tensors', 'dtype', 'format', 'values', 'image-size', 'image', 'target', 'options',
  'variants', 'unsupported',
];

// ---- encoders -----------------------------------------------------------------------------

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

// CRC-32 (IEEE 802.3, as zlib): the .vitl data checksum and the PNG chunk checksum.
export function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// A .vitl file split into its header (parsed) and data section (docs/model-format.md).
function parseVitl(buf) {
  const hlen = Number(buf.readBigUInt64LE(16));
  const header = JSON.parse(buf.toString('utf8', 24, 24 + hlen));
  const start = Math.ceil((24 + hlen) / 16) * 16;
  return { header, data: Buffer.from(buf.subarray(start, start + header.data_bytes)) };
}

// Writes a .vitl with a correct checksum unless told otherwise.
function encodeVitl(header, data, { version = 2, headerText = JSON.stringify(header) } = {}) {
  const text = Buffer.from(headerText, 'utf8');
  const start = Math.ceil((24 + text.length) / 16) * 16;
  const out = Buffer.alloc(start + data.length + 4);
  out.write('VITLENS\x1a', 0, 'latin1');
  out.writeUInt32LE(version, 8);
  out.writeBigUInt64LE(BigInt(text.length), 16);
  text.copy(out, 24);
  data.copy(out, start);
  out.writeUInt32LE(crc32(data), start + data.length);
  return out;
}

function parseSafetensors(buf) {
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.toString('utf8', 8, 8 + n)), data: Buffer.from(buf.subarray(8 + n)) };
}

function encodeSafetensors(headerText, data) {
  const text = Buffer.from(headerText, 'utf8');
  const out = Buffer.alloc(8 + text.length + data.length);
  out.writeBigUInt64LE(BigInt(text.length), 0);
  text.copy(out, 8);
  data.copy(out, 8 + text.length);
  return out;
}

// .npy version 1.0 (or `version`) with a header dict padded to a multiple of 64 bytes.
function encodeNpy({ descr = '<f4', shape, body, fortran = false, version = 1 }) {
  const dims = shape.join(', ') + (shape.length === 1 ? ',' : '');
  const dict = `{'descr': '${descr}', 'fortran_order': ${fortran ? 'True' : 'False'}, 'shape': (${dims}), }`;
  const header = dict + ' '.repeat((64 - ((10 + dict.length + 1) % 64)) % 64) + '\n';
  const out = Buffer.alloc(10 + header.length + body.length);
  out.write('\x93NUMPY', 0, 'latin1');
  out[6] = version;
  out.writeUInt16LE(header.length, 8);
  out.write(header, 10, 'latin1');
  body.copy(out, 10 + header.length);
  return out;
}

function pngChunk(type, body) {
  const out = Buffer.alloc(12 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.write(type, 4, 'latin1');
  body.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + body.length)), 8 + body.length);
  return out;
}

// An 8-bit gray PNG of w×h whose pixel (x, y) is value(x, y); `pixels: false` writes the header
// chunk only (what a decoder reads to learn the size).
function encodeGrayPng(w, h, value, { pixels = true } = {}) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth; colour type 0 (gray), deflate, filter 0, no interlace
  const chunks = [pngChunk('IHDR', ihdr)];
  if (pixels) {
    const raw = Buffer.alloc(h * (w + 1));
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw[y * (w + 1) + 1 + x] = value(x, y);
    chunks.push(pngChunk('IDAT', zlib.deflateSync(raw)));
  }
  chunks.push(pngChunk('IEND', Buffer.alloc(0)));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), ...chunks]);
}

// ---- the catalogue ------------------------------------------------------------------------

// The base files every case starts from (written into dir).
function writeBase(dir) {
  const model = path.join(dir, 'base.vitl');
  const modelInt8 = path.join(dir, 'base-int8.vitl');
  const ckpt = path.join(fixtureDir, 'model_timm.safetensors');
  const config = path.join(fixtureDir, 'config.json');
  nativeCli('import', ckpt, '--config', config, '-o', model);
  nativeCli('import', ckpt, '--config', config, '-o', modelInt8, '--quant', 'int8');
  fs.copyFileSync(path.join(fixtureDir, 'input.npy'), path.join(dir, 'base.npy'));
  const labels = JSON.parse(fs.readFileSync(path.join(repo, 'models/gallery/labels.json'), 'utf8'));
  fs.copyFileSync(path.join(repo, 'models/gallery', labels.scenes[0].image), path.join(dir, 'base.png'));
  return {
    model: 'base.vitl', modelInt8: 'base-int8.vitl', input: 'base.npy', image: 'base.png',
    checkpoint: ckpt, config, classes: 5, depth: 3, inputShape: [3, 24, 40],
  };
}

export function makeCatalogue(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const base = writeBase(dir);
  const cases = [];
  const read = (name) => fs.readFileSync(path.join(dir, name));
  const add = (c, files) => {
    if (cases.some((o) => o.id === c.id)) throw new Error(`duplicate case id ${c.id}`);
    if (!categories.includes(c.category)) throw new Error(`${c.id}: unknown category ${c.category}`);
    c.files = {};
    for (const [role, [name, bytes]] of Object.entries(files ?? {})) {
      fs.writeFileSync(path.join(dir, name), bytes);
      c.files[role] = name;
    }
    cases.push(c);
  };

  // .vitl model files ---------------------------------------------------------------------------
  const good = read(base.model);
  const { header: H, data: D } = parseVitl(good);
  const dataStart = Math.ceil((24 + Number(good.readBigUInt64LE(16))) / 16) * 16;
  const tensor = (h, name) => h.tensors.find((t) => t.name === name);
  const model = (id, category, description, bytes, code, message) =>
    add({ id, category, description, entry: 'model', expect: { code, message }, page: { code } },
      { model: [`${id}.vitl`, bytes] });
  // The header changed by `edit` (a deep copy), with the data and a valid checksum.
  const edited = (edit) => {
    const h = structuredClone(H);
    edit(h);
    return encodeVitl(h, D);
  };
  // The data changed by `edit`, with the checksum recomputed, so that the value check is reached.
  const withData = (edit) => {
    const d = Buffer.from(D);
    edit(d);
    return encodeVitl(H, d);
  };
  const patched = (offset, write) => {
    const b = Buffer.from(good);
    write(b, offset);
    return b;
  };

  model('model-empty', 'empty', 'an empty .vitl file',
    Buffer.alloc(0), 'truncated', 'too short to be a model file');
  model('model-cut-preamble', 'truncated', 'cut inside the 24-byte preamble',
    good.subarray(0, 20), 'truncated', 'too short to be a model file');
  model('model-cut-header', 'truncated', 'cut inside the JSON header',
    good.subarray(0, 24 + 40), 'truncated', 'ends inside its header');
  model('model-cut-data', 'truncated', 'cut in the middle of the data section',
    good.subarray(0, dataStart + (D.length >> 1)), 'truncated', 'truncated download');
  model('model-cut-checksum', 'truncated', 'the last two bytes of the checksum missing',
    good.subarray(0, good.length - 2), 'truncated', 'truncated download');
  model('model-magic', 'magic-version', 'another format\'s magic number',
    patched(0, (b, at) => b.write('GGUF', at, 'latin1')), 'bad_format', 'wrong magic');
  model('model-version', 'magic-version', 'format version 3 (this build reads 1 and 2)',
    encodeVitl(H, D, { version: 3 }), 'bad_version', 'format version 3 is not supported');
  model('model-header-past-end', 'header-length', 'a header length just past the end of the file',
    patched(16, (b, at) => b.writeBigUInt64LE(BigInt(good.length), at)), 'truncated', 'ends inside its header');
  model('model-header-absurd', 'header-length', 'a header length of 2^64 − 256 bytes',
    patched(16, (b, at) => b.writeBigUInt64LE(0xffffffffffffff00n, at)), 'limit', 'exceeds the limit');
  model('model-tensor-outside', 'header-length', 'a tensor offset past the data section',
    edited((h) => { tensor(h, 'norm.bias').offset = h.data_bytes + 64; }), 'truncated', '\'norm.bias\' lies outside the data section');
  model('model-data-bytes-absurd', 'header-length', 'data_bytes of 2^60',
    edited((h) => { h.data_bytes = 2 ** 60; }), 'truncated', 'truncated download');
  model('model-header-not-json', 'format', 'a header that is not JSON',
    encodeVitl(H, D, { headerText: '{"config": {"image_h": 24,, oops' }), 'bad_format', 'not valid JSON');
  model('model-dtype-type', 'format', 'a dtype that is a number, not a string',
    edited((h) => { tensor(h, 'cls_token').dtype = 4; }), 'bad_format', 'malformed header');
  model('model-checksum', 'nan-inf', 'one flipped bit in the weights (checksum mismatch)',
    patched(dataStart + 100, (b, at) => { b[at] ^= 0x40; }), 'bad_value', 'checksum mismatch');
  model('model-nan-weight', 'nan-inf', 'a NaN in cls_token (checksum valid)',
    withData((d) => d.writeFloatLE(NaN, tensor(H, 'cls_token').offset + 8)), 'bad_value', '\'cls_token\' contains NaN or Inf');
  model('model-inf-weight', 'nan-inf', 'an Inf in head.weight (checksum valid)',
    withData((d) => d.writeFloatLE(-Infinity, tensor(H, 'head.weight').offset)), 'bad_value', '\'head.weight\' contains NaN or Inf');
  model('model-zero-width', 'dimensions', 'width (dim) 0',
    edited((h) => { h.config.dim = 0; }), 'bad_config', 'width (hidden size) = 0');
  model('model-absurd-depth', 'dimensions', 'depth 2^40 (reported clamped to 2^30)',
    edited((h) => { h.config.depth = 2 ** 40; }), 'limit', 'depth (blocks) = 1073741824');
  model('model-absurd-tokens', 'dimensions', 'a 4096×4096 input: 262 145 tokens',
    edited((h) => { h.config.image_h = 4096; h.config.image_w = 4096; }), 'limit', 'tokens (prefix + patches) = 262145');
  model('model-absurd-params', 'dimensions', 'width 4096, MLP 16384, 64 blocks: over the parameter limit',
    edited((h) => Object.assign(h.config, { dim: 4096, mlp_dim: 16384, depth: 64, heads: 64 })), 'limit',
    'more than the limit of 400000000');
  model('model-heads', 'dimensions', 'width 32 with 5 heads',
    edited((h) => { h.config.heads = 5; }), 'bad_config', 'not a multiple of the number of heads');
  model('model-image-patch', 'dimensions', 'a 25-pixel-high input with patch 8',
    edited((h) => { h.config.image_h = 25; }), 'bad_config', 'not a multiple of the patch size');
  model('model-zero-std', 'values', 'a normalisation std of 0',
    edited((h) => { h.config.std = [0.229, 0, 0.225]; }), 'bad_config', 'std positive');
  model('model-class-names', 'shape', 'six class names for five classes',
    edited((h) => { h.class_names.push('extra'); }), 'bad_config', '6 class names for 5 classes');
  model('model-tensor-shape', 'shape', 'pos_embed one token short',
    edited((h) => { tensor(h, 'pos_embed').shape = [1, 15, 32]; }), 'bad_shape',
    '\'pos_embed\' has shape [1, 15, 32] but the config implies [1, 16, 32]');
  model('model-tensor-negative', 'shape', 'a negative dimension in a tensor shape',
    edited((h) => { tensor(h, 'patch_embed.proj.weight').shape = [-32, 3, 8, 8]; }), 'bad_shape', 'negative or non-integer dimension');
  model('model-tensor-bytes', 'shape', 'a byte count that does not match the shape',
    edited((h) => { tensor(h, 'cls_token').bytes = 64; }), 'bad_shape', '\'cls_token\' holds 64 bytes');
  model('model-duplicate-tensor', 'tensors', 'norm.weight listed twice',
    edited((h) => { h.tensors.push(tensor(h, 'norm.weight')); }), 'unknown_tensor', '\'norm.weight\' appears twice');
  model('model-missing-tensor', 'tensors', 'head.bias missing',
    edited((h) => { h.tensors = h.tensors.filter((t) => t.name !== 'head.bias'); }), 'missing_tensor', '\'head.bias\' is missing');
  model('model-unknown-tensor', 'tensors', 'a tensor of a fourth block',
    edited((h) => { h.tensors.push({ ...tensor(h, 'blocks.2.norm1.weight'), name: 'blocks.3.norm1.weight' }); }), 'unknown_tensor',
    'unexpected tensor \'blocks.3.norm1.weight\'');
  model('model-dtype', 'dtype', 'a tensor stored as f16',
    edited((h) => { tensor(h, 'cls_token').dtype = 'f16'; }), 'bad_format', '\'cls_token\' has dtype \'f16\', expected f32');
  {
    const { header: H8, data: D8 } = parseVitl(read(base.modelInt8));
    const d = Buffer.from(D8);
    d.writeFloatLE(-0.5, tensor(H8, 'head.weight.scale').offset);
    model('model-int8-negative-scale', 'nan-inf', 'an int8 model with a negative per-channel scale',
      encodeVitl(H8, d), 'bad_value', '\'head.weight.scale\' has a negative scale');
    const h = structuredClone(H8);
    tensor(h, 'head.weight').dtype = 'f32';
    model('model-int8-dtype', 'dtype', 'an int8 model whose quantised weight claims f32',
      encodeVitl(h, D8), 'bad_format', '\'head.weight\' has dtype \'f32\', expected i8');
  }

  // Format version 2: the variant fields of the config (docs/model-format.md).
  const v1Header = structuredClone(H);
  for (const f of ['class_token', 'dist_token', 'registers', 'no_embed_class', 'pre_norm', 'layer_scale', 'final_norm',
    'fc_norm', 'pool', 'act', 'pos_grid_h', 'pos_grid_w']) delete v1Header.config[f];
  model('model-unknown-header-field', 'format', 'a header field this version does not define',
    edited((h) => { h.comment = 'written by a newer vitlens'; }), 'bad_format', 'unknown header field \'comment\'');
  model('model-unknown-config-field', 'variants', 'a config field this version does not define (rope_theta)',
    edited((h) => { h.config.rope_theta = 10000; }), 'bad_config', 'unknown config field \'rope_theta\'');
  model('model-pool-unknown', 'variants', 'pool "foo"',
    edited((h) => { h.config.pool = 'foo'; }), 'bad_config', 'config field \'pool\' is "foo"; it must be one of \'token\', \'avg\', \'token+avg\'');
  model('model-act-unknown', 'variants', 'act "relu"',
    edited((h) => { h.config.act = 'relu'; }), 'bad_config', 'config field \'act\' is "relu"; it must be one of');
  model('model-variant-field-missing', 'variants', 'a version 2 config without final_norm',
    edited((h) => { delete h.config.final_norm; }), 'bad_config', 'config field \'final_norm\' is missing');
  model('model-v1-variant-field', 'variants', 'a version 1 file whose config has a variant field (class_token)',
    encodeVitl({ ...v1Header, config: { ...v1Header.config, class_token: false } }, D, { version: 1 }), 'bad_config',
    'unknown config field \'class_token\' (not part of format version 1)');
  model('model-registers-no-tensor', 'variants', 'registers 2 in the config, no reg_token among the tensors',
    edited((h) => { h.config.registers = 2; }), 'missing_tensor', '\'reg_token\' is missing (config: registers 2)');
  model('model-layer-scale-no-tensor', 'variants', 'layer_scale true, no LayerScale tensors',
    edited((h) => { h.config.layer_scale = true; }), 'missing_tensor', '\'blocks.0.ls1.gamma\' is missing (config: layer_scale true)');
  model('model-dist-token-pos-embed', 'variants', 'dist_token true: pos_embed then needs one row more',
    edited((h) => { h.config.dist_token = true; }), 'bad_shape',
    '\'pos_embed\' has shape [1, 16, 32] but the config implies [1, 17, 32] (config: class_token true, dist_token true');
  model('model-fc-norm-token-pool', 'variants', 'fc_norm with token pooling',
    edited((h) => { h.config.fc_norm = true; }), 'bad_config', 'fc_norm is implemented for \'avg\' pooling only, not \'token\'');
  model('model-token-pool-no-class-token', 'variants', 'class_token false with token pooling',
    edited((h) => { h.config.class_token = false; }), 'bad_config', 'token pooling needs a class token');
  model('model-absurd-registers', 'dimensions', '2^31 register tokens (reported clamped to 2^30)',
    edited((h) => { h.config.registers = 2 ** 31; }), 'limit', 'register tokens = 1073741824');

  // safetensors checkpoints with their config.json ------------------------------------------
  const ckpt = fs.readFileSync(base.checkpoint);
  const configText = fs.readFileSync(base.config, 'utf8');
  const { header: S, data: SD } = parseSafetensors(ckpt);
  const checkpoint = (id, category, description, [bytes, config], code, message) =>
    add({ id, category, description, entry: 'checkpoint', expect: { code, message }, page: { code } },
      { checkpoint: [`${id}.safetensors`, bytes], config: [`${id}.config.json`, Buffer.from(config)] });
  // [checkpoint, config.json text] with the header (and data, given a copy) changed by `edit`.
  const editedSt = (edit, data = SD) => {
    const h = structuredClone(S);
    edit(h, data);
    return [encodeSafetensors(JSON.stringify(h), data), configText];
  };
  // [checkpoint, config.json text] with config.json changed by `edit`.
  const editedCfg = (edit) => {
    const c = JSON.parse(configText);
    edit(c);
    return [ckpt, JSON.stringify(c, null, 2)];
  };
  const withLength = (n) => {
    const b = Buffer.from(ckpt);
    b.writeBigUInt64LE(n, 0);
    return [b, configText];
  };

  checkpoint('ckpt-empty', 'empty', 'an empty checkpoint',
    [Buffer.alloc(0), configText], 'truncated', 'shorter than its 8-byte header length');
  checkpoint('config-empty', 'empty', 'an empty config.json',
    [ckpt, ''], 'bad_format', 'config.json is not a JSON object');
  checkpoint('ckpt-cut-header', 'truncated', 'a checkpoint cut inside its JSON header',
    [ckpt.subarray(0, 300), configText], 'truncated', 'ends inside its JSON header');
  checkpoint('ckpt-cut-data', 'truncated', 'a checkpoint cut in half',
    [ckpt.subarray(0, ckpt.length >> 1), configText], 'truncated', 'lies outside the file');
  checkpoint('ckpt-header-past-end', 'header-length', 'a header length past the end of the file',
    withLength(BigInt(ckpt.length)), 'truncated', 'ends inside its JSON header');
  checkpoint('ckpt-header-absurd', 'header-length', 'a header length of 2^40',
    withLength(1n << 40n), 'limit', 'header length 1099511627776 exceeds the limit');
  checkpoint('ckpt-offsets-past-end', 'header-length', 'data_offsets past the end of the data',
    editedSt((h) => { h['head.bias'].data_offsets = [SD.length - 4, SD.length + 16]; }), 'truncated',
    '\'head.bias\' lies outside the file');
  checkpoint('ckpt-shape', 'shape', 'pos_embed one token short (offsets consistent)',
    editedSt((h) => { h.pos_embed.shape = [1, 15, 32]; h.pos_embed.data_offsets[1] -= 128; }), 'bad_shape',
    '\'pos_embed\' has shape [1, 15, 32] but config.json implies [1, 16, 32]');
  checkpoint('ckpt-shape-bytes', 'shape', 'a shape that does not match its byte count',
    editedSt((h) => { h.cls_token.shape = [1, 1, 64]; }), 'bad_shape', '\'cls_token\' holds 128 bytes, its shape [1, 1, 64] needs 256');
  checkpoint('ckpt-config-mismatch', 'shape', 'config.json says width 48, the tensors are 32 wide',
    editedCfg((c) => { c.hidden_size = 48; }), 'bad_shape', 'config.json implies [48, 3, 8, 8]');
  checkpoint('ckpt-missing', 'tensors', 'blocks.2.mlp.fc2.bias missing',
    editedSt((h) => { delete h['blocks.2.mlp.fc2.bias']; }), 'missing_tensor', '\'blocks.2.mlp.fc2.bias\' is missing');
  checkpoint('ckpt-extra', 'tensors', 'a distillation token without its head',
    editedSt((h) => { h.dist_token = { dtype: 'F32', shape: [1, 1, 32], data_offsets: [SD.length, SD.length + 128] }; },
      Buffer.concat([SD, Buffer.alloc(128)])), 'missing_tensor', 'a distillation token \'dist_token\' without its head \'head_dist.weight\'');
  checkpoint('ckpt-unknown-tensor', 'tensors', 'a tensor of no ViT family',
    editedSt((h) => { h['blocks.0.attn.temperature'] = { dtype: 'F32', shape: [1], data_offsets: [SD.length, SD.length + 4] }; },
      Buffer.concat([SD, Buffer.alloc(4)])), 'unknown_tensor',
    '\'blocks.0.attn.temperature\' does not belong to a timm VisionTransformer vitlens implements');
  {
    // The same key twice in the JSON header: a parser that keeps the last one would silently
    // drop the first entry.
    const dup = `{"cls_token":${JSON.stringify(S.cls_token)},${JSON.stringify(S).slice(1)}`;
    checkpoint('ckpt-duplicate', 'tensors', 'cls_token twice in the header',
      [encodeSafetensors(dup, SD), configText], 'unknown_tensor', '\'cls_token\' appears twice');
  }
  checkpoint('ckpt-no-vit', 'tensors', 'a checkpoint without any ViT tensor',
    [encodeSafetensors(JSON.stringify({ 'fc.weight': { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }), Buffer.alloc(16)),
      configText],
    'missing_tensor', 'is this a ViT classifier checkpoint?');
  checkpoint('ckpt-dtype', 'dtype', 'cls_token stored as I32',
    editedSt((h) => { h.cls_token.dtype = 'I32'; }), 'bad_format',
    '\'cls_token\' has dtype \'I32\'; only F32, F16, BF16 and F64 can be imported');
  checkpoint('ckpt-inf', 'nan-inf', 'an Inf in blocks.1.attn.proj.weight',
    editedSt((h, d) => { d.writeFloatLE(Infinity, h['blocks.1.attn.proj.weight'].data_offsets[0] + 40); }, Buffer.from(SD)),
    'bad_value', '\'blocks.1.attn.proj.weight\' contains NaN or Inf');
  checkpoint('ckpt-nan-bf16', 'nan-inf', 'a BF16 NaN in cls_token',
    editedSt((h, d) => {
      const [begin] = h.cls_token.data_offsets;
      h.cls_token = { ...h.cls_token, dtype: 'BF16', data_offsets: [begin, begin + 64] };
      d.writeUInt16LE(0x7fc0, begin + 6);
    }, Buffer.from(SD)), 'bad_value', '\'cls_token\' contains NaN or Inf');
  checkpoint('config-missing', 'dimensions', 'config.json without hidden_size',
    editedCfg((c) => { delete c.hidden_size; }), 'bad_config', '\'hidden_size\' is missing');
  checkpoint('config-zero-patch', 'dimensions', 'patch size 0',
    editedCfg((c) => { c.patch_size = 0; }), 'bad_config', 'patch size = 0');
  checkpoint('config-absurd-image', 'dimensions', 'a 100000×100000 input',
    editedCfg((c) => { c.image_size = 100000; }), 'limit', 'image height = 100000');
  checkpoint('config-negative-layers', 'dimensions', 'num_hidden_layers −1',
    editedCfg((c) => { c.num_hidden_layers = -1; }), 'bad_config', 'depth (blocks) = -1');
  checkpoint('config-labels', 'values', 'id2label with a gap (0, 1, 2, 3, 7)',
    editedCfg((c) => { c.id2label = { 0: 'a', 1: 'b', 2: 'c', 3: 'd', 7: 'e' }; }), 'bad_config', 'id2label must map 0…N−1 to names');
  checkpoint('config-activation', 'values', 'hidden_act relu',
    editedCfg((c) => { c.hidden_act = 'relu'; }), 'bad_config', 'hidden_act');

  // The variants (METHODS.md "Model variants", docs/import.md): contradicting keys and tensors,
  // and every feature vitlens does not implement, each refused with its reason.
  const F32 = (shape) => ({ shape, bytes: Buffer.alloc(4 * shape.reduce((a, b) => a * b, 1)) });
  // [checkpoint, config.json text]: the base checkpoint with `extra` tensors (name → F32 zeros of
  // a shape) appended, those in `drop` removed, and config.json changed by `editConfig`.
  const variant = ({ extra = {}, drop = [], editConfig = () => {} }) => {
    const h = structuredClone(S);
    const parts = [SD];
    let end = SD.length;
    for (const [name, { shape, bytes }] of Object.entries(extra)) {
      h[name] = { dtype: 'F32', shape, data_offsets: [end, end + bytes.length] };
      parts.push(bytes);
      end += bytes.length;
    }
    for (const name of drop) delete h[name];
    // A timm checkpoint with timm keys: without the base config's Hugging Face class (whose fixed
    // properties a variant would contradict first).
    const c = JSON.parse(configText);
    delete c.architectures;
    delete c.model_type;
    editConfig(c);
    return [encodeSafetensors(JSON.stringify(h), Buffer.concat(parts)), JSON.stringify(c, null, 2)];
  };
  const layerScale = (length = () => 32, blocks = [0, 1, 2]) => Object.fromEntries(blocks.flatMap((b) =>
    ['ls1', 'ls2'].map((g) => [`blocks.${b}.${g}.gamma`, F32([length(b, g)])])));

  checkpoint('config-class-token-token-pool', 'variants', 'class_token false with global_pool token',
    variant({ editConfig: (c) => Object.assign(c, { class_token: false, global_pool: 'token' }) }), 'bad_config',
    'global_pool \'token\' needs a class token, but class_token is false');
  checkpoint('config-class-token-tensor', 'variants', 'class_token false, but the checkpoint has cls_token (avg pooling)',
    variant({ editConfig: (c) => Object.assign(c, { class_token: false, global_pool: 'avg', fc_norm: false }) }), 'bad_config',
    '\'class_token: false\' contradicts the checkpoint, which has \'cls_token\'');
  checkpoint('config-fc-norm-token-pool', 'variants', 'fc_norm true with token pooling',
    variant({ editConfig: (c) => Object.assign(c, { fc_norm: true }) }), 'bad_config',
    '\'fc_norm: true\' with global_pool \'token\'');
  checkpoint('config-fc-norm-tensor', 'variants', 'global_pool avg with fc_norm true, but the checkpoint has no fc_norm',
    variant({ editConfig: (c) => Object.assign(c, { global_pool: 'avg', fc_norm: true }) }), 'bad_config',
    '\'fc_norm: true\', \'final_norm: true\' imply an \'fc_norm\', which the checkpoint lacks');
  checkpoint('config-final-norm-tensor', 'variants', 'final_norm false, but the checkpoint has norm.weight',
    variant({ editConfig: (c) => Object.assign(c, { global_pool: 'avg', final_norm: false }) }), 'bad_config',
    'imply no final \'norm\', but the checkpoint has \'norm.weight\'');
  checkpoint('ckpt-dist-head-without-token', 'variants', 'a distillation head without its token',
    variant({ extra: { 'head_dist.weight': F32([5, 32]), 'head_dist.bias': F32([5]) } }), 'missing_tensor',
    'a distillation head \'head_dist.weight\' without its token \'dist_token\'');
  checkpoint('ckpt-layerscale-length', 'variants', 'a LayerScale γ of length 31 in a width-32 model',
    variant({ extra: layerScale((b, g) => (b === 1 && g === 'ls2' ? 31 : 32)) }), 'bad_shape',
    '\'blocks.1.ls2.gamma\' has shape [31] but config.json implies [32]');
  checkpoint('ckpt-layerscale-partial', 'variants', 'LayerScale in block 0 only',
    variant({ extra: layerScale(undefined, [0]) }), 'missing_tensor', '\'blocks.1.ls1.gamma\' is missing');
  checkpoint('config-layerscale-no-tensors', 'variants', 'layerscale_value without LayerScale tensors',
    variant({ editConfig: (c) => Object.assign(c, { layerscale_value: 1e-5 }) }), 'missing_tensor',
    'config.json sets layerscale_value, but the LayerScale tensor \'blocks.0.ls1.gamma\' is missing');
  checkpoint('ckpt-register-width', 'variants', 'register tokens 16 wide in a width-32 model',
    variant({ extra: { reg_token: F32([1, 2, 16]) } }), 'bad_shape',
    'register tokens \'reg_token\' have shape [1, 2, 16], expected [1, registers, 32]');
  checkpoint('config-register-count', 'variants', 'num_register_tokens 3 for a reg_token of 2 rows',
    variant({ extra: { reg_token: F32([1, 2, 32]) }, editConfig: (c) => Object.assign(c, { num_register_tokens: 3 }) }),
    'bad_config', '\'num_register_tokens\' 3 disagrees with the checkpoint\'s 2 register tokens');
  checkpoint('config-register-no-tensor', 'variants', 'reg_tokens 2 without a reg_token tensor',
    variant({ editConfig: (c) => Object.assign(c, { reg_tokens: 2 }) }), 'missing_tensor',
    'needs the register tokens \'reg_token\', which are missing');
  checkpoint('config-register-keys', 'variants', 'reg_tokens and num_register_tokens disagree',
    variant({ editConfig: (c) => Object.assign(c, { reg_tokens: 2, num_register_tokens: 4 }) }), 'bad_config',
    '\'reg_tokens\' 2 disagrees with \'num_register_tokens\' 4');
  checkpoint('config-absurd-registers', 'dimensions', 'num_register_tokens 2^31 (reported clamped to 2^30)',
    variant({ editConfig: (c) => Object.assign(c, { num_register_tokens: 2 ** 31 }) }), 'limit', 'register tokens = 1073741824');
  checkpoint('config-no-embed-class', 'variants', 'no_embed_class true, but pos_embed has the class token\'s row',
    variant({ editConfig: (c) => Object.assign(c, { no_embed_class: true }) }), 'bad_config',
    '\'no_embed_class: true\' contradicts \'pos_embed\' with 16 rows');
  checkpoint('config-qkv-bias', 'variants', 'qkv_bias false, but the checkpoint has q/k/v biases',
    variant({ editConfig: (c) => Object.assign(c, { qkv_bias: false }) }), 'bad_config', '\'qkv_bias: false\' contradicts the checkpoint');
  checkpoint('ckpt-qkv-bias-partial', 'variants', 'a q/k/v bias in blocks 0 and 2 but not 1',
    variant({ drop: ['blocks.1.attn.qkv.bias'] }), 'missing_tensor', 'the q/k/v bias is present in some blocks and not in others');
  checkpoint('config-mlp-ratio', 'variants', 'mlp_ratio 4 against intermediate_size 64 (width 32)',
    variant({ editConfig: (c) => Object.assign(c, { mlp_ratio: 4 }) }), 'bad_config',
    '\'intermediate_size\' 64 disagrees with hidden_size · mlp_ratio = 128');
  checkpoint('config-architecture-mismatch', 'variants', 'a Dinov2 config.json with timm-named tensors',
    variant({ editConfig: (c) => Object.assign(c, { architectures: ['Dinov2ForImageClassification'], model_type: 'dinov2' }) }),
    'bad_config', 'names Hugging Face Dinov2ForImageClassification but the checkpoint\'s tensors are named for timm VisionTransformer');
  checkpoint('config-vision-config', 'variants', 'a vision_config in a ViT config.json',
    variant({ editConfig: (c) => Object.assign(c, { vision_config: { hidden_size: 64 } }) }), 'bad_config',
    '\'vision_config\' is read only for CLIP');
  checkpoint('config-unknown-key', 'unsupported', 'a key vitlens does not know',
    variant({ editConfig: (c) => Object.assign(c, { attention_temperature: 0.5 }) }), 'bad_config',
    'key \'attention_temperature\' is not one vitlens knows');
  checkpoint('config-pool-map', 'unsupported', 'attention pooling (global_pool map)',
    variant({ editConfig: (c) => Object.assign(c, { global_pool: 'map' }) }), 'bad_config', 'attention pooling (global_pool \'map\')');
  checkpoint('config-pool-none', 'unsupported', 'global_pool "" (no pooling)',
    variant({ editConfig: (c) => Object.assign(c, { global_pool: '' }) }), 'bad_config', 'without pooling (global_pool \'\')');
  checkpoint('config-swin', 'unsupported', 'a Swin config.json',
    variant({ editConfig: (c) => Object.assign(c, { architectures: ['SwinForImageClassification'], model_type: 'swin' }) }),
    'bad_config', 'architecture \'SwinForImageClassification\' (windowed attention)');
  checkpoint('config-window-size', 'unsupported', 'window_size (windowed attention)',
    variant({ editConfig: (c) => Object.assign(c, { window_size: 7 }) }), 'bad_config', 'windowed attention (Swin: window_size)');
  checkpoint('config-relative-position-bias', 'unsupported', 'use_relative_position_bias (BEiT)',
    variant({ editConfig: (c) => Object.assign(c, { use_relative_position_bias: true }) }), 'bad_config', 'relative position bias (BEiT');
  checkpoint('config-shared-relative-position-bias', 'unsupported', 'use_shared_relative_position_bias (BEiT)',
    variant({ editConfig: (c) => Object.assign(c, { use_shared_relative_position_bias: true }) }), 'bad_config', 'relative position bias (BEiT');
  checkpoint('ckpt-relative-position-bias', 'unsupported', 'a relative_position_bias_table tensor',
    variant({ extra: { 'blocks.0.attn.relative_position_bias_table': F32([57, 4]) } }), 'unknown_tensor',
    '\'blocks.0.attn.relative_position_bias_table\' does not belong to a timm VisionTransformer vitlens implements (relative position bias');
  checkpoint('config-rope', 'unsupported', 'rope_theta (rotary position embeddings)',
    variant({ editConfig: (c) => Object.assign(c, { rope_theta: 10000 }) }), 'bad_config', 'rotary position embeddings (\'rope_theta\')');
  checkpoint('ckpt-rope', 'unsupported', 'a rotary-embedding tensor',
    variant({ extra: { 'blocks.0.attn.rope.freqs': F32([8]) } }), 'unknown_tensor', 'rotary position embeddings (RoPE)');
  checkpoint('config-timm-architecture-rope', 'unsupported', 'a timm architecture name with RoPE',
    variant({ editConfig: (c) => Object.assign(c, { architecture: 'vit_base_patch16_rope_reg1_gap_256' }) }), 'bad_config',
    'timm architecture \'vit_base_patch16_rope_reg1_gap_256\' (rotary position embeddings)');
  checkpoint('config-hybrid', 'unsupported', 'a ViT-hybrid config.json',
    variant({ editConfig: (c) => Object.assign(c, { architectures: ['ViTHybridForImageClassification'], model_type: 'vit_hybrid' }) }),
    'bad_config', '(a convolutional stem, hybrid)');
  checkpoint('ckpt-conv-stem', 'unsupported', 'a convolutional backbone before the patch embedding',
    variant({ extra: { 'patch_embed.backbone.stem.conv.weight': F32([8, 3, 3, 3]) } }), 'unknown_tensor',
    'a convolutional backbone before the patch embedding (ViT hybrid)');
  checkpoint('ckpt-pos-embed-register-rows', 'unsupported', 'a pos_embed with rows for 2 register tokens',
    variant({ extra: { reg_token: F32([1, 2, 32]), pos_embed: F32([1, 18, 32]) } }), 'bad_config',
    'a pos_embed with rows for the register tokens');
  checkpoint('config-swiglu', 'unsupported', 'use_swiglu_ffn true',
    variant({ editConfig: (c) => Object.assign(c, { use_swiglu_ffn: true }) }), 'bad_config', 'a SwiGLU FFN (use_swiglu_ffn: true)');
  checkpoint('ckpt-swiglu', 'unsupported', 'a SwiGLU MLP tensor',
    variant({ extra: { 'blocks.0.mlp.w12.weight': F32([128, 32]) } }), 'unknown_tensor', '(a SwiGLU FFN)');
  checkpoint('config-deit-without-teacher', 'unsupported', 'DeiTForImageClassification (CLS head only, with a [DIST] token)',
    variant({ editConfig: (c) => Object.assign(c, { architectures: ['DeiTForImageClassification'], model_type: 'deit' }) }),
    'bad_config', 'DeiTForImageClassification (a [DIST] token, but only the CLS head is read) is not implemented');
  checkpoint('config-activation-gelu-fast', 'unsupported', 'hidden_act gelu_fast',
    variant({ editConfig: (c) => Object.assign(c, { hidden_act: 'gelu_fast' }) }), 'bad_config', 'hidden_act \'gelu_fast\' is not supported');
  checkpoint('config-regression', 'unsupported', 'problem_type regression',
    variant({ editConfig: (c) => Object.assign(c, { problem_type: 'regression' }) }), 'bad_config', 'a regression head');

  // Images (the page decodes them with the browser's own decoders) -------------------------
  const image = (id, category, description, [file, bytes], expect, page = { code: 'bad_image' }) =>
    add({ id, category, description, entry: 'image', expect, page }, { image: [file, bytes] });
  const scene = read(base.image);
  const jpeg = fs.readFileSync(path.join(repo, 'tests/fixtures/image/flat_baseline.jpg'));
  // The JPEG's frame header (SOF0) saying 0 rows.
  const jpegNoRows = Buffer.from(jpeg);
  let sof = 2;
  while (jpegNoRows[sof + 1] !== 0xc0) sof += 2 + jpegNoRows.readUInt16BE(sof + 2);
  jpegNoRows.writeUInt16BE(0, sof + 5);
  // A BMP info header announcing 70000×70000 pixels (top-down), without the pixels.
  const bmp = Buffer.alloc(54);
  bmp.write('BM', 0, 'latin1');
  bmp.writeUInt32LE(54, 2);
  bmp.writeUInt32LE(54, 10);
  bmp.writeUInt32LE(40, 14);
  bmp.writeInt32LE(70000, 18);
  bmp.writeInt32LE(-70000, 22);
  bmp.writeUInt16LE(1, 26);
  bmp.writeUInt16LE(24, 28);
  // A Huffman table (DHT) declaring 512 codes, inserted after SOI: the out-of-bounds write of
  // stb_image 2.27 that core/src/io/image.cpp guards against.
  const dht = Buffer.from([0xff, 0xc4, 0x00, 0x13, 0x00, ...new Array(16).fill(0x20)]);

  image('image-empty', 'empty', 'an empty image file',
    ['image-empty.png', Buffer.alloc(0)], { code: 'bad_image', message: 'the image is empty (0 bytes)' });
  image('image-text', 'format', 'a text file named .png',
    ['image-text.png', Buffer.from('these are notes, not pixels\n')], { code: 'bad_image', message: 'not a PNG, JPEG or BMP image' });
  image('image-cut', 'truncated', 'a gallery scene cut in half',
    ['image-cut.png', scene.subarray(0, scene.length >> 1)], { code: 'bad_image', message: 'corrupt image' });
  image('image-jpeg-dht', 'image', 'a JPEG whose Huffman table declares 512 codes',
    ['image-jpeg-dht.jpg', Buffer.concat([jpeg.subarray(0, 2), dht, jpeg.subarray(2)])],
    { code: 'bad_image', message: 'more than 256 codes' });
  image('image-0x0', 'image-size', 'a PNG of 0×0 pixels',
    ['image-0x0.png', encodeGrayPng(0, 0, () => 0)], { code: 'bad_image', message: 'the image has no pixels (0x0)' });
  image('image-jpeg-0-rows', 'image-size', 'a JPEG whose frame header says 0 rows',
    ['image-jpeg-0-rows.jpg', jpegNoRows], { code: 'bad_image', message: 'the image has no pixels (16x0)' });
  image('image-1x100000', 'image-size', 'a PNG of 1×100000 pixels: valid, resized to the model\'s 24×40 input',
    ['image-1x100000.png', encodeGrayPng(1, 100000, (x, y) => (y * 7) & 255)], { ok: true }, { ok: true });
  image('image-huge', 'image-size', 'a PNG header announcing 100000×100000 pixels',
    ['image-huge.png', encodeGrayPng(100000, 100000, () => 0, { pixels: false })],
    { code: 'limit', message: 'an image of 100000x100000 pixels is larger than 50000000 pixels' });
  image('image-bmp-huge', 'image-size', 'a BMP header announcing 70000×70000 pixels',
    ['image-bmp-huge.bmp', bmp], { code: 'limit', message: 'an image of 70000x70000 pixels is larger than 50000000 pixels' });

  // Model inputs as .npy (the CLI's --input; the wasm API takes the tensor itself; the page has
  // no tensor input, so a dropped .npy is an image it cannot decode) ------------------------
  const inputBytes = read(base.input);
  const body = Buffer.from(inputBytes.subarray(inputBytes.length - 3 * 24 * 40 * 4)); // (3, 24, 40) f32
  const noNpy = {
    skip: 'the wasm API takes a Float32Array, not a .npy file (parse_npy runs under node in the Catch2 suite built to wasm)',
  };
  const npy = (id, category, description, bytes, expect, { cli, wasm = noNpy } = {}) =>
    add({ id, category, description, entry: 'npy', expect, cli, wasm, page: { code: 'bad_image' } }, { input: [`${id}.npy`, bytes] });
  const withByte = (at, write) => {
    const b = Buffer.from(inputBytes);
    write(b, at);
    return b;
  };
  const nanBody = Buffer.from(body);
  nanBody.writeFloatLE(NaN, 4 * 1000);

  npy('npy-empty', 'empty', 'an empty .npy file',
    Buffer.alloc(0), { code: 'truncated', message: 'the file is empty' });
  npy('npy-magic', 'magic-version', 'a .npy without its magic',
    withByte(0, (b, at) => b.write('PK\x03\x04', at, 'latin1')), { code: 'bad_format', message: 'does not start with the .npy magic' });
  npy('npy-version', 'magic-version', '.npy format version 9.0',
    withByte(6, (b, at) => { b[at] = 9; }), { code: 'bad_version', message: 'format version 9.0' });
  npy('npy-header-past-end', 'header-length', 'a header length past the end of the file',
    withByte(8, (b, at) => b.writeUInt16LE(0xfff0, at)),
    { code: 'truncated', message: 'the header announces 65520 bytes but the file ends before' });
  npy('npy-cut', 'truncated', 'the input cut in the middle of its data',
    inputBytes.subarray(0, inputBytes.length - 1000), { code: 'truncated', message: 'needs 11520 data bytes, the file has 10520' });
  npy('npy-shape', 'shape', 'an input of 3×24×24 for a 3×24×40 model',
    encodeNpy({ shape: [3, 24, 24], body: body.subarray(0, 3 * 24 * 24 * 4) }),
    { code: 'bad_shape', message: 'the model needs 3×24×40' },
    { cli: { message: 'has shape 3×24×24 but the model needs 3×24×40' },
      wasm: { message: 'the tensor has 1728 values; the model needs 3×24×40' } });
  npy('npy-nan', 'nan-inf', 'an input with a NaN',
    encodeNpy({ shape: [3, 24, 40], body: nanBody }), { code: 'bad_value', message: 'input contains NaN or Inf' }, { wasm: {} });
  npy('npy-dtype', 'dtype', 'a complex64 input',
    encodeNpy({ descr: '<c8', shape: [3, 24, 20], body }), { code: 'bad_format', message: 'unsupported dtype \'<c8\'' });
  npy('npy-fortran', 'dtype', 'a Fortran-order input',
    encodeNpy({ shape: [3, 24, 40], body, fortran: true }), { code: 'bad_format', message: 'Fortran-order' });
  npy('npy-absurd', 'dimensions', 'a shape of 100000 × 100000 × 100000',
    encodeNpy({ shape: [100000, 100000, 100000], body }), { code: 'limit', message: 'has more than 67108864 elements' });

  // Options out of range (explain and predict on the valid base model and input) -------------
  const options = (id, category, description, opts, code, message, { cli, wasm } = {}) =>
    add({ id, category, description, entry: 'options', options: opts, expect: { code, message }, cli, wasm });
  const ta = 'transformer-attribution';
  // The option errors come from core's one option parser (methods/options.h): the same message
  // through the CLI and the API.

  options('target-classes', 'target', 'target class 5 of a 5-class model',
    { method: ta, target: 5 }, 'bad_argument', 'target 5 is out of range: give -1 to 4 (the model has 5 classes)');
  options('target-negative', 'target', 'target class −5',
    { method: 'grad-rollout', target: -5 }, 'bad_argument', 'target -5 is out of range');
  options('target-huge', 'target', 'target class 10^12',
    { method: 'attn-gradcam', target: 1e12 }, 'bad_argument', 'target 1000000000000 is out of range');
  options('start-layer', 'options', 'start layer 3 of a 3-block model',
    { method: 'rollout', startLayer: 3 }, 'bad_argument', 'start-layer 3 is out of range: give 0 to 2 (the model has 3 blocks)');
  options('start-layer-fraction', 'options', 'start layer 1.5',
    { method: ta, startLayer: 1.5 }, 'bad_argument', 'start-layer needs an integer, got 1.5');
  options('block', 'options', 'block 7 of a 3-block model',
    { method: ta, block: 7 }, 'bad_argument', 'block 7 is out of range');
  options('block-negative', 'options', 'block −2',
    { method: ta, block: -2 }, 'bad_argument', 'block -2 is out of range');
  options('discard-ratio', 'options', 'discard ratio 1.5',
    { method: 'rollout', discardRatio: 1.5 }, 'bad_argument', 'discard-ratio 1.5 is out of range: give 0 to 1');
  options('discard-ratio-nan', 'options', 'discard ratio NaN',
    { method: 'rollout', discardRatio: NaN }, 'bad_argument', 'discard-ratio nan is out of range');
  options('head-fusion', 'options', 'head fusion "median"',
    { method: 'rollout', headFusion: 'median' }, 'bad_argument', 'head-fusion must be one of mean, max, min; got \'median\'');
  options('option-not-applicable', 'options', 'an option the method does not read',
    { method: 'raw-attention', startLayer: 1 }, 'bad_argument', 'start-layer does not apply to raw-attention');
  options('method-unknown', 'options', 'a method that does not exist',
    { method: 'integrated-gradients-9000' }, 'bad_argument', 'unknown method \'integrated-gradients-9000\'');
  options('top-zero', 'options', 'predict the top 0 classes',
    { top: 0 }, 'bad_argument', 'at least 1', { cli: { message: '--top must be at least 1' }, wasm: { message: 'k must be at least 1' } });

  const replacer = (k, v) => (typeof v === 'number' && Number.isNaN(v) ? 'NaN' : v);
  fs.writeFileSync(path.join(dir, 'manifest.json'), `${JSON.stringify({ base, cases }, replacer, 1)}\n`);
  return { cases, base };
}

// The code and message fragment a front end ('cli' or 'wasm') must give for a case, or
// { skip } / { ok: true }.
export function expectationFor(c, frontEnd) {
  const own = c[frontEnd] ?? {};
  if (own.skip) return { skip: own.skip };
  if (c.expect.ok) return { ok: true };
  return { code: own.code ?? c.expect.code, message: own.message ?? c.expect.message };
}

// The explain / predict options as `vitlens` flags.
export function cliOptionFlags(o) {
  const flags = [];
  const named = {
    target: '--target', startLayer: '--start-layer', block: '--block', discardRatio: '--discard-ratio', headFusion: '--head-fusion',
  };
  for (const [key, flag] of Object.entries(named)) if (key in o) flags.push(flag, String(o[key]));
  return flags;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    console.error('usage: node tests/catalogue/catalogue.mjs OUT_DIR');
    process.exit(2);
  }
  const { cases } = makeCatalogue(path.resolve(out));
  console.log(`${cases.length} cases written to ${out} (manifest.json)`);
}
