// perturbation.cpp — the per-image perturbation test of perturbation.h (the benchmark and the
// wasm API both call it).
#include "vitlens/metrics/perturbation.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/recent.h"

namespace vitlens {

int arg_max_class(const Vec& logits) {
  int best = 0;
  for (int k = 1; k < int(logits.size()); ++k)
    if (logits[k] > logits[best]) best = k;
  return best;
}

std::vector<float> perturbation_fill(const Config& c) {
  std::vector<float> fill(size_t(c.channels));
  for (int ch = 0; ch < c.channels; ++ch)
    fill[size_t(ch)] = (float(0) / 255.0f - c.mean[size_t(ch)]) / c.std[size_t(ch)];
  return fill;
}

PerturbationKept::Steps& perturbation_kept_steps(PerturbationKept& kept, const float* map, int map_size, bool positive,
                                                 const PerturbationFill& fill) {
  auto found = std::find_if(kept.entries.begin(), kept.entries.end(), [&](const PerturbationKept::Steps& e) {
    return e.positive == positive && e.fill == fill && e.map.size() == size_t(map_size) &&
           std::memcmp(e.map.data(), map, sizeof(float) * size_t(map_size)) == 0;
  });
  return use_recent(kept.entries, found, PerturbationKept::capacity, [&] {
    PerturbationKept::Steps e;
    e.positive = positive;
    e.fill = fill;
    e.map.assign(map, map + map_size);
    e.done = 1;
    return e;
  });
}

void perturbation_curve(PerturbationCurve& out, PerturbationWork& w, const Model& m, const Image& clean,
                        const Vec& clean_logits, const float* map, int map_size, bool positive,
                        const PerturbationStepFn& on_step, PerturbationKept* kept) {
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  if (clean.c != c.channels || clean.h != c.image_h || clean.w != c.image_w)
    throw Error(ErrorCode::bad_shape, "the perturbation test needs the model's input (" + std::to_string(c.channels) +
                                          "×" + std::to_string(c.image_h) + "×" + std::to_string(c.image_w) + ")");
  if (map_size != hw)
    throw Error(ErrorCode::bad_shape, "the map has " + std::to_string(map_size) + " values; the perturbation test needs " +
                                          std::to_string(c.image_h) + "×" + std::to_string(c.image_w) +
                                          " (the model's input size)");
  PerturbationKept::Steps* k = nullptr;  // this map's and direction's steps done, if kept
  if (kept) k = &perturbation_kept_steps(*kept, map, map_size, positive, PerturbationFill{});
  const std::vector<float> fill = perturbation_fill(c);
  const std::vector<int> order = perturbation_order(map, hw, positive);
  out.positive = positive;
  out.removed[0] = 0;
  out.logits[0] = clean_logits;
  if (on_step) on_step(0, clean);
  w.x = clean;
  int removed = 0;
  for (int s = 1; s < perturbation_steps; ++s) {
    const int count = perturbation_count(hw, s);
    for (; removed < count; ++removed) {
      const size_t p = size_t(order[size_t(removed)]);
      for (int ch = 0; ch < c.channels; ++ch) w.x.data[size_t(ch) * size_t(hw) + p] = fill[size_t(ch)];
    }
    out.removed[size_t(s)] = count;
    if (k && s < k->done) {
      out.logits[size_t(s)] = k->logits[size_t(s)];
    } else {
      vit_logits(w.tr, m, w.x);
      out.logits[size_t(s)] = w.tr.logits;
      if (k) {
        k->logits[size_t(s)] = w.tr.logits;
        k->done = s + 1;
      }
    }
    if (on_step) on_step(s, w.x);
  }
}

}  // namespace vitlens
