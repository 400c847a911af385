// vit.h — the forward pass with a trace, and the backward pass over that trace.
//
// The forward pass records, per block, everything the attribution methods need; the backward
// pass takes the gradient of any linear function of the logits (dlogits = its coefficients)
// and returns the gradient with respect to every traced activation, the input image and,
// if asked, every parameter. Neither keeps state outside the objects passed in.
#pragma once

#include <vector>

#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

struct BlockTrace {
  Mat x;                    // (n, d)    block input x_b
  Mat ln1;                  // (n, d)    LN1(x_b)
  Vec ln1_mean, ln1_rstd;   // (n)
  Mat qkv;                  // (n, 3d)   q | k | v; head h uses columns h·d_h … (h+1)·d_h−1 of each
  std::vector<Mat> scores;  // H × (n, n) q·kᵀ/√d_h (pre-softmax)
  std::vector<Mat> attn;    // H × (n, n) A_b as used (after head mask / override)
  Mat ctx;                  // (n, d)    concat_h A_h·v_h
  Mat attn_out;             // (n, d)    ctx·Wprojᵀ + bproj
  Mat x_mid;                // (n, d)    x' = x_b + attn_out
  Mat ln2;                  // (n, d)
  Vec ln2_mean, ln2_rstd;   // (n)
  Mat fc1;                  // (n, mlp)  pre-activation h
  Mat act;                  // (n, mlp)  GELU(h)
  Mat mlp_out;              // (n, d)
  // the block output x_{b+1} is the next block's x (or Trace::x_final)
};

struct Trace {
  Image input;              // (C, H, W) normalised
  Mat patches;              // (P, C·p·p) im2col of the input, row-major patches
  Mat embed;                // (P, d)    patch_embed(x)
  Mat tokens;               // (n, d)    E0 = [cls; embed] + pos_embed
  std::vector<BlockTrace> blocks;  // (L)
  Mat x_final;              // (n, d)    output of the last block
  Mat ln_f;                 // (n, d)    final LN
  Vec lnf_mean, lnf_rstd;   // (n)
  Vec logits;               // (classes)
};

// Options that change the forward computation (used by AttAttr and head pruning).
struct ForwardOptions {
  // (L·H) multipliers 0 or 1 on each head's attention; empty = all heads on.
  std::vector<float> head_mask;
  // If override_block >= 0, that block's attention is not computed from q·kᵀ but set to
  // `*override_attn` (H × (n, n)); the backward pass then stops at A for that block.
  int override_block = -1;
  const std::vector<Mat>* override_attn = nullptr;
};

void vit_forward(Trace& tr, const Model& m, const Image& x, const ForwardOptions& opt = {});

struct BlockGrads {
  Mat x, ln1, qkv;
  std::vector<Mat> scores, attn;  // H × (n, n): ∂/∂scores, ∂/∂A
  Mat ctx, attn_out, x_mid, ln2, fc1, act, mlp_out;
};

struct Grads {
  Image input;              // (C, H, W) ∂/∂x (normalised input)
  Mat patches, embed, tokens;
  std::vector<BlockGrads> blocks;
  Mat x_final, ln_f;
  Vec logits;
};

// Gradient of dot(dlogits, logits). If dparams is not null, parameter gradients are ADDED to it
// (it must have the shapes of params_zeros), so that a batch can accumulate.
void vit_backward(Grads& g, Params* dparams, const Model& m, const Trace& tr, const Vec& dlogits,
                  const ForwardOptions& opt = {});

// Probabilities from logits per the model's output kind (softmax or sigmoid).
Vec output_probs(const Config& cfg, const Vec& logits);

struct Prediction {
  int cls;
  float logit;
  float prob;
};
// The k best classes, best first.
std::vector<Prediction> top_k(const Config& cfg, const Vec& logits, int k);

}  // namespace vitlens
