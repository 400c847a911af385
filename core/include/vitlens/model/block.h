// block.h — the transformer block (pre-LN, timm / DeiT layout; shared METHODS.md "Notation"),
// written once: its forward in the scalar type T (float for the trace and the gradients, double
// for the relevance pass) over c independent copies of n tokens stacked as (c·n, d) token
// matrices (as llm.c's layers take B), and its backward in float.
//
//   x' = x + γ1 ⊙ proj(attention(qkv(LN1(x)))),   out = x' + γ2 ⊙ fc2(act(fc1(LN2(x'))))
//   (γ = 1 without LayerScale; act the config's activation)
//
// Built on it: vit_forward / vit_backward (vit.h, one copy, everything recorded), lrp_forward
// (lrp.h, double, what the relevance rules read) and attattr's stacked pass over the scaled
// copies of one block's attention (attattr.cpp, only what its backward needs). A block feature
// (LayerScale, another activation, …) is added here and reaches all of them.
//
// Deliberately not here: the embedding, the final LayerNorm and the head (vit.cpp), and the
// relevance walk through the block (lrp.cpp, a pass of its own over BlockTraceD).
#pragma once

#include <vector>

#include "vitlens/layers/layers.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// What a block forward keeps in its BlockTraceT; what it does not keep goes to BlockScratchT
// and is overwritten by the next block.
enum class BlockRecord {
  all,        // every activation: the float trace (the methods read any of them, and the
              // backward can accumulate parameter gradients from the layer inputs)
  relevance,  // all but the pre-softmax scores: the double trace the relevance rules read
  backward,   // only what the backward reads without parameter gradients (x, the LayerNorm
              // statistics, qkv, attn, x_mid, fc1): attattr's stacked copies, whose memory per
              // chunk sets their speed
};

// One block's activations. R = c·n rows: copy k holds rows k·n … k·n + n − 1. Fields marked
// [full] are kept by BlockRecord::all and ::relevance only, [all] by ::all only.
template <typename T>
struct BlockTraceT {
  MatT<T> x;                    // (R, d)    block input x_b (set by the caller)
  MatT<T> ln1;                  // (R, d)    LN1(x_b)                                   [full]
  VecT<T> ln1_mean, ln1_rstd;   // (R)
  MatT<T> qkv;                  // (R, 3d)   q | k | v; head h: columns h·d_h … (h+1)·d_h−1 of each
  std::vector<MatT<T>> scores;  // (c·H) × (n, n) q·kᵀ/√d_h, copy k head h at k·H + h     [all]
  std::vector<MatT<T>> attn;    // (c·H) × (n, n) A_b as used (after head mask / override)
  MatT<T> ctx;                  // (R, d)    concat_h A_h·v_h                            [full]
  MatT<T> attn_out;             // (R, d)    o = ctx·Wprojᵀ + bproj (before LayerScale)  [full]
  MatT<T> x_mid;                // (R, d)    x' = x_b + γ1 ⊙ o
  MatT<T> ln2;                  // (R, d)    LN2(x')                                     [full]
  VecT<T> ln2_mean, ln2_rstd;   // (R)
  MatT<T> fc1;                  // (R, mlp)  pre-activation h
  MatT<T> act;                  // (R, mlp)  act(h)                                      [full]
  MatT<T> mlp_out;              // (R, d)    f = act·W2ᵀ + b2 (before LayerScale)        [full]
  // the block output x_{b+1} is the next block's x (or the trace's x_final)
  MatT<T> x_rows;               // (c·r, d)  with BlockOptionsT::rows = r < n: each copy's first
                                //           r rows of x, the residual's input; else empty
};
using BlockTrace = BlockTraceT<float>;
using BlockTraceD = BlockTraceT<double>;

// Reusable capacity: the activations a BlockRecord does not keep, and (double) a weight cast.
template <typename T>
struct BlockScratchT {
  MatT<T> ln, ctx, attn_out, act, mlp_out;  // (R, ·)
};
using BlockScratch = BlockScratchT<float>;
using BlockScratchD = BlockScratchT<double>;

// What changes the block's computation (head pruning, attattr_blocks_naive), and how much of it
// is formed.
template <typename T>
struct BlockOptionsT {
  const float* head_mask = nullptr;                     // (H) 0 or 1 per head; null = all on
  const std::vector<MatT<T>>* override_attn = nullptr;  // H × (n, n) replacing A; null = none
  // r > 0: form only the first r output rows of each copy (the last block of a pass that needs
  // no more than the head reads, head_rows). LN1 and qkv still cover all n rows (every token is a
  // key and a value); from the attention on, every activation and gradient has c·r rows, the
  // attention (r, n) per head. The output is (c·r, d). Not with override_attn.
  int rows = 0;
};

// x (t.x, R rows) → out (R, d). out must not be t.x.
template <typename T>
void block_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const BlockParams& w,
                   const Config& c, int copies, BlockRecord rec, const BlockOptionsT<T>& opt = {});
// Its two halves. x (t.x) → ctx (R, d): LN1, qkv, the attention core.
template <typename T>
void block_attention_forward(MatT<T>& ctx, BlockTraceT<T>& t, BlockScratchT<T>& s,
                             const BlockParams& w, const Config& c, int copies, BlockRecord rec,
                             const BlockOptionsT<T>& opt = {});
// ctx (R, d) and x (t.x) → out (R, d): proj, the first residual, LN2, the MLP, the second residual.
template <typename T>
void block_output_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const MatT<T>& ctx,
                          const BlockParams& w, const Config& c, BlockRecord rec);
// The part of it after proj: attn_out (R, d) and x (t.x, or t.x_rows when set) → out. attn_out
// must not be one of s's matrices but s.attn_out (AttAttr forms α_k·proj(ctx_l) + b_proj once per
// block and copies it).
template <typename T>
void block_mlp_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const MatT<T>& attn_out,
                       const BlockParams& w, const Config& c, BlockRecord rec);

// Gradients at the block's activations (names as in BlockTrace; mlp_out and attn_out are the
// gradients at f and o, before LayerScale). With keep = false (attattr), scores / attn hold one
// (n, n) matrix each.
struct BlockGrads {
  Mat x, ln1, qkv;                // (R, ·)
  std::vector<Mat> scores, attn;  // (c·H) × (n, n): ∂/∂scores, ∂/∂A
  Mat ctx, attn_out, x_mid, ln2, fc1, act, mlp_out;  // (R, ·)
};

// From dout (R, d) at the block output to g.x. Parameter gradients are ADDED to dw when it is not
// null (t must then be recorded with BlockRecord::all). dout must not be one of g's matrices.
void block_backward(BlockGrads& g, BlockParams* dw, const Mat& dout, const BlockTrace& t,
                    const BlockParams& w, const Config& c, int copies, bool keep,
                    const BlockOptionsT<float>& opt = {});
// Its two halves: dout → g.ctx (and g.x_mid), then g.ctx, g.x_mid → g.x.
void block_output_backward(BlockGrads& g, BlockParams* dw, const Mat& dout, const BlockTrace& t,
                           const BlockParams& w, const Config& c, bool keep);
void block_attention_backward(BlockGrads& g, BlockParams* dw, const BlockTrace& t,
                              const BlockParams& w, const Config& c, int copies, bool keep,
                              const BlockOptionsT<float>& opt = {});

}  // namespace vitlens
