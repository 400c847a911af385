// gemm.cpp — the float32 products of gemm.h: Eigen natively, a packed SIMD128 kernel in wasm.
//
// The wasm path follows the loop structure of Goto & van de Geijn, "Anatomy of high-performance
// matrix multiplication" (ACM TOMS 2008):
//   for each block of ≤ NC columns of C:
//     for each slice of ≤ KC terms of the sum:
//       pack op(B) (kc, nc) into NR-wide panels, k-major      (reused by every row block)
//       for each block of ≤ MC rows of C:
//         pack op(A) (mc, kc) into MR-tall panels, k-major    (stays in L2)
//         for each B panel (kc, NR) (stays in L1), for each A panel: the MR×NR micro-kernel.
// The micro-kernel holds a 4×8 tile of C in eight SIMD registers; per k it loads two vectors of
// B and four broadcast values of A and does 8 multiplies and 8 adds (SIMD128 has no FMA). It
// runs at ~50 GFLOP/s on one core in node 20 and in chromium 156 (2 mul + 2 add pipes of 4 lanes
// at ~3.1 GHz: the limit without FMA). Measured alternatives: 6×8, 8×8 and 4×12 tiles (more
// accumulators than V8 keeps in registers) run at about half that, 5×8 too in node; unrolling k
// by 2 or 4 is slower. Panels are zero-padded to whole MR and NR; the last row panel of C runs
// a kernel for just its 1–3 rows, and the store of the last column tile writes fewer columns.
// Packing transposes 4×4 blocks with shuffles, so every layout (x·Wᵀ, dy·W, dyᵀ·x) costs the same.
// The packing buffers are allocated per call: there is no state between calls.
#include "vitlens/gemm.h"

#if defined(__wasm_simd128__)

#include <wasm_simd128.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace vitlens {

namespace {

constexpr int MR = 4;     // rows of the micro-tile
constexpr int NR = 8;     // columns of the micro-tile: two vectors
constexpr int KC = 256;   // terms per slice: a B panel (KC, NR) is 8 KiB
constexpr int MC = 256;   // rows per block: packed A (MC, KC) is 256 KiB
constexpr int NC = 2048;  // columns per block: packed B (KC, NC) is 2 MiB

// A logical matrix over row-major memory: element (r, c) is p[r·ld + c], or p[c·ld + r] when
// the memory holds its transpose.
struct Operand {
  const float* p;
  int ld;
  bool trans;
  const float* at(int r, int c) const {
    return trans ? p + ptrdiff_t(c) * ld + r : p + ptrdiff_t(r) * ld + c;
  }
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }
int round_up(int a, int b) { return ceil_div(a, b) * b; }
// The block size for n items in blocks of at most cap: equal blocks, a multiple of unit.
int even_block(int n, int cap, int unit) { return round_up(ceil_div(n, ceil_div(n, cap)), unit); }

// r0..r3 (4 lanes each) ← their transpose
void transpose4(v128_t& r0, v128_t& r1, v128_t& r2, v128_t& r3) {
  const v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5);
  const v128_t t1 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7);
  const v128_t t2 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
  const v128_t t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
  r0 = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5);
  r1 = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
  r2 = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5);
  r3 = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}

// dst[k·4 + q] = src_q[k] for k in k0..k0+3: four k-contiguous rows into k-major order.
void pack4x4(float* dst, const float* s0, const float* s1, const float* s2, const float* s3,
             int stride) {
  v128_t r0 = wasm_v128_load(s0), r1 = wasm_v128_load(s1);
  v128_t r2 = wasm_v128_load(s2), r3 = wasm_v128_load(s3);
  transpose4(r0, r1, r2, r3);
  wasm_v128_store(dst, r0);
  wasm_v128_store(dst + stride, r1);
  wasm_v128_store(dst + 2 * stride, r2);
  wasm_v128_store(dst + 3 * stride, r3);
}

// A (mc, kc) → ceil(mc/MR) panels, each (kc, MR): panel[k·MR + r] = A(i + r, k), zero-padded.
void pack_a(float* dst, const Operand& a, int mc, int kc) {
  for (int i = 0; i < mc; i += MR, dst += MR * kc) {
    const int mr = std::min(MR, mc - i);
    int k = 0;
    if (mr == MR && a.trans) {  // rows of memory hold MR consecutive rows of A
      for (; k < kc; ++k) wasm_v128_store(dst + k * MR, wasm_v128_load(a.at(i, k)));
    } else if (mr == MR) {  // each row of A is contiguous in k
      for (; k + 4 <= kc; k += 4)
        pack4x4(dst + k * MR, a.at(i, k), a.at(i + 1, k), a.at(i + 2, k), a.at(i + 3, k), MR);
    }
    for (; k < kc; ++k)
      for (int r = 0; r < MR; ++r) dst[k * MR + r] = r < mr ? *a.at(i + r, k) : 0.0f;
  }
}

// B (kc, nc) → ceil(nc/NR) panels, each (kc, NR): panel[k·NR + c] = B(k, j + c), zero-padded.
void pack_b(float* dst, const Operand& b, int kc, int nc) {
  for (int j = 0; j < nc; j += NR, dst += NR * kc) {
    const int nr = std::min(NR, nc - j);
    int k = 0;
    if (nr == NR && !b.trans) {  // each row of B is contiguous in j
      for (; k < kc; ++k) {
        wasm_v128_store(dst + k * NR, wasm_v128_load(b.at(k, j)));
        wasm_v128_store(dst + k * NR + 4, wasm_v128_load(b.at(k, j + 4)));
      }
    } else if (nr == NR) {  // each column of B (a row of memory, e.g. of W) is contiguous in k
      for (; k + 4 <= kc; k += 4) {
        pack4x4(dst + k * NR, b.at(k, j), b.at(k, j + 1), b.at(k, j + 2), b.at(k, j + 3), NR);
        pack4x4(dst + k * NR + 4, b.at(k, j + 4), b.at(k, j + 5), b.at(k, j + 6), b.at(k, j + 7),
                NR);
      }
    }
    for (; k < kc; ++k)
      for (int c = 0; c < NR; ++c) dst[k * NR + c] = c < nr ? *b.at(k, j + c) : 0.0f;
  }
}

// C (R, nr) = alpha · Σ_k a[k]ᵀ b[k] + beta · C, with a (kc, MR) and b (kc, NR) packed panels,
// of which the kernel uses the first R ≤ MR rows of a (fewer at the last rows of C, so that an
// edge of 197 = 49·4 + 1 rows costs a 1-row kernel, not a 4-row one) and writes nr ≤ NR
// columns. beta = 0 does not read C.
template <int R>
void micro_kernel(float* c, int ldc, const float* a, const float* b, int kc, int nr, float alpha,
                  float beta) {
  v128_t acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = wasm_f32x4_splat(0.0f);
  for (int k = 0; k < kc; ++k, a += MR, b += NR) {
    const v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
    for (int r = 0; r < R; ++r) {
      const v128_t ar = wasm_v128_load32_splat(a + r);
      acc[r][0] = wasm_f32x4_add(acc[r][0], wasm_f32x4_mul(ar, b0));
      acc[r][1] = wasm_f32x4_add(acc[r][1], wasm_f32x4_mul(ar, b1));
    }
  }
  const v128_t va = wasm_f32x4_splat(alpha), vb = wasm_f32x4_splat(beta);
  for (int r = 0; r < R; ++r) {
    acc[r][0] = wasm_f32x4_mul(acc[r][0], va);
    acc[r][1] = wasm_f32x4_mul(acc[r][1], va);
  }
  if (nr == NR) {
    for (int r = 0; r < R; ++r, c += ldc) {
      v128_t c0 = acc[r][0], c1 = acc[r][1];
      if (beta == 1.0f) {
        c0 = wasm_f32x4_add(c0, wasm_v128_load(c));
        c1 = wasm_f32x4_add(c1, wasm_v128_load(c + 4));
      } else if (beta != 0.0f) {
        c0 = wasm_f32x4_add(c0, wasm_f32x4_mul(vb, wasm_v128_load(c)));
        c1 = wasm_f32x4_add(c1, wasm_f32x4_mul(vb, wasm_v128_load(c + 4)));
      }
      wasm_v128_store(c, c0);
      wasm_v128_store(c + 4, c1);
    }
    return;
  }
  float tile[R][NR];  // (R, NR)
  for (int r = 0; r < R; ++r) {
    wasm_v128_store(&tile[r][0], acc[r][0]);
    wasm_v128_store(&tile[r][4], acc[r][1]);
  }
  for (int r = 0; r < R; ++r, c += ldc)
    for (int j = 0; j < nr; ++j) c[j] = beta == 0.0f ? tile[r][j] : tile[r][j] + beta * c[j];
}

// The micro-kernel for the mr ≤ MR rows left at this panel.
void micro_kernel(float* c, int ldc, const float* a, const float* b, int kc, int mr, int nr,
                  float alpha, float beta) {
  static_assert(MR == 4, "one case per row count");
  switch (mr) {
    case 4: return micro_kernel<4>(c, ldc, a, b, kc, nr, alpha, beta);
    case 3: return micro_kernel<3>(c, ldc, a, b, kc, nr, alpha, beta);
    case 2: return micro_kernel<2>(c, ldc, a, b, kc, nr, alpha, beta);
    default: return micro_kernel<1>(c, ldc, a, b, kc, nr, alpha, beta);
  }
}

// C (M, N) ← beta·C: the whole product when the sum is empty.
void scale_c(float* c, int M, int N, int ldc, float beta) {
  for (int i = 0; i < M; ++i, c += ldc)
    for (int j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
}

// C (M, N) = alpha · A (M, K) · B (K, N) + beta · C
void gemm(float* C, const Operand& A, const Operand& B, int M, int N, int K, int ldc, float alpha,
          float beta) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scale_c(C, M, N, ldc, beta);
    return;
  }
  const int kb = even_block(K, KC, 1), mb = even_block(M, MC, MR), nb = even_block(N, NC, NR);
  // Packed A (mb, kb) then packed B (kb, nb), 64-byte aligned.
  const size_t a_size = size_t(mb) * size_t(kb), b_size = size_t(kb) * size_t(nb);
  std::unique_ptr<float[]> buffer(new float[a_size + b_size + 16]);
  float* const ap = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer.get()) + 63) &
                                             ~uintptr_t(63));
  float* const bp = ap + a_size;
  for (int jc = 0; jc < N; jc += nb) {
    const int nc = std::min(nb, N - jc);
    for (int pc = 0; pc < K; pc += kb) {
      const int kc = std::min(kb, K - pc);
      const float beta_slice = pc == 0 ? beta : 1.0f;  // later slices add to the first
      pack_b(bp, Operand{B.at(pc, jc), B.ld, B.trans}, kc, nc);
      for (int ic = 0; ic < M; ic += mb) {
        const int mc = std::min(mb, M - ic);
        pack_a(ap, Operand{A.at(ic, pc), A.ld, A.trans}, mc, kc);
        for (int jr = 0; jr < nc; jr += NR)
          for (int ir = 0; ir < mc; ir += MR)
            micro_kernel(C + ptrdiff_t(ic + ir) * ldc + (jc + jr), ldc, ap + ptrdiff_t(ir) * kc,
                         bp + ptrdiff_t(jr) * kc, kc, std::min(MR, mc - ir), std::min(NR, nc - jr),
                         alpha, beta_slice);
      }
    }
  }
}

}  // namespace

void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm(C, Operand{A, lda, false}, Operand{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm(C, Operand{A, lda, false}, Operand{B, ldb, true}, M, N, K, ldc, alpha, beta);
}

void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm(C, Operand{A, lda, true}, Operand{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

}  // namespace vitlens

#else  // native: Eigen's kernels on maps of the operands

#include "vitlens/tensor.h"

namespace vitlens {

namespace {

using Stride = Eigen::OuterStride<>;
using ConstMap = Eigen::Map<const Mat, 0, Stride>;
using MutMap = Eigen::Map<Mat, 0, Stride>;

// C (M, N) = alpha·ab + beta·C; beta = 0 does not read C.
template <typename Product>
void update(float* C, int M, int N, int ldc, const Product& ab, float alpha, float beta) {
  MutMap c(C, M, N, Stride(ldc));
  if (beta == 0.0f) {
    c.noalias() = alpha * ab;
    return;
  }
  if (beta != 1.0f) c *= beta;
  c.noalias() += alpha * ab;
}

}  // namespace

void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  update(C, M, N, ldc, ConstMap(A, M, K, Stride(lda)) * ConstMap(B, K, N, Stride(ldb)), alpha,
         beta);
}

void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  update(C, M, N, ldc, ConstMap(A, M, K, Stride(lda)) * ConstMap(B, N, K, Stride(ldb)).transpose(),
         alpha, beta);
}

void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  update(C, M, N, ldc, ConstMap(A, K, M, Stride(lda)).transpose() * ConstMap(B, K, N, Stride(ldb)),
         alpha, beta);
}

}  // namespace vitlens

#endif
