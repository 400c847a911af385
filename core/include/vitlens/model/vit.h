// vit.h — the forward pass with a trace, and the backward pass over that trace.
//
// The forward pass records, per block, everything the attribution methods need; the backward
// pass takes the gradient of any linear function of the logits (dlogits = its coefficients)
// and returns the gradient with respect to every traced activation, the input image and,
// if asked, every parameter. Neither keeps state outside the objects passed in.
#pragma once

#include <vector>

#include "vitlens/model/block.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

struct Trace {
  Image input;              // (C, H, W) normalised
  Mat patches;              // (P, C·p·p) im2col of the input, row-major patches
  Mat embed;                // (P, d)    patch_embed(x)
  Mat tokens;               // (n, d)    E0 = [cls; embed] + pos_embed
  std::vector<BlockTrace> blocks;  // (L) one copy each, BlockRecord::all
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
