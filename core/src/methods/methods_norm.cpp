// methods_norm.cpp — the norm-based maps (Kobayashi et al., EMNLP 2020 "Attention is Not Only a
// Weight", EMNLP 2021 "Incorporating Residual and Normalization Layers", ICLR 2024 "Analyzing
// Feed-Forward Blocks in Transformers through the Lens of Attention Maps") and the `norm-based`
// method: per block the maps ‖z_{i←j}‖ of five stages (see norm_maps.h for every formula and
// where each bias goes), and a token map by rolling out the row-normalised maps of one stage.
//
// What it is not: it never forms the H×n×n×d (or n×n×d) tensor of all pieces. Each query row is
// streamed: the per-block tables (norm_tables_build) make a row's pieces weighted sums of
// precomputed per-head rows, and the only large product per row is the FF's (n, mlp)·(mlp, d).
// Everything of width d is in double; the (n, mlp) scratch and its product with W2 are float.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>

#include "methods_internal.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/tensor/parallel.h"

namespace vitlens {

namespace {

constexpr int s_atb = int(NormStage::atb), s_res = int(NormStage::atb_res), s_ln = int(NormStage::atb_res_ln),
              s_ff = int(NormStage::atb_res_ln_ff), s_layer = int(NormStage::layer);

// Each row minus its own mean, times γ (elementwise over the columns).
MatD centre_scale(const MatD& v, const VecD& gamma) {
  MatD c = v.colwise() - v.rowwise().mean();
  return c * gamma.asDiagonal();
}

// How many workers the row loop uses for a request of `threads` over `rows` rows.
int row_workers(int threads, int rows) { return std::max(1, std::min(usable_threads(threads), rows)); }

}  // namespace

namespace {

// Each stage's name (as the CLI, the API and the page spell it) and its decomposition.
struct StageText {
  const char* name;
  const char* formula;
};
constexpr StageText kStages[norm_stage_count] = {
    {"atb", "a_(i←j) = Σ_h A_h,ij · ((LN₁(x_j)·W_V^h + b_V^h)·W_O^h)"},
    {"atb-res", "x′_(i←j) = a_(i←j) + δ_ij · x_i"},
    {"atb-res-ln", "g_(i←j) = γ₂ ⊙ (x′_(i←j) − mean(x′_(i←j))) / std(x′_i)"},
    {"atb-res-ln-ff", "f_(i←j) = (h_(i←j) ⊙ act(h_i)/h_i)·W₂,  h_(i←j) = g_(i←j)·W₁"},
    {"layer", "y_(i←j) = x′_(i←j) + f_(i←j)"},
};

}  // namespace

const char* norm_stage_name(NormStage s) { return kStages[int(s)].name; }
const char* norm_stage_formula(NormStage s) { return kStages[int(s)].formula; }

void norm_tables_build(NormTables& t, const Model& m, const Trace& tr, int block, int threads) {
  const Config& c = m.config;
  const BlockParams& bp = m.params.blocks[size_t(block)];
  const BlockTrace& bt = tr.blocks[size_t(block)];
  const int d = c.dim, dh = c.head_dim(), H = c.heads;
  const VecD gamma2 = bp.norm2_w.cast<double>();
  const MatD w1t = bp.fc1_w.transpose().cast<double>();  // (d, mlp)
  t.block = block;
  t.value_out.resize(size_t(H));
  t.value_ff.resize(size_t(H));
  const int n = c.tokens(), mlp = c.mlp_dim;
  const MatD proj = bp.proj_w.cast<double>();  // (d, d) W_O, head h = columns h·d_h …
  // H + 2 independent tables (one per head, the residual's, and Φ), over the workers.
  const Activation act = c.act;
  const int workers = row_workers(threads, H + 2);
  run_workers(workers, [&](int w) {
    MatD ff(n, mlp);  // (n, mlp) one table in double, before the cast
    for (int h = w; h <= H + 1; h += workers) {
      if (h == H + 1) {
        // act(h)/h: Φ(h) for the exact GELU; its limit ½ at h = 0 for all three activations.
        t.phi = bt.fc1.unaryExpr([act](float x) { return float(activation_ratio(double(x), act)); });
        continue;
      }
      if (h == H) {
        const MatD gx = centre_scale(bt.x.cast<double>(), gamma2);
        gemm_nn(ff.data(), gx.data(), w1t.data(), n, mlp, d, d, mlp, mlp, 1.0, 0.0);
        t.x_ff = ff.cast<float>();
        continue;
      }
      // V_h' = v_h·W_O^hᵀ, v_h = columns 2d + h·d_h … of qkv (LN1(x)·W_V^hᵀ + b_V^h), W_O^h = proj_w[:, h·d_h …]
      const MatD v = bt.qkv.middleCols(2 * d + h * dh, dh).cast<double>();  // (n, d_h)
      MatD& vo = t.value_out[size_t(h)];
      vo.resize(n, d);
      gemm_nt(vo.data(), v.data(), proj.data() + h * dh, n, d, dh, dh, d, d, 1.0, 0.0);  // (n, d)
      if (bp.ls1.size()) vo *= bp.ls1.cast<double>().asDiagonal();  // LayerScale γ1
      const MatD g = centre_scale(vo, gamma2);
      gemm_nn(ff.data(), g.data(), w1t.data(), n, mlp, d, d, mlp, mlp, 1.0, 0.0);
      t.value_ff[size_t(h)] = ff.cast<float>();  // (n, mlp)
    }
  });
  t.bo = bp.proj_b.cast<double>();
  t.b2 = bp.fc2_b;
  if (bp.ls1.size()) t.bo = t.bo.cwiseProduct(bp.ls1.cast<double>());
  if (bp.ls2.size()) t.b2 = t.b2.cwiseProduct(bp.ls2);  // LayerScale γ2 multiplies each FF piece and the FF's bias
  t.ln_bias_core = (t.bo.array() - t.bo.mean()).matrix().cwiseProduct(gamma2);
}

void norm_row(NormRow& r, const NormTables& t, const Model& m, const Trace& tr, int i, bool bias) {
  const BlockParams& bp = m.params.blocks[size_t(t.block)];
  const BlockTrace& bt = tr.blocks[size_t(t.block)];
  const int H = int(t.value_out.size());
  const double rstd = double(bt.ln2_rstd[i]);
  const VecD gamma2 = bp.norm2_w.cast<double>();

  const int n = int(t.x_ff.rows()), d = int(t.bo.size()), mlp = int(t.x_ff.cols());
  // atb: a_{i←j} = Σ_h A_h[i, j]·V_h'[j]   (n, d)
  MatD& a = r.pieces[s_atb];
  a.resize(n, d);
  for (int j = 0; j < n; ++j) {  // plain loops over rows: vectorised, unlike Eigen's diagonal products
    double* aj = a.row(j).data();
    const double w0 = double(bt.attn[0](i, j));
    const double* v0 = t.value_out[0].row(j).data();
    for (int k = 0; k < d; ++k) aj[k] = w0 * v0[k];
    for (int h = 1; h < H; ++h) {
      const double w = double(bt.attn[size_t(h)](i, j));
      const double* v = t.value_out[size_t(h)].row(j).data();
      for (int k = 0; k < d; ++k) aj[k] += w * v[k];
    }
  }
  // atb-res: + δ_ij·x_i
  MatD& xp = r.pieces[s_res];
  xp = a;
  xp.row(i) += bt.x.row(i).cast<double>();
  // atb-res-ln: each piece centred by its own mean, scaled by the whole vector's rstd2_i and γ2
  // (centre_scale(xp, γ2)·rstd2_i in one pass, without its two temporaries)
  MatD& g = r.pieces[s_ln];
  g.resize(n, d);
  for (int j = 0; j < n; ++j) {
    const double mean = xp.row(j).mean();
    const double* xj = xp.row(j).data();
    double* gj = g.row(j).data();
    for (int k = 0; k < d; ++k) gj[k] = (xj[k] - mean) * gamma2[k] * rstd;
  }
  // atb-res-ln-ff: h_{i←j} = g_{i←j}·W1ᵀ = rstd2_i·(Σ_h A_h[i, j]·value_ff_h[j] + δ_ij·x_ff[i]),
  // then ⊙ Φ(h_i) and ·W2ᵀ (the IG closed form; b1 and b2 go to the bias term).
  Mat& s = r.scratch;
  s.resize(n, mlp);
  r.ff.resize(mlp);
  float* scale = r.ff.data();  // (mlp) Φ(h_i)·rstd2_i
  for (int k = 0; k < mlp; ++k) scale[k] = t.phi(i, k) * float(rstd);
  for (int j = 0; j < n; ++j) {
    float* sj = s.row(j).data();
    const float w0 = bt.attn[0](i, j);
    const float* v0 = t.value_ff[0].row(j).data();
    for (int k = 0; k < mlp; ++k) sj[k] = w0 * v0[k];
    for (int h = 1; h < H; ++h) {
      const float w = bt.attn[size_t(h)](i, j);
      const float* v = t.value_ff[size_t(h)].row(j).data();
      for (int k = 0; k < mlp; ++k) sj[k] += w * v[k];
    }
    if (j == i) {
      const float* x = t.x_ff.row(i).data();
      for (int k = 0; k < mlp; ++k) sj[k] += x[k];
    }
    for (int k = 0; k < mlp; ++k) sj[k] *= scale[k];
  }
  // (n, mlp)·W2ᵀ (mlp, d), W2 read from the panels the forward pass packed it into (wasm: no
  // packing of W2 in each of the n·L rows' products), then LayerScale's γ2 on the output columns.
  r.ff_out.resize(n, d);
  gemm_weight(r.ff_out.data(), s.data(), bp.fc2_w.data(), d, mlp, WeightProduct::times_wt, &bp.fc2_packs, n, mlp, d,
              1.0f, 0.0f);
  if (bp.ls2.size()) r.ff_out *= bp.ls2.asDiagonal();
  r.pieces[s_ff] = r.ff_out.cast<double>();
  // layer: the second residual
  r.pieces[s_layer] = xp + r.pieces[s_ff];

  if (!bias) return;
  // Bias terms: b_O through the stages; b1 joins the LN bias piece inside the FF, then b2.
  const VecD& bo = t.bo;
  r.bias[s_atb] = bo;
  r.bias[s_res] = bo;
  r.bias[s_ln] = t.ln_bias_core * rstd + bp.norm2_b.cast<double>();
  const Vec hb = bp.fc1_w * r.bias[s_ln].cast<float>() + bp.fc1_b;  // (mlp) the bias piece's h, b1 included
  Vec fb = bp.fc2_w * hb.cwiseProduct(t.phi.row(i).transpose());  // (d)
  if (bp.ls2.size()) fb = fb.cwiseProduct(bp.ls2);
  r.bias[s_ff] = fb.cast<double>() + t.b2.cast<double>();
  r.bias[s_layer] = bo + r.bias[s_ff];
}

NormRow norm_row_pieces(const Model& m, const Trace& tr, int block, int i) {
  if (block < 0 || block >= m.config.depth || i < 0 || i >= m.config.tokens() || tr.blocks.size() != size_t(m.config.depth))
    throw Error(ErrorCode::bad_argument, "norm_row_pieces: block " + std::to_string(block) + " or row " +
                                             std::to_string(i) + " is out of range, or the trace is not of this model");
  NormTables t;
  norm_tables_build(t, m, tr, block);
  NormRow r;
  norm_row(r, t, m, tr, i, true);
  return r;
}

NormBlock norm_block(const Model& m, const Trace& tr, int block, int threads,
                     const std::function<bool(double)>& progress) {
  const int n = m.config.tokens();
  NormTables t;
  norm_tables_build(t, m, tr, block, threads);
  NormBlock nb;
  for (int s = 0; s < norm_stage_count; ++s) {
    nb.maps[s].resize(n, n);
    nb.mixing[s].resize(n);
  }
  const int workers = row_workers(threads, n);
  std::atomic<bool> stop{false};
  run_workers(workers, [&](int w) {
    NormRow r;
    Eigen::RowVectorXd sum;  // (d)
    for (int i = w; i < n && !stop.load(std::memory_order_relaxed); i += workers) {  // rows are independent: the split does not change them
      if (w == 0 && progress && i > 0 && !progress(double(i) / n)) stop = true;  // worker 0 is the calling thread
      norm_row(r, t, m, tr, i, false);  // the maps read the pieces only
      for (int s = 0; s < norm_stage_count; ++s) {
        const MatD& p = r.pieces[s];  // (n, d)
        // N[i, j] = ‖z_{i←j}‖; Σ_j z_{i←j} summed row by row (p is row-major: Eigen's colwise
        // sum strides down each column)
        nb.maps[s].row(i) = p.rowwise().norm().transpose().cast<float>();
        sum.setZero(p.cols());
        for (Eigen::Index j = 0; j < p.rows(); ++j) sum += p.row(j);
        const double others = (sum - p.row(i)).norm(), self = p.row(i).norm();
        nb.mixing[s][i] = others + self > 0 ? float(others / (others + self)) : 0.0f;
      }
    }
  });
  if (stop) throw Error(ErrorCode::cancelled, "norm-based was cancelled");
  return nb;
}

std::vector<Mat> norm_head_maps(const Model& m, const Trace& tr, int block) {
  const Config& c = m.config;
  if (block < 0 || block >= c.depth || tr.blocks.size() != size_t(c.depth))
    throw Error(ErrorCode::bad_argument, "norm_head_maps: block " + std::to_string(block) +
                                             " is out of range, or the trace is not of this model");
  const BlockParams& bp = m.params.blocks[size_t(block)];
  const BlockTrace& bt = tr.blocks[size_t(block)];
  const int d = c.dim, dh = c.head_dim();
  std::vector<Mat> out(size_t(c.heads));
  for (int h = 0; h < c.heads; ++h) {
    // ‖V_h'[j]‖ with V_h' = (v_h·W_O^hᵀ) ⊙ γ1, as norm_tables_build forms it
    MatD v = bt.qkv.middleCols(2 * d + h * dh, dh).cast<double>() * bp.proj_w.middleCols(h * dh, dh).transpose().cast<double>();
    if (bp.ls1.size()) v *= bp.ls1.cast<double>().asDiagonal();
    const Eigen::RowVectorXd norms = v.rowwise().norm().transpose();                       // (n)
    out[size_t(h)] = (bt.attn[size_t(h)].cast<double>() * norms.asDiagonal()).cast<float>();  // A_h[i, j]·‖V_h'[j]‖
  }
  return out;
}

namespace detail {

// Kobayashi et al.; the image map is the rollout of the row-normalised maps (as GlobEnc, Modarressi
// et al. 2022, did for BERT): N̂_b = N_b / rowsum(N_b), C = N̂_L·…·N̂_1, map = C[0, 1:]. The stages
// with a residual already carry the token's own share on the diagonal; for `atb` (no residual)
// the identity is mixed in as attention rollout does: N̂_b = ½·N_b / rowsum(N_b) + ½·I.
void norm_based(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Config& c = m.config;
  const int n = c.tokens(), L = c.depth, stage = int(opt.stage);
  // The blocks st.norm holds already (an earlier call, finished or stopped) are not computed again.
  for (int b = int(st.norm.size()); b < L; ++b) {
    if (opt.progress && !opt.progress(double(b) / L)) throw Error(ErrorCode::cancelled, "norm-based was cancelled");
    std::function<bool(double)> rows;
    if (opt.progress) rows = [&](double f) { return opt.progress((b + f) / L); };
    st.norm.push_back(norm_block(m, st.trace, b, opt.threads, rows));
  }
  out.norm = st.norm;
  std::vector<MatD> steps(static_cast<size_t>(L));  // (L) × (n, n)
  for (int b = 0; b < L; ++b) {
    MatD N = out.norm[size_t(b)].maps[stage].cast<double>();
    for (int i = 0; i < n; ++i) {
      const double sum = N.row(i).sum();
      if (sum > 0) N.row(i) /= sum;
    }
    if (opt.stage == NormStage::atb) {
      N *= 0.5;
      N.diagonal().array() += 0.5;
    }
    steps[size_t(b)] = std::move(N);
  }
  // qᵀ·N̂_L·…·N̂_1, last block first
  out.token_map = grid_from_row(rollout_row(steps, 0, c, opt.want_intermediates ? &out.blocks : nullptr), c);
  if (opt.want_intermediates) add_attention_intermediates(out, st.trace, nullptr);
  if (opt.progress) opt.progress(1.0);
}

}  // namespace detail

}  // namespace vitlens
