// activation.cpp — the MLP activations: the exact (erf) GELU, the tanh approximation and CLIP's
// quick GELU; forward and backward, the double-precision forward the LRP methods recompute (every
// activation passes relevance unchanged in their rule sets), and act(h)/h for the norm-based
// method's closed-form integrated gradients.
//
// The element-wise maps use Eigen's vectorised erf / tanh / exp (rational approximations accurate
// to a few ulp in float32), which keeps the MLP activation off the profile in wasm. They write
// straight into the output's storage: the activation is on every block's hot path, and a plain
// model (exact GELU) does exactly the work of the GELU-only layer this file replaced.
#include "vitlens/layers/layers.h"  // first: vitlens/tensor.h configures Eigen for wasm

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "vitlens/tensor/exp.h"
#include "vitlens/tensor/normal_cdf.h"
#include "vitlens/tensor/parallel.h"

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
}  // namespace

void activation_forward(Mat& y, const Mat& x, Activation a) {
  y.resize(x.rows(), x.cols());
  parallel_ranges(int(x.rows()), activation_grain(x), [&](int begin, int end) {
    act_value(y.middleRows(begin, end - begin).array(), x.middleRows(begin, end - begin).array(), a);
  });
}

void activation_backward(Mat& dx, const Mat& dy, const Mat& x, Activation a) {
  assert(&dx != &dy && &dx != &x);
  dx.resize(x.rows(), x.cols());
  parallel_ranges(int(x.rows()), activation_grain(x), [&](int begin, int end) {
    if (a != Activation::gelu) {
      act_grad(dx.middleRows(begin, end - begin).array(), dy.middleRows(begin, end - begin).array(),
               x.middleRows(begin, end - begin).array(), a);
      return;
    }
    // gelu′ = Φ(x) + x·φ(x): Φ with Eigen's vectorised erf, then e^(−x²/2) ≤ 1 with
    // exp_nonpositive in a plain loop over the rows' contiguous storage (vectorised; in wasm
    // faster than Eigen's exp, see exp.h).
    dx.middleRows(begin, end - begin).array() = 0.5f * (1.0f + (x.middleRows(begin, end - begin).array() * float(kInvSqrt2)).erf());
    const Eigen::Index off = Eigen::Index(begin) * x.cols(), count = Eigen::Index(end - begin) * x.cols();
    float* g = dx.data() + off;
    const float* xs = x.data() + off;
    const float* ds = dy.data() + off;
    for (Eigen::Index i = 0; i < count; ++i)
      g[i] = ds[i] * (g[i] + xs[i] * float(kInvSqrt2Pi) * exp_nonpositive(-0.5f * xs[i] * xs[i]));
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
