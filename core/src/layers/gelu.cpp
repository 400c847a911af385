// gelu.cpp — the exact (erf) GELU: forward and backward, and the double-precision forward the LRP
// methods recompute (GELU passes relevance unchanged in their rule sets).
//
// The element-wise maps use Eigen's vectorised erf/exp (a rational approximation accurate to a
// few ulp in float32), which keeps the MLP activation off the profile in wasm.
#include "vitlens/layers/layers.h"  // first: vitlens/tensor.h configures Eigen for wasm

#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

namespace vitlens {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }

// d/dx x·Φ(x) = Φ(x) + x·φ(x)
float gelu_grad(float x) {
  return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
}

void gelu_forward(Mat& y, const Mat& x) {
  y.resize(x.rows(), x.cols());
  y.array() = 0.5f * x.array() * (1.0f + (x.array() * kInvSqrt2).erf());
}

void gelu_backward(Mat& dx, const Mat& dy, const Mat& x) {
  dx.resize(x.rows(), x.cols());
  dx.array() = dy.array() * (0.5f * (1.0f + (x.array() * kInvSqrt2).erf()) +
                             x.array() * kInvSqrt2Pi * (-0.5f * x.array().square()).exp());
}

void gelu_forward(MatD& y, const MatD& x) {
  y.resize(x.rows(), x.cols());
  const double* src = x.data();
  double* dst = y.data();
  for (Eigen::Index i = 0; i < x.size(); ++i)
    dst[i] = 0.5 * src[i] * (1.0 + std::erf(src[i] * 0.70710678118654752440));
}

}  // namespace vitlens
