// map_faithfulness.cpp — every faithfulness figure of one map on one image (map_faithfulness.h):
// the curves of perturbation.cpp and road.cpp scored by road.h's curve functions, and the mask
// figures of metrics.cpp and faithfulness.cpp.
#include "vitlens/metrics/map_faithfulness.h"

#include <cmath>
#include <string>
#include <utility>

#include "vitlens/metrics/faithfulness.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

// Scores a curve's steps for class `cls`.
void score_curve(FaithfulnessCurve& fc, const Config& c, int cls) {
  fc.prob = curve_probabilities(c, fc.curve, cls);
  fc.hit = curve_hits(fc.curve, cls);
  fc.auc_prob = perturbation_auc(fc.prob);
  fc.auc_hit = perturbation_auc(fc.hit);
}

}  // namespace

bool zero_nonfinite(float* map, int n) {
  bool bad = false;
  for (int i = 0; i < n; ++i)
    if (!std::isfinite(map[i])) {
      map[i] = 0.0f;
      bad = true;
    }
  return bad;
}

std::array<int, perturbation_steps - 1> curve_tops(const PerturbationCurve& c) {
  std::array<int, perturbation_steps - 1> top{};
  for (size_t s = 1; s < size_t(perturbation_steps); ++s) top[s - 1] = arg_max_class(c.logits[s]);
  return top;
}

void map_faithfulness(MapFaithfulness& out, PerturbationWork& w, const Model& m, const Image& clean,
                      const Vec& clean_logits, const float* map, int map_size, const MapFaithfulnessOptions& opt) {
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  if (opt.cls < 0 || opt.cls >= c.classes)
    throw Error(ErrorCode::bad_argument, "class " + std::to_string(opt.cls) + " is not one of the model's " +
                                             std::to_string(c.classes) + " classes");
  if (opt.other && !opt.mask)
    throw Error(ErrorCode::bad_argument, "the class share needs the explained object's mask as well as the other's");
  if (map_size != hw)
    throw Error(ErrorCode::bad_shape, "the map has " + std::to_string(map_size) + " values; the faithfulness figures need " +
                                          std::to_string(c.image_h) + "×" + std::to_string(c.image_w) +
                                          " (the model's input size)");
  out = MapFaithfulness();
  out.cls = opt.cls;

  // Progress counts forward passes: 9 per order and fill (step 0 is the clean input's logits).
  const int passes = (perturbation_steps - 1) * 2 * (int(opt.black) + int(opt.road));
  int done = 0;
  PerturbationStepFn on_step;
  if (opt.progress)
    on_step = [&](int step, const Image&) {
      if (step == 0) return;
      if (!opt.progress(double(++done) / double(passes)))
        throw Error(ErrorCode::cancelled, "the faithfulness figures were cancelled");
    };

  if (opt.black) {
    out.black = true;
    for (int d = 0; d < 2; ++d) {
      FaithfulnessCurve& fc = out.black_curves[size_t(d)];
      perturbation_curve(fc.curve, w, m, clean, clean_logits, map, map_size, d == 0, on_step, opt.kept);
      score_curve(fc, c, opt.cls);
    }
    // Blücher et al. 2024: SRG = AUC(LeRF) − AUC(MoRF) of the class probability.
    out.srg_black = symmetric_relevance_gain(out.black_curves[1].prob, out.black_curves[0].prob);
  }
  if (opt.road) {
    out.road = true;
    std::array<PerturbationCurve, 2> curves;
    road_curves(curves, w, m, clean, clean_logits, map, map_size, opt.road_options, on_step, opt.kept);
    for (size_t d = 0; d < 2; ++d) {
      FaithfulnessCurve& fc = out.road_curves[d];
      fc.curve = std::move(curves[d]);
      score_curve(fc, c, opt.cls);
    }
    out.srg_road = symmetric_relevance_gain(out.road_curves[1].prob, out.road_curves[0].prob);
  }
  if (opt.mask) {
    out.masked = true;
    out.mass_accuracy = relevance_mass_accuracy(map, opt.mask, hw);
    out.rank_accuracy = relevance_rank_accuracy(map, opt.mask, hw);
    out.pointing = pointing_game(map, opt.mask, hw);
    out.seg = segmentation_counts(map, opt.mask, hw);
    out.seg_ap = segmentation_ap(map, opt.mask, hw);
  }
  if (opt.other) {
    out.two = true;
    out.share = class_share(map, opt.mask, opt.other, hw);
  }
}

}  // namespace vitlens
