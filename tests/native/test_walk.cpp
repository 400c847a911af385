// test_walk.cpp — the guided walk through a method (walk.h): every value a step draws is the
// method's own (its intermediates, its token or pixel map: compared exactly, as float32), every
// Σ relevance a step states is the conservation report's number (exactly), and the per-token
// relevance sums the LRP passes record for the walk — new numbers — agree with the independent
// float64 reference (tests/reference/make_walk_fixtures.py, tests/fixtures/walk/) to 1e-4 of each
// vector's largest magnitude. On the plain fixture models (nonsquare 24×40, gray 32×32) and on
// variants with extra tokens and other pooling (distilled_hf: CLS + DIST, non-square; reg_gap:
// registers, no CLS, avg pooling, no final norm; avg_fcnorm_cls: fc_norm, pre_norm).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/io/io.h"
#include "vitlens/io/npy.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/methods/walk.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
using vitlens::test::source_path;

namespace {

struct Loaded {
  Model model;
  Image input;
};

// A plain engine-fixture model or a variant case of tests/fixtures/variants/.
Loaded load(const std::string& name) {
  if (name == "nonsquare" || name == "gray") return {test::engine_fixture_model(name), test::engine_fixture_input(name)};
  const std::string dir = source_path("tests/fixtures/variants/" + name + "/");
  const std::vector<uint8_t> cfg = read_file(dir + "config.json", 1 << 20);
  const std::vector<uint8_t> bytes = read_file(dir + "model.safetensors", 1 << 26);
  Loaded l{import_checkpoint(bytes.data(), bytes.size(), std::string(cfg.begin(), cfg.end()), nullptr), Image()};
  const NpyArray x = read_npy(dir + "input.npy");
  l.input = Image(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) l.input.data[i] = float(x.data[i]);
  return l;
}

const char* const kCases[] = {"nonsquare", "gray", "distilled_hf", "reg_gap", "avg_fcnorm_cls"};

// The row a step draws of an (n, n) matrix, written out here: row `query` itself, or q·M in
// double rounded to float (q = the method's query, model.h query_weights).
Vec query_row_of(const Mat& M, const Config& c, int query) {
  if (query >= 0) return M.row(query).transpose();
  const Eigen::RowVectorXd q = query_weights(c).transpose();
  return (q * M.cast<double>()).transpose().cast<float>();
}

// E_h of H (n, n) float matrices, summed in double in head order (as the method does).
Mat mean_of(const std::vector<Mat>& heads) {
  MatD acc = MatD::Zero(heads[0].rows(), heads[0].cols());
  for (const Mat& h : heads) acc += h.cast<double>();
  return (acc / double(heads.size())).cast<float>();
}

const WalkStep& step_of(const MethodWalk& w, const std::string& id) {
  for (const WalkStep& s : w.steps)
    if (s.id == id) return s;
  FAIL("no step " << id);
  return w.steps.front();
}

double report_in(const ConservationReport& r, const std::string& layer) {
  for (const LayerRelevance& l : r.layers)
    if (l.layer == layer) return l.relevance_in;
  FAIL("no layer " << layer);
  return 0;
}

bool same(const Mat& a, const Mat& b) { return a.rows() == b.rows() && a.cols() == b.cols() && a == b; }
bool same(const Vec& a, const Vec& b) { return a.size() == b.size() && a == b; }

// What every step of every walk satisfies: a title, a marked piece inside its formula (but the
// input's and the map's, which mark their own pieces too), shapes for what it reads and writes.
void check_shape_of_steps(const MethodWalk& w, const Config& c) {
  for (const WalkStep& s : w.steps) {
    INFO(w.method << " / " << s.id);
    CHECK(!s.title.empty());
    CHECK(!s.formula.mark.empty());
    CHECK(!s.equation.empty());
    CHECK(!s.writes.empty());
    for (const WalkTensor& t : s.writes) CHECK(!t.shape.empty());
    if (s.row.size()) CHECK(s.row.size() == c.tokens());
    if (s.matrix.size()) CHECK((s.matrix.rows() == c.tokens() && s.matrix.cols() == c.tokens()));
    if (s.has_relevance()) CHECK(!s.conservation.empty());
  }
  CHECK(w.steps.front().id == "input");
}

}  // namespace

TEST_CASE("walk: transformer-attribution's steps are its intermediates, its map and its report", "[walk]") {
  for (const char* name : kCases) {
    const Loaded l = load(name);
    const Config& c = l.model.config;
    struct Variant {
      std::string spec;
      int query;
    };
    for (const Variant& v : {Variant{"transformer-attribution", -1}, Variant{"transformer-attribution:start-layer=1", -1},
                             Variant{"transformer-attribution:no-grad", 1},
                             Variant{"transformer-attribution:block=1:weight=attn", c.tokens() - 1}}) {
      INFO(name << " / " << v.spec << " / query " << v.query);
      ExplainState st;
      st.set_input(l.model, l.input);
      MethodOptions opt;
      parse_method_spec(v.spec, opt, &c);
      WalkOptions wo;
      wo.query = v.query;
      const MethodWalk w = method_walk(l.model, st, "transformer-attribution", opt, wo);
      MethodOptions with = opt;
      with.want_intermediates = true;
      ExplainState fresh;
      fresh.set_input(l.model, l.input);
      const Explanation ex = explain(l.model, fresh, "transformer-attribution", with);
      // The method's pass stops at R_A of its lowest block; lrp (the same rules) resumes it to the
      // pixels: the Σ R at each block's input that the walk shows.
      MethodOptions lrp_opt;
      lrp_opt.target = ex.target;
      const ConservationReport whole = explain(l.model, fresh, "lrp", lrp_opt).conservation;
      check_shape_of_steps(w, c);
      const int first = opt.block >= 0 ? opt.block : opt.start_layer;
      const int last = opt.block >= 0 ? opt.block : c.depth - 1;
      const int per_block = opt.weight == AttnWeight::grad ? 6 : 5;
      CHECK(int(w.steps.size()) == 1 + 2 + int(c.final_norm) + per_block * (last - first + 1) + 1);
      CHECK(w.target == ex.target);
      CHECK(w.seed == ex.conservation.seed_sum);
      CHECK(step_of(w, "seed").relevance == ex.conservation.seed_sum);
      CHECK(step_of(w, "head").relevance == report_in(ex.conservation, "pool"));
      if (c.final_norm) CHECK(step_of(w, "norm").relevance == report_in(ex.conservation, "norm"));
      for (int b = first; b <= last; ++b) {
        INFO("block " << b);
        const BlockIntermediates& bi = ex.blocks[size_t(b)];
        const std::string id = "block." + std::to_string(b) + ".";
        const WalkStep& a = step_of(w, id + "attn");
        CHECK(same(a.matrix, bi.attn));
        CHECK(same(a.row, query_row_of(bi.attn, c, v.query)));
        if (opt.weight == AttnWeight::grad) {
          const WalkStep& g = step_of(w, id + "grad");
          CHECK(same(g.matrix, bi.grad));
          CHECK(same(g.row, query_row_of(bi.grad, c, v.query)));
        }
        const WalkStep& r = step_of(w, id + "relevance");
        CHECK(same(r.matrix, bi.relevance));
        CHECK(same(r.row, query_row_of(bi.relevance, c, v.query)));
        double at_a = 0;
        for (const LayerRelevance& lr : ex.conservation.layers)
          if (lr.layer == "blocks." + std::to_string(b) + ".attn.softmax") at_a = lr.relevance_out;
        CHECK(r.relevance == at_a);
        CHECK(r.sums.back().value == whole.block_input_sums[size_t(b)]);
        CHECK(std::isnan(ex.conservation.block_input_sums[size_t(b)]) == (b == first));
        const WalkStep& bar = step_of(w, id + "bar");
        const Mat bar_mean = mean_of(bi.product_heads);
        CHECK(same(bar.matrix, bar_mean));
        CHECK(same(bar.row, query_row_of(bar_mean, c, v.query)));
        // Ā_b is the factor I + Ā_b without the identity (to float rounding).
        const Mat without_i = bi.step - Mat::Identity(c.tokens(), c.tokens());
        CHECK((bar.matrix - without_i).cwiseAbs().maxCoeff() < 1e-6);
        const WalkStep& s = step_of(w, id + "step");
        CHECK(same(s.matrix, bi.step));
        CHECK(same(s.row, query_row_of(bi.step, c, v.query)));
        const WalkStep& acc = step_of(w, id + "accumulated");
        CHECK(same(acc.matrix, bi.accumulated));
        CHECK(same(acc.row, query_row_of(bi.accumulated, c, v.query)));
        CHECK(acc.formula.mark == (b == first ? "C_" + std::to_string(b) + " = (I + Ā_" + std::to_string(b) + ")"
                                              : "C_" + std::to_string(b) + " = (I + Ā_" + std::to_string(b) + ")·C_" +
                                                    std::to_string(b - 1)));
      }
      const WalkStep& map = w.steps.back();
      CHECK(map.id == "map");
      if (v.query < 0) CHECK(same(map.map, ex.token_map));
      else {
        // Another token's row of C over the patches, on the grid.
        const Vec row = ex.blocks[size_t(last)].accumulated.row(v.query).transpose();
        REQUIRE(map.map.size() == c.num_patches());
        for (int p = 0; p < c.num_patches(); ++p) CHECK(map.map.data()[p] == row[c.prefix() + p]);
      }
    }
  }
}

TEST_CASE("walk: rollout's steps are its fused attention, its factors, its products and its map", "[walk]") {
  for (const char* name : kCases) {
    const Loaded l = load(name);
    const Config& c = l.model.config;
    const int n = c.tokens();
    for (const std::string spec : {"rollout", "rollout:head-fusion=max:discard-ratio=0.5", "rollout:head-fusion=min:start-layer=1"}) {
      INFO(name << " / " << spec);
      ExplainState st;
      st.set_input(l.model, l.input);
      MethodOptions opt;
      parse_method_spec(spec, opt, &c);
      const MethodWalk w = method_walk(l.model, st, "rollout", opt);
      MethodOptions with = opt;
      with.want_intermediates = true;
      const Explanation ex = explain(l.model, st, "rollout", with);
      check_shape_of_steps(w, c);
      const bool discard = opt.discard_ratio > 0;
      CHECK(int(w.steps.size()) == 1 + (3 + int(discard)) * (c.depth - opt.start_layer) + 1);
      CHECK(std::isnan(w.seed));
      for (int b = opt.start_layer; b < c.depth; ++b) {
        INFO("block " << b);
        const std::string id = "block." + std::to_string(b) + ".";
        // F_b, the head fusion, written out: the mean is the intermediates' E_h A_b; max and min
        // are exact elementwise.
        const std::vector<Mat>& A = st.trace.blocks[size_t(b)].attn;
        Mat fused = A[0];
        for (size_t h = 1; h < A.size(); ++h)
          fused = opt.head_fusion == HeadFusion::max ? Mat(fused.cwiseMax(A[h])) : Mat(fused.cwiseMin(A[h]));
        const WalkStep& f = step_of(w, id + "fuse");
        CHECK(same(f.matrix, opt.head_fusion == HeadFusion::mean ? ex.blocks[size_t(b)].attn : fused));
        if (discard) {
          const WalkStep& d = step_of(w, id + "discard");
          int zeros = 0, zeros_before = 0;
          for (Eigen::Index i = 0; i < d.matrix.size(); ++i) {
            zeros += d.matrix.data()[i] == 0.0f;
            zeros_before += f.matrix.data()[i] == 0.0f;
          }
          // ⌊0.5·n²⌋ entries zeroed, (0, 0) kept (it may be among them: then one fewer).
          CHECK(zeros >= std::max(zeros_before, n * n / 2 - 1));
          CHECK(d.matrix(0, 0) == f.matrix(0, 0));
        }
        const WalkStep& s = step_of(w, id + "step");
        CHECK(same(s.matrix, ex.blocks[size_t(b)].step));
        // Row-normalised: every row of Â_b sums to 1.
        CHECK((s.matrix.cast<double>().rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-6);
        const WalkStep& acc = step_of(w, id + "accumulated");
        CHECK(same(acc.matrix, ex.blocks[size_t(b)].accumulated));
        CHECK(same(acc.row, query_row_of(ex.blocks[size_t(b)].accumulated, c, -1)));
      }
      CHECK(same(w.steps.back().map, ex.token_map));
      // The last product's query row over the patches is the map (to float rounding: the method
      // applies the factors to the row vector from the last block down).
      const Vec row = step_of(w, "block." + std::to_string(c.depth - 1) + ".accumulated").row;
      for (int p = 0; p < c.num_patches(); ++p)
        CHECK(std::fabs(row[c.prefix() + p] - ex.token_map.data()[p]) <= 1e-6 * ex.token_map.cwiseAbs().maxCoeff());
    }
  }
}

TEST_CASE("walk: attnlrp's Σ relevance at every step is its conservation report's", "[walk]") {
  for (const char* name : kCases) {
    INFO(name);
    const Loaded l = load(name);
    const Config& c = l.model.config;
    ExplainState st;
    st.set_input(l.model, l.input);
    const MethodWalk w = method_walk(l.model, st, "attnlrp", {});
    MethodOptions with;
    with.want_intermediates = true;
    const Explanation ex = explain(l.model, st, "attnlrp", with);
    const ConservationReport& r = ex.conservation;
    check_shape_of_steps(w, c);
    CHECK(int(w.steps.size()) == 1 + 2 + int(c.final_norm) + 9 * c.depth + int(c.pre_norm) + 2);
    CHECK(w.seed == r.seed_sum);
    const std::vector<std::pair<std::string, std::string>> per_block = {
        {"add2", "add2"},   {"ff", "mlp.fc1"},      {"ln2", "norm2"},        {"residual2", "clone2"}, {"add1", "add1"},
        {"attention", "attn.A_v"}, {"scores", "attn.qkv"}, {"ln1", "norm1"}, {"residual1", "clone1"}};
    for (int b = 0; b < c.depth; ++b)
      for (const auto& [id, layer] : per_block) {
        INFO("block " << b << " " << id);
        const WalkStep& s = step_of(w, "block." + std::to_string(b) + "." + id);
        CHECK(s.relevance == report_in(r, "blocks." + std::to_string(b) + "." + layer));
        CHECK(s.layers.back() == "blocks." + std::to_string(b) + "." + layer);
      }
    for (int b = 0; b < c.depth; ++b)
      CHECK(step_of(w, "block." + std::to_string(b) + ".residual1").relevance == r.block_input_sums[size_t(b)]);
    CHECK(step_of(w, "map").relevance == r.tokens_sum);
    CHECK(step_of(w, "pixels").relevance == r.image_sum);
    CHECK(same(step_of(w, "map").map, ex.token_map));
    CHECK(same(step_of(w, "pixels").map, ex.pixel_map));
    if (c.pre_norm) CHECK(step_of(w, "prenorm").relevance == report_in(r, "norm_pre"));
    // The drawn rows are the pass's per-token sums, and they add up to the step's Σ.
    const RelevancePass& pass = st.attnlrp;
    for (int b = 0; b < c.depth; ++b) {
      const BlockTokenRelevance& t = pass.block_tokens[size_t(b)];
      const std::string id = "block." + std::to_string(b) + ".";
      CHECK(same(step_of(w, id + "add2").row, t.ff_branch.cast<float>()));
      CHECK(same(step_of(w, id + "ff").row, t.ff_in.cast<float>()));
      CHECK(same(step_of(w, id + "ln2").row, t.ff_path.cast<float>()));
      CHECK(same(step_of(w, id + "residual2").row, t.mid.cast<float>()));
      CHECK(same(step_of(w, id + "add1").row, t.attn_branch.cast<float>()));
      CHECK(same(step_of(w, id + "scores").row, t.attn_in.cast<float>()));
      CHECK(same(step_of(w, id + "ln1").row, t.attn_path.cast<float>()));
      CHECK(same(step_of(w, id + "residual1").row, t.input.cast<float>()));
      CHECK(same(step_of(w, id + "attention").matrix, ex.blocks[size_t(b)].relevance));
      // The per-token sums add up to the report's totals (summed in another order: 1e-9).
      const std::string pre = "blocks." + std::to_string(b) + ".";
      const double scale = std::max(1.0, std::fabs(r.seed_sum));
      CHECK(std::fabs(t.input.sum() - r.block_input_sums[size_t(b)]) < 1e-9 * scale);
      CHECK(std::fabs(t.mid.sum() - report_in(r, pre + "clone2")) < 1e-9 * scale);
      CHECK(std::fabs(t.residual2.sum() + t.ff_branch.sum() - report_in(r, pre + "add2")) < 1e-9 * scale);
      CHECK(std::fabs(t.q.sum() + t.k.sum() - report_in(r, pre + "attn.q_kT")) < 1e-9 * scale);
      double at_a = 0;
      for (const LayerRelevance& lr : r.layers)
        if (lr.layer == pre + "attn.softmax") at_a = lr.relevance_out;
      CHECK(std::fabs(t.v.sum() - (report_in(r, pre + "attn.A_v") - at_a)) < 1e-9 * scale);
      CHECK(std::fabs(t.attn_in.sum() - report_in(r, pre + "attn.qkv")) < 1e-9 * scale);
    }
    CHECK(same(step_of(w, "head").row, pass.pool_tokens.cast<float>()));
    CHECK(same(step_of(w, "map").row, pass.e0_tokens.cast<float>()));
  }
}

TEST_CASE("walk: the per-token relevance sums agree with the float64 reference", "[walk][reference]") {
  for (const char* name : kCases) {
    const Loaded l = load(name);
    const Config& c = l.model.config;
    for (const char* rules : {"chefer", "attnlrp"}) {
      INFO(name << " / " << rules);
      std::ifstream f(source_path("tests/fixtures/walk/" + std::string(name) + "_" + rules + ".json"));
      REQUIRE(f.good());
      const nlohmann::json ref = nlohmann::json::parse(f);
      REQUIRE(ref["tokens"].get<int>() == c.tokens());
      ExplainState st;
      st.set_input(l.model, l.input);
      MethodOptions opt;
      opt.target = ref["target"];
      // lrp and attnlrp carry their pass to the pixels, so E0's sums are there too.
      explain(l.model, st, std::string(rules) == "chefer" ? "lrp" : "attnlrp", opt);
      const RelevancePass& pass = std::string(rules) == "chefer" ? st.chefer : st.attnlrp;
      double worst = 0;
      auto check = [&](const VecD& got, const nlohmann::json& want, const std::string& what) {
        const std::vector<double> w = want;
        REQUIRE(size_t(got.size()) == w.size());
        double scale = 0, err = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          scale = std::max(scale, std::fabs(w[i]));
          err = std::max(err, std::fabs(got[Eigen::Index(i)] - w[i]));
        }
        INFO(what << ": max |Δ| " << err << " of max |ref| " << scale);
        CHECK(err <= 1e-4 * scale);
        if (scale > 0) worst = std::max(worst, err / scale);
      };
      check(pass.pool_tokens, ref["pool"], "pool");
      check(pass.output_tokens, ref["output"], "output");
      check(pass.e0_tokens, ref["e0"], "e0");
      const std::vector<std::string> names = ref["names"];
      for (int b = 0; b < c.depth; ++b) {
        const BlockTokenRelevance& t = pass.block_tokens[size_t(b)];
        const VecD* got[] = {&t.output, &t.residual2, &t.ff_branch, &t.ff_in,   &t.ff_path,   &t.mid,
                             &t.residual1, &t.attn_branch, &t.ctx, &t.q, &t.k, &t.v, &t.attn_in, &t.attn_path, &t.input};
        REQUIRE(names.size() == std::size(got));
        for (size_t k = 0; k < names.size(); ++k)
          check(*got[k], ref["blocks"][size_t(b)][k], "block " + std::to_string(b) + " " + names[k]);
      }
      WARN(name << " / " << rules << ": worst max |Δ| / max |ref| over the per-token sums " << worst);
    }
  }
}

TEST_CASE("walk: refuses a method without a walk and a query that is not a token", "[walk]") {
  const Loaded l = load("gray");
  ExplainState st;
  st.set_input(l.model, l.input);
  try {
    method_walk(l.model, st, "grad-rollout", {});
    FAIL("grad-rollout has no walk");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_argument);
    CHECK(std::string(e.what()).find("transformer-attribution, attnlrp, rollout") != std::string::npos);
  }
  WalkOptions w;
  w.query = l.model.config.tokens();
  try {
    method_walk(l.model, st, "rollout", {}, w);
    FAIL("the query is past the last token");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_argument);
    CHECK(std::string(e.what()).find("17 tokens") != std::string::npos);
  }
  MethodOptions opt;
  opt.start_layer = 5;  // the model has 2 blocks
  CHECK_THROWS_AS(method_walk(l.model, st, "rollout", opt), Error);
  // Without matrices the steps carry their rows only.
  WalkOptions rows_only;
  rows_only.matrices = false;
  const MethodWalk lean = method_walk(l.model, st, "transformer-attribution", {}, rows_only);
  for (const WalkStep& s : lean.steps) CHECK(s.matrix.size() == 0);
  CHECK(has_walk("attnlrp"));
  CHECK_FALSE(has_walk("lrp"));
}

TEST_CASE("walk: the JSON of a walk carries every step, its formula and its values", "[walk]") {
  const Loaded l = load("nonsquare");
  ExplainState st;
  st.set_input(l.model, l.input);
  const MethodWalk w = method_walk(l.model, st, "transformer-attribution", {});
  const nlohmann::json j = nlohmann::json::parse(walk_json(w));
  CHECK(j["method"] == "transformer-attribution");
  REQUIRE(j["steps"].size() == w.steps.size());
  for (size_t i = 0; i < w.steps.size(); ++i) {
    const WalkStep& s = w.steps[i];
    const nlohmann::json& o = j["steps"][i];
    CHECK(o["id"] == s.id);
    CHECK(o["formula"]["mark"] == s.formula.mark);
    CHECK(o["row"].size() == size_t(s.row.size()));
    if (s.has_relevance()) CHECK(o["relevance"].get<double>() == s.relevance);
    else CHECK(o["relevance"].is_null());
    if (s.matrix.size()) CHECK(o["matrix"].size() == size_t(s.matrix.size()));
    for (Eigen::Index k = 0; k < s.row.size(); ++k) CHECK(o["row"][size_t(k)].get<float>() == s.row[k]);
  }
}
