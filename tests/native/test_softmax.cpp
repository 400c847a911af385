// test_softmax.cpp — the float softmax (its own vectorisable exp) against a double-precision
// softmax, over the range of scores a ViT produces and beyond (differences down to −200, where
// the exp clamps), and with rows of every length a SIMD loop can end on; probabilities below 2⁻⁶⁴
// read as 0, in float and in double, so that none is subnormal (attention.cpp says why).
#include <catch2/catch.hpp>

#include <cmath>

#include "helpers.h"
#include "vitlens/layers/layers.h"
#include "vitlens/tensor/tiny.h"

using namespace vitlens;

TEST_CASE("softmax_rows matches a double-precision softmax", "[layers]") {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 197}) {
    for (float spread : {1.0f, 30.0f, 200.0f}) {
      Mat s(6, n);  // (6, n)
      vitlens::test::fill_random(s.data(), size_t(s.size()), uint64_t(n) * 31 + uint64_t(spread), spread);
      s(0, 0) = 0.0f;  // a row with a tie at the maximum
      if (n > 1) s(0, n - 1) = 0.0f;
      Mat p;
      softmax_rows(p, s);
      REQUIRE(p.rows() == s.rows());
      REQUIRE(p.cols() == n);
      for (int i = 0; i < s.rows(); ++i) {
        const double mx = s.row(i).cast<double>().maxCoeff();
        double sum = 0.0;
        for (int j = 0; j < n; ++j) sum += std::exp(double(s(i, j)) - mx);
        for (int j = 0; j < n; ++j) {
          const double ref = std::exp(double(s(i, j)) - mx) / sum;
          INFO("n=" << n << " spread=" << spread << " i=" << i << " j=" << j);
          // float32 rounding of s − max (relative error |s − max|·2⁻²⁴ after the exp), the exp
          // (≤ 1 ulp), the sum and the division; entries within that of 2⁻⁶⁴ or below may read 0
          const double tol = ref * (1e-6 + std::fabs(double(s(i, j)) - mx) * 6e-8);
          const double v = double(p(i, j));
          if (v == 0.0 && ref < kTiny * (1.0 + 1e-5)) continue;
          CHECK(std::fabs(v - ref) <= tol);
          CHECK(v >= kTiny);
        }
      }
    }
  }
}

TEST_CASE("softmax_rows in double flushes probabilities below 2^-64 and keeps the rest", "[layers]") {
  MatD s(3, 6);  // (3, 6) scores whose gaps to the row maximum straddle ln 2⁶⁴ ≈ 44.36
  s << 0, -10, -44, -44.4, -50, -800,  //
      0, 0, -43, -45, -100, -1000,     //
      5, 5, 5, 5, 5, 5;
  MatD p;
  softmax_rows(p, s);
  for (int i = 0; i < s.rows(); ++i) {
    double sum = 0.0;
    for (int j = 0; j < s.cols(); ++j) sum += std::exp(s(i, j) - s.row(i).maxCoeff());
    for (int j = 0; j < s.cols(); ++j) {
      const double ref = std::exp(s(i, j) - s.row(i).maxCoeff()) / sum;
      INFO("i=" << i << " j=" << j << " ref=" << ref);
      if (ref < kTiny)
        CHECK(p(i, j) == 0.0);
      else
        CHECK(std::fabs(p(i, j) - ref) <= 1e-15 * ref);
    }
  }
  CHECK(p(0, 2) > 0.0);   // e⁻⁴⁴ / Σ ≈ 7.8e-20: kept
  CHECK(p(0, 3) == 0.0);  // e⁻⁴⁴·⁴ / Σ ≈ 5.2e-20: flushed
}
