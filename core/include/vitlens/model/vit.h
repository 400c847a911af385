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

// What the head records from the last block's output on: the final norm, the pooling, fc_norm,
// the logits.
struct HeadTrace {
  Mat ln_f;                 // (n, d)    final norm (a copy of x_final without one); x_final's rows
  Vec lnf_mean, lnf_rstd;   // (n)
  Mat pooled;               // (k, d)    the pool parts of ln_f (model.h, pool_parts)
  Mat head_x;               // (k, d)    fc_norm(pooled) (a copy of pooled without fc_norm)
  Vec fc_mean, fc_rstd;     // (k)
  Vec logits;               // (classes)
};

struct Trace : HeadTrace {
  Image input;              // (C, H, W) normalised
  Mat patches;              // (P, C·p·p) im2col of the input, row-major patches
  Mat embed;                // (P, d)    patch_embed(x)
  Mat tokens;               // (n, d)    E0 = [CLS][DIST][REG][embed] + pos_embed (tokens_forward)
  Mat pre_ln;               // (n, d)    LN_pre(E0), the first block's input (pre_norm only)
  Vec pre_mean, pre_rstd;   // (n)
  std::vector<BlockTrace> blocks;  // (L) one copy each, BlockRecord::all
  Mat x_final;              // (n, d)    output of the last block (head_rows_only: (head_rows, d))
  std::vector<float> head_mask;  // (L·H)  the ForwardOptions::head_mask the pass ran with; empty = all on
  bool head_rows_only = false;   // the ForwardOptions::head_rows_only the pass ran with
  // HeadTrace: ln_f … logits
};

// E0 from the patch embeddings (P, d): the prefix tokens and the patches, pos_embed added to the
// rows that have one ([CLS][DIST] unless no_embed_class, and the patches); the registers join
// after the add, without one. If `nopos` is not null it receives the rows the add covers, before
// it (pos_rows, d), in pos_embed's order.
template <typename T>
void tokens_forward(MatT<T>& tokens, MatT<T>* nopos, const MatT<T>& embed, const Params& p,
                    const Config& c);
// The pool parts (k, d) of the final-norm tokens z (n, d).
template <typename T>
void pool_forward(MatT<T>& pooled, const MatT<T>& z, const Config& c);

// The head as one linear layer on the pool parts concatenated (k·d): logits = W·vec(head_x) + b.
// For a distilled model W = ½[W_head, W_dist], b = ½(b_head + b_dist) (METHODS.md); otherwise the
// model's own head (not copied).
class HeadLinear {
 public:
  HeadLinear(const Params& p, const Config& c);
  const Mat& w() const { return own_ ? w_ : *wp_; }  // (classes, k·d)
  const Vec& b() const { return own_ ? b_ : *bp_; }  // (classes)

 private:
  bool own_ = false;
  const Mat* wp_ = nullptr;
  const Vec* bp_ = nullptr;
  Mat w_;
  Vec b_;
};

// Options that change the forward computation (used by AttAttr and head pruning).
struct ForwardOptions {
  // (L·H) multipliers 0 or 1 on each head's attention, flat index l·H + h; empty = all heads on.
  // A head at 0 is switched off: its attention A_l,h is set to 0 after the softmax (so its
  // context A·v is 0 and only the projection bias remains of it), and the trace records that
  // A = 0; the backward pass differentiates this masked model (∂y/∂A_l,h of an off head is the
  // gradient at A = 0, dctx_h·v_hᵀ; its scores get none).
  std::vector<float> head_mask;
  // If override_block >= 0, that block's attention is not computed from q·kᵀ but set to
  // `*override_attn` (H × (n, n)); the backward pass then stops at A for that block.
  int override_block = -1;
  const std::vector<Mat>* override_attn = nullptr;
  // The last block forms only the rows the head reads (head_rows; BlockOptionsT::rows), for passes
  // that need the logits and gradients but not the last block's other rows: the trace's last
  // block and x_final then have head_rows(config) rows, and the gradients are unchanged. Ignored
  // when the last block's attention is overridden.
  bool head_rows_only = false;
};

void vit_forward(Trace& tr, const Model& m, const Image& x, const ForwardOptions& opt = {});
// The forward pass for callers that read only tr.logits (predictions, the perturbation and ROAD
// tests' steps, the pruning curves, evaluations): head_rows_only, so the last block's projection,
// MLP and attention rows below the head's are not formed (DeiT-tiny 6 %, the shipped model 12 %
// of the multiply-adds). The trace then serves only the logits and a head-rows backward.
void vit_logits(Trace& tr, const Model& m, const Image& x);

struct HeadGrads {
  Mat ln_f, pooled, head_x;
  Vec logits;
};

struct Grads : HeadGrads {
  Image input;              // (C, H, W) ∂/∂x (normalised input)
  Mat patches, embed, tokens, pre_ln;
  std::vector<BlockGrads> blocks;
  Mat x_final;
};

// The head alone, from the last block's output x_final (n, d): its forward, and its backward from
// dlogits to dx_final (parameter gradients ADDED to dp when not null). vit_forward / vit_backward
// run them; AttAttr runs them on each of its stacked copies.
void head_forward(HeadTrace& t, const Mat& x_final, const Model& m);
void head_backward(Mat& dx_final, HeadGrads& g, Params* dp, const HeadTrace& t, const Mat& x_final,
                   const Vec& dlogits, const Model& m);

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
