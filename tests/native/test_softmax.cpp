// test_softmax.cpp — the float softmax (its own vectorisable exp) against a double-precision
// softmax, over the range of scores a ViT produces and beyond (differences down to −200, where
// the exp clamps), and with rows of every length a SIMD loop can end on.
#include <catch2/catch.hpp>

#include <cmath>

#include "helpers.h"
#include "vitlens/layers/layers.h"

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
          // (≤ 1 ulp), the sum and the division; entries below e⁻⁸⁷ of the row maximum may read
          // as ~1e-38 instead of 0
          const double tol = ref * (1e-6 + std::fabs(double(s(i, j)) - mx) * 6e-8) + 1e-37;
          CHECK(std::fabs(double(p(i, j)) - ref) <= tol);
        }
      }
    }
  }
}
