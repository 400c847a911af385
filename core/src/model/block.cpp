// block.cpp — the transformer block, written once (see block.h): the forward as one template for
// float and double over stacked copies, and the float backward.
#include "vitlens/model/block.h"

#include <cassert>

#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// Where an activation goes: the trace when `rec` keeps it, else the scratch.
template <typename M>
M& kept(BlockRecord rec, M& in_trace, M& in_scratch) {
  return rec == BlockRecord::backward ? in_scratch : in_trace;
}

}  // namespace

template <typename T>
void block_attention_forward(MatT<T>& ctx, BlockTraceT<T>& t, BlockScratchT<T>& s,
                             const BlockParams& w, const Config& c, int copies, BlockRecord rec,
                             const BlockOptionsT<T>& opt) {
  assert(t.x.rows() % copies == 0 && t.x.cols() == c.dim);
  MatT<T>& ln1 = kept(rec, t.ln1, s.ln);
  layernorm_forward(ln1, t.ln1_mean, t.ln1_rstd, t.x, w.norm1_w, w.norm1_b, T(c.ln_eps));
  linear_forward(t.qkv, ln1, w.qkv_w, w.qkv_b, &w.qkv_packs);
  attention_forward(ctx, t.scores, t.attn, t.qkv, c.heads, opt.head_mask, opt.override_attn,
                    copies, rec == BlockRecord::all, opt.rows);
  // The residual's input: every row, or each copy's first r rows when only those are formed.
  const int n = int(t.x.rows()) / copies;
  if (opt.rows > 0 && opt.rows < n) {
    t.x_rows.resize(ptrdiff_t(copies) * opt.rows, c.dim);
    for (int k = 0; k < copies; ++k)
      t.x_rows.middleRows(ptrdiff_t(k) * opt.rows, opt.rows) = t.x.middleRows(ptrdiff_t(k) * n, opt.rows);
  } else {
    t.x_rows.resize(0, c.dim);
  }
}

template <typename T>
void block_output_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const MatT<T>& ctx,
                          const BlockParams& w, const Config& c, BlockRecord rec) {
  MatT<T>& attn_out = kept(rec, t.attn_out, s.attn_out);
  linear_forward(attn_out, ctx, w.proj_w, w.proj_b, &w.proj_packs);
  block_mlp_forward(out, t, s, attn_out, w, c, rec);
}

namespace {

// y = a + γ ⊙ b per row (LayerScale), or a + b without it (γ empty): one pass either way.
template <typename T>
void add_scaled(MatT<T>& y, const MatT<T>& a, const MatT<T>& b, const Vec& gamma) {
  if (gamma.size() == 0) {
    y = a + b;
    return;
  }
  y = (a.array() + b.array().rowwise() * gamma.transpose().array().template cast<T>()).matrix();
}

// dy ⊙ γ per row, into `out` (the gradient at a LayerScale's input); dy itself without γ.
void scale_rows(Mat& out, const Mat& dy, const Vec& gamma) {
  if (gamma.size() == 0) {
    out = dy;
    return;
  }
  out = (dy.array().rowwise() * gamma.transpose().array()).matrix();
}

}  // namespace

template <typename T>
void block_mlp_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const MatT<T>& attn_out,
                       const BlockParams& w, const Config& c, BlockRecord rec) {
  add_scaled(t.x_mid, t.x_rows.rows() ? t.x_rows : t.x, attn_out, w.ls1);
  MatT<T>& ln2 = kept(rec, t.ln2, s.ln);
  layernorm_forward(ln2, t.ln2_mean, t.ln2_rstd, t.x_mid, w.norm2_w, w.norm2_b, T(c.ln_eps));
  linear_forward(t.fc1, ln2, w.fc1_w, w.fc1_b, &w.fc1_packs);
  MatT<T>& act = kept(rec, t.act, s.act);
  activation_forward(act, t.fc1, c.act);
  MatT<T>& mlp_out = kept(rec, t.mlp_out, s.mlp_out);
  linear_forward(mlp_out, act, w.fc2_w, w.fc2_b, &w.fc2_packs);
  add_scaled(out, t.x_mid, mlp_out, w.ls2);
}

template <typename T>
void block_forward(MatT<T>& out, BlockTraceT<T>& t, BlockScratchT<T>& s, const BlockParams& w,
                   const Config& c, int copies, BlockRecord rec, const BlockOptionsT<T>& opt) {
  assert(&out != &t.x);
  MatT<T>& ctx = kept(rec, t.ctx, s.ctx);
  block_attention_forward(ctx, t, s, w, c, copies, rec, opt);
  block_output_forward(out, t, s, ctx, w, c, rec);
}

template void block_forward(Mat&, BlockTrace&, BlockScratch&, const BlockParams&, const Config&,
                            int, BlockRecord, const BlockOptionsT<float>&);
template void block_forward(MatD&, BlockTraceD&, BlockScratchD&, const BlockParams&, const Config&,
                            int, BlockRecord, const BlockOptionsT<double>&);
template void block_attention_forward(Mat&, BlockTrace&, BlockScratch&, const BlockParams&,
                                      const Config&, int, BlockRecord, const BlockOptionsT<float>&);
template void block_attention_forward(MatD&, BlockTraceD&, BlockScratchD&, const BlockParams&,
                                      const Config&, int, BlockRecord, const BlockOptionsT<double>&);
template void block_output_forward(Mat&, BlockTrace&, BlockScratch&, const Mat&, const BlockParams&,
                                   const Config&, BlockRecord);
template void block_output_forward(MatD&, BlockTraceD&, BlockScratchD&, const MatD&,
                                   const BlockParams&, const Config&, BlockRecord);
template void block_mlp_forward(Mat&, BlockTrace&, BlockScratch&, const Mat&, const BlockParams&,
                                const Config&, BlockRecord);
template void block_mlp_forward(MatD&, BlockTraceD&, BlockScratchD&, const MatD&, const BlockParams&,
                                const Config&, BlockRecord);

// out = x' + γ2 ⊙ fc2(act(fc1(LN2(x')))), x' = x + γ1 ⊙ proj(ctx) (γ = 1 without LayerScale):
// each Linear dx = dy·W, a LayerScale d(branch) = γ ⊙ dy and dγ += Σ_rows dy ⊙ branch, and x'
// receives the residual's gradient plus LN2's.
void block_output_backward(BlockGrads& g, BlockParams* dw, const Mat& dout, const BlockTrace& t,
                           const BlockParams& w, const Config& c, bool keep) {
  assert(!dw || t.act.rows() == t.fc1.rows());  // dW needs the layer inputs: BlockRecord::all
  const Mat* dm = &dout;  // at f
  if (keep || w.ls2.size()) {
    scale_rows(g.mlp_out, dout, w.ls2);
    dm = &g.mlp_out;
  }
  if (dw && w.ls2.size()) dw->ls2 += (dout.array() * t.mlp_out.array()).colwise().sum().transpose().matrix();
  linear_backward(&g.act, dw ? &dw->fc2_w : nullptr, dw ? &dw->fc2_b : nullptr, *dm, t.act, w.fc2_w, &w.fc2_packs);
  activation_backward(g.fc1, g.act, t.fc1, c.act);
  linear_backward(&g.ln2, dw ? &dw->fc1_w : nullptr, dw ? &dw->fc1_b : nullptr, g.fc1, t.ln2, w.fc1_w, &w.fc1_packs);
  layernorm_backward(g.x_mid, dw ? &dw->norm2_w : nullptr, dw ? &dw->norm2_b : nullptr, g.ln2,
                     t.x_mid, t.ln2_mean, t.ln2_rstd, w.norm2_w);
  g.x_mid += dout;
  const Mat* da = &g.x_mid;  // at o
  if (keep || w.ls1.size()) {
    scale_rows(g.attn_out, g.x_mid, w.ls1);
    da = &g.attn_out;
  }
  if (dw && w.ls1.size()) dw->ls1 += (g.x_mid.array() * t.attn_out.array()).colwise().sum().transpose().matrix();
  linear_backward(&g.ctx, dw ? &dw->proj_w : nullptr, dw ? &dw->proj_b : nullptr, *da, t.ctx, w.proj_w, &w.proj_packs);
}

// x' = x + proj(attention(qkv(LN1(x)))): x receives the residual's gradient plus LN1's.
void block_attention_backward(BlockGrads& g, BlockParams* dw, const BlockTrace& t,
                              const BlockParams& w, const Config& c, int copies, bool keep,
                              const BlockOptionsT<float>& opt) {
  attention_backward(g.qkv, g.scores, g.attn, g.ctx, t.qkv, t.attn, c.heads, opt.head_mask,
                     opt.override_attn != nullptr, copies, keep, opt.rows);
  linear_backward(&g.ln1, dw ? &dw->qkv_w : nullptr, dw ? &dw->qkv_b : nullptr, g.qkv, t.ln1, w.qkv_w, &w.qkv_packs);
  layernorm_backward(g.x, dw ? &dw->norm1_w : nullptr, dw ? &dw->norm1_b : nullptr, g.ln1, t.x,
                     t.ln1_mean, t.ln1_rstd, w.norm1_w);
  const int n = int(t.x.rows()) / copies, r = int(g.x_mid.rows()) / copies;  // r < n: opt.rows
  if (r == n) {
    g.x += g.x_mid;
    return;
  }
  for (int k = 0; k < copies; ++k) g.x.middleRows(ptrdiff_t(k) * n, r) += g.x_mid.middleRows(ptrdiff_t(k) * r, r);
}

void block_backward(BlockGrads& g, BlockParams* dw, const Mat& dout, const BlockTrace& t,
                    const BlockParams& w, const Config& c, int copies, bool keep,
                    const BlockOptionsT<float>& opt) {
  block_output_backward(g, dw, dout, t, w, c, keep);
  block_attention_backward(g, dw, t, w, c, copies, keep, opt);
}

}  // namespace vitlens
