// test_head_pruning.cpp — heads switched off by hand (head_pruning.h, ExplainState's head mask):
// every method of the masked model against the same model with the off heads' projection columns
// zeroed, and against the float64 reference (tests/reference/make_heads_fixtures.py); attattr's
// batched pass under a mask against its unbatched definition; one image's pruning curve against a
// forward pass with each cumulative mask (brute force) and against the reference's curve, and
// going on from the steps it keeps; the rankings of one image; head lists as text; bad masks refused.
// Set VITLENS_PARITY_REPORT=1 to print the worst differences.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "json_fixture.h"
#include "vitlens/io/io.h"
#include "vitlens/io/npy.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/methods/head_pruning.h"
#include "vitlens/methods/methods.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::read_json;
using vitlens::test::source_path;

namespace {

// A variant reference's model and input (tests/fixtures/variants/<name>/): registers, a
// distillation token, LayerScale.
std::pair<Model, Image> variant_case(const std::string& name) {
  const std::string dir = source_path("tests/fixtures/variants/" + name + "/");
  const nlohmann::json meta = read_json(dir + "meta.json");
  const std::vector<uint8_t> cfg = read_file(dir + "config.json", 1 << 20);
  const std::vector<uint8_t> bytes = read_file(dir + "model.safetensors", 1 << 26);
  Model m = import_checkpoint(bytes.data(), bytes.size(), std::string(cfg.begin(), cfg.end()), nullptr);
  if (meta.contains("explained_image_size"))
    m = resize_input(m, meta["explained_image_size"][0].get<int>(), meta["explained_image_size"][1].get<int>());
  const NpyArray x = read_npy(dir + "input.npy");
  Image img(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) img.data[i] = float(x.data[i]);
  return {m, img};
}

// The model whose off heads' input columns of W_proj are zero: their context never reaches the
// block's output, as with the mask, but their attention is still computed and recorded.
Model zero_projection(Model m, const std::vector<int>& off) {
  const int H = m.config.heads, dh = m.config.dim / H;
  for (int f : off) m.params.blocks[size_t(f / H)].proj_w.middleCols(Eigen::Index(f % H) * dh, dh).setZero();
  return m;
}

// max |a − b| / max |b|.
double rel_diff(const Mat& a, const Mat& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  const double scale = std::max(1e-30, double(b.cwiseAbs().maxCoeff()));
  return double((a - b).cwiseAbs().maxCoeff()) / scale;
}

std::vector<double> npy(const std::string& path) { return read_npy(path).data; }

void report(const std::string& what, double worst) {
  if (std::getenv("VITLENS_PARITY_REPORT")) std::printf("heads %-60s %.3g\n", what.c_str(), worst);
}

}  // namespace

TEST_CASE("with heads off, every method equals the model with their projection columns zeroed", "[heads]") {
  // nonsquare: 3 blocks × 4 heads, a whole block off; dinov2_reg: registers, token+avg pooling,
  // LayerScale; distilled_hf: [CLS][DIST].
  struct Setup {
    std::string name;
    Model model;
    Image x;
    std::string off;
  };
  std::vector<Setup> setups;
  setups.push_back({"nonsquare", test::engine_fixture_model("nonsquare"), test::engine_fixture_input("nonsquare"), "0.1, 1.*, 2.2"});
  for (const char* v : {"dinov2_reg", "distilled_hf"}) {
    auto [m, x] = variant_case(v);
    setups.push_back({v, m, x, "0.0," + std::to_string(m.config.depth - 1) + ".1"});  // the last block too (raw-attention's)
  }
  for (const Setup& s : setups) {
    INFO(s.name << ", heads off " << s.off);
    const Config& c = s.model.config;
    const std::vector<int> off = parse_head_list(s.off, c);
    const Model zeroed = zero_projection(s.model, off);
    ExplainState masked, plain;
    masked.set_input(s.model, s.x, head_mask_off(off, c));
    plain.set_input(zeroed, s.x);
    REQUIRE(masked.trace.head_mask == head_mask_off(off, c));
    CHECK(rel_diff(masked.trace.logits, plain.trace.logits) < 1e-6);
    double worst = 0;
    for (const MethodInfo& info : method_registry()) {
      INFO(info.name);
      MethodOptions opt;
      opt.target = 0;  // one class for both, whatever each predicts
      const Explanation a = explain(s.model, masked, info.name, opt);
      const Explanation b = explain(zeroed, plain, info.name, opt);
      const double dt = rel_diff(a.token_map, b.token_map), dp = rel_diff(a.pixel_map, b.pixel_map);
      if (std::string(info.name) == "raw-attention" || std::string(info.name) == "rollout") {
        // These two read A itself, with no factor that vanishes with the head: the masked model's
        // A of an off head is 0, the zeroed model's is its softmax. So here the two models differ.
        CHECK(dt > 1e-3);
      } else {
        // Every other method multiplies an off head's A, or its relevance, by something that is 0
        // in both models (A = 0 masked; ∂y/∂ctx_h = 0 and R_ctx_h = 0 zeroed), or differentiates
        // the output, which the two models compute alike.
        CHECK(dt < 1e-5);
        CHECK(dp < 1e-5);
        worst = std::max({worst, dt, dp});
      }
    }
    report(s.name + ": masked vs zeroed W_proj, every method but raw-attention and rollout", worst);
  }
}

TEST_CASE("with heads off, the maps match the float64 reference", "[heads]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    INFO(shape);
    const std::string dir = source_path(std::string("tests/fixtures/heads/") + shape + "/");
    const nlohmann::json meta = read_json(dir + "meta.json");
    const Model m = test::engine_fixture_model(shape);
    std::string off_text;
    for (const auto& h : meta["off"]) off_text += (off_text.empty() ? "" : ",") + h.get<std::string>();
    ExplainState st;
    st.set_input(m, test::engine_fixture_input(shape), head_mask_off(parse_head_list(off_text, m.config), m.config));
    CHECK(rel_max_error(st.trace.logits, npy(dir + "logits.npy")) < 1e-5);
    const int target = meta["target"].get<int>();
    CHECK(top_k(m.config, st.trace.logits, 1)[0].cls == target);
    double worst = 0;
    for (const auto& entry : meta["maps"]) {
      const std::string method = entry["method"].get<std::string>();
      INFO(method);
      MethodOptions opt;
      opt.target = target;
      const Explanation e = explain(m, st, method, opt);
      const MethodInfo* info = find_method(method);
      const Mat& map = info->native_pixels ? e.pixel_map : e.token_map;
      const double err = rel_max_error(map.data(), npy(dir + entry["file"].get<std::string>()));
      // The same tolerance as the unmasked parity tests (README: ≤ 1e-4 of the largest magnitude).
      CHECK(err < 1e-4);
      worst = std::max(worst, err);
    }
    report(std::string(shape) + ": masked maps vs the float64 reference", worst);
  }
}

TEST_CASE("attattr under a head mask: the batched pass equals the unbatched definition", "[heads]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Config& c = m.config;
  ForwardOptions fo;
  fo.head_mask = head_mask_off(parse_head_list("0.2,1.0,2.*", c), c);
  Trace tr;
  vit_forward(tr, m, test::engine_fixture_input("nonsquare"), fo);
  const int target = top_k(c, tr.logits, 1)[0].cls;
  const std::vector<AttAttrBlock> fast = attattr_blocks(m, tr, target, 5);
  const std::vector<AttAttrBlock> naive = attattr_blocks_naive(m, tr, target, 5);
  double scale = 0, worst = 0;
  for (int l = 0; l < c.depth; ++l)
    for (int h = 0; h < c.heads; ++h) {
      const Mat& a = fast[size_t(l)].attr[size_t(h)];
      scale = std::max(scale, double(naive[size_t(l)].attr[size_t(h)].cwiseAbs().maxCoeff()));
      worst = std::max(worst, double((a - naive[size_t(l)].attr[size_t(h)]).cwiseAbs().maxCoeff()));
      if (fo.head_mask[size_t(l * c.heads + h)] == 0.0f) CHECK(a.cwiseAbs().maxCoeff() == 0.0f);  // A = 0 ⇒ Attr = 0
    }
  CHECK(worst / scale < 1e-5);
  // The unmasked pass differs: the mask reaches the blocks above (block 2 is all off here).
  Trace plain;
  vit_forward(plain, m, test::engine_fixture_input("nonsquare"));
  const std::vector<AttAttrBlock> unmasked = attattr_blocks(m, plain, target, 5);
  CHECK((unmasked[0].attr[0] - fast[0].attr[0]).cwiseAbs().maxCoeff() > 1e-6 * scale);
}

TEST_CASE("one image's pruning curve equals a forward pass with each cumulative mask", "[heads]") {
  struct Setup {
    std::string name;
    Model model;
    Image x;
  };
  std::vector<Setup> setups;
  setups.push_back({"nonsquare", test::engine_fixture_model("nonsquare"), test::engine_fixture_input("nonsquare")});
  for (const char* v : {"dinov2_reg", "distilled_hf", "reg_gap"}) {
    auto [m, x] = variant_case(v);
    setups.push_back({v, m, x});
  }
  for (const Setup& s : setups) {
    INFO(s.name);
    const Config& c = s.model.config;
    const int total = c.depth * c.heads;
    double brute = 0;
    Trace tr;
    vit_forward(tr, s.model, s.x);
    const int pred = top_k(c, tr.logits, 1)[0].cls;
    // A full ranking (attention confidence) and a partial order out of block order (clicks).
    const std::vector<int> ranked = image_head_ranking(s.model, tr, pred, HeadRanking::attention, {}).order;
    std::vector<int> clicks = {total - 1, 0};
    if (total > 3) clicks.push_back(total / 2);
    for (const std::vector<int>& order : {ranked, clicks}) {
      for (int target : {-1, (pred + 1) % c.classes}) {
        const ImagePruningCurve curve = image_pruning_curve(s.model, s.x, order, target);
        REQUIRE(curve.prob.size() == order.size() + 1);
        REQUIRE(curve.top.size() == order.size() + 1);
        CHECK(curve.order == order);
        CHECK(curve.original == pred);
        CHECK(curve.target == (target < 0 ? pred : target));
        int first_change = -1;
        std::vector<float> mask(size_t(total), 1.0f);
        for (size_t k = 0; k <= order.size(); ++k) {
          if (k > 0) mask[size_t(order[k - 1])] = 0.0f;
          ForwardOptions fo;
          fo.head_mask = mask;
          Trace t;
          vit_forward(t, s.model, s.x, fo);
          const Vec p = output_probs(c, t.logits);
          CHECK(curve.prob[k] == Approx(double(p[curve.target])).margin(1e-6).epsilon(0));
          CHECK(curve.logit[k] == Approx(double(t.logits[curve.target])).margin(1e-6).epsilon(0));
          CHECK(curve.top[k] == top_k(c, t.logits, 1)[0].cls);
          brute = std::max(brute, std::fabs(curve.prob[k] - double(p[curve.target])));
          if (first_change < 0 && curve.top[k] != pred) first_change = int(k);
        }
        CHECK(curve.first_change == first_change);
      }
    }
    report(s.name + ": pruning curve, |Δ prob| vs a forward pass with each mask", brute);
    // Every head off: the prediction no longer depends on the image (the patch tokens reach the
    // pooled tokens only through attention, and avg pooling of the patches sees each patch alone,
    // so only a model pooling the CLS/DIST token alone is image-independent).
    if (c.pool == Pooling::token) {
      const ImagePruningCurve a = image_pruning_curve(s.model, s.x, ranked, 0);
      const ImagePruningCurve b = image_pruning_curve(s.model, random_input(c, 77), ranked, 0);
      CHECK(a.prob.front() != Approx(b.prob.front()).margin(1e-6));  // with the heads on, it does
      CHECK(a.prob.back() == Approx(b.prob.back()).margin(1e-6));
    }
  }
}

TEST_CASE("one image's pruning curve goes on from the steps it keeps, the same bit for bit", "[heads]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Image x = test::engine_fixture_input("nonsquare");
  const Config& c = m.config;
  const int total = c.depth * c.heads;
  Trace tr;
  vit_forward(tr, m, x);
  const int pred = top_k(c, tr.logits, 1)[0].cls;
  const std::vector<int> ranked = image_head_ranking(m, tr, pred, HeadRanking::attention, {}).order;
  const int K = int(ranked.size());
  REQUIRE(K >= 8);
  auto same = [](const ImagePruningCurve& a, const ImagePruningCurve& b) {
    CHECK(a.order == b.order);
    CHECK(a.prob == b.prob);
    CHECK(a.logit == b.logit);
    CHECK(a.top == b.top);
    CHECK(a.original == b.original);
    CHECK(a.target == b.target);
    CHECK(a.first_change == b.first_change);
  };
  // The steps a call ran: its progress reports, one after each.
  std::vector<double> reports;
  const ProgressFn count = [&](double f) {
    reports.push_back(f);
    return true;
  };
  PruningKept kept;

  // Stopped after its third step, then asked again: it runs the steps after the third only.
  int stop_after = 3;
  CHECK_THROWS_AS(image_pruning_curve(m, x, ranked, -1, [&](double) { return --stop_after > 0; }, &kept), Error);
  REQUIRE(kept.entries.size() == 1);
  CHECK(kept.entries[0].order.size() == 3);
  const ImagePruningCurve resumed = image_pruning_curve(m, x, ranked, -1, count, &kept);
  same(resumed, image_pruning_curve(m, x, ranked));
  REQUIRE(reports.size() == size_t(K - 3));
  CHECK(reports.front() == Approx(4.0 / K));
  CHECK(reports.back() == 1.0);

  // Heads dropped from the order's end: no step runs; another class reads the same steps.
  const std::vector<int> first5(ranked.begin(), ranked.begin() + 5);
  reports.clear();
  same(image_pruning_curve(m, x, first5, -1, count, &kept), image_pruning_curve(m, x, first5));
  same(image_pruning_curve(m, x, ranked, (pred + 1) % c.classes, count, &kept),
       image_pruning_curve(m, x, ranked, (pred + 1) % c.classes));
  CHECK(reports.empty());

  // Clicks: one head more runs one step, in an entry of its own beside the ranking's.
  std::vector<int> clicks = {total - 1, 0};
  same(image_pruning_curve(m, x, clicks, -1, count, &kept), image_pruning_curve(m, x, clicks));
  clicks.push_back(total / 2);
  reports.clear();
  same(image_pruning_curve(m, x, clicks, -1, count, &kept), image_pruning_curve(m, x, clicks));
  CHECK(reports.size() == 1);
  CHECK(kept.entries.size() == 2);

  // At capacity the least recently used entry goes: two more orders replace the ranking's.
  for (const std::vector<int>& order : {std::vector<int>{1}, std::vector<int>{2, 3}})
    same(image_pruning_curve(m, x, order, -1, {}, &kept), image_pruning_curve(m, x, order));
  CHECK(kept.entries.size() == PruningKept::capacity);
  reports.clear();
  same(image_pruning_curve(m, x, clicks, -1, count, &kept), image_pruning_curve(m, x, clicks));
  CHECK(reports.empty());
  same(image_pruning_curve(m, x, first5, -1, count, &kept), image_pruning_curve(m, x, first5));
  CHECK(reports.size() == 5);
  // Every head on (an empty order) reads the most recently used entry and leaves the order of the
  // entries as it was.
  const std::vector<std::vector<int>> orders_before = [&] {
    std::vector<std::vector<int>> o;
    for (const PruningKept::Steps& e : kept.entries) o.push_back(e.order);
    return o;
  }();
  same(image_pruning_curve(m, x, {}, -1, {}, &kept), image_pruning_curve(m, x, {}));
  REQUIRE(kept.entries.size() == orders_before.size());
  for (size_t i = 0; i < orders_before.size(); ++i) CHECK(kept.entries[i].order == orders_before[i]);
}

TEST_CASE("one image's pruning curve matches the float64 reference", "[heads]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    INFO(shape);
    const nlohmann::json ref = read_json(source_path(std::string("tests/fixtures/heads/") + shape + "/curve.json"));
    const Model m = test::engine_fixture_model(shape);
    const ImagePruningCurve curve = image_pruning_curve(m, test::engine_fixture_input(shape), ref["order"].get<std::vector<int>>());
    CHECK(curve.target == ref["target"].get<int>());
    const std::vector<double> prob = ref["prob"], logit = ref["logit"];
    const std::vector<int> top = ref["top"];
    REQUIRE(curve.prob.size() == prob.size());
    double worst = 0;
    for (size_t k = 0; k < prob.size(); ++k) {
      worst = std::max(worst, std::fabs(curve.prob[k] - prob[k]));
      CHECK(curve.prob[k] == Approx(prob[k]).margin(2e-6).epsilon(0));  // float32 engine, float64 reference
      CHECK(curve.logit[k] == Approx(logit[k]).margin(1e-5).epsilon(0));
      CHECK(curve.top[k] == top[k]);
    }
    report(std::string(shape) + ": pruning curve, |Δ prob| vs the float64 reference", worst);
  }
}

TEST_CASE("one image's rankings are its head scores in ascending order", "[heads]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Config& c = m.config;
  Trace tr;
  vit_forward(tr, m, test::engine_fixture_input("nonsquare"));
  const int target = top_k(c, tr.logits, 1)[0].cls;
  const std::vector<AttAttrBlock> attr = attattr_blocks(m, tr, target, 20);
  HeadScores want = head_scores_zero(c);
  head_scores_add(want, m, tr, target, attr);
  for (int i = 0; i < head_ranking_count; ++i) {
    const HeadRanking r = HeadRanking(i);
    INFO(head_ranking_name(r));
    CHECK(parse_head_ranking(head_ranking_name(r)) == r);
    const ImageHeadRanking got = image_head_ranking(m, tr, target, r, attr);
    CHECK(got.order == pruning_order(ranking_scores(want, r)));
    const MatD& s = ranking_scores(got.scores, r);
    for (size_t k = 1; k < got.order.size(); ++k) CHECK(s.data()[got.order[k - 1]] <= s.data()[got.order[k]]);
  }
  CHECK(parse_head_ranking("attention") == HeadRanking::attention);
  CHECK_THROWS_AS(parse_head_ranking("random"), Error);
  CHECK_THROWS_AS(image_head_ranking(m, tr, target, HeadRanking::attattr, {}), Error);  // attattr needs Attr
  CHECK_NOTHROW(image_head_ranking(m, tr, target, HeadRanking::attention, {}));
  // The attention confidence of one image by hand: mean_i max_j A_l,h.
  const ImageHeadRanking conf = image_head_ranking(m, tr, target, HeadRanking::attention, {});
  const MatD& a = tr.blocks[1].attn[2].cast<double>();
  CHECK(conf.scores.attention(1, 2) == Approx(a.rowwise().maxCoeff().mean()).epsilon(1e-12));
  ForwardOptions fo;
  fo.head_mask = head_mask_off({1}, c);
  Trace masked;
  vit_forward(masked, m, test::engine_fixture_input("nonsquare"), fo);
  CHECK_THROWS_AS(image_head_ranking(m, masked, target, HeadRanking::attention, {}), Error);
}

TEST_CASE("head lists as text, masks and bad input", "[heads]") {
  const Model m = test::engine_fixture_model("nonsquare");  // 3 blocks × 4 heads
  const Config& c = m.config;
  CHECK(parse_head_list("", c).empty());
  CHECK(parse_head_list(" 2.3 ,0.0", c) == std::vector<int>{11, 0});
  CHECK(parse_head_list("1.*,0.2", c) == std::vector<int>{4, 5, 6, 7, 2});
  CHECK(head_name(6, c) == "1.2");
  for (const char* bad : {"3.0", "0.4", "1", "a.b", "1.1,1.1", "1.*,1.2", "1.-1", ",", "0.1,"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_head_list(bad, c), Error);
  }
  const std::vector<float> mask = head_mask_off({4, 11}, c);
  REQUIRE(mask.size() == 12);
  for (int f = 0; f < 12; ++f) CHECK(mask[size_t(f)] == (f == 4 || f == 11 ? 0.0f : 1.0f));
  CHECK_THROWS_AS(head_mask_off({12}, c), Error);
  CHECK_THROWS_AS(head_mask_off({-1}, c), Error);

  const Image x = test::engine_fixture_input("nonsquare");
  ExplainState st;
  CHECK_THROWS_AS(st.set_input(m, x, std::vector<float>(11, 1.0f)), Error);  // not L·H values
  std::vector<float> half(12, 1.0f);
  half[3] = 0.5f;
  CHECK_THROWS_AS(st.set_input(m, x, half), Error);  // 0 or 1 only
  CHECK_THROWS_AS(image_pruning_curve(m, x, {0, 0}), Error);
  CHECK_THROWS_AS(image_pruning_curve(m, x, {12}), Error);
  CHECK_THROWS_AS(image_pruning_curve(m, x, {0}, c.classes), Error);
  int calls = 0;
  CHECK_THROWS_AS(image_pruning_curve(m, x, {0, 1, 2}, -1, [&](double) { return ++calls < 2; }), Error);
  CHECK(calls == 2);
  // A mask that switches nothing off explains as no mask at all.
  ExplainState a, b;
  a.set_input(m, x, std::vector<float>(12, 1.0f));
  b.set_input(m, x);
  CHECK(explain(m, a, "transformer-attribution").token_map == explain(m, b, "transformer-attribution").token_map);
}
