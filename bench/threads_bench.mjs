// threads_bench.mjs — one explanation on one thread (vitlens.js) against the pthreads build
// (vitlens-mt.js, whose products split over its worker pool: core/include/vitlens/tensor/parallel.h),
// in node, the two builds taking turns round by round; prints the medians, the speed-up of each
// round's pair (median and range over the rounds), and checks that the maps are bit-identical.
//
//   node --no-experimental-fetch bench/threads_bench.mjs [MODEL.vitl | deit-tiny] [--rounds 7]
//        [--methods=transformer-attribution,grad-rollout,lrp]
// Each figure is a new input's forward pass, or one explain() after it (the forward excluded).
// VITLENS_WASM_DIR and VITLENS_NATIVE_BUILD choose the builds (tests/node/support.mjs).
import fs from 'node:fs';

import { deitTinyBytes, loadVitlens, loadVitlensMt } from '../tests/node/support.mjs';

const args = process.argv.slice(2);
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const rounds = Number(opt('--rounds', 7));
const methodsArg = args.find((a) => a.startsWith('--methods='));
const methods = methodsArg ? methodsArg.split('=')[1].split(',') : ['transformer-attribution', 'grad-rollout', 'lrp'];
const target = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--rounds') || 'deit-tiny';

const bytes = target === 'deit-tiny' ? deitTinyBytes() : new Uint8Array(fs.readFileSync(target));

const builds = { '1 thread': await loadVitlens(), threads: await loadVitlensMt() };
if (!builds.threads) throw new Error('vitlens-mt.js is not in this build (VITLENS_WASM_THREADS=OFF)');
const models = Object.fromEntries(Object.entries(builds).map(([k, vl]) => [k, vl.Model.fromBytes(bytes)]));
const info = models['1 thread'].info();
const x = new Float32Array(info.channels * info.imageH * info.imageW);
for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.37) + 0.3 * Math.cos(i * 0.011);

const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
const times = {};  // `${build}|${step}` → ms per round
const maps = {};
function measure(build, round) {
  const model = models[build];
  const record = (step, ms) => ((times[`${build}|${step}`] ??= [])[round] = ms);
  let t0 = performance.now();
  model.prepare(x).delete();
  record('forward', performance.now() - t0);
  for (const name of methods) {
    const input = model.prepare(x);
    t0 = performance.now();
    const e = input.explain(name, {});
    record(name, performance.now() - t0);
    maps[`${build}|${name}`] = e.tokenMap;
    input.delete();
  }
}
for (const build of Object.keys(builds)) measure(build, 0);  // warm-up: V8 tiers the code up
for (const k of Object.keys(times)) times[k] = [];
for (let round = 0; round < rounds; round++) {
  const order = round % 2 ? ['threads', '1 thread'] : ['1 thread', 'threads'];
  for (const build of order) measure(build, round);
}

console.log(`${target}: ${rounds} rounds, vitlens-mt.js with ${builds.threads.threads()} threads`);
for (const step of ['forward', ...methods]) {
  const one = times[`1 thread|${step}`], many = times[`threads|${step}`];
  const ratios = one.map((t, i) => t / many[i]).sort((p, q) => p - q);
  console.log(`${step.padEnd(26)} ${median(one).toFixed(1).padStart(8)} ms  ${median(many).toFixed(1).padStart(8)} ms` +
    `  speed-up ${median(ratios).toFixed(2)}× [${ratios[0].toFixed(2)}–${ratios[ratios.length - 1].toFixed(2)}]`);
}
for (const name of methods) {
  const a = maps[`1 thread|${name}`], b = maps[`threads|${name}`];
  if (a.some((v, i) => v !== b[i])) throw new Error(`${name}: the maps of the two builds differ`);
}
console.log('maps bit-identical between the builds');
for (const model of Object.values(models)) model.delete();
builds.threads.PThread.terminateAllThreads();
