// test_gemm.cpp — gemm_nn / gemm_nt / gemm_tn in float and double against a loop in double-double
// arithmetic: edge sizes, leading dimensions wider than the rows, alpha and beta, beta = 0 never
// reading C; plus a hidden throughput report for the ViT's shapes ("[gemm-bench]", run by name).
//
// Tolerance: the standard bound for a sum of K products in any order in precision u,
//   |Ĉ − C| ≤ γ_{K+3} · (|alpha|·Σ_k |a_ik·b_kj| + |beta·c_ij|),  γ_n = n·u/(1 − n·u),
// u = 2⁻²⁴ (float) or 2⁻⁵³ (double): K − 1 additions and one rounding per product, and the
// alpha, beta and final additions. The reference is exact to ~2⁻¹⁰⁴ of Σ|a·b| (Ogita, Rump &
// Oishi's Dot2: error-free products and sums), so for double it is not itself within the bound.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/tensor.h"

using vitlens::test::fill_random;

namespace {

enum class Layout { nn, nt, tn };

const char* layout_name(Layout l) { return l == Layout::nn ? "nn" : l == Layout::nt ? "nt" : "tn"; }

struct Case {
  Layout layout;
  int M, N, K;
  int pad_a, pad_b, pad_c;  // leading dimension = row length + pad
  float alpha, beta;
};

// A double-double number hi + lo, |lo| ≤ ulp(hi)/2, with the error-free transformations of
// Knuth (TwoSum) and Dekker (TwoProduct by splitting, which needs no FMA).
struct Exact {
  double hi = 0.0, lo = 0.0;
};

Exact two_sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

Exact two_product(double a, double b) {
  auto split = [](double x, double& h, double& l) {
    const double c = 134217729.0 * x;  // 2²⁷ + 1
    h = c - (c - x);
    l = x - h;
  };
  double ah, al, bh, bl;
  split(a, ah, al);
  split(b, bh, bl);
  const double p = a * b;
  return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

Exact operator+(Exact x, double y) {
  const Exact s = two_sum(x.hi, y);
  return two_sum(s.hi, s.lo + x.lo);
}

Exact operator+(Exact x, Exact y) {
  const Exact s = two_sum(x.hi, y.hi);
  return two_sum(s.hi, s.lo + x.lo + y.lo);
}

// x·y for a power-of-two y (the alphas and betas of the cases): exact.
Exact times_pow2(Exact x, double y) { return {x.hi * y, x.lo * y}; }

// Deterministic values in [-a, a] with a full mantissa of T (fill_random gives 24 bits; double
// gets 29 more from a second stream).
template <typename T>
void fill(std::vector<T>& v, uint64_t seed, float a) {
  std::vector<float> hi(v.size()), lo(v.size());
  fill_random(hi.data(), hi.size(), seed, a);
  fill_random(lo.data(), lo.size(), seed ^ 0xABCDEF, a);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = sizeof(T) == sizeof(float) ? T(hi[i]) : T(double(hi[i]) + std::ldexp(double(lo[i]), -24));
}

// A case's operands in memory: A (M, K) or, for tn, (K, M); B (K, N) or, for nt, (N, K); C (M, N);
// each row followed by its pad, each buffer by one guard element.
template <typename T>
struct Operands {
  int a_rows, a_cols, b_rows, b_cols, lda, ldb, ldc;
  std::vector<T> A, B, C;

  Operands(const Case& t, uint64_t seed) {
    const bool ta = t.layout == Layout::tn, tb = t.layout == Layout::nt;
    a_rows = ta ? t.K : t.M;
    a_cols = ta ? t.M : t.K;
    b_rows = tb ? t.N : t.K;
    b_cols = tb ? t.K : t.N;
    lda = a_cols + t.pad_a;
    ldb = b_cols + t.pad_b;
    ldc = t.N + t.pad_c;
    A.resize(size_t(a_rows) * size_t(lda) + 1);
    B.resize(size_t(b_rows) * size_t(ldb) + 1);
    C.resize(size_t(t.M) * size_t(ldc) + 1);
    fill(A, seed, 1.5f);
    fill(B, seed + 1, 0.75f);
    fill(C, seed + 2, 2.0f);
  }
  // Element (i, k) of op(A) and (k, j) of op(B).
  double a(const Case& t, int i, int k) const {
    return t.layout == Layout::tn ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k];
  }
  double b(const Case& t, int k, int j) const {
    return t.layout == Layout::nt ? B[size_t(j) * ldb + k] : B[size_t(k) * ldb + j];
  }
};

template <typename T>
void call_gemm(const Case& t, Operands<T>& m) {
  T* C = m.C.data();
  const T *A = m.A.data(), *B = m.B.data();
  const T alpha = T(t.alpha), beta = T(t.beta);
  switch (t.layout) {
    case Layout::nn: vitlens::gemm_nn(C, A, B, t.M, t.N, t.K, m.lda, m.ldb, m.ldc, alpha, beta); break;
    case Layout::nt: vitlens::gemm_nt(C, A, B, t.M, t.N, t.K, m.lda, m.ldb, m.ldc, alpha, beta); break;
    case Layout::tn: vitlens::gemm_tn(C, A, B, t.M, t.N, t.K, m.lda, m.ldb, m.ldc, alpha, beta); break;
  }
}

// Runs one product and returns the worst ratio |error| / bound over C (≤ 1 passes).
template <typename T>
double run_case(const Case& t, uint64_t seed) {
  Operands<T> m(t, seed);
  const size_t ldc = size_t(m.ldc);
  if (t.beta == 0.0f) {  // beta = 0 must not read C: NaN in C would show up in the result
    for (int i = 0; i < t.M; ++i)
      for (int j = 0; j < t.N; ++j) m.C[size_t(i) * ldc + j] = std::numeric_limits<T>::quiet_NaN();
  }
  const std::vector<T> C0 = m.C;
  call_gemm(t, m);

  const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits), n = double(t.K) + 3.0;
  const double gamma = n * u / (1.0 - n * u);
  const double inf = std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (int i = 0; i < t.M; ++i)
    for (int j = 0; j < t.N; ++j) {
      Exact sum;
      double abs_sum = 0.0;
      for (int k = 0; k < t.K; ++k) {
        sum = sum + two_product(m.a(t, i, k), m.b(t, k, j));
        abs_sum += std::fabs(m.a(t, i, k) * m.b(t, k, j));
      }
      const double c0 = t.beta == 0.0f ? 0.0 : double(C0[size_t(i) * ldc + j]);
      const Exact ref = times_pow2(sum, t.alpha) + times_pow2({c0, 0.0}, t.beta);
      const double bound = gamma * (std::fabs(double(t.alpha)) * abs_sum + std::fabs(double(t.beta) * c0));
      const double err = std::fabs((double(m.C[size_t(i) * ldc + j]) - ref.hi) - ref.lo);
      worst = std::max(worst, std::isfinite(err) ? err / (bound + 1e-300) : inf);
    }
  // Padding between the rows of C, and the guard element after C, are left as they were.
  for (size_t e = 0; e < m.C.size(); ++e) {
    const bool inside = e < size_t(t.M) * ldc && int(e % ldc) < t.N;
    if (!inside && !(m.C[e] == C0[e])) worst = inf;
  }
  return worst;
}

std::string describe(const Case& t) {
  return std::string(layout_name(t.layout)) + " M=" + std::to_string(t.M) + " N=" + std::to_string(t.N) +
         " K=" + std::to_string(t.K) + " pads=" + std::to_string(t.pad_a) + "," +
         std::to_string(t.pad_b) + "," + std::to_string(t.pad_c) + " alpha=" + std::to_string(t.alpha) +
         " beta=" + std::to_string(t.beta);
}

}  // namespace

TEST_CASE("gemm: the double-double reference is exact where double rounds", "[gemm]") {
  // (1 + 2⁻³⁰)² = 1 + 2⁻²⁹ + 2⁻⁶⁰ and 1e16 + 1 − 1e16: double alone loses the small terms.
  const double x = 1.0 + std::ldexp(1.0, -30);
  const Exact p = two_product(x, x);
  CHECK(p.hi == 1.0 + std::ldexp(1.0, -29));
  CHECK(p.lo == std::ldexp(1.0, -60));
  const Exact s = Exact{1e16, 0.0} + 1.0 + -1e16;
  CHECK(s.hi + s.lo == 1.0);
}

TEMPLATE_TEST_CASE("gemm: every small shape, every layout, against an exact loop", "[gemm]", float, double) {
  const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};
  uint64_t seed = 100;
  for (Layout l : {Layout::nn, Layout::nt, Layout::tn})
    for (int M : sizes)
      for (int N : sizes)
        for (int K : sizes) {
          const Case t{l, M, N, K, int(seed % 3), int(seed % 5), int(seed % 2), 1.0f, 0.0f};
          INFO(describe(t));
          REQUIRE(run_case<TestType>(t, seed++) <= 1.0);
        }
}

TEMPLATE_TEST_CASE("gemm: edge and ViT sizes, strides, alpha and beta", "[gemm]", float, double) {
  const int sizes[] = {1, 3, 7, 13, 64, 197, 769};
  const float alphas[] = {1.0f, 0.125f, -2.0f};
  const float betas[] = {0.0f, 1.0f, -0.5f};
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  auto next = [&](int n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return int(rng % uint64_t(n));
  };
  int done = 0;
  for (int trial = 0; done < 90 && trial < 1000; ++trial) {
    auto pad = [&] { return next(2) * (1 + next(9)); };  // 0, or 1…9
    const Case t{Layout(next(3)), sizes[next(7)], sizes[next(7)], sizes[next(7)], pad(), pad(), pad(),
                 alphas[next(3)], betas[next(3)]};
    if (double(t.M) * t.N * t.K > 1.2e7) continue;  // keeps the reference loop quick under node
    INFO(describe(t));
    REQUIRE(run_case<TestType>(t, uint64_t(trial) + 7) <= 1.0);
    ++done;
  }
  CHECK(done == 90);
}

TEMPLATE_TEST_CASE("gemm: the ViT's products and blocking boundaries", "[gemm]", float, double) {
  const Case cases[] = {
      {Layout::nt, 197, 576, 192, 0, 0, 0, 1.0f, 0.0f},     // qkv = ln1·Wᵀ
      {Layout::nt, 197, 197, 64, 512, 512, 0, 0.125f, 0.0f},  // S = q·kᵀ/√d_h inside qkv
      {Layout::nn, 197, 64, 197, 0, 512, 128, 1.0f, 0.0f},  // ctx_h = A·v into a column block
      {Layout::nn, 197, 192, 768, 0, 0, 0, 1.0f, 0.0f},     // dx = dy·W
      {Layout::tn, 768, 192, 197, 0, 0, 0, 1.0f, 1.0f},     // dW += dyᵀ·x
      {Layout::tn, 197, 64, 197, 0, 512, 128, 1.0f, 0.0f},  // dv_h = Aᵀ·dctx_h
      {Layout::nt, 3, 2100, 5, 1, 0, 3, 1.0f, -0.5f},       // more columns than one packed block
      {Layout::nt, 600, 9, 600, 2, 2, 2, 1.0f, 1.0f},       // several row blocks and sum slices
      {Layout::tn, 300, 1030, 9, 0, 1, 0, -2.0f, 1.0f},     // double: 3 row and 2 column blocks
  };
  uint64_t seed = 900;
  for (const Case& t : cases) {
    INFO(describe(t));
    REQUIRE(run_case<TestType>(t, seed++) <= 1.0);
  }
}

TEMPLATE_TEST_CASE("gemm: an empty sum scales C, empty C is untouched", "[gemm]", float, double) {
  using T = TestType;
  std::vector<T> C = {1, 2, 3, 4, 5, 6};  // (2, 3)
  const T dummy = 7;
  vitlens::gemm_nt(C.data(), &dummy, &dummy, 2, 3, 0, 1, 1, 3, T(1), T(0.5));
  CHECK(C == std::vector<T>{0.5, 1.0, 1.5, 2.0, 2.5, 3.0});
  vitlens::gemm_nn(C.data(), &dummy, &dummy, 2, 3, 0, 1, 3, 3, T(1), T(0));
  CHECK(C == std::vector<T>(6, T(0)));
  C.assign(6, T(9));
  vitlens::gemm_tn(C.data(), &dummy, &dummy, 0, 3, 4, 1, 3, 3, T(1), T(0));
  vitlens::gemm_tn(C.data(), &dummy, &dummy, 2, 0, 4, 2, 1, 3, T(1), T(0));
  CHECK(C == std::vector<T>(6, T(9)));
}

TEST_CASE("gemm: the |B| products equal the ones with a copy of |B|, bit for bit", "[gemm]") {
  // gemm_nn_abs / gemm_nt_abs take |B| as they pack B (wasm) or form it first (natively): the
  // LRP-α1β0 rule's S·|W| and |x|·|W|ᵀ without a copy of |W|.
  const Case cases[] = {
      {Layout::nt, 65, 288, 96, 0, 0, 0, 1.0f, 0.0f},    // |x|·|W|ᵀ, the shipped model's qkv
      {Layout::nn, 33, 96, 288, 0, 0, 96, 1.0f, 0.0f},   // S·|W| into half of [S·W | S·|W|]
      {Layout::nn, 13, 9, 7, 3, 1, 2, -2.0f, 1.0f},      // edges of every panel, strides
      {Layout::nt, 13, 9, 7, 3, 1, 2, 0.125f, -0.5f},
      {Layout::nn, 3, 2100, 5, 1, 0, 3, 1.0f, -0.5f},    // more columns than one packed block
      {Layout::nt, 600, 9, 600, 2, 2, 2, 1.0f, 1.0f},    // several row blocks and sum slices
  };
  uint64_t seed = 2700;
  for (const Case& t : cases) {
    INFO(describe(t));
    Operands<float> m(t, seed++);
    std::vector<float> B_abs(m.B.size());
    for (size_t i = 0; i < m.B.size(); ++i) B_abs[i] = std::fabs(m.B[i]);
    std::vector<float> C_abs = m.C, C_copy = m.C;
    if (t.layout == Layout::nn) {
      vitlens::gemm_nn_abs(C_abs.data(), m.A.data(), m.B.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, t.alpha, t.beta);
      vitlens::gemm_nn(C_copy.data(), m.A.data(), B_abs.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, t.alpha, t.beta);
    } else {
      vitlens::gemm_nt_abs(C_abs.data(), m.A.data(), m.B.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, t.alpha, t.beta);
      vitlens::gemm_nt(C_copy.data(), m.A.data(), B_abs.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, t.alpha, t.beta);
    }
    size_t differ = 0;
    for (size_t e = 0; e < C_abs.size(); ++e) differ += !(C_abs[e] == C_copy[e]);
    CHECK(differ == 0);
  }
}

// A float B in a double product (the LRP rules' double forward pass, x·Wᵀ with W in float) is
// widened exactly: the product equals the one over a double copy of B, bit for bit, across the
// packing's edges (ragged panels, the transposing blocks' tails), strides, KC and NC boundaries.
TEST_CASE("gemm: a float B in a double product equals a double copy of it, bit for bit", "[gemm]") {
  const Case cases[] = {
      {Layout::nt, 65, 288, 96, 0, 0, 0, 1.0f, 0.0f},    // the shipped model's qkv
      {Layout::nt, 13, 9, 7, 3, 1, 2, 0.125f, -0.5f},    // edges of every panel, strides
      {Layout::nt, 1, 1, 1, 0, 0, 0, 1.0f, 1.0f},
      {Layout::nt, 3, 2100, 5, 1, 3, 3, 1.0f, -0.5f},    // more columns than one packed block
      {Layout::nt, 70, 9, 600, 2, 1, 2, 1.0f, 1.0f},     // several sum slices
  };
  uint64_t seed = 3100;
  for (const Case& t : cases) {
    INFO(describe(t));
    Operands<double> m(t, seed++);
    std::vector<float> B_float(m.B.size());
    for (size_t i = 0; i < m.B.size(); ++i) B_float[i] = float(m.B[i]);
    const std::vector<double> B_wide(B_float.begin(), B_float.end());
    std::vector<double> C_float = m.C, C_copy = m.C;
    vitlens::gemm_nt(C_float.data(), m.A.data(), B_float.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, double(t.alpha),
                     double(t.beta));
    vitlens::gemm_nt(C_copy.data(), m.A.data(), B_wide.data(), t.M, t.N, t.K, m.lda, m.ldb, m.ldc, double(t.alpha),
                     double(t.beta));
    size_t differ = 0;
    for (size_t e = 0; e < C_float.size(); ++e) differ += !(C_float[e] == C_copy[e]);
    CHECK(differ == 0);
  }
}

// A weight packed once gives the product it would have packed itself, for each of the four
// products that read a weight (gemm.h, WeightProduct): bit for bit, across the blocking's
// boundaries (KC = 256 terms per slice, NC = 2048 columns per block, ragged panels), on one row
// and many; a packing of another buffer, of other dimensions or for another product is not used.
TEST_CASE("gemm: a pre-packed weight gives the same products, bit for bit", "[gemm]") {
  using vitlens::WeightProduct;
  struct Shape {
    int M, out, in;
  };
  const Shape shapes[] = {{1, 8, 1},       {3, 13, 7},    {65, 288, 96}, {197, 192, 768},
                          {197, 577, 300}, {5, 2100, 40}, {33, 2053, 513}};
  const WeightProduct products[] = {WeightProduct::times_wt, WeightProduct::times_abs_wt, WeightProduct::times_w,
                                    WeightProduct::times_abs_w};
  // The product as gemm.h's unpacked functions compute it: C (M, cols) with A (M, k).
  auto unpacked = [](float* C, const float* A, const float* W, int M, int out, int in, WeightProduct p, int lda,
                     int ldc, float alpha, float beta) {
    switch (p) {
      case WeightProduct::times_wt: return vitlens::gemm_nt(C, A, W, M, out, in, lda, in, ldc, alpha, beta);
      case WeightProduct::times_abs_wt: return vitlens::gemm_nt_abs(C, A, W, M, out, in, lda, in, ldc, alpha, beta);
      case WeightProduct::times_w: return vitlens::gemm_nn(C, A, W, M, in, out, lda, in, ldc, alpha, beta);
      case WeightProduct::times_abs_w: return vitlens::gemm_nn_abs(C, A, W, M, in, out, lda, in, ldc, alpha, beta);
    }
  };
  for (const Shape& t : shapes)
    for (const WeightProduct p : products) {
      const bool trans = p == WeightProduct::times_wt || p == WeightProduct::times_abs_wt;
      const int k = trans ? t.in : t.out, cols = trans ? t.out : t.in;  // A (M, k), C (M, cols)
      CAPTURE(t.M, t.out, t.in, int(p));
      const int lda = k + 3, ldc = cols + 2;
      std::vector<float> A(size_t(t.M) * lda), W(size_t(t.out) * t.in), C0(size_t(t.M) * ldc), C1, C2;
      fill_random(A.data(), A.size(), uint64_t(t.M * 7 + k), 1.5f);
      fill_random(W.data(), W.size(), uint64_t(t.out * 3 + 1), 0.5f);
      fill_random(C0.data(), C0.size(), 5, 2.0f);
      vitlens::WeightPacks packs;
      const auto packed = vitlens::pack_weight(W.data(), t.out, t.in, p);
      for (auto* slot : {&packs.times_wt, &packs.times_abs_wt, &packs.times_w, &packs.times_abs_w})
        if (packs.get(p) == nullptr) *slot = packed;  // every slot up to p's: the others hold p's panels
#if defined(__wasm_simd128__)
      REQUIRE(packed);
      CHECK(packed->panels.size() >= W.size());
      CHECK(packs.get(p) == packed.get());
#endif
      for (const float beta : {0.0f, 1.0f, -0.5f}) {
        C1 = C0;
        C2 = C0;
        unpacked(C1.data(), A.data(), W.data(), t.M, t.out, t.in, p, lda, ldc, 0.75f, beta);
        vitlens::gemm_weight(C2.data(), A.data(), W.data(), t.out, t.in, p, &packs, t.M, lda, ldc, 0.75f, beta);
        CHECK(C1 == C2);
      }
      // Another buffer (other values) with W's packing: the product reads the other buffer.
      std::vector<float> W_other = W;
      for (float& w : W_other) w = -0.5f * w + 0.125f;
      C1 = C0;
      C2 = C0;
      unpacked(C1.data(), A.data(), W_other.data(), t.M, t.out, t.in, p, lda, ldc, 0.75f, -0.5f);
      vitlens::gemm_weight(C2.data(), A.data(), W_other.data(), t.out, t.in, p, &packs, t.M, lda, ldc, 0.75f, -0.5f);
      CHECK(C1 == C2);
      // The other products, whose slots up to p's hold p's panels: each packs W itself.
      for (const WeightProduct q : products) {
        if (q == p) continue;
        const bool qt = q == WeightProduct::times_wt || q == WeightProduct::times_abs_wt;
        const int qk = qt ? t.in : t.out, qcols = qt ? t.out : t.in;
        std::vector<float> Aq(size_t(t.M) * qk), Cq1(size_t(t.M) * qcols), Cq2(Cq1.size());
        fill_random(Aq.data(), Aq.size(), 9, 1.0f);
        unpacked(Cq1.data(), Aq.data(), W.data(), t.M, t.out, t.in, q, qk, qcols, 1.0f, 0.0f);
        vitlens::gemm_weight(Cq2.data(), Aq.data(), W.data(), t.out, t.in, q, &packs, t.M, qk, qcols, 1.0f, 0.0f);
        CHECK(Cq1 == Cq2);
      }
    }
  // A packing of the same memory as another shape (8 × 32) is not read as this (16 × 16) product's:
  // its panels hold the same 256 values in another order.
  std::vector<float> A(4 * 16), W(16 * 16), C1(4 * 16), C2(4 * 16);
  fill_random(A.data(), A.size(), 11);
  fill_random(W.data(), W.size(), 12);
  vitlens::WeightPacks other;
  other.times_wt = vitlens::pack_weight(W.data(), 8, 32, WeightProduct::times_wt);
  vitlens::gemm_nt(C1.data(), A.data(), W.data(), 4, 16, 16, 16, 16, 16, 1.0f, 0.0f);
  vitlens::gemm_weight(C2.data(), A.data(), W.data(), 16, 16, WeightProduct::times_wt, &other, 4, 16, 16, 1.0f, 0.0f);
  CHECK(C1 == C2);
}

TEST_CASE("gemm: the warm-up runs the three kernels, each result exact", "[gemm]") {
  // Each product's first element is Σ over 64 terms of 0.5 · 0.25 = 8, exactly in float and double.
  CHECK(vitlens::gemm_warm_up(0) == 0.0);
  CHECK(vitlens::gemm_warm_up(1) == 24.0);
  CHECK(vitlens::gemm_warm_up() == 192.0);
}

#if defined(__wasm_simd128__)
TEST_CASE("gemm: the multiply-add ceiling runs its chains and answers a rate", "[gemm]") {
  // A rate with relaxed SIMD (vitlens_tests_relaxed.js), 0 in the plain build (vitlens_tests.js).
  const double f = vitlens::simd_madd_gflops(false, 1 << 16), d = vitlens::simd_madd_gflops(true, 1 << 16);
  CHECK(std::isfinite(f));
  CHECK(std::isfinite(d));
  CHECK(((f > 0.0 && d > 0.0) || (f == 0.0 && d == 0.0)));
  CHECK(vitlens::simd_madd_gflops(false, 0) == 0.0);  // no chain ran: no rate
}
#endif

// GFLOP/s of the forward pass's products (DeiT-tiny: n = 197, d = 192, 3 heads, MLP 768) and of
// two backward ones, next to the same product written with Eigen (what gemm replaces in wasm);
// in float and in double (the LRP methods' forward pass). Each product: the best and the median
// of 100 calls (on a shared VM the two differ by up to a third: the best is what the kernel can
// do, the median what a forward pass gets). Then, in float, every product of one DeiT-tiny forward
// pass in order, each block with weights of its own as in a model: the products' share of a
// forward pass measured in the same run.
// Run with: vitlens_tests "[gemm-bench]" (natively or under node).
TEMPLATE_TEST_CASE("gemm throughput on the ViT's shapes", "[.][gemm-bench]", float, double) {
  using T = TestType;
  const Case cases[] = {
      {Layout::nt, 196, 192, 768, 0, 0, 0, 1.0f, 0.0f},     // patch embedding
      {Layout::nt, 197, 576, 192, 0, 0, 0, 1.0f, 0.0f},     // qkv
      {Layout::nt, 197, 197, 64, 512, 512, 0, 0.125f, 0.0f},  // q·kᵀ
      {Layout::nn, 197, 64, 197, 0, 512, 128, 1.0f, 0.0f},  // A·v
      {Layout::nt, 197, 192, 192, 0, 0, 0, 1.0f, 0.0f},     // proj
      {Layout::nt, 197, 768, 192, 0, 0, 0, 1.0f, 0.0f},     // fc1
      {Layout::nt, 197, 192, 768, 0, 0, 0, 1.0f, 0.0f},     // fc2
      {Layout::nn, 197, 192, 768, 0, 0, 0, 1.0f, 0.0f},     // dx = dy·W (fc2)
      {Layout::tn, 768, 192, 197, 0, 0, 0, 1.0f, 1.0f},     // dW += dyᵀ·x (fc1)
      // the shipped model (models/): 65 tokens, width 96, 4 heads of 24, MLP 192
      {Layout::nt, 65, 288, 96, 0, 0, 0, 1.0f, 0.0f},       // qkv
      {Layout::nt, 65, 65, 24, 264, 264, 0, 0.2f, 0.0f},     // q·kᵀ
      {Layout::nn, 65, 24, 65, 0, 264, 72, 1.0f, 0.0f},      // A·v
      {Layout::nt, 65, 96, 96, 0, 0, 0, 1.0f, 0.0f},        // proj
      {Layout::nt, 65, 192, 96, 0, 0, 0, 1.0f, 0.0f},       // fc1
      {Layout::nn, 65, 96, 192, 0, 0, 0, 1.0f, 0.0f},       // dx = dy·W (fc1)
      // ViT-B/16: 197 tokens, width 768, 12 heads of 64, MLP 3072
      {Layout::nt, 197, 2304, 768, 0, 0, 0, 1.0f, 0.0f},    // qkv
      {Layout::nt, 197, 197, 64, 2240, 2240, 0, 0.125f, 0.0f},  // q·kᵀ
      {Layout::nt, 197, 768, 768, 0, 0, 0, 1.0f, 0.0f},     // proj
      {Layout::nt, 197, 3072, 768, 0, 0, 0, 1.0f, 0.0f},    // fc1
      {Layout::nt, 197, 768, 3072, 0, 0, 0, 1.0f, 0.0f},    // fc2
      {Layout::nn, 197, 768, 3072, 0, 0, 0, 1.0f, 0.0f},    // dx = dy·W (fc2)
  };
  const char* names[] = {"patch", "qkv", "q.kT", "A.v", "proj", "fc1", "fc2", "dy.W", "dyT.x",
                         "s.qkv", "s.q.kT", "s.A.v", "s.proj", "s.fc1", "s.dy.W",
                         "b.qkv", "b.q.kT", "b.proj", "b.fc1", "b.fc2", "b.dy.W"};
  using Stride = Eigen::OuterStride<>;
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix, 0, Stride>;
  // The minimum and the median over single calls (seconds): the machine may be shared, and a
  // call is shorter than a scheduler time slice.
  struct Timing {
    double best, median;
  };
  auto time_calls = [](const auto& f, int calls) {
    for (int w = 0; w < 5; ++w) f();
    std::vector<double> s(size_t(calls), 0.0);
    for (double& e : s) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      e = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::sort(s.begin(), s.end());
    return Timing{s.front(), s[s.size() / 2]};
  };
  // The core's ceiling for these products: fused multiply-adds on registers alone (gemm.h), the
  // best of seven runs of 25–50 ms; 0 in the plain wasm build and natively (none printed).
  double ceiling = 0.0;
#if defined(__wasm_simd128__)
  std::vector<double> rates;
  for (int r = 0; r < 7; ++r) rates.push_back(vitlens::simd_madd_gflops(sizeof(T) == 8, 1 << 24));
  ceiling = *std::max_element(rates.begin(), rates.end());
  std::sort(rates.begin(), rates.end());
  if (ceiling > 0)
    std::printf("%-6s multiply-adds on registers alone (the ceiling): best %.1f GFLOP/s, median %.1f\n",
                sizeof(T) == 4 ? "float" : "double", ceiling, rates[rates.size() / 2]);
#endif
  // "ceiling 86%": the best call's share of it
  auto share = [&](double gflops) {
    char text[32] = "";
    if (ceiling > 0) std::snprintf(text, sizeof(text), "  ceiling %3.0f%%", 100.0 * gflops / ceiling);
    return std::string(text);
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    const Case& t = cases[c];
    Operands<T> m(t, 1);
    Eigen::Map<Matrix, 0, Stride> c_map(m.C.data(), t.M, t.N, Stride(m.ldc));
    const ConstMap a_map(m.A.data(), m.a_rows, m.a_cols, Stride(m.lda));
    const ConstMap b_map(m.B.data(), m.b_rows, m.b_cols, Stride(m.ldb));
    const T alpha = T(t.alpha);
    auto run_eigen = [&] {
      switch (t.layout) {
        case Layout::nn: c_map.noalias() = alpha * a_map * b_map; break;
        case Layout::nt: c_map.noalias() = alpha * a_map * b_map.transpose(); break;
        case Layout::tn: c_map.noalias() += alpha * a_map.transpose() * b_map; break;
      }
    };
    const Timing ours = time_calls([&] { call_gemm(t, m); }, 100);
    const double eigen = time_calls(run_eigen, 100).best;
    const double gflop = 2.0 * t.M * t.N * t.K * 1e-9;
    std::printf(
        "%-6s %-6s %s %4d×%4d×%4d  gemm %5.1f GFLOP/s (%.3f ms), median %5.1f  Eigen %5.1f GFLOP/s  ratio %.2f%s\n",
        sizeof(T) == 4 ? "float" : "double", names[c], layout_name(t.layout), t.M, t.N, t.K, gflop / ours.best,
        ours.best * 1e3, gflop / ours.median, gflop / eigen, eigen / ours.best, share(gflop / ours.best).c_str());
  }
  SUCCEED();
  if (sizeof(T) != 4) return;
  // One DeiT-tiny forward pass's products: the patch embedding, then per block qkv, q·kᵀ and A·v
  // per head, proj, fc1, fc2 (2.45 GFLOP), the weights of each block its own. Every product's
  // values stay near a root mean square of 1 (weights uniform in ±√(3/K), q·kᵀ scaled by 1/√dh,
  // A·v by 1/√n, and each block reading the same input x0 of RMS 1, as a LayerNorm would give it):
  // chained without a LayerNorm, the activations shrank a block at a time into subnormals, which
  // cost an Intel Xeon (model 207) 16× in wasm (2.4 against 38 GFLOP/s, 2026-12-02) and AMD's
  // cores nothing.
  const int n = 197, d = 192, heads = 3, dh = d / heads, mlp = 768, blocks = 12;
  const auto amplitude = [](int k) { return float(std::sqrt(3.0 / k)); };
  std::vector<std::vector<T>> weights(blocks);  // per block: qkv (3d, d), proj (d, d), fc1 (mlp, d), fc2 (d, mlp)
  for (int b = 0; b < blocks; ++b) {
    std::vector<T>& w = weights[size_t(b)];
    w.resize(size_t(3 * d * d + d * d + 2 * mlp * d));
    std::vector<T> fc2(size_t(d * mlp));
    fill(w, uint64_t(100 + b), amplitude(d));
    fill(fc2, uint64_t(200 + b), amplitude(mlp));
    std::copy(fc2.begin(), fc2.end(), w.end() - std::ptrdiff_t(fc2.size()));
  }
  std::vector<T> patches(size_t(196 * 768)), patch_w(size_t(d * 768)), x0(size_t(n * d)), x(size_t(n * d)),
      qkv(size_t(n * 3 * d)), attn(size_t(n * n)), ctx(size_t(n * d)), y(size_t(n * d)), hidden(size_t(n * mlp));
  fill(patches, 90, 1.0f);
  fill(patch_w, 91, amplitude(768));
  fill(x0, 92, float(std::sqrt(3.0)));
  auto forward_products = [&] {
    vitlens::gemm_nt(x.data(), patches.data(), patch_w.data(), 196, d, 768, 768, 768, d, T(1), T(0));
    for (int b = 0; b < blocks; ++b) {
      const T* w_qkv = weights[size_t(b)].data();
      const T* w_proj = w_qkv + 3 * d * d;
      const T* w_fc1 = w_proj + d * d;
      const T* w_fc2 = w_fc1 + mlp * d;
      vitlens::gemm_nt(qkv.data(), x0.data(), w_qkv, n, 3 * d, d, d, d, 3 * d, T(1), T(0));
      for (int h = 0; h < heads; ++h) {
        const T* q = qkv.data() + h * dh;
        vitlens::gemm_nt(attn.data(), q, q + d, n, n, dh, 3 * d, 3 * d, n, T(0.125), T(0));
        vitlens::gemm_nn(ctx.data() + h * dh, attn.data(), q + 2 * d, n, dh, n, n, 3 * d, d, T(1.0 / std::sqrt(n)), T(0));
      }
      vitlens::gemm_nt(y.data(), ctx.data(), w_proj, n, d, d, d, d, d, T(1), T(0));
      vitlens::gemm_nt(hidden.data(), y.data(), w_fc1, n, mlp, d, d, d, mlp, T(1), T(0));
      vitlens::gemm_nt(x.data(), hidden.data(), w_fc2, n, d, mlp, mlp, mlp, d, T(1), T(0));
    }
  };
  const double pass_gflop = 2e-9 * (196.0 * d * 768 + blocks * (double(n) * 3 * d * d + 2.0 * heads * n * n * dh +
                                                                 double(n) * d * d + 2.0 * n * mlp * d));
  const Timing pass = time_calls(forward_products, 30);
  std::printf("float  one DeiT-tiny forward pass's products (%.2f GFLOP, 30 passes): best %.1f ms (%.1f GFLOP/s), "
              "median %.1f ms (%.1f GFLOP/s)%s\n",
              pass_gflop, pass.best * 1e3, pass_gflop / pass.best, pass.median * 1e3, pass_gflop / pass.median,
              share(pass_gflop / pass.best).c_str());
}
