// ab.mjs — what the page's A/B benchmarks share (startup_ab.mjs, switch_ab.mjs): their command
// line (two builds, each a web/ directory and a directory of wasm modules), the two servers, and
// the statistics of paired runs (quantiles, and a bootstrap interval of the median difference).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { repo } from '../tests/node/support.mjs';

// --a-web DIR [--a-wasm DIR] [--b-web DIR] [--b-wasm DIR] [--pages N] [--isolate] [--search S]
// [--json], and the whole-number options of `counts` with their defaults ({ '--clicks': 8 } →
// o.clicks; '--pages' there replaces its default of 16). --b-web defaults to this checkout's web/,
// each --…-wasm to build-wasm/wasm. Without --a-web, an error unless `aOptional` (then only build
// B runs).
export function parseAbArgs(argv, counts = {}, { aOptional = false } = {}) {
  const o = {
    aWeb: null, aWasm: path.join(repo, 'build-wasm/wasm'), bWeb: path.join(repo, 'web'),
    bWasm: path.join(repo, 'build-wasm/wasm'), pages: 16, isolate: false, search: '', json: false,
  };
  const numbers = { '--pages': 'pages' };
  for (const [flag, def] of Object.entries(counts)) {
    numbers[flag] = flag.slice(2);
    o[flag.slice(2)] = def;
  }
  const dirs = { '--a-web': 'aWeb', '--a-wasm': 'aWasm', '--b-web': 'bWeb', '--b-wasm': 'bWasm' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a in dirs) o[dirs[a]] = path.resolve(value());
    else if (a in numbers) {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 1) throw new Error(`${a} takes a whole number ≥ 1`);
      o[numbers[a]] = n;
    } else if (a === '--isolate') o.isolate = true;
    else if (a === '--search') o.search = value();
    else if (a === '--json') o.json = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.aWeb && !aOptional) throw new Error('--a-web DIR is needed: the page to compare against (a web/ directory)');
  return o;
}

// The builds (B alone without o.aWeb), each served by its own serve.mjs (which serves the
// directory it sits in; one from before 2026-12-03 served its parent's web/, so keep such copies
// in a directory named web).
export async function startBuilds(o, modelsDir) {
  const builds = o.aWeb ? { A: { web: o.aWeb, wasm: o.aWasm }, B: { web: o.bWeb, wasm: o.bWasm } } : { B: { web: o.bWeb, wasm: o.bWasm } };
  for (const b of Object.values(builds)) {
    const { startServer } = await import(pathToFileURL(path.join(b.web, 'serve.mjs')).href);
    b.server = await startServer({ port: 0, wasmDir: b.wasm, modelsDir, isolate: o.isolate });
  }
  return builds;
}

export const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  return s[Math.floor(i)] + (s[Math.ceil(i)] - s[Math.floor(i)]) * (i - Math.floor(i));
};

// The 95 % percentile-bootstrap interval of the median of xs (2 000 resamples; a fixed seed, so
// that the same pairs always give the same interval).
export function medianInterval(xs, resamples = 2000) {
  let state = 0x9e3779b9;
  const random = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
  const medians = [];
  for (let r = 0; r < resamples; r++) {
    const sample = xs.map(() => xs[Math.floor(random() * xs.length)]);
    medians.push(quantile(sample, 0.5));
  }
  return [quantile(medians, 0.025), quantile(medians, 0.975)];
}

// Per key of paired records (a[i] and b[i] from the same turn): each build's median and the median
// of the pairs' differences b − a with its interval; keys missing from any record are left out.
export function pairedTable(a, b, keys) {
  const rows = [];
  for (const key of keys) {
    if (![...a, ...b].every((t) => Number.isFinite(t[key]))) continue;
    const d = a.map((t, i) => b[i][key] - t[key]);
    rows.push({
      key, a: quantile(a.map((t) => t[key]), 0.5), b: quantile(b.map((t) => t[key]), 0.5),
      diff: quantile(d, 0.5), interval: medianInterval(d),
    });
  }
  return rows;
}

// Prints pairedTable's rows.
export function printTable(rows, width = 24) {
  for (const s of rows) {
    console.log(`  ${s.key.padEnd(width)} A ${s.a.toFixed(1).padStart(7)}  B ${s.b.toFixed(1).padStart(7)}  ` +
      `B − A ${s.diff.toFixed(1).padStart(7)} [${s.interval[0].toFixed(1)} … ${s.interval[1].toFixed(1)}]`);
  }
}
