// faithfulness.h — the metrics of issue 16 that need no model: small pure functions over curves,
// maps and masks. road.h runs the model for ROAD; model/randomise.h builds the randomised models.
//
// Definitions (each cited beside its function; conventions where a paper leaves one open are
// stated there too):
//
// - Symmetric Relevance Gain (Blücher, Vielhaben & Strodthoff, TMLR 2024, "Decoupling Pixel
//   Flipping and Occlusion Strategy for Consistent XAI Benchmarks"): the area between the
//   least-relevant-first (LIF) and the most-relevant-first (MIF) pixel-flipping curves,
//   SRG = AUC(LIF) − AUC(MIF). The curves of the paper's code are the model's predicted
//   probability of the explained class (`predict_proba`; its default target is the label) as a
//   function of the fraction of features removed, integrated over the fraction 0 … 1
//   (curve_probabilities in road.h: softmax, or the class's sigmoid for multi-label models). Higher is better; a random
//   map scores ≈ 0, for any removal (black fill or ROAD).
// - Relevance Mass Accuracy and Relevance Rank Accuracy (Arras, Osman & Samek, Information Fusion
//   2022, "CLEVR-XAI: A benchmark dataset for the ground truth evaluation of neural network
//   explanations"): the share of the (positive) relevance that falls inside the ground-truth mask,
//   and with K = |mask|, the share of the K most relevant pixels that lie inside it.
// - Model randomisation (Adebayo et al., NeurIPS 2018, "Sanity Checks for Saliency Maps"): the
//   rank correlation, with and without absolute values, and the SSIM (Wang, Bovik, Sheikh &
//   Simoncelli, IEEE TIP 2004) between a method's map on the trained model and on the cascading
//   randomised models; a method whose maps stay correlated after every layer is randomised does
//   not explain the model.
//
// A map is `n` floats (an H×W pixel map, row-major); a mask is `n` bytes, nonzero = the object.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vitlens/metrics/metrics.h"

namespace vitlens {

// The Symmetric Relevance Gain of one image (or of curves averaged over images), × 100 like
// perturbation_auc. `lerf` and `morf` are the two curves over the perturbation steps p = 0, 0.1,
// …, 0.9 (the same steps and ordering as the perturbation test; any per-step score: the paper
// tracks the class probability, accuracy curves work the same way). The paper integrates over
// p ∈ [0, 1]; at p = 1 both orders have removed every pixel, so the two inputs are the same and
// the curves meet: the last interval adds the trapezoid 0.1·(lerf₉ − morf₉)/2, with no extra
// forward pass. So
//   SRG = 100 · [ Σ_{i=0}^{8} 0.1·(Δᵢ + Δᵢ₊₁)/2 + 0.1·Δ₉/2 ],  Δᵢ = lerfᵢ − morfᵢ.
// Deviation: the paper's steps are superpixels (linspace over their count), ours are pixels at
// tenths; the noise of ROAD makes the two p = 1 inputs differ by noise only (taken as equal).
double symmetric_relevance_gain(const std::array<double, perturbation_steps>& lerf,
                                const std::array<double, perturbation_steps>& morf);

// Relevance Mass Accuracy (Arras et al. 2022, eq. for "mass accuracy"): R_within / R_total, with
// R the positive part of the map (the paper evaluates positive relevance: negative values are
// set to 0), R_within = Σ_{mask} max(0, m), R_total = Σ max(0, m). Conventions: 0 when the map
// has no positive relevance (nothing points at the object) or the mask is empty. An all-equal
// positive map scores the mask's share of the image.
double relevance_mass_accuracy(const float* map, const uint8_t* mask, int n);

// Relevance Rank Accuracy (Arras et al. 2022): with K = |mask|, the fraction of the K pixels of
// highest relevance (raw values, so negative relevance ranks below zero) that lie in the mask.
// Ties at the K-th value are shared: if a pixels are above the K-th value t and b pixels equal t,
// each tied pixel counts (K − a)/b, the expected hit of breaking the tie at random (as
// pointing_game does), so the result does not depend on the pixel order and an all-equal map
// scores K/n. 0 for an empty mask.
double relevance_rank_accuracy(const float* map, const uint8_t* mask, int n);

// Spearman's rank correlation of |a| and |b| (Adebayo et al. report it alongside the signed one,
// since a sign flip of the whole map should not count as a change for methods whose sign is
// arbitrary). Conventions as spearman.
double spearman_abs(const float* a, const float* b, int n);

// SSIM (Wang et al. 2004): per window, S = (2μxμy + C1)(2σxy + C2) / ((μx² + μy² + C1)(σx² + σy² + C2)),
// C1 = (k1·L)², C2 = (k2·L)², L = data_range; the mean of S over the windows that lie wholly
// inside the image (scikit-image's structural_similarity crops the (win − 1)/2 border the same
// way). The defaults are scikit-image's: a 7×7 uniform window, sample covariances (× N/(N − 1),
// N = win²), k1 = 0.01, k2 = 0.03. gaussian = true is Wang et al.'s window: Gaussian weights with
// σ = 1.5 truncated at 3.5σ (11×11), the covariances without the N/(N − 1) factor unless
// sample_covariance is also set (scikit-image's gaussian_weights=True with
// use_sample_covariance=False).
struct SsimOptions {
  int window = 7;                  // odd side of the uniform window (ignored when gaussian)
  bool gaussian = false;
  double sigma = 1.5;              // Gaussian σ; the window side is 2·floor(3.5σ + 0.5) + 1
  bool sample_covariance = true;   // × N/(N − 1); the default for the uniform window
  double k1 = 0.01, k2 = 0.03;
};

// The SSIM of two h×w images x and y (row-major, double). Throws Error(bad_argument) when the
// window is even, < 3, or larger than the image (or σ is not positive).
double ssim(const double* x, const double* y, int h, int w, double data_range, const SsimOptions& opt = {});

// The SSIM of two maps as Adebayo et al. compare them: both min-max normalised to [0, 1]
// (minmax_normalise: an all-equal map becomes all zeros), data_range = 1.
double ssim_maps(const float* a, const float* b, int h, int w, const SsimOptions& opt = {});

// What the model randomisation test records per image, method and step: the map on the
// randomised model (`randomised`) against the map on the trained one (`trained`), both h×w.
struct MapSimilarity {
  double spearman = 0.0;      // Spearman's ρ of the signed maps
  double spearman_abs = 0.0;  // ρ of |maps|
  double ssim = 0.0;          // ssim_maps (min-max normalised, scikit-image's defaults unless opt says)
};
MapSimilarity map_similarity(const float* trained, const float* randomised, int h, int w, const SsimOptions& opt = {});

// The survival flag of the model randomisation test: true when |ρ| after the last step (every
// randomised layer, `rho.back()`, e.g. the mean Spearman over images) is above `threshold`.
// 0.5 by default: a correlation beyond "moderate" with the trained model's map although no
// trained weight is left means the map is explained by the input, not by the model (Adebayo et
// al. find ρ near 1 for such methods, e.g. Guided Backprop, and near 0 for the gradient); two
// unrelated 64×64 maps correlate by chance with |ρ| ≈ 1/√4095 ≈ 0.016. False for an empty list.
bool randomisation_survives(const std::vector<double>& rho, double threshold = 0.5);

}  // namespace vitlens
