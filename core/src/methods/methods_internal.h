// methods_internal.h — what methods.cpp (registry, dispatch) shares with the method-family files
// (methods_attention.cpp, methods_lrp.cpp). Not a public header.
#pragma once

#include "vitlens/methods/methods.h"

namespace vitlens::detail {

// A method fills out.token_map (and out.pixel_map if it computes one natively), the
// conservation report and the intermediates; out.method and out.target are set by the caller,
// which has validated every option the method reads.
using MethodFn = void (*)(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);

void raw_attention(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void rollout(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void attn_gradcam(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void grad_rollout(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void transformer_attribution(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void partial_lrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void lrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void attnlrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void attattr(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void norm_based(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void saliency(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void grad_x_input(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void integrated_gradients(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);
void smoothgrad(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt);

// The forward options of the pass `tr` recorded: its head mask (ExplainState), so that every pass a
// method runs on its own (IG's path, smoothgrad's copies) is of the same masked model.
ForwardOptions masked(const Trace& tr);

// The (H/p, W/p) token map from a row over the n tokens: the prefix columns dropped, row-major.
Mat grid_from_row(const Eigen::RowVectorXd& row, const Config& c);

// qᵀ, the query of the methods (model.h, query_weights): e₀ᵀ for a CLS-pooled model; the row
// qᵀ·M of an (n, n) matrix M is what becomes the map ("row 0" of METHODS.md).
Eigen::RowVectorXd query_row(const Config& c);

// E_h[f(h)] of H (n, n) matrices in double.
MatD head_mean(const std::vector<Mat>& mats);

// E_h[(W_h ⊙ X_h)⁺] of H (n, n) matrices in double (W_h = (*w)[h]; without w, E_h[(X_h)⁺]); each
// head's term (W_h ⊙ X_h)⁺ also goes to `terms` when it is given. grad-rollout's Ā (W = ∇A, X = A)
// and transformer-attribution's (W = ∇A or A, X = R_A). X = Mat or MatD.
template <typename X>
MatD positive_head_mean(const std::vector<X>& x, const std::vector<Mat>* w, std::vector<Mat>* terms);

// Fills out.blocks (when asked) with E_h[A_b] for every block and, if `g`, E_h[∇A_b].
void add_attention_intermediates(Explanation& out, const Trace& tr, const Grads* g);

// The map row of a product of per-block steps, qᵀ·step_{L−1}·…·step_start (rollout,
// grad-rollout, transformer-attribution, norm-based), and, if `blocks`, each block's step and the
// product of the steps up to it, step_b·…·step_start (the teaching views' "accumulated").
Eigen::RowVectorXd rollout_row(const std::vector<MatD>& steps, int start, const Config& c,
                               std::vector<BlockIntermediates>* blocks);

// rollout's head fusion of the H (n, n) attention matrices: elementwise mean, max or min.
MatD fuse_heads(const std::vector<Mat>& attn, HeadFusion fusion);
// rollout's discard: zeroes the floor(ratio·n²) smallest entries of f (ties: lower row-major index
// first) except (0, 0).
void discard_lowest(MatD& f, double ratio);

// The relevance pass of Chefer's rules with the linear and add rules `opt` asks for (`rules`
// receives them): st.chefer for the paper's rules (shared by every method that uses them),
// st.chefer_variant otherwise.
RelevancePass& chefer_pass(ExplainState& st, const MethodOptions& opt, LrpRules& rules);

// That pass for `target` (`rules` receives its rules), carried (on) down to block `block`'s input:
// transformer-attribution's stops at R_A, and its guided walk shows the relevance at each block's
// input.
const RelevancePass& chefer_pass_to_input(const Model& m, ExplainState& st, const MethodOptions& opt, int target,
                                          int block, LrpRules& rules);

}  // namespace vitlens::detail
