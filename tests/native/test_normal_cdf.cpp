// test_normal_cdf.cpp — normal_cdf (core/include/vitlens/tensor/normal_cdf.h), Φ(x) for the
// double-precision exact GELU, against the long double erfc: GELU x·Φ(x) within 4e-16 of
// max(1, |x|) (measured 1.6e-16 against 50-digit arithmetic by tests/reference/fit_erfcx.py),
// Φ's lower tail to a relative 1e-14, the limits, NaN, and the double activation layer built on it.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "vitlens/layers/layers.h"
#include "vitlens/tensor/normal_cdf.h"

using namespace vitlens;

namespace {

long double phi_ref(double x) {
  const long double u = (long double)x * 0.70710678118654752440084436210484903928L;
  return x < 0.0 ? 0.5L * std::erfc(-u) : 1.0L - 0.5L * std::erfc(u);
}

}  // namespace

TEST_CASE("normal_cdf: the GELU x·Φ(x) within 4e-16 of max(1, |x|) of a long double erfc", "[layers][gelu]") {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> typical(0.0, 2.0);
  std::uniform_real_distribution<double> wide(-40.0, 40.0);
  double worst = 0.0, worst_x = 0.0, worst_tail = 0.0, worst_tail_x = 0.0;
  for (int i = 0; i < 300000; ++i) {
    const double x = i % 3 == 0 ? wide(rng) : i % 3 == 1 ? typical(rng) : -12.0 + 24.0 * (i / 3) / 100000.0;
    const long double ref = phi_ref(x);
    const double e = double(std::fabs((long double)(x * normal_cdf(x)) - (long double)x * ref)) / std::max(1.0, std::fabs(x));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
    if (x < 0.0 && x > -8.0) {  // the lower tail, relative (Φ(−8) ≈ 6e-16)
      const double r = double(std::fabs((long double)normal_cdf(x) - ref) / ref);
      if (r > worst_tail) {
        worst_tail = r;
        worst_tail_x = x;
      }
    }
  }
  INFO("GELU: " << worst << " at x = " << worst_x << "; Φ's tail: " << worst_tail << " at x = " << worst_tail_x);
  CHECK(worst <= 4e-16);
  CHECK(worst_tail <= 1e-14);
  CHECK(std::fabs(normal_cdf(0.0) - 0.5) <= 2e-16);
  CHECK(0.0 * normal_cdf(0.0) == 0.0);
  CHECK(normal_cdf(40.0) == 1.0);
  CHECK(normal_cdf(-40.0) >= 0.0);
  CHECK(normal_cdf(-40.0) < 1e-300);
  CHECK(normal_cdf(std::numeric_limits<double>::infinity()) == 1.0);
  CHECK(std::isnan(normal_cdf(std::numeric_limits<double>::quiet_NaN())));
}

TEST_CASE("the double-precision exact GELU layer is x·Φ(x) element by element", "[layers][gelu]") {
  MatD x(7, 301);  // (7, 301): row lengths a SIMD loop ends on oddly
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = -15.0 + 30.0 * double(i) / double(x.size() - 1);
  MatD y;
  activation_forward(y, x, Activation::gelu);
  REQUIRE(y.rows() == x.rows());
  REQUIRE(y.cols() == x.cols());
  double worst = 0.0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double v = x.data()[i];
    worst = std::max(worst, double(std::fabs((long double)y.data()[i] - (long double)v * phi_ref(v))) / std::max(1.0, std::fabs(v)));
  }
  CHECK(worst <= 4e-16);
}
