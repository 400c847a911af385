// attention.cpp — softmax and the multi-head attention core: forward and backward, and for the
// LRP methods the double-precision forward and the relevance rules of the two-operand products
// (A·v, q·kᵀ) and of the softmax.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "vitlens/tensor/exp.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/tiny.h"
#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// The rows [begin, end) of p = softmax(s), both (rows, n) dense; p may be s (in place).
// Probabilities below 2⁻⁶⁴, in float and in double, are set to 0 (tensor/tiny.h): a peaked
// head's far keys otherwise make subnormal probabilities (e⁻⁸⁷ / Σ and below) and, from tiny
// normal ones, subnormal gradients (p ⊙ (dp − ⟨dp, p⟩), then dS·k). The double trace is flushed
// alike (the relevance rules' float products read it).
template <typename T>
void softmax_row_range(T* p, const T* s, int n, int begin, int end) {
  using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  for (int i = begin; i < end; ++i) {
    const T* in = s + ptrdiff_t(i) * n;  // (n)
    T* out = p + ptrdiff_t(i) * n;       // (n)
    exp_shifted(out, in, Eigen::Map<const Row>(in, n).maxCoeff(), n);
    const T sum = Eigen::Map<const Row>(out, n).sum();
    for (int j = 0; j < n; ++j) out[j] = flush_tiny(out[j] / sum);
  }
}

template <typename T>
void softmax_rows_t(MatT<T>& p, const MatT<T>& s) {
  const int n = int(s.cols());
  p.resize(s.rows(), n);
  // Rows in parallel (vitlens-mt.js) in ranges of ≥ 16 k values (DeiT-tiny's 197 × 197 splits, the
  // shipped model's 65 × 65 does not); p may be s (in place), row by row.
  parallel_ranges(int(s.rows()), std::max(32, 16384 / std::max(n, 1)),
                  [&](int begin, int end) { softmax_row_range(p.data(), s.data(), n, begin, end); });
}

}  // namespace

void softmax_rows(Mat& p, const Mat& s) { softmax_rows_t(p, s); }
void softmax_rows(MatD& p, const MatD& s) { softmax_rows_t(p, s); }

// ∂p_j/∂s_k = p_j(δ_jk − p_k)  ⇒  ds = p ⊙ (dp − ⟨dp, p⟩), for the rows of dp (the first ones of p);
// below 2⁻⁶⁴ set to 0 (tensor/tiny.h: a tiny probability times a small difference would be a
// subnormal operand of dS·k and dSᵀ·q)
void softmax_rows_backward(Mat& ds, const Mat& dp, const Mat& p) {
  assert(dp.rows() <= p.rows() && dp.cols() == p.cols());
  ds.resize(dp.rows(), p.cols());
  const Eigen::Index n = p.cols();
  for (Eigen::Index i = 0; i < dp.rows(); ++i) {
    const float dot = dp.row(i).dot(p.row(i));
    const float *pi = p.row(i).data(), *dpi = dp.row(i).data();
    float* dsi = ds.row(i).data();
    for (Eigen::Index j = 0; j < n; ++j) dsi[j] = flush_tiny(pi[j] * (dpi[j] - dot));
  }
}

namespace {

template <typename T>
void attention_forward_t(MatT<T>& ctx, std::vector<MatT<T>>& scores, std::vector<MatT<T>>& attn,
                         const MatT<T>& qkv, int heads, const float* head_mask,
                         const std::vector<MatT<T>>* override_attn, int copies, bool keep_scores, int rows) {
  const int n = int(qkv.rows()) / copies, d = int(qkv.cols()) / 3, dh = d / heads;
  const int r = rows > 0 ? rows : n;  // query rows per copy
  assert(r <= n && (r == n || !override_attn));
  const T scale = T(1) / std::sqrt(T(dh));
  ctx.resize(ptrdiff_t(copies) * r, d);
  const int units = copies * heads;
  if (keep_scores) scores.resize(size_t(units));
  attn.resize(size_t(units));
  // The copies' heads are independent (each writes its own A, S and columns of ctx): in ranges
  // over the compute pool (vitlens-mt.js) when a head's products are worth a thread, each
  // computed as on one thread. When the heads do not share out evenly over the pool's threads
  // (DeiT-tiny's 3 on 2), each head's query rows go in as many blocks as there are threads, so
  // that every thread gets the same rows: a row of S, A and ctx is computed as in the whole
  // product, only k_h and v_h are packed once per block.
  const int threads = compute_pool().available();
  const double head_macs = 2.0 * r * n * dh;
  const int blocks = !override_attn && threads >= 2 && units % threads != 0 &&
                             units * threads >= 2 * grain_for(head_macs / threads)
                         ? threads
                         : 1;
  if (!override_attn)
    for (size_t i = 0; i < size_t(units); ++i) {  // sized here: the blocks write rows of them
      attn[i].resize(r, n);
      if (keep_scores) scores[i].resize(r, n);
    }
  // A block's first row: r·b/blocks rounded to the nearest multiple of 4 (whole micro-tiles,
  // gemm.cpp's MR), at most r.
  const auto row_edge = [&](int b) { return b == blocks ? r : std::min(r, (2 * r * b / blocks + 4) / 8 * 4); };
  parallel_ranges(units * blocks, grain_for(head_macs / blocks), [&](int first, int last) {
    for (int item = first; item < last; ++item) {
      const int u = item / blocks, c = u / heads, h = u % heads;
      const int i0 = row_edge(item % blocks), rows_b = row_edge(item % blocks + 1) - i0;
      if (rows_b == 0) continue;
      const size_t i = size_t(u);
      const T* q = qkv.data() + ptrdiff_t(c) * n * 3 * d + h * dh;  // q_h, k_h, v_h: (n, dh), rows 3d apart
      const T* k = q + d;
      const T* v = q + 2 * d;
      MatT<T>& A = attn[i];
      if (override_attn) {
        if (keep_scores) {
          scores[i].resize(n, n);
          gemm_nt(scores[i].data(), q, k, n, n, dh, 3 * d, 3 * d, n, scale, T(0));  // S = q·kᵀ/√d_h
        }
        A = (*override_attn)[size_t(h)];
      } else {
        T* S = (keep_scores ? scores[i] : A).data() + ptrdiff_t(i0) * n;  // not kept: S formed in A
        gemm_nt(S, q + ptrdiff_t(i0) * 3 * d, k, rows_b, n, dh, 3 * d, 3 * d, n, scale, T(0));  // S = q·kᵀ/√d_h
        softmax_row_range(A.data() + ptrdiff_t(i0) * n, S, n, 0, rows_b);
      }
      if (head_mask && head_mask[h] == 0.0f) A.middleRows(i0, rows_b).setZero();
      gemm_nn(ctx.data() + (ptrdiff_t(c) * r + i0) * d + h * dh, A.data() + ptrdiff_t(i0) * n, v, rows_b,
              dh, n, n, 3 * d, d, T(1), T(0));  // ctx_h = A·v
    }
  });
}

}  // namespace

void attention_forward(Mat& ctx, std::vector<Mat>& scores, std::vector<Mat>& attn, const Mat& qkv,
                       int heads, const float* head_mask, const std::vector<Mat>* override_attn,
                       int copies, bool keep_scores, int rows) {
  attention_forward_t(ctx, scores, attn, qkv, heads, head_mask, override_attn, copies, keep_scores, rows);
}
void attention_forward(MatD& ctx, std::vector<MatD>& scores, std::vector<MatD>& attn,
                       const MatD& qkv, int heads, const float* head_mask,
                       const std::vector<MatD>* override_attn, int copies, bool keep_scores, int rows) {
  attention_forward_t(ctx, scores, attn, qkv, heads, head_mask, override_attn, copies, keep_scores, rows);
}

void attention_backward(Mat& dqkv, std::vector<Mat>& dscores, std::vector<Mat>& dattn,
                        const Mat& dctx, const Mat& qkv, const std::vector<Mat>& attn, int heads,
                        const float* head_mask, bool overridden, int copies, bool keep, int rows) {
  const int n = int(qkv.rows()) / copies, d = int(qkv.cols()) / 3, dh = d / heads;
  const int r = rows > 0 ? rows : n;  // query rows per copy (dctx's and A's)
  assert(r <= n && dctx.rows() == ptrdiff_t(copies) * r);
  const float scale = 1.0f / std::sqrt(float(dh));
  dqkv.resize(qkv.rows(), 3 * d);
  const size_t kept = keep ? size_t(copies) * size_t(heads) : 1;
  dscores.resize(kept);
  dattn.resize(kept);
  // the queries below the first r rows reach nothing: their gradient is 0
  if (r < n)
    for (int c = 0; c < copies; ++c) dqkv.block(ptrdiff_t(c) * n + r, 0, n - r, d).setZero();
  // The copies' heads are independent (each writes its own columns of dqkv): in ranges over the
  // compute pool (vitlens-mt.js) as in the forward pass; dA and dS not kept are scratch of the range.
  const int units = copies * heads;
  parallel_ranges(units, grain_for(4.0 * r * n * dh), [&](int first, int last) {
    Mat range_dA, range_dS;
    const bool whole = first == 0 && last == units;
    for (int u = first; u < last; ++u) {
      const int c = u / heads, h = u % heads;
      const size_t i = size_t(u);
      const ptrdiff_t o3 = ptrdiff_t(c) * n * 3 * d + h * dh;
      const float* q = qkv.data() + o3;  // q_h, k_h, v_h: (n, dh) each, rows 3d apart
      const float* k = q + d;
      const float* v = q + 2 * d;
      const float* dc = dctx.data() + ptrdiff_t(c) * r * d + h * dh;  // (r, dh), rows d apart
      float* dq = dqkv.data() + o3;  // dq_h, dk_h, dv_h: (n, dh) each, rows 3d apart
      float* dk = dq + d;
      float* dv = dq + 2 * d;
      const Mat& A = attn[i];  // (r, n), or (n, n) from a forward pass that formed every row: its first r
      Mat& dA = keep ? dattn[i] : whole ? dattn[0] : range_dA;
      Mat& dS = keep ? dscores[i] : whole ? dscores[0] : range_dS;
      dA.resize(r, n);
      gemm_nt(dA.data(), dc, v, r, n, dh, d, 3 * d, n, 1.0f, 0.0f);   // dA = dc·vᵀ
      gemm_tn(dv, A.data(), dc, n, dh, r, n, d, 3 * d, 1.0f, 0.0f);   // dv = Aᵀ·dc
      if (overridden || (head_mask && head_mask[h] == 0.0f)) {
        dS.setZero(r, n);
      } else {
        softmax_rows_backward(dS, dA, A);
      }
      gemm_nn(dq, dS.data(), k, r, dh, n, n, 3 * d, 3 * d, scale, 0.0f);  // dq = dS·k/√d_h
      gemm_tn(dk, dS.data(), q, n, dh, r, n, 3 * d, 3 * d, scale, 0.0f);  // dk = dSᵀ·q/√d_h
      if (keep && A.rows() > r) {  // kept in A's shape: the rows below r are 0
        for (Mat* m : {&dA, &dS}) {
          m->conservativeResize(A.rows(), n);
          m->bottomRows(A.rows() - r).setZero();
        }
      }
    }
  });
}

void softmax_relevance(MatD& r_in, const RowsD& r, const RowsD& s, const RowsD& p, SoftmaxRule rule) {
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

// The product rule's quotient S = R / Z, rounded to float for the products that carry it to the
// operands (below 2⁻⁶⁴: 0, tensor/tiny.h); returns the factor both operands' shares take:
// halved (Chefer 2021): S = safe_divide(R, Z), each operand receives the full ΣR, so ½;
// epsilon_half (AttnLRP): S = R / stab(2Z), each operand gets half of every term.
// r (rows, cols) ldr, z (rows, cols) ldz → S (rows, cols) dense.
double product_quotient(Mat& S, const double* r, int ldr, const double* z, int ldz, int rows, int cols,
                        ProductRule rule) {
  S.resize(rows, cols);
  for (int i = 0; i < rows; ++i) {
    const double *ri = r + ptrdiff_t(i) * ldr, *zi = z + ptrdiff_t(i) * ldz;
    float* si = S.row(i).data();
    if (rule == ProductRule::halved) {
      for (int j = 0; j < cols; ++j) si[j] = to_float_flushed(safe_divide(ri[j], zi[j]));
    } else {
      for (int j = 0; j < cols; ++j) si[j] = to_float_flushed(ri[j] / stabilise(2.0 * zi[j]));
    }
  }
  return rule == ProductRule::halved ? 0.5 : 1.0;
}

// Σ of a (rows, cols) block with leading dimension ld.
double block_sum(const double* x, int ld, int rows, int cols) {
  return Eigen::Map<const MatD, 0, Eigen::OuterStride<>>(x, rows, cols, Eigen::OuterStride<>(ld)).sum();
}

// out (rows, cols) ldo = f · x ⊙ p, x (rows, cols) ldx, p (rows, cols) dense; returns Σ out.
double scaled_product(double* out, int ldo, double f, const double* x, int ldx, const Mat& p, int rows, int cols) {
  for (int i = 0; i < rows; ++i) {
    const double* xi = x + ptrdiff_t(i) * ldx;
    const float* pi = p.row(i).data();
    double* oi = out + ptrdiff_t(i) * ldo;
    for (int j = 0; j < cols; ++j) oi[j] = f * xi[j] * double(pi[j]);
  }
  return block_sum(out, ldo, rows, cols);
}

}  // namespace

AttentionRelevanceSums attention_relevance(MatD& r_qkv, std::vector<MatD>& r_attn,
                                           const MatD& r_ctx, const MatD& qkv,
                                           const std::vector<MatD>& attn, const MatD& ctx,
                                           int heads, ProductRule product, SoftmaxRule softmax,
                                           LrpScratch& s) {
  const int n = int(qkv.rows()), d = int(qkv.cols()) / 3, dh = d / heads, ld = 3 * d;
  const double scale = 1.0 / std::sqrt(double(dh));
  // Only the first m query rows carry relevance (relevance_rows): R_A and R_q are zero below
  // them, and the products that sum over query rows (Aᵀ·S, Sᵀ·q) sum over m rows only.
  const int m = relevance_rows(r_ctx);
  AttentionRelevanceSums sums;
  r_qkv.resize(n, 3 * d);
  r_qkv.block(m, 0, n - m, d).setZero();
  r_attn.resize(size_t(heads));
  // One head's relevance, with hs its scratch.
  auto head_relevance = [&](int h, LrpScratch& hs, AttentionRelevanceSums& hsum) {
    const double* q = qkv.data() + h * dh;  // q_h, k_h, v_h: (n, dh) each, rows 3d apart
    const double* k = q + d;
    const double* v = q + 2 * d;
    // [q_h | k_h | v_h] in float (n, 3·dh): the right operands of the products with S, cast by
    // the thread that runs the head (not one copy of all of qkv read by every thread).
    hs.q.resize(n, 3 * dh);
    for (int part = 0; part < 3; ++part)
      hs.q.middleCols(part * dh, dh) = qkv.middleCols(part * d + h * dh, dh).cast<float>();
    const int ldf = 3 * dh;
    const float* qf = hs.q.data();
    const float* kf = qf + dh;
    const float* vf = qf + 2 * dh;
    double* rq = r_qkv.data() + h * dh;  // R_q, R_k, R_v of head h, rows 3d apart
    double* rk = rq + d;
    double* rv = rq + 2 * d;
    const MatD& A = attn[size_t(h)];  // (n, n)
    MatD& RA = r_attn[size_t(h)];     // (n, n)
    RA.resize(n, n);
    RA.bottomRows(n - m).setZero();
    // ctx_h = A·v: Z = ctx_h, R_A = f·A ⊙ (S·vᵀ), R_v = f·v ⊙ (Aᵀ·S)  (Jᵀ of each operand)
    double f = product_quotient(hs.a, r_ctx.data() + h * dh, d, ctx.data() + h * dh, d, m, dh, product);
    hs.p.resize(m, n);
    gemm_nt(hs.p.data(), hs.a.data(), vf, m, n, dh, dh, ldf, n, 1.0f, 0.0f);  // S·vᵀ
    hsum.attn += scaled_product(RA.data(), n, f, A.data(), n, hs.p, m, n);
    hs.w = A.topRows(m).cast<float>();  // (m, n)
    hs.p.resize(n, dh);
    gemm_tn(hs.p.data(), hs.w.data(), hs.a.data(), n, dh, m, n, dh, dh, 1.0f, 0.0f);  // Aᵀ·S
    hsum.v += scaled_product(rv, ld, f, v, ld, hs.p, n, dh);
    // scores = q·kᵀ/√d_h; the product rule works on Z = q·kᵀ (the constant factor passes R)
    hs.z.resize(m, n);
    gemm_nt(hs.z.data(), q, k, m, n, dh, ld, ld, n, 1.0, 0.0);
    const double* r_scores = RA.data();  // the identity rule passes R_A on without a copy
    if (softmax != SoftmaxRule::identity) {
      hs.u = scale * hs.z;  // (m, n) the scores
      softmax_relevance(hs.t, RA.topRows(m), hs.u, A.topRows(m), softmax);
      r_scores = hs.t.data();
    }
    hsum.scores += block_sum(r_scores, n, m, n);
    // Z = q·kᵀ: R_q = f·q ⊙ (S·k), R_k = f·k ⊙ (Sᵀ·q)
    f = product_quotient(hs.a, r_scores, n, hs.z.data(), n, m, n, product);
    hs.p.resize(m, dh);
    gemm_nn(hs.p.data(), hs.a.data(), kf, m, dh, n, n, ldf, dh, 1.0f, 0.0f);  // S·k
    hsum.q += scaled_product(rq, ld, f, q, ld, hs.p, m, dh);
    hs.p.resize(n, dh);
    gemm_tn(hs.p.data(), hs.a.data(), qf, n, dh, m, n, ldf, dh, 1.0f, 0.0f);  // Sᵀ·q
    hsum.k += scaled_product(rk, ld, f, k, ld, hs.p, n, dh);
  };
  // The heads are independent (each writes its own R_A and columns of R_qkv): in ranges over the
  // compute pool (vitlens-mt.js) when a head's products are worth a thread, with scratch of
  // their own; each head's sums are added in head order afterwards, as one thread adds them.
  std::vector<AttentionRelevanceSums> head_sums(static_cast<size_t>(heads));
  ranges_with_scratch(heads, grain_for(5.0 * m * n * dh), s, [&](int first, int last, LrpScratch& hs) {
    for (int h = first; h < last; ++h) head_relevance(h, hs, head_sums[size_t(h)]);
  });
  for (const AttentionRelevanceSums& h : head_sums) {
    sums.attn += h.attn;
    sums.v += h.v;
    sums.scores += h.scores;
    sums.q += h.q;
    sums.k += h.k;
  }
  return sums;
}

}  // namespace vitlens
