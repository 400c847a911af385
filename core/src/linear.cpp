// linear.cpp — the fully connected layer: forward and backward, and for the LRP methods its
// double-precision forward and relevance rules (αβ of Chefer 2021, ε of AttnLRP).
#include <cassert>
#include <cmath>

#include "vitlens/gemm.h"
#include "vitlens/layers.h"

namespace vitlens {

void linear_forward(Mat& y, const Mat& x, const Mat& W, const Vec& b) {
  const int n = int(x.rows()), in = int(W.cols()), out = int(W.rows());
  assert(x.cols() == in && b.size() == out);
  y.resize(n, out);
  gemm_nt(y.data(), x.data(), W.data(), n, out, in, in, in, out, 1.0f, 0.0f);  // x·Wᵀ
  y.rowwise() += b.transpose();
}

void linear_backward(Mat* dx, Mat* dW, Vec* db, const Mat& dy, const Mat& x, const Mat& W) {
  const int n = int(dy.rows()), in = int(W.cols()), out = int(W.rows());
  assert(dy.cols() == out && x.rows() == n && x.cols() == in);
  if (dx) {
    dx->resize(n, in);
    gemm_nn(dx->data(), dy.data(), W.data(), n, in, out, out, in, in, 1.0f, 0.0f);  // ∂(x·Wᵀ)/∂x = dy·W
  }
  if (dW) {
    assert(dW->rows() == out && dW->cols() == in);
    gemm_tn(dW->data(), dy.data(), x.data(), out, in, n, out, in, in, 1.0f, 1.0f);  // Σ_rows dyᵀ x
  }
  if (db) *db += dy.colwise().sum().transpose();
}

double safe_divide(double a, double b) {
  if (b == 0.0) return 0.0;
  const double den = b + 1e-9;
  return a / (den == 0.0 ? 1e-9 : den);
}

double stabilise(double z) { return z >= 0.0 ? z + 1e-6 : z - 1e-6; }

void linear_forward(MatD& y, const MatD& x, const Mat& W, const Vec& b, LrpScratch& s) {
  s.wd = W.cast<double>();  // (out, in)
  y.resize(x.rows(), W.rows());
  y.noalias() = x * s.wd.transpose();
  y.rowwise() += b.cast<double>().transpose();
}

void linear_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W,
                      const Vec& b, LinearRule rule, LrpScratch& s) {
  const Eigen::Index n = x.rows(), in = W.cols(), out = W.rows();
  if (rule == LinearRule::epsilon) {
    // R_in = x ⊙ ((R / stab(z))·W), z = x·Wᵀ + b  (Bach et al. 2015; AttnLRP)
    s.s = r.binaryExpr(y, [](double rv, double zv) { return rv / stabilise(zv); });
    s.a = s.s.cast<float>();
    s.p.resize(n, in);
    gemm_nn(s.p.data(), s.a.data(), W.data(), int(n), int(in), int(out), int(out), int(in), int(in), 1.0f, 0.0f);
    r_in = x.cwiseProduct(s.p.cast<double>());
    return;
  }
  // LRP-α1β0 with one shared denominator (Bach et al. 2015; Chefer et al. 2021):
  //   Z = x⁺·W⁺ᵀ + x⁻·W⁻ᵀ, S = R/Z, R_in = x⁺⊙(S·W⁺) + x⁻⊙(S·W⁻).
  // With p⁺q⁺ + p⁻q⁻ = ½(pq + |p||q|): Z = ½(x·Wᵀ + |x|·|W|ᵀ), where x·Wᵀ = y − b, and
  // R_in = ½(x⊙(S·W) + |x|⊙(S·|W|)) — three products instead of four.
  s.w.resize(out, 2 * in);  // [W | |W|]
  s.w.leftCols(in) = W;
  s.w.rightCols(in) = W.cwiseAbs();
  s.a = x.cwiseAbs().cast<float>();
  s.p.resize(n, out);  // |x|·|W|ᵀ
  gemm_nt(s.p.data(), s.a.data(), s.w.data() + in, int(n), int(out), int(in), int(in), int(2 * in), int(out),
          1.0f, 0.0f);
  s.z = 0.5 * (y.rowwise() - b.cast<double>().transpose() + s.p.cast<double>());
  s.s = r.binaryExpr(s.z, [](double rv, double zv) { return safe_divide(rv, zv); });
  s.a = s.s.cast<float>();
  s.p.resize(n, 2 * in);  // S·[W | |W|]
  gemm_nn(s.p.data(), s.a.data(), s.w.data(), int(n), int(2 * in), int(out), int(out), int(2 * in), int(2 * in),
          1.0f, 0.0f);
  r_in = 0.5 * (x.cwiseProduct(s.p.leftCols(in).cast<double>()) +
                x.cwiseAbs().cwiseProduct(s.p.rightCols(in).cast<double>()));
}

}  // namespace vitlens
