// linear.cpp — the fully connected layer: forward and backward, and for the LRP methods its
// double-precision forward and relevance rules (αβ of Chefer 2021, ε of AttnLRP).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <type_traits>

#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/tiny.h"
#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// y = x·Wᵀ + b in T from the float weights (in double, widened exactly as the product packs them).
template <typename T>
void linear_forward_t(MatT<T>& y, const MatT<T>& x, const Mat& W, const Vec& b, const WeightPacks* packs) {
  const int n = int(x.rows()), in = int(W.cols()), out = int(W.rows());
  assert(x.cols() == in && b.size() == out);
  y.resize(n, out);
  // Rows in ranges over the compute pool (vitlens-mt.js), the bias with them; each row is computed
  // as in the whole product.
  parallel_ranges(n, grain_for(double(in) * out), [&](int i0, int i1) {
    if constexpr (std::is_same<T, float>::value) {
      gemm_weight(y.data() + ptrdiff_t(i0) * out, x.data() + ptrdiff_t(i0) * in, W.data(), out, in,
                  WeightProduct::times_wt, packs, i1 - i0, in, out, 1.0f, 0.0f);  // x·Wᵀ
    } else {
      gemm_nt(y.data() + ptrdiff_t(i0) * out, x.data() + ptrdiff_t(i0) * in, W.data(), i1 - i0, out, in, in, in,
              out, T(1), T(0));  // x·Wᵀ
    }
    y.middleRows(i0, i1 - i0).rowwise() += b.cast<T>().transpose();
  });
}

}  // namespace

void linear_forward(Mat& y, const Mat& x, const Mat& W, const Vec& b, const WeightPacks* packs) {
  linear_forward_t(y, x, W, b, packs);
}
void linear_forward(MatD& y, const MatD& x, const Mat& W, const Vec& b, const WeightPacks*) {
  linear_forward_t(y, x, W, b, nullptr);
}

void linear_backward(Mat* dx, Mat* dW, Vec* db, const Mat& dy, const Mat& x, const Mat& W,
                     const WeightPacks* packs) {
  const int n = int(dy.rows()), in = int(W.cols()), out = int(W.rows());
  assert(dy.cols() == out && (!dW || (x.rows() == n && x.cols() == in)));  // x serves only dW
  if (dx) {
    dx->resize(n, in);
    // ∂(x·Wᵀ)/∂x = dy·W, in row ranges over the compute pool (vitlens-mt.js), as the forward
    parallel_ranges(n, grain_for(double(in) * out), [&](int i0, int i1) {
      gemm_weight(dx->data() + ptrdiff_t(i0) * in, dy.data() + ptrdiff_t(i0) * out, W.data(), out, in,
                  WeightProduct::times_w, packs, i1 - i0, out, in, 1.0f, 0.0f);
    });
  }
  if (dW) {
    assert(dW->rows() == out && dW->cols() == in);
    gemm_tn(dW->data(), dy.data(), x.data(), out, in, n, out, in, in, 1.0f, 1.0f);  // Σ_rows dyᵀ x
  }
  if (db) *db += dy.colwise().sum().transpose();
}

namespace {

// Below this share Σz⁺/Σ|z|, the α1β0 denominator is recomputed exactly: the float error of
// Σ|z| (~√in·6e-8 of it) is then at most ~√in·1.2e-6 of Z, under 4e-5 for in ≤ 1024.
constexpr double kExactShare = 0.05;

// Σ_j max(0, x_j·w_j) in double: Z of LRP-α1β0 for one output.
double positive_sum(const double* x, const float* w, int in) {
  double z = 0.0;
  for (int j = 0; j < in; ++j) z += std::max(0.0, x[j] * double(w[j]));
  return z;
}

// The rows [i0, i1) of the relevance products, each rule on its own: a and p are float buffers
// of the range (S or |x|, and the products); the weights W (|W| taken by the products), or
// w = [W⁺ | W⁻] for the older rule. Every row is computed as it is when the products run whole
// (the kernel's sum over k does not depend on the rows around it), so a split over rows changes
// no bit.
struct RowRange {
  int i0, i1;
  int rows() const { return i1 - i0; }
};

// R_in = x ⊙ ((R / stab(z))·W), z = x·Wᵀ + b  (Bach et al. 2015; AttnLRP)
void epsilon_rows(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W,
                  const WeightPacks* packs, RowRange g, Mat& a, Mat& p) {
  const int in = int(W.cols()), out = int(W.rows()), m = g.rows();
  a.resize(m, out);  // S
  for (int i = g.i0; i < g.i1; ++i) {
    const double *ri = r.row(i).data(), *yi = y.row(i).data();
    float* si = a.row(i - g.i0).data();
    for (int o = 0; o < out; ++o) si[o] = to_float_flushed(ri[o] / stabilise(yi[o]));
  }
  p.resize(m, in);  // S·W
  gemm_weight(p.data(), a.data(), W.data(), out, in, WeightProduct::times_w, packs, m, out, in, 1.0f, 0.0f);
  for (int i = g.i0; i < g.i1; ++i) {
    const double* xi = x.row(i).data();
    const float* pi = p.row(i - g.i0).data();
    double* ri = r_in.row(i).data();
    for (int j = 0; j < in; ++j) ri[j] = xi[j] * double(pi[j]);
  }
}

// The older α1β0 rule of Chefer et al. 2021's "LRP" and "partial LRP" baselines (the first rule
// set of the paper's code; METHODS.md), one denominator per sign, safe_divide:
//   Z⁺ = x⁺·W⁺ᵀ, Z⁻ = x⁻·W⁻ᵀ, R_in = x⁺ ⊙ ((R/Z⁺)·W⁺) + x⁻ ⊙ ((R/Z⁻)·W⁻).
// Each sign passes all of R on wherever its Z ≠ 0, so ΣR_in is up to 2ΣR: not conserving.
// Both Z are sums of non-negative terms (no cancellation): float products suffice.
// w = [W⁺ | W⁻] (out, 2·in).
void separate_rows(MatD& r_in, const MatD& r, const MatD& x, const Mat& w, RowRange g, Mat& a, Mat& p) {
  const int in = int(w.cols()) / 2, out = int(w.rows()), m = g.rows();
  a.resize(m, 2 * in);  // [x⁺ | x⁻] in float, below 2⁻⁶⁴ 0 (tensor/tiny.h)
  for (int i = 0; i < m; ++i) {
    const double* xi = x.row(g.i0 + i).data();
    float* ai = a.row(i).data();
    for (int j = 0; j < in; ++j) {
      ai[j] = to_float_flushed(std::max(xi[j], 0.0));
      ai[in + j] = to_float_flushed(std::min(xi[j], 0.0));
    }
  }
  p.resize(m, 2 * out);  // [Z⁺ | Z⁻]
  gemm_nt(p.data(), a.data(), w.data(), m, out, in, 2 * in, 2 * in, 2 * out, 1.0f, 0.0f);
  gemm_nt(p.data() + out, a.data() + in, w.data() + in, m, out, in, 2 * in, 2 * in, 2 * out, 1.0f, 0.0f);
  a.resize(m, 2 * out);  // [S⁺ | S⁻] = [R/Z⁺ | R/Z⁻]
  for (int i = g.i0; i < g.i1; ++i) {
    const double* ri = r.row(i).data();
    const float* zi = p.row(i - g.i0).data();
    float* si = a.row(i - g.i0).data();
    for (int o = 0; o < out; ++o) {
      si[o] = to_float_flushed(safe_divide(ri[o], double(zi[o])));
      si[out + o] = to_float_flushed(safe_divide(ri[o], double(zi[out + o])));
    }
  }
  p.resize(m, 2 * in);  // [S⁺·W⁺ | S⁻·W⁻]
  gemm_nn(p.data(), a.data(), w.data(), m, in, out, 2 * out, 2 * in, 2 * in, 1.0f, 0.0f);
  gemm_nn(p.data() + in, a.data() + out, w.data() + in, m, in, out, 2 * out, 2 * in, 2 * in, 1.0f, 0.0f);
  for (int i = g.i0; i < g.i1; ++i) {
    const double* xi = x.row(i).data();
    const float* pi = p.row(i - g.i0).data();
    double* ri = r_in.row(i).data();
    for (int j = 0; j < in; ++j) ri[j] = xi[j] > 0.0 ? xi[j] * double(pi[j]) : xi[j] * double(pi[in + j]);
  }
}

// LRP-α1β0 with one shared denominator (Bach et al. 2015; Chefer et al. 2021):
//   Z = x⁺·W⁺ᵀ + x⁻·W⁻ᵀ, S = R/Z, R_in = x⁺⊙(S·W⁺) + x⁻⊙(S·W⁻).
// With p⁺q⁺ + p⁻q⁻ = ½(pq + |p||q|): Z = ½(x·Wᵀ + |x|·|W|ᵀ), where x·Wᵀ = y − b, and
// R_in = ½(x⊙(S·W) + |x|⊙(S·|W|)) — three products instead of four. |x|·|W|ᵀ = Σ_j|z_j| runs
// in float (a sum of non-negative terms, relative error ~√in·2⁻²⁴), but the half-sum cancels
// when the positive contributions z_j⁺ are a small share of Σ|z_j|: there Z (0 when every
// z_j ≤ 0) is recomputed exactly as Σ_j z_j⁺ in double (kExactShare below; rare).
// |W| is taken as W is packed, once when the model loads (pack_weights) or by the product
// (gemm.h): no copy of it that one thread forms and the others read.
void shared_rows(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W, const Vec& b,
                 const WeightPacks* packs, RowRange g, Mat& a, Mat& p) {
  const int in = int(W.cols()), out = int(W.rows()), m = g.rows();
  a.resize(m, in);  // |x| in float, below 2⁻⁶⁴ 0 (tensor/tiny.h); x's rows are contiguous
  const double* xs = x.row(g.i0).data();
  float* as = a.data();
  for (ptrdiff_t j = 0; j < ptrdiff_t(m) * in; ++j) as[j] = to_float_flushed(std::fabs(xs[j]));
  p.resize(m, out);  // |x|·|W|ᵀ
  gemm_weight(p.data(), a.data(), W.data(), out, in, WeightProduct::times_abs_wt, packs, m, in, out, 1.0f, 0.0f);
  a.resize(m, out);  // S = R / Z, rounded to float for the products (below 2⁻⁶⁴: 0)
  for (int i = g.i0; i < g.i1; ++i) {
    const double *ri = r.row(i).data(), *yi = y.row(i).data();
    const float* pi = p.row(i - g.i0).data();
    float* si = a.row(i - g.i0).data();
    for (int o = 0; o < out; ++o) si[o] = to_float_flushed(safe_divide(ri[o], 0.5 * ((yi[o] - double(b[o])) + double(pi[o]))));
    // The rare cancelling Z, apart so that the loop above stays vectorised.
    for (int o = 0; o < out; ++o)
      if ((yi[o] - double(b[o])) + double(pi[o]) < 2.0 * kExactShare * double(pi[o]))
        si[o] = to_float_flushed(safe_divide(ri[o], positive_sum(x.row(i).data(), W.row(o).data(), in)));
  }
  p.resize(m, 2 * in);  // [S·W | S·|W|]
  gemm_weight(p.data(), a.data(), W.data(), out, in, WeightProduct::times_w, packs, m, out, 2 * in, 1.0f, 0.0f);
  gemm_weight(p.data() + in, a.data(), W.data(), out, in, WeightProduct::times_abs_w, packs, m, out, 2 * in, 1.0f,
              0.0f);
  for (int i = g.i0; i < g.i1; ++i) {
    const double* xi = x.row(i).data();
    const float* pi = p.row(i - g.i0).data();  // (2·in) [S·W | S·|W|]
    double* ri = r_in.row(i).data();
    for (int j = 0; j < in; ++j) ri[j] = 0.5 * (xi[j] * double(pi[j]) + std::fabs(xi[j]) * double(pi[in + j]));
  }
}

}  // namespace

void linear_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W,
                      const Vec& b, LinearRule rule, LrpScratch& s, const WeightPacks* packs) {
  const int n = int(x.rows()), in = int(W.cols()), out = int(W.rows());
  assert(r.rows() == n && r.cols() == out && y.rows() == n && y.cols() == out && x.cols() == in);
  const int m = relevance_rows(r);  // rows ≥ m have R = 0, hence R_in = 0
  r_in.resize(n, in);
  r_in.bottomRows(n - m).setZero();
  if (m == 0) return;
  if (rule == LinearRule::alpha1beta0_separate) {
    s.w.resize(out, 2 * in);  // [W⁺ | W⁻]
    s.w.leftCols(in) = W.cwiseMax(0.0f);
    s.w.rightCols(in) = W.cwiseMin(0.0f);
  }
  // The rows' products, per rule: ε one (S·W), α1β0 three, the older α1β0 four.
  const int products = rule == LinearRule::epsilon ? 1 : rule == LinearRule::alpha1beta0_separate ? 4 : 3;
  ranges_with_scratch(m, grain_for(double(products) * in * out), s, [&](int i0, int i1, LrpScratch& rs) {
    const RowRange g{i0, i1};
    if (rule == LinearRule::epsilon)
      epsilon_rows(r_in, r, x, y, W, packs, g, rs.a, rs.p);
    else if (rule == LinearRule::alpha1beta0_separate)
      separate_rows(r_in, r, x, s.w, g, rs.a, rs.p);
    else
      shared_rows(r_in, r, x, y, W, b, packs, g, rs.a, rs.p);
  });
}

}  // namespace vitlens
