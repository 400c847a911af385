// layers.h — the layer kinds of a ViT, each with its forward and backward pass side by side.
//
// Conventions (llm.c style): outputs first, then inputs, then weights, then the cache.
// Backward functions ADD into parameter gradients (dW, db may be null to skip them) and
// overwrite the input gradient.
//
// The forward passes the transformer block uses exist for float (the trace and the gradients) and
// double (the relevance pass, see below), declared as two overloads and written once as a template
// in the layer's file; the block itself (model/block.h) is written once on top of them.
#pragma once

#include <vector>

#include "vitlens/layers/activation.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// A row-major matrix / a vector of the scalar type T (float: Mat, Vec; double: MatD, VecD).
template <typename T>
using MatT = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using VecT = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// y = x·Wᵀ + b.  x (n, in), W (out, in), b (out) → y (n, out). In these and the relevance rules,
// `packs` holds W's packings (pack_weights, model.h; gemm.h) or is null: the products read W
// from there when they can, with the same results.
void linear_forward(Mat& y, const Mat& x, const Mat& W, const Vec& b, const WeightPacks* packs = nullptr);
// The same in double from the float weights (widened exactly as the product packs them, gemm.h);
// the packings (float panels) are not used.
void linear_forward(MatD& y, const MatD& x, const Mat& W, const Vec& b, const WeightPacks* packs = nullptr);
// dx = dy·W; dW += dyᵀ·x; db += Σ_rows dy  (x is read only for dW)
void linear_backward(Mat* dx, Mat* dW, Vec* db, const Mat& dy, const Mat& x, const Mat& W,
                     const WeightPacks* packs = nullptr);

// y = (x − μ)·rstd ⊙ γ + β per row; records μ and rstd = 1/√(var + eps).
void layernorm_forward(Mat& y, Vec& mean, Vec& rstd, const Mat& x, const Vec& w, const Vec& b,
                       float eps);
void layernorm_forward(MatD& y, VecD& mean, VecD& rstd, const MatD& x, const Vec& w, const Vec& b,
                       double eps);
void layernorm_backward(Mat& dx, Vec* dw, Vec* db, const Mat& dy, const Mat& x, const Vec& mean,
                        const Vec& rstd, const Vec& w);

// The MLP activation (activation.h); `gelu` is the exact x·Φ(x).
float activation(float x, Activation a);
float activation_grad(float x, Activation a);
void activation_forward(Mat& y, const Mat& x, Activation a);    // y may be x
void activation_forward(MatD& y, const MatD& x, Activation a);  // C library erf/tanh/exp; y may be x
// dx = dy ⊙ act′(x); dx must not be dy or x
void activation_backward(Mat& dx, const Mat& dy, const Mat& x, Activation a);
// act(h)/h in double, ½ (its limit) at h ≈ 0: the norm-based method's closed-form IG factor.
double activation_ratio(double h, Activation a);
// The exact GELU (Activation::gelu) by name.
float gelu(float x);
float gelu_grad(float x);  // Φ(x) + x·φ(x)
void gelu_forward(Mat& y, const Mat& x);
void gelu_forward(MatD& y, const MatD& x);
void gelu_backward(Mat& dx, const Mat& dy, const Mat& x);

// Row-wise softmax in place-safe form: p = softmax(s) per row (p may be s).
void softmax_rows(Mat& p, const Mat& s);
void softmax_rows(MatD& p, const MatD& s);
// ds = p ⊙ (dp − Σ_j dp⊙p) per row of dp (p's first rows when it has more)
void softmax_rows_backward(Mat& ds, const Mat& dp, const Mat& p);

// Multi-head self-attention core (between the qkv and proj linears), per copy k and head h:
//   S_h = q_h·k_hᵀ/√d_h,  A_h = m_h · softmax(S_h),  ctx_h = A_h·v_h.
// qkv (c·n, 3d) holds `copies` = c independent copies of n tokens (copy k = rows k·n … k·n+n−1;
// one copy: the plain forward); ctx (c·n, d); attn (c·H) × (n, n), copy k head h at k·H + h.
// scores (same layout) records S when keep_scores; otherwise S is formed in attn and not kept.
// head_mask (H values 0 or 1, for every copy) may be null. If override_attn (H × (n, n), for
// every copy) is not null, A_h is taken from it instead and the backward pass does not reach q
// and k. With rows = r < n, only the first r query rows of each copy are formed (the rows a
// pooling head reads from the last block): ctx (c·r, d), scores and attn (c·H) × (r, n); keys and
// values are still all n tokens. rows = 0 means n. Not with override_attn.
void attention_forward(Mat& ctx, std::vector<Mat>& scores, std::vector<Mat>& attn, const Mat& qkv,
                       int heads, const float* head_mask, const std::vector<Mat>* override_attn,
                       int copies = 1, bool keep_scores = true, int rows = 0);
void attention_forward(MatD& ctx, std::vector<MatD>& scores, std::vector<MatD>& attn,
                       const MatD& qkv, int heads, const float* head_mask,
                       const std::vector<MatD>* override_attn, int copies = 1,
                       bool keep_scores = true, int rows = 0);
// dA_h = dctx_h·v_hᵀ, dv_h = A_hᵀ·dctx_h, dS_h = softmax′ᵀ dA_h (0 for masked or overridden heads),
// dq_h = dS_h·k_h/√d_h, dk_h = dS_hᵀ·q_h/√d_h. Layouts as in the forward; with keep = false,
// dscores and dattn hold only one matrix each (reused per copy and head). With rows = r < n (as
// in the forward), dctx is (c·r, d) and each copy's dq is 0 below its first r rows; attn may then
// hold every row (a forward pass that formed them all: the first r are read), and the kept
// dscores and dattn take its shape, 0 below row r.
void attention_backward(Mat& dqkv, std::vector<Mat>& dscores, std::vector<Mat>& dattn,
                        const Mat& dctx, const Mat& qkv, const std::vector<Mat>& attn, int heads,
                        const float* head_mask, bool overridden, int copies = 1, bool keep = true,
                        int rows = 0);

// Patches of x as rows (row-major over the grid), each flattened (C, p, p).
void im2col(Mat& patches, const Image& x, int patch);
// The adjoint: scatter patch-row gradients back to the image.
void col2im(Image& dx, const Mat& dpatches, int c, int h, int w, int patch);

// ---------------------------------------------------------------------------------------------
// Double precision and relevance (the LRP methods; the mechanism is in lrp.h).
//
// The LRP rules divide by sums that nearly cancel, so a float32 forward pass moves their maps by
// O(0.1) on a DeiT-tiny-shaped model. The LRP methods therefore recompute the forward pass in
// double from the float weights and propagate relevance on it (see LrpScratch for which parts are
// double). Relevance functions write the relevance at the layer's input(s) (first arguments) from
// the relevance R at its output and the activations of the double forward.

// Reusable capacity for the double-precision and relevance functions (no state between calls:
// only buffers, so that large temporaries are not reallocated for every layer).
//
// Precision: activations and denominators Z are double (the double forward's products run in
// double too, gemm.h); the quotients S = R/Z are formed in double and rounded to float for the
// products that carry them through the weights (S·W, S·vᵀ, S·k, …), which run in float, as does
// |x|·|W|ᵀ (half of the αβ denominator; where the other half cancels it, linear.cpp recomputes Z in
// double). The pass is linear
// in R for fixed activations, so float rounding there stays at the 1e-7 level of each term,
// whereas an error in a nearly cancelling Z (a + b in the adds, q·kᵀ, A·v) is amplified without
// bound — only the latter needs double (measured on DeiT-tiny: transformer-attribution and lrp
// stay within 5e-6 of the float64 reference either way, and the Chefer pass runs 2.5× faster in
// wasm with float products).
struct LrpScratch {
  Mat w;   // [W⁺ | W⁻], exact float copies of the weights (older α1β0); the rows of A (attention)
  Mat a;   // float left operand of a product (|x| or S)
  Mat p;   // float product
  Mat q;   // float copy of one head's [q | k | v]: the right operands of its products with S
  MatD z;  // denominators Z
  MatD s;  // S = R / Z (patch embedding)
  MatD t;  // products with S in double (patch embedding); the softmax rule's output (attention)
  MatD u;  // scores (attention core)
};

// Runs fn(first, last, scratch) over ranges of [0, n) (parallel_ranges: split over the compute
// pool when each range holds ≥ grain items); scratch is s when the items run as one range, else
// buffers of the range's own, since the ranges run at once.
template <typename F>
void ranges_with_scratch(int n, int grain, LrpScratch& s, F&& fn) {
  parallel_ranges(n, grain, [&](int first, int last) {
    if (first == 0 && last == n) return fn(0, n, s);
    LrpScratch range_scratch;
    fn(first, last, range_scratch);
  });
}

// Chefer's safe_divide: a / (b + 1e-9) where b ≠ 0, exactly 0 where b = 0 (not sign-aware; where
// b + 1e-9 rounds to 0, the divisor is 1e-9). Inline and branch-free: the relevance loops call it
// per element and vectorise with it.
inline double safe_divide(double a, double b) {
  const double den = b + 1e-9;
  const double q = a / (den == 0.0 ? 1e-9 : den);
  return b == 0.0 ? 0.0 : q;
}
// The sign-aware epsilon stabiliser of AttnLRP: z + ε·sign(z), sign(0) = +1, ε = 1e-6.
inline double stabilise(double z) { return z >= 0.0 ? z + 1e-6 : z - 1e-6; }

// The number of leading rows of R that hold all its nonzero entries. Every rule maps a zero row
// of R to zero relevance, so the relevance functions compute only these rows: at the last block,
// until the attention, R is nonzero only at the CLS token (row 0).
// Defined here (inline) so that the layers, which call it, do not depend on the relevance layer.
inline int relevance_rows(const MatD& r) {
  int rows = int(r.rows());
  while (rows > 0 && (r.row(rows - 1).array() == 0.0).all()) --rows;
  return rows;
}

enum class LinearRule {
  alpha1beta0,  // LRP-αβ, α=1 β=0, one shared denominator, bias ignored (Bach 2015; Chefer 2021)
  alpha1beta0_separate,  // the same with one denominator per sign, not conserving (the older rule
                         // of Chefer 2021's LRP and partial-LRP baselines)
  epsilon,      // LRP-ε with the bias in the denominator (Bach 2015; AttnLRP)
};
// R_in (n, in) from R (n, out); x the layer input, y = x·Wᵀ + b its output (both from the double
// forward).
void linear_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const Mat& W,
                      const Vec& b, LinearRule rule, LrpScratch& s, const WeightPacks* packs = nullptr);

enum class LayerNormRule {
  identity,          // Chefer 2021: relevance passes unchanged
  epsilon_centring,  // AttnLRP: ε rule through the mean-centring, 1/std and γ constant
};
// x (n, d) the input, y (n, d) the output, rstd (n) from the forward.
void layernorm_relevance(MatD& r_in, const MatD& r, const MatD& x, const MatD& y, const VecD& rstd,
                         const Vec& w, LayerNormRule rule);


enum class ProductRule {
  halved,        // Chefer 2021: S = R/Z per operand, both results halved
  epsilon_half,  // AttnLRP: ε rule on 2Z, each operand gets half
};
enum class SoftmaxRule {
  identity,  // Chefer 2021
  attnlrp,   // AttnLRP: R_in = s ⊙ (R − p·ΣR) per row
};
// A view of whole rows of a MatD (e.g. its first rows), without a copy.
using RowsD = Eigen::Ref<const MatD, 0, Eigen::OuterStride<>>;
// R_in (rows, n) at the scores from R (rows, n) at the probabilities; s the scores, p the
// probabilities (the attention core passes its query rows that carry relevance).
void softmax_relevance(MatD& r_in, const RowsD& r, const RowsD& s, const RowsD& p, SoftmaxRule rule);

// Σ relevance at each step of the attention core, for the conservation report.
struct AttentionRelevanceSums {
  double attn = 0, v = 0;  // after the A·v product rule
  double scores = 0;       // after the softmax rule
  double q = 0, k = 0;     // after the q·kᵀ product rule
};
// The attention core from R_ctx (n, d) back to R_qkv (n, 3d), through A·v (product rule),
// softmax (softmax rule) and q·kᵀ (product rule, on Z = q·kᵀ without the 1/√d_h factor, which
// passes relevance unchanged). r_attn (H × (n, n)) receives R_A, taken right after the A·v rule.
AttentionRelevanceSums attention_relevance(MatD& r_qkv, std::vector<MatD>& r_attn,
                                           const MatD& r_ctx, const MatD& qkv,
                                           const std::vector<MatD>& attn, const MatD& ctx,
                                           int heads, ProductRule product, SoftmaxRule softmax,
                                           LrpScratch& s);

enum class AddRule {
  normalised,  // Chefer 2021: split by a:b, then both sums rescaled so that ΣR is kept
  plain,       // the z rule, split by a:b only (the older rule of Chefer 2021's LRP baselines)
  epsilon,     // AttnLRP: the ε rule applied to a sum
};
// out = a + b: R_a, R_b (each the shape of a) from R.
void add_relevance(MatD& r_a, MatD& r_b, const MatD& r, const MatD& a, const MatD& b, AddRule rule);

enum class PatchRule {
  z_b,      // z^B with L, H = min, max of the normalised image (Montavon et al. 2017)
  epsilon,  // the patch embedding as a Linear with the ε rule (AttnLRP)
};
// From R_embed (P, d) at the patch embedding's output to the pixels: returns Σ_c R, (H, W).
// patches (P, C·p·p) and embed (P, d) = patches·Wᵀ + b from the double forward.
void patch_embed_relevance(MatD& pixel_map, const MatD& r, const MatD& patches, const MatD& embed,
                           const Mat& W, const Vec& b, PatchRule rule, int c, int h, int w,
                           int patch, LrpScratch& s);

}  // namespace vitlens
