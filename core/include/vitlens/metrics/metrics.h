// metrics.h — faithfulness metrics of attribution maps: small pure functions over one map.
//
// The definitions are those of shared METHODS.md, "Faithfulness metrics", which follow the
// evaluation code of Chefer, Gur & Wolf (CVPR 2021): the perturbation test, the segmentation
// test (pixel accuracy, IoU, AP of [1−m, m]); plus ours: the class-specific share, the pointing
// game and the int8–f32 rank correlation. A map is `n` floats (an H×W pixel map, row-major);
// a mask is `n` bytes, nonzero = the object. Every convention these functions choose where the
// reference leaves it open (ties, all-equal maps, empty masks) is stated beside the function.
//
// This file does not run a model: perturbation.h runs the perturbation test of one image and
// map (for the benchmark, eval.h, and the wasm API).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace vitlens {

// Perturbation steps: p = 0, 0.1, …, 0.9 of the pixels removed (step i removes i/10).
constexpr int perturbation_steps = 10;

// The pixels in the order a perturbation test removes them. positive: most relevant first;
// negative: least relevant first. Ties keep the lower pixel index first in both directions
// (a stable sort), so an all-equal map is removed in raster order. NaN must not occur (the
// benchmark replaces non-finite values by 0 before calling).
std::vector<int> perturbation_order(const float* map, int n, bool positive);

// Pixels removed at step i (0 … 9) of an n-pixel image: floor(n·i/10), computed in integers
// (Chefer's code: int(base_size · p)). For 64×64: 0, 409, 819, 1228, 1638, 2048, 2457, …
int perturbation_count(int n, int step);

// Area under the accuracy curve over p = 0, 0.1, …, 0.9 by the trapezoid rule, × 100
// (accuracies as fractions in [0, 1]; the largest possible value is 90).
double perturbation_auc(const std::array<double, perturbation_steps>& acc);

// (m − min)/(max − min) in double. An all-equal map has no min-max normalisation: `out` is
// all zeros and the result is false (Chefer's code divides 0 by 0 there and maps the NaNs to 0).
bool minmax_normalise(std::vector<double>& out, const float* map, int n);

// Segmentation counts of one image or, added up, of a data set. Class 0 = background,
// class 1 = foreground (the object mask).
struct SegmentationCounts {
  int64_t correct = 0, pixels = 0;     // pixels labelled correctly, pixels
  std::array<int64_t, 2> inter{}, uni{};  // (2) intersection and union of prediction and label per class

  void add(const SegmentationCounts& o);
  double pixel_accuracy() const;       // correct / pixels (0 for no pixels)
  double iou(int cls) const;           // inter / union; 0 when the union is empty (as Chefer's + ε)
  double miou() const;                 // mean of the two IoUs
};

// The segmentation of one map: its min-max map thresholded at its own mean, `> mean` is
// foreground. An all-equal map is all background (as in Chefer's code, see minmax_normalise).
SegmentationCounts segmentation_counts(const float* map, const uint8_t* mask, int n);

// Average precision with tied scores taken together (scikit-learn's average_precision_score,
// which the reference evaluation calls): thresholds at the distinct scores, highest first,
// AP = Σ_k (R_k − R_{k−1})·P_k. 0 when there is no positive. Unlike average_precision in
// scene_eval.h, the result does not depend on the order of tied scores.
double average_precision_tied(const std::vector<double>& scores, const std::vector<uint8_t>& labels);

// The segmentation AP of one image: AP of the 2n scores [1 − m, m] (m the min-max map; all
// zeros for an all-equal map, as in the reference, which gives AP = 0.5) against the one-hot
// labels [1 − mask, mask]. The labels always hold n positives, so an empty mask is defined.
double segmentation_ap(const float* map, const uint8_t* mask, int n);

// Ranks 1 … n of v, ties given the average of the ranks they span.
std::vector<double> average_ranks(const float* v, int n);

// Spearman's rank correlation: the Pearson correlation of the average ranks. If both maps are
// constant they agree: 1; if only one is, there is no correlation: 0.
double spearman(const float* a, const float* b, int n);

// The pointing game: does the map's maximum fall inside the mask? With several pixels at the
// maximum, the share of them inside the mask (the expected hit of pointing at one of them at
// random), so an all-equal map scores the mask's share of the image. 0 for an empty mask.
double pointing_game(const float* map, const uint8_t* mask, int n);

// The class-specific share: positive relevance on the explained object over positive relevance
// on both objects, Σ_own m⁺ / (Σ_own m⁺ + Σ_other m⁺) on the raw map. 0.5 (no preference) when
// neither object gets any positive relevance. A class-agnostic map explained for each of the two
// objects scores s and 1 − s: 0.5 on average.
double class_share(const float* map, const uint8_t* own, const uint8_t* other, int n);

}  // namespace vitlens
