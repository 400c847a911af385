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
  else if (opt.head_rows_only && b == c.depth - 1) o.rows = head_rows(c);
  return o;
}

// The last block's backward from a forward pass that formed every row, when the head reads only
// its first r rows (the class and distillation tokens): the gradient at the block's output is 0
// below them, and so is every row of the MLP's, the projection's and the attention's query
// gradients below them (each maps rows to rows), so those are formed for the r rows only, as the
// head-rows forward passes do (head_rows_only), instead of n: the same values, bit for bit (the
// rows left out added exact zeros). Without parameter gradients only: training keeps the pass
// over every row, whose weight gradients read every input row of the trace.
// ∂y/∂A keeps its (n, n) shape, 0 below row r.
void last_block_backward_head_rows(BlockGrads& g, const Mat& dout, const BlockTrace& t,
                                   const BlockParams& w, const Config& c, BlockOptionsT<float> o) {
  const int r = head_rows(c);
  assert(dout.rows() == c.tokens());  // 0 below row r: the head's backward writes only its rows
  BlockTrace top;  // what block_output_backward reads without parameter gradients, rows < r
  top.fc1 = t.fc1.topRows(r);
  top.x_mid = t.x_mid.topRows(r);
  top.ln2_mean = t.ln2_mean.head(r);
  top.ln2_rstd = t.ln2_rstd.head(r);
  block_output_backward(g, nullptr, dout.topRows(r), top, w, c, true);
  o.rows = r;
  block_attention_backward(g, nullptr, t, w, c, 1, true, o);
}

void check_options(const ForwardOptions& opt, const Config& c) {
  if (!opt.head_mask.empty() && opt.head_mask.size() != size_t(c.depth) * size_t(c.heads))
    throw Error(ErrorCode::bad_argument, "head mask needs depth × heads = " +
                                             std::to_string(c.depth * c.heads) + " values");
  for (float v : opt.head_mask)
    if (v != 0.0f && v != 1.0f) throw Error(ErrorCode::bad_argument, "head mask values must be 0 (off) or 1 (on)");
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

template <typename T>
void tokens_forward(MatT<T>& tokens, MatT<T>* nopos, const MatT<T>& embed, const Params& p,
                    const Config& c) {
  const int n = c.tokens(), d = c.dim, P = c.num_patches(), k = c.pos_prefix();
  tokens.resize(n, d);
  int row = 0;
  if (c.class_token) tokens.row(row++) = p.cls_token.cast<T>().transpose();
  if (c.dist_token) tokens.row(row++) = p.dist_token.cast<T>().transpose();
  if (c.registers) tokens.middleRows(row, c.registers) = p.reg_tokens.cast<T>();
  tokens.bottomRows(P) = embed;
  if (nopos) {
    nopos->resize(c.pos_rows(), d);
    nopos->topRows(k) = tokens.topRows(k);
    nopos->bottomRows(P) = embed;
  }
  tokens.topRows(k) += p.pos_embed.topRows(k).cast<T>();
  tokens.bottomRows(P) += p.pos_embed.bottomRows(P).cast<T>();
}

template void tokens_forward(Mat&, Mat*, const Mat&, const Params&, const Config&);
template void tokens_forward(MatD&, MatD*, const MatD&, const Params&, const Config&);

template <typename T>
void pool_forward(MatT<T>& pooled, const MatT<T>& z, const Config& c) {
  const std::vector<PoolPart> parts = pool_parts(c);
  pooled.resize(Eigen::Index(parts.size()), c.dim);
  for (size_t j = 0; j < parts.size(); ++j) {
    if (parts[j].token >= 0) pooled.row(Eigen::Index(j)) = z.row(parts[j].token);
    else pooled.row(Eigen::Index(j)) = z.bottomRows(c.num_patches()).colwise().mean();
  }
}

template void pool_forward(Mat&, const Mat&, const Config&);
template void pool_forward(MatD&, const MatD&, const Config&);

HeadLinear::HeadLinear(const Params& p, const Config& c) {
  if (!c.dist_token) {
    wp_ = &p.head_w;
    bp_ = &p.head_b;
    return;
  }
  own_ = true;
  w_.resize(c.classes, 2 * c.dim);
  w_.leftCols(c.dim) = 0.5f * p.head_w;
  w_.rightCols(c.dim) = 0.5f * p.head_dist_w;
  b_ = 0.5f * (p.head_b + p.head_dist_b);
}

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

  tr.input = x;
  tr.head_mask = opt.head_mask;
  tr.head_rows_only = opt.head_rows_only;
  im2col(tr.patches, x, c.patch);
  linear_forward(tr.embed, tr.patches, p.patch_w, p.patch_b, &p.patch_packs);
  tokens_forward<float>(tr.tokens, nullptr, tr.embed, p, c);

  tr.blocks.resize(size_t(c.depth));
  if (c.pre_norm)
    layernorm_forward(tr.blocks[0].x, tr.pre_mean, tr.pre_rstd, tr.tokens, p.pre_norm_w, p.pre_norm_b, c.ln_eps);
  else
    tr.blocks[0].x = tr.tokens;
  BlockScratch s;
  for (int b = 0; b < c.depth; ++b) {
    Mat& out = (b + 1 < c.depth) ? tr.blocks[size_t(b) + 1].x : tr.x_final;
    block_forward(out, tr.blocks[size_t(b)], s, p.blocks[size_t(b)], c, 1, BlockRecord::all,
                  block_options(opt, c, b));
  }
  head_forward(tr, tr.x_final, m);
}

void vit_logits(Trace& tr, const Model& m, const Image& x) {
  ForwardOptions opt;
  opt.head_rows_only = true;
  vit_forward(tr, m, x, opt);
}

void head_forward(HeadTrace& tr, const Mat& x_final, const Model& m) {
  const Config& c = m.config;
  const Params& p = m.params;
  if (c.final_norm)
    layernorm_forward(tr.ln_f, tr.lnf_mean, tr.lnf_rstd, x_final, p.norm_w, p.norm_b, c.ln_eps);
  else
    tr.ln_f = x_final;
  pool_forward(tr.pooled, tr.ln_f, c);
  if (c.fc_norm)
    layernorm_forward(tr.head_x, tr.fc_mean, tr.fc_rstd, tr.pooled, p.fc_norm_w, p.fc_norm_b, c.ln_eps);
  else
    tr.head_x = tr.pooled;
  const HeadLinear head(p, c);
  tr.logits = head.w() * Eigen::Map<const Vec>(tr.head_x.data(), tr.head_x.size()) + head.b();
}

void vit_backward(Grads& g, Params* dp, const Model& m, const Trace& tr, const Vec& dlogits,
                  const ForwardOptions& opt) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int P = c.num_patches();
  if (dlogits.size() != c.classes)
    throw Error(ErrorCode::bad_argument, "the output gradient needs one value per class");
  assert(tr.blocks.size() == size_t(c.depth));
  assert(opt.head_rows_only == tr.head_rows_only);  // the last block's rows as the forward formed them

  head_backward(g.x_final, g, dp, tr, tr.x_final, dlogits, m);

  g.blocks.resize(size_t(c.depth));
  const Mat* dout = &g.x_final;
  for (int b = c.depth - 1; b >= 0; --b) {
    BlockGrads& gb = g.blocks[size_t(b)];
    if (b == c.depth - 1 && !dp && !opt.head_rows_only && opt.override_block != b && head_rows(c) < c.tokens()) {
      last_block_backward_head_rows(gb, *dout, tr.blocks[size_t(b)], p.blocks[size_t(b)], c,
                                    block_options(opt, c, b));
    } else {
      block_backward(gb, dp ? &dp->blocks[size_t(b)] : nullptr, *dout, tr.blocks[size_t(b)],
                     p.blocks[size_t(b)], c, 1, true, block_options(opt, c, b));
    }
    dout = &gb.x;
  }
  if (c.pre_norm) {
    g.pre_ln = *dout;
    layernorm_backward(g.tokens, dp ? &dp->pre_norm_w : nullptr, dp ? &dp->pre_norm_b : nullptr,
                       g.pre_ln, tr.tokens, tr.pre_mean, tr.pre_rstd, p.pre_norm_w);
  } else {
    g.tokens = *dout;
  }
  const int kpos = c.pos_prefix();
  if (dp) {
    dp->pos_embed.topRows(kpos) += g.tokens.topRows(kpos);
    dp->pos_embed.bottomRows(P) += g.tokens.bottomRows(P);
    int row = 0;
    if (c.class_token) dp->cls_token += g.tokens.row(row++).transpose();
    if (c.dist_token) dp->dist_token += g.tokens.row(row++).transpose();
    if (c.registers) dp->reg_tokens += g.tokens.middleRows(row, c.registers);
  }
  g.embed = g.tokens.bottomRows(P);
  linear_backward(&g.patches, dp ? &dp->patch_w : nullptr, dp ? &dp->patch_b : nullptr, g.embed,
                  tr.patches, p.patch_w, &p.patch_packs);
  col2im(g.input, g.patches, c.channels, c.image_h, c.image_w, c.patch);
}

void head_backward(Mat& dx_final, HeadGrads& g, Params* dp, const HeadTrace& tr, const Mat& x_final,
                   const Vec& dlogits, const Model& m) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int d = c.dim, P = c.num_patches();
  g.logits = dlogits;
  // logits = W·vec(head_x) + b, W = [W_0 … W_{k−1}] (distilled: ½[W_head, W_dist])
  const HeadLinear head(p, c);
  const Eigen::Index k = tr.head_x.rows();
  g.head_x.resize(k, d);
  Eigen::Map<Vec>(g.head_x.data(), g.head_x.size()) = head.w().transpose() * dlogits;
  if (dp) {
    if (c.dist_token) {
      dp->head_w.noalias() += 0.5f * dlogits * tr.head_x.row(0);
      dp->head_dist_w.noalias() += 0.5f * dlogits * tr.head_x.row(1);
      dp->head_b += 0.5f * dlogits;
      dp->head_dist_b += 0.5f * dlogits;
    } else {
      dp->head_w.noalias() += dlogits * Eigen::Map<const Vec>(tr.head_x.data(), tr.head_x.size()).transpose();
      dp->head_b += dlogits;
    }
  }
  if (c.fc_norm)
    layernorm_backward(g.pooled, dp ? &dp->fc_norm_w : nullptr, dp ? &dp->fc_norm_b : nullptr,
                       g.head_x, tr.pooled, tr.fc_mean, tr.fc_rstd, p.fc_norm_w);
  else
    g.pooled = g.head_x;
  // pool: a token part copies its row, a mean part spreads 1/P to every patch row
  g.ln_f = Mat::Zero(x_final.rows(), d);  // n rows, or the head's rows (head_rows_only)
  const std::vector<PoolPart> parts = pool_parts(c);
  for (size_t j = 0; j < parts.size(); ++j) {
    if (parts[j].token >= 0) g.ln_f.row(parts[j].token) += g.pooled.row(Eigen::Index(j));
    else g.ln_f.bottomRows(P).rowwise() += g.pooled.row(Eigen::Index(j)) / float(P);
  }
  if (c.final_norm)
    layernorm_backward(dx_final, dp ? &dp->norm_w : nullptr, dp ? &dp->norm_b : nullptr, g.ln_f,
                       x_final, tr.lnf_mean, tr.lnf_rstd, p.norm_w);
  else
    dx_final = g.ln_f;
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
