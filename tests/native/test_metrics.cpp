// test_metrics.cpp — each faithfulness metric of metrics.h against values worked out by hand on
// tiny maps and masks, including ties, all-equal maps and empty masks.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vitlens/metrics/metrics.h"

using namespace vitlens;

TEST_CASE("perturbation order: most / least relevant first, ties by lower pixel index", "[metrics]") {
  const std::vector<float> map = {0.5f, 0.9f, 0.5f, 0.1f, 0.9f};
  CHECK(perturbation_order(map.data(), 5, true) == std::vector<int>{1, 4, 0, 2, 3});
  CHECK(perturbation_order(map.data(), 5, false) == std::vector<int>{3, 0, 2, 1, 4});
  const std::vector<float> flat = {2.0f, 2.0f, 2.0f};  // all equal: raster order both ways
  CHECK(perturbation_order(flat.data(), 3, true) == std::vector<int>{0, 1, 2});
  CHECK(perturbation_order(flat.data(), 3, false) == std::vector<int>{0, 1, 2});
}

TEST_CASE("perturbation counts are floor(n·p) in integers", "[metrics]") {
  const std::array<int, perturbation_steps> want = {0, 409, 819, 1228, 1638, 2048, 2457, 2867, 3276, 3686};
  for (int s = 0; s < perturbation_steps; ++s) CHECK(perturbation_count(64 * 64, s) == want[size_t(s)]);
  for (int s = 0; s < perturbation_steps; ++s) CHECK(perturbation_count(10, s) == s);
}

TEST_CASE("perturbation AUC: trapezoid over p = 0 … 0.9, × 100", "[metrics]") {
  std::array<double, perturbation_steps> acc{};
  CHECK(perturbation_auc(acc) == Approx(0.0));
  acc.fill(1.0);
  CHECK(perturbation_auc(acc) == Approx(90.0));
  acc.fill(0.0);
  acc[0] = 1.0;
  acc[1] = 0.5;
  CHECK(perturbation_auc(acc) == Approx(10.0));  // 0.1·(1 + 0.5)/2 + 0.1·(0.5 + 0)/2 = 0.1
  for (int i = 0; i < perturbation_steps; ++i) acc[size_t(i)] = 1.0 - 0.1 * i;
  CHECK(perturbation_auc(acc) == Approx(49.5));  // exact for a line: ∫₀^0.9 (1 − x) dx = 0.495
}

TEST_CASE("min-max normalisation, and an all-equal map", "[metrics]") {
  std::vector<double> m;
  const std::vector<float> a = {2.0f, 4.0f, 3.0f};
  CHECK(minmax_normalise(m, a.data(), 3));
  CHECK(m == std::vector<double>{0.0, 1.0, 0.5});
  const std::vector<float> flat = {3.0f, 3.0f};
  CHECK_FALSE(minmax_normalise(m, flat.data(), 2));
  CHECK(m == std::vector<double>{0.0, 0.0});
}

TEST_CASE("segmentation: threshold at the mean of the min-max map", "[metrics]") {
  SECTION("2×3 map") {
    // min-max 0, .2, .4, .6, .8, 1; mean .5 → foreground pixels 3, 4, 5
    const std::vector<float> map = {0, 1, 2, 3, 4, 5};
    const std::vector<uint8_t> mask = {0, 0, 1, 1, 1, 0};
    const SegmentationCounts c = segmentation_counts(map.data(), mask.data(), 6);
    CHECK(c.correct == 4);
    CHECK(c.pixels == 6);
    CHECK(c.inter == std::array<int64_t, 2>{2, 2});
    CHECK(c.uni == std::array<int64_t, 2>{4, 4});
    CHECK(c.pixel_accuracy() == Approx(4.0 / 6.0));
    CHECK(c.iou(0) == Approx(0.5));
    CHECK(c.iou(1) == Approx(0.5));
    CHECK(c.miou() == Approx(0.5));
  }
  SECTION("a pixel equal to the mean is background") {
    const std::vector<float> map = {0.0f, 1.0f, 0.5f};  // mean 0.5: only pixel 1 is > mean
    const std::vector<uint8_t> mask = {0, 1, 1};
    const SegmentationCounts c = segmentation_counts(map.data(), mask.data(), 3);
    CHECK(c.correct == 2);
    CHECK(c.inter == std::array<int64_t, 2>{1, 1});
    CHECK(c.uni == std::array<int64_t, 2>{2, 2});
  }
  SECTION("an all-equal map is all background") {
    const std::vector<float> map = {7, 7, 7, 7};
    const std::vector<uint8_t> mask = {1, 1, 0, 0};
    const SegmentationCounts c = segmentation_counts(map.data(), mask.data(), 4);
    CHECK(c.correct == 2);
    CHECK(c.inter == std::array<int64_t, 2>{2, 0});
    CHECK(c.uni == std::array<int64_t, 2>{4, 2});
    CHECK(c.iou(0) == Approx(0.5));
    CHECK(c.iou(1) == 0.0);
  }
  SECTION("an empty mask") {
    const std::vector<float> map = {0, 0, 0, 1};  // mean .25 → pixel 3 foreground
    const std::vector<uint8_t> empty = {0, 0, 0, 0};
    const SegmentationCounts c = segmentation_counts(map.data(), empty.data(), 4);
    CHECK(c.correct == 3);
    CHECK(c.inter == std::array<int64_t, 2>{3, 0});
    CHECK(c.uni == std::array<int64_t, 2>{4, 1});
    CHECK(c.iou(1) == 0.0);
    const std::vector<float> flat = {1, 1, 1, 1};  // nothing predicted, nothing labelled: union 0 → IoU 0
    const SegmentationCounts z = segmentation_counts(flat.data(), empty.data(), 4);
    CHECK(z.correct == 4);
    CHECK(z.uni[1] == 0);
    CHECK(z.iou(1) == 0.0);
    CHECK(z.iou(0) == 1.0);
  }
  SECTION("counts add up over a data set before the ratios") {
    const std::vector<float> a = {0, 1, 2, 3, 4, 5};
    const std::vector<uint8_t> ma = {0, 0, 1, 1, 1, 0};
    const std::vector<float> b = {7, 7, 7, 7, 7, 7};
    const std::vector<uint8_t> mb = {1, 1, 1, 1, 1, 1};
    SegmentationCounts s = segmentation_counts(a.data(), ma.data(), 6);
    s.add(segmentation_counts(b.data(), mb.data(), 6));  // 0 correct, union 6 + 6
    CHECK(s.pixel_accuracy() == Approx(4.0 / 12.0));
    CHECK(s.iou(0) == Approx(2.0 / 10.0));
    CHECK(s.iou(1) == Approx(2.0 / 10.0));
    CHECK(s.miou() == Approx(0.2));
  }
}

TEST_CASE("average precision with tied scores (scikit-learn's definition)", "[metrics]") {
  // scikit-learn's documented example: 0.8333…
  CHECK(average_precision_tied({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}) == Approx(5.0 / 6.0));
  // All tied: one threshold, precision = share of positives (index order would give 0.75).
  CHECK(average_precision_tied({0.5, 0.5, 0.5, 0.5}, {1, 0, 0, 1}) == Approx(0.5));
  // A tie across a positive and a negative: thresholds 0.9 (P 1, R ½) and 0.8 (P ⅔, R 1).
  CHECK(average_precision_tied({0.9, 0.8, 0.8, 0.1}, {1, 0, 1, 0}) == Approx(0.5 + 0.5 * 2.0 / 3.0));
  CHECK(average_precision_tied({0.3, 0.2}, {0, 0}) == 0.0);
}

TEST_CASE("segmentation AP of [1 − m, m] against the one-hot labels", "[metrics]") {
  const std::vector<uint8_t> mask2 = {0, 1};
  const std::vector<float> right = {0, 1}, wrong = {1, 0};
  CHECK(segmentation_ap(right.data(), mask2.data(), 2) == Approx(1.0));
  CHECK(segmentation_ap(wrong.data(), mask2.data(), 2) == Approx(0.5));  // thresholds 1 (P 0) and 0 (P ½, R 1)
  // m = 0, ½, 1 with the object at pixel 2: scores bg 1, ½, 0 and fg 0, ½, 1.
  // Threshold 1: two positives (P 1, R ⅔); ½: one of two (P ¾, R 1). AP = ⅔ + ⅓·¾.
  const std::vector<float> ramp = {0.0f, 0.5f, 1.0f};
  const std::vector<uint8_t> mask3 = {0, 0, 1};
  CHECK(segmentation_ap(ramp.data(), mask3.data(), 3) == Approx(2.0 / 3.0 + 0.25));
  const std::vector<float> flat = {3, 3, 3};  // both channels 0 as in the reference: AP = 3/6
  CHECK(segmentation_ap(flat.data(), mask3.data(), 3) == Approx(0.5));
  const std::vector<uint8_t> empty = {0, 0, 0};  // still n positives (the background channel)
  CHECK(segmentation_ap(ramp.data(), empty.data(), 3) == Approx(0.5));
}

TEST_CASE("Spearman: average ranks for ties, constant maps", "[metrics]") {
  const std::vector<float> v = {10, 20, 20, 5};
  CHECK(average_ranks(v.data(), 4) == std::vector<double>{2, 3.5, 3.5, 1});
  // ranks x 1, 2.5, 2.5, 4 and y 1, 3, 2, 4: cov 4.5, var 4.5 and 5 → 4.5/√22.5
  const std::vector<float> x = {1, 2, 2, 3}, y = {1, 3, 2, 4};
  CHECK(spearman(x.data(), y.data(), 4) == Approx(4.5 / std::sqrt(22.5)));
  const std::vector<float> a = {0.1f, 0.2f, 0.3f, 0.4f}, cube = {0.001f, 0.008f, 0.027f, 0.064f};
  const std::vector<float> rev = {4, 3, 2, 1}, flat = {5, 5, 5, 5};
  CHECK(spearman(a.data(), cube.data(), 4) == Approx(1.0));
  CHECK(spearman(a.data(), rev.data(), 4) == Approx(-1.0));
  CHECK(spearman(flat.data(), flat.data(), 4) == 1.0);
  CHECK(spearman(a.data(), flat.data(), 4) == 0.0);
}

TEST_CASE("pointing game: the maximum in the mask, ties shared", "[metrics]") {
  const std::vector<float> map = {0, 5, 1};
  const std::vector<uint8_t> in = {0, 1, 0}, out = {1, 0, 0}, none = {0, 0, 0};
  CHECK(pointing_game(map.data(), in.data(), 3) == 1.0);
  CHECK(pointing_game(map.data(), out.data(), 3) == 0.0);
  CHECK(pointing_game(map.data(), none.data(), 3) == 0.0);
  const std::vector<float> tied = {5, 1, 5, 5};
  const std::vector<uint8_t> m4 = {1, 1, 0, 0};
  CHECK(pointing_game(tied.data(), m4.data(), 4) == Approx(1.0 / 3.0));
  const std::vector<float> flat = {2, 2, 2, 2};
  const std::vector<uint8_t> corner = {1, 0, 0, 0};
  CHECK(pointing_game(flat.data(), corner.data(), 4) == Approx(0.25));
}

TEST_CASE("class-specific share of positive relevance", "[metrics]") {
  const std::vector<float> map = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<uint8_t> own = {1, 1, 0, 0}, other = {0, 0, 1, 0};
  CHECK(class_share(map.data(), own.data(), other.data(), 4) == Approx(0.25));  // 1 / (1 + 3)
  CHECK(class_share(map.data(), other.data(), own.data(), 4) == Approx(0.75));  // the two add to 1
  const std::vector<float> zero = {0, 0, 0, 0}, negative = {-1, -1, -1, 5};
  CHECK(class_share(zero.data(), own.data(), other.data(), 4) == 0.5);
  CHECK(class_share(negative.data(), own.data(), other.data(), 4) == 0.5);
  const std::vector<uint8_t> empty = {0, 0, 0, 0};
  CHECK(class_share(map.data(), empty.data(), other.data(), 4) == 0.0);
}
