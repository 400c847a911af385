// lrp.h — the LRP mechanism: rule sets as data, the double-precision trace they run on, and the
// relevance pass that walks it from the logits down to the pixels.
//
// As in Zennit, a rule set only names which rule each layer kind uses (`LrpRules`); one routine
// (`lrp_propagate`) applies it, calling each layer's relevance function from that layer's file
// (layers.h). Chefer et al. 2021 and AttnLRP (Achtibat et al. 2024) are two instances.
//
// Why double: the rules divide by sums that nearly cancel (a + b in the adds, the entries of
// q·kᵀ in the products, with only a 1e-9 stabiliser), so on a DeiT-tiny-shaped model a float32
// forward moves the transformer-attribution map by ~0.1 of its maximum. The pass therefore runs
// on a forward pass recomputed in double from the float weights and input (`lrp_forward`).
//
// Deliberately not here: the methods' maps (methods_lrp.cpp) and any gradient (vit.h).
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "vitlens/layers/layers.h"
#include "vitlens/model/block.h"
#include "vitlens/model/model.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

enum class SeedRule {
  one_hot,  // 1.0 at the target (Chefer et al. 2021)
  logit,    // the target's logit value (AttnLRP)
};

// Which rule each layer kind takes. GELU and dropout pass relevance unchanged in both sets.
struct LrpRules {
  const char* name;
  SeedRule seed;
  LinearRule linear;  // head, qkv, proj, fc1, fc2
  AddRule add;        // the residual adds and the position-embedding add
  ProductRule product;  // A·v and q·kᵀ
  SoftmaxRule softmax;
  LayerNormRule layernorm;
  PatchRule patch;    // the patch embedding, down to the pixels
};

// Chefer, Gur & Wolf, CVPR 2021: αβ linears, normalised adds, halved products, identity
// softmax / LayerNorm, one-hot seed, z^B at the pixels.
extern const LrpRules kCheferRules;
// AttnLRP (Achtibat et al., ICML 2024): ε linears (bias in the denominator), ε adds, ε products
// on 2Z, the softmax Taylor rule, ε through the LayerNorm centring, the logit as seed.
extern const LrpRules kAttnLrpRules;
// Chefer's rules with the given linear and add rules: kCheferRules for (alpha1beta0, normalised);
// (alpha1beta0_separate, plain) are the older rules of the paper's "LRP" and "partial LRP"
// baselines (its code's first rule set), which do not conserve relevance.
LrpRules chefer_rules(LinearRule linear, AddRule add);
// The same rule for every layer kind (names aside).
bool same_rules(const LrpRules& a, const LrpRules& b);

// The forward pass in double precision: what the relevance rules read (the blocks recorded with
// BlockRecord::relevance, block.h).
struct TraceD {
  MatD patches;       // (P, C·p·p)
  MatD embed;         // (P, d)   patches·Wᵀ + b
  MatD tokens_nopos;  // (pos_rows, d) the rows the position-embedding add covers, before it
  MatD pos;           // (pos_rows, d) pos_embed in double
  MatD tokens;        // (n, d)   E0 (vit.h, tokens_forward)
  VecD pre_mean, pre_rstd;  // (n) pre_norm; block 0's x is LN_pre(E0)
  std::vector<BlockTraceD> blocks;  // (L); block b+1's x is block b's output
  MatD x_final;       // (n, d)   rows ≥ head_rows zero unless lrp_forward's all_rows
  MatD ln_f;          // (n, d)   final norm (x_final without one); as x_final
  VecD lnf_mean, lnf_rstd;  // (n)
  MatD pooled;        // (k, d)   the pool parts
  MatD head_x;        // (k, d)   fc_norm(pooled) (pooled without it)
  VecD fc_mean, fc_rstd;    // (k)
  VecD logits;        // (classes)
};

// Recomputes the forward pass of `x` in double from the model's float weights, with the heads
// `head_mask` switches off (ForwardOptions::head_mask: their A = 0; empty = all on). The
// relevance rules then read A = 0 and a zero context for an off head, so no relevance reaches it.
// Relevance enters the last block only at the rows the head reads (head_rows: the pooled tokens),
// so from its attention on that block and the final norm are formed for those rows only, the
// other rows of their activations (attn, ctx, attn_out, x_mid, ln2, fc1, act, mlp_out, x_final,
// ln_f and their statistics) left zero, unless `all_rows`: the same relevance either way (to the
// last bit in wasm, within 1e-12 natively: tests/native/test_variants.cpp). A patch-mean pooling
// reads every row.
void lrp_forward(TraceD& t, const Model& m, const Image& x, const std::vector<float>& head_mask = {},
                 bool all_rows = false);
// The reduced-precision alternative (the methods' `precision=float32`): the float forward pass
// already run (`tr`, recorded with BlockRecord::all, any head mask), its activations cast to
// double. No forward pass is recomputed; the rules then read float32 activations, whose rounding
// the Add rule's a + b and the α1β0 denominators can amplify (README, "Attribution methods").
void lrp_trace_from_float(TraceD& t, const Model& m, const Trace& tr);

// One layer's line of the conservation report: Σ of the relevance arriving at the layer and Σ
// of the relevance it passes to all its inputs. Layer names follow the reference
// (tests/reference/methods_ref.py): head, [fc_norm], pool, [norm], blocks.N.{add2, mlp.fc2,
// mlp.act, mlp.fc1, norm2, clone2, add1, attn.proj, attn.A_v, attn.softmax, attn.q_kT, attn.qkv,
// norm1, clone1}, [norm_pre], pos_embed.add, drop_cls (every prefix token's share), patch_embed.
// Through the pooling (METHODS.md "Method conventions"): the head is one linear layer on the pool
// parts (distilled: ½[W_head, W_dist]); a token part passes its relevance to its token, a mean
// part is a linear layer with weights 1/P, both with the rule set's linear rule; fc_norm and
// norm_pre take the rule set's LayerNorm rule, LayerScale and the activation pass it unchanged.
struct LayerRelevance {
  std::string layer;
  double relevance_out;
  double relevance_in;
};

struct ConservationReport {
  double seed_sum = 0;
  std::vector<LayerRelevance> layers;    // in propagation order, as far as the pass went
  std::vector<double> block_input_sums;  // (L) Σ R at each block's input; NaN if not reached
  double tokens_sum = std::numeric_limits<double>::quiet_NaN();  // Σ R at E0, if reached
  double image_sum = std::numeric_limits<double>::quiet_NaN();   // Σ R at the pixels, if reached
};

// Per token, Σ over the features (and heads) of the relevance at the points of one block that the
// guided walk draws (walk.h), each (n): what a token holds of the relevance there. Recorded by every
// pass (a row sum per point: O(n·d), against the rules' O(n·d²)).
struct BlockTokenRelevance {
  VecD output;       // at the block's output x_{b+1}
  VecD residual2;    // add2's share to x' (the residual)
  VecD ff_branch;    // add2's share to the FF branch γ2 ⊙ f (f itself: LayerScale passes it on)
  VecD ff_in;        // at LN2's output, after fc2, the activation and fc1
  VecD ff_path;      // at x' through LN2
  VecD mid;          // at x' (residual2 + ff_path)
  VecD residual1;    // add1's share to x_b (the residual)
  VecD attn_branch;  // add1's share to the attention branch γ1 ⊙ o
  VecD ctx;          // at the heads' outputs (A·v, concatenated), after proj
  VecD q, k, v;      // at q, k, v, after the A·v, softmax and q·kᵀ rules
  VecD attn_in;      // at LN1's output, after W_qkv
  VecD attn_path;    // at x_b through LN1
  VecD input;        // at x_b (residual1 + attn_path)
};

// One rule set's pass for one target, carried top-down only as far as the methods asked so far;
// a later call that needs more continues from where it stopped.
struct RelevancePass {
  int target = -1;              // -1: not started
  LrpRules rules{};             // the rule set of the pass so far
  int next_block = -1;          // the next block to propagate through (−1: all done)
  MatD r;                       // (n, d) relevance at the output of block next_block
  // Once block next_block's upper half is done (its r_attn formed; lrp_propagate's
  // LrpDepth::attention), what its lower half reads: the relevance at q, k, v (n, 3d) and add1's
  // share to the residual x_b (n, d).
  MatD r_qkv, r_res1;
  std::vector<std::vector<MatD>> r_attn;  // (L) × H × (n, n) R_A; empty for blocks not reached
  bool at_pixels = false;
  MatD r_tokens;                // (n, d) relevance at E0 (after norm_pre), when at_pixels
  MatD pixel_map;               // (H, W) Σ_c R at the input, when at_pixels
  ConservationReport report;
  // Σ_d R per token (n): at the final norm's output (after the head and the pooling), at the last
  // block's output (after the final norm), per block (L; empty for blocks not reached), at E0
  // (when at_pixels).
  VecD pool_tokens, output_tokens;
  std::vector<BlockTokenRelevance> block_tokens;
  VecD e0_tokens;
  LrpScratch scratch;
};

// How far down lrp_propagate carries a pass.
enum class LrpDepth {
  attention,    // to R_A of block down_to_block (after its attention core's rules; the qkv
                // layer, norm1 and the clone below it are left for a later call)
  block_input,  // to the input of block down_to_block
  pixels,       // to the input image (down_to_block = 0): the position-embedding add and the patch embedding
};

// Extends `pass` (restarting it if its target or rule set differs) through every block ≥ down_to_block, as
// deep as `depth` says. After it, the report's tokens_sum and `r` hold E0's relevance once block 0
// is done to its input.
void lrp_propagate(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules,
                   int target, int down_to_block, LrpDepth depth);

}  // namespace vitlens
