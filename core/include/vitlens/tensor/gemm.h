// gemm.h — the matrix products of the hot paths, in float32 and float64.
//
// float32: the Linear layer (x·Wᵀ, dy·W, dyᵀ·x), the attention core (q·kᵀ, A·v, dctx·vᵀ, Aᵀ·dctx,
// dS·k, dSᵀ·q) and the relevance products that carry S = R/Z through the weights.
// float64: the LRP methods' double-precision forward pass (lrp.h), whose activations feed nearly
// cancelling denominators, and the denominators Z = q·kᵀ of the attention product rule.
//
// Every operand is row-major with a leading dimension (the distance in elements between the
// starts of two rows), so that column blocks of a wider matrix (one head's q, k or v inside qkv)
// are passed without copying. Each function computes
//   C (M, N) = alpha · op(A) · op(B) + beta · C
// for any M, N, K ≥ 0; with beta = 0, C is only written (it may hold anything, even NaN).
// C must not overlap A or B.
//
// Natively these forward to Eigen (its AVX kernels are faster than anything written here); in
// WebAssembly they run a register-blocked SIMD128 kernel: ~50 GFLOP/s in float and ~25 in double
// on one core, 1.5–1.9× Eigen's SSE path translated to SIMD128 (tests/native/test_gemm.cpp,
// "[gemm-bench]"). Summation order differs between the two, not the accuracy class.
#pragma once

#include <memory>
#include <vector>

namespace vitlens {

// In the pthreads wasm build, products of at least this many multiply-adds are split over
// compute_pool() (parallel.h) in column blocks; smaller ones, and every product elsewhere, run on
// the calling thread. 2¹⁹ is ~1 MFLOP, ~20 µs on one core, against a few microseconds to hand a
// block to a worker that spins between calls. (The layers split most of their work themselves,
// in row ranges or heads, before it reaches a product: parallel.h, grain_for.)
constexpr double gemm_split_macs = double(1 << 19);

// C = alpha·A·B + beta·C.    A (M, K) lda, B (K, N) ldb, C (M, N) ldc
void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);
// C = alpha·A·Bᵀ + beta·C.   A (M, K) lda, B (N, K) ldb, C (M, N) ldc
void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);
// C = alpha·Aᵀ·B + beta·C.   A (K, M) lda, B (K, N) ldb, C (M, N) ldc
void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);

// The same three in float64.
void gemm_nn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta);
void gemm_nt(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta);
void gemm_tn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta);
// gemm_nt in float64 with B in float (a weight), widened exactly: in wasm as it is packed, so the
// double forward pass's x·Wᵀ needs no double copy of W.
void gemm_nt(double* C, const double* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta);

// With |B| (element by element) in place of B, taken as B is packed (wasm) or formed first
// (natively): the LRP-α1β0 products |x|·|W|ᵀ and S·|W| without a copy of |W|.
// C = alpha·A·|B| + beta·C.    A (M, K) lda, B (K, N) ldb, C (M, N) ldc
void gemm_nn_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta);
// C = alpha·A·|B|ᵀ + beta·C.   A (M, K) lda, B (N, K) ldb, C (M, N) ldc
void gemm_nt_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta);

// The products that read a weight W (out, in), row-major: A times W, |W| or their transposes.
enum class WeightProduct {
  times_wt,      // A·Wᵀ    the Linear layers' forward pass, x·Wᵀ (gemm_nt)
  times_abs_wt,  // A·|W|ᵀ  the LRP-α1β0 denominator's |x|·|W|ᵀ (gemm_nt_abs)
  times_w,       // A·W     the backward pass's dy·W, the relevance rules' S·W (gemm_nn)
  times_abs_w,   // A·|W|   the LRP-α1β0 rule's S·|W| (gemm_nn_abs)
};

// A weight packed once for one of those products, so that a pass does not re-pack every weight
// it reads (wasm: the forward pass 3–7 % faster on DeiT-tiny, 6–12 % on the shipped model,
// docs/performance.md 2026-11-29; without them the backward pass and the relevance rules pack
// each weight in every call, and on two threads in each thread's rows). The panels are those the
// product would pack itself, in the order it reads them, so the results are bit-identical with
// and without. Natively pack_weight returns nullptr (Eigen packs as it goes).
struct PackedWeight {
  const float* source = nullptr;  // the W it was packed from
  int out = 0, in = 0;
  WeightProduct product = WeightProduct::times_wt;
  std::vector<float> panels;      // wasm: (Σ over blocks of kc · ⌈nc/8⌉·8) values
};
std::shared_ptr<const PackedWeight> pack_weight(const float* W, int out, int in, WeightProduct product);

// One weight's packings, one per product; a null one is packed by the product as it runs.
struct WeightPacks {
  std::shared_ptr<const PackedWeight> times_wt, times_abs_wt, times_w, times_abs_w;
  const PackedWeight* get(WeightProduct p) const;
};

// C = alpha·A·op(W) + beta·C for the weight W (out, in), rows contiguous:
//   times_wt, times_abs_wt: op(W) = Wᵀ, |W|ᵀ (in, out); A (M, in) lda, C (M, out) ldc;
//   times_w, times_abs_w:   op(W) = W, |W| (out, in);   A (M, out) lda, C (M, in) ldc.
// W is read from its packing in `packs` (which may be null) when that was packed from this W with
// these dimensions; otherwise the product packs W itself (gemm_nt, gemm_nt_abs, gemm_nn,
// gemm_nn_abs). A packing is only as current as its source: pack again after editing W in place.
void gemm_weight(float* C, const float* A, const float* W, int out, int in, WeightProduct product,
                 const WeightPacks* packs, int M, int lda, int ldc, float alpha, float beta);

// Runs the three products that carry the passes (float; double; double with a float B, the
// double forward pass's x·Wᵀ) on 64 × 64 operands `rounds` times, and answers the sum of the
// first element of every result: rounds · 3 · 8 exactly (each is Σ over 64 terms of 0.5 · 0.25),
// a check that they ran. For browsers: V8 compiles a wasm function with its baseline compiler on
// its first call and optimises it only once it has run for a while, in the background (20–50 ms
// for each of these three, whose micro-kernels are inlined into them); meanwhile the products run
// several times slower. Called once as the page's engine starts (web/worker.js), before the
// model arrives, it gets the three optimised while the model loads instead of during the first
// prediction and explanation (docs/performance.md, 2026-12-02, fifth session). Eight rounds use up
// V8's budget for each of the three (seen in chromium 156's --trace-wasm-compilation-times: the
// three are among its first optimising compiles). Natively it is just a few small products.
double gemm_warm_up(int rounds = 8);

#if defined(__wasm_simd128__)
// The most one core does through the kernel's fused multiply-add (relaxed SIMD): `iterations`
// rounds of ten independent multiply-adds on SIMD registers, no memory; answers GFLOP/s (a
// multiply-add counts as two flops), in float (4 lanes) or double (2). No product can run
// faster, so "[gemm-bench]" (tests/native/test_gemm.cpp) prints each product's share of it. V8
// optimises the loop after its first call: take the best of several. 0 without relaxed SIMD
// (vitlens.js; gemm.cpp says why) and natively, where the products are Eigen's in wider vectors.
double simd_madd_gflops(bool in_double, int iterations);
#endif

}  // namespace vitlens
