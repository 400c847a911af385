// gemm.h — the float32 matrix products of the hot paths: the Linear layer (x·Wᵀ, dy·W, dyᵀ·x)
// and the attention core (q·kᵀ, A·v, dctx·vᵀ, Aᵀ·dctx, dS·k, dSᵀ·q).
//
// Every operand is row-major with a leading dimension (the distance in floats between the starts
// of two rows), so that column blocks of a wider matrix (one head's q, k or v inside qkv) are
// passed without copying. Each function computes
//   C (M, N) = alpha · op(A) · op(B) + beta · C
// for any M, N, K ≥ 0; with beta = 0, C is only written (it may hold anything, even NaN).
// C must not overlap A or B.
//
// Natively these forward to Eigen (its AVX kernels are faster than anything written here); in
// WebAssembly they run a register-blocked SIMD128 kernel, about twice as fast as Eigen's SSE path
// translated to SIMD128. Summation order differs between the two, not the accuracy class.
#pragma once

namespace vitlens {

// C = alpha·A·B + beta·C.    A (M, K) lda, B (K, N) ldb, C (M, N) ldc
void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);
// C = alpha·A·Bᵀ + beta·C.   A (M, K) lda, B (N, K) ldb, C (M, N) ldc
void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);
// C = alpha·Aᵀ·B + beta·C.   A (K, M) lda, B (K, N) ldb, C (M, N) ldc
void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta);

}  // namespace vitlens
