// activation.cpp — the MLP activations: the exact (erf) GELU, the tanh approximation and CLIP's
// quick GELU; forward and backward, the double-precision forward the LRP methods recompute (every
// activation passes relevance unchanged in their rule sets), and act(h)/h for the norm-based
// method's closed-form integrated gradients.
//
// The element-wise maps use Eigen's vectorised erf / tanh / exp (rational approximations accurate
// to a few ulp in float32), which keeps the MLP activation off the profile in wasm. They write
// straight into the output's storage: the activation is on every block's hot path, and a plain
// model (exact GELU) does exactly the work of the GELU-only layer this file replaced. In wasm the
// exact GELU's float forward and backward run Eigen's erf in SIMD128 loops of their own, with
// the same bits (gelu_values, gelu_grad_values).
#include "vitlens/layers/layers.h"  // first: vitlens/tensor.h configures Eigen for wasm

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "vitlens/tensor/exp.h"
#include "vitlens/tensor/normal_cdf.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/tiny.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>

// Eigen's float erf (generic_fast_erf_float, a rational approximation written once over any
// packet type) evaluated on a packet of our own: four floats in a v128_t whose operations are
// exactly those Eigen's SSE path performs in wasm (pmadd a multiply then an add: no FMA in
// SIMD128), except that min and max are wasm's pmin / pmax — the semantics of Eigen's SSE pmin /
// pmax, min(a, b) = b < a ? b : a, NaN included — where the translated _mm_min_ps /
// _mm_max_ps are a compare and a bitselect each. Same operations in the same order, so the same
// bits as Eigen's own `.erf()` (tests/native/test_layers.cpp, "[gelu]", runs in both wasm builds).
namespace vitlens {
namespace {
struct F32x4 {
  v128_t v;
};
}  // namespace
}  // namespace vitlens

namespace Eigen::internal {
using vitlens::F32x4;
template <>
struct unpacket_traits<F32x4> {
  typedef float type;
  typedef F32x4 half;
  enum { size = 4, alignment = Aligned16, vectorizable = true, masked_load_available = false, masked_store_available = false };
};
template <> EIGEN_STRONG_INLINE F32x4 pset1<F32x4>(const float& a) { return {wasm_f32x4_splat(a)}; }
template <> EIGEN_STRONG_INLINE F32x4 pmul<F32x4>(const F32x4& a, const F32x4& b) { return {wasm_f32x4_mul(a.v, b.v)}; }
template <> EIGEN_STRONG_INLINE F32x4 pdiv<F32x4>(const F32x4& a, const F32x4& b) { return {wasm_f32x4_div(a.v, b.v)}; }
template <>
EIGEN_STRONG_INLINE F32x4 pmadd<F32x4>(const F32x4& a, const F32x4& b, const F32x4& c) {
  return {wasm_f32x4_add(wasm_f32x4_mul(a.v, b.v), c.v)};
}
template <> EIGEN_STRONG_INLINE F32x4 pmin<F32x4>(const F32x4& a, const F32x4& b) { return {wasm_f32x4_pmin(a.v, b.v)}; }
template <> EIGEN_STRONG_INLINE F32x4 pmax<F32x4>(const F32x4& a, const F32x4& b) { return {wasm_f32x4_pmax(a.v, b.v)}; }
}  // namespace Eigen::internal
#endif

namespace vitlens {

namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCubic = 0.044715;
constexpr double kQuick = 1.702;

double gelu_d(double x) { return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2)); }
double gelu_tanh_d(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kTanhCubic * x * x * x)));
}
double quick_gelu_d(double x) { return x / (1.0 + std::exp(-kQuick * x)); }

double act_scalar(double x, Activation a) {
  switch (a) {
    case Activation::gelu: return gelu_d(x);
    case Activation::gelu_tanh: return gelu_tanh_d(x);
    case Activation::quick_gelu: return quick_gelu_d(x);
  }
  return x;
}

// y = f(x) element by element (the choice of f made once, outside the loop; f inlined, so the exact
// GELU's loop vectorises). Rows go in ranges of ≥ 2048 values over the compute pool (vitlens-mt.js;
// the shipped model's 65 × 192 splits in two).
template <typename F>
void map_elements(MatD& y, const MatD& x, F f) {
  y.resize(x.rows(), x.cols());
  const int grain = std::max<int>(1, int(2048 / std::max<Eigen::Index>(x.cols(), 1)));
  parallel_ranges(int(x.rows()), grain, [&](int begin, int end) {
    const Eigen::Index off = Eigen::Index(begin) * x.cols(), count = Eigen::Index(end - begin) * x.cols();
    const double* src = x.data() + off;
    double* dst = y.data() + off;
    for (Eigen::Index i = 0; i < count; ++i) dst[i] = f(src[i]);
  });
}

// y = act(x) elementwise (Eigen's vectorised erf / tanh / exp). y and x are float arrays of one
// shape (expressions over a Mat's storage, or 1×1 arrays); y may be x.
template <typename Y, typename X>
void act_value(Y&& y, const X& x, Activation a) {
  switch (a) {
    case Activation::gelu: y = 0.5f * x * (1.0f + (x * float(kInvSqrt2)).erf()); return;
    case Activation::gelu_tanh:
      y = 0.5f * x * (1.0f + (float(kSqrt2OverPi) * (x + float(kTanhCubic) * x.cube())).tanh());
      return;
    case Activation::quick_gelu: y = x / (1.0f + (float(-kQuick) * x).exp()); return;
  }
}

// dx = dy ⊙ act′(x): gelu′ = Φ(x) + x·φ(x); gelu_tanh′ = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3c·x²)
// with t = tanh(√(2/π)(x + c·x³)); quick′ = σ(kx) + kx·σ(kx)(1 − σ(kx)). The tanh and the
// sigmoid, read twice, go to dx first and are then overwritten element by element, so dx must
// not be dy or x.
template <typename DX, typename DY, typename X>
void act_grad(DX&& dx, const DY& dy, const X& x, Activation a) {
  switch (a) {
    case Activation::gelu:
      dx = dy * (0.5f * (1.0f + (x * float(kInvSqrt2)).erf()) +
                 x * float(kInvSqrt2Pi) * (-0.5f * x.square()).exp());
      return;
    case Activation::gelu_tanh:
      dx = (float(kSqrt2OverPi) * (x + float(kTanhCubic) * x.cube())).tanh();  // t
      dx = dy * (0.5f * (1.0f + dx) + 0.5f * x * (1.0f - dx.square()) * float(kSqrt2OverPi) *
                                          (1.0f + float(3 * kTanhCubic) * x.square()));
      return;
    case Activation::quick_gelu:
      dx = 1.0f / (1.0f + (float(-kQuick) * x).exp());  // σ(kx)
      dx = dy * (dx + float(kQuick) * x * dx * (1.0f - dx));
      return;
  }
}

using Arr1 = Eigen::Array<float, 1, 1>;  // one value, on the stack

}  // namespace

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * float(kInvSqrt2))); }

float gelu_grad(float x) {
  return 0.5f * (1.0f + std::erf(x * float(kInvSqrt2))) +
         x * float(kInvSqrt2Pi) * std::exp(-0.5f * x * x);
}

float activation(float x, Activation a) {
  Arr1 y;
  act_value(y, Arr1::Constant(x), a);
  return y(0, 0);
}

float activation_grad(float x, Activation a) {
  Arr1 g;
  act_grad(g, Arr1::Ones(), Arr1::Constant(x), a);
  return g(0, 0);
}

// Both over row ranges in parallel (vitlens-mt.js: parallel.h) when there are enough rows of at
// least 32 k values each (DeiT-tiny's hidden layer: 197 × 768); waking a worker for less costs
// more than it saves (the shipped model's 65 × 256).
namespace {
int activation_grain(const Mat& x) { return std::max<int>(16, int(32768 / std::max<Eigen::Index>(x.cols(), 1))); }

using Values = Eigen::Array<float, 1, Eigen::Dynamic>;  // contiguous values seen as an array

// g[i] = dy[i]·(Φ(x) + x·φ(x)) over contiguous values: Φ = ½(1 + erf(x/√2)) with Eigen's vectorised
// erf, then φ(x) = e^(−x²/2)/√(2π) with exp_nonpositive in a plain loop (vectorised; in wasm
// faster than Eigen's exp, see exp.h). The slope below 2⁻⁶⁴ (x < −9.2) is set to 0 before it meets
// dy, whose product with it would be subnormal, and so is that product (tensor/tiny.h). g may not
// be dy or x.
void gelu_grad_eigen(float* g, const float* dy, const float* x, Eigen::Index count) {
  Eigen::Map<Values>(g, count) = 0.5f * (1.0f + (Eigen::Map<const Values>(x, count) * float(kInvSqrt2)).erf());
  for (Eigen::Index i = 0; i < count; ++i)
    g[i] = flush_tiny(dy[i] * flush_tiny(g[i] + x[i] * float(kInvSqrt2Pi) * exp_nonpositive(-0.5f * x[i] * x[i])));
}

}  // namespace

#if defined(__wasm_simd128__)
namespace {

v128_t erf_f32x4(v128_t x) { return Eigen::internal::generic_fast_erf_float(F32x4{x}).v; }

// The exact GELU's forward and backward over contiguous values, eight an iteration (two
// independent erf chains: V8 does not overlap a loop's iterations as well), in the operations
// and order of the Eigen expressions of act_value / gelu_grad_eigen, so with their bits; the
// last count % 8 values through those expressions themselves. Measured on the GELU alone (node
// 20, Zen 3, 197 × 768 values): 2.0 ns a value in the Eigen expression's loop, 1.55 with Eigen's
// packet erf in this loop, 1.3 with pmin / pmax as well; a new input's forward pass 0.96× (the
// shipped model) and 0.94–0.95× (DeiT-tiny), docs/performance.md (2026-11-29, 19:00).
// y[i] = ½x·(1 + erf(x/√2)); y may be x.
void gelu_values(float* y, const float* x, Eigen::Index count) {
  const v128_t c = wasm_f32x4_splat(float(kInvSqrt2)), half = wasm_f32x4_splat(0.5f), one = wasm_f32x4_splat(1.0f);
  auto gelu4 = [&](v128_t v) {
    return wasm_f32x4_mul(wasm_f32x4_mul(half, v), wasm_f32x4_add(one, erf_f32x4(wasm_f32x4_mul(v, c))));
  };
  Eigen::Index i = 0;
  for (; i + 8 <= count; i += 8) {
    const v128_t v0 = wasm_v128_load(x + i), v1 = wasm_v128_load(x + i + 4);
    wasm_v128_store(y + i, gelu4(v0));
    wasm_v128_store(y + i + 4, gelu4(v1));
  }
  act_value(Eigen::Map<Values>(y + i, count - i), Eigen::Map<const Values>(x + i, count - i), Activation::gelu);
}

// gelu_grad_eigen's g[i] = dy[i]·(Φ(x) + x·φ(x)), both flushes included.
void gelu_grad_values(float* g, const float* dy, const float* x, Eigen::Index count) {
  const v128_t c = wasm_f32x4_splat(float(kInvSqrt2)), half = wasm_f32x4_splat(0.5f), one = wasm_f32x4_splat(1.0f);
  const v128_t minus_half = wasm_f32x4_splat(-0.5f), k = wasm_f32x4_splat(float(kInvSqrt2Pi));
  const v128_t tiny = wasm_f32x4_splat(float(kTiny));
  auto grad4 = [&](v128_t d, v128_t v) {
    const v128_t phi = wasm_f32x4_mul(half, wasm_f32x4_add(one, erf_f32x4(wasm_f32x4_mul(v, c))));
    const v128_t e = exp_nonpositive_f32x4(wasm_f32x4_mul(wasm_f32x4_mul(minus_half, v), v));
    // flush_tiny of the slope and of the product: kept where |·| ≥ 2⁻⁶⁴ or NaN (the compare's
    // complement), as the scalar form
    const auto flush = [&](v128_t a) { return wasm_v128_andnot(a, wasm_f32x4_lt(wasm_f32x4_abs(a), tiny)); };
    const v128_t slope = wasm_f32x4_add(phi, wasm_f32x4_mul(wasm_f32x4_mul(v, k), e));
    return flush(wasm_f32x4_mul(d, flush(slope)));
  };
  Eigen::Index i = 0;
  for (; i + 8 <= count; i += 8) {
    const v128_t v0 = wasm_v128_load(x + i), v1 = wasm_v128_load(x + i + 4);
    const v128_t d0 = wasm_v128_load(dy + i), d1 = wasm_v128_load(dy + i + 4);
    wasm_v128_store(g + i, grad4(d0, v0));
    wasm_v128_store(g + i + 4, grad4(d1, v1));
  }
  gelu_grad_eigen(g + i, dy + i, x + i, count - i);
}

}  // namespace
#endif

void activation_forward(Mat& y, const Mat& x, Activation a) {
  y.resize(x.rows(), x.cols());
  parallel_ranges(int(x.rows()), activation_grain(x), [&](int begin, int end) {
#if defined(__wasm_simd128__)
    if (a == Activation::gelu) {
      const Eigen::Index off = Eigen::Index(begin) * x.cols();
      gelu_values(y.data() + off, x.data() + off, Eigen::Index(end - begin) * x.cols());
      return;
    }
#endif
    act_value(y.middleRows(begin, end - begin).array(), x.middleRows(begin, end - begin).array(), a);
  });
}

// dx below 2⁻⁶⁴ is set to 0 (tensor/tiny.h): far below zero the GELUs' slopes are tiny but normal
// (x·φ(x) ≈ −9e-38 at x = −13), and times a gradient they would be subnormal operands of the
// backward's next product (the exact GELU flushes in its loop, the others after it).
void activation_backward(Mat& dx, const Mat& dy, const Mat& x, Activation a) {
  assert(&dx != &dy && &dx != &x);
  dx.resize(x.rows(), x.cols());
  parallel_ranges(int(x.rows()), activation_grain(x), [&](int begin, int end) {
    const Eigen::Index off = Eigen::Index(begin) * x.cols(), count = Eigen::Index(end - begin) * x.cols();
    if (a != Activation::gelu) {
      act_grad(dx.middleRows(begin, end - begin).array(), dy.middleRows(begin, end - begin).array(),
               x.middleRows(begin, end - begin).array(), a);
      flush_tiny(dx.data() + off, count);
    } else {
      // gelu′ = Φ(x) + x·φ(x) over the rows' contiguous storage; in wasm in one SIMD128 loop, the
      // same bits.
#if defined(__wasm_simd128__)
      gelu_grad_values(dx.data() + off, dy.data() + off, x.data() + off, count);
#else
      gelu_grad_eigen(dx.data() + off, dy.data() + off, x.data() + off, count);
#endif
    }
  });
}

// In double element by element (the relevance pass's forward). The exact GELU as x·Φ(x) with
// normal_cdf, whose loop vectorises (10.5 against 15–21 ns a value in wasm for the C library's
// erf in gelu_d; within 1.8e-16 of max(1, |x|) of a long double erfc, test_normal_cdf.cpp); gelu_d
// stays for single values (activation_ratio), where the C library's erf is the faster. The others
// with the C library's tanh / exp.
void activation_forward(MatD& y, const MatD& x, Activation a) {
  switch (a) {
    case Activation::gelu: map_elements(y, x, [](double v) { return v * normal_cdf(v); }); return;
    case Activation::gelu_tanh: map_elements(y, x, [](double v) { return gelu_tanh_d(v); }); return;
    case Activation::quick_gelu: map_elements(y, x, [](double v) { return quick_gelu_d(v); }); return;
  }
}

// act(h)/h, with its limit act′(0) = ½ (all three) where |h| < 1e-12.
double activation_ratio(double h, Activation a) {
  return std::abs(h) < 1e-12 ? 0.5 : act_scalar(h, a) / h;
}

void gelu_forward(Mat& y, const Mat& x) { activation_forward(y, x, Activation::gelu); }
void gelu_forward(MatD& y, const MatD& x) { activation_forward(y, x, Activation::gelu); }
void gelu_backward(Mat& dx, const Mat& dy, const Mat& x) {
  activation_backward(dx, dy, x, Activation::gelu);
}

}  // namespace vitlens
