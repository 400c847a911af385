// road.h — ROAD, RemOve And Debias (Rong, Leemann, Borisov, Kasneci & Kasneci, ICML 2022, "A
// Consistent and Efficient Evaluation Strategy for Attribution Methods"): the perturbation test
// with the removed pixels filled by noisy linear imputation instead of black, so that the
// removed region's shape does not leak the class through the silhouette.
//
// Noisy linear imputation (the paper, §4; the authors' `NoisyLinearImputer`): every removed pixel
// equals the weighted mean of its 8 neighbours, direct neighbours weighted 1/6 and diagonal ones
// 1/12; neighbours that are themselves removed are unknowns of the same system, known pixels are
// fixed. Per removed pixel i with in-image neighbours N(i):
//   (Σ_{j∈N(i)} w_ij) x_i − Σ_{j∈N(i), removed} w_ij x_j = Σ_{j∈N(i), known} w_ij v_j,
// i.e. neighbours outside the image are dropped and the remaining weights renormalised (as the
// authors' code does by lowering the diagonal by the missing weights). The matrix is symmetric
// and, whenever some pixel is known, positive definite (every 8-connected group of removed pixels
// then borders a known pixel): it is factorised once per mask (sparse LDLᵀ, the unknowns in a
// nested-dissection order of the image) and solved per channel. Then N(0, σ²) noise is added to
// every removed value.
//
// Conventions and deviations:
// - Space: the authors impute images in [0, 1] before normalisation, with σ = 0.01 (the default
//   of their `run_road` and `NoisyLinearImputer`). We impute the model's normalised input: the
//   imputation is a weighted mean, so it commutes with the per-channel affine normalisation, and
//   σ is scaled per channel to σ / std_c — the same images as imputing in [0, 1].
// - Noise: a counter-based Gaussian (splitmix64 + Box–Muller) of (seed, channel, pixel), so a
//   result does not depend on the platform, and a pixel gets the same noise at every step and in
//   both orders (the steps differ only by which pixels are removed).
// - Order: perturbation_order (ties by lower pixel index, no random jitter; the authors add
//   1e-4·N(0, 1) to the min-max map to break ties). At step s, perturbation_count(n, s) pixels are
//   removed, most relevant first (MoRF, positive) or least relevant first (LeRF): both curves are
//   over the fraction removed, as in the perturbation test and SRG (the authors' code passes
//   LeRF's threshold as the fraction kept).
// - Score: like the perturbation test, the caller scores each step's logits (accuracy, or the
//   class probability of curve_probabilities for SRG; the authors report both).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vitlens/metrics/perturbation.h"
#include "vitlens/model/config.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// σ of the noise in [0, 1] pixel units, and the seed of its generator.
struct RoadOptions {
  double noise = 0.01;
  uint64_t seed = 0;
};

// The standard normal draw number `index` of generator `seed` (Box–Muller on two splitmix64
// uniforms in (0, 1]); road_impute adds noise_c · road_noise(seed, c·H·W + pixel).
double road_noise(uint64_t seed, uint64_t index);

// Imputes in place the pixels p of x (C, H, W) with removed[p] != 0 (p = y·W + x, H·W bytes), all
// channels, by the noisy linear imputation above; noise[c] is the noise σ of channel c in x's
// units (empty: no noise). Pixels not removed are untouched. Throws Error(bad_argument) when every
// pixel is removed (nothing to impute from) and Error(bad_shape) when `noise` has neither 0 nor C
// entries.
void road_impute(Image& x, const uint8_t* removed, const std::vector<double>& noise, uint64_t seed);

// The per-channel σ in normalised units for a σ in [0, 1] pixel units: noise / std_c.
std::vector<double> road_noise_scale(const Config& c, double noise);

// One direction of the ROAD test of `clean` (the model's normalised input, whose logits are
// `clean_logits`) for `map` (H×W floats at the model's input size), in the shape of
// perturbation_curve: out.removed[s] = perturbation_count(n, s) pixels in perturbation_order,
// imputed by road_impute, and the model's logits of each copy; step 0 is the clean input.
// Throws Error(bad_shape) when the input or the map do not have the model's size. `kept` (may be
// null): what earlier calls on this input ran, used and extended (perturbation.h, PerturbationKept,
// keyed by the noise σ and seed as well); its steps reach on_step with an empty image.
void road_curve(PerturbationCurve& out, PerturbationWork& w, const Model& m, const Image& clean,
                const Vec& clean_logits, const float* map, int map_size, bool positive,
                const RoadOptions& opt = {}, const PerturbationStepFn& on_step = {},
                PerturbationKept* kept = nullptr);

// Both orders of the ROAD test, out[0] most relevant first and out[1] least relevant first, the
// same curves as two road_curve calls, computed step by step: a step's two imputations run side by
// side when the compute pool has two threads free (the pthreads build: each is a sparse solve on one
// thread), then its two forward passes. on_step is called for step 0 of both orders, then after
// each step s for order 0 and order 1, on the calling thread; kept steps as in road_curve.
void road_curves(std::array<PerturbationCurve, 2>& out, PerturbationWork& w, const Model& m, const Image& clean,
                 const Vec& clean_logits, const float* map, int map_size, const RoadOptions& opt = {},
                 const PerturbationStepFn& on_step = {}, PerturbationKept* kept = nullptr);

// The model's probability of class `cls` at each step of a curve (the score SRG integrates), per
// the config's output kind as output_probs computes it, in double: the softmax for a single-label
// model, the class's own sigmoid for a multi-label one (the shipped scenes model). Throws
// Error(bad_argument) when cls is not a class of the logits.
std::array<double, perturbation_steps> curve_probabilities(const Config& cfg, const PerturbationCurve& c, int cls);

// 1 at the steps whose arg-max class is `cls`, else 0 (one image's accuracy curve).
std::array<double, perturbation_steps> curve_hits(const PerturbationCurve& c, int cls);

}  // namespace vitlens
