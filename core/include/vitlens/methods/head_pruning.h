// head_pruning.h — heads switched off by hand, on one image: heads named as text ("B.H", "B.*"),
// the head mask they give, one image's heads ranked for pruning (by its AttAttr scores, its
// attention confidence, …), and the pruning curve of one image: the target class's probability
// after the first k heads of an order are switched off, k = 0 … the order's length.
//
// Switching a head off is ForwardOptions::head_mask (vit.h): its attention A_l,h × 0 after the
// softmax, the projection bias kept — the masking of Hao et al. 2021's head pruning (attattr.h,
// pruning_curve over a set of images; here one image and any order, e.g. the heads in the order a
// user clicked them). Explaining an image under a mask is ExplainState::set_input (methods.h).
#pragma once

#include <string>
#include <vector>

#include "vitlens/methods/attattr.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"
#include "vitlens/model/vit.h"

namespace vitlens {

// The heads `text` names, in its order, as flat indices l·H + h: comma-separated entries "B.H"
// (block B, head H, both 0-based) or "B.*" (every head of block B, 0 … H−1). Spaces around entries
// are ignored; "" names none. Throws Error(bad_argument) for a malformed entry, a block or head out
// of range, or a head named twice.
std::vector<int> parse_head_list(const std::string& text, const Config& c);
// "B.H" of flat index l·H + h.
std::string head_name(int flat, const Config& c);
// The head mask (L·H values: 1 on, 0 off) with the heads `off` (flat indices) switched off.
// Throws Error(bad_argument) for an index out of range.
std::vector<float> head_mask_off(const std::vector<int>& off, const Config& c);

// How one image's heads are ranked for pruning: by its head scores (attattr.h, HeadScores), the
// lowest first.
enum class HeadRanking { attattr, attention_max, attention, taylor_loss, taylor };
constexpr int head_ranking_count = 5;
// "attattr", "attention-max", "attention-confidence", "taylor-loss", "taylor-prob" (the names of
// `vitlens heads`).
const char* head_ranking_name(HeadRanking r);
// One of those names, or "attention" for attention-confidence; throws Error(bad_argument) otherwise.
HeadRanking parse_head_ranking(const std::string& name);
const MatD& ranking_scores(const HeadScores& s, HeadRanking r);

// One image's head scores (head_scores_add over this image alone: F = the probability of
// `target`, L = its loss with `target` as the gold label) and its heads in pruning order by `r`
// (pruning_order: ascending, ties by index). `attr`: the image's attattr blocks for `target`
// (attattr_blocks on `tr`), needed for HeadRanking::attattr only (else it may be empty; the attattr
// scores are then left 0). `tr`: the image's forward pass with every head on.
struct ImageHeadRanking {
  HeadRanking ranking = HeadRanking::attattr;
  int target = -1;
  HeadScores scores;
  std::vector<int> order;  // (L·H) flat indices, the first to switch off first
};
ImageHeadRanking image_head_ranking(const Model& m, const Trace& tr, int target, HeadRanking r,
                                    const std::vector<AttAttrBlock>& attr);

// The pruning curve of one image: with every head on, then with the first k heads of `order`
// switched off, k = 1 … order.size() (a partial order is fine, e.g. the heads a user clicked):
//   prob[k]  = F, the target's probability (softmax, or sigmoid for a multi-label model),
//   logit[k] = its logit, top[k] = the top-1 class (top_k's first).
// `original` = top[0], the unpruned prediction; `first_change` = the first k whose top-1 is not
// `original` (−1: it never changes). target −1: the unpruned prediction. The blocks below the
// block of the k-th head are those of step k − 1, so step k runs only the blocks from there up
// (the values equal a forward pass with the whole mask: tested). `progress` (may be empty) is
// called after each step run (not after the steps read from `kept`, below) with the fraction of the
// curve done; returning false throws Error(cancelled).
// Throws Error(bad_argument) for a head out of range or named twice, or a target out of range.
struct ImagePruningCurve {
  int target = -1;
  int original = -1;
  std::vector<int> order;     // (K) the heads switched off, in order (flat l·H + h)
  std::vector<double> prob;   // (K + 1)
  std::vector<double> logit;  // (K + 1)
  std::vector<int> top;       // (K + 1)
  int first_change = -1;
};

// What image_pruning_curve has run for one image, kept by its caller beside that image (the wasm
// API's Input): a few orders' steps done, each with the logits after every step and the blocks'
// inputs after the last one. A curve whose order begins with a kept one's steps runs only the steps
// after them: the same curve stopped by its progress callback (the page withdraws it for a view's
// request) goes on, and the heads a user clicked with one more head added cost one step. A curve
// whose order is the beginning of a kept one's steps (a head un-clicked) runs none. The same values
// bit for bit. Each entry holds (L + 1) × (n, d) floats: 2 MB at DeiT-tiny's shape, 7.9 MB at
// ViT-B/16's; the least recently used of `capacity` entries is replaced.
struct PruningKept {
  struct Steps {
    std::vector<int> order;   // (k) the heads switched off so far
    std::vector<Vec> logits;  // (k + 1) the logits after each step (0: every head on)
    std::vector<Mat> xs;      // (L + 1) the blocks' inputs under those k heads off (head_pruning.cpp)
  };
  static constexpr size_t capacity = 3;
  std::vector<Steps> entries;  // the most recently used last
};

// `kept` (may be null): what earlier curves of this image ran, used and extended (PruningKept).
ImagePruningCurve image_pruning_curve(const Model& m, const Image& x, const std::vector<int>& order,
                                      int target = -1, const ProgressFn& progress = {},
                                      PruningKept* kept = nullptr);

}  // namespace vitlens
