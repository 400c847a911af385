// norm_maps.h — the norm-based decomposition of a block (Kobayashi et al., EMNLP 2020, EMNLP 2021,
// ICLR 2024), one query row at a time. The method `norm-based` (methods_norm.cpp) is built on
// these functions; they are public so that tests and the page can look at the pieces themselves.
//
// For block b with input tokens x_j (the sources), every stage s of the block's computation is
// written as an additive decomposition  z_i = Σ_j z_{i←j} + bias_i  that reproduces the actual
// activation exactly (up to rounding):
//   atb            a_{i←j}  = Σ_h A_h[i, j]·((LN1(x_j)·W_V^hᵀ + b_V^h)·W_O^hᵀ)      bias b_O
//                  (β1 and b_V stay in the pieces: they are part of the value transform of x_j;
//                  as each row of A_h sums to 1 their total share is the constant Σ_h b_V^h·W_O^hᵀ)
//                  Σ = attn_out_i
//   atb-res        x'_{i←j} = a_{i←j} + δ_ij·x_i                                    bias b_O
//                  Σ = x'_i (BlockTrace::x_mid)
//   atb-res-ln     g_{i←j}  = γ2 ⊙ (x'_{i←j} − mean(x'_{i←j}))·rstd2_i, rstd2_i = 1/sqrt(var(x'_i)
//                  + eps) of the whole pre-LN vector;   bias γ2 ⊙ (b_O − mean(b_O))·rstd2_i + β2
//                  Σ = LN2(x'_i)
//   atb-res-ln-ff  f_{i←j}  = (h_{i←j} ⊙ Φ(h_i))·W2ᵀ, h_{i←j} = g_{i←j}·W1ᵀ, h_i the actual
//                  pre-activation (b1 included). This is integrated gradients on the exact GELU
//                  with a zero baseline in closed form: GELU(h)/h = Φ(h) (so the h → 0 limit 1/2
//                  needs no special case). b1 rides with the LN bias piece:
//                  bias (hb_i ⊙ Φ(h_i))·W2ᵀ + b2, hb_i = bias_ln_i·W1ᵀ + b1.   Σ = mlp_out_i
//   layer          y_{i←j}  = x'_{i←j} + f_{i←j};       bias b_O + bias_ff_i;   Σ = x_{b+1, i}
// Map N_s[i, j] = ‖z_{i←j}‖₂; mixing ratio r_i = ‖Σ_{j≠i} z_{i←j}‖ / (‖Σ_{j≠i} z_{i←j}‖ + ‖z_{i←i}‖)
// (pieces only, the bias term excluded; 0 when both norms are 0).
//
// Memory: the per-block tables hold H·n·d values (the value vectors through W_O, per head) and
// H·n·mlp (the same, centred, scaled by γ2 and through W1), linear in n; a row holds 5 (n, d)
// pieces and one (n, mlp) scratch. No H×n×n×d (or n×n×d) array is ever formed.
#pragma once

#include <functional>

#include <vector>

#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"
#include "vitlens/model/vit.h"

namespace vitlens {

constexpr int norm_stage_count = 5;  // NormStage: atb, atb_res, atb_res_ln, atb_res_ln_ff, layer

// "atb", "atb-res", "atb-res-ln", "atb-res-ln-ff", "layer".
const char* norm_stage_name(NormStage s);
// The decomposition at stage s, as a formula for teaching views (N[i, j] = ‖z_(i←j)‖₂).
const char* norm_stage_formula(NormStage s);

// What one block's decomposition needs, computed once per block from the trace and the weights.
struct NormTables {
  int block = -1;
  std::vector<MatD> value_out;  // H × (n, d)    V_h' = (v_h·W_O^hᵀ) ⊙ γ1 (b_V included, b_O not;
                                //               γ1 = LayerScale, 1 without it)
  std::vector<Mat> value_ff;    // H × (n, mlp)  (γ2 ⊙ centre(V_h'))·W1ᵀ (γ2 = norm2's weight)
  Mat x_ff;                     // (n, mlp)      (γ2 ⊙ centre(x))·W1ᵀ, the residual's share
  Mat phi;                      // (n, mlp)      act(h_i)/h_i at the actual pre-activation
  VecD bo;                      // (d)           γ1 ⊙ b_O
  VecD ln_bias_core;            // (d)           γ2 ⊙ (bo − mean(bo)), scaled by rstd2_i per row
  Vec b2;                       // (d)           γ2_ls ⊙ b2
};

// The tables of `block`: H + 2 independent parts on up to `threads` threads (the values do not
// depend on the thread count).
void norm_tables_build(NormTables& t, const Model& m, const Trace& tr, int block, int threads = 1);

// The pieces of one query row i of a block, per stage (index: NormStage).
struct NormRow {
  MatD pieces[norm_stage_count];  // (n, d)  row j = z_{i←j}
  VecD bias[norm_stage_count];    // (d)     the bias term
  Mat scratch;                    // (n, mlp) h_{i←j} ⊙ Φ(h_i), reused between rows
  Mat ff_out;                     // (n, d)   its product with W2ᵀ in float, reused
  Vec ff;                         // (mlp)    Φ(h_i)·rstd2_i, reused
};

// Fills `r` for query row i of t.block (re-using its buffers); r.bias only with `bias` (the maps
// read the pieces alone, and the bias terms cost two matrix-vector products per row).
void norm_row(NormRow& r, const NormTables& t, const Model& m, const Trace& tr, int i, bool bias);

// Convenience for tests and the page: the tables of `block` and the pieces of row i.
NormRow norm_row_pieces(const Model& m, const Trace& tr, int block, int i);

// One block's maps and mixing ratios (all stages), streaming the rows; rows [0, n) are split
// over `threads` workers (1 in wasm); each row is computed the same way whatever the split.
// `progress` (may be empty) is called on the calling thread after each of its rows with the
// share of the block done (0…1]; returning false stops every worker: Error(cancelled). A ViT-B
// block costs about 180 GFLOP here (n rows of (n, mlp)·(mlp, d)), seconds in a browser.
NormBlock norm_block(const Model& m, const Trace& tr, int block, int threads = 1,
                     const std::function<bool(double)>& progress = {});

// The atb stage per head (Kobayashi et al. 2020, ‖α f(x)‖): N_h[i, j] = ‖A_h[i, j]·V_h'[j]‖₂ =
// A_h[i, j]·‖V_h'[j]‖₂, with V_h' as in NormTables::value_out (b_V and LayerScale included). The
// pieces sum over heads to the atb piece, so the atb map is at most Σ_h N_h (triangle inequality)
// and is not that sum. Returns H × (n, n); costs one (n, d_h)·(d_h, d) product per head.
std::vector<Mat> norm_head_maps(const Model& m, const Trace& tr, int block);

}  // namespace vitlens
