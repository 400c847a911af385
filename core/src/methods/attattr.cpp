// attattr.cpp — self-attention attribution (Hao, Dong, Wei & Xu, AAAI 2021): the batched pass
// over the m scaled copies of one block's attention, the unbatched definition it is checked
// against, the image map, head scores and pruning, and the attribution tree.
//
// The batched pass is a forward and backward pass of blocks l … L−1 on stacked (c·n, d) token
// matrices (c copies of the n tokens); it records only what its backward needs (no parameter
// gradients, so no layer inputs that serve only dW) and reads the float trace below block l.
#include "vitlens/methods/attattr.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/layers/layers.h"

namespace vitlens {

namespace {

// The stacked trace of one chunk holds at most this many floats (4 MB, measured: 1.7× faster than
// one 96 MB chunk on the shipped model, which left the caches); fewer copies per chunk (down to
// one) when a block's trace would be larger.
constexpr size_t kChunkFloats = size_t(1) << 20;

// What the backward pass needs of one block of the stacked pass (R = c·n rows, copy k = rows
// k·n … k·n + n − 1). Block l itself keeps only x_mid and fc1.
struct StackedBlock {
  Mat x;                  // (R, d)   block input
  Vec mean1, rstd1;       // (R)
  Mat qkv;                // (R, 3d)
  std::vector<Mat> attn;  // (c·H) × (n, n), copy k head h at k·H + h
  Mat x_mid;              // (R, d)
  Vec mean2, rstd2;       // (R)
  Mat fc1;                // (R, mlp) pre-activation
};

// Per-thread buffers, reused across blocks and chunks.
struct Scratch {
  std::vector<StackedBlock> blocks;  // index b − l
  Mat ln, ctx, tmp, act, out;        // forward temporaries (R, ·)
  Mat dout, dx_mid, dln, dact, dfc1, dctx, dqkv;  // backward (R, ·)
  Mat S, dA, dS;                     // (n, n)
  Mat cls, lnf, dlnf, dcls;          // (c, d) the CLS rows at the final LayerNorm
  Vec mf, rf;                        // (c)
  Mat dctx_sum;                      // (n, d) Σ over copies of ∂F/∂ctx_l
};

// ctx (R, d) of the stacked attention: per copy k and head h, A = softmax(q·kᵀ/√d_h), ctx = A·v.
void stacked_attention_forward(Mat& ctx, std::vector<Mat>& attn, Mat& S, const Mat& qkv, int copies,
                               int n, int heads) {
  const int d = int(qkv.cols()) / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  ctx.resize(qkv.rows(), d);
  attn.resize(size_t(copies) * size_t(heads));
  S.resize(n, n);
  for (int k = 0; k < copies; ++k)
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv.data() + ptrdiff_t(k) * n * 3 * d + h * dh;  // (n, dh) rows 3d apart
      const float* key = q + d;
      const float* v = q + 2 * d;
      Mat& A = attn[size_t(k) * size_t(heads) + size_t(h)];
      gemm_nt(S.data(), q, key, n, n, dh, 3 * d, 3 * d, n, scale, 0.0f);  // S = q·kᵀ/√d_h
      softmax_rows(A, S);
      gemm_nn(ctx.data() + ptrdiff_t(k) * n * d + h * dh, A.data(), v, n, dh, n, n, 3 * d, d, 1.0f, 0.0f);
    }
}

// dqkv (R, 3d) from dctx (R, d): dA = dc·vᵀ, dv = Aᵀ·dc, dS = softmax′ᵀ dA, dq = dS·k/√d_h,
// dk = dSᵀ·q/√d_h, per copy and head.
void stacked_attention_backward(Mat& dqkv, Mat& dA, Mat& dS, const Mat& dctx, const Mat& qkv,
                                const std::vector<Mat>& attn, int copies, int n, int heads) {
  const int d = int(qkv.cols()) / 3, dh = d / heads;
  const float scale = 1.0f / std::sqrt(float(dh));
  dqkv.resize(qkv.rows(), 3 * d);
  dA.resize(n, n);
  for (int k = 0; k < copies; ++k)
    for (int h = 0; h < heads; ++h) {
      const ptrdiff_t o3 = ptrdiff_t(k) * n * 3 * d + h * dh;
      const float* q = qkv.data() + o3;
      const float* key = q + d;
      const float* v = q + 2 * d;
      float* dq = dqkv.data() + o3;
      float* dk = dq + d;
      float* dv = dq + 2 * d;
      const float* dc = dctx.data() + ptrdiff_t(k) * n * d + h * dh;  // (n, dh) rows d apart
      const Mat& A = attn[size_t(k) * size_t(heads) + size_t(h)];
      gemm_nt(dA.data(), dc, v, n, n, dh, d, 3 * d, n, 1.0f, 0.0f);  // dA = dc·vᵀ
      gemm_tn(dv, A.data(), dc, n, dh, n, n, d, 3 * d, 1.0f, 0.0f);  // dv = Aᵀ·dc
      softmax_rows_backward(dS, dA, A);
      gemm_nn(dq, dS.data(), key, n, dh, n, n, 3 * d, 3 * d, scale, 0.0f);  // dq = dS·k/√d_h
      gemm_tn(dk, dS.data(), q, n, dh, n, n, 3 * d, 3 * d, scale, 0.0f);    // dk = dSᵀ·q/√d_h
    }
}

// The MLP half of a stacked block: out = x_mid + fc2(GELU(fc1(LN2(x_mid)))).
void stacked_mlp_forward(Mat& out, StackedBlock& t, Scratch& s, const BlockParams& w, float eps) {
  layernorm_forward(s.ln, t.mean2, t.rstd2, t.x_mid, w.norm2_w, w.norm2_b, eps);
  linear_forward(t.fc1, s.ln, w.fc1_w, w.fc1_b);
  gelu_forward(s.act, t.fc1);
  linear_forward(out, s.act, w.fc2_w, w.fc2_b);
  out += t.x_mid;
}

// dx_mid from dout through the MLP half and the second residual (dx = dy·W for each Linear).
void stacked_mlp_backward(Scratch& s, const StackedBlock& t, const BlockParams& w) {
  const int R = int(s.dout.rows()), d = int(s.dout.cols()), mlp = int(w.fc1_w.rows());
  s.dact.resize(R, mlp);
  gemm_nn(s.dact.data(), s.dout.data(), w.fc2_w.data(), R, mlp, d, d, mlp, mlp, 1.0f, 0.0f);
  gelu_backward(s.dfc1, s.dact, t.fc1);
  s.dln.resize(R, d);
  gemm_nn(s.dln.data(), s.dfc1.data(), w.fc1_w.data(), R, d, mlp, mlp, d, d, 1.0f, 0.0f);
  layernorm_backward(s.tmp, nullptr, nullptr, s.dln, t.x_mid, t.mean2, t.rstd2, w.norm2_w);
  s.dx_mid = s.dout + s.tmp;
}

// Adds Σ_k ∂F(α_k·A_l)/∂ctx_l over the copies k = k0 … k0 + c − 1 to s.dctx_sum.
void attattr_chunk(Scratch& s, const Model& m, const Trace& tr, int l, int target, int k0, int copies,
                   int steps, const Mat& proj) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int n = c.tokens(), d = c.dim, L = c.depth, H = c.heads, R = copies * n;
  const BlockTrace& bt = tr.blocks[size_t(l)];
  s.blocks.resize(size_t(L - l));

  // Block l from its first residual: x_mid_k = x_l + α_k·ctx_l·Wprojᵀ + b_proj.
  StackedBlock& first = s.blocks[0];
  first.x_mid.resize(R, d);
  for (int k = 0; k < copies; ++k) {
    const float alpha = float(k0 + k) / float(steps);
    first.x_mid.middleRows(ptrdiff_t(k) * n, n) =
        bt.x + alpha * proj + p.blocks[size_t(l)].proj_b.transpose().replicate(n, 1);
  }
  Mat* x = &s.out;
  stacked_mlp_forward(*x, first, s, p.blocks[size_t(l)], c.ln_eps);
  for (int b = l + 1; b < L; ++b) {
    StackedBlock& t = s.blocks[size_t(b - l)];
    const BlockParams& w = p.blocks[size_t(b)];
    t.x.swap(*x);
    layernorm_forward(s.ln, t.mean1, t.rstd1, t.x, w.norm1_w, w.norm1_b, c.ln_eps);
    linear_forward(t.qkv, s.ln, w.qkv_w, w.qkv_b);
    stacked_attention_forward(s.ctx, t.attn, s.S, t.qkv, copies, n, H);
    linear_forward(s.tmp, s.ctx, w.proj_w, w.proj_b);
    t.x_mid = t.x + s.tmp;
    stacked_mlp_forward(*x, t, s, w, c.ln_eps);
  }
  // Final LayerNorm and head on the CLS rows; F_k = the target's probability of copy k.
  s.cls.resize(copies, d);
  for (int k = 0; k < copies; ++k) s.cls.row(k) = x->row(ptrdiff_t(k) * n);
  layernorm_forward(s.lnf, s.mf, s.rf, s.cls, p.norm_w, p.norm_b, c.ln_eps);
  s.dlnf.resize(copies, d);
  for (int k = 0; k < copies; ++k) {
    const Vec logits = p.head_w * s.lnf.row(k).transpose() + p.head_b;  // (classes)
    s.dlnf.row(k) = (p.head_w.transpose() * target_prob_grad(c, logits, target)).transpose();
  }
  layernorm_backward(s.dcls, nullptr, nullptr, s.dlnf, s.cls, s.mf, s.rf, p.norm_w);
  s.dout = Mat::Zero(R, d);
  for (int k = 0; k < copies; ++k) s.dout.row(ptrdiff_t(k) * n) = s.dcls.row(k);

  for (int b = L - 1; b > l; --b) {
    const StackedBlock& t = s.blocks[size_t(b - l)];
    const BlockParams& w = p.blocks[size_t(b)];
    stacked_mlp_backward(s, t, w);
    s.dctx.resize(R, d);
    gemm_nn(s.dctx.data(), s.dx_mid.data(), w.proj_w.data(), R, d, d, d, d, d, 1.0f, 0.0f);
    stacked_attention_backward(s.dqkv, s.dA, s.dS, s.dctx, t.qkv, t.attn, copies, n, H);
    s.dln.resize(R, d);
    gemm_nn(s.dln.data(), s.dqkv.data(), w.qkv_w.data(), R, d, 3 * d, 3 * d, d, d, 1.0f, 0.0f);
    layernorm_backward(s.tmp, nullptr, nullptr, s.dln, t.x, t.mean1, t.rstd1, w.norm1_w);
    s.dout = s.dx_mid + s.tmp;
  }
  // Block l: ∂F/∂ctx_l = ∂F/∂x_mid·Wproj, summed over the copies.
  const BlockParams& w = p.blocks[size_t(l)];
  stacked_mlp_backward(s, first, w);
  s.dctx.resize(R, d);
  gemm_nn(s.dctx.data(), s.dx_mid.data(), w.proj_w.data(), R, d, d, d, d, d, 1.0f, 0.0f);
  for (int k = 0; k < copies; ++k) s.dctx_sum += s.dctx.middleRows(ptrdiff_t(k) * n, n);
}

// Block l's Attr: Σ_k ∂F/∂A_h = (Σ_k dctx_h)·v_hᵀ (ctx_h = A_h·v_h, v_h does not depend on α);
// Attr_h = A_h ⊙ that / m.
AttAttrBlock attattr_block(Scratch& s, const Model& m, const Trace& tr, int l, int target, int steps) {
  const Config& c = m.config;
  const int n = c.tokens(), d = c.dim, L = c.depth, H = c.heads, dh = d / H, mlp = c.mlp_dim;
  const BlockTrace& bt = tr.blocks[size_t(l)];
  const Mat proj = bt.ctx * m.params.blocks[size_t(l)].proj_w.transpose();  // (n, d) ctx_l·Wprojᵀ

  // Copies per chunk from the memory bound on the stacked trace.
  size_t per_copy = size_t(n) * size_t(d + mlp + 2);
  per_copy += size_t(L - l - 1) * size_t(n) * size_t(5 * d + mlp + 4 + H * n);
  const int cap = int(std::max<size_t>(1, std::min<size_t>(size_t(steps), kChunkFloats / per_copy)));
  const int chunks = (steps + cap - 1) / cap;
  s.dctx_sum = Mat::Zero(n, d);
  for (int ch = 0; ch < chunks; ++ch) {
    const int k0 = int(int64_t(steps) * ch / chunks), k1 = int(int64_t(steps) * (ch + 1) / chunks);
    attattr_chunk(s, m, tr, l, target, k0, k1 - k0, steps, proj);
  }
  AttAttrBlock out;
  out.attr.resize(size_t(H));
  for (int h = 0; h < H; ++h) {
    Mat& a = out.attr[size_t(h)];
    a.resize(n, n);
    gemm_nt(a.data(), s.dctx_sum.data() + h * dh, bt.qkv.data() + 2 * d + h * dh, n, n, dh, d, 3 * d, n,
            1.0f / float(steps), 0.0f);
    a = a.cwiseProduct(bt.attn[size_t(h)]);
  }
  return out;
}

void check_attattr_args(const Model& m, const Trace& tr, int target, int steps) {
  const Config& c = m.config;
  if (tr.blocks.size() != size_t(c.depth) || tr.logits.size() != c.classes)
    throw Error(ErrorCode::bad_argument, "attattr needs the forward trace of an input to this model");
  if (target < 0 || target >= c.classes)
    throw Error(ErrorCode::bad_argument, "target class " + std::to_string(target) + " is out of range: the model has " +
                                             std::to_string(c.classes) + " classes");
  if (steps < 1) throw Error(ErrorCode::bad_argument, "attattr needs at least one step");
}

}  // namespace

Vec target_prob_grad(const Config& c, const Vec& logits, int target) {
  const Vec p = output_probs(c, logits);  // (classes)
  const float pt = p[target];
  Vec g;
  if (c.output == OutputKind::sigmoid) {
    g = Vec::Zero(logits.size());
    g[target] = pt * (1.0f - pt);  // σ′ = σ(1 − σ)
  } else {
    g = -pt * p;  // ∂p_t/∂z_j = p_t(δ_tj − p_j)
    g[target] += pt;
  }
  return g;
}

std::vector<AttAttrBlock> attattr_blocks(const Model& m, const Trace& tr, int target, int steps, int threads,
                                         const ProgressFn& progress) {
  check_attattr_args(m, tr, target, steps);
  const int L = m.config.depth;
  std::vector<AttAttrBlock> out(static_cast<size_t>(L));
  std::atomic<int> next{0}, done{0};
  std::atomic<bool> stop{false};
  // Blocks are independent: each worker takes the next one (block 0, the longest, first); a
  // block's result does not depend on which thread computed it.
  run_workers(std::max(1, std::min(threads, L)), [&](int t) {
    Scratch s;
    for (;;) {
      if (stop.load()) return;
      const int l = next.fetch_add(1);
      if (l >= L) return;
      out[size_t(l)] = attattr_block(s, m, tr, l, target, steps);
      const int finished = done.fetch_add(1) + 1;
      if (t == 0 && progress && !progress(double(finished) / double(L))) stop.store(true);
    }
  });
  if (stop.load()) throw Error(ErrorCode::cancelled, "attattr cancelled");
  return out;
}

std::vector<AttAttrBlock> attattr_blocks_naive(const Model& m, const Trace& tr, int target, int steps) {
  check_attattr_args(m, tr, target, steps);
  const Config& c = m.config;
  const int n = c.tokens(), H = c.heads;
  std::vector<AttAttrBlock> out(size_t(c.depth));
  Trace t;
  Grads g;
  std::vector<Mat> scaled(static_cast<size_t>(H));
  for (int l = 0; l < c.depth; ++l) {
    ForwardOptions fo;
    fo.override_block = l;
    fo.override_attn = &scaled;
    std::vector<Mat> sum(size_t(H), Mat::Zero(n, n));
    for (int k = 0; k < steps; ++k) {
      for (int h = 0; h < H; ++h) scaled[size_t(h)] = (float(k) / float(steps)) * tr.blocks[size_t(l)].attn[size_t(h)];
      vit_forward(t, m, tr.input, fo);
      vit_backward(g, nullptr, m, t, target_prob_grad(c, t.logits, target), fo);
      for (int h = 0; h < H; ++h) sum[size_t(h)] += g.blocks[size_t(l)].attn[size_t(h)];
    }
    out[size_t(l)].attr.resize(size_t(H));
    for (int h = 0; h < H; ++h)
      out[size_t(l)].attr[size_t(h)] = tr.blocks[size_t(l)].attn[size_t(h)].cwiseProduct(sum[size_t(h)]) / float(steps);
  }
  return out;
}

Mat attattr_token_map(const std::vector<AttAttrBlock>& attr, const Config& c) {
  const int n = c.tokens();
  Eigen::RowVectorXd row = Eigen::RowVectorXd::Unit(n, 0);  // (n) e₀ᵀ·Ŝ_{L−1}·…
  for (int l = int(attr.size()) - 1; l >= 0; --l) {
    MatD mpos = MatD::Zero(n, n);  // M_l⁺
    for (const Mat& a : attr[size_t(l)].attr) mpos += a.cast<double>().cwiseMax(0.0);
    const double mx = mpos.maxCoeff();
    if (mx <= 0.0) continue;  // Ŝ_l = I
    MatD step = mpos / mx + MatD::Identity(n, n);
    const Eigen::VectorXd rows = step.rowwise().sum();
    step = rows.cwiseInverse().asDiagonal() * step;
    row = row * step;
  }
  Mat map(c.grid_h(), c.grid_w());
  for (int i = 0; i < n - 1; ++i) map(i / c.grid_w(), i % c.grid_w()) = float(row[i + 1]);
  return map;
}

HeadScores head_scores_zero(const Config& c) {
  HeadScores s;
  s.attattr = MatD::Zero(c.depth, c.heads);
  s.attention = MatD::Zero(c.depth, c.heads);
  s.taylor = MatD::Zero(c.depth, c.heads);
  return s;
}

void head_scores_add(HeadScores& s, const Model& m, const Trace& tr, int target,
                     const std::vector<AttAttrBlock>& attr) {
  const Config& c = m.config;
  Grads g;
  vit_backward(g, nullptr, m, tr, target_prob_grad(c, tr.logits, target));  // ∂F/∂A at α = 1
  for (int l = 0; l < c.depth; ++l)
    for (int h = 0; h < c.heads; ++h) {
      const Mat& A = tr.blocks[size_t(l)].attn[size_t(h)];
      s.attattr(l, h) += double(attr[size_t(l)].attr[size_t(h)].maxCoeff());
      s.attention(l, h) += A.rowwise().maxCoeff().cast<double>().mean();
      s.taylor(l, h) += std::fabs(A.cast<double>().cwiseProduct(g.blocks[size_t(l)].attn[size_t(h)].cast<double>()).sum());
    }
  s.images += 1;
}

std::vector<int> pruning_order(const MatD& scores) {
  std::vector<int> order(size_t(scores.size()));
  std::iota(order.begin(), order.end(), 0);
  const double* v = scores.data();  // row-major (L, H): flat index l·H + h
  std::stable_sort(order.begin(), order.end(), [v](int a, int b) { return v[a] < v[b]; });
  return order;
}

std::vector<double> pruning_curve(const Model& m, const std::vector<Image>& images,
                                  const std::vector<std::vector<int>>& labels, const std::vector<int>& order) {
  const Config& c = m.config;
  const int heads = c.depth * c.heads;
  if (images.size() != labels.size()) throw Error(ErrorCode::bad_argument, "one label set per image is needed");
  if (order.size() != size_t(heads)) throw Error(ErrorCode::bad_argument, "the pruning order must list every head");
  ForwardOptions fo;
  fo.head_mask.assign(size_t(heads), 1.0f);
  std::vector<double> acc;
  Trace tr;
  for (int k = 0; k <= heads; ++k) {
    if (k > 0) fo.head_mask[size_t(order[size_t(k - 1)])] = 0.0f;
    int correct = 0;
    for (size_t i = 0; i < images.size(); ++i) {
      vit_forward(tr, m, images[i], fo);
      const int top = top_k(c, tr.logits, 1)[0].cls;
      correct += std::find(labels[i].begin(), labels[i].end(), top) != labels[i].end() ? 1 : 0;
    }
    acc.push_back(images.empty() ? 0.0 : double(correct) / double(images.size()));
  }
  return acc;
}

AttrTree attattr_tree(const std::vector<AttAttrBlock>& attr, double threshold) {
  AttrTree t;
  t.threshold = threshold;
  if (attr.empty() || attr[0].attr.empty()) return t;
  const int L = int(attr.size()), n = int(attr[0].attr[0].rows());
  auto summed = [&](int l) {  // M_l = Σ_h Attr_{l,h}
    MatD s = MatD::Zero(n, n);
    for (const Mat& a : attr[size_t(l)].attr) s += a.cast<double>();
    return s;
  };
  const Eigen::RowVectorXd col = summed(L - 1).colwise().sum();  // (n)
  t.root = 1;
  for (int j = 2; j < n; ++j)
    if (col[j] > col[t.root]) t.root = j;
  std::vector<char> in_tree(size_t(n), 0);
  in_tree[size_t(t.root)] = 1;
  t.nodes.push_back(t.root);
  struct Cand {
    double score;
    int i, j;
  };
  for (int l = L - 2; l >= 0; --l) {
    const MatD M = summed(l);
    const double mx = M.bottomRows(n - 1).maxCoeff();  // excluding the CLS query row
    if (!(mx > 0.0)) continue;
    std::vector<Cand> cands;
    for (int i = 1; i < n; ++i) {
      if (!in_tree[size_t(i)]) continue;
      for (int j = 1; j < n; ++j)
        if (!in_tree[size_t(j)] && M(i, j) / mx > threshold) cands.push_back({M(i, j) / mx, i, j});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.score > b.score; });
    for (const Cand& e : cands) {
      if (in_tree[size_t(e.j)]) continue;  // already has a parent (from a higher score)
      in_tree[size_t(e.j)] = 1;
      t.nodes.push_back(e.j);
      t.edges.push_back({e.i, e.j, l, e.score});
    }
  }
  return t;
}

std::string attr_tree_json(const AttrTree& t, const Config& c) {
  using json = nlohmann::json;
  json j;
  j["root"] = t.root;
  j["threshold"] = t.threshold;
  j["grid"] = {c.grid_h(), c.grid_w()};
  json nodes = json::array(), edges = json::array();
  for (int tok : t.nodes) nodes.push_back({{"token", tok}, {"row", (tok - 1) / c.grid_w()}, {"col", (tok - 1) % c.grid_w()}});
  for (const AttrTreeEdge& e : t.edges)
    edges.push_back({{"from", e.from}, {"to", e.to}, {"block", e.block}, {"score", e.score}});
  j["nodes"] = nodes;
  j["edges"] = edges;
  return j.dump(1);
}

}  // namespace vitlens
