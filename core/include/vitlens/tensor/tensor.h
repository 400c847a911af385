// tensor.h — the array types the engine computes with.
//
// Token matrices are row-major (n, d): one row per token, as in the papers' notation.
// Linear weights keep PyTorch's (out, in) layout so that their names and shapes match the
// checkpoint keys they come from.
#pragma once

#if defined(__EMSCRIPTEN__)
// Eigen has no WebAssembly backend; built with -msse4.2 its SSE path is translated to SIMD128.
// For clang, Eigen reports GCC 4.2 and then uses inline x86 asm in pmin/pmax as a GCC < 6.3 bug
// workaround, which wasm cannot take. Claim a newer GCC level before the rest of Eigen reads it.
#include <Eigen/src/Core/util/Macros.h>
#undef EIGEN_COMP_GNUC
#define EIGEN_COMP_GNUC 70
#endif
#include <Eigen/Dense>
#include <cstddef>
#include <vector>

namespace vitlens {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXf;
using VecD = Eigen::VectorXd;

// A C×H×W image tensor (row-major planes), already normalised unless stated otherwise.
struct Image {
  int c = 0, h = 0, w = 0;
  std::vector<float> data;  // (c, h, w)

  Image() = default;
  Image(int c_, int h_, int w_) : c(c_), h(h_), w(w_), data(size_t(c_) * h_ * w_, 0.0f) {}
  float& at(int ch, int y, int x) { return data[(size_t(ch) * h + y) * w + x]; }
  float at(int ch, int y, int x) const { return data[(size_t(ch) * h + y) * w + x]; }
};

}  // namespace vitlens
