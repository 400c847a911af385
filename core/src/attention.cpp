// attention.cpp — softmax and the multi-head attention core: forward and backward, and for the
// LRP methods the double-precision forward and the relevance rules of the two-operand products
// (A·v, q·kᵀ) and of the softmax.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "vitlens/gemm.h"
#include "vitlens/layers.h"

namespace vitlens {

namespace {

// e^x for x ≤ 0 (a softmax argument after subtracting the row maximum), within 1 ulp for every
// float in [−87, 0] (checked exhaustively against double). Eigen's vectorised exp needs
// _mm_cvttps_epi32, which Emscripten emulates one lane at a time (~5 ns per value in wasm); this
// form uses only operations that clang (SIMD128) and GCC (AVX) vectorise: x = n·ln2 + r, n
// rounded by adding 1.5·2²³, ln2 split in two (Cody–Waite); e^r ≈ 1 + r + r²·P(r) on
// |r| ≤ ln2/2 with the degree-5 P of Cephes' expf; 2ⁿ written into the exponent bits.
float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;  // keeps 2ⁿ normal: e⁻⁸⁷ ≈ 1.6e-38 stands in for smaller values
  constexpr float kShift = 12582912.0f;  // 1.5·2²³: t's low mantissa bits hold round(x·log₂e)
  const float t = x * 1.44269504f + kShift;
  const float n = t - kShift;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 = 0.693359375 − 2.12…e-4
  float poly = 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const float er = poly * r * r + r + 1.0f;
  int32_t t_bits, shift_bits;
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&shift_bits, &kShift, sizeof kShift);
  const int32_t scale_bits = (t_bits - shift_bits + 127) << 23;  // 2ⁿ
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return er * scale;
}

}  // namespace

void softmax_rows(Mat& p, const Mat& s) {
  const Eigen::Index n = s.cols();
  p.resize(s.rows(), n);
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    const float mx = s.row(i).maxCoeff();
    const float* in = s.row(i).data();  // (n)
    float* out = p.row(i).data();       // (n)
    for (Eigen::Index j = 0; j < n; ++j) out[j] = exp_nonpositive(in[j] - mx);
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
  const int n = int(qkv.rows()), d = int(qkv.cols()) / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  ctx.resize(n, d);
  scores.resize(size_t(heads));
  attn.resize(size_t(heads));
  for (int h = 0; h < heads; ++h) {
    const float* q = qkv.data() + h * dh;  // q_h, k_h, v_h: (n, dh) each, rows 3d apart
    const float* k = q + d;
    const float* v = q + 2 * d;
    Mat& S = scores[size_t(h)];
    Mat& A = attn[size_t(h)];
    S.resize(n, n);
    gemm_nt(S.data(), q, k, n, n, dh, 3 * d, 3 * d, n, scale, 0.0f);  // S = q·kᵀ/√d_h
    if (override_attn) {
      A = (*override_attn)[size_t(h)];
    } else {
      softmax_rows(A, S);
    }
    if (head_mask && head_mask[h] == 0.0f) A.setZero();
    gemm_nn(ctx.data() + h * dh, A.data(), v, n, dh, n, n, 3 * d, d, 1.0f, 0.0f);  // ctx_h = A·v
  }
}

void attention_backward(Mat& dqkv, std::vector<Mat>& dscores, std::vector<Mat>& dattn,
                        const Mat& dctx, const Mat& qkv, const std::vector<Mat>& attn, int heads,
                        const float* head_mask, bool overridden) {
  const int n = int(qkv.rows()), d = int(qkv.cols()) / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  dqkv.resize(n, 3 * d);
  dscores.resize(size_t(heads));
  dattn.resize(size_t(heads));
  for (int h = 0; h < heads; ++h) {
    const float* q = qkv.data() + h * dh;  // q_h, k_h, v_h: (n, dh) each, rows 3d apart
    const float* k = q + d;
    const float* v = q + 2 * d;
    const float* dc = dctx.data() + h * dh;  // (n, dh), rows d apart
    float* dq = dqkv.data() + h * dh;        // dq_h, dk_h, dv_h: (n, dh) each, rows 3d apart
    float* dk = dq + d;
    float* dv = dq + 2 * d;
    const Mat& A = attn[size_t(h)];
    Mat& dA = dattn[size_t(h)];
    Mat& dS = dscores[size_t(h)];
    dA.resize(n, n);
    gemm_nt(dA.data(), dc, v, n, n, dh, d, 3 * d, n, 1.0f, 0.0f);   // dA = dc·vᵀ
    gemm_tn(dv, A.data(), dc, n, dh, n, n, d, 3 * d, 1.0f, 0.0f);   // dv = Aᵀ·dc
    const bool masked = head_mask && head_mask[h] == 0.0f;
    if (overridden || masked) {
      dS = Mat::Zero(n, n);
    } else {
      softmax_rows_backward(dS, dA, A);
    }
    gemm_nn(dq, dS.data(), k, n, dh, n, n, 3 * d, 3 * d, scale, 0.0f);  // dq = dS·k/√d_h
    gemm_tn(dk, dS.data(), q, n, dh, n, n, 3 * d, 3 * d, scale, 0.0f);  // dk = dSᵀ·q/√d_h
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
  // AttnLRP (first-order Taylor at the input, bias absorbed): R_in = s ⊙ (R − p·ΣR).
  r_in.resize(r.rows(), r.cols());
  for (Eigen::Index i = 0; i < r.rows(); ++i)
    r_in.row(i) = s.row(i).cwiseProduct(r.row(i) - p.row(i) * r.row(i).sum());
}

namespace {

// S = R / Z as the product rule divides; returns the factor both operands' shares take:
// halved (Chefer 2021): S = safe_divide(R, Z), each operand receives the full ΣR, so ½;
// epsilon_half (AttnLRP): S = R / stab(2Z), each operand gets half of every term.
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
    s.a = s.s.cast<float>();  // (n, d_h) S
    s.q = v.cast<float>();    // (n, d_h)
    s.p.resize(n, n);
    gemm_nt(s.p.data(), s.a.data(), s.q.data(), int(n), int(n), int(dh), int(dh), int(dh), int(n), 1.0f, 0.0f);
    RA = f * A.cwiseProduct(s.p.cast<double>());
    s.q = A.cast<float>();  // (n, n)
    s.p.resize(n, dh);
    gemm_tn(s.p.data(), s.q.data(), s.a.data(), int(n), int(dh), int(n), int(n), int(dh), int(dh), 1.0f, 0.0f);
    auto rv = r_qkv.block(0, 2 * d + h * dh, n, dh);
    rv = f * v.cwiseProduct(s.p.cast<double>());
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
    s.a = s.s.cast<float>();  // (n, n) S
    s.q = k.cast<float>();    // (n, d_h)
    s.p.resize(n, dh);
    gemm_nn(s.p.data(), s.a.data(), s.q.data(), int(n), int(dh), int(n), int(n), int(dh), int(dh), 1.0f, 0.0f);
    auto rq = r_qkv.block(0, h * dh, n, dh);
    rq = f * q.cwiseProduct(s.p.cast<double>());
    s.q = q.cast<float>();
    gemm_tn(s.p.data(), s.a.data(), s.q.data(), int(n), int(dh), int(n), int(n), int(dh), int(dh), 1.0f, 0.0f);
    auto rk = r_qkv.block(0, d + h * dh, n, dh);
    rk = f * k.cwiseProduct(s.p.cast<double>());
    sums.q += rq.sum();
    sums.k += rk.sum();
  }
  return sums;
}

}  // namespace vitlens
