// scene_eval.h — how well a multi-label model recognises the items of held-out scenes.
//
// Figures (all over scenes make_scene(test split, options, seed, 0 … n−1), fed to the model
// through scene_input, i.e. exactly the generated pixels):
//   per-class average precision (AP, non-interpolated: the mean, over the positives, of the
//   precision at each positive's rank when scenes are sorted by that class's probability) and
//   their mean (mAP); exact-set accuracy (the classes with p > 0.5 equal the true set);
//   single-item top-1 (scenes with one item: the most probable class is that item);
//   two-item top-2 (scenes with two items: the two most probable classes are those items).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vitlens/model/model.h"
#include "vitlens/data/scenes.h"

namespace vitlens {

struct SceneEvalReport {
  int n = 0, single_n = 0, two_n = 0;        // scenes, of which one-item and two-item
  std::array<double, fashion_classes> ap{};  // (10) per-class average precision
  std::array<int, fashion_classes> positives{};  // (10) scenes containing each class
  double map = 0;                            // mean of ap over classes with positives
  double exact_acc = 0, exact_single = 0, exact_two = 0;
  double single_top1 = 0, two_top2 = 0;
  std::vector<std::array<float, fashion_classes>> probs;   // (n, 10) model probabilities
  std::vector<std::array<float, fashion_classes>> target;  // (n, 10) 0/1
};

// Non-interpolated average precision of scores against 0/1 labels (ties broken by index, so
// the result is deterministic); 0 when there is no positive.
double average_precision(const std::vector<float>& scores, const std::vector<uint8_t>& labels);

// Evaluates m (a 10-class sigmoid model whose input size equals opt.size) on n test scenes.
// Scenes are split over `threads` workers; each writes its own rows, so the figures do not
// depend on the thread count. Throws Error(bad_argument) if the model does not fit.
SceneEvalReport evaluate_scenes(const Model& m, const FashionMnist& test, const SceneOptions& opt, uint64_t seed,
                                int n, int threads);

// The figures of a report from its probs and target alone (used by evaluate_scenes).
void score_report(SceneEvalReport& r);

}  // namespace vitlens
