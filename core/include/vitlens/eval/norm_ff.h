// norm_ff.h — the analyses of Kobayashi et al. (ICLR 2024, "Analyzing Feed-Forward Blocks in
// Transformers through the Lens of Attention Maps") on the norm-based maps of norm_maps.h, and
// the export of those maps as one .npz file.
//
// Over a set of images, per block:
//  (a) contextualisation change through the FF: Spearman's ρ between the maps of two stages,
//      (i) over the whole n×n map flattened (one ρ per image, the paper's measure: the two
//      "attention maps" of a sequence compared as a whole) and (ii) per query row (ρ of row i's
//      distribution over the keys, averaged over the rows), each averaged over the images;
//  (b) which token pairs a stage transition amplifies: the share of query i's context that key j
//      holds, s[i, j] = N[i, j] / Σ_{k≠i} N[i, k] (k over the other n − 1 tokens, CLS included; the
//      query's own entry, which the residual dominates, left out), before and after; the
//      amplification of a pair is s_after[i, j] / s_before[i, j], and a group of pairs reports the
//      geometric mean (exp of the mean log ratio, pooled over the group's pairs of all images).
//      Groups: by pair type from the scene masks (patch_regions, pair_type) and by the
//      Chebyshev distance max(|Δrow|, |Δcol|) between the two patches, and apart the pairs of a
//      patch query with a prefix key (CLS, …: where the share the patch pairs lose goes). Patch
//      queries only, i ≠ j;
//      pairs with a zero share before or after are skipped (counted in `skipped`).
//  (c) the change through every stage: (a) and (b) for each transition of norm_ff_transitions
//      (consecutive stages, and from before the FF to after the second residual), and the mixing
//      ratio of each stage (mean over tokens and images).
// Deviation from the paper (text models, post-LN BERT and pre-LN GPT-2): the image analogue of
// its linguistic pair categories are the scene's spatial categories above; our pre-LN ViT has no
// LayerNorm after the second residual inside the block, so "layer" ends at the residual.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/methods/methods.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/model/config.h"

namespace vitlens {

// ---- Export ---------------------------------------------------------------------------------

// The .npz written by `vitlens explain --method norm-based --save-stages` and the page:
//   atb, atb_res, atb_res_ln, atb_res_ln_ff, layer   float32 (L, n, n)  N_b[i, j] = ‖z_{i←j}‖₂
//   mixing_ratio                                     float32 (L, 5, n)  r_i per stage, stage order
//                                                                      as the five arrays above
//   atb_heads (only when `heads` is not empty)       float32 (L, H, n, n) ‖A_h[i, j]·V_h'[j]‖₂
// `heads` is empty or L × H × (n, n) (norm_head_maps per block). Throws Error(bad_argument) when
// the shapes disagree.
std::vector<uint8_t> encode_norm_stages_npz(const std::vector<NormBlock>& blocks,
                                            const std::vector<std::vector<Mat>>& heads);
// The array name of stage s in that file ("atb_res_ln": the stage name with '_' for '-').
std::string norm_stage_array_name(NormStage s);

// ---- Patch regions and pair types -----------------------------------------------------------

constexpr int region_background = -1;  // the masks cover at most background_share of the patch
constexpr int region_mixed = -2;       // neither an item patch nor a background patch

struct RegionOptions {
  double item_share = 0.5;        // a patch belongs to item k when mask k covers MORE than this share
  double background_share = 0.1;  // a patch is background when all masks together cover AT MOST this
};

// Per patch (row-major over the grid_h × grid_w patch grid) its region: the item index k ≥ 0,
// region_background or region_mixed. `masks` are K masks of height × width pixels (non-zero = the
// item; an item's visible mask, so they do not overlap), height and width multiples of `patch`.
// Throws Error(bad_argument) on a size mismatch.
std::vector<int> patch_regions(const std::vector<std::vector<uint8_t>>& masks, int height, int width, int patch,
                               const RegionOptions& opt = {});

enum class PairType { same_item, other_item, item_background, background_background };
constexpr int pair_type_count = 4;
const char* pair_type_name(PairType t);  // "same item", "other item", "item–background", "background"

// The type of the (query, key) pair of patches with regions rq and rk: same_item (same k), other_item
// (two different items), item_background (an item and the background, either way round),
// background_background; −1 when either is region_mixed.
int pair_type(int rq, int rk);

// ---- The analysis ---------------------------------------------------------------------------

struct NormTransition {
  NormStage from, to;
};
constexpr int norm_ff_transition_count = 6;
// atb→atb-res, atb-res→atb-res-ln, atb-res-ln→atb-res-ln-ff (the FF), atb-res-ln-ff→layer (the
// second residual), atb-res-ln→layer (FF and residual together), atb-res→layer (the block's
// second half).
const std::array<NormTransition, norm_ff_transition_count>& norm_ff_transitions();
constexpr int norm_ff_ff = 2;    // index of atb-res-ln → atb-res-ln-ff
constexpr int norm_ff_res2 = 4;  // index of atb-res-ln → layer

// Sums over images; the means are the accessors below.
struct NormFfStats {
  int blocks = 0, images = 0, max_distance = 0;
  std::vector<double> rho_flat, rho_row;  // (L, T) sums of ρ over images
  std::vector<double> mixing;             // (L, 5) sums of the per-image token mean
  std::vector<double> log_type;           // (L, T, 4) sums of log(s_after / s_before)
  std::vector<int64_t> n_type;            // (L, T, 4) pairs
  std::vector<double> log_prefix;         // (L, T) patch queries → prefix keys (CLS, …)
  std::vector<int64_t> n_prefix;          // (L, T)
  std::vector<double> log_dist;           // (L, T, D) by Chebyshev distance 1…D (index d − 1)
  std::vector<int64_t> n_dist;            // (L, T, D)
  int64_t skipped = 0;                    // pairs with a zero share before or after
  int64_t item_patches = 0, background_patches = 0, mixed_patches = 0;  // over all images

  double mean_rho_flat(int b, int t) const { return rho_flat[size_t(b * norm_ff_transition_count + t)] / images; }
  double mean_rho_row(int b, int t) const { return rho_row[size_t(b * norm_ff_transition_count + t)] / images; }
  double mean_mixing(int b, int s) const { return mixing[size_t(b * norm_stage_count + s)] / images; }
  // The geometric-mean amplification of a pair type / distance (NaN when no pair).
  double amp_type(int b, int t, int type) const;
  int64_t pairs_type(int b, int t, int type) const;
  double amp_dist(int b, int t, int d) const;  // d = 1 … max_distance
  double amp_prefix(int b, int t) const;       // a patch query's prefix keys (CLS, …)
};

// Starts the sums for a model of this shape.
NormFfStats norm_ff_start(const Config& c);

// Adds one image: its per-block norm maps (Explanation::norm) and its patch regions
// (patch_regions; empty: no pair statistics for this image). Throws Error(bad_argument) on shapes
// that do not fit.
void norm_ff_add(NormFfStats& s, const std::vector<NormBlock>& norm, const Config& c, const std::vector<int>& regions);

// The row-wise ρ of two (n, n) maps: the mean over the rows i of spearman(A[i, :], B[i, :]).
double spearman_rows(const Mat& a, const Mat& b);

// ---- One image: a stage transition's effect, block by block ----------------------------------

// What a teaching view draws beside one image's maps of two stages (by default the FF's, atb-res-ln →
// atb-res-ln-ff), per block b; every field is this image's own term of the data-set statistics above.
struct NormImageBlock {
  Mat share_before, share_after;  // (n, n) s[i, j] = N[i, j] / Σ_{k≠i} N[i, k] for j ≠ i; s[i, i] = 0
                                  //        (a zero row stays zero): key j's share of query i's context
  std::vector<double> rho_query;  // (n)    ρ_i = Spearman(N_before[i, :], N_after[i, :]) over all n keys
  double rho_flat = 0;            // ρ over the whole n×n maps flattened (analyze-ff's ρ, for one image)
  double rho_rows = 0;            // mean_i ρ_i (analyze-ff's per-row ρ, for one image)
  double mixing_mean[norm_stage_count] = {};  // r̄_s = (1/n) Σ_i r_i at each stage s (NormStage order)
};

// Per block, the transition `t` of one image's maps (Explanation::norm: every block with the same n,
// both stages' maps (n, n), every stage's mixing ratios (n)). Throws Error(bad_argument) on maps of
// other shapes or no block.
std::vector<NormImageBlock> norm_image_summary(const std::vector<NormBlock>& norm,
                                               NormTransition t = {NormStage::atb_res_ln, NormStage::atb_res_ln_ff});

// Reports: a Markdown summary with every table (`command` is how it was made), the tables as CSV
// (one long table: block, quantity, key, value, count) and JSON, and the SVG plots by name
// ("ff_spearman.svg", "ff_pair_types.svg", "ff_distance.svg", "mixing.svg").
std::string norm_ff_markdown(const NormFfStats& s, const std::string& title, const std::string& command);
std::string norm_ff_csv(const NormFfStats& s);
std::string norm_ff_json(const NormFfStats& s);
std::vector<std::pair<std::string, std::string>> norm_ff_svgs(const NormFfStats& s);

}  // namespace vitlens
