// attattr.h — self-attention attribution (Hao, Dong, Wei & Xu, AAAI 2021) and what is built on it:
// head importance and head pruning over a set of images, and the attribution tree of one image.
//
// Attribution of block l (shared METHODS.md "attattr"):
//   Attr_l = A_l ⊙ (1/m)·Σ_{k=0}^{m−1} ∂F(α_k·A_l)/∂A_l,   α_k = k/m (left Riemann sum),
// where in each evaluation only block l's attention probabilities (all heads together) are replaced
// by α_k·A_l and the blocks above recompute theirs; F = the target class's probability (softmax or
// sigmoid, per Config::output).
//
// Batching: the blocks below l are the same for every α, so the trace is reused up to block l;
// since ctx_l = (α·A_l)·v_l = α·ctx_l, the m scaled copies start at block l's ctx and run stacked
// as (c·n)-row matrices through the rest of block l and the blocks above (the one block of
// model/block.h), forward and backward (c copies per chunk, chunks sized to bound memory). ∂F/∂A_l,h = dctx_h·v_hᵀ is linear in
// dctx, so the copies' dctx are summed before the one product with vᵀ.
#pragma once

#include <string>
#include <vector>

#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"
#include "vitlens/model/vit.h"

namespace vitlens {

// ∂F/∂logits for F = the probability of `target` (softmax: p_t(e_t − p); sigmoid: p_t(1 − p_t)·e_t).
Vec target_prob_grad(const Config& c, const Vec& logits, int target);

// The attattr matrices of every block (L × H × (n, n)) for the input `tr` was traced on (a forward
// pass without head mask or override). steps = m ≥ 1. Blocks run on up to `threads` threads (the
// result does not depend on the count); `progress` (may be empty) is called on the calling thread
// with the fraction of blocks done; when it returns false, throws Error(cancelled).
std::vector<AttAttrBlock> attattr_blocks(const Model& m, const Trace& tr, int target, int steps,
                                         int threads = 1, const ProgressFn& progress = {});

// The same by m separate vit_forward / vit_backward passes per block with
// ForwardOptions::override_block (the unbatched definition; for tests and the speed-up figure).
std::vector<AttAttrBlock> attattr_blocks_naive(const Model& m, const Trace& tr, int target, int steps);

// The image map (H/p, W/p): row 0 (CLS) of the rollout Ŝ_{L−1}·…·Ŝ_0 with
// Ŝ_l = rownorm(I + M_l⁺ / max M_l⁺), M_l⁺ = Σ_h max(Attr_{l,h}, 0) (Ŝ_l = I if M_l⁺ = 0);
// column 0 dropped.
Mat attattr_token_map(const std::vector<AttAttrBlock>& attr, const Config& c);

// ---------------------------------------------------------------------------------------------
// Heads over a set of images.

// Per-head scores (L, H) summed over the images of a set, each under its own target class:
//   attattr:   Σ_x max_{i,j} Attr_{l,h}(x)                         (Hao et al. 2021, signed max)
//   attention: Σ_x mean_i max_j A_{l,h}(x)[i, j]                   ("confidence", Voita et al. 2019)
//   taylor:    Σ_x |Σ_{i,j} A_{l,h}(x) ⊙ ∂F/∂A_{l,h}(x)|           (Michel, Levy & Neubig 2019)
struct HeadScores {
  MatD attattr, attention, taylor;  // (L, H) each
  int images = 0;
};
HeadScores head_scores_zero(const Config& c);
// Adds one image's scores; `attr` from attattr_blocks on `tr`, F = the probability of `target`.
void head_scores_add(HeadScores& s, const Model& m, const Trace& tr, int target,
                     const std::vector<AttAttrBlock>& attr);

// The heads (flat index l·H + h) in ascending score, ties by index: the pruning order.
std::vector<int> pruning_order(const MatD& scores);

// Accuracy with the first k heads of `order` masked (ForwardOptions::head_mask: the head's
// attention × 0, the projection bias stays), for k = 0…L·H: a scene counts as correct when the
// model's top-1 class is one of its labels.
std::vector<double> pruning_curve(const Model& m, const std::vector<Image>& images,
                                  const std::vector<std::vector<int>>& labels, const std::vector<int>& order);

// ---------------------------------------------------------------------------------------------
// The attribution tree (Hao et al. 2021, section 5): nodes are patches, edges i→j mean that in
// block `block` query patch i draws on key patch j with normalised score `score` > threshold.
struct AttrTreeEdge {
  int from, to, block;
  double score;
};
struct AttrTree {
  int root = -1;  // token index (≥ 1)
  double threshold = 0.4;
  std::vector<int> nodes;  // token indices in the order they joined, root first
  std::vector<AttrTreeEdge> edges;
};
// M_l = Σ_h Attr_{l,h}, divided by its maximum over the query rows i ≥ 1 (blocks whose maximum is
// ≤ 0 give no edges); the root is argmax_{j ≥ 1} Σ_i M_{L−1}[i, j] (only the CLS row is nonzero in
// the last block); then for l = L−2 … 0, every entry M̂_l[i, j] > τ with i a node before block l
// and j ≥ 1 not yet a node adds the edge i→j, the highest score first (one parent per node).
// `prefix`: the tokens before the patches (Config::prefix(); 1 for a CLS-only model), never nodes.
AttrTree attattr_tree(const std::vector<AttAttrBlock>& attr, double threshold, int prefix = 1);
// {root, threshold, grid:[rows, cols], nodes:[{token,row,col}], edges:[{from,to,block,score}]};
// row, col: the patch's place in the (H/p, W/p) grid (token t ≥ 1 is patch t − 1, row-major).
std::string attr_tree_json(const AttrTree& t, const Config& c);

}  // namespace vitlens
