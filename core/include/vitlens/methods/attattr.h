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
// pass without override; with a head mask (Trace::head_mask) the scaled copies run the blocks above
// masked too, and an off head's Attr is 0 since its A is). steps = m ≥ 1. Blocks run on up to `threads` threads (the
// result does not depend on the count); `progress` (may be empty) is called on the calling thread
// with the fraction of blocks done; when it returns false, throws Error(cancelled). `keep` (may be
// null; ExplainState::attattr) holds what earlier calls on this trace computed: when its target
// and steps are these, only what it lacks is computed, and what this call computes is added to it
// (before a cancel too); else it is started anew for them.
std::vector<AttAttrBlock> attattr_blocks(const Model& m, const Trace& tr, int target, int steps,
                                         int threads = 1, const ProgressFn& progress = {},
                                         AttAttrSums* keep = nullptr);

// The same by m separate vit_forward / vit_backward passes per block with
// ForwardOptions::override_block (the unbatched definition; for tests and the speed-up figure).
std::vector<AttAttrBlock> attattr_blocks_naive(const Model& m, const Trace& tr, int target, int steps);

// The image map (H/p, W/p): row 0 (CLS) of the rollout Ŝ_{L−1}·…·Ŝ_0 with
// Ŝ_l = rownorm(I + M_l⁺ / max M_l⁺), M_l⁺ = Σ_h max(Attr_{l,h}, 0) (Ŝ_l = I if M_l⁺ = 0);
// column 0 dropped.
Mat attattr_token_map(const std::vector<AttAttrBlock>& attr, const Config& c);

// ---------------------------------------------------------------------------------------------
// Heads over a set of images.

// ∂L/∂logits for L = the model's training loss on the gold labels `gold` (class indices, ≥ 1):
//   sigmoid (multi-label): L = Σ_c BCE(σ(z_c), y_c), y the multi-hot gold vector:  ∂L/∂z = σ(z) − y;
//   softmax: L = mean over the gold labels g of −log p_g:  ∂L/∂z = p − mean_g e_g
//   (one gold label: the cross-entropy of Hao et al.'s classifiers).
Vec gold_loss_grad(const Config& c, const Vec& logits, const std::vector<int>& gold);

// Per-head scores (L, H) summed over the images of a set. F = the probability of the image's
// `target` class; L = the loss on its gold labels (gold_loss_grad).
//   attattr:       Σ_x max_{i,j} Attr_{l,h}(x)       (Hao et al. 2021, section 4.1, signed max; the
//                                                     published code's prune_head_with_attr.py sums
//                                                     attr.max() per head the same way)
//   attention_max: Σ_x max_{i,j} A_{l,h}(x)           (the "attention score" Hao et al. rank heads by
//                                                     in their per-layer comparison, section 4.1: the
//                                                     attribution score's max taken over A instead)
//   attention:     Σ_x mean_i max_j A_{l,h}(x)        ("confidence", Voita et al. 2019)
//   taylor_loss:   Σ_x |Σ_{i,j} A_{l,h}(x) ⊙ ∂L/∂A_{l,h}(x)|   (Michel, Levy & Neubig 2019, the
//                                                     Taylor baseline as Hao et al. write it,
//                                                     I_h = E_x|A_hᵀ ∂L(x)/∂A_h|, L with the gold label)
//   taylor:        Σ_x |Σ_{i,j} A_{l,h}(x) ⊙ ∂F/∂A_{l,h}(x)|   (the same with F, the target's
//                                                     probability, in place of the loss: no label needed)
// Sums, not means: the ranking is the same. The published Taylor code (Michel et al.'s) differs
// in two ways we do not follow: it takes |·| per query token of the head's context vectors
// before summing, and it L2-normalises the scores within each layer before ranking.
struct HeadScores {
  MatD attattr, attention_max, attention, taylor_loss, taylor;  // (L, H) each
  int images = 0;
};
HeadScores head_scores_zero(const Config& c);
// Adds one image's scores; `attr` from attattr_blocks on `tr` (empty: the attattr scores are not
// added), F = the probability of `target`, `gold` the image's labels for the loss (empty: {target},
// the loss of the predicted class).
void head_scores_add(HeadScores& s, const Model& m, const Trace& tr, int target,
                     const std::vector<AttAttrBlock>& attr, const std::vector<int>& gold = {});

// The heads (flat index l·H + h) in ascending score, ties by index: the pruning order.
std::vector<int> pruning_order(const MatD& scores);

// The share of images whose top-1 class under the head mask `mask` (L·H entries, 1 on, 0 pruned:
// ForwardOptions::head_mask, the head's attention × 0, the projection bias stays) is one of
// their labels.
double masked_accuracy(const Model& m, const std::vector<Image>& images, const std::vector<std::vector<int>>& labels,
                       const std::vector<float>& mask);

// Accuracy with the first k heads of `order` masked, for k = 0…L·H: a scene counts as correct when
// the model's top-1 class is one of its labels.
std::vector<double> pruning_curve(const Model& m, const std::vector<Image>& images,
                                  const std::vector<std::vector<int>>& labels, const std::vector<int>& order);

// The per-layer analysis of Hao et al. 2021 (section 4.1, their figure of attribution against
// attention scores): within block l alone, the heads ranked by `scores` (row l, descending, ties
// by index), and the accuracy
//   prune_top[l][k]: with the k highest-scoring heads of block l pruned (the others on),
//   keep_top[l][k]:  with only those k kept (the other H − k heads of block l pruned),
// for k = 0…H; every other block unpruned. prune_top[l][0] = keep_top[l][H] = the clean accuracy.
struct LayerPruning {
  std::vector<std::vector<double>> prune_top, keep_top;  // (L, H + 1) each
};
LayerPruning layer_pruning(const Model& m, const std::vector<Image>& images,
                           const std::vector<std::vector<int>>& labels, const MatD& scores);

// ---------------------------------------------------------------------------------------------
// The attribution tree (Hao et al. 2021, section 5): nodes are patches, edges i→j mean that in
// block `block` query patch i draws on key patch j with normalised score `score` > threshold.
enum class TreeConvention { ours, reference };  // see attattr_tree
struct AttrTreeEdge {
  int from, to, block;
  double score;
};
struct AttrTree {
  int root = -1;  // token index (≥ prefix)
  double threshold = 0.4;
  TreeConvention convention = TreeConvention::ours;
  std::vector<int> nodes;  // token indices in the order they joined, root first
  std::vector<AttrTreeEdge> edges;
};
// Two conventions for building it (`vitlens tree --convention`):
//
// ours (the default; shared METHODS.md "attribution tree"): M_l = Σ_h Attr_{l,h}, divided by its
// maximum over the query rows i ≥ prefix (blocks whose maximum is ≤ 0 give no edges); the root is
// argmax_{j ≥ prefix} Σ_i M_{L−1}[i, j] — the patch the last block's CLS row draws on most (only
// the CLS row of the last block reaches the output); then for l = L−2 … 0, every entry
// M̂_l[i, j] > τ with i a node before block l and j ≥ prefix not yet a node adds the edge i→j, the
// highest score first (one parent per node). Default because every choice is invariant to the
// order of the tokens: a patch's index is only its place in the raster scan, so an edge should not
// win its child for coming first; and the root is the patch that feeds the prediction.
//
// reference: the conventions of the published code (github.com/YRdddream/attattr,
// examples/attribution_tree.py), which the paper's figures were drawn with: M̂_l = M_l / |max of
// M_l over the query rows i ≥ prefix| (all key columns); the root is the query token i ≥ prefix
// with the largest Σ_j of the positive off-diagonal entries of Σ_l M_l (normalised by its maximum);
// block L−2 adds root→j for every j ≠ root with M̂ > τ; then for l = L−3 … 0 the candidates (i, j)
// are visited in index order (i over the non-prefix tokens, j over all tokens), and (i, j) with
// M̂_l[i, j] > τ, i in the tree and j not adds i→j at once — so a node added in block l can
// parent another in block l, and prefix tokens (CLS) can be children (never parents). Edges keep
// M̂ as their score. Blocks whose maximum is 0 give no edges (the code would divide by 0).
const char* tree_convention_name(TreeConvention c);
// "ours" | "reference"; throws Error(bad_argument) otherwise.
TreeConvention parse_tree_convention(const std::string& name);

// `prefix`: the tokens before the patches (Config::prefix(); 1 for a CLS-only model).
AttrTree attattr_tree(const std::vector<AttAttrBlock>& attr, double threshold, int prefix = 1,
                      TreeConvention convention = TreeConvention::ours);
// {root, threshold, grid:[rows, cols], nodes:[{token,row,col}], edges:[{from,to,block,score}]};
// row, col: the patch's place in the (H/p, W/p) grid (token t ≥ prefix is patch t − prefix,
// row-major); −1 for a prefix token (CLS), which only the reference convention makes a node.
// Also "convention": "ours" | "reference".
std::string attr_tree_json(const AttrTree& t, const Config& c);

}  // namespace vitlens
