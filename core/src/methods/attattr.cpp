// attattr.cpp — self-attention attribution (Hao, Dong, Wei & Xu, AAAI 2021): the batched pass
// over the m scaled copies of one block's attention, the unbatched definition it is checked
// against, the image map, head scores and pruning, and the attribution tree.
//
// The batched pass is a forward and backward pass of blocks l … L−1 (block.h) on stacked (c·n, d)
// token matrices (c copies of the n tokens); it records only what its backward needs
// (BlockRecord::backward: no parameter gradients, so no layer inputs that serve only dW) and
// reads the float trace below block l.
#include "vitlens/methods/attattr.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
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

// Per-thread buffers, reused across blocks and chunks.
struct Scratch {
  std::vector<BlockTrace> blocks;  // index b − l: blocks l … L−1 of the stacked copies
  BlockScratch bs;
  BlockGrads g;                    // one block's gradients, reused per block
  Mat attn_out;                    // (c·rl, d) block l's α_k·ctx_l·Wprojᵀ + b_proj per copy k
  Mat out, dout;                   // (c·n or c·q, d) the stacked pass's output, ∂F/∂ of a block's output
  Mat x_final, dx_final;           // (n, d) one copy's last block output and its gradient
  HeadTrace head;                  // the head of one copy
  HeadGrads dhead;
  Mat dctx_sum;                    // (n, d) Σ over copies of ∂F/∂ctx_l
};

// Block b's heads switched off in the pass `tr` recorded (Trace::head_mask): the stacked copies run
// the blocks above l masked as the input was. The last block forms only the rows the head reads.
BlockOptionsT<float> head_options(const Trace& tr, const Config& c, int b) {
  BlockOptionsT<float> o;
  if (!tr.head_mask.empty()) o.head_mask = tr.head_mask.data() + size_t(b) * size_t(c.heads);
  if (b == c.depth - 1) o.rows = head_rows(c);
  return o;
}

// Adds Σ_k ∂F(α_k·A_l)/∂ctx_l over the copies k = k0 … k0 + c − 1 to s.dctx_sum: the blocks
// from l's ctx up, stacked, recording only what their backward needs (BlockRecord::backward).
void attattr_chunk(Scratch& s, const Model& m, const Trace& tr, int l, int target, int k0, int copies,
                   int steps, const Mat& proj) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int n = c.tokens(), d = c.dim, L = c.depth;
  const int q = head_rows(c);              // the rows of the last block's output the head reads
  const int rl = l == L - 1 ? q : n;       // block l's output rows per copy
  const BlockTrace& bt = tr.blocks[size_t(l)];
  s.blocks.resize(size_t(L - l));

  // Block l from its attention output: proj((α_k·A_l)·v_l) = α_k·(ctx_l·Wprojᵀ) + b_proj, the
  // product formed once per block (`proj`), on the block input x_l of every copy (its first rl
  // rows: the last block's output is formed only where the head reads it).
  BlockTrace& first = s.blocks[0];
  first.x_rows.resize(0, d);
  Mat& x_l = rl == n ? first.x : first.x_rows;
  x_l.resize(ptrdiff_t(copies) * rl, d);
  s.attn_out.resize(ptrdiff_t(copies) * rl, d);
  const auto bias = p.blocks[size_t(l)].proj_b.transpose().replicate(rl, 1);
  for (int k = 0; k < copies; ++k) {
    const float alpha = float(k0 + k) / float(steps);
    x_l.middleRows(ptrdiff_t(k) * rl, rl) = bt.x.topRows(rl);
    s.attn_out.middleRows(ptrdiff_t(k) * rl, rl) = alpha * proj.topRows(rl) + bias;
  }
  block_mlp_forward(s.out, first, s.bs, s.attn_out, p.blocks[size_t(l)], c, BlockRecord::backward);
  for (int b = l + 1; b < L; ++b) {
    BlockTrace& t = s.blocks[size_t(b - l)];
    t.x.swap(s.out);
    block_forward(s.out, t, s.bs, p.blocks[size_t(b)], c, copies, BlockRecord::backward, head_options(tr, c, b));
  }
  // The head (final norm, pooling, fc_norm, logits) on each copy's q rows; F_k = the target's
  // probability.
  s.dout.resize(ptrdiff_t(copies) * q, d);
  for (int k = 0; k < copies; ++k) {
    s.x_final = s.out.middleRows(ptrdiff_t(k) * q, q);
    head_forward(s.head, s.x_final, m);
    head_backward(s.dx_final, s.dhead, nullptr, s.head, s.x_final, target_prob_grad(c, s.head.logits, target), m);
    s.dout.middleRows(ptrdiff_t(k) * q, q) = s.dx_final;
  }

  for (int b = L - 1; b > l; --b) {
    block_backward(s.g, nullptr, s.dout, s.blocks[size_t(b - l)], p.blocks[size_t(b)], c, copies, false,
                   head_options(tr, c, b));
    s.dout.swap(s.g.x);
  }
  // Block l: ∂F/∂ctx_l, summed over the copies (0 below the first rl rows).
  block_output_backward(s.g, nullptr, s.dout, first, p.blocks[size_t(l)], c, false);
  for (int k = 0; k < copies; ++k) s.dctx_sum.topRows(rl) += s.g.ctx.middleRows(ptrdiff_t(k) * rl, rl);
}

// A unit of the batched pass: copies k0 … k1 − 1 of block l. Their number per unit is bounded by
// the memory of the stacked trace (kChunkFloats); units are small enough for two threads to share
// block 0's, the longest, and a block's units do not depend on the thread count.
struct Chunk {
  int l, k0, k1;
};

std::vector<Chunk> attattr_chunks(const Config& c, int steps) {
  const int n = c.tokens(), d = c.dim, L = c.depth, H = c.heads, mlp = c.mlp_dim;
  std::vector<Chunk> out;
  for (int l = 0; l < L; ++l) {  // block 0, the longest, first
    size_t per_copy = size_t(n) * size_t(2 * d + mlp + 2);
    per_copy += size_t(L - l - 1) * size_t(n) * size_t(5 * d + mlp + 4 + H * n);
    const int cap = int(std::max<size_t>(1, std::min<size_t>(size_t(steps), kChunkFloats / per_copy)));
    const int chunks = (steps + cap - 1) / cap;
    for (int ch = 0; ch < chunks; ++ch)
      out.push_back({l, int(int64_t(steps) * ch / chunks), int(int64_t(steps) * (ch + 1) / chunks)});
  }
  return out;
}

// Block l's Attr from Σ_k ∂F/∂ctx_l (dctx, (n, d)): Σ_k ∂F/∂A_h = (Σ_k dctx_h)·v_hᵀ (ctx_h = A_h·v_h,
// v_h does not depend on α); Attr_h = A_h ⊙ that / m.
AttAttrBlock attattr_block(const Model& m, const Trace& tr, int l, int steps, const Mat& dctx) {
  const Config& c = m.config;
  const int n = c.tokens(), d = c.dim, H = c.heads, dh = d / H;
  const BlockTrace& bt = tr.blocks[size_t(l)];
  AttAttrBlock out;
  out.attr.resize(size_t(H));
  for (int h = 0; h < H; ++h) {
    Mat& a = out.attr[size_t(h)];
    a.resize(n, n);
    gemm_nt(a.data(), dctx.data() + h * dh, bt.qkv.data() + 2 * d + h * dh, n, n, dh, d, 3 * d, n,
            1.0f / float(steps), 0.0f);
    a = a.cwiseProduct(bt.attn[size_t(h)]);
  }
  return out;
}

void check_attattr_args(const Model& m, const Trace& tr, int target, int steps) {
  const Config& c = m.config;
  if (tr.blocks.size() != size_t(c.depth) || tr.logits.size() != c.classes ||
      !(tr.head_mask.empty() || tr.head_mask.size() == size_t(c.depth) * size_t(c.heads)))
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
                                         const ProgressFn& progress, AttAttrSums* keep) {
  check_attattr_args(m, tr, target, steps);
  const Config& c = m.config;
  const int L = c.depth;
  AttAttrSums local;
  AttAttrSums& sums = keep ? *keep : local;
  const std::vector<Chunk> chunks = attattr_chunks(c, steps);
  if (sums.target != target || sums.steps != steps || sums.units.size() != chunks.size()) {
    sums = AttAttrSums{};
    sums.target = target;
    sums.steps = steps;
    sums.blocks.resize(size_t(L));
    sums.folded.assign(size_t(L), 0);
    sums.units.resize(chunks.size());
  }
  if (!sums.complete) {
    std::vector<size_t> first(size_t(L) + 1, chunks.size());  // block l's units: [first[l], first[l + 1])
    for (size_t i = 0; i < chunks.size(); ++i)  // in block order, each block at least one
      if (i == 0 || chunks[i].l != chunks[i - 1].l) first[size_t(chunks[i].l)] = i;
    const auto finished = [&](size_t i) {
      const size_t l = size_t(chunks[i].l);
      return i < first[l] + size_t(sums.folded[l]) || sums.units[i].size() > 0;
    };
    // Adds block l's finished units that follow its sum, in unit order (as the sum over all of them
    // would), and frees them.
    const auto fold = [&](size_t l) {
      for (size_t j = first[l] + size_t(sums.folded[l]); j < first[l + 1] && sums.units[j].size(); ++j) {
        if (sums.folded[l] == 0) sums.blocks[l] = std::move(sums.units[j]);
        else sums.blocks[l] += sums.units[j];
        sums.units[j] = Mat();
        ++sums.folded[l];
      }
    };
    // ctx_l·Wprojᵀ per block, formed once; every unit of block l scales it by its α_k.
    std::vector<Mat> proj(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) proj[size_t(l)] = tr.blocks[size_t(l)].ctx * m.params.blocks[size_t(l)].proj_w.transpose();
    std::vector<size_t> todo;  // the units not finished, in order
    double total = 0.0;        // progress in units of copies × blocks run
    long long already = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const long long w = (chunks[i].k1 - chunks[i].k0) * (L - chunks[i].l);
      total += double(w);
      if (finished(i)) already += w;
      else todo.push_back(i);
    }
    std::atomic<int> next{0};
    std::atomic<bool> stop{false};
    std::atomic<long long> done{already};
    std::mutex folding;
    // Each worker takes the next unit; each block's units are added in unit order, so the result
    // does not depend on which thread computed what, nor on which call.
    run_workers(std::max(1, std::min(threads, int(todo.size()))), [&](int t) {
      Scratch s;
      for (;;) {
        if (stop.load()) return;
        const int k = next.fetch_add(1);
        if (k >= int(todo.size())) return;
        const size_t i = todo[size_t(k)];
        const Chunk& ch = chunks[i];
        s.dctx_sum = Mat::Zero(c.tokens(), c.dim);  // (n, d) this unit's Σ over its copies of ∂F/∂ctx_l
        attattr_chunk(s, m, tr, ch.l, target, ch.k0, ch.k1 - ch.k0, steps, proj[size_t(ch.l)]);
        {
          std::lock_guard<std::mutex> lock(folding);
          sums.units[i].swap(s.dctx_sum);
          fold(size_t(ch.l));
        }
        const long long finished_w = done.fetch_add((ch.k1 - ch.k0) * (L - ch.l)) + (ch.k1 - ch.k0) * (L - ch.l);
        if (t == 0 && progress && !progress(double(finished_w) / total)) stop.store(true);
      }
    });
    if (stop.load()) throw Error(ErrorCode::cancelled, "attattr cancelled");
    sums.complete = true;
  }
  std::vector<AttAttrBlock> out(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) out[size_t(l)] = attattr_block(m, tr, l, steps, sums.blocks[size_t(l)]);
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
    fo.head_mask = tr.head_mask;  // an off head's A_l is 0, and α·0 stays 0
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
  Eigen::RowVectorXd row = query_weights(c).transpose();  // (n) qᵀ·Ŝ_{L−1}·… (e₀ᵀ: CLS)
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
  const int k = c.prefix();
  for (int i = 0; i < n - k; ++i) map(i / c.grid_w(), i % c.grid_w()) = float(row[k + i]);
  return map;
}

Vec gold_loss_grad(const Config& c, const Vec& logits, const std::vector<int>& gold) {
  if (gold.empty()) throw Error(ErrorCode::bad_argument, "the loss needs at least one gold label");
  for (int g : gold)
    if (g < 0 || g >= c.classes)
      throw Error(ErrorCode::bad_argument, "gold label " + std::to_string(g) + " is out of range: the model has " +
                                               std::to_string(c.classes) + " classes");
  const Vec p = output_probs(c, logits);  // (classes) σ(z) or softmax(z)
  Vec y = Vec::Zero(logits.size());       // (classes) the gold target
  if (c.output == OutputKind::sigmoid) {
    for (int g : gold) y[g] = 1.0f;  // multi-hot; ∂BCE/∂z = σ(z) − y
  } else {
    for (int g : gold) y[g] += 1.0f / float(gold.size());  // ∂(−mean_g log p_g)/∂z = p − mean_g e_g
  }
  return p - y;
}

HeadScores head_scores_zero(const Config& c) {
  HeadScores s;
  s.attattr = MatD::Zero(c.depth, c.heads);
  s.attention_max = MatD::Zero(c.depth, c.heads);
  s.attention = MatD::Zero(c.depth, c.heads);
  s.taylor_loss = MatD::Zero(c.depth, c.heads);
  s.taylor = MatD::Zero(c.depth, c.heads);
  return s;
}

void head_scores_add(HeadScores& s, const Model& m, const Trace& tr, int target,
                     const std::vector<AttAttrBlock>& attr, const std::vector<int>& gold) {
  const Config& c = m.config;
  Grads gf, gl;
  ForwardOptions fo;
  fo.head_mask = tr.head_mask;  // the model as `tr` ran it
  vit_backward(gf, nullptr, m, tr, target_prob_grad(c, tr.logits, target), fo);                       // ∂F/∂A at α = 1
  vit_backward(gl, nullptr, m, tr, gold_loss_grad(c, tr.logits, gold.empty() ? std::vector<int>{target} : gold), fo);  // ∂L/∂A
  for (int l = 0; l < c.depth; ++l)
    for (int h = 0; h < c.heads; ++h) {
      const MatD A = tr.blocks[size_t(l)].attn[size_t(h)].cast<double>();  // (n, n)
      if (!attr.empty()) s.attattr(l, h) += double(attr[size_t(l)].attr[size_t(h)].maxCoeff());  // max_{i,j} Attr
      s.attention_max(l, h) += A.maxCoeff();                                  // max_{i,j} A
      s.attention(l, h) += A.rowwise().maxCoeff().mean();                     // mean_i max_j A
      // |A_hᵀ ∂L/∂A_h|: the first-order change of L when the head's attention is scaled to 0
      s.taylor_loss(l, h) += std::fabs(A.cwiseProduct(gl.blocks[size_t(l)].attn[size_t(h)].cast<double>()).sum());
      s.taylor(l, h) += std::fabs(A.cwiseProduct(gf.blocks[size_t(l)].attn[size_t(h)].cast<double>()).sum());
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

double masked_accuracy(const Model& m, const std::vector<Image>& images, const std::vector<std::vector<int>>& labels,
                       const std::vector<float>& mask) {
  const Config& c = m.config;
  if (images.size() != labels.size()) throw Error(ErrorCode::bad_argument, "one label set per image is needed");
  if (mask.size() != size_t(c.depth * c.heads)) throw Error(ErrorCode::bad_argument, "the head mask must cover every head");
  if (images.empty()) return 0.0;
  ForwardOptions fo;
  fo.head_mask = mask;
  Trace tr;
  int correct = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    vit_forward(tr, m, images[i], fo);
    const int top = top_k(c, tr.logits, 1)[0].cls;
    correct += std::find(labels[i].begin(), labels[i].end(), top) != labels[i].end() ? 1 : 0;
  }
  return double(correct) / double(images.size());
}

std::vector<double> pruning_curve(const Model& m, const std::vector<Image>& images,
                                  const std::vector<std::vector<int>>& labels, const std::vector<int>& order) {
  const Config& c = m.config;
  const int heads = c.depth * c.heads;
  if (order.size() != size_t(heads)) throw Error(ErrorCode::bad_argument, "the pruning order must list every head");
  std::vector<float> mask(size_t(heads), 1.0f);
  std::vector<double> acc;
  for (int k = 0; k <= heads; ++k) {
    if (k > 0) mask[size_t(order[size_t(k - 1)])] = 0.0f;
    acc.push_back(masked_accuracy(m, images, labels, mask));
  }
  return acc;
}

LayerPruning layer_pruning(const Model& m, const std::vector<Image>& images,
                           const std::vector<std::vector<int>>& labels, const MatD& scores) {
  const Config& c = m.config;
  const int L = c.depth, H = c.heads;
  if (scores.rows() != L || scores.cols() != H) throw Error(ErrorCode::bad_argument, "the scores must be (depth, heads)");
  LayerPruning out;
  out.prune_top.assign(size_t(L), std::vector<double>(size_t(H + 1)));
  out.keep_top.assign(size_t(L), std::vector<double>(size_t(H + 1)));
  for (int l = 0; l < L; ++l) {
    std::vector<int> rank(static_cast<size_t>(H));  // block l's heads, descending score, ties by index
    std::iota(rank.begin(), rank.end(), 0);
    std::stable_sort(rank.begin(), rank.end(), [&](int a, int b) { return scores(l, a) > scores(l, b); });
    for (int k = 0; k <= H; ++k) {
      std::vector<float> prune(size_t(L * H), 1.0f), keep(size_t(L * H), 1.0f);
      for (int r = 0; r < H; ++r) {
        const size_t flat = size_t(l * H + rank[size_t(r)]);
        (r < k ? prune : keep)[flat] = 0.0f;  // the top k pruned; or everything but the top k
      }
      out.prune_top[size_t(l)][size_t(k)] = masked_accuracy(m, images, labels, prune);
      out.keep_top[size_t(l)][size_t(k)] = masked_accuracy(m, images, labels, keep);
    }
  }
  return out;
}

const char* tree_convention_name(TreeConvention c) { return c == TreeConvention::reference ? "reference" : "ours"; }

TreeConvention parse_tree_convention(const std::string& name) {
  if (name == "ours") return TreeConvention::ours;
  if (name == "reference") return TreeConvention::reference;
  throw Error(ErrorCode::bad_argument, "unknown tree convention '" + name + "': use ours or reference");
}

namespace {

// The published code's conventions (attattr.h, "reference"); M[l] = Σ_h Attr_{l,h}.
AttrTree attattr_tree_reference(const std::vector<MatD>& M, double threshold, int k) {
  AttrTree t;
  t.threshold = threshold;
  t.convention = TreeConvention::reference;
  const int L = int(M.size()), n = int(M[0].rows());
  // The root: Σ_l M_l, off-diagonal positive entries, prefix query rows dropped; the largest row
  // sum (dividing by |max| first, as the code does, changes no order). Ties: the lowest index.
  MatD total = MatD::Zero(n, n);
  for (const MatD& m : M) total += m;
  t.root = k;
  double best = -1.0;
  for (int i = k; i < n; ++i) {
    double row = 0.0;
    for (int j = 0; j < n; ++j)
      if (j != i && total(i, j) > 0.0) row += total(i, j);
    if (row > best) {
      best = row;
      t.root = i;
    }
  }
  // M̂_l = M_l / |max_{i ≥ prefix, all j} M_l|; a block whose maximum is 0 gives no edges.
  std::vector<MatD> norm(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    const double mx = std::fabs(M[size_t(l)].bottomRows(n - k).maxCoeff());
    norm[size_t(l)] = mx > 0.0 ? MatD(M[size_t(l)] / mx) : MatD::Zero(n, n);
  }
  std::vector<char> in_tree(size_t(n), 0);
  in_tree[size_t(t.root)] = 1;
  t.nodes.push_back(t.root);
  auto add = [&](int i, int j, int l) {
    in_tree[size_t(j)] = 1;
    t.nodes.push_back(j);
    t.edges.push_back({i, j, l, norm[size_t(l)](i, j)});
  };
  if (L >= 2)  // block L−2: the root's row only
    for (int j = 0; j < n; ++j)
      if (j != t.root && norm[size_t(L - 2)](t.root, j) > threshold) add(t.root, j, L - 2);
  for (int l = L - 3; l >= 0; --l)  // then index order: a node added here can parent in this block
    for (int i = k; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (in_tree[size_t(i)] && !in_tree[size_t(j)] && norm[size_t(l)](i, j) > threshold) add(i, j, l);
  return t;
}

}  // namespace

AttrTree attattr_tree(const std::vector<AttAttrBlock>& attr, double threshold, int prefix,
                      TreeConvention convention) {
  AttrTree t;
  t.threshold = threshold;
  t.convention = convention;
  if (attr.empty() || attr[0].attr.empty()) return t;
  const int L = int(attr.size()), n = int(attr[0].attr[0].rows()), k = prefix;
  assert(k >= 1 && k < n);
  auto summed = [&](int l) {  // M_l = Σ_h Attr_{l,h}
    MatD s = MatD::Zero(n, n);
    for (const Mat& a : attr[size_t(l)].attr) s += a.cast<double>();
    return s;
  };
  if (convention == TreeConvention::reference) {
    std::vector<MatD> M;
    for (int l = 0; l < L; ++l) M.push_back(summed(l));
    return attattr_tree_reference(M, threshold, k);
  }
  const Eigen::RowVectorXd col = summed(L - 1).colwise().sum();  // (n)
  t.root = k;
  for (int j = k + 1; j < n; ++j)
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
    const double mx = M.bottomRows(n - k).maxCoeff();  // excluding the prefix query rows
    if (!(mx > 0.0)) continue;
    std::vector<Cand> cands;
    for (int i = k; i < n; ++i) {
      if (!in_tree[size_t(i)]) continue;
      for (int j = k; j < n; ++j)
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
  j["convention"] = tree_convention_name(t.convention);
  j["grid"] = {c.grid_h(), c.grid_w()};
  json nodes = json::array(), edges = json::array();
  const int k = c.prefix();
  for (int tok : t.nodes) {
    const bool patch = tok >= k;
    nodes.push_back({{"token", tok}, {"row", patch ? (tok - k) / c.grid_w() : -1}, {"col", patch ? (tok - k) % c.grid_w() : -1}});
  }
  for (const AttrTreeEdge& e : t.edges)
    edges.push_back({{"from", e.from}, {"to", e.to}, {"block", e.block}, {"score", e.score}});
  j["nodes"] = nodes;
  j["edges"] = edges;
  return j.dump(1);
}

}  // namespace vitlens
