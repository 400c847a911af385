// test_vit.cpp — the whole model: gradients against central differences, determinism, options.
#include <catch2/catch.hpp>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/model/model.h"
#include "vitlens/model/vit.h"
#include "vitlens/methods/methods.h"

using namespace vitlens;
using vitlens::test::check_directional;

namespace {

Config small_config() { return vitlens::test::small_vit_config(3); }

}  // namespace

TEST_CASE("forward pass: shapes, attention rows sum to one, residual streams add up", "[vit]") {
  const Model m = random_model(small_config(), 3);
  const Image x = random_input(m.config, 4);
  Trace tr;
  vit_forward(tr, m, x);
  const int n = m.config.tokens();
  REQUIRE(tr.blocks.size() == 3);
  CHECK(tr.logits.size() == 4);
  for (const BlockTrace& b : tr.blocks) {
    REQUIRE(b.attn.size() == 2);
    for (const Mat& A : b.attn) {
      CHECK(A.rows() == n);
      for (int i = 0; i < n; ++i) CHECK(A.row(i).sum() == Approx(1.0f).epsilon(1e-5));
    }
    CHECK((b.x_mid - b.x - b.attn_out).cwiseAbs().maxCoeff() < 1e-6f);
  }
  CHECK((tr.x_final - tr.blocks[2].x_mid - tr.blocks[2].mlp_out).cwiseAbs().maxCoeff() < 1e-6f);
  // Same input, same model → bit-identical logits; a second trace object changes nothing.
  Trace tr2;
  vit_forward(tr2, m, x);
  CHECK(tr2.logits == tr.logits);
}

// pack_weights (model.h): the forward pass reads the packed weights and computes exactly what it
// computes without them; a copy of the model (other buffers, here edited) does not read the
// original's packing.
TEST_CASE("forward pass with packed weights: bit-identical", "[vit]") {
  const Model plain = random_model(small_config(), 3);
  Model packed = plain;
  pack_weights(packed);
#if defined(__wasm_simd128__)
  REQUIRE(packed.params.blocks[0].fc1_packs.times_wt);
  REQUIRE(packed.params.patch_packs.times_wt);
#endif
  const Image x = random_input(plain.config, 4);
  Trace a, b, c;
  vit_forward(a, plain, x);
  vit_forward(b, packed, x);
  CHECK(a.logits == b.logits);
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    CHECK(a.blocks[l].qkv == b.blocks[l].qkv);
    CHECK(a.blocks[l].fc1 == b.blocks[l].fc1);
  }
  Model edited = packed;  // shares the packings, whose sources are the original's buffers
  for (BlockParams& bp : edited.params.blocks) bp.fc1_w *= -0.5f;
  Model edited_plain = plain;
  for (BlockParams& bp : edited_plain.params.blocks) bp.fc1_w *= -0.5f;
  Trace d;
  vit_forward(c, edited, x);
  vit_forward(d, edited_plain, x);
  CHECK(c.logits == d.logits);
  CHECK(c.logits != a.logits);
}

// The backward pass and the relevance rules read the packings of dy·W, |x|·|W|ᵀ, S·W and S·|W|
// (pack_weights): every method that uses them gives the map it gives without, bit for bit.
TEST_CASE("explanations with packed weights: bit-identical", "[vit]") {
  const Model plain = random_model(small_config(), 7);
  Model packed = plain;
  pack_weights(packed);
#if defined(__wasm_simd128__)
  for (const BlockParams& b : packed.params.blocks) {
    REQUIRE(b.qkv_packs.times_abs_wt);
    REQUIRE(b.proj_packs.times_w);
    REQUIRE(b.fc1_packs.times_abs_w);
    REQUIRE(b.fc2_packs.times_w);
  }
  REQUIRE(packed.params.patch_packs.times_w);
#endif
  const Image x = random_input(plain.config, 8);
  for (const char* method : {"transformer-attribution", "lrp", "partial-lrp", "attnlrp", "saliency", "grad-rollout"}) {
    CAPTURE(method);
    const Explanation a = explain(plain, x, method), b = explain(packed, x, method);
    CHECK(a.token_map == b.token_map);
    CHECK(a.pixel_map == b.pixel_map);
  }
}

TEST_CASE("whole-model gradient: logit w.r.t. the input, every block's A, and parameters", "[vit]") {
  Model m = random_model(small_config(), 5);
  Image x = random_input(m.config, 6);
  Trace tr;
  vit_forward(tr, m, x);
  const int t = 2;
  Vec dlogits = Vec::Zero(4);
  dlogits[t] = 1.0f;
  Grads g;
  Params dp = params_zeros(m.config);
  vit_backward(g, &dp, m, tr, dlogits);

  auto logit = [&]() {
    Trace t2;
    vit_forward(t2, m, x);
    return double(t2.logits[t]);
  };
  CHECK(check_directional(logit, x.data.data(), x.data.size(), g.input.data.data(), 100, 1e-2f) < 5e-3);

  for (int b = 0; b < m.config.depth; ++b) {
    std::vector<Mat> A = tr.blocks[size_t(b)].attn;
    ForwardOptions opt;
    opt.override_block = b;
    opt.override_attn = &A;
    for (int h = 0; h < m.config.heads; ++h) {
      auto f = [&]() {
        Trace t2;
        vit_forward(t2, m, x, opt);
        return double(t2.logits[t]);
      };
      const Mat& dA = g.blocks[size_t(b)].attn[size_t(h)];
      CHECK(check_directional(f, A[size_t(h)].data(), size_t(A[size_t(h)].size()), dA.data(), 200 + uint64_t(b), 1e-2f) < 5e-3);
    }
  }

  std::vector<ParamRef> refs = param_list(m.params, m.config);
  std::vector<ParamRef> grads = param_list(dp, m.config);
  for (size_t k = 0; k < refs.size(); ++k) {
    INFO(refs[k].name);
    CHECK(check_directional(logit, refs[k].data, refs[k].size, grads[k].data, 300 + k, 1e-2f) < 1e-2);
  }
}

TEST_CASE("backward accumulates parameter gradients across calls", "[vit]") {
  const Model m = random_model(small_config(), 8);
  const Image x = random_input(m.config, 9);
  Trace tr;
  vit_forward(tr, m, x);
  Vec dl = Vec::Ones(4);
  Grads g;
  Params once = params_zeros(m.config), twice = params_zeros(m.config);
  vit_backward(g, &once, m, tr, dl);
  vit_backward(g, &twice, m, tr, dl);
  vit_backward(g, &twice, m, tr, dl);
  vit_backward(g, &twice, m, tr, dl * -1.0f);  // 2·dl − dl = dl
  CHECK((once.head_w - twice.head_w).cwiseAbs().maxCoeff() < 1e-6f);
  CHECK((once.blocks[0].qkv_w - twice.blocks[0].qkv_w).cwiseAbs().maxCoeff() < 1e-5f);
}

TEST_CASE("head mask zeroes a head's attention and its gradient", "[vit]") {
  const Model m = random_model(small_config(), 10);
  const Image x = random_input(m.config, 11);
  ForwardOptions opt;
  opt.head_mask.assign(size_t(m.config.depth * m.config.heads), 1.0f);
  opt.head_mask[1] = 0.0f;  // block 0, head 1
  Trace tr, full;
  vit_forward(tr, m, x, opt);
  vit_forward(full, m, x);
  CHECK(tr.blocks[0].attn[1].isZero());
  CHECK((tr.logits - full.logits).norm() > 1e-6f);
  Grads g;
  vit_backward(g, nullptr, m, tr, Vec::Ones(4), opt);
  CHECK(g.blocks[0].scores[1].isZero());
  opt.head_mask.resize(3);
  CHECK_THROWS_AS(vit_forward(tr, m, x, opt), Error);
}

TEST_CASE("forward rejects wrong shapes and non-finite inputs", "[vit]") {
  const Model m = random_model(small_config(), 12);
  Trace tr;
  Image wrong(3, 16, 16);
  CHECK_THROWS_WITH(vit_forward(tr, m, wrong), Catch::Contains("expects 3×16×24"));
  Image x = random_input(m.config, 13);
  x.data[5] = std::nanf("");
  try {
    vit_forward(tr, m, x);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_value);
  }
}

TEST_CASE("top_k orders classes and softmax / sigmoid outputs", "[vit]") {
  Config c = small_config();
  Vec logits(4);
  logits << 0.5f, 2.0f, -1.0f, 2.0f;
  const auto top = top_k(c, logits, 3);
  REQUIRE(top.size() == 3);
  CHECK(top[0].cls == 1);  // ties broken by the lower index
  CHECK(top[1].cls == 3);
  CHECK(top[2].cls == 0);
  CHECK(output_probs(c, logits).sum() == Approx(1.0f));
  c.output = OutputKind::sigmoid;
  CHECK(output_probs(c, logits)[0] == Approx(1.0 / (1.0 + std::exp(-0.5))));
  CHECK(top_k(c, logits, 99).size() == 4);
}
