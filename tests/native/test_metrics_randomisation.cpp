// test_metrics_randomisation.cpp — the cascading model randomisation of model/randomise.h
// (Adebayo et al. 2018): which tensors each step re-initialises, that the cascade is cumulative,
// the initial values' statistics, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "vitlens/model/randomise.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

namespace {

Config small_config(bool variants) {
  Config c;
  c.image_h = 16;
  c.image_w = 16;
  c.channels = 3;
  c.patch = 8;
  c.dim = 32;
  c.depth = 3;
  c.heads = 2;
  c.mlp_dim = 64;
  c.classes = 5;
  if (variants) {  // every optional tensor group: LayerScale, fc_norm, pre-norm
    c.layer_scale = true;
    c.pre_norm = true;
    c.fc_norm = true;
    c.final_norm = false;
    c.pool = Pooling::avg;
  }
  fill_config_defaults(c);
  return c;
}

bool same(const ParamRef& a, const ParamRef& b) { return std::equal(a.data, a.data + a.size, b.data); }

}  // namespace

TEST_CASE("randomisation steps: trained, head, blocks from the top, embedding", "[metrics][randomisation]") {
  const Config c = small_config(false);
  CHECK(randomisation_steps(c) == 5);
  CHECK(randomisation_step_name(c, 0) == "trained");
  CHECK(randomisation_step_name(c, 1) == "head");
  CHECK(randomisation_step_name(c, 2) == "block 2");
  CHECK(randomisation_step_name(c, 3) == "block 1");
  CHECK(randomisation_step_name(c, 4) == "block 0");
  CHECK(randomisation_step_name(c, 5) == "embedding");
  CHECK_FALSE(randomised_at(c, "head.weight", 0));
  CHECK(randomised_at(c, "head.weight", 1));
  CHECK(randomised_at(c, "norm.bias", 1));
  CHECK_FALSE(randomised_at(c, "blocks.2.attn.qkv.weight", 1));
  CHECK(randomised_at(c, "blocks.2.attn.qkv.weight", 2));
  CHECK_FALSE(randomised_at(c, "blocks.0.norm1.weight", 3));
  CHECK(randomised_at(c, "blocks.0.norm1.weight", 4));
  CHECK_FALSE(randomised_at(c, "pos_embed", 4));
  CHECK(randomised_at(c, "pos_embed", 5));
  for (int bad : {-1, 6}) {
    try {
      randomisation_step_name(c, bad);
      FAIL("accepted step " << bad);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_argument);
    }
    CHECK_THROWS_AS(randomise_cascade(random_model(c, 1), bad, 0), Error);
  }
}

TEST_CASE("randomisation cascade: exactly the step's tensors change, cumulatively", "[metrics][randomisation]") {
  for (bool variants : {false, true}) {
    CAPTURE(variants);
    const Config c = small_config(variants);
    Model trained = random_model(c, 21);
    trained.stored_int8 = true;  // as if loaded from an int8 file: the copy is f32
    std::vector<ParamRef> orig = param_list(trained.params, trained.config);
    Model prev = trained, stepwise = trained;
    for (int step = 0; step <= randomisation_steps(c); ++step) {
      CAPTURE(step);
      Model r = randomise_cascade(trained, step, 77);
      CHECK_FALSE(r.stored_int8);
      std::vector<ParamRef> now = param_list(r.params, r.config), before = param_list(prev.params, prev.config);
      REQUIRE(now.size() == orig.size());
      for (size_t k = 0; k < now.size(); ++k) {
        CAPTURE(now[k].name);
        // random_model's values are never 0 for biases nor exactly 1 for LayerNorm weights, so a
        // re-initialised tensor always differs from the trained one
        CHECK(same(now[k], orig[k]) == !randomised_at(c, now[k].name, step));
        // cumulative: what was random at the previous step keeps its values
        if (step > 0 && randomised_at(c, now[k].name, step - 1)) CHECK(same(now[k], before[k]));
      }
      // the in-place cascade reaches the same model one step at a time
      randomise_step(stepwise, step, 77);
      CHECK_FALSE(stepwise.stored_int8);
      std::vector<ParamRef> inplace = param_list(stepwise.params, stepwise.config);
      for (size_t k = 0; k < now.size(); ++k) CHECK(same(inplace[k], now[k]));
      Trace tr;
      vit_forward(tr, r, random_input(c, 3));
      CHECK(tr.logits.allFinite());
      prev = r;
    }
  }
}

TEST_CASE("randomisation init: truncated normal σ 0.02, biases 0, LayerNorm 1, seeded", "[metrics][randomisation]") {
  const Config c = small_config(true);
  const Model trained = random_model(c, 21);
  Model r = randomise_cascade(trained, randomisation_steps(c), 5);
  for (const ParamRef& p : param_list(r.params, r.config)) {
    CAPTURE(p.name);
    const std::string& n = p.name;
    const bool bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    const bool ones = n.find("norm") != std::string::npos || n.find("gamma") != std::string::npos;
    if (bias) {
      for (size_t i = 0; i < p.size; ++i) CHECK(p.data[i] == 0.0f);
    } else if (ones) {
      for (size_t i = 0; i < p.size; ++i) CHECK(p.data[i] == 1.0f);
    } else {
      double mean = 0.0, sq = 0.0, top = 0.0;
      for (size_t i = 0; i < p.size; ++i) {
        mean += p.data[i];
        sq += double(p.data[i]) * p.data[i];
        top = std::max(top, std::fabs(double(p.data[i])));
      }
      CHECK(top <= 0.04 + 1e-9);  // truncated at 2σ
      if (p.size >= 2000) {        // statistics on the large tensors only
        const double nn = double(p.size), sd_true = 0.02 * 0.8796;  // σ of N(0,1) cut at ±2: 0.8796
        mean /= nn;
        const double sd = std::sqrt(sq / nn - mean * mean);
        CHECK(std::fabs(mean) < 4.0 * sd_true / std::sqrt(nn));
        CHECK(std::fabs(sd / sd_true - 1.0) < 4.0 * 0.6 / std::sqrt(nn));  // se(sd)/sd ≈ √(κ−1)/(2√n) ≤ 0.6/√n
      }
    }
  }
  const Model again = randomise_cascade(trained, randomisation_steps(c), 5);
  const Model other = randomise_cascade(trained, randomisation_steps(c), 6);
  CHECK(again.params.blocks[0].qkv_w == r.params.blocks[0].qkv_w);
  CHECK(other.params.blocks[0].qkv_w != r.params.blocks[0].qkv_w);
  CHECK(r.params.blocks[0].qkv_w != r.params.blocks[1].qkv_w);  // each tensor its own draws
}
