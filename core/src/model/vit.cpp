// vit.cpp — the whole ViT: forward with a trace, backward over the trace, and the output head.
#include "vitlens/model/vit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "vitlens/tensor/error.h"
#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// Block b's head mask and attention override from the forward options.
BlockOptionsT<float> block_options(const ForwardOptions& opt, const Config& c, int b) {
  BlockOptionsT<float> o;
  if (!opt.head_mask.empty()) o.head_mask = opt.head_mask.data() + size_t(b) * size_t(c.heads);
  if (opt.override_block == b) o.override_attn = opt.override_attn;
  return o;
}

void check_options(const ForwardOptions& opt, const Config& c) {
  if (!opt.head_mask.empty() && opt.head_mask.size() != size_t(c.depth) * size_t(c.heads))
    throw Error(ErrorCode::bad_argument, "head mask needs depth × heads = " +
                                             std::to_string(c.depth * c.heads) + " values");
  if (opt.override_block >= 0) {
    if (opt.override_block >= c.depth || !opt.override_attn ||
        opt.override_attn->size() != size_t(c.heads))
      throw Error(ErrorCode::bad_argument, "attention override needs a valid block and H matrices");
    for (const Mat& a : *opt.override_attn)
      if (a.rows() != c.tokens() || a.cols() != c.tokens())
        throw Error(ErrorCode::bad_shape, "attention override matrices must be n × n");
  }
}

}  // namespace

void vit_forward(Trace& tr, const Model& m, const Image& x, const ForwardOptions& opt) {
  const Config& c = m.config;
  const Params& p = m.params;
  if (x.c != c.channels || x.h != c.image_h || x.w != c.image_w)
    throw Error(ErrorCode::bad_shape,
                "input is " + std::to_string(x.c) + "×" + std::to_string(x.h) + "×" +
                    std::to_string(x.w) + " but the model expects " + std::to_string(c.channels) +
                    "×" + std::to_string(c.image_h) + "×" + std::to_string(c.image_w));
  if (size_t(x.c) * x.h * x.w != x.data.size())
    throw Error(ErrorCode::bad_shape, "input tensor size does not match its shape");
  for (float v : x.data)
    if (!std::isfinite(v)) throw Error(ErrorCode::bad_value, "input contains NaN or Inf");
  check_options(opt, c);

  const int n = c.tokens(), d = c.dim;
  tr.input = x;
  im2col(tr.patches, x, c.patch);
  linear_forward(tr.embed, tr.patches, p.patch_w, p.patch_b);
  tr.tokens.resize(n, d);
  tr.tokens.row(0) = p.cls_token.transpose();
  tr.tokens.bottomRows(n - 1) = tr.embed;
  tr.tokens += p.pos_embed;

  tr.blocks.resize(size_t(c.depth));
  tr.blocks[0].x = tr.tokens;
  BlockScratch s;
  for (int b = 0; b < c.depth; ++b) {
    Mat& out = (b + 1 < c.depth) ? tr.blocks[size_t(b) + 1].x : tr.x_final;
    block_forward(out, tr.blocks[size_t(b)], s, p.blocks[size_t(b)], c, 1, BlockRecord::all,
                  block_options(opt, c, b));
  }
  layernorm_forward(tr.ln_f, tr.lnf_mean, tr.lnf_rstd, tr.x_final, p.norm_w, p.norm_b, c.ln_eps);
  tr.logits = p.head_w * tr.ln_f.row(0).transpose() + p.head_b;
}

void vit_backward(Grads& g, Params* dp, const Model& m, const Trace& tr, const Vec& dlogits,
                  const ForwardOptions& opt) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int n = c.tokens(), d = c.dim;
  if (dlogits.size() != c.classes)
    throw Error(ErrorCode::bad_argument, "the output gradient needs one value per class");
  assert(tr.blocks.size() == size_t(c.depth));

  g.logits = dlogits;
  // logits = W_head · ln_f[0] + b_head
  g.ln_f = Mat::Zero(n, d);
  g.ln_f.row(0) = (p.head_w.transpose() * dlogits).transpose();
  if (dp) {
    dp->head_w.noalias() += dlogits * tr.ln_f.row(0);
    dp->head_b += dlogits;
  }
  layernorm_backward(g.x_final, dp ? &dp->norm_w : nullptr, dp ? &dp->norm_b : nullptr, g.ln_f,
                     tr.x_final, tr.lnf_mean, tr.lnf_rstd, p.norm_w);

  g.blocks.resize(size_t(c.depth));
  const Mat* dout = &g.x_final;
  for (int b = c.depth - 1; b >= 0; --b) {
    BlockGrads& gb = g.blocks[size_t(b)];
    block_backward(gb, dp ? &dp->blocks[size_t(b)] : nullptr, *dout, tr.blocks[size_t(b)],
                   p.blocks[size_t(b)], c, 1, true, block_options(opt, c, b));
    dout = &gb.x;
  }
  g.tokens = *dout;
  if (dp) {
    dp->pos_embed += g.tokens;
    dp->cls_token += g.tokens.row(0).transpose();
  }
  g.embed = g.tokens.bottomRows(n - 1);
  linear_backward(&g.patches, dp ? &dp->patch_w : nullptr, dp ? &dp->patch_b : nullptr, g.embed,
                  tr.patches, p.patch_w);
  col2im(g.input, g.patches, c.channels, c.image_h, c.image_w, c.patch);
}

Vec output_probs(const Config& c, const Vec& logits) {
  if (c.output == OutputKind::sigmoid)
    return (1.0f / (1.0f + (-logits.array()).exp())).matrix();
  const float mx = logits.maxCoeff();
  Vec e = (logits.array() - mx).exp().matrix();
  return e / e.sum();
}

std::vector<Prediction> top_k(const Config& c, const Vec& logits, int k) {
  const Vec probs = output_probs(c, logits);
  std::vector<int> idx(size_t(logits.size()));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::max(0, std::min<int>(k, int(idx.size())));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<Prediction> out;
  for (int i = 0; i < k; ++i) out.push_back({idx[size_t(i)], logits[idx[size_t(i)]], probs[idx[size_t(i)]]});
  return out;
}

}  // namespace vitlens
