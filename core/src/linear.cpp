// linear.cpp — the fully connected layer: forward and backward, and for the LRP methods its
// double-precision forward and relevance rules (αβ of Chefer 2021, ε of AttnLRP).
#include <cmath>

#include "vitlens/layers.h"

namespace vitlens {

void linear_forward(Mat& y, const Mat& x, const Mat& W, const Vec& b) {
  y.resize(x.rows(), W.rows());
  y.noalias() = x * W.transpose();
  y.rowwise() += b.transpose();
}

void linear_backward(Mat* dx, Mat* dW, Vec* db, const Mat& dy, const Mat& x, const Mat& W) {
  if (dx) {
    dx->resize(dy.rows(), W.cols());
    dx->noalias() = dy * W;  // ∂(x·Wᵀ)/∂x
  }
  if (dW) dW->noalias() += dy.transpose() * x;  // Σ_rows dyᵀ x
  if (db) *db += dy.colwise().sum().transpose();
}

double safe_divide(double a, double b) {
  if (b == 0.0) return 0.0;
  const double den = b + 1e-9;
  return a / (den == 0.0 ? 1e-9 : den);
}

double stabilise(double z) { return z >= 0.0 ? z + 1e-6 : z - 1e-6; }

void linear_forward(MatD& y, const MatD& x, const Mat& W, const Vec& b, LrpScratch& s) {
  s.w = W.cast<double>();  // (out, in)
  y.resize(x.rows(), W.rows());
  y.noalias() = x * s.w.transpose();
  y.rowwise() += b.cast<double>().transpose();
}

void linear_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W,
                      const Vec& b, LinearRule rule, LrpScratch& s) {
  const Eigen::Index n = x.rows(), in = W.cols(), out = W.rows();
  r_in.resize(n, in);
  if (rule == LinearRule::epsilon) {
    // R_in = x ⊙ ((R / stab(z))·W), z = x·Wᵀ + b  (Bach et al. 2015; AttnLRP Eq. 8)
    s.w = W.cast<double>();
    s.s = r.binaryExpr(y, [](double rv, double zv) { return rv / stabilise(zv); });
    s.t.resize(n, in);
    s.t.noalias() = s.s * s.w;
    r_in = x.cwiseProduct(s.t);
    return;
  }
  // LRP-α1β0 with one shared denominator (Bach et al. 2015; Chefer et al. 2021):
  //   Z = x⁺·W⁺ᵀ + x⁻·W⁻ᵀ, S = R/Z, R_in = x⁺⊙(S·W⁺) + x⁻⊙(S·W⁻).
  // With p⁺q⁺ + p⁻q⁻ = ½(pq + |p||q|): Z = ½(x·Wᵀ + |x|·|W|ᵀ), where x·Wᵀ = y − b, and
  // R_in = ½(x⊙(S·W) + |x|⊙(S·|W|)) — three products instead of four.
  s.w.resize(out, 2 * in);  // [W | |W|]
  s.w.leftCols(in) = W.cast<double>();
  s.w.rightCols(in) = s.w.leftCols(in).cwiseAbs();
  s.z.resize(n, out);
  s.z.noalias() = x.cwiseAbs() * s.w.rightCols(in).transpose();
  s.z += y;
  s.z.rowwise() -= b.cast<double>().transpose();
  s.z *= 0.5;
  s.s = r.binaryExpr(s.z, [](double rv, double zv) { return safe_divide(rv, zv); });
  s.t.resize(n, 2 * in);
  s.t.noalias() = s.s * s.w;
  r_in = 0.5 * (x.cwiseProduct(s.t.leftCols(in)) + x.cwiseAbs().cwiseProduct(s.t.rightCols(in)));
}

}  // namespace vitlens
