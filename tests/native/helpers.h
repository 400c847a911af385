// helpers.h — shared test utilities: fixture paths, .npy comparison, gradient checking.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "vitlens/io/io.h"
#include "vitlens/io/npy.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/config.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens::test {

inline std::string source_path(const std::string& rel) { return std::string(VITLENS_SOURCE_DIR) + "/" + rel; }
inline std::string binary_path(const std::string& rel) { return std::string(VITLENS_BINARY_DIR) + "/" + rel; }

// A tag of this process's own for the files and folders a test writes: `ctest -j` runs the suites
// of a build directory at once (wasm_catch2 and wasm_catch2_relaxed, the same tests), and without
// it they wrote and read each other's files.
inline const std::string& process_tag() {
  static const std::string tag = std::to_string(std::random_device{}());
  return tag;
}

// A file a test writes, in the build directory under a name tagged by process_tag; removed when it
// goes out of scope.
struct ScratchFile {
  explicit ScratchFile(const std::string& name) : path(binary_path("scratch_" + process_tag() + "_" + name)) {}
  ~ScratchFile() { std::remove(path.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  std::string path;
};

// max |a − b| / max |b| over the arrays (b is the reference).
template <typename A>
double rel_max_error(const A& a, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

// Deterministic pseudo-random fill in [-a, a].
inline void fill_random(float* p, size_t n, uint64_t seed, float a = 1.0f) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = a * (float(double(s >> 40) / 16777216.0) * 2.0f - 1.0f);
  }
}

// A (rows, cols) matrix or an n-vector of fill_random values.
inline Mat random_mat(int rows, int cols, uint64_t seed, float a = 1.0f) {
  Mat m(rows, cols);
  fill_random(m.data(), size_t(m.size()), seed, a);
  return m;
}
inline Vec random_vec(int n, uint64_t seed, float a = 1.0f) {
  Vec v(n);
  fill_random(v.data(), size_t(v.size()), seed, a);
  return v;
}

// Directional-derivative check: for a few random directions u, compares
// (f(x + h·u) − f(x − h·u)) / 2h with ⟨grad, u⟩. Returns the worst relative error.
inline double check_directional(const std::function<double()>& f, float* x, size_t n, const float* grad,
                                uint64_t seed, float h = 1e-2f, int dirs = 4) {
  double worst = 0.0;
  std::vector<float> u(n), x0(x, x + n);
  for (int k = 0; k < dirs; ++k) {
    fill_random(u.data(), n, seed + uint64_t(k));
    double analytic = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; ++i) {
      analytic += double(grad[i]) * u[i];
      norm += std::fabs(double(grad[i]) * u[i]);
    }
    for (size_t i = 0; i < n; ++i) x[i] = x0[i] + h * u[i];
    const double fp = f();
    for (size_t i = 0; i < n; ++i) x[i] = x0[i] - h * u[i];
    const double fm = f();
    for (size_t i = 0; i < n; ++i) x[i] = x0[i];
    const double numeric = (fp - fm) / (2.0 * h);
    worst = std::max(worst, std::fabs(numeric - analytic) / std::max(norm, 1e-6));
  }
  return worst;
}

// The float64 reference's test models (tests/fixtures/engine/NAME/: a timm checkpoint, its
// config and the input it was traced on), shared by the method tests.
inline Model engine_fixture_model(const std::string& name) {
  const std::string dir = source_path("tests/fixtures/engine/" + name + "/");
  const std::vector<uint8_t> cfg = read_file(dir + "config.json", 1 << 20);
  const std::vector<uint8_t> bytes = read_file(dir + "model_timm.safetensors", 1 << 26);
  return import_checkpoint(bytes.data(), bytes.size(), std::string(cfg.begin(), cfg.end()), nullptr);
}

inline Image engine_fixture_input(const std::string& name) {
  const NpyArray x = read_npy(source_path("tests/fixtures/engine/" + name + "/input.npy"));
  Image img(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) img.data[i] = float(x.data[i]);
  return img;
}

// A small ViT (16×24 input, patch 8: a 2 × 3 grid; blocks of 2 heads, width 16, 4 classes) for
// tests that run a model of no particular shape.
inline Config small_vit_config(int depth = 2, int channels = 3) {
  Config c;
  c.image_h = 16;
  c.image_w = 24;
  c.channels = channels;
  c.patch = 8;
  c.dim = 16;
  c.depth = depth;
  c.heads = 2;
  c.mlp_dim = 32;
  c.classes = 4;
  fill_config_defaults(c);
  return c;
}

// The pixel map of `method` for class `cls` on x as the benchmark makes it (eval.cpp): explain with
// one thread, the token map upsampled unless the method gives a pixel map.
inline Mat eval_pixel_map(const Model& m, const Image& x, const std::string& method, int cls) {
  MethodOptions o;
  o.target = cls;
  o.threads = 1;
  Explanation e = explain(m, x, method, o);
  if (e.pixel_map.rows() == m.config.image_h && e.pixel_map.cols() == m.config.image_w) return e.pixel_map;
  return upsample_bilinear(e.token_map, m.config.image_h, m.config.image_w);
}

}  // namespace vitlens::test
