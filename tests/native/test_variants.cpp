// test_variants.cpp — the timm / Hugging Face ViT variants (METHODS.md "Model variants") on
// random models of every kind: the gradient against central differences (input, attention,
// every parameter, the variant tensors included), the double forward against the float one, the
// conservation of Chefer's rules through the pooling, every method on every variant, the
// equivalences that pin the conventions down, and resize_input. Exactness against the
// independent reference is in test_variant_reference.cpp.
#include <catch2/catch.hpp>
#include <cmath>

#include "helpers.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"
#include "vitlens/model/vit.h"
#include "vitlens/relevance/lrp.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
using vitlens::test::check_directional;
using vitlens::test::rel_max_error;

namespace {

Config base(int channels = 3) { return test::small_vit_config(2, channels); }

struct Variant {
  const char* name;
  Config config;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  {
    Config c = base();
    c.layer_scale = true;
    c.no_embed_class = true;
    v.push_back({"deit3: LayerScale, pos_embed without the CLS row", c});
  }
  {
    Config c = base();
    c.dist_token = true;
    v.push_back({"DeiT distilled: [CLS][DIST], two heads averaged", c});
  }
  {
    Config c = base(1);
    c.class_token = false;
    c.registers = 4;
    c.no_embed_class = true;
    c.pool = Pooling::avg;
    c.fc_norm = true;
    c.final_norm = false;
    v.push_back({"reg4 gap: no CLS, 4 registers, avg + fc_norm, gray", c});
  }
  {
    Config c = base();
    c.layer_scale = true;
    c.registers = 2;
    c.pool = Pooling::token_avg;
    v.push_back({"DINOv2 with registers: token+avg, LayerScale", c});
  }
  {
    Config c = base();
    c.pre_norm = true;
    c.act = Activation::quick_gelu;
    c.pool = Pooling::avg;
    c.final_norm = false;
    v.push_back({"CLIP: pre-norm, quick GELU, avg without a final norm", c});
  }
  {
    Config c = base();
    c.act = Activation::gelu_tanh;
    c.pool = Pooling::avg;
    c.fc_norm = true;
    c.final_norm = false;
    v.push_back({"tanh GELU, CLS present but avg + fc_norm pooling", c});
  }
  return v;
}

}  // namespace

TEST_CASE("variants: the gradient of a logit w.r.t. the input, every A and every parameter", "[variants]") {
  for (const Variant& var : variants()) {
    INFO(var.name);
    Model m = random_model(var.config, 11);
    const Image x0 = random_input(m.config, 12);
    Image x = x0;
    Trace tr;
    vit_forward(tr, m, x);
    const int t = 1;
    Vec dlogits = Vec::Zero(m.config.classes);
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
}

TEST_CASE("variants: the last block formed only where the head reads keeps the logits and gradients", "[variants]") {
  std::vector<Variant> cases = variants();
  cases.insert(cases.begin(), Variant{"plain: CLS token pooling", base()});
  for (const Variant& var : cases) {
    INFO(var.name);
    const Model m = random_model(var.config, 31);
    const Config& c = m.config;
    const Image x = random_input(c, 32);
    const int q = head_rows(c), L = c.depth;
    CHECK(q == (c.pool == Pooling::token ? (c.dist_token ? 2 : 1) : c.tokens()));
    ForwardOptions full, trimmed;
    full.head_mask.assign(size_t(L * c.heads), 1.0f);
    full.head_mask[size_t(L * c.heads - 1)] = 0.0f;  // a head of the last block off, in both
    trimmed.head_mask = full.head_mask;
    trimmed.head_rows_only = true;
    Trace a, b;
    vit_forward(a, m, x, full);
    vit_forward(b, m, x, trimmed);
    CHECK(b.x_final.rows() == q);
    CHECK(b.blocks[size_t(L - 1)].attn[0].rows() == q);
    CHECK(rel_max_error(b.logits.data(), std::vector<double>(a.logits.data(), a.logits.data() + a.logits.size())) <= 1e-6);
    Vec dlogits = Vec::LinSpaced(c.classes, -1.0f, 1.0f);
    Grads ga, gb;
    vit_backward(ga, nullptr, m, a, dlogits, full);
    vit_backward(gb, nullptr, m, b, dlogits, trimmed);
    const std::vector<double> gin(ga.input.data.begin(), ga.input.data.end());
    CHECK(rel_max_error(gb.input.data, gin) <= 1e-5);
    // Without parameter gradients (ga) the backward over every row forms the last block's MLP,
    // projection and queries for the head's rows only (vit.cpp); with them (gp) it forms all: the
    // same input gradient and ∂y/∂A, in the same (n, n) shape.
    Params dp = params_zeros(c);
    Grads gp;
    vit_backward(gp, &dp, m, a, dlogits, full);
    CHECK(rel_max_error(gp.input.data, gin) <= 1e-5);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < c.heads; ++h) {
        INFO("block " << l << " head " << h);
        const Mat& da = ga.blocks[size_t(l)].attn[size_t(h)];
        const Mat& db = gb.blocks[size_t(l)].attn[size_t(h)];
        const Mat& dpa = gp.blocks[size_t(l)].attn[size_t(h)];
        const Mat top = da.topRows(db.rows());  // every row in the blocks below; the head's in the last
        CHECK(db.rows() == (l == L - 1 ? q : c.tokens()));
        CHECK(rel_max_error(db.data(), std::vector<double>(top.data(), top.data() + top.size())) <= 1e-5);
        if (l == L - 1 && q < c.tokens()) CHECK(da.bottomRows(c.tokens() - q).cwiseAbs().maxCoeff() == 0.0f);
        REQUIRE(da.rows() == dpa.rows());
        CHECK(rel_max_error(da.data(), std::vector<double>(dpa.data(), dpa.data() + dpa.size())) <= 1e-5);
      }
    // An explanation state for gradient methods only (smoothgrad's noisy copies): the same maps,
    // and the methods that read more of the pass are refused.
    ExplainState sf, sg;
    sf.set_input(m, x, full.head_mask);
    sg.set_input(m, x, full.head_mask, true);
    for (const char* method : {"saliency", "grad-x-input"}) {
      INFO(method);
      const Mat ef = explain(m, sf, method).pixel_map, eg = explain(m, sg, method).pixel_map;
      CHECK(rel_max_error(eg.data(), std::vector<double>(ef.data(), ef.data() + ef.size())) <= 1e-5);
    }
    CHECK_THROWS_AS(explain(m, sg, "rollout"), Error);
    // attattr's stacked pass forms the same rows only: still the m separate full passes' result
    const int target = 1;
    const std::vector<AttAttrBlock> batched = attattr_blocks(m, a, target, 3, 1);
    const std::vector<AttAttrBlock> naive = attattr_blocks_naive(m, a, target, 3);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < c.heads; ++h) {
        const Mat& n = naive[size_t(l)].attr[size_t(h)];
        CHECK(rel_max_error(batched[size_t(l)].attr[size_t(h)].data(), std::vector<double>(n.data(), n.data() + n.size())) <= 1e-5);
      }
  }
}

TEST_CASE("variants: the double forward of the relevance pass agrees with the float forward", "[variants]") {
  for (const Variant& var : variants()) {
    INFO(var.name);
    const Model m = random_model(var.config, 21);
    const Image x = random_input(m.config, 22);
    Trace tr;
    vit_forward(tr, m, x);
    TraceD td;
    lrp_forward(td, m, x);
    CHECK((td.logits - tr.logits.cast<double>()).cwiseAbs().maxCoeff() < 1e-4);
    CHECK(td.tokens.rows() == m.config.tokens());
  }
}

TEST_CASE("variants: the double forward's last block formed where the head reads keeps every relevance", "[variants]") {
  // Besides the variants: the default test ViT (CLS pooling, final norm) and a deeper one.
  std::vector<Variant> all = variants();
  all.push_back({"CLS pooling", base()});
  all.push_back({"CLS pooling, 4 blocks", test::small_vit_config(4, 3)});
  const LrpRules older = chefer_rules(LinearRule::alpha1beta0_separate, AddRule::plain);
  for (const Variant& var : all) {
    INFO(var.name);
    const Model m = random_model(var.config, 41);
    const Image x = random_input(m.config, 42);
    const int n = m.config.tokens(), r = head_rows(m.config);
    // One head of the last block switched off as well (the page's head masks).
    std::vector<float> mask(size_t(m.config.depth) * size_t(m.config.heads), 1.0f);
    mask.back() = 0.0f;
    for (const std::vector<float>& heads : {std::vector<float>{}, mask}) {
      INFO((heads.empty() ? "all heads" : "last block's last head off"));
      TraceD head, full;
      lrp_forward(head, m, x, heads);
      lrp_forward(full, m, x, heads, true);
      CHECK(head.blocks.back().attn[0].rows() == n);
      CHECK(head.x_final.rows() == n);
      if (r < n) CHECK(head.blocks.back().fc1.bottomRows(n - r).isZero(0.0));
      CHECK(rel_max_error(head.logits.data(), std::vector<double>(full.logits.data(), full.logits.data() + full.logits.size())) <= 1e-13);
      for (const LrpRules* rules : {&kCheferRules, &kAttnLrpRules, &older}) {
        INFO(rules->name << (rules == &older ? " (older rules)" : ""));
        for (int target : {0, m.config.classes - 1}) {
          RelevancePass a, b;
          lrp_propagate(a, m, head, *rules, target, 0, LrpDepth::pixels);
          lrp_propagate(b, m, full, *rules, target, 0, LrpDepth::pixels);
          auto same = [](const MatD& u, const MatD& v) {
            REQUIRE(u.rows() == v.rows());
            REQUIRE(u.cols() == v.cols());
#if defined(__wasm_simd128__)
            return u == v;  // our kernel forms a row of a product alike whatever the rows below it
#else
            // Eigen's blocking depends on the number of rows
            return rel_max_error(u.data(), std::vector<double>(v.data(), v.data() + v.size())) <= 1e-12;
#endif
          };
          CHECK(same(a.pixel_map, b.pixel_map));
          CHECK(same(a.r_tokens, b.r_tokens));
          for (size_t l = 0; l < a.r_attn.size(); ++l)
            for (size_t h = 0; h < a.r_attn[l].size(); ++h) CHECK(same(a.r_attn[l][h], b.r_attn[l][h]));
          REQUIRE(a.report.layers.size() == b.report.layers.size());
          for (size_t i = 0; i < a.report.layers.size(); ++i) {
            INFO(a.report.layers[i].layer);
            CHECK(a.report.layers[i].relevance_in == Approx(b.report.layers[i].relevance_in).epsilon(1e-12).margin(1e-15));
          }
        }
      }
    }
  }
}

TEST_CASE("variants: Chefer's rules conserve relevance through the pooling and the blocks", "[variants]") {
  for (const Variant& var : variants()) {
    INFO(var.name);
    const Model m = random_model(var.config, 31);
    const Image x = random_input(m.config, 32);
    const Explanation ex = explain(m, x, "lrp");
    const ConservationReport& r = ex.conservation;
    CHECK(r.seed_sum == 1.0);
    for (const LayerRelevance& l : r.layers) {
      INFO(l.layer);
      if (l.layer == "pos_embed.add" || l.layer == "drop_cls" || l.layer == "patch_embed") continue;
      CHECK(std::fabs(l.relevance_in - l.relevance_out) < 1e-6);
    }
    for (double s : r.block_input_sums) CHECK(std::fabs(s - 1.0) < 1e-6);
  }
}

TEST_CASE("variants: every method explains every variant with a finite map of the grid's shape", "[variants]") {
  for (const Variant& var : variants()) {
    const Model m = random_model(var.config, 41);
    const Image x = random_input(m.config, 42);
    ExplainState st;
    st.set_input(m, x);
    for (const MethodInfo& info : method_registry()) {
      INFO(var.name << " / " << info.name);
      const std::string name = info.name;
      std::string spec = name;  // fewer steps: the test is about shapes, not convergence
      if (name == "attattr" || name == "integrated-gradients") spec += ":steps=4";
      if (name == "smoothgrad") spec += ":samples=2";
      MethodOptions opt;
      parse_method_spec(spec, opt, &m.config);
      const Explanation ex = explain(m, st, name, opt);
      REQUIRE(ex.token_map.rows() == m.config.grid_h());
      REQUIRE(ex.token_map.cols() == m.config.grid_w());
      CHECK(ex.token_map.allFinite());
    }
  }
}

TEST_CASE("variants: LayerScale with γ = 1 explains exactly as the model without it", "[variants]") {
  Config c = base();
  const Model plain = random_model(c, 51);
  c.layer_scale = true;
  Model scaled = random_model(c, 51);
  // The same weights, with γ = 1.
  std::vector<ParamRef> from = param_list(const_cast<Params&>(plain.params), plain.config);
  for (ParamRef& r : param_list(scaled.params, scaled.config)) {
    bool found = false;
    for (const ParamRef& f : from)
      if (f.name == r.name) {
        std::copy(f.data, f.data + f.size, r.data);
        found = true;
      }
    if (!found) std::fill(r.data, r.data + r.size, 1.0f);
  }
  const Image x = random_input(c, 52);
  for (const char* method : {"transformer-attribution", "lrp", "attnlrp", "norm-based", "grad-rollout", "saliency"}) {
    INFO(method);
    const Mat a = explain(plain, x, method).token_map, b = explain(scaled, x, method).token_map;
    CHECK((a - b).cwiseAbs().maxCoeff() <= 1e-6f * a.cwiseAbs().maxCoeff());
  }
}

TEST_CASE("variants: a DIST token and head that copy the CLS ones: two equal rows, the CLS head's logits", "[variants]") {
  // With dist_token = cls_token, the same pos row and head_dist = head, the DIST row equals the
  // CLS row in every block, so ½(head(z_CLS) + head_dist(z_DIST)) = head(z_CLS). (The maps differ
  // from the plain model's: every query now sees the CLS key twice.)
  Config c = base();
  const Model plain = random_model(c, 61);
  c.dist_token = true;
  Model dist = random_model(c, 61);
  for (ParamRef& r : param_list(dist.params, dist.config)) {
    for (const ParamRef& f : param_list(const_cast<Params&>(plain.params), plain.config))
      if (f.name == r.name && f.size == r.size) std::copy(f.data, f.data + f.size, r.data);
  }
  dist.params.dist_token = plain.params.cls_token;
  dist.params.pos_embed.row(0) = plain.params.pos_embed.row(0);
  dist.params.pos_embed.row(1) = plain.params.pos_embed.row(0);
  dist.params.pos_embed.bottomRows(c.num_patches()) = plain.params.pos_embed.bottomRows(c.num_patches());
  dist.params.head_dist_w = plain.params.head_w;
  dist.params.head_dist_b = plain.params.head_b;
  const Image x = random_input(c, 62);
  Trace tb;
  vit_forward(tb, dist, x);
  const Vec cls_logits = dist.params.head_w * tb.ln_f.row(0).transpose() + dist.params.head_b;
  CHECK((tb.logits - cls_logits).cwiseAbs().maxCoeff() < 1e-5f);
  for (const BlockTrace& bt : tb.blocks)
    CHECK((bt.x.row(0) - bt.x.row(1)).cwiseAbs().maxCoeff() < 1e-5f);
}

TEST_CASE("resize_input: the same size is the identity, a constant grid stays constant, prefix rows kept", "[variants]") {
  Config c = base();
  c.dist_token = true;
  Model m = random_model(c, 71);
  const Model same = resize_input(m, c.image_h, c.image_w);
  CHECK(same.params.pos_embed == m.params.pos_embed);
  for (int i = 0; i < c.dim; ++i) m.params.pos_embed.bottomRows(c.num_patches()).col(i).setConstant(0.25f * float(i));
  const Model big = resize_input(m, 40, 32);
  CHECK(big.config.grid_h() == 5);
  CHECK(big.config.grid_w() == 4);
  CHECK(big.params.pos_embed.rows() == 2 + 20);
  CHECK(big.params.pos_embed.topRows(2) == m.params.pos_embed.topRows(2));
  for (int i = 0; i < c.dim; ++i)
    CHECK((big.params.pos_embed.bottomRows(20).col(i).array() - 0.25f * float(i)).abs().maxCoeff() < 1e-5f);
  const Image x = random_input(big.config, 72);
  CHECK(explain(big, x, "transformer-attribution").token_map.rows() == 5);
  CHECK_THROWS_AS(resize_input(big, 16, 16), Error);  // resample the checkpoint, not a copy
  CHECK_THROWS_AS(resize_input(m, 20, 24), Error);    // not a multiple of the patch
}

TEST_CASE("variants: contradicting configs are refused with the reason", "[variants]") {
  auto refused = [](Config c, const char* fragment) {
    fill_config_defaults(c);
    try {
      validate_config(c);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
      return;
    }
    FAIL("accepted");
  };
  Config c = base();
  c.class_token = false;
  refused(c, "token pooling needs a class token");
  c = base();
  c.dist_token = true;
  c.pool = Pooling::avg;
  refused(c, "distilled");
  c = base();
  c.fc_norm = true;
  refused(c, "fc_norm");
  c = base();
  c.final_norm = false;
  refused(c, "final norm");
  c = base();
  c.registers = 1000;
  refused(c, "register tokens");
}
