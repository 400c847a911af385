// test_sse_conversions.cpp — the SSE2 float → int32 conversions Eigen's exp is built on give x86's
// results: natively the CPU's own instructions, in wasm the vectorised versions of
// core/wasm_shims/emmintrin.h (the same expectations hold for both). Then Eigen's vectorised exp,
// which calls them, against the C library's in float and double over its whole range.
#include <catch2/catch.hpp>

#if defined(__SSE2__)

#include <emmintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "vitlens/tensor/tensor.h"
#include <unsupported/Eigen/SpecialFunctions>

namespace {

constexpr int32_t kInvalid = std::numeric_limits<int32_t>::min();  // x86's "integer indefinite"

struct Case {
  double in;
  int32_t nearest;  // round half to even
  int32_t truncated;
};

// Halves both ways, the ends of int32's range, just beyond them, and the non-finite values.
const Case kCases[] = {
    {0.0, 0, 0},
    {-0.0, 0, 0},
    {0.5, 0, 0},
    {1.5, 2, 1},
    {2.5, 2, 2},
    {-0.5, 0, 0},
    {-1.5, -2, -1},
    {-2.5, -2, -2},
    {-2.7, -3, -2},
    {123456.75, 123457, 123456},
    {-2147483648.0, kInvalid, kInvalid},
    {4294967296.0, kInvalid, kInvalid},
    {-4294967296.0, kInvalid, kInvalid},
    {1e30, kInvalid, kInvalid},
    {std::numeric_limits<double>::infinity(), kInvalid, kInvalid},
    {-std::numeric_limits<double>::infinity(), kInvalid, kInvalid},
    {std::numeric_limits<double>::quiet_NaN(), kInvalid, kInvalid},
};

}  // namespace

TEST_CASE("SSE float to int32 conversions give x86's results", "[tensor]") {
  for (const Case& c : kCases) {
    INFO("input " << c.in);
    const float f = float(c.in);
    alignas(16) int32_t out[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvtps_epi32(_mm_setr_ps(f, -1.5f, f, 7.5f)));
    CHECK(out[0] == c.nearest);
    CHECK(out[1] == -2);
    CHECK(out[2] == c.nearest);
    CHECK(out[3] == 8);
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvttps_epi32(_mm_setr_ps(7.9f, f, -7.9f, f)));
    CHECK(out[0] == 7);
    CHECK(out[1] == c.truncated);
    CHECK(out[2] == -7);
    CHECK(out[3] == c.truncated);
    // The double forms convert two lanes and zero the upper two.
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvtpd_epi32(_mm_setr_pd(c.in, 3.5)));
    CHECK(out[0] == c.nearest);
    CHECK(out[1] == 4);
    CHECK(out[2] == 0);
    CHECK(out[3] == 0);
    _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvttpd_epi32(_mm_setr_pd(-3.5, c.in)));
    CHECK(out[0] == -3);
    CHECK(out[1] == c.truncated);
    CHECK(out[2] == 0);
    CHECK(out[3] == 0);
  }
  // Only doubles can hold the ends of the range exactly: 2³¹ − 1 and values that round to it fit,
  // 2³¹ − 0.5 rounds (to even) to 2³¹, which does not.
  alignas(16) int32_t out[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvtpd_epi32(_mm_setr_pd(2147483647.0, 2147483647.5)));
  CHECK(out[0] == 2147483647);
  CHECK(out[1] == kInvalid);
  _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm_cvttpd_epi32(_mm_setr_pd(2147483647.9, -2147483648.9)));
  CHECK(out[0] == 2147483647);
  CHECK(out[1] == kInvalid);
}

TEMPLATE_TEST_CASE("Eigen's vectorised exp agrees with the C library's", "[tensor]", float, double) {
  using T = TestType;
  using Lim = std::numeric_limits<T>;
  // Arguments across the range where e^x is a normal number (Eigen's fast paths over- and
  // underflow early beyond it: |x| ≤ 87 in float, 708 in double), 4 099 of them (not a multiple
  // of the packet size, so the scalar tail runs too), and the non-finite values.
  const int n = 4099;
  const T end = sizeof(T) == 4 ? T(87) : T(708);
  Eigen::Array<T, Eigen::Dynamic, 1> x(n + 3);
  for (int i = 0; i < n; ++i) x(i) = -end + 2 * end * T(i) / T(n - 1);
  x.tail(3) << Lim::infinity(), -Lim::infinity(), Lim::quiet_NaN();
  const Eigen::Array<T, Eigen::Dynamic, 1> e = x.exp();
  for (int i = 0; i < n + 3; ++i) {
    INFO("x = " << x(i));
    const T ref = std::exp(x(i));
    if (std::isnan(ref)) {
      CHECK(std::isnan(e(i)));
    } else if (std::isinf(ref)) {
      CHECK(e(i) >= T(0.5) * Lim::max());  // x = ∞: ∞ or a value near the largest
    } else if (ref < Lim::min()) {
      CHECK((e(i) >= 0 && e(i) <= Lim::min()));  // x = −∞: 0 or next to it
    } else {
      CHECK(std::abs(e(i) - ref) <= 4 * Lim::epsilon() * ref);
    }
  }
}

#endif  // __SSE2__
