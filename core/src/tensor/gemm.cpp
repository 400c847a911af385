// gemm.cpp — the float32 and float64 products of gemm.h: Eigen natively, a packed SIMD128 kernel
// in wasm.
//
// The wasm path follows the loop structure of Goto & van de Geijn, "Anatomy of high-performance
// matrix multiplication" (ACM TOMS 2008):
//   for each block of ≤ NC columns of C:
//     for each slice of ≤ KC terms of the sum:
//       pack op(B) (kc, nc) into NR-wide panels, k-major      (reused by every row block)
//       for each block of ≤ MC rows of C:
//         pack op(A) (mc, kc) into MR-tall panels, k-major    (stays in L2)
//         for each B panel (kc, NR) (stays in L1), for each A panel: the MR×NR micro-kernel.
// The micro-kernel holds an MR×NR tile of C in eight SIMD registers (MR = 4 rows, NR = two
// vectors: 8 floats or 4 doubles); per k it loads two vectors of B and four broadcast values of A
// and does 8 multiply-adds, `Simd<T>::madd`. In the plain SIMD128 build that is a multiply and an
// add (SIMD128 has no FMA): in float ~50 GFLOP/s on one Zen 5 core in node 20 and chromium 156 (2
// mul + 2 add pipes of 4 lanes at ~3.1 GHz), 28–37 on Zen 3, in double about half (2 lanes).
// Compiled with -mrelaxed-simd (the vitlens-relaxed.js / vitlens-mt-relaxed.js modules, this file
// alone built by clang-16: wasm/CMakeLists.txt) it is relaxed SIMD's f32x4/f64x2.relaxed_madd.
// Relaxed semantics: the engine may fuse it (one rounding, an FMA instruction) or not (two
// roundings, as the plain build), per machine, so results may differ in the last bit between
// machines and from the plain build; the accumulation order is the same either way. The parity
// tests' tolerances (≤ 1e-4 relative to the references, 1e-5 wasm against native) hold for both.
// Measured alternatives for float: 6×8, 8×8 and 4×12 tiles (more accumulators than V8 keeps in
// registers) run at about half that, 5×8 too in node; unrolling k by 2 or 4 is slower.
// Panels are zero-padded to whole MR and NR; the last row panel of C runs a kernel for just its
// 1–3 rows, and the store of the last column tile writes fewer columns. Packing transposes
// lanes×lanes blocks with shuffles, so every layout (x·Wᵀ, dy·W, dyᵀ·x) costs the same. The
// packing buffer is the calling thread's and holds nothing between calls. A weight used by every
// pass can instead be packed once (pack_weight, its blocks in the order gemm reads them; the
// caller owns them). One template serves both element types; `Simd<T>` holds what differs.
#include "vitlens/tensor/gemm.h"

#if defined(__wasm_simd128__)

#include <wasm_simd128.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vitlens/tensor/parallel.h"

namespace vitlens {

namespace {

#if defined(__wasm_relaxed_simd__)
// clang-16's wasm_simd128.h has no relaxed-SIMD intrinsics; its builtins take typed vectors.
typedef float f32x4 __attribute__((__vector_size__(16)));
typedef double f64x2 __attribute__((__vector_size__(16)));
#endif

// The SIMD128 operations of one element type.
template <typename T>
struct Simd;

template <>
struct Simd<float> {
  static constexpr int lanes = 4;
  static v128_t splat(float x) { return wasm_f32x4_splat(x); }
  static v128_t load_splat(const float* p) { return wasm_v128_load32_splat(p); }
  static v128_t load(const float* p) { return wasm_v128_load(p); }
  static v128_t add(v128_t a, v128_t b) { return wasm_f32x4_add(a, b); }
  static v128_t mul(v128_t a, v128_t b) { return wasm_f32x4_mul(a, b); }
  static v128_t abs(v128_t a) { return wasm_f32x4_abs(a); }
  // a·b + c: fused or not (relaxed SIMD), else a multiply and an add
  static v128_t madd(v128_t a, v128_t b, v128_t c) {
#if defined(__wasm_relaxed_simd__)
    return v128_t(__builtin_wasm_relaxed_madd_f32x4(f32x4(a), f32x4(b), f32x4(c)));
#else
    return wasm_f32x4_add(wasm_f32x4_mul(a, b), c);
#endif
  }
  // r[0..3] (4 lanes each) ← their transpose
  static void transpose(v128_t* r) {
    const v128_t t0 = wasm_i32x4_shuffle(r[0], r[1], 0, 4, 1, 5);
    const v128_t t1 = wasm_i32x4_shuffle(r[0], r[1], 2, 6, 3, 7);
    const v128_t t2 = wasm_i32x4_shuffle(r[2], r[3], 0, 4, 1, 5);
    const v128_t t3 = wasm_i32x4_shuffle(r[2], r[3], 2, 6, 3, 7);
    r[0] = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5);
    r[1] = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
    r[2] = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5);
    r[3] = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
  }
};

template <>
struct Simd<double> {
  static constexpr int lanes = 2;
  static v128_t splat(double x) { return wasm_f64x2_splat(x); }
  static v128_t load_splat(const double* p) { return wasm_v128_load64_splat(p); }
  static v128_t load(const double* p) { return wasm_v128_load(p); }
  // two floats widened (exactly): a float operand packed for a double product
  static v128_t load(const float* p) { return wasm_f64x2_promote_low_f32x4(wasm_v128_load64_zero(p)); }
  static v128_t add(v128_t a, v128_t b) { return wasm_f64x2_add(a, b); }
  static v128_t mul(v128_t a, v128_t b) { return wasm_f64x2_mul(a, b); }
  static v128_t abs(v128_t a) { return wasm_f64x2_abs(a); }
  // a·b + c: fused or not (relaxed SIMD), else a multiply and an add
  static v128_t madd(v128_t a, v128_t b, v128_t c) {
#if defined(__wasm_relaxed_simd__)
    return v128_t(__builtin_wasm_relaxed_madd_f64x2(f64x2(a), f64x2(b), f64x2(c)));
#else
    return wasm_f64x2_add(wasm_f64x2_mul(a, b), c);
#endif
  }
  // r[0..1] (2 lanes each) ← their transpose
  static void transpose(v128_t* r) {
    const v128_t t0 = wasm_i64x2_shuffle(r[0], r[1], 0, 2);
    r[1] = wasm_i64x2_shuffle(r[0], r[1], 1, 3);
    r[0] = t0;
  }
};

constexpr int MR = 4;   // rows of the micro-tile
constexpr int KC = 256;  // terms per slice: a B panel (KC, NR) is 8 KiB

// The blocking of one element type: the micro-tile is MR × NR, NR two vectors.
template <typename T>
struct Blocking {
  static constexpr int L = Simd<T>::lanes;
  static constexpr int NR = 2 * L;
  static constexpr int MC = 65536 / KC * 4 / int(sizeof(T));   // packed A (MC, KC): 256 KiB
  static constexpr int NC = 524288 / KC * 4 / int(sizeof(T));  // packed B (KC, NC): 2 MiB
};

// A logical matrix over row-major memory: element (r, c) is p[r·ld + c], or p[c·ld + r] when
// the memory holds its transpose. S is the type in memory: the product's own, or (B only) float
// in a double product, widened as it is packed.
template <typename S>
struct Operand {
  const S* p;
  int ld;
  bool trans;
  bool abs = false;  // the operand is |M| (B only: taken as it is packed)
  const S* at(int r, int c) const {
    return trans ? p + ptrdiff_t(c) * ld + r : p + ptrdiff_t(r) * ld + c;
  }
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }
int round_up(int a, int b) { return ceil_div(a, b) * b; }
// The block size for n items in blocks of at most cap: equal blocks, a multiple of unit.
int even_block(int n, int cap, int unit) { return round_up(ceil_div(n, ceil_div(n, cap)), unit); }

// dst[(k + q)·stride + r] = src_r[k + q] for q, r < lanes: `lanes` rows, each contiguous in k,
// into k-major order (a lanes×lanes transpose).
// With abs, |values|. The source rows hold T, or float widened to T.
template <typename T, typename S>
void pack_block(T* dst, const S* const* src, int stride, bool abs) {
  constexpr int L = Simd<T>::lanes;
  v128_t r[L];
  for (int q = 0; q < L; ++q) r[q] = abs ? Simd<T>::abs(Simd<T>::load(src[q])) : Simd<T>::load(src[q]);
  Simd<T>::transpose(r);
  for (int q = 0; q < L; ++q) wasm_v128_store(dst + q * stride, r[q]);
}

// A (mc, kc) → ceil(mc/MR) panels, each (kc, MR): panel[k·MR + r] = A(i + r, k), zero-padded.
template <typename T>
void pack_a(T* dst, const Operand<T>& a, int mc, int kc) {
  constexpr int L = Simd<T>::lanes;
  for (int i = 0; i < mc; i += MR, dst += MR * kc) {
    const int mr = std::min(MR, mc - i);
    int k = 0;
    if (mr == MR && a.trans) {  // rows of memory hold MR consecutive rows of A
      for (; k < kc; ++k)
        for (int v = 0; v < MR; v += L) wasm_v128_store(dst + k * MR + v, wasm_v128_load(a.at(i + v, k)));
    } else if (mr == MR) {  // each row of A is contiguous in k
      for (; k + L <= kc; k += L)
        for (int v = 0; v < MR; v += L) {
          const T* rows[L];
          for (int q = 0; q < L; ++q) rows[q] = a.at(i + v + q, k);
          pack_block(dst + k * MR + v, rows, MR, false);
        }
    }
    for (; k < kc; ++k)
      for (int r = 0; r < MR; ++r) dst[k * MR + r] = r < mr ? *a.at(i + r, k) : T(0);
  }
}

// B (kc, nc) → ceil(nc/NR) panels, each (kc, NR): panel[k·NR + c] = B(k, j + c), zero-padded;
// |B(k, j + c)| with b.abs; B's values widened to T when it holds floats.
template <typename T, typename S>
void pack_b(T* dst, const Operand<S>& b, int kc, int nc) {
  constexpr int L = Simd<T>::lanes, NR = Blocking<T>::NR;
  for (int j = 0; j < nc; j += NR, dst += NR * kc) {
    const int nr = std::min(NR, nc - j);
    int k = 0;
    if (nr == NR && !b.trans) {  // each row of B is contiguous in j
      for (; k < kc; ++k)
        for (int v = 0; v < NR; v += L) {
          const v128_t x = Simd<T>::load(b.at(k, j + v));
          wasm_v128_store(dst + k * NR + v, b.abs ? Simd<T>::abs(x) : x);
        }
    } else if (nr == NR) {  // each column of B (a row of memory, e.g. of W) is contiguous in k
      for (; k + L <= kc; k += L)
        for (int v = 0; v < NR; v += L) {
          const S* cols[L];
          for (int q = 0; q < L; ++q) cols[q] = b.at(k, j + v + q);
          pack_block(dst + k * NR + v, cols, NR, b.abs);
        }
    }
    for (; k < kc; ++k)
      for (int c = 0; c < NR; ++c) {
        const T x = c < nr ? T(*b.at(k, j + c)) : T(0);
        dst[k * NR + c] = b.abs ? std::fabs(x) : x;
      }
  }
}

// C (R, nr) = alpha · Σ_k a[k]ᵀ b[k] + beta · C, with a (kc, MR) and b (kc, NR) packed panels,
// of which the kernel uses the first R ≤ MR rows of a (fewer at the last rows of C, so that an
// edge of 197 = 49·4 + 1 rows costs a 1-row kernel, not a 4-row one) and writes nr ≤ NR
// columns. beta = 0 does not read C.
template <typename T, int R>
[[gnu::always_inline]] inline void micro_kernel(T* c, int ldc, const T* a, const T* b, int kc, int nr, T alpha,
                                                T beta) {
  using S = Simd<T>;
  constexpr int L = S::lanes, NR = Blocking<T>::NR;
  v128_t acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = S::splat(T(0));
  for (int k = 0; k < kc; ++k, a += MR, b += NR) {
    const v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + L);
    for (int r = 0; r < R; ++r) {
      const v128_t ar = S::load_splat(a + r);
      acc[r][0] = S::madd(ar, b0, acc[r][0]);
      acc[r][1] = S::madd(ar, b1, acc[r][1]);
    }
  }
  const v128_t va = S::splat(alpha), vb = S::splat(beta);
  for (int r = 0; r < R; ++r) {
    acc[r][0] = S::mul(acc[r][0], va);
    acc[r][1] = S::mul(acc[r][1], va);
  }
  if (nr == NR) {
    for (int r = 0; r < R; ++r, c += ldc) {
      v128_t c0 = acc[r][0], c1 = acc[r][1];
      if (beta == T(1)) {
        c0 = S::add(c0, wasm_v128_load(c));
        c1 = S::add(c1, wasm_v128_load(c + L));
      } else if (beta != T(0)) {
        c0 = S::add(c0, S::mul(vb, wasm_v128_load(c)));
        c1 = S::add(c1, S::mul(vb, wasm_v128_load(c + L)));
      }
      wasm_v128_store(c, c0);
      wasm_v128_store(c + L, c1);
    }
    return;
  }
  T tile[R][NR];  // (R, NR)
  for (int r = 0; r < R; ++r) {
    wasm_v128_store(&tile[r][0], acc[r][0]);
    wasm_v128_store(&tile[r][L], acc[r][1]);
  }
  for (int r = 0; r < R; ++r, c += ldc)
    for (int j = 0; j < nr; ++j) c[j] = beta == T(0) ? tile[r][j] : tile[r][j] + beta * c[j];
}

// The micro-kernel for the mr ≤ MR rows left at this panel. Inlined into each product's loop
// (clang otherwise keeps it out of line once two products share it: the double forward's x·Wᵀ
// with a float W beside the all-double products ran 1.04× slower through the call).
template <typename T>
[[gnu::always_inline]] inline void micro_kernel(T* c, int ldc, const T* a, const T* b, int kc, int mr, int nr,
                                                T alpha, T beta) {
  static_assert(MR == 4, "one case per row count");
  switch (mr) {
    case 4: return micro_kernel<T, 4>(c, ldc, a, b, kc, nr, alpha, beta);
    case 3: return micro_kernel<T, 3>(c, ldc, a, b, kc, nr, alpha, beta);
    case 2: return micro_kernel<T, 2>(c, ldc, a, b, kc, nr, alpha, beta);
    default: return micro_kernel<T, 1>(c, ldc, a, b, kc, nr, alpha, beta);
  }
}

// C (M, N) ← beta·C: the whole product when the sum is empty.
template <typename T>
void scale_c(T* c, int M, int N, int ldc, T beta) {
  for (int i = 0; i < M; ++i, c += ldc)
    for (int j = 0; j < N; ++j) c[j] = beta == T(0) ? T(0) : beta * c[j];
}

// How a product's B (K, N) is blocked: slices of ≤ kb terms, blocks of ≤ nb columns (whole
// panels), each as even as its cap (KC, NC) allows.
template <typename T>
struct BBlocks {
  int kb, nb;
  BBlocks(int N, int K) : kb(even_block(K, KC, 1)), nb(even_block(N, Blocking<T>::NC, Blocking<T>::NR)) {}
};

// The blocks of B a product (K, N) packs, in the order `gemm` visits them: for each block of ≤ nb
// columns, for each slice of ≤ kb terms, ceil(nc/NR) panels (kc, NR). Calls f(jc, nc, pc, kc).
// The one statement of that order: gemm runs its loop through it, pack_weight lays its panels
// out by it.
template <typename T, typename F>
void for_each_b_block(int N, int K, F f) {
  const BBlocks<T> b(N, K);
  for (int jc = 0; jc < N; jc += b.nb)
    for (int pc = 0; pc < K; pc += b.kb) f(jc, std::min(b.nb, N - jc), pc, std::min(b.kb, K - pc));
}

// C (M, N) = alpha · A (M, K) · B (K, N) + beta · C. With `packed`, B's blocks are read from there
// (pack_weight: the blocks of for_each_b_block, one after another) instead of packed here.
template <typename T, typename SB>
void gemm(T* C, const Operand<T>& A, const Operand<SB>& B, int M, int N, int K, int ldc, T alpha, T beta,
          const T* packed = nullptr) {
  using Bl = Blocking<T>;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scale_c(C, M, N, ldc, beta);
    return;
  }
  const BBlocks<T> blocks(N, K);
  const int mb = even_block(M, Bl::MC, MR);
  // Packed A (mb, kb) then packed B (kb, nb), 64-byte aligned, in a buffer of the calling thread
  // (one per element type) that only grows, to at most MC·KC + KC·NC values (2.3 MiB), and holds
  // nothing between calls:
  // a fresh allocation per product cost the split explanations of vitlens-mt.js 2–7 % (both
  // threads allocating at once; the pthreads build's malloc takes a lock), vitlens.js ~1 %.
  const size_t a_size = size_t(mb) * size_t(blocks.kb), b_size = packed ? 0 : size_t(blocks.kb) * size_t(blocks.nb);
  constexpr size_t align = 64 / sizeof(T);
  thread_local std::vector<T> buffer;
  if (buffer.size() < a_size + b_size + align) buffer.resize(a_size + b_size + align);
  T* const ap = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t(63));
  T* const b_buffer = ap + a_size;
  for_each_b_block<T>(N, K, [&](int jc, int nc, int pc, int kc) {
    const T beta_slice = pc == 0 ? beta : T(1);  // later slices add to the first
    const T* bp = packed;
    if (packed) {
      packed += size_t(kc) * size_t(round_up(nc, Bl::NR));
    } else {
      pack_b(b_buffer, Operand<SB>{B.at(pc, jc), B.ld, B.trans, B.abs}, kc, nc);
      bp = b_buffer;
    }
    for (int ic = 0; ic < M; ic += mb) {
      const int mc = std::min(mb, M - ic);
      pack_a(ap, Operand<T>{A.at(ic, pc), A.ld, A.trans}, mc, kc);
      for (int jr = 0; jr < nc; jr += Bl::NR)
        for (int ir = 0; ir < mc; ir += MR)
          micro_kernel(C + ptrdiff_t(ic + ir) * ldc + (jc + jr), ldc, ap + ptrdiff_t(ir) * kc,
                       bp + ptrdiff_t(jr) * kc, kc, std::min(MR, mc - ir), std::min(Bl::NR, nc - jr), alpha,
                       beta_slice);
    }
  });
}

// Products of at least gemm_split_macs multiply-adds (gemm.h) are split over the compute pool in
// column blocks of whole NR panels. Each block is a product of its own (packing all of A and its
// part of B), so every element of C is computed exactly as without the split.

// The column blocks gemm_split cuts a product into: 1 when it runs whole on this thread.
template <typename T>
int split_parts(int M, int N, int K) {
  const int parts = std::min(compute_pool().available(), ceil_div(std::max(N, 0), Blocking<T>::NR));
  return parts < 2 || double(M) * double(N) * double(K) < gemm_split_macs ? 1 : parts;
}

template <typename T, typename SB>
void gemm_split(T* C, const Operand<T>& A, const Operand<SB>& B, int M, int N, int K, int ldc, T alpha, T beta) {
  constexpr int NR = Blocking<T>::NR;
  const int parts = split_parts<T>(M, N, K);
  if (parts == 1) {
    gemm(C, A, B, M, N, K, ldc, alpha, beta);
    return;
  }
  const int cols = ceil_div(ceil_div(N, NR), parts) * NR;  // per part
  compute_pool().run(parts, [&](int t) {
    const int j0 = t * cols, nc = std::min(cols, N - j0);
    if (nc > 0) gemm(C + j0, A, Operand<SB>{B.at(0, j0), B.ld, B.trans, B.abs}, M, nc, K, ldc, alpha, beta);
  });
}

// A product with the weight W (out, in) as its B (gemm.h, WeightProduct): B = Wᵀ (in, out) or
// W (out, in), |·| taken as it is packed.
struct WeightOperand {
  Operand<float> b;
  int N, K;  // B (K, N)
};

WeightOperand weight_operand(const float* W, int out, int in, WeightProduct product) {
  const bool trans = product == WeightProduct::times_wt || product == WeightProduct::times_abs_wt;
  const bool abs = product == WeightProduct::times_abs_wt || product == WeightProduct::times_abs_w;
  return {Operand<float>{W, in, trans, abs}, trans ? out : in, trans ? in : out};
}

}  // namespace

std::shared_ptr<const PackedWeight> pack_weight(const float* W, int out, int in, WeightProduct product) {
  if (out <= 0 || in <= 0) return nullptr;
  constexpr int NR = Blocking<float>::NR;
  const WeightOperand w = weight_operand(W, out, in, product);
  auto p = std::make_shared<PackedWeight>();
  p->source = W;
  p->out = out;
  p->in = in;
  p->product = product;
  size_t size = 0;
  for_each_b_block<float>(w.N, w.K, [&](int, int nc, int, int kc) { size += size_t(kc) * size_t(round_up(nc, NR)); });
  p->panels.resize(size);
  float* dst = p->panels.data();
  for_each_b_block<float>(w.N, w.K, [&](int jc, int nc, int pc, int kc) {
    pack_b(dst, Operand<float>{w.b.at(pc, jc), w.b.ld, w.b.trans, w.b.abs}, kc, nc);
    dst += size_t(kc) * size_t(round_up(nc, NR));
  });
  return p;
}

void gemm_weight(float* C, const float* A, const float* W, int out, int in, WeightProduct product,
                 const WeightPacks* packs, int M, int lda, int ldc, float alpha, float beta) {
  const WeightOperand w = weight_operand(W, out, in, product);
  const Operand<float> a{A, lda, false};
  const PackedWeight* packed = packs ? packs->get(product) : nullptr;
  const bool usable = packed && packed->source == W && packed->out == out && packed->in == in &&
                      packed->product == product;
  // A product the pool would split over its columns keeps to the unpacked path (the packed blocks
  // are laid out for the whole width); the layers split their rows before they get here.
  if (!usable || split_parts<float>(M, w.N, w.K) > 1) {
    gemm_split(C, a, w.b, M, w.N, w.K, ldc, alpha, beta);
    return;
  }
  gemm(C, a, w.b, M, w.N, w.K, ldc, alpha, beta, packed->panels.data());
}

void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm_split(C, Operand<float>{A, lda, false}, Operand<float>{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm_split(C, Operand<float>{A, lda, false}, Operand<float>{B, ldb, true}, M, N, K, ldc, alpha, beta);
}

void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  gemm_split(C, Operand<float>{A, lda, true}, Operand<float>{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

void gemm_nn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  gemm_split(C, Operand<double>{A, lda, false}, Operand<double>{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

void gemm_nt(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  gemm_split(C, Operand<double>{A, lda, false}, Operand<double>{B, ldb, true}, M, N, K, ldc, alpha, beta);
}

void gemm_tn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  gemm_split(C, Operand<double>{A, lda, true}, Operand<double>{B, ldb, false}, M, N, K, ldc, alpha, beta);
}

void gemm_nt(double* C, const double* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  gemm_split(C, Operand<double>{A, lda, false}, Operand<float>{B, ldb, true}, M, N, K, ldc, alpha, beta);
}

void gemm_nn_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta) {
  gemm_split(C, Operand<float>{A, lda, false}, Operand<float>{B, ldb, false, true}, M, N, K, ldc, alpha, beta);
}

namespace {

#if defined(__wasm_relaxed_simd__)
// Ten chains c ← c·a + b of the fused multiply-add, independent of one another and of memory,
// `iterations` rounds: enough in flight to cover its latency on two pipes (4 cycles on AMD's Zen 3
// and 4), few enough for x64's 16 vector registers with a and b. c tends to b/(1 − a) = 0.1 (no
// subnormals). (A multiply and an add, unfused, would put both latencies on the chain, and a
// loop that keeps the multiply off the chain as the kernel does needs loads, which V8's code for
// such a loop made the bottleneck (22 GFLOP/s): so the plain build has no ceiling to offer.)
template <typename T>
T madd_chains(int iterations) {
  using S = Simd<T>;
  constexpr int chains = 10;
  v128_t c[chains];
  for (int i = 0; i < chains; ++i) c[i] = S::splat(T(i + 1));
  const v128_t a = S::splat(T(0.999999)), b = S::splat(T(1e-7));
  for (int it = 0; it < iterations; ++it) {
#pragma clang loop unroll(full)
    for (int i = 0; i < chains; ++i) c[i] = S::madd(c[i], a, b);
  }
  T sum = 0;
  for (const v128_t& v : c) {
    T lanes[S::lanes];
    wasm_v128_store(lanes, v);
    sum += lanes[0];
  }
  return sum;
}
#endif

}  // namespace

double simd_madd_gflops(bool in_double, int iterations) {
#if defined(__wasm_relaxed_simd__)
  if (iterations <= 0) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  const double sum = in_double ? madd_chains<double>(iterations) : double(madd_chains<float>(iterations));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!(sum > 0.0)) return 0.0;  // the chains' values are used, so the loop cannot be dropped
  const double lanes = in_double ? 2.0 : 4.0;
  return 2.0 * 10.0 * lanes * double(iterations) / seconds * 1e-9;
#else
  (void)in_double;
  (void)iterations;
  return 0.0;
#endif
}

void gemm_nt_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta) {
  gemm_split(C, Operand<float>{A, lda, false}, Operand<float>{B, ldb, true, true}, M, N, K, ldc, alpha, beta);
}

}  // namespace vitlens

#else  // native: Eigen's kernels on maps of the operands

#include "vitlens/tensor/tensor.h"

namespace vitlens {

namespace {

using Stride = Eigen::OuterStride<>;
template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMap = Eigen::Map<const RowMajor<T>, 0, Stride>;

// C (M, N) = alpha·ab + beta·C; beta = 0 does not read C.
template <typename T, typename Product>
void update(T* C, int M, int N, int ldc, const Product& ab, T alpha, T beta) {
  Eigen::Map<RowMajor<T>, 0, Stride> c(C, M, N, Stride(ldc));
  if (beta == T(0)) {
    c.noalias() = alpha * ab;
    return;
  }
  if (beta != T(1)) c *= beta;
  c.noalias() += alpha * ab;
}

template <typename T>
void nn(T* C, const T* A, const T* B, int M, int N, int K, int lda, int ldb, int ldc, T alpha, T beta) {
  update(C, M, N, ldc, ConstMap<T>(A, M, K, Stride(lda)) * ConstMap<T>(B, K, N, Stride(ldb)), alpha, beta);
}

template <typename T>
void nt(T* C, const T* A, const T* B, int M, int N, int K, int lda, int ldb, int ldc, T alpha, T beta) {
  update(C, M, N, ldc, ConstMap<T>(A, M, K, Stride(lda)) * ConstMap<T>(B, N, K, Stride(ldb)).transpose(), alpha,
         beta);
}

template <typename T>
void tn(T* C, const T* A, const T* B, int M, int N, int K, int lda, int ldb, int ldc, T alpha, T beta) {
  update(C, M, N, ldc, ConstMap<T>(A, K, M, Stride(lda)).transpose() * ConstMap<T>(B, K, N, Stride(ldb)), alpha,
         beta);
}

}  // namespace

void gemm_nn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  nn(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_nt(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  nt(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_tn(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, float alpha, float beta) {
  tn(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_nn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  nn(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_nt(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  nt(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_tn(double* C, const double* A, const double* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  tn(C, A, B, M, N, K, lda, ldb, ldc, alpha, beta);
}

void gemm_nt(double* C, const double* A, const float* B, int M, int N, int K, int lda, int ldb,
             int ldc, double alpha, double beta) {
  update(C, M, N, ldc,
         ConstMap<double>(A, M, K, Stride(lda)) * ConstMap<float>(B, N, K, Stride(ldb)).cast<double>().transpose(),
         alpha, beta);
}

void gemm_nn_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta) {
  update(C, M, N, ldc, ConstMap<float>(A, M, K, Stride(lda)) * ConstMap<float>(B, K, N, Stride(ldb)).cwiseAbs(), alpha,
         beta);
}

// Eigen packs its operands as it goes and its products are faster than a pre-packed wasm kernel
// would be: nothing to keep.
std::shared_ptr<const PackedWeight> pack_weight(const float*, int, int, WeightProduct) { return nullptr; }

void gemm_weight(float* C, const float* A, const float* W, int out, int in, WeightProduct product,
                 const WeightPacks*, int M, int lda, int ldc, float alpha, float beta) {
  switch (product) {
    case WeightProduct::times_wt: return gemm_nt(C, A, W, M, out, in, lda, in, ldc, alpha, beta);
    case WeightProduct::times_abs_wt: return gemm_nt_abs(C, A, W, M, out, in, lda, in, ldc, alpha, beta);
    case WeightProduct::times_w: return gemm_nn(C, A, W, M, in, out, lda, in, ldc, alpha, beta);
    case WeightProduct::times_abs_w: return gemm_nn_abs(C, A, W, M, in, out, lda, in, ldc, alpha, beta);
  }
}

void gemm_nt_abs(float* C, const float* A, const float* B, int M, int N, int K, int lda, int ldb,
                 int ldc, float alpha, float beta) {
  update(C, M, N, ldc,
         ConstMap<float>(A, M, K, Stride(lda)) * ConstMap<float>(B, N, K, Stride(ldb)).cwiseAbs().transpose(), alpha,
         beta);
}

}  // namespace vitlens

#endif

namespace vitlens {

const PackedWeight* WeightPacks::get(WeightProduct p) const {
  switch (p) {
    case WeightProduct::times_wt: return times_wt.get();
    case WeightProduct::times_abs_wt: return times_abs_wt.get();
    case WeightProduct::times_w: return times_w.get();
    case WeightProduct::times_abs_w: return times_abs_w.get();
  }
  return nullptr;
}

double gemm_warm_up(int rounds) {
  constexpr int n = 64;  // (n, n) operands: the three kernels' loops run long enough for V8
  const std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f);
  const std::vector<double> ad(size_t(n) * n, 0.5), bd(size_t(n) * n, 0.25);
  std::vector<float> c(size_t(n) * n);
  std::vector<double> cd(size_t(n) * n);
  double sum = 0.0;
  for (int r = 0; r < rounds; ++r) {
    gemm_nt(c.data(), a.data(), b.data(), n, n, n, n, n, n, 1.0f, 0.0f);
    sum += double(c[0]);
    gemm_nt(cd.data(), ad.data(), b.data(), n, n, n, n, n, n, 1.0, 0.0);
    sum += cd[0];
    gemm_nn(cd.data(), ad.data(), bd.data(), n, n, n, n, n, n, 1.0, 0.0);
    sum += cd[0];
  }
  return sum;
}

}  // namespace vitlens
