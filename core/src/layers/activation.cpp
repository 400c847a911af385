// activation.cpp — the MLP activations: the exact (erf) GELU, the tanh approximation and CLIP's
// quick GELU; forward and backward, the double-precision forward the LRP methods recompute (every
// activation passes relevance unchanged in their rule sets), and act(h)/h for the norm-based
// method's closed-form integrated gradients.
//
// The element-wise maps use Eigen's vectorised erf / tanh / exp (rational approximations accurate
// to a few ulp in float32), which keeps the MLP activation off the profile in wasm.
#include "vitlens/layers/layers.h"  // first: vitlens/tensor.h configures Eigen for wasm

#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

namespace vitlens {

namespace {
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCubic = 0.044715;
constexpr double kQuick = 1.702;

double act_scalar(double x, Activation a) {
  switch (a) {
    case Activation::gelu: return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
    case Activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kTanhCubic * x * x * x)));
    case Activation::quick_gelu: return x / (1.0 + std::exp(-kQuick * x));
  }
  return x;
}

}  // namespace

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * float(kInvSqrt2))); }

float gelu_grad(float x) {
  return 0.5f * (1.0f + std::erf(x * float(kInvSqrt2))) +
         x * float(kInvSqrt2Pi) * std::exp(-0.5f * x * x);
}

namespace {

using ArrF = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// act(x) elementwise (Eigen's vectorised erf / tanh / exp).
void act_value(ArrF& y, const ArrF& x, Activation a) {
  switch (a) {
    case Activation::gelu: y = 0.5f * x * (1.0f + (x * float(kInvSqrt2)).erf()); return;
    case Activation::gelu_tanh:
      y = 0.5f * x * (1.0f + (float(kSqrt2OverPi) * (x + float(kTanhCubic) * x.cube())).tanh());
      return;
    case Activation::quick_gelu: y = x / (1.0f + (float(-kQuick) * x).exp()); return;
  }
}

// act′(x): gelu′ = Φ(x) + x·φ(x); gelu_tanh′ = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3c·x²) with
// t = tanh(√(2/π)(x + c·x³)); quick′ = σ(kx) + kx·σ(kx)(1 − σ(kx)).
void act_grad(ArrF& g, const ArrF& x, Activation a) {
  switch (a) {
    case Activation::gelu:
      g = 0.5f * (1.0f + (x * float(kInvSqrt2)).erf()) + x * float(kInvSqrt2Pi) * (-0.5f * x.square()).exp();
      return;
    case Activation::gelu_tanh: {
      const ArrF t = (float(kSqrt2OverPi) * (x + float(kTanhCubic) * x.cube())).tanh();
      g = 0.5f * (1.0f + t) +
          0.5f * x * (1.0f - t.square()) * float(kSqrt2OverPi) * (1.0f + float(3 * kTanhCubic) * x.square());
      return;
    }
    case Activation::quick_gelu: {
      const ArrF sg = 1.0f / (1.0f + (float(-kQuick) * x).exp());
      g = sg + float(kQuick) * x * sg * (1.0f - sg);
      return;
    }
  }
}

}  // namespace

float activation(float x, Activation a) {
  ArrF v = ArrF::Constant(1, 1, x), y;
  act_value(y, v, a);
  return y(0, 0);
}

float activation_grad(float x, Activation a) {
  ArrF v = ArrF::Constant(1, 1, x), g;
  act_grad(g, v, a);
  return g(0, 0);
}

void activation_forward(Mat& y, const Mat& x, Activation a) {
  ArrF out;
  act_value(out, x.array(), a);
  y = out.matrix();
}

void activation_backward(Mat& dx, const Mat& dy, const Mat& x, Activation a) {
  ArrF g;
  act_grad(g, x.array(), a);
  dx = (dy.array() * g).matrix();
}

// In double with the C library's erf / tanh / exp, element by element (the relevance pass's forward).
void activation_forward(MatD& y, const MatD& x, Activation a) {
  y.resize(x.rows(), x.cols());
  const double* src = x.data();
  double* dst = y.data();
  for (Eigen::Index i = 0; i < x.size(); ++i) dst[i] = act_scalar(src[i], a);
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
