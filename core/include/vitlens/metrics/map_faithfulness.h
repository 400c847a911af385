// map_faithfulness.h — every faithfulness figure of one map on one image, in one call: the
// perturbation test (black fill, perturbation.h) and ROAD (noisy linear imputation, road.h) in
// both orders, each order's probability and hit curves with their AUCs, the Symmetric Relevance
// Gain of each fill (faithfulness.h), and against the explained object's mask the relevance mass
// and rank accuracy, the pointing game, the segmentation test and, with a second object, the
// class share (metrics.h, faithfulness.h).
//
// One implementation for every front end: the benchmark (eval.cpp) takes each sample's figures
// from it, and the wasm API (`input.faithfulness`) returns it for the page's "Compare two
// methods". This file composes the metric functions; it defines none of its own. Like
// perturbation.h, it runs the model (18 forward passes per fill).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>

#include "vitlens/metrics/metrics.h"
#include "vitlens/metrics/perturbation.h"
#include "vitlens/metrics/road.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// Called after each forward pass with the share of the passes done (0 … 1]; returning false stops
// map_faithfulness with Error(cancelled).
using FaithfulnessProgressFn = std::function<bool(double fraction)>;

struct MapFaithfulnessOptions {
  int cls = 0;              // the explained class: the probability and hit curves, SRG
  bool black = true;        // the perturbation test, black fill, both orders (18 forward passes)
  bool road = false;        // ROAD, both orders (18 forward passes and sparse solves)
  RoadOptions road_options; // ROAD's noise σ and seed
  const uint8_t* mask = nullptr;   // (H·W) the explained object, 1 = object; null: no mask figures
  const uint8_t* other = nullptr;  // (H·W) a second object of another class (class_share); may be null
  FaithfulnessProgressFn progress;
  PerturbationKept* kept = nullptr;  // the input's kept perturbation and ROAD steps (perturbation.h); may be null
};

// One order of one fill: the model's logits per step and what they score for the explained class.
struct FaithfulnessCurve {
  PerturbationCurve curve;                        // removed[s] and logits[s], s = 0 … 9
  std::array<double, perturbation_steps> prob{};  // curve_probabilities(cls): softmax, or sigmoid for multi-label
  std::array<double, perturbation_steps> hit{};   // curve_hits(cls): 1 where the arg-max class is cls
  double auc_prob = 0.0, auc_hit = 0.0;           // perturbation_auc of each (trapezoid, × 100)
};

struct MapFaithfulness {
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();
  int cls = 0;
  // [d]: 0 most relevant first (positive, MoRF), 1 least relevant first (negative, LeRF).
  bool black = false;
  std::array<FaithfulnessCurve, 2> black_curves;
  double srg_black = none;  // symmetric_relevance_gain(black LeRF prob, black MoRF prob)
  bool road = false;
  std::array<FaithfulnessCurve, 2> road_curves;
  double srg_road = none;
  // With a mask (masked): the map against the object.
  bool masked = false;
  double mass_accuracy = none, rank_accuracy = none;  // relevance_mass_accuracy, relevance_rank_accuracy (fractions)
  double pointing = none;                              // pointing_game
  SegmentationCounts seg;                              // segmentation_counts (pixel accuracy, IoU per class)
  double seg_ap = none;                                // segmentation_ap
  // With a second object (two): class_share of the map on the object against the other one.
  bool two = false;
  double share = none;
};

// The figures `opt` asks for, of `map` (H×W floats at the model's input size, row-major, finite:
// see zero_nonfinite)
// on `clean` (the model's normalised C×H×W input, whose logits are `clean_logits`), into `out`
// (its fields not asked for are reset to none / false). Order of work: black positive, black
// negative, ROAD's two orders step by step (road_curves), then the mask figures. Throws
// Error(bad_shape) when the input or the map do not have the model's size, Error(bad_argument)
// when cls is not a class of the model or `other` is given without `mask`, Error(cancelled) when
// progress returns false.
void map_faithfulness(MapFaithfulness& out, PerturbationWork& w, const Model& m, const Image& clean,
                      const Vec& clean_logits, const float* map, int map_size, const MapFaithfulnessOptions& opt);

// Sets the NaN and ±Inf values of a map (n floats) to 0, the benchmark's convention for maps that
// perturbation_order cannot rank; returns whether there were any.
bool zero_nonfinite(float* map, int n);

// The arg-max class after each step but the first (the benchmark's record of a curve, eval.h).
std::array<int, perturbation_steps - 1> curve_tops(const PerturbationCurve& c);

}  // namespace vitlens
