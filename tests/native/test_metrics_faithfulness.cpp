// test_metrics_faithfulness.cpp — the model-free metrics of faithfulness.h (Symmetric Relevance
// Gain, Relevance Mass / Rank Accuracy, Spearman of |maps|, SSIM, the randomisation flag) against
// values worked out by hand on tiny curves, maps and masks, and SSIM against scikit-image
// (tests/reference/faithfulness_ref.py).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vitlens/metrics/faithfulness.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

using Curve = std::array<double, perturbation_steps>;

TEST_CASE("SRG: area between the LeRF and MoRF curves over p = 0 … 1", "[metrics][srg]") {
  Curve lerf, morf;
  lerf.fill(1.0);
  morf.fill(0.0);
  morf[0] = 1.0;
  morf[1] = 0.5;
  // Δ = lerf − morf = 0, .5, 1, 1, 1, 1, 1, 1, 1, 1 and Δ(1.0) = 0:
  // 0.05·[(0 + .5) + (.5 + 1) + 7·(1 + 1)] + 0.05·(1 + 0) = 0.05·16 + 0.05 = 0.85 → 85
  CHECK(symmetric_relevance_gain(lerf, morf) == Approx(85.0).epsilon(1e-12));
  // antisymmetric: swapping the orders flips the sign
  CHECK(symmetric_relevance_gain(morf, lerf) == Approx(-85.0).epsilon(1e-12));
  // equal curves (a random map in expectation; any map on a model that ignores the input): 0
  CHECK(symmetric_relevance_gain(lerf, lerf) == 0.0);
  // the largest gain: MoRF drops to 0 at the first step, LeRF stays at 1: 0.05·(1 + 8·2) + 0.05 = 0.9
  morf.fill(0.0);
  morf[0] = 1.0;
  CHECK(symmetric_relevance_gain(lerf, morf) == Approx(90.0).epsilon(1e-12));
  // SRG = AUC(LeRF) − AUC(MoRF) over 0 … 0.9, plus the last half interval 0.05·Δ₉ (× 100)
  for (int i = 0; i < perturbation_steps; ++i) {
    lerf[size_t(i)] = 0.9 - 0.03 * i;
    morf[size_t(i)] = 0.9 - 0.08 * i;
  }
  CHECK(symmetric_relevance_gain(lerf, morf) ==
        Approx(perturbation_auc(lerf) - perturbation_auc(morf) + 5.0 * (lerf[9] - morf[9])).epsilon(1e-12));
}

TEST_CASE("relevance mass accuracy: positive relevance inside the mask over all positive relevance",
          "[metrics][clevr-xai]") {
  const std::vector<float> map = {2, -1, 3, 0, 1};
  const std::vector<uint8_t> mask = {1, 1, 0, 0, 1};
  // positive parts 2, 0, 3, 0, 1: total 6, inside 2 + 0 + 1 = 3
  CHECK(relevance_mass_accuracy(map.data(), mask.data(), 5) == Approx(0.5).epsilon(1e-12));
  const std::vector<uint8_t> none(5, 0), all(5, 1);
  CHECK(relevance_mass_accuracy(map.data(), none.data(), 5) == 0.0);                     // empty mask
  CHECK(relevance_mass_accuracy(map.data(), all.data(), 5) == Approx(1.0).epsilon(1e-12));  // whole image
  const std::vector<float> negative = {-1, -2, 0, -3, -0.5f};
  CHECK(relevance_mass_accuracy(negative.data(), mask.data(), 5) == 0.0);  // no positive relevance
  const std::vector<float> flat(5, 0.7f);
  CHECK(relevance_mass_accuracy(flat.data(), mask.data(), 5) == Approx(0.6).epsilon(1e-12));  // the mask's share
  // Property: scaling the map by a positive factor does not change the share.
  const std::vector<float> scaled = {20, -10, 30, 0, 10};
  CHECK(relevance_mass_accuracy(scaled.data(), mask.data(), 5) == Approx(0.5).epsilon(1e-12));
}

TEST_CASE("relevance rank accuracy: share of the top-|mask| pixels inside the mask, ties shared",
          "[metrics][clevr-xai]") {
  SECTION("no ties") {
    // K = 2; the two largest are pixels 0 (.9, in) and 2 (.8, out): 1/2
    const std::vector<float> map = {0.9f, 0.1f, 0.8f, 0.7f};
    const std::vector<uint8_t> mask = {1, 0, 0, 1};
    CHECK(relevance_rank_accuracy(map.data(), mask.data(), 4) == Approx(0.5).epsilon(1e-12));
    const std::vector<uint8_t> perfect = {1, 0, 1, 0};
    CHECK(relevance_rank_accuracy(map.data(), perfect.data(), 4) == Approx(1.0).epsilon(1e-12));
  }
  SECTION("ties at the K-th value") {
    // K = 3; values 5, 4, 4, 4, 1, 0: the 3rd largest is 4. One pixel above (pixel 0, outside),
    // three tied at 4 (pixels 1, 2 in the mask, 3 outside) for the 2 remaining places: each tied
    // pixel counts 2/3, so (0 + 2·2/3)/3 = 4/9.
    const std::vector<float> map = {5, 4, 4, 4, 1, 0};
    const std::vector<uint8_t> mask = {0, 1, 1, 0, 0, 1};
    CHECK(relevance_rank_accuracy(map.data(), mask.data(), 6) == Approx(4.0 / 9.0).epsilon(1e-12));
    // the same map with the pixels in another order gives the same value
    const std::vector<float> shuffled = {4, 0, 5, 4, 1, 4};
    const std::vector<uint8_t> shuffled_mask = {1, 1, 0, 1, 0, 0};
    CHECK(relevance_rank_accuracy(shuffled.data(), shuffled_mask.data(), 6) == Approx(4.0 / 9.0).epsilon(1e-12));
  }
  SECTION("negative relevance ranks below zero") {
    // K = 2: the largest are 0 (pixel 1, in) and −1 (pixel 3, out); −5 (pixel 0, in) is not among them
    const std::vector<float> map = {-5, 0, -2, -1};
    const std::vector<uint8_t> mask = {1, 1, 0, 0};
    CHECK(relevance_rank_accuracy(map.data(), mask.data(), 4) == Approx(0.5).epsilon(1e-12));
  }
  SECTION("all-equal map, empty mask") {
    const std::vector<float> flat(5, 1.0f);
    const std::vector<uint8_t> mask = {0, 1, 0, 1, 0};
    CHECK(relevance_rank_accuracy(flat.data(), mask.data(), 5) == Approx(0.4).epsilon(1e-12));  // K/n
    const std::vector<uint8_t> none(5, 0);
    CHECK(relevance_rank_accuracy(flat.data(), none.data(), 5) == 0.0);
  }
}

TEST_CASE("Spearman of absolute values ignores the sign", "[metrics][randomisation]") {
  const std::vector<float> a = {-3, 1, 2}, b = {3, 1, 2};
  // signed ranks 1, 2, 3 vs 3, 1, 2: centred (−1, 0, 1)·(1, −1, 0) = −1 over √(2·2): −0.5
  CHECK(spearman(a.data(), b.data(), 3) == Approx(-0.5).epsilon(1e-12));
  CHECK(spearman_abs(a.data(), b.data(), 3) == Approx(1.0).epsilon(1e-12));
  const std::vector<float> c = {-1, -2, -3};  // |c| = 1, 2, 3 against |b| = 3, 1, 2: −0.5
  CHECK(spearman_abs(b.data(), c.data(), 3) == Approx(-0.5).epsilon(1e-12));
}

TEST_CASE("SSIM on a single 3×3 window, worked by hand", "[metrics][ssim]") {
  SsimOptions opt;
  opt.window = 3;  // one window covers the whole 3×3 image; sample covariances (× 9/8)
  const double c1 = 1e-4, c2 = 9e-4;  // (0.01·1)², (0.03·1)²
  SECTION("a zero image against one bright pixel") {
    const std::vector<double> x(9, 0.0);
    std::vector<double> y(9, 0.0);
    y[4] = 1.0;
    // μx = 0, μy = 1/9, σx² = 0, σy² = 9/8·(1/9 − 1/81) = 1/9, σxy = 0:
    // S = C1·C2 / ((1/81 + C1)(1/9 + C2))
    const double want = c1 * c2 / ((1.0 / 81 + c1) * (1.0 / 9 + c2));
    CHECK(ssim(x.data(), y.data(), 3, 3, 1.0, opt) == Approx(want).epsilon(1e-12));
  }
  SECTION("a checkerboard against its negative") {
    const std::vector<double> x = {0, 1, 0, 1, 0, 1, 0, 1, 0};
    std::vector<double> y(9);
    for (size_t i = 0; i < 9; ++i) y[i] = 1.0 - x[i];
    // μx = 4/9, μy = 5/9, σx² = σy² = 9/8·(4/9 − 16/81) = 5/18, σxy = −5/18:
    // S = (2·20/81 + C1)(−5/9 + C2) / ((41/81 + C1)(5/9 + C2))
    const double want = (40.0 / 81 + c1) * (-5.0 / 9 + c2) / ((41.0 / 81 + c1) * (5.0 / 9 + c2));
    CHECK(ssim(x.data(), y.data(), 3, 3, 1.0, opt) == Approx(want).epsilon(1e-12));
    CHECK(ssim(x.data(), x.data(), 3, 3, 1.0, opt) == Approx(1.0).epsilon(1e-15));
  }
}

TEST_CASE("SSIM matches scikit-image's structural_similarity", "[metrics][ssim]") {
  // tests/reference/faithfulness_ref.py: a = sin(0.7y) + cos(0.45x), b = a + 0.3·cos(1.3x + 0.2y²)
  auto maps = [](int h, int w, std::vector<double>& a, std::vector<double>& b) {
    a.resize(size_t(h * w));
    b.resize(size_t(h * w));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const size_t p = size_t(y * w + x);
        a[p] = std::sin(0.7 * y) + std::cos(0.45 * x);
        b[p] = a[p] + 0.3 * std::cos(1.3 * x + 0.2 * y * y);
      }
  };
  std::vector<double> a, b;
  maps(9, 10, a, b);
  CHECK(ssim(a.data(), b.data(), 9, 10, 2.5) == Approx(0.96664397818242076).epsilon(1e-12));
  maps(12, 13, a, b);
  SsimOptions wang;
  wang.gaussian = true;
  wang.sample_covariance = false;
  CHECK(ssim(a.data(), b.data(), 12, 13, 2.5, wang) == Approx(0.9532975763019893).epsilon(1e-12));
  wang.sample_covariance = true;
  CHECK(ssim(a.data(), b.data(), 12, 13, 2.5, wang) == Approx(0.95329524724419523).epsilon(1e-12));
}

TEST_CASE("SSIM of maps: min-max normalised, errors for bad windows", "[metrics][ssim]") {
  std::vector<float> a(64), b(64), flat(64, 3.0f);
  for (int i = 0; i < 64; ++i) {
    a[size_t(i)] = std::sin(0.3f * float(i));
    b[size_t(i)] = 5.0f * a[size_t(i)] - 2.0f;  // an increasing affine copy: the same min-max map
  }
  CHECK(ssim_maps(a.data(), b.data(), 8, 8) == Approx(1.0).epsilon(1e-12));
  CHECK(ssim_maps(flat.data(), flat.data(), 8, 8) == Approx(1.0).epsilon(1e-12));  // zeros against zeros
  CHECK(ssim_maps(a.data(), flat.data(), 8, 8) < 0.5);
  SsimOptions even;
  even.window = 4;
  CHECK_THROWS_AS(ssim_maps(a.data(), b.data(), 8, 8, even), Error);
  SsimOptions big;
  big.window = 9;
  CHECK_THROWS_AS(ssim_maps(a.data(), b.data(), 8, 8, big), Error);
  SsimOptions wang;
  wang.gaussian = true;  // an 11×11 window does not fit in 8×8
  try {
    ssim_maps(a.data(), b.data(), 8, 8, wang);
    FAIL("accepted an 11×11 window on an 8×8 map");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_argument);
  }
}

TEST_CASE("map similarity bundles ρ, |ρ| and SSIM", "[metrics][randomisation]") {
  std::vector<float> a(81), b(81);
  for (int i = 0; i < 81; ++i) {
    a[size_t(i)] = std::sin(0.5f * float(i)) + 0.01f * float(i);
    b[size_t(i)] = -a[size_t(i)];  // the sign-flipped map
  }
  const MapSimilarity same = map_similarity(a.data(), a.data(), 9, 9);
  CHECK(same.spearman == Approx(1.0).epsilon(1e-12));
  CHECK(same.spearman_abs == Approx(1.0).epsilon(1e-12));
  CHECK(same.ssim == Approx(1.0).epsilon(1e-12));
  const MapSimilarity flipped = map_similarity(a.data(), b.data(), 9, 9);
  CHECK(flipped.spearman == Approx(-1.0).epsilon(1e-12));
  CHECK(flipped.spearman_abs == Approx(1.0).epsilon(1e-12));
  CHECK(flipped.ssim == Approx(ssim_maps(a.data(), b.data(), 9, 9)).epsilon(1e-15));
  CHECK(flipped.ssim < 0.0);  // the min-max maps are 1 − each other: anti-correlated windows
}

TEST_CASE("randomisation survival flag: |ρ| after the last step above the threshold", "[metrics][randomisation]") {
  CHECK_FALSE(randomisation_survives({0.95, 0.8, 0.4}));
  CHECK(randomisation_survives({0.95, 0.8, 0.6}));
  CHECK(randomisation_survives({0.9, -0.7}));  // anti-correlated maps are as much "the same map"
  CHECK_FALSE(randomisation_survives({0.5}));  // strictly above
  CHECK(randomisation_survives({0.5}, 0.4));
  CHECK_FALSE(randomisation_survives({}));
}
