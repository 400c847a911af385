// test_lrp_rules.cpp — each LRP relevance rule of core called on its own, on small random matrices,
// against the rule re-derived in explicit matrix form in this file, as Zennit's rule tests do;
// plus conservation wherever the rule promises it.
//
// The references never call engine code (not even safe_divide or stabilise): each writes the
// layer's forward as a map y = Σ_j z_j + bias over explicit contributions z_j (the Linear's
// x_j·W_oj, the convolution as a matrix over the image's pixels, the LayerNorm as the linear map
// J of its centring, the two operands of each product), in double with nested loops over indices,
// and distributes R over those contributions by the paper's formula. Papers: Bach et al. 2015
// (LRP, ε and αβ rules), Montavon et al. 2017 (deep Taylor decomposition, z^B), Chefer, Gur and
// Wolf 2021 (transformer-attribution's rule set), Achtibat et al. 2024 (AttnLRP).
//
// Inputs: fixed seeds, a few shapes, entries that are exactly zero (in inputs, weights and R),
// both signs, zero rows of R (the engine skips trailing zero rows: relevance_rows), and hand-made
// cases where a denominator is 0 or within ε of it.
//
// Tolerances. The engine rounds the quotients S = R/Z to float before the products that carry
// them through the weights (S·W, S·vᵀ, S·k, …; see LrpScratch in layers.h), and runs those
// products in float. Rules that use them are compared with a tolerance relative to the largest
// magnitude of the reference, max|ours − ref| ≤ 1e-5·max|ref|: float's 6e-8 rounding, summed
// over at most 16 terms (measured worst: 6e-7 for the matrices, 1.2e-6 of Σ|R| for the sums).
// The rules computed entirely in double (the adds, the softmax rule, LayerNorm) are held to
// 1e-12 of the largest magnitude. Conservation is checked against Σ|R| (the scale the rounding
// errors are relative to) with each check's tolerance written beside it.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "helpers.h"
#include "vitlens/layers/layers.h"

using namespace vitlens;
using vitlens::test::fill_random;
using vitlens::test::random_mat;
using vitlens::test::random_vec;

namespace {

// ----------------------------------------------------------------------------------------------
// Inputs and comparisons

// Values in [-a, a], exact in float (the weights are float; the activations need not be, but
// then the engine's float copies of them are exact too).
MatD random_matd(int rows, int cols, uint64_t seed, float a = 1.0f) {
  Mat m(rows, cols);
  fill_random(m.data(), size_t(m.size()), seed, a);
  return m.cast<double>();
}

// Sets every k-th entry, from `first`, to exactly 0.
template <typename M>
void sprinkle_zeros(M& m, Eigen::Index k, Eigen::Index first) {
  for (Eigen::Index i = first; i < m.size(); i += k) m.data()[i] = 0;
}

// Chefer's safe_divide, written out from METHODS.md: a/(b + 1e-9) where b ≠ 0, 0 where b = 0.
double ref_safe_divide(double a, double b) { return b == 0.0 ? 0.0 : a / (b + 1e-9); }
// AttnLRP's stabiliser: z + ε·sign(z) with sign(0) = +1 and ε = 1e-6.
double ref_stab(double z) { return z >= 0.0 ? z + 1e-6 : z - 1e-6; }

double max_abs(const MatD& m) { return m.size() ? m.cwiseAbs().maxCoeff() : 0.0; }
double abs_sum(const MatD& m) { return m.cwiseAbs().sum(); }

// max|ours − ref| / max|ref| (the absolute error where ref is all zero).
double rel_err(const MatD& ours, const MatD& ref) {
  REQUIRE(ours.rows() == ref.rows());
  REQUIRE(ours.cols() == ref.cols());
  const double den = max_abs(ref);
  const double num = max_abs(ours - ref);
  return den > 0.0 ? num / den : num;
}

// Rows [first, rows) of m are exactly zero.
bool rows_zero_from(const MatD& m, Eigen::Index first) {
  for (Eigen::Index i = first; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (m(i, j) != 0.0) return false;
  return true;
}

// R with only its first `rows` rows nonzero (the relevance_rows shortcut at the last block).
MatD keep_first_rows(MatD r, int rows) {
  r.bottomRows(r.rows() - rows).setZero();
  return r;
}

// ----------------------------------------------------------------------------------------------
// Linear: y_io = Σ_j z_ijo + b_o with z_ijo = x_ij·W_oj

MatD ref_linear_forward(const MatD& x, const Mat& W, const Vec& b) {
  MatD y(x.rows(), W.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index o = 0; o < W.rows(); ++o) {
      double acc = 0.0;
      for (Eigen::Index j = 0; j < x.cols(); ++j) acc += x(i, j) * double(W(o, j));
      y(i, o) = acc + double(b[o]);
    }
  return y;
}

// LRP-α1β0 (Bach 2015, αβ with α=1 β=0; Chefer 2021's single shared denominator, bias ignored):
//   R_ij = Σ_o z⁺_ijo / Z_io · R_io,  Z_io = Σ_j z⁺_ijo,  z⁺ = max(0, x·W) = x⁺W⁺ + x⁻W⁻.
// Z_out receives Z (to find the outputs whose relevance is lost because Z = 0).
MatD ref_linear_alpha1beta0(const MatD& r, const MatD& x, const Mat& W, MatD* Z_out) {
  const Eigen::Index n = x.rows(), in = x.cols(), out = W.rows();
  MatD Z(n, out), r_in = MatD::Zero(n, in);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index o = 0; o < out; ++o) {
      double acc = 0.0;
      for (Eigen::Index j = 0; j < in; ++j) acc += std::max(0.0, x(i, j) * double(W(o, j)));
      Z(i, o) = acc;
    }
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < in; ++j)
      for (Eigen::Index o = 0; o < out; ++o)
        r_in(i, j) += std::max(0.0, x(i, j) * double(W(o, j))) * ref_safe_divide(r(i, o), Z(i, o));
  if (Z_out) *Z_out = Z;
  return r_in;
}

// LRP-ε (Bach 2015; AttnLRP's Linear): R_ij = Σ_o z_ijo · R_io / stab(y_io), the bias in y.
MatD ref_linear_epsilon(const MatD& r, const MatD& x, const Mat& W, const MatD& y) {
  const Eigen::Index n = x.rows(), in = x.cols(), out = W.rows();
  MatD r_in = MatD::Zero(n, in);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < in; ++j)
      for (Eigen::Index o = 0; o < out; ++o)
        r_in(i, j) += x(i, j) * double(W(o, j)) * r(i, o) / ref_stab(y(i, o));
  return r_in;
}

struct LinearCase {
  const char* what;
  int n, in, out;
  uint64_t seed;
  bool zeros;    // zeros sprinkled in x, W and R, one zero row of x and one of W
  int r_rows;    // R nonzero only in its first r_rows rows (n: all rows)
  bool hole;     // an interior zero row of R (row 1), below nonzero rows
};

const LinearCase kLinearCases[] = {
    {"single row", 1, 3, 2, 20, false, 1, false},
    {"single row, an output with Z = 0 by signs", 1, 3, 2, 11, true, 1, false},  // (zeros: R is dropped)
    {"square-ish", 4, 7, 5, 12, false, 4, false},
    {"wide", 6, 16, 9, 13, false, 6, false},
    {"zeros in x, W and R", 5, 8, 6, 14, true, 5, false},
    {"only row 0 of R nonzero", 5, 8, 6, 15, false, 1, false},
    {"zeros, rows 0-2 of R nonzero, row 1 zero", 6, 10, 4, 16, true, 3, true},
};

void make_linear_case(const LinearCase& c, MatD& x, Mat& W, Vec& b, MatD& r) {
  x = random_matd(c.n, c.in, c.seed * 10 + 1, 2.0f);
  W = random_mat(c.out, c.in, c.seed * 10 + 2);
  b = random_vec(c.out, c.seed * 10 + 3, 0.5f);
  r = random_matd(c.n, c.out, c.seed * 10 + 4);
  if (c.zeros) {
    sprinkle_zeros(x, 5, 1);
    sprinkle_zeros(W, 7, 3);
    sprinkle_zeros(r, 4, 2);
    x.row(c.n - 1).setZero();  // an input token that is all zero: y = b, Z = 0 for αβ
    W.row(0).setZero();        // an output no input reaches: Z = 0 for αβ, y = b for ε
  }
  r = keep_first_rows(r, c.r_rows);
  if (c.hole) r.row(1).setZero();
}

// One case run through the engine's rule: the inputs, the double forward y and R_in.
struct LinearRun {
  MatD x, r, y, r_in;
  Mat W;
  Vec b;
};
LinearRun run_linear_case(const LinearCase& c, LinearRule rule) {
  LinearRun t;
  make_linear_case(c, t.x, t.W, t.b, t.r);
  t.y = ref_linear_forward(t.x, t.W, t.b);
  LrpScratch s;
  linear_relevance(t.r_in, t.r, t.x, t.y, t.W, t.b, rule, s);
  return t;
}

// ----------------------------------------------------------------------------------------------
// Two-operand products and softmax in the attention core, per head h (d_h = d/H):
//   q_il = qkv(i, h·d_h + l), k_jl = qkv(j, d + h·d_h + l), v_jl = qkv(j, 2d + h·d_h + l),
//   scores_ij = Σ_l q_il k_jl / √d_h, A = softmax(scores) per row, ctx_il = Σ_j A_ij v_jl.

void ref_attention_forward(std::vector<MatD>& attn, MatD& ctx, const MatD& qkv, int heads) {
  const int n = int(qkv.rows()), d = int(qkv.cols()) / 3, dh = d / heads;
  attn.assign(size_t(heads), MatD(n, n));
  ctx = MatD::Zero(n, d);
  for (int h = 0; h < heads; ++h) {
    MatD& A = attn[size_t(h)];
    for (int i = 0; i < n; ++i) {
      double mx = -1e300;
      for (int j = 0; j < n; ++j) {
        double s = 0.0;
        for (int l = 0; l < dh; ++l) s += qkv(i, h * dh + l) * qkv(j, d + h * dh + l);
        A(i, j) = s / std::sqrt(double(dh));
        mx = std::max(mx, A(i, j));
      }
      double den = 0.0;
      for (int j = 0; j < n; ++j) den += (A(i, j) = std::exp(A(i, j) - mx));
      for (int j = 0; j < n; ++j) A(i, j) /= den;
      for (int l = 0; l < dh; ++l)
        for (int j = 0; j < n; ++j) ctx(i, h * dh + l) += A(i, j) * qkv(j, 2 * d + h * dh + l);
    }
  }
}

struct AttnRef {
  std::vector<MatD> r_attn;  // H × (n, n): R_A right after the A·v rule
  MatD r_qkv;                // (n, 3d)
  double sum_attn = 0, sum_v = 0, sum_scores = 0, sum_q = 0, sum_k = 0;
  double kept_av = 0, kept_qk = 0;  // Σ over each product's outputs of kept_share(R, Z)
  double abs_r_scores = 0;          // Σ |R_scores|
};

// The share of one term z of a product output Z with relevance R, per operand:
// Chefer 2021: each operand is given z·R/Z (safe_divide) — the whole R for each — then halved;
// AttnLRP: the ε rule on 2Z, i.e. z·R/stab(2Z) = ½·z·R/(Z ± ε/2) to each operand.
double product_share(double z, double R, double Z, bool attnlrp) {
  return attnlrp ? z * R / ref_stab(2.0 * Z) : 0.5 * z * ref_safe_divide(R, Z);
}

// What both operands together receive of an output's R: Σ_z of the two shares =
// Chefer: Z·R/Z = R·Z/(Z + 1e-9), 0 where Z = 0; AttnLRP: 2Z·R/stab(2Z).
double kept_share(double R, double Z, bool attnlrp) {
  return attnlrp ? 2.0 * Z * R / ref_stab(2.0 * Z) : (Z == 0.0 ? 0.0 : R * Z / (Z + 1e-9));
}

AttnRef ref_attention_relevance(const MatD& r_ctx, const MatD& qkv, const std::vector<MatD>& attn,
                                const MatD& ctx, int heads, bool attnlrp) {
  const int n = int(qkv.rows()), d = int(qkv.cols()) / 3, dh = d / heads;
  AttnRef out;
  out.r_qkv = MatD::Zero(n, 3 * d);
  out.r_attn.assign(size_t(heads), MatD::Zero(n, n));
  for (int h = 0; h < heads; ++h) {
    const MatD& A = attn[size_t(h)];
    MatD& RA = out.r_attn[size_t(h)];
    auto q = [&](int i, int l) { return qkv(i, h * dh + l); };
    auto k = [&](int j, int l) { return qkv(j, d + h * dh + l); };
    auto v = [&](int j, int l) { return qkv(j, 2 * d + h * dh + l); };
    // ctx_il = Σ_j z_ijl, z_ijl = A_ij·v_jl: both A_ij and v_jl receive z_ijl's share of R_il.
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < dh; ++l) {
        const double R = r_ctx(i, h * dh + l), Z = ctx(i, h * dh + l);
        out.kept_av += kept_share(R, Z, attnlrp);
        for (int j = 0; j < n; ++j) {
          const double share = product_share(A(i, j) * v(j, l), R, Z, attnlrp);
          RA(i, j) += share;
          out.r_qkv(j, 2 * d + h * dh + l) += share;
        }
      }
    // Softmax. Chefer: identity. AttnLRP: R_s_ij = s_ij·(R_A_ij − p_ij·Σ_k R_A_ik), s the scores.
    MatD Rs(n, n), Zqk(n, n);
    for (int i = 0; i < n; ++i) {
      double row_sum = 0.0;
      for (int j = 0; j < n; ++j) row_sum += RA(i, j);
      for (int j = 0; j < n; ++j) {
        double z = 0.0;
        for (int l = 0; l < dh; ++l) z += q(i, l) * k(j, l);
        Zqk(i, j) = z;  // q·kᵀ WITHOUT 1/√d_h: the product rule's Z
        const double s = z / std::sqrt(double(dh));
        Rs(i, j) = attnlrp ? s * (RA(i, j) - A(i, j) * row_sum) : RA(i, j);
      }
    }
    // Zqk_ij = Σ_l z_ijl, z_ijl = q_il·k_jl: both q_il and k_jl receive z_ijl's share of R_s_ij.
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        out.kept_qk += kept_share(Rs(i, j), Zqk(i, j), attnlrp);
        for (int l = 0; l < dh; ++l) {
          const double share = product_share(q(i, l) * k(j, l), Rs(i, j), Zqk(i, j), attnlrp);
          out.r_qkv(i, h * dh + l) += share;
          out.r_qkv(j, d + h * dh + l) += share;
        }
      }
    out.sum_attn += RA.sum();
    out.sum_scores += Rs.sum();
    out.abs_r_scores += abs_sum(Rs);
  }
  out.sum_q = out.r_qkv.leftCols(d).sum();
  out.sum_k = out.r_qkv.middleCols(d, d).sum();
  out.sum_v = out.r_qkv.rightCols(d).sum();
  return out;
}

struct AttnCase {
  const char* what;
  int n, heads, dh;
  uint64_t seed;
  bool zeros;  // zeros in qkv (a query row of a head, a value column of a head) and in R_ctx
  int r_rows;  // R_ctx nonzero only in its first r_rows rows
};

const AttnCase kAttnCases[] = {
    {"one head", 4, 1, 4, 21, false, 4},
    {"two heads", 5, 2, 3, 22, false, 5},
    {"three heads, d_h = 2", 7, 3, 2, 23, false, 7},
    {"two heads, only row 0 of R_ctx nonzero", 6, 2, 3, 24, false, 1},
    {"two heads, zeros in qkv and R_ctx", 6, 2, 3, 25, true, 6},
    {"three heads, zeros, only row 0 nonzero", 5, 3, 2, 26, true, 1},
};

void make_attn_case(const AttnCase& c, MatD& qkv, MatD& r_ctx) {
  const int d = c.heads * c.dh;
  qkv = random_matd(c.n, 3 * d, c.seed * 10 + 1, 1.5f);
  r_ctx = random_matd(c.n, d, c.seed * 10 + 2);
  if (c.zeros) {
    sprinkle_zeros(qkv, 9, 4);
    qkv.block(c.n - 1, 0, 1, c.dh).setZero();    // head 0's query of the last token: a uniform row of A
    qkv.block(0, 2 * d + c.dh, c.n, 1).setZero(); // head 1's first value column: ctx = 0 there
    sprinkle_zeros(r_ctx, 5, 3);
  }
  r_ctx = keep_first_rows(r_ctx, c.r_rows);
}

// ----------------------------------------------------------------------------------------------
// The patch embedding as an explicit convolution over a C×H×W image (pixel index
// i = (c·H + y)·W + x): output k = P·d + o (patch P row-major over the grid, channel o),
// M_ki = W[o][(c·p + y − p·gy)·p + x − p·gx] when pixel (y, x) lies in patch P = (gy, gx), else 0.

struct Conv {
  MatD M;      // (P·d, C·H·W)
  MatD embed;  // (P, d) = conv + b
  MatD patches;  // (P, C·p·p) the engine's input rows, (C, p, p) order
};

Conv ref_conv(const MatD& img, const Mat& W, const Vec& b, int C, int H, int Wd, int p) {
  const int gh = H / p, gw = Wd / p, P = gh * gw, d = int(W.rows());
  Conv cv;
  cv.M = MatD::Zero(P * d, C * H * Wd);
  cv.patches.resize(P, C * p * p);
  for (int gy = 0; gy < gh; ++gy)
    for (int gx = 0; gx < gw; ++gx)
      for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < p; ++ky)
          for (int kx = 0; kx < p; ++kx) {
            const int pix = (c * H + gy * p + ky) * Wd + gx * p + kx, col = (c * p + ky) * p + kx;
            cv.patches(gy * gw + gx, col) = img(0, pix);
            for (int o = 0; o < d; ++o) cv.M((gy * gw + gx) * d + o, pix) = double(W(o, col));
          }
  cv.embed.resize(P, d);
  for (int k = 0; k < P * d; ++k) {
    double acc = double(b[k % d]);
    for (int i = 0; i < C * H * Wd; ++i) acc += cv.M(k, i) * img(0, i);
    cv.embed(k / d, k % d) = acc;
  }
  return cv;
}

// From the per-pixel relevance (1, C·H·W) to the (H, W) map: Σ over channels.
MatD channel_sum(const MatD& r_pix, int C, int H, int Wd) {
  MatD map = MatD::Zero(H, Wd);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < Wd; ++x) map(y, x) += r_pix(0, (c * H + y) * Wd + x);
  return map;
}

// z^B (Montavon et al. 2017) with the bounds L ≤ x_i ≤ H: z_ki = M_ki·x_i − L·M⁺_ki − H·M⁻_ki
// (≥ 0), Z_k = Σ_i z_ki + 1e-9, R_i = Σ_k z_ki·R_k/Z_k; bias ignored.
MatD ref_zb_pixels(const MatD& r, const Conv& cv, const MatD& img, double L, double Hb, MatD* Z_out) {
  const Eigen::Index K = cv.M.rows(), N = cv.M.cols(), d = r.cols();
  auto zki = [&](Eigen::Index k, Eigen::Index i) {
    const double m = cv.M(k, i);
    return m * img(0, i) - L * std::max(0.0, m) - Hb * std::min(0.0, m);
  };
  MatD Z(1, K), r_pix = MatD::Zero(1, N);
  for (Eigen::Index k = 0; k < K; ++k) {
    double acc = 0.0;
    for (Eigen::Index i = 0; i < N; ++i) acc += zki(k, i);
    Z(0, k) = acc + 1e-9;
  }
  for (Eigen::Index i = 0; i < N; ++i)
    for (Eigen::Index k = 0; k < K; ++k) r_pix(0, i) += zki(k, i) * r(k / d, k % d) / Z(0, k);
  if (Z_out) *Z_out = Z;
  return r_pix;
}

// LRP-ε on the convolution (AttnLRP): R_i = Σ_k M_ki·x_i·R_k/stab(embed_k), the bias in embed.
MatD ref_epsilon_pixels(const MatD& r, const Conv& cv, const MatD& img) {
  const Eigen::Index K = cv.M.rows(), N = cv.M.cols(), d = r.cols();
  MatD r_pix = MatD::Zero(1, N);
  for (Eigen::Index i = 0; i < N; ++i)
    for (Eigen::Index k = 0; k < K; ++k)
      r_pix(0, i) += cv.M(k, i) * img(0, i) * r(k / d, k % d) / ref_stab(cv.embed(k / d, k % d));
  return r_pix;
}

struct PatchCase {
  const char* what;
  int C, H, W, p, d;
  uint64_t seed;
  bool zeros;
};

const PatchCase kPatchCases[] = {
    {"C=2, 4x6, p=2", 2, 4, 6, 2, 5, 31, false},
    {"C=3, 4x4, p=2, zeros", 3, 4, 4, 2, 4, 32, true},
    {"C=1, 6x3, p=3", 1, 6, 3, 3, 3, 33, false},
    {"C=2, 4x6, p=2, zeros", 2, 4, 6, 2, 5, 34, true},
};

}  // namespace

// ==============================================================================================

TEST_CASE("linear α1β0: the explicit Σ z⁺/Σz⁺ formula, and conservation where Z ≠ 0", "[lrp-rules]") {
  for (const LinearCase& c : kLinearCases) {
    INFO(c.what << " (n " << c.n << ", in " << c.in << ", out " << c.out << ")");
    const LinearRun t = run_linear_case(c, LinearRule::alpha1beta0);
    const MatD &x = t.x, &r = t.r, &r_in = t.r_in;
    MatD Z;
    const MatD ref = ref_linear_alpha1beta0(r, x, t.W, &Z);
    CHECK(rel_err(r_in, ref) <= 1e-5);  // S rounded to float (header)
    CHECK(rows_zero_from(r_in, c.r_rows));
    // Σ_j R_ij = Σ_o R_io·Z_io/(Z_io + 1e-9): R is kept wherever Z ≠ 0 (the bias is ignored, so
    // it takes none), up to the 1e-9 stabiliser and the float rounding of S and of Z.
    double kept = 0.0;
    for (Eigen::Index i = 0; i < r.rows(); ++i)
      for (Eigen::Index o = 0; o < r.cols(); ++o)
        if (Z(i, o) != 0.0) kept += r(i, o) * Z(i, o) / (Z(i, o) + 1e-9);
    CHECK(std::fabs(r_in.sum() - kept) <= 1e-5 * abs_sum(r));
    if (!c.zeros) CHECK(std::fabs(kept - r.sum()) <= 1e-7 * abs_sum(r));  // no Z = 0 without zeros
  }
}

// Two outputs, every contribution to output 0 ≤ 0 in every row: Z_0 = 0, its R is dropped and
// output 1's arrives whole.
static void check_output_0_dropped(const MatD& x, const Mat& W, const Vec& b, const MatD& r) {
  const MatD y = ref_linear_forward(x, W, b);
  LrpScratch s;
  MatD r_in;
  linear_relevance(r_in, r, x, y, W, b, LinearRule::alpha1beta0, s);
  MatD Z;
  const MatD ref = ref_linear_alpha1beta0(r, x, W, &Z);
  for (Eigen::Index i = 0; i < x.rows(); ++i) REQUIRE(Z(i, 0) == 0.0);
  CHECK(rel_err(r_in, ref) <= 1e-5);  // S rounded to float
  CHECK(std::fabs(r_in.sum() - r.col(1).sum()) <= 1e-6 * abs_sum(r));
}

TEST_CASE("linear α1β0: an output whose contributions are all ≤ 0 has Z = 0 and passes nothing",
          "[lrp-rules]") {
  // Output 0: every x_j·W_0j ≤ 0 (x ≥ 0, W_0 ≤ 0), so Z = Σ z⁺ = 0 and its R is dropped; output 1
  // is an ordinary mix of signs, and its R arrives whole.
  // Case 1: values exact in binary, so the engine's Z = ½(x·Wᵀ + |x|·|W|ᵀ) cancels to exactly 0.
  // Case 2: values not dyadic: Z = ½((y − b) + |x|·|W|ᵀ) with |x|·|W|ᵀ in float leaves a rounding
  // residue of ~1e-8; S_0 = R_0/Z_0 would then be ~1e7 and swamp the other outputs in the float
  // product S·W (R_in off by 10 % of its maximum before the engine recomputed such Z exactly in
  // double).
  struct Case {
    int rows;
    std::vector<double> x;  // (rows, 3)
    std::vector<float> w;   // (2, 3)
    std::vector<double> r;  // (rows, 2)
  };
  const Case cases[] = {
      {2, {0.5, 1.0, 0.0, 2.0, 0.25, 1.5}, {-1.0f, -0.5f, -2.0f, 0.75f, -1.25f, 0.5f}, {1.0, -0.5, 0.25, 2.0}},
      {1, {0.3, 0.7, 0.1}, {-1.1f, -0.3f, -2.2f, 0.75f, -1.25f, 0.5f}, {0.25, 2.0}},
  };
  Vec b(2);
  b << 0.125f, -0.25f;
  for (const Case& c : cases) {
    const MatD x = Eigen::Map<const MatD>(c.x.data(), c.rows, 3);
    const Mat W = Eigen::Map<const Mat>(c.w.data(), 2, 3);
    const MatD r = Eigen::Map<const MatD>(c.r.data(), c.rows, 2);
    check_output_0_dropped(x, W, b, r);
  }
}

TEST_CASE("linear ε: the explicit Σ z·R/stab(y) formula, bias in the denominator", "[lrp-rules]") {
  for (const LinearCase& c : kLinearCases) {
    INFO(c.what << " (n " << c.n << ", in " << c.in << ", out " << c.out << ")");
    const LinearRun t = run_linear_case(c, LinearRule::epsilon);
    const MatD &x = t.x, &r = t.r, &y = t.y, &r_in = t.r_in;
    const MatD ref = ref_linear_epsilon(r, x, t.W, y);
    CHECK(rel_err(r_in, ref) <= 1e-5);  // S rounded to float (header)
    CHECK(rows_zero_from(r_in, c.r_rows));
    // Not conservative: the bias absorbs Σ b_o·R_io/stab(y_io), the stabiliser the rest:
    // Σ_j R_ij = Σ_o R_io·(y_io − b_o)/stab(y_io).
    double expected = 0.0;
    for (Eigen::Index i = 0; i < r.rows(); ++i)
      for (Eigen::Index o = 0; o < r.cols(); ++o)
        expected += r(i, o) * (y(i, o) - double(t.b[o])) / ref_stab(y(i, o));
    CHECK(std::fabs(r_in.sum() - expected) <= 1e-5 * abs_sum(ref));  // float S, summed
  }
}

TEST_CASE("linear ε: the stabiliser is sign-aware, with sign(0) = +1", "[lrp-rules]") {
  // y = x·Wᵀ = t for t = 3e-7, −3e-7, 0: within ε = 1e-6 of zero, where only the sign of the
  // stabiliser decides the sign of the relevance (a plain z + ε would flip it for t < 0).
  MatD x(3, 2);
  x << 1.0 + 3e-7, 1.0,  //
      1.0 - 3e-7, 1.0,   //
      1.0, 1.0;
  Mat W(1, 2);
  W << 1.0f, -1.0f;
  Vec b = Vec::Zero(1);
  const MatD r = MatD::Ones(3, 1);
  const MatD y = ref_linear_forward(x, W, b);
  LrpScratch s;
  MatD r_in;
  linear_relevance(r_in, r, x, y, W, b, LinearRule::epsilon, s);
  const MatD ref = ref_linear_epsilon(r, x, W, y);
  CHECK(rel_err(r_in, ref) <= 1e-5);  // S rounded to float
  CHECK(r_in(0, 0) > 0.0);  // R/stab(3e-7) > 0
  CHECK(r_in(1, 0) < 0.0);  // R/stab(−3e-7) < 0
  CHECK(r_in(2, 0) == Approx(1e6).epsilon(1e-6));  // R/stab(0) = R/1e-6
}

TEST_CASE("add, normalised (Chefer): the explicit split and rescale, and Σ R_a + Σ R_b = Σ R",
          "[lrp-rules]") {
  struct AddCase {
    const char* what;
    int rows, cols;
    uint64_t seed;
    int variant;  // 0 random, 1 zeros and a + b = 0 entries, 2 a all zero
  };
  const AddCase cases[] = {
      {"3x4 random", 3, 4, 41, 0},          {"1x1", 1, 1, 42, 0},
      {"5x8 zeros and a = -b", 5, 8, 43, 1}, {"4x6 a = 0 (an empty branch)", 4, 6, 44, 2},
      {"6x5 random", 6, 5, 45, 0},
  };
  for (const AddCase& c : cases) {
    INFO(c.what);
    MatD a = random_matd(c.rows, c.cols, c.seed * 10 + 1, 2.0f);
    MatD b = random_matd(c.rows, c.cols, c.seed * 10 + 2);
    MatD r = random_matd(c.rows, c.cols, c.seed * 10 + 3);
    if (c.variant == 1) {
      sprinkle_zeros(a, 6, 1);
      sprinkle_zeros(r, 7, 2);
      for (Eigen::Index i = 0; i < a.size(); i += 5) a.data()[i] = -b.data()[i];  // a + b = 0
    }
    if (c.variant == 2) a.setZero();
    MatD r_a, r_b;
    add_relevance(r_a, r_b, r, a, b, AddRule::normalised);
    // R_a = a ⊙ R/(a + b), R_b = b ⊙ R/(a + b) (safe_divide); A = ΣR_a, B = ΣR_b, T = ΣR;
    // R_a ← R_a·(|A|/(|A| + |B|)·T)/A, R_b ← R_b·(|B|/(|A| + |B|)·T)/B (safe_divide throughout).
    MatD ref_a(c.rows, c.cols), ref_b(c.rows, c.cols);
    double A = 0, B = 0, T = 0;
    for (int i = 0; i < c.rows; ++i)
      for (int j = 0; j < c.cols; ++j) {
        ref_a(i, j) = a(i, j) * ref_safe_divide(r(i, j), a(i, j) + b(i, j));
        ref_b(i, j) = b(i, j) * ref_safe_divide(r(i, j), a(i, j) + b(i, j));
        A += ref_a(i, j);
        B += ref_b(i, j);
        T += r(i, j);
      }
    const double fa = ref_safe_divide(ref_safe_divide(std::fabs(A), std::fabs(A) + std::fabs(B)) * T, A);
    const double fb = ref_safe_divide(ref_safe_divide(std::fabs(B), std::fabs(A) + std::fabs(B)) * T, B);
    for (int i = 0; i < c.rows; ++i)
      for (int j = 0; j < c.cols; ++j) {
        ref_a(i, j) *= fa;
        ref_b(i, j) *= fb;
      }
    CHECK(rel_err(r_a, ref_a) <= 1e-12);  // all in double
    CHECK(rel_err(r_b, ref_b) <= 1e-12);
    // Conservation over the whole tensor, even where a + b = 0 dropped R in the split; only the
    // 1e-9 stabilisers of the rescale remain (|A|, |B| > 1e-2 here, or 0).
    REQUIRE((A == 0.0 || std::fabs(A) > 1e-2));
    REQUIRE(std::fabs(B) > 1e-2);
    CHECK(std::fabs(r_a.sum() + r_b.sum() - T) <= 1e-6 * abs_sum(r));
    // The shares are |A| : |B| of T.
    CHECK(std::fabs(r_a.sum() - std::fabs(A) / (std::fabs(A) + std::fabs(B)) * T) <= 1e-6 * abs_sum(r));
    if (c.variant == 2) CHECK(max_abs(r_a) == 0.0);
  }
}

TEST_CASE("linear α1β0 with one denominator per sign (the paper's LRP baselines): explicit formula, ΣR per sign",
          "[lrp-rules]") {
  for (const LinearCase& c : kLinearCases) {
    INFO(c.what << " (n " << c.n << ", in " << c.in << ", out " << c.out << ")");
    const LinearRun t = run_linear_case(c, LinearRule::alpha1beta0_separate);
    // Z⁺_io = Σ_j (x_ij W_oj)⁺ over x_ij > 0 (x⁺W⁺), Z⁻_io = Σ_j x_ij W_oj over x_ij < 0, W_oj < 0
    // (x⁻W⁻); R_ij = Σ_o c_ijo·R_io/Z^±_io with c the term of the sign it belongs to.
    const Eigen::Index n = t.x.rows(), in = t.x.cols(), out = t.W.rows();
    MatD zp = MatD::Zero(n, out), zn = MatD::Zero(n, out), ref = MatD::Zero(n, in);
    auto pos = [&](Eigen::Index i, Eigen::Index o, Eigen::Index j) {
      return t.x(i, j) > 0 && t.W(o, j) > 0 ? t.x(i, j) * double(t.W(o, j)) : 0.0;
    };
    auto neg = [&](Eigen::Index i, Eigen::Index o, Eigen::Index j) {
      return t.x(i, j) < 0 && t.W(o, j) < 0 ? t.x(i, j) * double(t.W(o, j)) : 0.0;
    };
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index o = 0; o < out; ++o)
        for (Eigen::Index j = 0; j < in; ++j) {
          zp(i, o) += pos(i, o, j);
          zn(i, o) += neg(i, o, j);
        }
    double passed = 0.0;  // Σ_io R_io·([Z⁺ ≠ 0] + [Z⁻ ≠ 0]), up to the stabiliser
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index o = 0; o < out; ++o) {
        for (Eigen::Index j = 0; j < in; ++j)
          ref(i, j) += pos(i, o, j) * ref_safe_divide(t.r(i, o), zp(i, o)) +
                       neg(i, o, j) * ref_safe_divide(t.r(i, o), zn(i, o));
        passed += t.r(i, o) * ((zp(i, o) != 0.0) + (zn(i, o) != 0.0));
      }
    CHECK(rel_err(t.r_in, ref) <= 1e-5);  // Z and S rounded to float
    CHECK(rows_zero_from(t.r_in, c.r_rows));
    CHECK(std::fabs(t.r_in.sum() - passed) <= 1e-5 * abs_sum(t.r));
  }
  // By hand: x = (1, −2, ½), W = ((1, −1, 2), (½, −¼, −1)), R = (¾, −¼). Output 0: Z⁺ = 1 + 1,
  // Z⁻ = (−2)(−1) = 2; output 1: Z⁺ = ½, Z⁻ = (−2)(−¼) = ½. R_in = (½·¾ − ¼, ¾ − ¼, ½·¾) =
  // (⅛, ½, ⅜): Σ = 1 = 2ΣR, where the shared denominator would pass ΣR = ½ on.
  MatD x(1, 3), r(1, 2);
  x << 1.0, -2.0, 0.5;
  r << 0.75, -0.25;
  Mat W(2, 3);
  W << 1.0f, -1.0f, 2.0f, 0.5f, -0.25f, -1.0f;
  const Vec b = Vec::Zero(2);
  LrpScratch s;
  MatD r_in;
  linear_relevance(r_in, r, x, ref_linear_forward(x, W, b), W, b, LinearRule::alpha1beta0_separate, s);
  CHECK(r_in(0, 0) == Approx(0.125).margin(1e-8));
  CHECK(r_in(0, 1) == Approx(0.5).margin(1e-8));
  CHECK(r_in(0, 2) == Approx(0.375).margin(1e-8));
  linear_relevance(r_in, r, x, ref_linear_forward(x, W, b), W, b, LinearRule::alpha1beta0, s);
  CHECK(r_in.sum() == Approx(0.5).margin(1e-8));
}

TEST_CASE("add, plain (the paper's LRP baselines): R_a = a·R/(a + b), no rescale", "[lrp-rules]") {
  MatD a = random_matd(5, 8, 51, 2.0f), b = random_matd(5, 8, 52), r = random_matd(5, 8, 53);
  for (Eigen::Index i = 0; i < a.size(); i += 7) a.data()[i] = -b.data()[i];  // a + b = 0: R dropped
  MatD r_a, r_b;
  add_relevance(r_a, r_b, r, a, b, AddRule::plain);
  double kept = 0.0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double q = ref_safe_divide(r.data()[i], a.data()[i] + b.data()[i]);
    CHECK(r_a.data()[i] == a.data()[i] * q);
    CHECK(r_b.data()[i] == b.data()[i] * q);
    if (a.data()[i] + b.data()[i] != 0.0) kept += r.data()[i];
  }
  // Per element R_a + R_b = R·(a+b)/(a+b+1e-9) where a + b ≠ 0; the a + b = 0 entries drop theirs.
  CHECK(std::fabs(r_a.sum() + r_b.sum() - kept) <= 1e-6 * abs_sum(r));
  CHECK(std::fabs(kept - r.sum()) > 1e-3);  // the dropped entries made a difference
}

TEST_CASE("add, ε (AttnLRP): R_a = a·R/stab(a + b), sign-aware near 0", "[lrp-rules]") {
  SECTION("random, with zeros and a = -b") {
    MatD a = random_matd(5, 7, 51, 2.0f), b = random_matd(5, 7, 52), r = random_matd(5, 7, 53);
    sprinkle_zeros(a, 6, 1);
    sprinkle_zeros(r, 7, 2);
    for (Eigen::Index i = 0; i < a.size(); i += 9) a.data()[i] = -b.data()[i];
    MatD r_a, r_b;
    add_relevance(r_a, r_b, r, a, b, AddRule::epsilon);
    MatD ref_a(5, 7), ref_b(5, 7);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 7; ++j) {
        ref_a(i, j) = a(i, j) * r(i, j) / ref_stab(a(i, j) + b(i, j));
        ref_b(i, j) = b(i, j) * r(i, j) / ref_stab(a(i, j) + b(i, j));
      }
    CHECK(rel_err(r_a, ref_a) <= 1e-12);  // all in double
    CHECK(rel_err(r_b, ref_b) <= 1e-12);
  }
  SECTION("a + b within ε of 0") {
    MatD a(1, 3), b(1, 3), r = MatD::Ones(1, 3);
    a << 1.0 + 3e-7, 1.0 - 3e-7, 1.0;
    b << -1.0, -1.0, -1.0;
    MatD r_a, r_b;
    add_relevance(r_a, r_b, r, a, b, AddRule::epsilon);
    CHECK(r_a(0, 0) > 0.0);  // a·R/stab(3e-7): stab = 1.3e-6
    CHECK(r_a(0, 1) < 0.0);  // a·R/stab(−3e-7): stab = −1.3e-6
    CHECK(r_a(0, 2) == Approx(1e6).epsilon(1e-9));  // a·R/stab(0) = 1/1e-6
    CHECK(r_b(0, 2) == Approx(-1e6).epsilon(1e-9));
  }
}

TEST_CASE("softmax rule (AttnLRP): R_in = s ⊙ (R − p·ΣR) per row, and identity passes R", "[lrp-rules]") {
  const int shapes[][2] = {{1, 5}, {4, 4}, {3, 9}};
  uint64_t seed = 61;
  for (const auto& sh : shapes) {
    const int rows = sh[0], n = sh[1];
    INFO("rows " << rows << ", n " << n);
    MatD s = random_matd(rows, n, seed++, 3.0f), r = random_matd(rows, n, seed++);
    sprinkle_zeros(s, 4, 1);  // zero scores carry no relevance
    sprinkle_zeros(r, 5, 0);
    MatD p(rows, n);  // p = softmax(s) per row
    for (int i = 0; i < rows; ++i) {
      double den = 0.0;
      for (int j = 0; j < n; ++j) den += std::exp(s(i, j));
      for (int j = 0; j < n; ++j) p(i, j) = std::exp(s(i, j)) / den;
    }
    MatD r_in;
    softmax_relevance(r_in, r, s, p, SoftmaxRule::attnlrp);
    MatD ref(rows, n);
    for (int i = 0; i < rows; ++i) {
      double total = 0.0;
      for (int j = 0; j < n; ++j) total += r(i, j);
      for (int j = 0; j < n; ++j) ref(i, j) = s(i, j) * (r(i, j) - p(i, j) * total);
    }
    CHECK(rel_err(r_in, ref) <= 1e-12);  // all in double
    MatD r_id;
    softmax_relevance(r_id, r, s, p, SoftmaxRule::identity);
    CHECK(max_abs(r_id - r) == 0.0);
  }
}

TEST_CASE("attention core: R_A, R_q, R_k, R_v per head against explicit products (Chefer and AttnLRP)",
          "[lrp-rules]") {
  struct Rules {
    const char* what;
    ProductRule product;
    SoftmaxRule softmax;
    bool attnlrp;
  };
  const Rules rule_sets[] = {
      {"Chefer: halved + identity", ProductRule::halved, SoftmaxRule::identity, false},
      {"AttnLRP: epsilon_half + attnlrp", ProductRule::epsilon_half, SoftmaxRule::attnlrp, true}};
  for (const Rules& rs : rule_sets)
    for (const AttnCase& c : kAttnCases) {
      INFO(rs.what << "; " << c.what << " (n " << c.n << ", H " << c.heads << ", d_h " << c.dh << ")");
      MatD qkv, r_ctx, ctx;
      std::vector<MatD> attn;
      make_attn_case(c, qkv, r_ctx);
      ref_attention_forward(attn, ctx, qkv, c.heads);
      LrpScratch s;
      MatD r_qkv;
      std::vector<MatD> r_attn;
      const AttentionRelevanceSums sums =
          attention_relevance(r_qkv, r_attn, r_ctx, qkv, attn, ctx, c.heads, rs.product, rs.softmax, s);
      const AttnRef ref = ref_attention_relevance(r_ctx, qkv, attn, ctx, c.heads, rs.attnlrp);
      const int d = c.heads * c.dh;
      // Relative to the largest magnitude: S and the right operands rounded to float (header).
      REQUIRE(r_attn.size() == size_t(c.heads));
      for (int h = 0; h < c.heads; ++h) {
        INFO("head " << h);
        CHECK(rel_err(r_attn[size_t(h)], ref.r_attn[size_t(h)]) <= 1e-5);
        CHECK(rows_zero_from(r_attn[size_t(h)], c.r_rows));  // R_A = 0 below the rows with R
      }
      CHECK(rel_err(r_qkv.leftCols(d), ref.r_qkv.leftCols(d)) <= 1e-5);          // R_q
      CHECK(rel_err(r_qkv.middleCols(d, d), ref.r_qkv.middleCols(d, d)) <= 1e-5);  // R_k
      CHECK(rel_err(r_qkv.rightCols(d), ref.r_qkv.rightCols(d)) <= 1e-5);        // R_v
      CHECK(rows_zero_from(r_qkv.leftCols(d), c.r_rows));  // R_q = 0 below the rows with R
      // The reported sums are those of the matrices (same float tolerance, against Σ|·|).
      const double scale_av = abs_sum(r_ctx), scale_qk = std::max(ref.abs_r_scores, 1e-300);
      CHECK(std::fabs(sums.attn - ref.sum_attn) <= 1e-5 * scale_av);
      CHECK(std::fabs(sums.v - ref.sum_v) <= 1e-5 * scale_av);
      CHECK(std::fabs(sums.scores - ref.sum_scores) <= 1e-5 * std::max(scale_av, scale_qk));
      CHECK(std::fabs(sums.q - ref.sum_q) <= 1e-5 * scale_qk);
      CHECK(std::fabs(sums.k - ref.sum_k) <= 1e-5 * scale_qk);
      // Conservation per product: the two operands together receive Σ kept_share(R, Z) — ΣR up
      // to the stabiliser (and, for Chefer, less the R of outputs with Z = 0) — within the
      // float rounding of S, 1e-5 of Σ|R|.
      CHECK(std::fabs(sums.attn + sums.v - ref.kept_av) <= 1e-5 * scale_av);
      CHECK(std::fabs(sums.q + sums.k - ref.kept_qk) <= 1e-5 * scale_qk);
      if (!rs.attnlrp) {
        CHECK(std::fabs(sums.scores - sums.attn) <= 1e-12 * scale_av);  // the identity softmax
        // Without zeros no ctx is 0, and every |ctx| ≫ 1e-9: ΣR_A + ΣR_v = ΣR_ctx.
        if (!c.zeros) CHECK(std::fabs(sums.attn + sums.v - r_ctx.sum()) <= 1e-5 * scale_av);
      }
    }
}

TEST_CASE("layernorm ε through the centring (AttnLRP), as the ε rule on the explicit map J, and identity",
          "[lrp-rules]") {
  struct LnCase {
    int n, d;
    uint64_t seed;
    bool zero_beta;
  };
  const LnCase cases[] = {{1, 4, 71, false}, {3, 8, 72, false}, {5, 16, 73, false}, {4, 6, 74, true}};
  const double eps = 1e-6;
  for (const LnCase& c : cases) {
    INFO("n " << c.n << ", d " << c.d << (c.zero_beta ? ", β = 0" : ""));
    MatD x = random_matd(c.n, c.d, c.seed * 10 + 1, 3.0f);
    const Vec w = random_vec(c.d, c.seed * 10 + 2, 1.5f);
    Vec beta = random_vec(c.d, c.seed * 10 + 3, 0.5f);
    if (c.zero_beta) beta.setZero();
    MatD r = random_matd(c.n, c.d, c.seed * 10 + 4);
    sprinkle_zeros(x, 5, 2);
    sprinkle_zeros(r, 6, 1);
    // Forward by hand: rstd = 1/√(var + eps) (biased variance), y = γ·rstd·(x − μ) + β.
    VecD rstd(c.n);
    MatD y(c.n, c.d);
    for (int i = 0; i < c.n; ++i) {
      double mu = 0.0, var = 0.0;
      for (int j = 0; j < c.d; ++j) mu += x(i, j) / c.d;
      for (int j = 0; j < c.d; ++j) var += (x(i, j) - mu) * (x(i, j) - mu) / c.d;
      rstd[i] = 1.0 / std::sqrt(var + eps);
      for (int j = 0; j < c.d; ++j) y(i, j) = double(w[j]) * rstd[i] * (x(i, j) - mu) + double(beta[j]);
    }
    MatD r_in;
    layernorm_relevance(r_in, r, x, y, rstd, w, LayerNormRule::epsilon_centring);
    // With rstd and γ frozen, y_k = Σ_j J_kj·x_j + β_k, J_kj = γ_k·rstd·(δ_kj − 1/d): a Linear whose
    // contributions are z_kj = J_kj·x_j. The ε rule: R_j = Σ_k z_kj·R_k/stab(y_k), β in y.
    MatD ref(c.n, c.d);
    for (int i = 0; i < c.n; ++i) {
      MatD J(c.d, c.d);
      for (int k = 0; k < c.d; ++k)
        for (int j = 0; j < c.d; ++j) J(k, j) = double(w[k]) * rstd[i] * ((k == j ? 1.0 : 0.0) - 1.0 / c.d);
      for (int k = 0; k < c.d; ++k) {  // J reproduces the forward
        double yk = double(beta[k]);
        for (int j = 0; j < c.d; ++j) yk += J(k, j) * x(i, j);
        REQUIRE(std::fabs(yk - y(i, k)) <= 1e-12 * (1.0 + std::fabs(y(i, k))));
      }
      for (int j = 0; j < c.d; ++j) {
        double acc = 0.0;
        for (int k = 0; k < c.d; ++k) acc += J(k, j) * x(i, j) * r(i, k) / ref_stab(y(i, k));
        ref(i, j) = acc;
      }
    }
    CHECK(rel_err(r_in, ref) <= 1e-12);  // all in double
    if (c.zero_beta) {
      // Σ_j J_kj·x_j = y_k − β_k: without β, Σ_j R_j = Σ_k R_k·y_k/stab(y_k), i.e. ΣR less the
      // stabiliser's share Σ_k R_k·ε/|stab(y_k)| (at most 1e-4 of Σ|R| here: every |y| > 0.01).
      double kept = 0.0;
      for (Eigen::Index k = 0; k < y.size(); ++k) {
        REQUIRE(std::fabs(y.data()[k]) > 0.01);
        kept += r.data()[k] * y.data()[k] / ref_stab(y.data()[k]);
      }
      CHECK(std::fabs(r_in.sum() - kept) <= 1e-12 * abs_sum(r));  // all in double
      CHECK(std::fabs(r_in.sum() - r.sum()) <= 1e-4 * abs_sum(r));
    }
    MatD r_id;
    layernorm_relevance(r_id, r, x, y, rstd, w, LayerNormRule::identity);
    CHECK(max_abs(r_id - r) == 0.0);
  }
}

TEST_CASE("patch embedding: z^B and ε on the explicit convolution matrix, z^B conserves", "[lrp-rules]") {
  for (const PatchCase& c : kPatchCases) {
    INFO(c.what << ", d " << c.d);
    const int P = (c.H / c.p) * (c.W / c.p), N = c.C * c.H * c.W;
    MatD img = random_matd(1, N, c.seed * 10 + 1, 2.0f);  // a normalised image, (1, C·H·W)
    Mat W = random_mat(c.d, c.C * c.p * c.p, c.seed * 10 + 2);
    const Vec b = random_vec(c.d, c.seed * 10 + 3, 0.5f);
    MatD r = random_matd(P, c.d, c.seed * 10 + 4);
    if (c.zeros) {
      sprinkle_zeros(img, 7, 3);
      sprinkle_zeros(W, 5, 1);
      sprinkle_zeros(r, 4, 0);
      r.row(1).setZero();  // a patch without relevance, followed by patches with some
    }
    const Conv cv = ref_conv(img, W, b, c.C, c.H, c.W, c.p);
    const double L = img.minCoeff(), Hb = img.maxCoeff();
    LrpScratch s;
    {  // z^B
      MatD map;
      patch_embed_relevance(map, r, cv.patches, cv.embed, W, b, PatchRule::z_b, c.C, c.H, c.W, c.p, s);
      MatD Z;
      const MatD ref = channel_sum(ref_zb_pixels(r, cv, img, L, Hb, &Z), c.C, c.H, c.W);
      CHECK(rel_err(map, ref) <= 1e-5);  // S rounded to float, products in float (header)
      // Σ pixels = Σ_k R_k·(Z_k − 1e-9)/Z_k, Z_k ≥ 1e-9: here every Z_k > 0.1, so ΣR is kept
      // to 1e-8 plus the float rounding of S.
      REQUIRE(Z.minCoeff() > 0.1);
      CHECK(std::fabs(map.sum() - r.sum()) <= 1e-6 * abs_sum(r));
    }
    {  // ε
      MatD map;
      patch_embed_relevance(map, r, cv.patches, cv.embed, W, b, PatchRule::epsilon, c.C, c.H, c.W, c.p, s);
      const MatD ref = channel_sum(ref_epsilon_pixels(r, cv, img), c.C, c.H, c.W);
      CHECK(rel_err(map, ref) <= 1e-5);  // S rounded to float (header)
    }
  }
}
