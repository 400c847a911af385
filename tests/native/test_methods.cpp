// test_methods.cpp — the attribution methods against the independent float64 reference
// (tests/reference/methods_ref.py, fixtures in tests/fixtures/methods/), the LRP conservation
// report line by line, properties (conservation, class specificity of the maps), option errors,
// the shared per-input state, and the bilinear upsampling against hand-computed values.
//
// Set VITLENS_PARITY_REPORT=1 to print the worst error of every method variant.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "json_fixture.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/safetensors.h"

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::read_json;
using vitlens::test::source_path;

namespace {

struct Case {
  std::string name, dir;
  Model model;
  Image input;
  nlohmann::json meta, index;
};

Case load_case(const std::string& name) {
  Case c;
  c.name = name;
  c.dir = source_path("tests/fixtures/methods/" + name + "/");
  c.meta = read_json(c.dir + "meta.json");
  c.index = read_json(c.dir + "index.json");
  if (name == "deit_tiny") {
    c.model = random_model(deit_tiny_config(), c.meta["weight_seed"].get<uint64_t>());
    c.input = random_input(c.model.config, c.meta["input_seed"].get<uint64_t>());
    return c;
  }
  c.model = test::engine_fixture_model(name);
  c.input = test::engine_fixture_input(name);
  return c;
}

MethodOptions options_from_json(const nlohmann::json& o, int target) {
  MethodOptions opt;
  opt.target = target;
  if (o.contains("fusion")) {
    const std::string f = o["fusion"];
    opt.head_fusion = f == "max" ? HeadFusion::max : f == "min" ? HeadFusion::min : HeadFusion::mean;
  }
  if (o.contains("discard_ratio")) opt.discard_ratio = o["discard_ratio"];
  if (o.contains("start_layer")) opt.start_layer = o["start_layer"];
  if (o.contains("weight")) {
    const std::string w = o["weight"];
    opt.weight = w == "none" ? AttnWeight::none : w == "attn" ? AttnWeight::attn : AttnWeight::grad;
  }
  if (o.contains("linear_rule")) opt.linear_rule = o["linear_rule"] == "separate" ? CheferLinear::separate : CheferLinear::shared;
  if (o.contains("add_rule")) opt.add_rule = o["add_rule"] == "plain" ? CheferAdd::plain : CheferAdd::normalised;
  if (o.contains("block")) opt.block = o["block"];
  return opt;
}

// Runs every map of a case's index.json on one shared state per target (kept in `states`);
// returns the worst relative error per file stem (method variant without the target).
std::map<std::string, double> run_case(Case& c, std::map<int, ExplainState>& states) {
  std::map<std::string, double> worst;
  for (const nlohmann::json& e : c.index) {
    const int t = e["target"];
    if (!states.count(t)) states[t].set_input(c.model, c.input);
    std::string method = e["method"];
    const bool tokens_of_attnlrp = method == "attnlrp-tokens";
    if (tokens_of_attnlrp) method = "attnlrp";
    const Explanation ex = explain(c.model, states[t], method, options_from_json(e["options"], t));
    const NpyArray ref = read_npy(c.dir + e["file"].get<std::string>());
    const bool pixels = (method == "lrp" || method == "attnlrp") && !tokens_of_attnlrp;
    const Mat& ours = pixels ? ex.pixel_map : ex.token_map;
    INFO(c.name << " " << e["file"].get<std::string>());
    REQUIRE(ours.rows() == ref.shape[0]);
    REQUIRE(ours.cols() == ref.shape[1]);
    const double err = rel_max_error(ours.data(), ref.data);
    std::string stem = e["file"];
    stem = stem.substr(0, stem.rfind("_t"));
    worst[stem] = std::max(worst[stem], err);
  }
  if (std::getenv("VITLENS_PARITY_REPORT"))
    for (const auto& kv : worst) std::printf("parity %-10s %-34s %.3g\n", c.name.c_str(), kv.first.c_str(), kv.second);
  return worst;
}

// The report against the reference's: same layers in the same order, sums within tol·max(1, |v|);
// with `until`, only the reference's layers up to and including that one (a pass that stopped
// there: nothing reached the tokens).
void check_report(const ConservationReport& ours, const nlohmann::json& ref, double tol, const std::string& until = "") {
  auto close = [tol](double a, double b) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); };
  const nlohmann::json& layers = ref["layers"];
  size_t count = layers.size();
  if (!until.empty()) {
    count = 0;
    while (count < layers.size() && layers[count++]["layer"].get<std::string>() != until) {}
    CHECK(std::isnan(ours.tokens_sum));
  } else {
    CHECK(close(ours.tokens_sum, ref["tokens_sum"]));
    if (ref.contains("image_sum")) CHECK(close(ours.image_sum, ref["image_sum"]));
  }
  CHECK(close(ours.seed_sum, ref["seed_sum"]));
  REQUIRE(ours.layers.size() == count);
  for (size_t i = 0; i < count; ++i) {
    INFO(layers[i]["layer"].get<std::string>() << ": ours out " << ours.layers[i].relevance_out << " in "
                                                << ours.layers[i].relevance_in << ", reference out "
                                                << layers[i]["relevance_out"].get<double>() << " in "
                                                << layers[i]["relevance_in"].get<double>());
    CHECK(ours.layers[i].layer == layers[i]["layer"].get<std::string>());
    CHECK(close(ours.layers[i].relevance_out, layers[i]["relevance_out"]));
    CHECK(close(ours.layers[i].relevance_in, layers[i]["relevance_in"]));
  }
}

}  // namespace

TEST_CASE("every method and variant matches the float64 reference (small shapes, f32 model)", "[methods]") {
  for (const char* name : {"nonsquare", "gray"}) {
    Case c = load_case(name);
    std::map<int, ExplainState> states;
    const std::map<std::string, double> worst = run_case(c, states);
    CHECK(worst.size() == 23);  // every variant of the fixture table
    for (const auto& kv : worst) {
      INFO(name << " " << kv.first);
      CHECK(kv.second <= 1e-4);
    }
  }
}

TEST_CASE("the conservation report matches the reference layer by layer", "[methods]") {
  for (const char* name : {"nonsquare", "gray"}) {
    Case c = load_case(name);
    for (int t : {c.meta["targets"]["argmax"].get<int>(), c.meta["targets"]["runner_up"].get<int>()}) {
      ExplainState st;
      st.set_input(c.model, c.input);
      MethodOptions opt;
      opt.target = t;
      {
        // transformer-attribution needs R_A down to block 0 only: its pass stops there, after block
        // 0's attention core (lrp below resumes it; the next test case compares the two ways).
        INFO(name << " t" << t << " transformer-attribution");
        const nlohmann::json ref = read_json(c.dir + "conservation_transformer-attribution_t" + std::to_string(t) + ".json");
        const Explanation stopped = explain(c.model, st, "transformer-attribution", opt);
        check_report(stopped.conservation, ref, 1e-6, "blocks.0.attn.q_kT");
        CHECK(std::isnan(stopped.conservation.block_input_sums[0]));
        CHECK(std::fabs(stopped.conservation.block_input_sums[1] - 1.0) < 1e-6);
      }
      for (const char* method : {"lrp", "attnlrp"}) {
        INFO(name << " t" << t << " " << method);
        const Explanation ex = explain(c.model, st, method, opt);
        const nlohmann::json ref =
            read_json(c.dir + "conservation_" + method + "_t" + std::to_string(t) + ".json");
        check_report(ex.conservation, ref, 1e-6);
      }
      // The older rules of the paper's LRP baselines (linear-rule separate, add-rule plain): the
      // report follows the reference's layer by layer although relevance is far from conserved.
      // The plain add divides by a + b where they nearly cancel (Σ R reaches ~10³–10⁶), which
      // amplifies the float rounding of the products S·W: the sums agree to ~1e-7 natively and
      // ~1e-5 in wasm (another summation order), so 1e-4 here, the maps' tolerance.
      MethodOptions baseline = opt;
      baseline.linear_rule = CheferLinear::separate;
      baseline.add_rule = CheferAdd::plain;
      INFO(name << " t" << t << " lrp, baseline rules");
      const Explanation ex = explain(c.model, st, "lrp", baseline);
      check_report(ex.conservation,
                   read_json(c.dir + "conservation_lrp-baseline-rules_t" + std::to_string(t) + ".json"), 1e-4);
      CHECK(ex.conservation.layers.front().relevance_in == Approx(2.0).epsilon(1e-6));  // the head: 2ΣR
    }
  }
}

TEST_CASE("a relevance pass stopped at an R_A and resumed is the pass run through at once", "[methods]") {
  // partial-lrp stops at the last block's R_A, transformer-attribution at block 0's (or at
  // start-layer's); lrp then resumes the pass from there. Everything it gives is what a pass that
  // went to the pixels in one call gives, to the bit.
  for (const char* name : {"nonsquare", "gray"}) {
    const Case c = load_case(name);
    ExplainState once, resumed;
    once.set_input(c.model, c.input);
    resumed.set_input(c.model, c.input);
    MethodOptions opt, from_1;
    from_1.start_layer = 1;
    const Explanation direct = explain(c.model, once, "lrp", opt);
    const Explanation partial = explain(c.model, resumed, "partial-lrp", opt);
    INFO(name);
    CHECK(partial.conservation.layers.back().layer == "blocks." + std::to_string(c.model.config.depth - 1) + ".attn.q_kT");
    explain(c.model, resumed, "transformer-attribution", from_1);
    explain(c.model, resumed, "partial-lrp", opt);
    explain(c.model, resumed, "transformer-attribution", opt);
    const Explanation later = explain(c.model, resumed, "lrp", opt);
    CHECK((later.pixel_map.array() == direct.pixel_map.array()).all());
    CHECK((later.token_map.array() == direct.token_map.array()).all());
    REQUIRE(later.conservation.layers.size() == direct.conservation.layers.size());
    for (size_t i = 0; i < direct.conservation.layers.size(); ++i) {
      INFO(direct.conservation.layers[i].layer);
      CHECK(later.conservation.layers[i].layer == direct.conservation.layers[i].layer);
      CHECK(later.conservation.layers[i].relevance_out == direct.conservation.layers[i].relevance_out);
      CHECK(later.conservation.layers[i].relevance_in == direct.conservation.layers[i].relevance_in);
    }
    CHECK(later.conservation.block_input_sums == direct.conservation.block_input_sums);
    CHECK(later.conservation.image_sum == direct.conservation.image_sum);
  }
}

TEST_CASE("Chefer's rules conserve relevance down to E0", "[methods]") {
  const Case c = load_case("nonsquare");
  const Explanation ex = explain(c.model, c.input, "lrp");
  const ConservationReport& r = ex.conservation;
  CHECK(r.seed_sum == 1.0);
  // Each layer passes on what it receives, up to the 1e-9 stabilisers (and the CLS token and
  // position embedding's shares, which leave the pass below E0).
  for (const LayerRelevance& l : r.layers) {
    INFO(l.layer);
    if (l.layer == "pos_embed.add" || l.layer == "drop_cls" || l.layer == "patch_embed") continue;
    CHECK(std::fabs(l.relevance_in - l.relevance_out) < 1e-6);
  }
  for (double s : r.block_input_sums) CHECK(std::fabs(s - 1.0) < 1e-6);
  CHECK(std::fabs(r.tokens_sum - 1.0) < 1e-6);
  CHECK(r.image_sum < r.tokens_sum);
  CHECK(std::fabs(ex.pixel_map.cast<double>().sum() - r.image_sum) < 1e-5);
}

TEST_CASE("rollout ignores the target class, transformer-attribution and grad-rollout do not", "[methods]") {
  const Case c = load_case("nonsquare");
  ExplainState st;
  st.set_input(c.model, c.input);
  MethodOptions a, b;
  a.target = 4;
  b.target = 0;
  auto diff = [&](const std::string& method) {
    const Mat ma = explain(c.model, st, method, a).token_map, mb = explain(c.model, st, method, b).token_map;
    return double((ma - mb).cwiseAbs().maxCoeff() / ma.cwiseAbs().maxCoeff());
  };
  CHECK(diff("rollout") == 0.0);
  CHECK(diff("raw-attention") == 0.0);
  CHECK(diff("transformer-attribution") > 1e-2);
  CHECK(diff("grad-rollout") > 1e-2);
  // Full LRP with the αβ rules is nearly class-agnostic (the observation that motivated Chefer
  // et al. 2021): the two classes' maps differ by ~2e-4 of their maximum here.
  CHECK(diff("lrp") < 1e-2);
}

TEST_CASE("a shared state gives the same maps as fresh calls, in any order", "[methods]") {
  const Case c = load_case("gray");
  ExplainState st;
  st.set_input(c.model, c.input);
  MethodOptions last, separate, plain, attn;
  last.block = c.model.config.depth - 1;
  separate.linear_rule = CheferLinear::separate;
  plain = separate;
  plain.add_rule = CheferAdd::plain;
  attn.weight = AttnWeight::attn;
  // partial-lrp and the last-block ablation stop the pass early; lrp then continues it. The rule
  // variants share one more pass, restarted when the variant changes.
  const std::vector<std::pair<std::string, MethodOptions>> order = {
      {"partial-lrp", {}}, {"transformer-attribution", last}, {"partial-lrp", separate}, {"lrp", {}},
      {"lrp", separate}, {"grad-rollout", {}}, {"transformer-attribution", plain}, {"transformer-attribution", {}},
      {"lrp", plain}, {"transformer-attribution", attn}, {"partial-lrp", {}}, {"attnlrp", {}}};
  for (const auto& [method, opt] : order) {
    INFO(method);
    const Explanation shared = explain(c.model, st, method, opt);
    const Explanation fresh = explain(c.model, c.input, method, opt);
    CHECK(shared.token_map == fresh.token_map);
    CHECK(shared.pixel_map == fresh.pixel_map);
  }
}

TEST_CASE("smoothgrad wraps a method spec: with no noise it is that method's map", "[methods]") {
  const Case c = load_case("nonsquare");
  MethodOptions opt;
  const MethodInfo& info = parse_method_spec("smoothgrad:inner=(transformer-attribution:weight=attn:start-layer=1):"
                                             "samples=2:noise=0",
                                             opt, &c.model.config);
  const Explanation smooth = explain(c.model, c.input, info.name, opt);
  MethodOptions inner;
  inner.weight = AttnWeight::attn;
  inner.start_layer = 1;
  const Explanation direct = explain(c.model, c.input, "transformer-attribution", inner);
  CHECK(smooth.token_map == direct.token_map);
  MethodOptions plain;
  plain.start_layer = 1;
  CHECK(direct.token_map != explain(c.model, c.input, "transformer-attribution", plain).token_map);
}

TEST_CASE("intermediates: per-block head means and the rollout products", "[methods]") {
  const Case c = load_case("nonsquare");
  MethodOptions opt;
  opt.want_intermediates = true;
  for (const char* method : {"rollout", "grad-rollout", "transformer-attribution"}) {
    INFO(method);
    const Explanation ex = explain(c.model, c.input, method, opt);
    REQUIRE(ex.blocks.size() == 3);
    const int n = c.model.config.tokens();
    for (const BlockIntermediates& b : ex.blocks) {
      CHECK(b.attn.rows() == n);
      CHECK(b.step.rows() == n);
      CHECK(b.attn.row(0).sum() == Approx(1.0f).epsilon(1e-5));
    }
    CHECK((ex.blocks[1].grad.size() > 0) == (std::string(method) != "rollout"));
    CHECK((ex.blocks[0].relevance.size() > 0) == (std::string(method) == "transformer-attribution"));
    // The map is row 0 of the last accumulated product, column 0 dropped.
    const Mat& acc = ex.blocks.back().accumulated;
    for (int i = 0; i < c.model.config.num_patches(); ++i)
      CHECK(ex.token_map.data()[i] == Approx(acc(0, i + 1)).epsilon(1e-5));
  }
}

TEST_CASE("intermediates: the per-head terms of Ā_b, and their head mean is the step", "[methods]") {
  // grad-rollout: (∇A_b,h ⊙ A_b,h)⁺; transformer-attribution: (W_h ⊙ R_{A_b,h})⁺ with W = ∇A, A or
  // none. Each term is recomputed here from the per-head arrays core returns elsewhere (the trace's
  // A, the gradient's ∇A, the intermediates' R_A), and E_h of the terms + I is checked against
  // core's step. Tolerances: the terms from float A and ∇A are exact (same float inputs, one
  // rounding of the double product); R_A reaches us as float while core multiplies its double, so a
  // term may differ by one float rounding (≤ 2⁻²⁴ relative; we allow 1.5e-7); the head mean of
  // float terms against core's float step (mean of double terms, rounded once) by two roundings
  // (we allow 2.5e-7 relative).
  const Case c = load_case("nonsquare");
  const int n = c.model.config.tokens(), H = c.model.config.heads, L = c.model.config.depth;
  ExplainState st;
  st.set_input(c.model, c.input);
  struct Variant {
    const char* method;
    AttnWeight weight;
    int block, start_layer;
  };
  const std::vector<Variant> variants = {{"grad-rollout", AttnWeight::grad, -1, 0},
                                         {"transformer-attribution", AttnWeight::grad, -1, 0},
                                         {"transformer-attribution", AttnWeight::attn, -1, 1},
                                         {"transformer-attribution", AttnWeight::none, -1, 0},
                                         {"transformer-attribution", AttnWeight::grad, 1, 0}};
  for (const Variant& v : variants) {
    MethodOptions opt;
    opt.want_intermediates = true;
    opt.weight = v.weight;
    opt.block = v.block;
    opt.start_layer = v.start_layer;
    const Explanation ex = explain(c.model, st, v.method, opt);
    const bool grad_rollout = std::string(v.method) == "grad-rollout";
    REQUIRE(ex.blocks.size() == size_t(L));
    for (int b = 0; b < L; ++b) {
      INFO(v.method << " weight " << int(v.weight) << " block " << v.block << " start " << v.start_layer << ": block " << b);
      const BlockIntermediates& bi = ex.blocks[size_t(b)];
      const bool used = v.block >= 0 ? b == v.block : b >= v.start_layer;
      if (!used) {
        CHECK(bi.product_heads.empty());
        continue;
      }
      REQUIRE(bi.product_heads.size() == size_t(H));
      // W_h ⊙ X_h from the per-head arrays: X = A (grad-rollout) or R_A; W = ∇A, A or 1.
      const std::vector<Mat>& A = st.trace.blocks[size_t(b)].attn;
      const std::vector<Mat>& dA = st.grads.blocks[size_t(b)].attn;
      if (v.weight == AttnWeight::grad) REQUIRE(st.grads_target == ex.target);
      MatD mean = MatD::Zero(n, n);  // (n, n)
      int worse = 0;
      for (int h = 0; h < H; ++h) {
        const Mat& x = grad_rollout ? A[size_t(h)] : bi.relevance_heads[size_t(h)];
        const double tol = grad_rollout || v.weight == AttnWeight::none ? 0.0 : 1.5e-7;
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            const double w = v.weight == AttnWeight::grad ? double(dA[size_t(h)](i, j))
                             : v.weight == AttnWeight::attn ? double(A[size_t(h)](i, j)) : 1.0;
            const double ref = std::max(0.0, w * double(x(i, j)));
            const double ours = bi.product_heads[size_t(h)](i, j);
            if (std::fabs(ours - double(float(ref))) > tol * ref) ++worse;
            mean(i, j) += ours / H;
          }
      }
      CHECK(worse == 0);
      CHECK(mean.maxCoeff() > 0.0);  // the terms are not all zero
      int off = 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const double want = mean(i, j) + (i == j ? 1.0 : 0.0);  // I + Ā_b
          if (std::fabs(want - double(bi.step(i, j))) > 2.5e-7 * want) ++off;
        }
      CHECK(off == 0);
    }
  }
  // The methods without such a product leave the field empty.
  MethodOptions opt;
  opt.want_intermediates = true;
  for (const char* method : {"rollout", "partial-lrp", "raw-attention"})
    for (const BlockIntermediates& b : explain(c.model, st, method, opt).blocks) CHECK(b.product_heads.empty());
}

TEST_CASE("bad method names and options are errors that say what to do", "[methods]") {
  const Case c = load_case("nonsquare");  // 3 blocks, 5 classes
  auto expect = [&](const std::string& method, const MethodOptions& opt, const std::string& text) {
    try {
      explain(c.model, c.input, method, opt);
      FAIL("no error for " << method);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_argument);
      CHECK_THAT(e.what(), Catch::Contains(text));
    }
  };
  MethodOptions o;
  expect("gradcam", o, "unknown method 'gradcam'; the methods are: raw-attention, rollout");
  o.target = 5;
  expect("grad-rollout", o, "target 5 is out of range: give -1 to 4 (the model has 5 classes), where -1 is the predicted class");
  o.target = -2;
  expect("lrp", o, "target -2 is out of range");
  o = {};
  o.start_layer = 3;
  expect("rollout", o, "start-layer 3 is out of range: give 0 to 2 (the model has 3 blocks)");
  expect("transformer-attribution", o, "start-layer 3");
  o = {};
  o.block = 3;
  expect("transformer-attribution", o, "block 3 is out of range");
  o = {};
  o.discard_ratio = 1.5;
  expect("rollout", o, "discard-ratio 1.5 is out of range: give 0 to 1");
  o.discard_ratio = std::nan("");
  expect("rollout", o, "discard-ratio nan is out of range");
  // Options a method does not read are ignored.
  o = {};
  o.block = 7;
  o.start_layer = 9;
  CHECK_NOTHROW(explain(c.model, c.input, "grad-rollout", o));
  ExplainState empty;
  CHECK_THROWS_WITH(explain(c.model, empty, "rollout", {}), Catch::Contains("no input"));
}

TEST_CASE("registry: every method listed once, with its options", "[methods]") {
  const std::vector<MethodInfo>& reg = method_registry();
  const std::vector<std::string> names = {"raw-attention", "rollout", "attn-gradcam", "grad-rollout",
                                          "transformer-attribution", "partial-lrp", "lrp", "attnlrp", "attattr",
                                          "norm-based", "saliency", "grad-x-input", "integrated-gradients",
                                          "smoothgrad"};
  REQUIRE(reg.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) CHECK(reg[i].name == names[i]);
  CHECK(find_method("integrated-gradients")->long_running);
  CHECK(!find_method("saliency")->long_running);
  CHECK(find_option(*find_method("smoothgrad"), "inner") != nullptr);
  for (const MethodInfo& m : reg) {
    CHECK(find_method(m.name) == &m);
    CHECK(std::string(m.description).size() > 10);
    CHECK(std::string(m.paper).size() > 5);
  }
  CHECK(find_method("nope") == nullptr);
  CHECK(find_option(*find_method("rollout"), "head-fusion") != nullptr);
  CHECK(!find_method("rollout")->class_specific);
  CHECK(find_method("lrp")->native_pixels);
  CHECK(find_method("transformer-attribution")->conserves);
  CHECK(!find_method("attnlrp")->conserves);
}

TEST_CASE("bilinear upsampling with half-pixel centres (align_corners=False)", "[methods]") {
  Mat in(2, 2);
  in << 0, 1, 2, 3;
  Mat want(4, 4);  // by hand: source x = (i + ½)/2 − ½ clamped at 0 → 0, ¼, ¾, 1 (clamped)
  want << 0.0f, 0.25f, 0.75f, 1.0f,  //
      0.5f, 0.75f, 1.25f, 1.5f,      //
      1.5f, 1.75f, 2.25f, 2.5f,      //
      2.0f, 2.25f, 2.75f, 3.0f;
  CHECK((upsample_bilinear(in, 4, 4) - want).cwiseAbs().maxCoeff() < 1e-6f);
  // A ramp along x on a non-square grid (3×5 → 24×40, patch 8): value = source coordinate,
  // clamped to the first and last centre.
  Mat ramp(3, 5);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x) ramp(y, x) = float(x);
  const Mat up = upsample_bilinear(ramp, 24, 40);
  for (int x = 0; x < 40; ++x) {
    const double src = std::min(4.0, std::max(0.0, (x + 0.5) / 8.0 - 0.5));
    CHECK(up(13, x) == Approx(src).margin(1e-6));
  }
  // The token methods' pixel map is exactly this upsampling of their token map.
  const Case c = load_case("nonsquare");
  const Explanation ex = explain(c.model, c.input, "raw-attention");
  CHECK(ex.pixel_map == upsample_bilinear(ex.token_map, 24, 40));
}

TEST_CASE("deit_tiny: the double-precision LRP pass matches the float64 reference", "[methods][deit]") {
  Case c = load_case("deit_tiny");
  // The generator first: the double forward's logits against the reference's.
  TraceD td;
  lrp_forward(td, c.model, c.input);
  const NpyArray logits = read_npy(c.dir + "logits.npy");
  CHECK(rel_max_error(td.logits.data(), logits.data) < 1e-12);
  std::map<int, ExplainState> states;
  const std::map<std::string, double> worst = run_case(c, states);
  CHECK(worst.size() == 7);
  for (const auto& kv : worst) {
    INFO(kv.first);
    CHECK(kv.second <= 1e-4);
  }
  const Explanation ex = explain(c.model, states[113], "lrp");  // the pass is already done
  check_report(ex.conservation, read_json(c.dir + "conservation_lrp_t113.json"), 1e-6);
  CHECK(std::fabs(ex.conservation.tokens_sum - 1.0) < 1e-6);
}

TEST_CASE("precision=float32: partial-lrp and attnlrp on the float pass, near the float64 maps; switching back is exact",
          "[methods][precision]") {
  for (const char* name : {"nonsquare", "gray", "deit_tiny"}) {
    const Case c = load_case(name);
    INFO(name);
    ExplainState st;
    st.set_input(c.model, c.input);
    for (const char* method : {"partial-lrp", "attnlrp"}) {
      INFO(method);
      MethodOptions f32;
      f32.precision = LrpPrecision::float32;
      const Explanation exact = explain(c.model, c.input, method);  // a fresh state: float64
      const Explanation fast = explain(c.model, st, method, f32);
      const Mat& a = std::string(method) == "attnlrp" ? exact.pixel_map : exact.token_map;
      const Mat& b = std::string(method) == "attnlrp" ? fast.pixel_map : fast.token_map;
      const double err = rel_max_error(b.data(), std::vector<double>(a.data(), a.data() + a.size()));
      if (std::getenv("VITLENS_PARITY_REPORT")) std::printf("float32 %-10s %-12s %.3g\n", name, method, err);
      CHECK(err > 0.0);  // the float pass was used: not the float64 maps
      CHECK(err <= 1e-3);  // measured ≤ 6.3e-5 here (README: ≤ 4e-4 on the shipped model's gallery)
      // the same state asked for float64 again recomputes the pass: the exact maps, bit for bit
      const Explanation back = explain(c.model, st, method);
      CHECK(back.token_map == exact.token_map);
      CHECK(back.pixel_map == exact.pixel_map);
      // and a float64 method after a float32 one on the same state reads the float64 pass
      explain(c.model, st, method, f32);
      CHECK(explain(c.model, st, "transformer-attribution").token_map ==
            explain(c.model, c.input, "transformer-attribution").token_map);
    }
  }
  // Not offered where the float32 rounding moves the maps too far (transformer-attribution, lrp).
  for (const char* method : {"transformer-attribution", "lrp"}) {
    const MethodInfo* info = find_method(method);
    REQUIRE(info);
    for (const OptionSpec& o : info->options) CHECK(std::string(o.key) != "precision");
  }
}
