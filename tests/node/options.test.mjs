// options.test.mjs — each method's options declared once (issue 13, item 2), seen from both front
// ends. For every method of methods() and every option of its table (not a hand list): the native
// CLI and the wasm API accept the same values, with the same default (no option gives the same map
// as the default given explicitly, and the CLI's map equals the API's), and reject the same
// out-of-range, malformed and not-applicable values with the same error code and message. And
// vitlens.d.ts's ExplainOptions, MethodInfo, OptionSpec and OutputSpec agree with methods().
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { loadVitlens, maxRelError, nativeCli, nativeDir, readNpy, repo, tmpDir } from './support.mjs';

const fixture = path.join(repo, 'tests/fixtures/engine/nonsquare'); // 24×40 RGB, patch 8, 3 blocks, 5 classes
const tmp = tmpDir();
const modelPath = path.join(tmp, 'm.vitl');
const inputPath = path.join(fixture, 'input.npy');
let vl;
let model;
let info;

before(async () => {
  vl = await loadVitlens();
  nativeCli('import', path.join(fixture, 'model_timm.safetensors'), '--config', path.join(fixture, 'config.json'), '-o', modelPath);
  model = vl.Model.fromSafetensors(new Uint8Array(fs.readFileSync(path.join(fixture, 'model_timm.safetensors'))),
    fs.readFileSync(path.join(fixture, 'config.json'), 'utf8'));
  info = model.info();
});
after(() => {
  model?.delete();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ---- the two front ends, each returning { map } or { code, message } -------------------------

const input = new Float32Array(readNpy(inputPath).data);

function viaApi(method, options) {
  try {
    const x = model.prepare(input);
    try {
      const ex = x.explain(method.name, options);
      return { map: Array.from(method.nativePixels ? ex.pixelMap : ex.tokenMap) };
    } finally {
      x.delete();
    }
  } catch (e) {
    const m = /^([a-z_]+): ([\s\S]*)$/.exec(e.message);
    assert.ok(m, `API error without a code: ${e.message}`);
    return { code: m[1], message: m[2] };
  }
}

let runs = 0;
function viaCli(method, flags) {
  const out = path.join(tmp, `map${runs++}.npy`);
  const args = ['explain', modelPath, '--input', inputPath, '--method', method.name, ...flags, '--save-map', out];
  const r = spawnSync(path.join(nativeDir, 'vitlens'), args, { encoding: 'utf8', timeout: 120_000 });
  if (r.status === 0) {
    const map = Array.from(readNpy(out).data);
    fs.rmSync(out);
    return { map };
  }
  const m = /^vitlens explain: error \(([a-z_]+)\): ([\s\S]*?)\n?$/.exec(r.stderr);
  assert.ok(m, `vitlens ${args.join(' ')}: status ${r.status}, stderr ${r.stderr}`);
  return { code: m[1], message: m[2] };
}

// The CLI's words for one option value (a flag: present or absent; the image: a .npy file).
function cliFlags(spec, value) {
  if (spec.kind === 'flag') return value === spec.default ? [] : [spec.flag];
  return [spec.flag, String(value)];
}

// Both front ends on one option value: the same map, or the same error.
function same(method, spec, jsValue, cliValue = jsValue) {
  const api = viaApi(method, { [spec.jsKey]: jsValue });
  const cli = viaCli(method, cliFlags(spec, cliValue));
  const what = `${method.name} ${spec.key}=${String(jsValue)}`;
  if (api.map && cli.map) {
    assert.equal(api.map.length, cli.map.length, what);
    // precision=float32 reads each build's own float pass, and the native and wasm products round
    // differently: the map carries that (README: ≤ 4e-4 of its maximum from float64's)
    const tol = spec.key === 'precision' && jsValue === 'float32' ? 1e-3 : 1e-5;
    assert.ok(maxRelError(api.map, cli.map) <= tol, `${what}: API vs CLI maps differ by ${maxRelError(api.map, cli.map)}`);
  } else {
    assert.deepEqual(cli, api, `${what}: CLI and API disagree`);
  }
  return api;
}

// Model-dependent bounds resolved as the page does with info().
const bound = (v, of) => (of === 'lastBlock' ? info.depth - 1 : of === 'lastClass' ? info.classes - 1 : v);

// Valid and invalid values of one option, from its spec.
function valuesOf(spec) {
  const lo = bound(spec.min, spec.minOf);
  const hi = bound(spec.max, spec.maxOf);
  switch (spec.kind) {
    case 'integer': {
      // a huge maximum (the seed's 2^53 − 1) is tried as is; a large one only beyond it
      const inside = [lo, Math.min(hi, lo + 2), ...(hi - lo < 100 ? [hi] : []), ...(spec.zeroIsDefault ? [0] : [])];
      return { ok: inside, bad: [spec.zeroIsDefault ? -1 : lo - 1, hi + 1, lo + 0.5, 'abc'] };
    }
    case 'number': return { ok: [lo, (lo + hi) / 2, hi], bad: [lo - 0.5, hi + 0.5, NaN, 'abc'] };
    case 'flag': return { ok: [!spec.default], bad: [] };
    case 'choice': return { ok: spec.choices, bad: ['no-such-choice'] };
    case 'method': return { ok: spec.choices, bad: ['no-such-method'] };
    default: return { ok: [], bad: [] };
  }
}

// Keeps the baseline test quick; smoothgrad wraps integrated gradients there, which reads the baseline.
const CHEAP = { smoothgrad: { samples: 2, inner: 'integrated-gradients', steps: 4 }, 'integrated-gradients': { steps: 4 } };

test('every method and option: the CLI and the API accept the same values with the same default', (t) => {
  let checked = 0;
  for (const method of vl.methods()) {
    // No options: the same map from both.
    const api0 = viaApi(method, {});
    const cli0 = viaCli(method, []);
    assert.ok(api0.map && cli0.map, `${method.name}: defaults fail: ${JSON.stringify([api0, cli0])}`);
    assert.ok(maxRelError(api0.map, cli0.map) <= 1e-5, `${method.name}: default maps differ`);
    for (const spec of method.optionSpecs) {
      if (spec.kind === 'image') continue; // the baseline: its own test below
      // The default given explicitly = absent, in each front end.
      if (spec.default !== null && spec.kind !== 'flag') {
        const apiD = viaApi(method, { [spec.jsKey]: spec.default });
        const cliD = viaCli(method, cliFlags(spec, typeof spec.default === 'number' ? String(spec.default) : spec.defaultText));
        assert.deepEqual(apiD.map, api0.map, `${method.name}: ${spec.jsKey}=${spec.default} is not the API's default`);
        assert.ok(maxRelError(cliD.map, cli0.map) <= 0, `${method.name}: ${spec.flag} ${spec.defaultText} is not the CLI's default`);
      }
      for (const v of valuesOf(spec).ok) {
        const r = same(method, spec, v);
        assert.ok(r.map, `${method.name} ${spec.key}=${v} rejected: ${r.message}`);
        checked++;
      }
    }
  }
  t.diagnostic(`${checked} accepted values, each through both front ends`);
});

test('every method and option: the CLI and the API reject the same values with the same code and message', (t) => {
  let checked = 0;
  for (const method of vl.methods()) {
    for (const spec of method.optionSpecs) {
      for (const v of valuesOf(spec).bad) {
        const r = same(method, spec, v);
        assert.equal(r.code, 'bad_argument', `${method.name} ${spec.key}=${v} accepted`);
        checked++;
      }
    }
    // The options of other methods do not apply to this one.
    const own = new Set(method.optionSpecs.map((s) => s.key));
    const others = new Map();
    for (const m of vl.methods()) for (const s of m.optionSpecs) if (!own.has(s.key) && s.kind !== 'image') others.set(s.key, s);
    for (const spec of others.values()) {
      const v = spec.kind === 'flag' ? !spec.default : spec.default;
      const r = same(method, spec, v);
      assert.equal(r.code, 'bad_argument', `${method.name} accepts ${spec.key}`);
      assert.match(r.message, new RegExp(`does not apply to ${method.name}`));
      checked++;
    }
  }
  t.diagnostic(`${checked} rejected values, each through both front ends`);
});

test('the image option (the baseline): a file for the CLI, a Float32Array for the API, the same map', () => {
  const shape = readNpy(inputPath).shape;
  const half = new Float32Array(input.length).fill(0.5);
  const file = path.join(tmp, 'baseline.npy');
  const header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}), }`;
  const padded = header.padEnd(Math.ceil((header.length + 11) / 64) * 64 - 11, ' ') + '\n';
  const h = Buffer.alloc(10);
  h.write('\x93NUMPY', 0, 'latin1');
  h.writeUInt8(1, 6);
  h.writeUInt16LE(padded.length, 8);
  fs.writeFileSync(file, Buffer.concat([h, Buffer.from(padded, 'latin1'), Buffer.from(half.buffer)]));
  for (const method of vl.methods()) {
    const spec = method.optionSpecs.find((s) => s.kind === 'image');
    if (!spec) continue;
    const api = viaApi(method, { [spec.jsKey]: half, ...CHEAP[method.name] });
    const cheap = Object.entries(CHEAP[method.name] ?? {}).flatMap(([k, v]) => [`--${k}`, String(v)]);
    const cli = viaCli(method, [spec.flag, file, ...cheap]);
    assert.ok(api.map && cli.map, `${method.name}: ${JSON.stringify([api.code, cli.code])}`);
    assert.ok(maxRelError(api.map, cli.map) <= 1e-5, `${method.name}: baseline maps differ`);
    const black = viaApi(method, CHEAP[method.name] ?? {});
    assert.ok(maxRelError(api.map, black.map) > 1e-3, `${method.name}: the baseline changes nothing`);
  }
});

test('alias words and method specs: the CLI and the API agree, and refuse an option given twice', () => {
  // A method spec through both front ends: the API's explain(spec, options), the CLI's --method spec plus flags.
  const viaSpec = (spec, options, flags) => {
    const method = { ...vl.methods().find((m) => m.name === spec.split(':')[0]), name: spec };
    return { api: viaApi(method, options), cli: viaCli(method, flags) };
  };
  const none = viaSpec('transformer-attribution', { weight: 'none' }, ['--weight', 'none']);
  const alias = viaSpec('transformer-attribution', { noGrad: true }, ['--no-grad']);
  const spec = viaSpec('transformer-attribution:no-grad', {}, []);
  for (const r of [alias, spec]) {
    assert.deepEqual(r.api.map, none.api.map);
    assert.ok(maxRelError(r.cli.map, none.api.map) <= 1e-5);
  }
  const twice = viaSpec('transformer-attribution:start-layer=1', { startLayer: 2 }, ['--start-layer', '2']);
  assert.deepEqual(twice.cli, twice.api);
  assert.equal(twice.api.code, 'bad_argument');
  assert.match(twice.api.message, /^start-layer is given twice: in the method spec 'transformer-attribution:start-layer=1'/);
  const combined = viaSpec('lrp:linear-rule=separate', { addRule: 'plain', target: 1 }, ['--add-rule', 'plain', '--target', '1']);
  assert.ok(combined.api.map && maxRelError(combined.cli.map, combined.api.map) <= 1e-5);
});

test('explain --list shows each option with the default methods() reports', () => {
  const list = nativeCli('explain', '--list');
  for (const method of vl.methods()) {
    const start = `\n${list}`.indexOf(`\n${method.name}\n`);
    assert.ok(start >= 0, `--list lacks ${method.name}`);
    const end = list.indexOf('\n', list.indexOf('\n  outputs:', start) + 1);
    const block = list.slice(start, end);
    for (const spec of method.optionSpecs)
      assert.ok(block.includes(`${spec.flag}`) && block.includes(`default ${spec.defaultText}`),
        `--list lacks ${method.name} ${spec.flag} default ${spec.defaultText}`);
    for (const out of method.outputs) assert.ok(block.includes(out.key), `--list lacks ${method.name}'s output ${out.key}`);
  }
});

// ---- vitlens.d.ts against methods() ---------------------------------------------------------

const dts = fs.readFileSync(path.join(repo, 'wasm/vitlens.d.ts'), 'utf8');

// The members of `export interface NAME { ... }` as { key: type text } (comments dropped).
function members(name) {
  const m = new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`).exec(dts);
  assert.ok(m, `vitlens.d.ts has no interface ${name}`);
  const body = m[1].replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const out = {};
  for (const [, key, type] of body.matchAll(/^\s*([A-Za-z_]\w*)\??\s*:\s*([\s\S]*?);\s*$/gm)) out[key] = type.replace(/\s+/g, ' ').trim();
  return out;
}

// The string literals of a union type, or of `export type NAME = ...`.
function literals(type) {
  const alias = /^[A-Z]\w*$/.test(type) ? new RegExp(`export type ${type} =([\\s\\S]*?);`).exec(dts) : null;
  return [...(alias ? alias[1] : type).matchAll(/"([^"]+)"/g)].map((x) => x[1]).sort();
}

test('vitlens.d.ts: ExplainOptions has exactly the table\'s options, with their types', () => {
  const declared = members('ExplainOptions');
  const specs = new Map();
  for (const m of vl.methods()) for (const s of m.optionSpecs) if (!specs.has(s.jsKey)) specs.set(s.jsKey, s);
  const aliases = [...specs.values()].flatMap((s) => s.aliases.map((a) => a.jsKey));
  assert.deepEqual(Object.keys(declared).sort(), [...specs.keys(), ...aliases, 'intermediates', 'onProgress'].sort(),
    'ExplainOptions keys = the options of methods() and their alias words + intermediates, onProgress');
  for (const a of aliases) assert.equal(declared[a], 'true', `alias ${a}: only true means anything`);
  const names = vl.methods().map((m) => m.name).sort();
  for (const [key, s] of specs) {
    const type = declared[key];
    switch (s.kind) {
      case 'integer': case 'number': assert.equal(type, 'number', key); break;
      case 'flag': assert.equal(type, 'boolean', key); break;
      case 'choice': assert.deepEqual(literals(type), [...s.choices].sort(), `${key}: ${type}`); break;
      case 'method': assert.equal(type, 'MethodSpec', key); break;  // a name or a spec
      case 'image': assert.equal(type, 'Float32Array', key); break;
      default: assert.fail(`${key}: unknown kind ${s.kind}`);
    }
  }
  assert.deepEqual(literals('MethodName'), names, 'MethodName = the registry');
});

test('vitlens.d.ts: MethodInfo, OptionSpec and OutputSpec have the fields methods() returns; outputs are Explanation fields', () => {
  const list = vl.methods();
  assert.deepEqual(Object.keys(members('MethodInfo')).sort(), Object.keys(list[0]).sort());
  const spec = list.find((m) => m.name === 'rollout').optionSpecs[0];
  assert.deepEqual(Object.keys(members('OptionSpec')).sort(), Object.keys(spec).sort());
  assert.deepEqual(Object.keys(members('OutputSpec')).sort(), Object.keys(list[0].outputs[0]).sort());
  const kinds = literals(members('OptionSpec').kind);
  const explanation = members('Explanation');
  for (const m of list) {
    for (const s of m.optionSpecs) assert.ok(kinds.includes(s.kind), `${m.name} ${s.key}: kind ${s.kind}`);
    for (const o of m.outputs) assert.ok(o.jsKey in explanation, `${m.name}: output ${o.jsKey} is not an Explanation field`);
  }
});

test('methods(): the tables say what the issue asks (steps per method, one stage list)', () => {
  const byName = Object.fromEntries(vl.methods().map((m) => [m.name, m]));
  const opt = (m, k) => byName[m].optionSpecs.find((s) => s.jsKey === k);
  assert.equal(opt('attattr', 'steps').default, 20);
  assert.equal(opt('integrated-gradients', 'steps').default, 32);
  assert.deepEqual(opt('norm-based', 'stage').choices, ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer']);
  assert.equal(opt('rollout', 'startLayer').maxOf, 'lastBlock');
  assert.equal(opt('transformer-attribution', 'weight').flag, '--weight');
  assert.deepEqual(opt('transformer-attribution', 'weight').choices, ['grad', 'none', 'attn']);
  assert.deepEqual(opt('transformer-attribution', 'weight').aliases, [{ word: 'no-grad', jsKey: 'noGrad', value: 'none' }]);
  for (const m of ['transformer-attribution', 'partial-lrp', 'lrp']) {
    assert.deepEqual(opt(m, 'linearRule').choices, ['shared', 'separate'], m);
    assert.deepEqual(opt(m, 'addRule').choices, ['normalised', 'plain'], m);
  }
  assert.equal(opt('raw-attention', 'threads').default, vl.threads());
  assert.ok(!byName.smoothgrad.optionSpecs.find((s) => s.key === 'inner').choices.includes('smoothgrad'));
  assert.deepEqual(byName.attattr.outputs.map((o) => o.jsKey), ['tokenMap', 'pixelMap', 'attattr', 'intermediates']);
  // The JS keys the page uses today are all still there.
  const keys = new Set(vl.methods().flatMap((m) => m.options));
  for (const k of ['startLayer', 'headFusion', 'discardRatio', 'block', 'weight', 'steps', 'quadrature', 'baseline', 'stage',
    'inner', 'samples', 'noise', 'seed', 'threads', 'target']) assert.ok(keys.has(k), k);
});
