// test_exp.cpp — exp_nonpositive (core/include/vitlens/tensor/exp.h), the softmax's and the GELU
// derivative's e^x for x ≤ 0, against a wider-precision exp: in float within 1 ulp (of the
// result's float spacing) of the double exp, in double within 1.1 ulp of a long double exp (measured 0.98, and 1.03
// where the compiler fuses its multiply-adds: GCC with -march=native).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "vitlens/tensor/exp.h"

using namespace vitlens;

namespace {

// |a − b| in units of b's last place (b > 0, normal).
template <typename T>
double ulps(T a, long double b) {
  int e = 0;
  std::frexp(double(b), &e);  // b = m·2^e, m ∈ [0.5, 1)
  const long double ulp = std::ldexp(1.0L, e - std::numeric_limits<T>::digits);
  return double(std::fabs((long double)a - b) / ulp);
}

}  // namespace

TEST_CASE("exp_nonpositive in float: within 1 ulp on [-87, 0]", "[exp]") {
  // Every 97th float between −87 and −0 (the bit patterns of negative floats grow with |x|),
  // about 11 million values, against the double exp.
  uint32_t lo = 0x80000000u, hi = 0;
  const float end = -87.0f;
  std::memcpy(&hi, &end, sizeof hi);
  double worst = 0.0;
  float worst_x = 0.0f;
  for (uint32_t bits = lo; bits <= hi; bits += 97) {
    float x = 0.0f;
    std::memcpy(&x, &bits, sizeof x);
    const double want = std::exp(double(x));
    const double u = ulps<float>(exp_nonpositive(x), (long double)want);
    if (u > worst) {
      worst = u;
      worst_x = x;
    }
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 1.0);
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  CHECK(exp_nonpositive(-1000.0f) > 0.0f);  // clamped to e⁻⁸⁷: stays normal
  CHECK(exp_nonpositive(-1000.0f) < 2e-38f);
  CHECK(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("exp_nonpositive in double: within 1.1 ulp of a long double exp on [-708, 0]", "[exp]") {
  std::mt19937_64 rng(15);
  std::uniform_real_distribution<double> wide(-708.0, 0.0), narrow(-20.0, 0.0);
  double worst = 0.0, worst_x = 0.0;
  for (int i = 0; i < 400000; ++i) {
    // Half over the whole range, half where the softmax's arguments mostly are.
    const double x = i % 2 ? wide(rng) : narrow(rng);
    const double u = ulps<double>(exp_nonpositive(x), std::exp((long double)x));
    if (u > worst) {
      worst = u;
      worst_x = x;
    }
  }
  INFO("worst at x = " << worst_x);  // (wasm32's long double is IEEE quad, in software)
  CHECK(worst <= 1.1);
  CHECK(exp_nonpositive(0.0) == 1.0);
  CHECK(exp_nonpositive(-1e-300) == 1.0);
  CHECK(exp_nonpositive(-5000.0) > 0.0);  // clamped to e⁻⁷⁰⁸: stays normal
  CHECK(std::isnan(exp_nonpositive(std::numeric_limits<double>::quiet_NaN())));
}

// exp_shifted is exp_nonpositive(in[j] − c) bit for bit (in wasm its lanes go through the SIMD128
// form): every length up to 4 full vectors plus a tail, in place and not, with the clamp's edges,
// −∞ and NaN among the values.
TEMPLATE_TEST_CASE("exp_shifted: exp_nonpositive of each value minus c, the same bits", "[exp]", float, double) {
  using T = TestType;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-30.0, 0.0);
  const T special[] = {T(0), T(-87), T(-87.5), T(-708), T(-709), T(-1e6), -std::numeric_limits<T>::infinity(),
                       std::numeric_limits<T>::quiet_NaN(), T(-1e-30)};
  const auto same = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b)); };
  for (int n = 0; n <= 19; ++n) {
    std::vector<T> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    // Every third value a special one, which one shifting with n so that all nine occur.
    for (int j = 0; j < n; ++j) in[size_t(j)] = j % 3 == 2 ? special[size_t(n + j) % 9] : T(dist(rng));
    const T c = n % 2 ? T(0) : T(0.25);  // every value ≤ c
    exp_shifted(out.data(), in.data(), c, n);
    for (int j = 0; j < n; ++j) {
      INFO("n = " << n << ", j = " << j << ", x = " << in[size_t(j)]);
      CHECK(same(out[size_t(j)], exp_nonpositive(T(in[size_t(j)] - c))));
    }
    std::vector<T> inplace(in.begin(), in.begin() + n);
    exp_shifted(inplace.data(), inplace.data(), c, n);
    for (int j = 0; j < n; ++j) CHECK(same(inplace[size_t(j)], out[size_t(j)]));
  }
}
