// tiny.h — the magnitude below which a value is set to 0 where it is formed for float products:
// the softmax's probabilities and its backward's dS, the activations' gradients and the relevance
// rules' float operands.
//
// Why: x86 cores without flush-to-zero (wasm never sets it, and the native build keeps IEEE
// semantics) take every operation with a subnormal float (< 2⁻¹²⁶ ≈ 1.2e-38) through microcode.
// ViTs with peaked heads or wide MLP pre-activations make such values — e⁻⁸⁷/Σ in a softmax row,
// x·φ(x) of a GELU at x < −13 times a gradient — and a product then meets them on every use: on an
// Intel Xeon (model 207) a DeiT-tiny with such heads or MLPs took up to 11× as long for
// grad-rollout and 3.3× for lrp (docs/performance.md, 2026-12-02). The bound is 2⁻⁶⁴ rather than
// the smallest normal float so that a value kept can still be multiplied by a weight, a gradient
// or a relevance quotient (~60 binary orders of room) without underflowing in the product; what
// is dropped is below anything a float map or the parity tests against float64 resolve (a softmax
// row's sum moves by ≤ n·2⁻⁶⁴).
#pragma once

#include <cmath>
#include <cstddef>

namespace vitlens {

constexpr double kTiny = 5.421010862427522e-20;  // 2⁻⁶⁴

// x, or 0 if |x| < 2⁻⁶⁴
template <typename T>
inline T flush_tiny(T x) {
  return std::fabs(x) < T(kTiny) ? T(0) : x;
}

// x rounded to float, 0 if that is below 2⁻⁶⁴ in magnitude: the relevance rules' double values
// entering float products (compared after the rounding, in float, so that loops over it vectorise)
inline float to_float_flushed(double x) { return flush_tiny(float(x)); }

// flush_tiny over n contiguous values (vectorised: a compare and a select)
template <typename T>
inline void flush_tiny(T* v, std::ptrdiff_t n) {
  for (std::ptrdiff_t i = 0; i < n; ++i) v[i] = flush_tiny(v[i]);
}

}  // namespace vitlens
