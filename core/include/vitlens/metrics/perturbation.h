// perturbation.h — the perturbation test of one image and one map (shared METHODS.md,
// "Faithfulness metrics"; Chefer, Gur & Wolf, CVPR 2021): the pixels of the map, in
// perturbation_order, are set to 0 in [0, 1] space, perturbation_count(n, s) of them at step
// s = 0 … 9, and the model classifies each copy again.
//
// One implementation for every front end: the benchmark (eval.h) records the arg-max class of
// each step, the wasm API (`input.perturbation`) returns the curve the page draws. Unlike
// metrics.h, this file runs the model.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "vitlens/metrics/metrics.h"
#include "vitlens/model/model.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// The arg-max class of `logits`; ties go to the lower class index.
int arg_max_class(const Vec& logits);

// The normalised value of a removed pixel per channel: (0 − mean_c) / std_c, i.e. black in
// [0, 1] space, computed in float as the scenes' inputs are (scene_input).
std::vector<float> perturbation_fill(const Config& c);

// One direction of the test. logits[s] are the model's logits with removed[s] pixels removed;
// step 0 (nothing removed) is the clean input's logits, passed in, not recomputed.
struct PerturbationCurve {
  bool positive = true;                          // most relevant first (else least relevant first)
  std::array<int, perturbation_steps> removed{};  // perturbation_count(n, s)
  std::array<Vec, perturbation_steps> logits;     // (classes) per step
};

// Reusable buffers of perturbation_curve (one per thread).
struct PerturbationWork {
  Trace tr;  // the forward pass of a perturbed copy
  Image x;   // (C, H, W) the perturbed copy
};

// Called with each step's perturbed input (step 0: the clean input), e.g. to show it.
using PerturbationStepFn = std::function<void(int step, const Image& x)>;

// Which copies a kept entry's steps classified: the black fill of perturbation_curve, or ROAD's
// noisy linear imputation (road.h) with its noise σ and seed.
struct PerturbationFill {
  bool road = false;
  double noise = 0.0;  // ROAD's σ in [0, 1] pixel units
  uint64_t seed = 0;   // ROAD's noise seed
  bool operator==(const PerturbationFill& o) const { return road == o.road && noise == o.noise && seed == o.seed; }
};

// What perturbation_curve and road_curve have run for one input, kept by their caller beside that
// input (the wasm API's Input): the logits of the steps done for its last few maps, directions and
// fills. A call for the same input, map (bit for bit), direction and fill goes on from the first
// step not done, so that a test stopped by `on_step` (the page withdraws it for a view's request)
// loses at most the forward pass in progress, and a map tested again (the comparison view's
// figures of the map the live curve showed) runs none. The steps done are not run again but still
// reach `on_step`: the black fill's with their perturbed inputs formed again, ROAD's with an empty
// image (its imputation costs as much as the forward pass). The least recently used of `capacity`
// entries is replaced; each holds H·W floats and 10 logits, and `capacity` is two maps' both
// directions of both fills (the comparison view's figures of two maps).
struct PerturbationKept {
  struct Steps {
    bool positive = true;
    PerturbationFill fill;
    std::vector<float> map;  // (H·W)
    int done = 0;            // steps [0, done) have their logits (step 0: the clean input's)
    std::array<Vec, perturbation_steps> logits;
  };
  static constexpr size_t capacity = 8;
  std::vector<Steps> entries;  // the most recently used last
};

// The entry of `kept` for this map (map_size floats), direction and fill, now the most recently
// used; a new one (step 0 done) when there is none, in place of the least recently used at capacity.
PerturbationKept::Steps& perturbation_kept_steps(PerturbationKept& kept, const float* map, int map_size, bool positive,
                                                 const PerturbationFill& fill);

// Runs the test on `clean` (the model's normalised C×H×W input, whose logits are `clean_logits`)
// for `map`, H×W floats at the model's input size (row-major; NaN must not occur: see
// perturbation_order). Removing a pixel sets it in all channels. Throws Error(bad_shape) when the
// input or the map do not have the model's size. `kept` (may be null): what earlier calls on this
// input ran, used and extended (see PerturbationKept).
void perturbation_curve(PerturbationCurve& out, PerturbationWork& w, const Model& m, const Image& clean,
                        const Vec& clean_logits, const float* map, int map_size, bool positive,
                        const PerturbationStepFn& on_step = {}, PerturbationKept* kept = nullptr);

}  // namespace vitlens
