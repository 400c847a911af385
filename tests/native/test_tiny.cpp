// test_tiny.cpp — values below 2⁻⁶⁴ are set to 0 where they are formed for float products
// (tensor/tiny.h): on a model whose heads are peaked and whose MLP pre-activations are wide, the
// forward and backward passes hold no subnormal float, the slopes and probabilities set to 0 are
// the ones below the bound, and the methods' maps stay finite.
#include <catch2/catch.hpp>

#include <cmath>

#include "helpers.h"
#include "vitlens/layers/layers.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/tiny.h"

using namespace vitlens;

namespace {

// How many of m's values are subnormal.
int subnormals(const Mat& m) {
  int k = 0;
  for (Eigen::Index i = 0; i < m.size(); ++i) k += std::fpclassify(m.data()[i]) == FP_SUBNORMAL;
  return k;
}

}  // namespace

TEST_CASE("activation_backward sets slopes below 2^-64 to 0 and keeps the rest", "[layers]") {
  for (Activation a : {Activation::gelu, Activation::gelu_tanh, Activation::quick_gelu}) {
    Mat x(1, 12), dy = Mat::Constant(1, 12, 1e-3f), dx;  // (1, 12)
    x << -80, -40, -20, -14, -13, -12, -10, -9, -5, 0, 2, 30;
    activation_backward(dx, dy, x, a);
    for (int j = 0; j < x.cols(); ++j) {
      const double slope = activation_grad(x(0, j), a);
      INFO("activation " << int(a) << " x=" << x(0, j) << " slope=" << slope << " dx=" << dx(0, j));
      CHECK(std::fpclassify(dx(0, j)) != FP_SUBNORMAL);
      if (std::fabs(1e-3 * slope) < kTiny)  // the slope, or its product with dy, below the bound
        CHECK(dx(0, j) == 0.0f);
      else
        CHECK(std::fabs(double(dx(0, j)) - 1e-3 * slope) <= 1e-6 * std::fabs(1e-3 * slope) + 1e-30);
    }
  }
}

TEST_CASE("peaked heads and wide MLP pre-activations make no subnormal floats", "[layers][vit]") {
  Model m = random_model(test::small_vit_config(2), 5);
  const int d = m.config.dim;
  for (BlockParams& b : m.params.blocks) {
    b.qkv_w.topRows(2 * d) *= 10.0f;  // q and k: scores spread over ~100, far keys at e⁻¹⁰⁰
    b.fc1_w *= 30.0f;                 // pre-activations far below −13
  }
  const Image x = random_input(m.config, 7);
  Trace tr;
  vit_forward(tr, m, x);
  int flushed = 0, far_below = 0;
  for (const BlockTrace& b : tr.blocks) {
    for (const Mat& a : b.attn) {
      CHECK(subnormals(a) == 0);
      for (Eigen::Index i = 0; i < a.size(); ++i) {
        CHECK((a.data()[i] == 0.0f || a.data()[i] >= float(kTiny)));
        flushed += a.data()[i] == 0.0f;
      }
    }
    far_below += int((b.fc1.array() < -13.0f).count());
  }
  CHECK(flushed > 0);    // the softmax had probabilities to set to 0
  CHECK(far_below > 0);  // and the GELU slopes that would be subnormal times a gradient
  const int cls = top_k(m.config, tr.logits, 1)[0].cls;
  Vec dl = Vec::Zero(m.config.classes);
  dl(cls) = 1.0f;
  Grads g;
  vit_backward(g, nullptr, m, tr, dl);
  for (size_t b = 0; b < g.blocks.size(); ++b) {
    const BlockGrads& gb = g.blocks[b];
    INFO("block " << b);
    const char* names[] = {"x", "ln1", "qkv", "ctx", "attn_out", "x_mid", "ln2", "fc1", "act"};
    int k = 0;
    for (const Mat* v : {&gb.x, &gb.ln1, &gb.qkv, &gb.ctx, &gb.attn_out, &gb.x_mid, &gb.ln2, &gb.fc1, &gb.act}) {
      INFO(names[k++]);
      CHECK(subnormals(*v) == 0);
    }
  }
  for (const char* method : {"grad-rollout", "transformer-attribution", "lrp", "attnlrp", "saliency"}) {
    MethodOptions o;
    o.target = cls;
    const Explanation e = explain(m, x, method, o);
    const Mat& map = e.token_map.size() > 0 ? e.token_map : e.pixel_map;
    INFO(method);
    REQUIRE(map.size() > 0);
    CHECK(map.allFinite());
    CHECK(map.cwiseAbs().maxCoeff() > 0.0f);
  }
}
