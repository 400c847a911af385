// test_metrics_road.cpp — ROAD (road.h): the noisy linear imputation against systems solved by
// hand and against an independent solve (tests/reference/faithfulness_ref.py), the noise's
// statistics and determinism, and the ROAD curve of a small random model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "helpers.h"
#include "vitlens/metrics/faithfulness.h"
#include "vitlens/metrics/road.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

namespace {

Image plane(int h, int w, const std::vector<float>& v) {
  Image x(1, h, w);
  x.data = v;
  return x;
}

}  // namespace

TEST_CASE("ROAD imputation: one removed pixel is the weighted mean of its 8 neighbours", "[metrics][road]") {
  // 1 2 3 / 4 x 6 / 7 8 30: direct neighbours 2, 4, 6, 8 at 1/6, diagonal 1, 3, 7, 30 at 1/12;
  // the weights sum to 1: x = 20/6 + 41/12 = 81/12 = 6.75
  Image x = plane(3, 3, {1, 2, 3, 4, 0, 6, 7, 8, 30});
  const std::vector<uint8_t> removed = {0, 0, 0, 0, 1, 0, 0, 0, 0};
  road_impute(x, removed.data(), {}, 0);
  CHECK(x.data[4] == Approx(6.75).epsilon(1e-6));
  CHECK(x.data == std::vector<float>{1, 2, 3, 4, x.data[4], 6, 7, 8, 30});  // known pixels untouched
}

TEST_CASE("ROAD imputation: two adjacent removed pixels, solved by hand", "[metrics][road]") {
  // 13  2  3  4
  //  5 x1 x2  8
  //  9 10 11 12
  // x1 = (2 + 10 + 5 + x2)/6 + (13 + 3 + 9 + 11)/12 = 35/6 + x2/6
  // x2 = (3 + 11 + 8 + x1)/6 + (2 + 4 + 10 + 12)/12 = 6 + x1/6
  // ⇒ x1·(1 − 1/36) = 35/6 + 1 ⇒ x1 = 246/35, x2 = 6 + 41/35 = 251/35
  Image x = plane(3, 4, {13, 2, 3, 4, 5, 0, 0, 8, 9, 10, 11, 12});
  const std::vector<uint8_t> removed = {0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  road_impute(x, removed.data(), {}, 0);
  CHECK(x.data[5] == Approx(246.0 / 35.0).epsilon(1e-6));
  CHECK(x.data[6] == Approx(251.0 / 35.0).epsilon(1e-6));
  SECTION("a linear image is reproduced exactly") {
    // with 1 in the corner the image is 1 … 12 in raster order: linear, so x1 = 6, x2 = 7
    Image lin = plane(3, 4, {1, 2, 3, 4, 5, 0, 0, 8, 9, 10, 11, 12});
    road_impute(lin, removed.data(), {}, 0);
    CHECK(lin.data[5] == Approx(6.0).epsilon(1e-6));
    CHECK(lin.data[6] == Approx(7.0).epsilon(1e-6));
  }
}

TEST_CASE("ROAD imputation: neighbours outside the image are dropped, weights renormalised", "[metrics][road]") {
  // corner (0, 0) of 3×3: in-image neighbours (0,1) = 2 and (1,0) = 4 at 1/6, (1,1) = 9 at 1/12;
  // x = (2/6 + 4/6 + 9/12) / (5/12) = (2·2 + 2·4 + 9)/5 = 21/5
  Image x = plane(3, 3, {0, 2, 50, 4, 9, 50, 50, 50, 50});
  const std::vector<uint8_t> removed = {1, 0, 0, 0, 0, 0, 0, 0, 0};
  road_impute(x, removed.data(), {}, 0);
  CHECK(x.data[0] == Approx(4.2).epsilon(1e-6));
  // an edge pixel (0, 1): neighbours (0,0) = 1, (0,2) = 3, (1,1) = 5 at 1/6; (1,0) = 4, (1,2) = 6 at 1/12:
  // x = (9/6 + 10/12) / (4/6) = (18 + 10)/8 = 3.5
  Image e = plane(3, 3, {1, 0, 3, 4, 5, 6, 70, 80, 90});
  const std::vector<uint8_t> edge = {0, 1, 0, 0, 0, 0, 0, 0, 0};
  road_impute(e, edge.data(), {}, 0);
  CHECK(e.data[1] == Approx(3.5).epsilon(1e-6));
}

TEST_CASE("ROAD imputation matches an independent solve on a 6×7 mask", "[metrics][road]") {
  // tests/reference/faithfulness_ref.py: v = ((7y + 3x²) mod 11)/10, removed where (7y + 5x) mod 3 = 0
  // and the block rows 2–3 × cols 1–3; solved densely with numpy in float64 (and with scipy's spsolve).
  const int h = 6, w = 7;
  Image x(1, h, w);
  std::vector<uint8_t> removed(size_t(h * w), 0);
  for (int y = 0; y < h; ++y)
    for (int c = 0; c < w; ++c) {
      x.at(0, y, c) = float((7 * y + 3 * c * c) % 11) / 10.0f;
      removed[size_t(y * w + c)] = ((7 * y + 5 * c) % 3 == 0) || (y >= 2 && y < 4 && c >= 1 && c < 4);
    }
  const std::vector<std::pair<int, double>> want = {
      {0, 0.50011092934448098},  {3, 0.30782466114547097},  {6, 0.66000000000000003},  {8, 0.50055464672240502},
      {11, 0.4625972891637678},  {15, 0.50488259637125765}, {16, 0.4967796385818638},  {17, 0.45175566867963707},
      {19, 0.49158714014010668}, {21, 0.48011375499943121}, {22, 0.50532224451329355}, {23, 0.47316434182053568},
      {24, 0.39587355800380736}, {27, 0.43644839251751338}, {29, 0.52538295459760453}, {32, 0.40386303646347843},
      {37, 0.5406728693247006},  {40, 0.35048287955793483}};
  int count = 0;
  for (uint8_t r : removed) count += r;
  REQUIRE(count == int(want.size()));
  const Image before = x;
  road_impute(x, removed.data(), {}, 0);
  for (const auto& [p, v] : want) CHECK(double(x.data[size_t(p)]) == Approx(v).margin(2e-7));  // float storage
  for (int p = 0; p < h * w; ++p)
    if (!removed[size_t(p)]) CHECK(x.data[size_t(p)] == before.data[size_t(p)]);
}

TEST_CASE("ROAD imputation on an image large enough to be dissected: each removed pixel is its neighbours' mean", "[metrics][road]") {
  // road_impute numbers the unknowns by nested dissection (leaves of ≤ 64 pixels, middle lines
  // last), which the small masks above never split. Here a 41×58 image (split along both sides,
  // several levels deep) loses ~70 % of its pixels: a disc, whole lines through the middle row and
  // column (the first separators) reaching the borders, and a scatter; every removed pixel must then
  // equal the weighted mean of its in-image 8-neighbours (1/6 direct, 1/12 diagonal), i.e. the
  // system holds row by row, checked in double from the stored floats.
  const int h = 41, w = 58, hw = h * w;
  Image x(3, h, w);
  std::vector<uint8_t> removed(size_t(hw), 0);
  for (int y = 0; y < h; ++y)
    for (int c = 0; c < w; ++c) {
      for (int ch = 0; ch < 3; ++ch)
        x.at(ch, y, c) = std::sin(0.37f * float(y * (ch + 1)) + 0.11f * float(c)) + 0.3f * float(ch);
      const int dy = y - 17, dx = c - 30;
      removed[size_t(y * w + c)] = dy * dy + dx * dx < 15 * 15 || y == h / 2 || c == w / 2 || (y * 31 + c * 17) % 10 < 4;
    }
  int count = 0;
  for (uint8_t r : removed) count += r;
  REQUIRE(count > hw / 2);
  REQUIRE(count < hw);
  const Image before = x;
  road_impute(x, removed.data(), {}, 0);
  static const int dy[8] = {-1, 1, 0, 0, -1, -1, 1, 1}, dx[8] = {0, 0, -1, 1, -1, 1, -1, 1};
  static const double wt[8] = {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 12, 1.0 / 12, 1.0 / 12, 1.0 / 12};
  double worst = 0.0;
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < h; ++y)
      for (int c = 0; c < w; ++c) {
        if (!removed[size_t(y * w + c)]) {
          REQUIRE(x.at(ch, y, c) == before.at(ch, y, c));
          continue;
        }
        double sum = 0.0, weight = 0.0;
        for (int k = 0; k < 8; ++k) {
          const int qy = y + dy[k], qx = c + dx[k];
          if (qy < 0 || qy >= h || qx < 0 || qx >= w) continue;
          sum += wt[k] * double(x.at(ch, qy, qx));
          weight += wt[k];
        }
        worst = std::max(worst, std::abs(double(x.at(ch, y, c)) - sum / weight));
      }
  CHECK(worst <= 1e-6);  // values of order 1 stored in float
}

TEST_CASE("ROAD imputation: channels solved alike, nothing or everything removed", "[metrics][road]") {
  // The solve is linear with weights summing to 1: an affine copy of a channel imputes to the
  // affine copy of its imputation (why imputing normalised inputs equals imputing [0, 1] ones).
  Image x(2, 5, 6);
  std::vector<uint8_t> removed(30, 0);
  for (int p = 0; p < 30; ++p) {
    x.data[size_t(p)] = std::sin(0.9f * float(p)) + 0.1f * float(p % 7);
    x.data[size_t(30 + p)] = 2.0f * x.data[size_t(p)] + 1.0f;
    removed[size_t(p)] = (p * 7) % 5 < 2;
  }
  road_impute(x, removed.data(), {}, 0);
  for (int p = 0; p < 30; ++p) CHECK(x.data[size_t(30 + p)] == Approx(2.0f * x.data[size_t(p)] + 1.0f).margin(1e-5));
  const Image before = x;
  const std::vector<uint8_t> none(30, 0), all(30, 1);
  road_impute(x, none.data(), {0.1, 0.1}, 3);
  CHECK(x.data == before.data);
  try {
    road_impute(x, all.data(), {}, 0);
    FAIL("imputed an image with every pixel removed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_argument);
  }
  CHECK_THROWS_AS(road_impute(x, removed.data(), {0.1}, 0), Error);  // one σ for two channels
}

TEST_CASE("ROAD noise: standard normal draws, seeded and deterministic", "[metrics][road]") {
  const int n = 100000;
  double mean = 0.0, sq = 0.0;
  int within_one = 0;
  for (int i = 0; i < n; ++i) {
    const double z = road_noise(7, uint64_t(i));
    mean += z;
    sq += z * z;
    within_one += std::fabs(z) < 1.0;
  }
  mean /= n;
  const double var = sq / n - mean * mean;
  CHECK(std::fabs(mean) < 4.0 / std::sqrt(double(n)));  // 4 standard errors
  CHECK(std::fabs(var - 1.0) < 4.0 * std::sqrt(2.0 / n));
  CHECK(std::fabs(double(within_one) / n - 0.682689) < 4.0 * std::sqrt(0.2169 / n));
  CHECK(road_noise(7, 12) == road_noise(7, 12));
  CHECK(road_noise(7, 12) != road_noise(8, 12));

  // A constant image with one known pixel: every removed pixel imputes to the constant, plus noise.
  const int h = 64, w = 64, hw = h * w;
  Image x(1, h, w);
  std::fill(x.data.begin(), x.data.end(), 0.25f);
  std::vector<uint8_t> removed(static_cast<size_t>(hw), 1);
  removed[size_t(hw / 2)] = 0;
  const double sigma = 0.05;
  Image a = x, b = x, c = x;
  road_impute(a, removed.data(), {sigma}, 11);
  road_impute(b, removed.data(), {sigma}, 11);
  road_impute(c, removed.data(), {sigma}, 12);
  CHECK(a.data == b.data);
  CHECK(a.data != c.data);
  CHECK(a.data[size_t(hw / 2)] == 0.25f);
  double m = 0.0, s = 0.0;
  for (int p = 0; p < hw; ++p) {
    if (!removed[size_t(p)]) continue;
    // the draw of (seed, channel·H·W + pixel) on top of the exact mean 0.25
    CHECK(a.data[size_t(p)] == Approx(0.25 + sigma * road_noise(11, uint64_t(p))).margin(1e-6));
    m += a.data[size_t(p)] - 0.25;
    s += (a.data[size_t(p)] - 0.25) * (a.data[size_t(p)] - 0.25);
  }
  const int k = hw - 1;
  m /= k;
  const double sd = std::sqrt(s / k - m * m);
  CHECK(std::fabs(m) < 4.0 * sigma / std::sqrt(double(k)));
  CHECK(std::fabs(sd / sigma - 1.0) < 4.0 * std::sqrt(0.5 / k));
}

TEST_CASE("ROAD curve: each step is the imputed copy's forward pass", "[metrics][road]") {
  const Model m = random_model(test::small_vit_config(), 5);
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  const Image clean = random_input(c, 6);
  Trace tr;
  vit_forward(tr, m, clean);
  const Vec clean_logits = tr.logits;
  std::vector<float> map(static_cast<size_t>(hw));
  for (int p = 0; p < hw; ++p) map[size_t(p)] = std::cos(0.37f * float(p)) + 0.01f * float(p % 13);
  RoadOptions opt;
  opt.noise = 0.01;
  opt.seed = 9;
  PerturbationWork w;
  for (bool positive : {true, false}) {
    PerturbationCurve curve;
    std::vector<Image> seen;
    road_curve(curve, w, m, clean, clean_logits, map.data(), hw, positive, opt,
               [&](int, const Image& x) { seen.push_back(x); });
    REQUIRE(seen.size() == size_t(perturbation_steps));
    CHECK(curve.positive == positive);
    CHECK(curve.logits[0] == clean_logits);
    CHECK(seen[0].data == clean.data);
    const std::vector<int> order = perturbation_order(map.data(), hw, positive);
    for (int s = 1; s < perturbation_steps; ++s) {
      const int k = perturbation_count(hw, s);
      CHECK(curve.removed[size_t(s)] == k);
      // the same copy built by hand: the first k pixels of the order removed, imputed with σ/std_c
      std::vector<uint8_t> removed(static_cast<size_t>(hw), 0);
      for (int i = 0; i < k; ++i) removed[size_t(order[size_t(i)])] = 1;
      Image x = clean;
      road_impute(x, removed.data(), road_noise_scale(c, 0.01), 9);
      CHECK(x.data == seen[size_t(s)].data);
      Trace t2;
      vit_logits(t2, m, x);  // the pass the step runs (a full pass: test_map_faithfulness.cpp)
      CHECK(curve.logits[size_t(s)] == t2.logits);
      // kept pixels unchanged in every channel
      for (int p = 0; p < hw; ++p)
        if (!removed[size_t(p)])
          for (int ch = 0; ch < c.channels; ++ch)
            CHECK(x.data[size_t(ch * hw + p)] == clean.data[size_t(ch * hw + p)]);
    }
    Config single = c, multi = c;
    single.output = OutputKind::softmax;
    multi.output = OutputKind::sigmoid;
    const auto prob = curve_probabilities(single, curve, 2), sig = curve_probabilities(multi, curve, 2);
    const auto hits = curve_hits(curve, arg_max_class(clean_logits));
    CHECK(hits[0] == 1.0);
    for (int s = 0; s < perturbation_steps; ++s) {
      const Vec& z = curve.logits[size_t(s)];
      double sum = 0.0;
      for (int j = 0; j < c.classes; ++j) sum += std::exp(double(z[j]));
      CHECK(prob[size_t(s)] == Approx(std::exp(double(z[2])) / sum).epsilon(1e-9));
      CHECK(sig[size_t(s)] == Approx(1.0 / (1.0 + std::exp(-double(z[2])))).epsilon(1e-9));
      CHECK(prob[size_t(s)] == Approx(double(output_probs(single, z)[2])).epsilon(1e-5));
      CHECK(sig[size_t(s)] == Approx(double(output_probs(multi, z)[2])).epsilon(1e-5));
    }
  }
  CHECK_THROWS_AS(curve_probabilities(c, PerturbationCurve{true, {}, {Vec::Zero(4), Vec::Zero(4), Vec::Zero(4), Vec::Zero(4),
                                                                  Vec::Zero(4), Vec::Zero(4), Vec::Zero(4), Vec::Zero(4),
                                                                  Vec::Zero(4), Vec::Zero(4)}},
                                      4),
                  Error);
  PerturbationCurve curve;
  try {
    road_curve(curve, w, m, clean, clean_logits, map.data(), hw - 1, true);
    FAIL("accepted a map of the wrong size");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_shape);
  }
  opt.noise = -1.0;
  CHECK_THROWS_AS(road_curve(curve, w, m, clean, clean_logits, map.data(), hw, true, opt), Error);
}

TEST_CASE("ROAD on a flat image without noise changes nothing: SRG 0", "[metrics][road][srg]") {
  // Every removed pixel of a constant image imputes to the constant, so every step is the clean
  // input and both curves are flat: no map can gain anything.
  const Model m = random_model(test::small_vit_config(), 5);
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  Image clean(c.channels, c.image_h, c.image_w);
  for (int ch = 0; ch < c.channels; ++ch)
    std::fill(clean.data.begin() + ch * hw, clean.data.begin() + (ch + 1) * hw, 0.3f * float(ch) - 0.2f);
  Trace tr;
  vit_forward(tr, m, clean);
  std::vector<float> map(static_cast<size_t>(hw));
  for (int p = 0; p < hw; ++p) map[size_t(p)] = float((p * 37) % 101);
  RoadOptions opt;
  opt.noise = 0.0;
  PerturbationWork w;
  PerturbationCurve morf, lerf;
  road_curve(morf, w, m, clean, tr.logits, map.data(), hw, true, opt);
  road_curve(lerf, w, m, clean, tr.logits, map.data(), hw, false, opt);
  const int cls = arg_max_class(tr.logits);
  const auto pm = curve_probabilities(c, morf, cls), pl = curve_probabilities(c, lerf, cls);
  for (int s = 0; s < perturbation_steps; ++s) {
    CHECK(pm[size_t(s)] == Approx(pm[0]).epsilon(1e-5));
    CHECK(pl[size_t(s)] == Approx(pm[0]).epsilon(1e-5));
  }
  CHECK(std::fabs(symmetric_relevance_gain(pl, pm)) < 1e-3);
}
