// layernorm.cpp — LayerNorm over the last dimension: forward and backward, and for the LRP
// methods its double-precision forward and relevance rules.
#include <cmath>

#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// In T from the float γ, β (cast, exact); var biased, as PyTorch.
template <typename T>
void layernorm_forward_t(MatT<T>& y, VecT<T>& mean, VecT<T>& rstd, const MatT<T>& x, const Vec& w,
                         const Vec& b, T eps) {
  const Eigen::Index n = x.rows(), d = x.cols();
  y.resize(n, d);
  mean.resize(n);
  rstd.resize(n);
  const Eigen::Array<T, 1, Eigen::Dynamic> wt = w.transpose().cast<T>().array();  // (d)
  const Eigen::Array<T, 1, Eigen::Dynamic> bt = b.transpose().cast<T>().array();  // (d)
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto row = x.row(i);
    const T mu = row.mean();
    const T var = (row.array() - mu).square().mean();
    const T rs = T(1) / std::sqrt(var + eps);
    mean[i] = mu;
    rstd[i] = rs;
    y.row(i) = (((row.array() - mu) * rs) * wt + bt).matrix();
  }
}

}  // namespace

void layernorm_forward(Mat& y, Vec& mean, Vec& rstd, const Mat& x, const Vec& w, const Vec& b,
                       float eps) {
  layernorm_forward_t(y, mean, rstd, x, w, b, eps);
}
void layernorm_forward(MatD& y, VecD& mean, VecD& rstd, const MatD& x, const Vec& w, const Vec& b,
                       double eps) {
  layernorm_forward_t(y, mean, rstd, x, w, b, eps);
}

// With x̂ = (x − μ)·rstd and g = dy ⊙ γ:  dx = rstd · (g − mean(g) − x̂ · mean(g ⊙ x̂)).
void layernorm_backward(Mat& dx, Vec* dw, Vec* db, const Mat& dy, const Mat& x, const Vec& mean,
                        const Vec& rstd, const Vec& w) {
  const Eigen::Index n = x.rows(), d = x.cols();
  dx.resize(n, d);
  Eigen::RowVectorXf xhat(d), g(d);
  for (Eigen::Index i = 0; i < n; ++i) {
    xhat = (x.row(i).array() - mean[i]) * rstd[i];
    g = dy.row(i).array() * w.transpose().array();
    const float g_mean = g.mean();
    const float gx_mean = (g.array() * xhat.array()).mean();
    dx.row(i) = rstd[i] * (g.array() - g_mean - xhat.array() * gx_mean);
    if (dw) *dw += (dy.row(i).array() * xhat.array()).matrix().transpose();
    if (db) *db += dy.row(i).transpose();
  }
}

void layernorm_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const VecD& rstd,
                         const Vec& w, LayerNormRule rule) {
  if (rule == LayerNormRule::identity) {
    r_in = r;  // Chefer et al. 2021: LayerNorm passes relevance unchanged
    return;
  }
  // AttnLRP: with rstd and γ constant, y = γ·rstd·(x − mean x) + β is linear in x; the ε rule with
  // y (β included) in the denominator gives g = γ·rstd ⊙ R/stab(y), R_in = x ⊙ (g − mean(g)).
  const Eigen::Index n = x.rows(), d = x.cols();
  r_in.resize(n, d);
  const Eigen::ArrayXd wd = w.cast<double>().array();
  Eigen::ArrayXd g(d);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < d; ++j) g[j] = wd[j] * rstd[i] * r(i, j) / stabilise(y(i, j));
    r_in.row(i) = (x.row(i).array() * (g - g.mean()).transpose()).matrix();
  }
}

}  // namespace vitlens
