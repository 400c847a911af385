// test_layers.cpp — each layer's backward pass against central differences, and the GELU's values
// against the expressions that define them.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "helpers.h"
#include "vitlens/layers/layers.h"  // before Eigen's own headers: vitlens/tensor.h configures Eigen for wasm
#include "vitlens/tensor/exp.h"
#include <unsupported/Eigen/SpecialFunctions>

using namespace vitlens;
using vitlens::test::check_directional;
using vitlens::test::fill_random;
using vitlens::test::random_mat;
using vitlens::test::random_vec;

namespace {

double dot(const Mat& a, const Mat& b) { return (a.cast<double>().array() * b.cast<double>().array()).sum(); }

}  // namespace

TEST_CASE("linear backward matches central differences", "[layers]") {
  Mat x = random_mat(5, 7, 1), W = random_mat(4, 7, 2);
  Vec b = random_vec(4, 3);
  const Mat R = random_mat(5, 4, 4);  // L = Σ R ⊙ y
  auto loss = [&] {
    Mat y;
    linear_forward(y, x, W, b);
    return dot(y, R);
  };
  Mat dx, dW = Mat::Zero(4, 7);
  Vec db = Vec::Zero(4);
  linear_backward(&dx, &dW, &db, R, x, W);
  CHECK(check_directional(loss, x.data(), size_t(x.size()), dx.data(), 10) < 1e-3);
  CHECK(check_directional(loss, W.data(), size_t(W.size()), dW.data(), 11) < 1e-3);
  CHECK(check_directional(loss, b.data(), size_t(b.size()), db.data(), 12) < 1e-3);
}

TEST_CASE("layernorm backward matches central differences", "[layers]") {
  Mat x = random_mat(6, 16, 5, 2.0f);
  Vec w = random_vec(16, 6), b = random_vec(16, 7);
  const Mat R = random_mat(6, 16, 8);
  auto loss = [&] {
    Mat y;
    Vec mu, rs;
    layernorm_forward(y, mu, rs, x, w, b, 1e-6f);
    return dot(y, R);
  };
  Mat y, dx;
  Vec mu, rs, dw = Vec::Zero(16), db = Vec::Zero(16);
  layernorm_forward(y, mu, rs, x, w, b, 1e-6f);
  // each output row has mean b̄ + (x̂·w) terms; check the normalisation itself
  Mat xhat = (y.rowwise() - b.transpose()).array().rowwise() / w.transpose().array();
  CHECK(std::fabs(xhat.row(0).mean()) < 1e-5);
  CHECK(std::fabs((xhat.row(0).array().square().mean()) - 1.0f) < 1e-4);
  layernorm_backward(dx, &dw, &db, R, x, mu, rs, w);
  CHECK(check_directional(loss, x.data(), size_t(x.size()), dx.data(), 20, 1e-2f) < 2e-3);
  CHECK(check_directional(loss, w.data(), size_t(w.size()), dw.data(), 21) < 1e-3);
  CHECK(check_directional(loss, b.data(), size_t(b.size()), db.data(), 22) < 1e-3);
}

TEST_CASE("GELU is the exact erf GELU and its backward matches central differences", "[layers]") {
  CHECK(gelu(0.0f) == 0.0f);
  CHECK(gelu(1.0f) == Approx(0.8413447460685429).epsilon(1e-6));    // Φ(1)
  CHECK(gelu(-2.0f) == Approx(-0.04550026389635842).epsilon(1e-5));  // −2·Φ(−2)
  Mat x = random_mat(3, 50, 30, 4.0f), y;
  gelu_forward(y, x);
  for (Eigen::Index i = 0; i < x.size(); ++i) CHECK(y.data()[i] == Approx(gelu(x.data()[i])).margin(2e-6));
  const Mat R = random_mat(3, 50, 31);
  auto loss = [&] {
    Mat out;
    gelu_forward(out, x);
    return dot(out, R);
  };
  Mat dx;
  gelu_backward(dx, R, x);
  CHECK(check_directional(loss, x.data(), size_t(x.size()), dx.data(), 32, 1e-2f) < 1e-3);
  CHECK(gelu_grad(0.0f) == Approx(0.5f));
  // Element by element against Φ(x) + x·φ(x) in double, over [−15, 15] (e^(−x²/2) below e⁻⁸⁷
  // beyond |x| ≈ 13.2, where exp_nonpositive clamps) and with a factor dy per element.
  Mat xs(7, 301), dys(7, 301), g;
  for (Eigen::Index i = 0; i < xs.size(); ++i) {
    xs.data()[i] = -15.0f + 30.0f * float(i) / float(xs.size() - 1);
    dys.data()[i] = 1.0f + 0.5f * std::sin(float(i));
  }
  gelu_backward(g, dys, xs);
  double worst = 0.0;
  for (Eigen::Index i = 0; i < xs.size(); ++i) {
    const double v = xs.data()[i];
    const double ref = double(dys.data()[i]) * (0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846));
    worst = std::max(worst, std::fabs(double(g.data()[i]) - ref) / std::max(1.0, std::fabs(ref)));
  }
  CHECK(worst < 2e-6);
}

TEST_CASE("GELU forward and backward: the values of Eigen's erf expressions, bit for bit", "[layers][gelu]") {
  // The definitions the layers compute: ½x·(1 + erf(x/√2)) with Eigen's vectorised float erf, and
  // dy·(Φ(x) + x·φ(x)) with Φ from the same erf and φ from exp_nonpositive (activation.cpp). In
  // wasm the layer runs them in its own SIMD128 loops (eight values an iteration, then the
  // scalar rest): every length 0–19 (loop bodies and tails) and a long one, values on both sides
  // of erf's clamp at ±4, zeros, tiny and huge values; in place too. Compared with the bits of
  // the same expressions evaluated element by element here (one 1×1 array each).
  const float kInvSqrt2 = 0.70710678118654752440f, kInvSqrt2Pi = 0.39894228040143267794f;
  auto gelu_ref = [&](float v) {
    Eigen::Array<float, 1, 1> a = Eigen::Array<float, 1, 1>::Constant(v), y;
    y = 0.5f * a * (1.0f + (a * kInvSqrt2).erf());
    return y(0, 0);
  };
  auto grad_ref = [&](float d, float v) {
    Eigen::Array<float, 1, 1> a = Eigen::Array<float, 1, 1>::Constant(v), phi;
    phi = 0.5f * (1.0f + (a * kInvSqrt2).erf());
    return d * (phi(0, 0) + v * kInvSqrt2Pi * exp_nonpositive(-0.5f * v * v));
  };
  const float special[] = {0.0f, -0.0f, 4.0f, -4.0f, 3.9999998f, -4.0000005f, 1e-30f, -1e-30f, 1e30f, -1e30f, 9.0f, -9.0f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  for (int n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1037}) {
    Mat x(1, n), dy(1, n), y, g;
    for (int j = 0; j < n; ++j) {
      x(0, j) = j % 3 == 1 ? special[size_t(n + j) % 12] : u(rng);
      dy(0, j) = 0.5f + u(rng);
    }
    gelu_forward(y, x);
    gelu_backward(g, dy, x);
    int forward_diff = 0, backward_diff = 0;
    for (int j = 0; j < n; ++j) {
      forward_diff += !same(y(0, j), gelu_ref(x(0, j)));
      backward_diff += !same(g(0, j), grad_ref(dy(0, j), x(0, j)));
    }
    Mat in_place = x;
    gelu_forward(in_place, in_place);
    int in_place_diff = 0;
    for (int j = 0; j < n; ++j) in_place_diff += !same(in_place(0, j), y(0, j));
    INFO("n = " << n);
    CHECK(forward_diff == 0);
    CHECK(backward_diff == 0);
    CHECK(in_place_diff == 0);
  }
}

TEST_CASE("softmax rows sum to one and backward matches central differences", "[layers]") {
  Mat s = random_mat(4, 9, 40, 3.0f), p;
  softmax_rows(p, s);
  for (int i = 0; i < 4; ++i) CHECK(p.row(i).sum() == Approx(1.0f).epsilon(1e-6));
  const Mat R = random_mat(4, 9, 41);
  auto loss = [&] {
    Mat out;
    softmax_rows(out, s);
    return dot(out, R);
  };
  Mat ds;
  softmax_rows_backward(ds, R, p);
  CHECK(check_directional(loss, s.data(), size_t(s.size()), ds.data(), 42) < 1e-3);
}

TEST_CASE("attention backward matches central differences, with masks and overrides", "[layers]") {
  const int n = 5, heads = 2, d = 8;
  Mat qkv = random_mat(n, 3 * d, 50, 1.5f);
  const Mat R = random_mat(n, d, 51);
  for (int variant = 0; variant < 3; ++variant) {
    const float mask[2] = {1.0f, variant == 1 ? 0.0f : 1.0f};
    std::vector<Mat> over;
    if (variant == 2) {
      for (int h = 0; h < heads; ++h) over.push_back(random_mat(n, n, 60 + uint64_t(h)).cwiseAbs());
    }
    auto loss = [&] {
      Mat ctx;
      std::vector<Mat> S, A;
      attention_forward(ctx, S, A, qkv, heads, mask, variant == 2 ? &over : nullptr);
      return dot(ctx, R);
    };
    Mat ctx, dqkv;
    std::vector<Mat> S, A, dS, dA;
    attention_forward(ctx, S, A, qkv, heads, mask, variant == 2 ? &over : nullptr);
    attention_backward(dqkv, dS, dA, R, qkv, A, heads, mask, variant == 2);
    CHECK(check_directional(loss, qkv.data(), size_t(qkv.size()), dqkv.data(), 70 + uint64_t(variant)) < 2e-3);
    // ∂L/∂A against differences in A itself (A as an input: override it)
    std::vector<Mat> A2 = A;
    auto loss_a = [&] {
      Mat c;
      std::vector<Mat> s2, a2;
      attention_forward(c, s2, a2, qkv, heads, mask, &A2);
      return dot(c, R);
    };
    for (int h = 0; h < heads; ++h) {
      if (mask[h] == 0.0f) continue;
      CHECK(check_directional(loss_a, A2[size_t(h)].data(), size_t(n * n), dA[size_t(h)].data(), 80) < 1e-3);
    }
    if (variant == 1) {
      CHECK(A[1].isZero());
      CHECK(dS[1].isZero());
    }
  }
}

TEST_CASE("im2col and col2im are adjoint and take patches row-major in (C, p, p) order", "[layers]") {
  Image x(2, 4, 6);
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = float(i);
  Mat P;
  im2col(P, x, 2);
  REQUIRE(P.rows() == 6);
  REQUIRE(P.cols() == 8);
  CHECK(P(0, 0) == x.at(0, 0, 0));
  CHECK(P(0, 1) == x.at(0, 0, 1));
  CHECK(P(0, 2) == x.at(0, 1, 0));
  CHECK(P(0, 4) == x.at(1, 0, 0));
  CHECK(P(1, 0) == x.at(0, 0, 2));  // second patch: same row of patches, next column
  CHECK(P(3, 0) == x.at(0, 2, 0));  // fourth patch: second row of patches
  const Mat Y = random_mat(6, 8, 90);
  Image back;
  col2im(back, Y, 2, 4, 6, 2);
  double lhs = (P.cast<double>().array() * Y.cast<double>().array()).sum(), rhs = 0.0;
  for (size_t i = 0; i < x.data.size(); ++i) rhs += double(x.data[i]) * back.data[i];
  CHECK(lhs == Approx(rhs).epsilon(1e-9));
}
