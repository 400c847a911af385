// objects.js — post-js of every module: JS objects the bindings make in one call instead of one
// Embind call per property (wasm/bindings.cpp calls them through Module).
//
// The conservation report's layers {layer, relevanceOut, relevanceIn} from the layer names joined
// by '\n' and their sums (Float64Array, two per layer: out, in). Made property by property through
// Embind, the shipped model's 87 layers took ~0.3 ms of each LRP method's call in the threaded
// build (lrp repeated: 0.47 → 0.16 ms; every string decoded there checks the shared heap for
// growth; docs/performance.md, 2026-11-29 22:05).
Module['layerRelevanceObjects'] = (names, sums) => {
  const layers = sums.length ? names.split('\n') : [];
  const out = new Array(layers.length);
  for (let i = 0; i < layers.length; i++) out[i] = { layer: layers[i], relevanceOut: sums[2 * i], relevanceIn: sums[2 * i + 1] };
  return out;
};
