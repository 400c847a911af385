// attention.cpp — softmax and the multi-head attention core: forward and backward, and for the
// LRP methods the double-precision forward and the relevance rules of the two-operand products
// (A·v, q·kᵀ) and of the softmax.
#include <cmath>

#include "vitlens/layers.h"

namespace vitlens {

void softmax_rows(Mat& p, const Mat& s) {
  p.resize(s.rows(), s.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const float mx = s.row(i).maxCoeff();
    p.row(i) = (s.row(i).array() - mx).exp();
    p.row(i) /= p.row(i).sum();
  }
}

// ∂p_j/∂s_k = p_j(δ_jk − p_k)  ⇒  ds = p ⊙ (dp − ⟨dp, p⟩)
void softmax_rows_backward(Mat& ds, const Mat& dp, const Mat& p) {
  ds.resize(p.rows(), p.cols());
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    const float dot = dp.row(i).dot(p.row(i));
    ds.row(i) = p.row(i).array() * (dp.row(i).array() - dot);
  }
}

void attention_forward(Mat& ctx, std::vector<Mat>& scores, std::vector<Mat>& attn, const Mat& qkv,
                       int heads, const float* head_mask, const std::vector<Mat>* override_attn) {
  const Eigen::Index n = qkv.rows(), d = qkv.cols() / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  ctx.resize(n, d);
  scores.resize(size_t(heads));
  attn.resize(size_t(heads));
  for (int h = 0; h < heads; ++h) {
    const auto q = qkv.block(0, h * dh, n, dh);
    const auto k = qkv.block(0, d + h * dh, n, dh);
    const auto v = qkv.block(0, 2 * d + h * dh, n, dh);
    Mat& S = scores[size_t(h)];
    Mat& A = attn[size_t(h)];
    S.resize(n, n);
    S.noalias() = q * k.transpose();
    S *= scale;
    if (override_attn) {
      A = (*override_attn)[size_t(h)];
    } else {
      softmax_rows(A, S);
    }
    if (head_mask && head_mask[h] == 0.0f) A.setZero();
    ctx.block(0, h * dh, n, dh).noalias() = A * v;
  }
}

void attention_backward(Mat& dqkv, std::vector<Mat>& dscores, std::vector<Mat>& dattn,
                        const Mat& dctx, const Mat& qkv, const std::vector<Mat>& attn, int heads,
                        const float* head_mask, bool overridden) {
  const Eigen::Index n = qkv.rows(), d = qkv.cols() / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  dqkv.resize(n, 3 * d);
  dscores.resize(size_t(heads));
  dattn.resize(size_t(heads));
  for (int h = 0; h < heads; ++h) {
    const auto q = qkv.block(0, h * dh, n, dh);
    const auto k = qkv.block(0, d + h * dh, n, dh);
    const auto v = qkv.block(0, 2 * d + h * dh, n, dh);
    const auto dc = dctx.block(0, h * dh, n, dh);
    const Mat& A = attn[size_t(h)];
    Mat& dA = dattn[size_t(h)];
    Mat& dS = dscores[size_t(h)];
    dA.resize(n, n);
    dA.noalias() = dc * v.transpose();
    dqkv.block(0, 2 * d + h * dh, n, dh).noalias() = A.transpose() * dc;
    const bool masked = head_mask && head_mask[h] == 0.0f;
    if (overridden || masked) {
      dS = Mat::Zero(n, n);
    } else {
      softmax_rows_backward(dS, dA, A);
    }
    dqkv.block(0, h * dh, n, dh).noalias() = scale * (dS * k);
    dqkv.block(0, d + h * dh, n, dh).noalias() = scale * (dS.transpose() * q);
  }
}

void softmax_rows(MatD& p, const MatD& s) {
  p.resize(s.rows(), s.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const double mx = s.row(i).maxCoeff();
    p.row(i) = (s.row(i).array() - mx).exp();
    p.row(i) /= p.row(i).sum();
  }
}

void attention_forward(MatD& ctx, std::vector<MatD>& attn, const MatD& qkv, int heads) {
  const Eigen::Index n = qkv.rows(), d = qkv.cols() / 3, dh = d / heads;
  const double scale = 1.0 / std::sqrt(double(dh));
  ctx.resize(n, d);
  attn.resize(size_t(heads));
  MatD scores(n, n);  // (n, n)
  for (int h = 0; h < heads; ++h) {
    scores.noalias() = qkv.block(0, h * dh, n, dh) * qkv.block(0, d + h * dh, n, dh).transpose();
    scores *= scale;
    softmax_rows(attn[size_t(h)], scores);
    ctx.block(0, h * dh, n, dh).noalias() = attn[size_t(h)] * qkv.block(0, 2 * d + h * dh, n, dh);
  }
}

void softmax_relevance(MatD& r_in, const MatD& r, const MatD& s, const MatD& p, SoftmaxRule rule) {
  if (rule == SoftmaxRule::identity) {
    r_in = r;  // Chefer et al. 2021: softmax passes relevance unchanged
    return;
  }
  // AttnLRP Prop. 3.1 (first-order Taylor at the input, bias absorbed): R_in = s ⊙ (R − p·ΣR).
  r_in.resize(r.rows(), r.cols());
  for (Eigen::Index i = 0; i < r.rows(); ++i)
    r_in.row(i) = s.row(i).cwiseProduct(r.row(i) - p.row(i) * r.row(i).sum());
}

namespace {

// S = R / Z as the product rule divides; returns the factor both operands' shares take:
// halved (Chefer 2021): S = safe_divide(R, Z), each operand receives the full ΣR, so ½;
// epsilon_half (AttnLRP Prop. 3.3): S = R / stab(2Z), each operand gets half of every term.
template <typename R, typename Z>
double product_divide(MatD& S, const Eigen::MatrixBase<R>& r, const Eigen::MatrixBase<Z>& z,
                      ProductRule rule) {
  if (rule == ProductRule::halved) {
    S = r.binaryExpr(z, [](double rv, double zv) { return safe_divide(rv, zv); });
    return 0.5;
  }
  S = r.binaryExpr(z, [](double rv, double zv) { return rv / stabilise(2.0 * zv); });
  return 1.0;
}

}  // namespace

AttentionRelevanceSums attention_relevance(MatD& r_qkv, std::vector<MatD>& r_attn,
                                           const MatD& r_ctx, const MatD& qkv,
                                           const std::vector<MatD>& attn, const MatD& ctx,
                                           int heads, ProductRule product, SoftmaxRule softmax,
                                           LrpScratch& s) {
  const Eigen::Index n = qkv.rows(), d = qkv.cols() / 3, dh = d / heads;
  const double scale = 1.0 / std::sqrt(double(dh));
  AttentionRelevanceSums sums;
  r_qkv.resize(n, 3 * d);
  r_attn.resize(size_t(heads));
  MatD r_scores;  // (n, n)
  for (int h = 0; h < heads; ++h) {
    const auto q = qkv.block(0, h * dh, n, dh);
    const auto k = qkv.block(0, d + h * dh, n, dh);
    const auto v = qkv.block(0, 2 * d + h * dh, n, dh);
    const MatD& A = attn[size_t(h)];
    MatD& RA = r_attn[size_t(h)];
    // ctx_h = A·v: Z = ctx_h, R_A = f·A ⊙ (S·vᵀ), R_v = f·v ⊙ (Aᵀ·S)  (Jᵀ of each operand)
    double f = product_divide(s.s, r_ctx.block(0, h * dh, n, dh), ctx.block(0, h * dh, n, dh), product);
    s.t.resize(n, n);
    s.t.noalias() = s.s * v.transpose();
    RA = f * A.cwiseProduct(s.t);
    auto rv = r_qkv.block(0, 2 * d + h * dh, n, dh);
    rv.noalias() = A.transpose() * s.s;
    rv = f * v.cwiseProduct(rv);
    sums.attn += RA.sum();
    sums.v += rv.sum();
    // scores = q·kᵀ/√d_h; the product rule works on Z = q·kᵀ (the constant factor passes R)
    s.z.resize(n, n);
    s.z.noalias() = q * k.transpose();
    if (softmax == SoftmaxRule::attnlrp) s.u = scale * s.z;
    softmax_relevance(r_scores, RA, s.u, A, softmax);
    sums.scores += r_scores.sum();
    // Z = q·kᵀ: R_q = f·q ⊙ (S·k), R_k = f·k ⊙ (Sᵀ·q)
    f = product_divide(s.s, r_scores, s.z, product);
    auto rq = r_qkv.block(0, h * dh, n, dh);
    auto rk = r_qkv.block(0, d + h * dh, n, dh);
    rq.noalias() = s.s * k;
    rq = f * q.cwiseProduct(rq);
    rk.noalias() = s.s.transpose() * q;
    rk = f * k.cwiseProduct(rk);
    sums.q += rq.sum();
    sums.k += rk.sum();
  }
  return sums;
}

}  // namespace vitlens
