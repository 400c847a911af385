// methods_attention.cpp — the attention-based methods: raw-attention, rollout (Abnar & Zuidema
// 2020), attn-gradcam (Chefer et al. 2021's Grad-CAM baseline) and grad-rollout (Chefer et al.,
// ICCV 2021). Small functions over the float trace and the gradient of the target logit.
//
// Only the query row qᵀ·C of a rollout product is needed for the map (e₀ᵀ for a CLS-pooled model;
// METHODS.md "Method conventions" for the others), so the product is applied to the row vector
// from the last block down (O(L·n²) instead of O(L·n³)); the full (n, n) products are formed only
// when the intermediates are asked for.
#include <algorithm>
#include <numeric>

#include "methods_internal.h"

namespace vitlens::detail {

// rollout's head fusion: elementwise mean, max or min over the heads.
MatD fuse_heads(const std::vector<Mat>& attn, HeadFusion fusion) {
  if (fusion == HeadFusion::mean) return head_mean(attn);
  MatD f = attn[0].cast<double>();
  for (size_t h = 1; h < attn.size(); ++h) {
    if (fusion == HeadFusion::max)
      f = f.cwiseMax(attn[h].cast<double>());
    else
      f = f.cwiseMin(attn[h].cast<double>());
  }
  return f;
}

// Zeroes the floor(ratio·n²) smallest entries (ties: lower row-major index first) except (0, 0),
// which is kept and not replaced by another entry (the reference's convention).
void discard_lowest(MatD& f, double ratio) {
  const size_t count = size_t(double(f.size()) * ratio);
  if (count == 0) return;
  std::vector<Eigen::Index> order(size_t(f.size()));
  std::iota(order.begin(), order.end(), Eigen::Index(0));
  const double* v = f.data();
  auto lower = [v](Eigen::Index a, Eigen::Index b) { return v[a] < v[b] || (v[a] == v[b] && a < b); };
  if (count < order.size()) std::nth_element(order.begin(), order.begin() + Eigen::Index(count), order.end(), lower);
  for (size_t i = 0; i < std::min(count, order.size()); ++i)
    if (order[i] != 0) f.data()[order[i]] = 0.0;
}

// E_h[A_L][0, 1:] (last block).
void raw_attention(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  out.token_map = grid_from_row(query_row(m.config) * head_mean(st.trace.blocks.back().attn), m.config);
  add_attention_intermediates(out, st.trace, nullptr);
}

// Abnar & Zuidema 2020: Â_b = rownorm(fuse_h(A_b) + I), C = Â_L·…·Â_s, map = C[0, 1:].
void rollout(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const int n = m.config.tokens();
  std::vector<MatD> steps(st.trace.blocks.size());  // (L) × (n, n)
  for (size_t b = size_t(opt.start_layer); b < steps.size(); ++b) {
    MatD f = fuse_heads(st.trace.blocks[b].attn, opt.head_fusion);
    if (opt.discard_ratio > 0) discard_lowest(f, opt.discard_ratio);
    f += MatD::Identity(n, n);
    const Eigen::VectorXd rows = f.rowwise().sum();  // per row, not per column
    steps[b] = rows.asDiagonal().inverse() * f;
  }
  const Eigen::RowVectorXd row =
      rollout_row(steps, opt.start_layer, m.config, opt.want_intermediates ? &out.blocks : nullptr);
  out.token_map = grid_from_row(row, m.config);
  add_attention_intermediates(out, st.trace, nullptr);
}

// Chefer et al. 2021's Grad-CAM baseline: w_h = mean_{j≥1} ∇A_L[h, 0, j],
// map = (E_h[w_h·A_L[h, 0, 1:]])⁺ — with the query row qᵀ· in place of row 0 and the patch
// columns in place of j ≥ 1.
void attn_gradcam(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Grads& g = target_grads(m, st, out.target);
  const std::vector<Mat>& A = st.trace.blocks.back().attn;
  const std::vector<Mat>& dA = g.blocks.back().attn;
  const Eigen::Index n = A[0].cols(), P = m.config.num_patches();
  const Eigen::RowVectorXd q = query_row(m.config);
  Eigen::RowVectorXd row = Eigen::RowVectorXd::Zero(n);  // (n)
  for (size_t h = 0; h < A.size(); ++h) {
    const double w = (q * dA[h].cast<double>()).tail(P).mean();
    row += w * (q * A[h].cast<double>());
  }
  row = (row / double(A.size())).cwiseMax(0.0);
  out.token_map = grid_from_row(row, m.config);
  add_attention_intermediates(out, st.trace, &g);
}

// Chefer, Gur & Wolf, ICCV 2021: R = I; for b = 1…L: R ← R + Ā_b·R with Ā_b = E_h[(∇A_b ⊙ A_b)⁺];
// map = R[0, 1:], i.e. row 0 of (I + Ā_L)·…·(I + Ā_1).
void grad_rollout(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Grads& g = target_grads(m, st, out.target);
  std::vector<MatD> steps(st.trace.blocks.size());  // (L) × (n, n)
  for (size_t b = 0; b < steps.size(); ++b) {
    // Ā_b = E_h[(∇A_h ⊙ A_h)⁺]
    steps[b] = positive_head_mean(st.trace.blocks[b].attn, &g.blocks[b].attn,
                                  opt.want_intermediates ? &out.blocks[b].product_heads : nullptr);
    steps[b].diagonal().array() += 1.0;
  }
  const Eigen::RowVectorXd row = rollout_row(steps, 0, m.config, opt.want_intermediates ? &out.blocks : nullptr);
  out.token_map = grid_from_row(row, m.config);
  add_attention_intermediates(out, st.trace, &g);
}

}  // namespace vitlens::detail
