// test_attattr.cpp — attattr (Hao et al. 2021) against the float64 reference
// (tests/reference/make_attattr_fixtures.py): the matrices, the image map, the head scores and the
// attribution tree; the batched pass against the unbatched definition; convergence of the left
// Riemann sum to the exact integral; threads, progress and cancellation, and a stopped pass going
// on from the units it finished; head pruning and the
// per-layer analysis; the two tree conventions, on the reference's trees and on hand-made matrices
// where they differ.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "helpers.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/safetensors.h"

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::source_path;

namespace {

struct Case {
  std::string dir;
  nlohmann::json meta;
  Model model;
  Image input;
};

// tests/fixtures/attattr/<shape>_<output>/ with the engine fixture's model and input.
Case load_case(const std::string& shape, const std::string& output) {
  Case c;
  c.dir = source_path("tests/fixtures/attattr/" + shape + "_" + output + "/");
  std::ifstream meta(c.dir + "meta.json");
  REQUIRE(meta.good());
  c.meta = nlohmann::json::parse(meta);
  c.model = test::engine_fixture_model(shape);
  c.model.config.output = output == "sigmoid" ? OutputKind::sigmoid : OutputKind::softmax;
  c.input = test::engine_fixture_input(shape);
  return c;
}

const std::vector<std::pair<std::string, std::string>> kCases = {
    {"nonsquare", "softmax"}, {"nonsquare", "sigmoid"}, {"gray", "softmax"}, {"gray", "sigmoid"}};

// The blocks flattened (L, H, n, n), row-major, in double.
std::vector<double> flatten(const std::vector<AttAttrBlock>& a) {
  std::vector<double> v;
  for (const AttAttrBlock& b : a)
    for (const Mat& m : b.attr)
      for (Eigen::Index i = 0; i < m.size(); ++i) v.push_back(double(m.data()[i]));
  return v;
}

std::vector<double> flatten(const MatD& m) { return std::vector<double>(m.data(), m.data() + m.size()); }

Trace trace_of(const Model& m, const Image& x) {
  Trace tr;
  vit_forward(tr, m, x);
  return tr;
}

}  // namespace

TEST_CASE("attattr matrices and image map match the float64 reference (m = 20)", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    MethodOptions opt;
    opt.target = c.meta["target"].get<int>();
    const Explanation e = explain(c.model, c.input, "attattr", opt);  // default m = 20
    REQUIRE(e.attattr.size() == size_t(c.model.config.depth));
    REQUIRE(e.attattr[0].attr.size() == size_t(c.model.config.heads));
    const NpyArray ref = read_npy(c.dir + "attattr_m20.npy");
    REQUIRE(ref.data.size() == flatten(e.attattr).size());
    CHECK(rel_max_error(flatten(e.attattr), ref.data) <= 1e-4);
    // per block, too (a block with small attributions must not hide behind a large one)
    const size_t per_block = ref.data.size() / e.attattr.size();
    for (size_t l = 0; l < e.attattr.size(); ++l) {
      const std::vector<double> r(ref.data.begin() + ptrdiff_t(l * per_block), ref.data.begin() + ptrdiff_t((l + 1) * per_block));
      CHECK(rel_max_error(flatten(std::vector<AttAttrBlock>{e.attattr[l]}), r) <= 1e-4);
    }
    const NpyArray map = read_npy(c.dir + "token_map.npy");
    REQUIRE(size_t(e.token_map.size()) == map.data.size());
    CHECK(rel_max_error(e.token_map.data(), map.data) <= 1e-4);
    CHECK(e.pixel_map.rows() == c.model.config.image_h);
    CHECK(e.pixel_map.cols() == c.model.config.image_w);
  }
}

TEST_CASE("batched attattr equals m separate overridden passes, on any thread count", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    const Trace tr = trace_of(c.model, c.input);
    const int target = c.meta["target"].get<int>();
    const std::vector<double> naive = flatten(attattr_blocks_naive(c.model, tr, target, 7));
    const std::vector<double> batched = flatten(attattr_blocks(c.model, tr, target, 7, 1));
    CHECK(rel_max_error(batched, naive) <= 1e-5);
    const std::vector<double> threaded = flatten(attattr_blocks(c.model, tr, target, 7, 3));
    CHECK(threaded == batched);  // bit-identical: a block's result does not depend on its thread
  }
}

TEST_CASE("attattr approaches the exact integral as m grows, as the reference does", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    const Trace tr = trace_of(c.model, c.input);
    const NpyArray exact = read_npy(c.dir + "attattr_exact.npy");
    double last = 1e30;
    for (int m : {20, 80, 320}) {
      INFO("m = " << m);
      const double err = rel_max_error(flatten(attattr_blocks(c.model, tr, c.meta["target"].get<int>(), m)), exact.data);
      const double ref_err = c.meta["left_sum_rel_error"][std::to_string(m)].get<double>();
      // the left sum's O(1/m) error, reproduced within float rounding (≤ 1e-4 of the map)
      CHECK(std::fabs(err - ref_err) <= 1e-4);
      CHECK(err < last / 3.0);  // ≈ 4× smaller for 4× the steps
      last = err;
    }
    CHECK(last <= 4e-3);
  }
}

TEST_CASE("head scores over a set match the float64 reference", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    HeadScores s = head_scores_zero(c.model.config);
    for (const auto& item : c.meta["head_set"]) {
      const uint64_t seed = item["input_seed"].get<uint64_t>();
      const Image x = seed == c.meta["input_seed"].get<uint64_t>() ? c.input : random_input(c.model.config, seed);
      const Trace tr = trace_of(c.model, x);
      const int target = top_k(c.model.config, tr.logits, 1)[0].cls;
      CHECK(target == item["target"].get<int>());
      const std::vector<int> gold = item["gold"].get<std::vector<int>>();  // not always the target
      head_scores_add(s, c.model, tr, target, attattr_blocks(c.model, tr, target, 20), gold);
    }
    CHECK(s.images == int(c.meta["head_set"].size()));
    CHECK(rel_max_error(flatten(s.attattr), read_npy(c.dir + "heads_attattr.npy").data) <= 1e-4);
    CHECK(rel_max_error(flatten(s.attention_max), read_npy(c.dir + "heads_attention_max.npy").data) <= 1e-6);
    CHECK(rel_max_error(flatten(s.attention), read_npy(c.dir + "heads_attention.npy").data) <= 1e-4);
    CHECK(rel_max_error(flatten(s.taylor_loss), read_npy(c.dir + "heads_taylor_loss.npy").data) <= 1e-4);
    CHECK(rel_max_error(flatten(s.taylor), read_npy(c.dir + "heads_taylor.npy").data) <= 1e-4);
  }
}

TEST_CASE("the attribution tree: one parent per patch, edges above the threshold, as the reference", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    const Config& cfg = c.model.config;
    const Trace tr = trace_of(c.model, c.input);
    const std::vector<AttAttrBlock> attr = attattr_blocks(c.model, tr, c.meta["target"].get<int>(), 20);
    for (double tau : {0.4, 0.2, 0.05}) {
      INFO("threshold " << tau);
      const AttrTree t = attattr_tree(attr, tau);
      REQUIRE(t.root >= 1);
      REQUIRE(t.nodes.size() == t.edges.size() + 1);
      std::set<int> members = {t.root}, children;
      int last_block = cfg.depth;
      for (const AttrTreeEdge& e : t.edges) {
        CHECK(e.from >= 1);
        CHECK(e.to >= 1);
        CHECK(members.count(e.from) == 1);           // the parent is already in the tree
        CHECK(children.insert(e.to).second);         // one parent at most
        CHECK(e.to != t.root);
        CHECK(e.score > tau);
        CHECK(e.block <= cfg.depth - 2);
        CHECK(e.block <= last_block);                // going down the blocks
        last_block = e.block;
        // the score is M̂_l[i, j] = Σ_h Attr / max over the query rows i ≥ 1
        MatD M = MatD::Zero(cfg.tokens(), cfg.tokens());
        for (const Mat& a : attr[size_t(e.block)].attr) M += a.cast<double>();
        CHECK(e.score == Approx(M(e.from, e.to) / M.bottomRows(cfg.tokens() - 1).maxCoeff()).epsilon(1e-12));
        members.insert(e.to);
      }
      const nlohmann::json j = nlohmann::json::parse(attr_tree_json(t, cfg));
      CHECK(j["root"].get<int>() == t.root);
      CHECK(j["edges"].size() == t.edges.size());
      for (const auto& node : j["nodes"]) {
        const int tok = node["token"].get<int>();
        CHECK(node["row"].get<int>() * cfg.grid_w() + node["col"].get<int>() == tok - 1);
      }
    }
    std::ifstream f(c.dir + "tree.json");
    const nlohmann::json ref = nlohmann::json::parse(f);
    const AttrTree t = attattr_tree(attr, ref["threshold"].get<double>());
    CHECK(t.root == ref["root"].get<int>());
    if (ref["margin"].get<double>() > 1e-3) {  // no entry so close to τ that rounding decides
      REQUIRE(t.edges.size() == ref["edges"].size());
      for (size_t k = 0; k < t.edges.size(); ++k) {
        CHECK(t.edges[k].from == ref["edges"][k]["from"].get<int>());
        CHECK(t.edges[k].to == ref["edges"][k]["to"].get<int>());
        CHECK(t.edges[k].block == ref["edges"][k]["block"].get<int>());
        CHECK(t.edges[k].score == Approx(ref["edges"][k]["score"].get<double>()).margin(1e-4));
      }
    }
  }
}

TEST_CASE("the reference-convention tree matches the float64 reference's", "[attattr]") {
  for (const auto& [shape, output] : kCases) {
    INFO(shape << " " << output);
    const Case c = load_case(shape, output);
    const Trace tr = trace_of(c.model, c.input);
    const std::vector<AttAttrBlock> attr = attattr_blocks(c.model, tr, c.meta["target"].get<int>(), 20);
    std::ifstream f(c.dir + "tree_reference.json");
    REQUIRE(f.good());
    const nlohmann::json ref = nlohmann::json::parse(f);
    const AttrTree t = attattr_tree(attr, ref["threshold"].get<double>(), 1, TreeConvention::reference);
    CHECK(t.convention == TreeConvention::reference);
    CHECK(t.root == ref["root"].get<int>());
    CHECK(t.nodes == ref["nodes"].get<std::vector<int>>());
    REQUIRE(ref["margin"].get<double>() > 1e-3);  // no entry so close to τ that rounding decides
    REQUIRE(t.edges.size() == ref["edges"].size());
    for (size_t k = 0; k < t.edges.size(); ++k) {
      CHECK(t.edges[k].from == ref["edges"][k]["from"].get<int>());
      CHECK(t.edges[k].to == ref["edges"][k]["to"].get<int>());
      CHECK(t.edges[k].block == ref["edges"][k]["block"].get<int>());
      CHECK(t.edges[k].score == Approx(ref["edges"][k]["score"].get<double>()).margin(1e-4));
    }
    const nlohmann::json j = nlohmann::json::parse(attr_tree_json(t, c.model.config));
    CHECK(j["convention"] == "reference");
  }
}

TEST_CASE("the two tree conventions on hand-made matrices where they differ", "[attattr]") {
  // 4 blocks, 2 heads (summed), n = 5 (CLS + 4 patches). Worked by hand for τ = 0.4.
  std::vector<AttAttrBlock> attr(4);
  for (AttAttrBlock& b : attr) b.attr.assign(2, Mat::Zero(5, 5));
  // Block 3 (last): the CLS row draws most on patch 4 → our root is 4. Summed over the blocks,
  // the largest positive off-diagonal row sum is patch 1's (block 2 below) → the reference root is 1.
  attr[3].attr[0](0, 4) = 1.0f;
  attr[3].attr[1](0, 2) = 0.5f;
  // Block 2 (L−2); max over rows ≥ 1 is 2.0 (heads 1.5 + 0.5 at (1, 3)).
  attr[2].attr[0](1, 3) = 1.5f;
  attr[2].attr[1](1, 3) = 0.5f;   // M̂(1, 3) = 1.0
  attr[2].attr[0](1, 0) = 1.0f;   // M̂(1, 0) = 0.5: CLS, a child under the reference convention only
  attr[2].attr[0](4, 2) = 1.2f;   // M̂(4, 2) = 0.6: our root's child
  attr[2].attr[0](0, 1) = 9.0f;   // the CLS row: not in the normalisation, never a parent
  // Block 1: max 1.0. (2, 3) = 0.5 beats (4, 3) = 0.45 for us by score; index order gives 3 to 2 too,
  // but (4, 1) = 0.9 is ours; the reference visits i = 1 first: (1, 2) = 0.7 while 2 is not in its tree.
  attr[1].attr[0](1, 2) = 0.7f;
  attr[1].attr[0](2, 3) = 0.5f;
  attr[1].attr[0](4, 3) = 0.45f;
  attr[1].attr[0](4, 1) = 0.9f;
  attr[1].attr[0](3, 4) = 1.0f;
  // Block 0: max 1.0. (3, 2) and (2, 4) only matter if those are nodes.
  attr[0].attr[0](3, 2) = 1.0f;
  attr[0].attr[0](2, 4) = 0.8f;

  // Ours: root 4; block 2: 4 → 2 (0.6); block 1: candidates from {4, 2}: (4, 1) 0.9, (2, 3) 0.5,
  // (4, 3) 0.45 → 4 → 1, then 2 → 3 (the stronger parent of 3); block 0: (3, 2), (2, 4) target nodes.
  const AttrTree ours = attattr_tree(attr, 0.4);
  CHECK(ours.root == 4);
  REQUIRE(ours.edges.size() == 3);
  CHECK((ours.edges[0].from == 4 && ours.edges[0].to == 2 && ours.edges[0].block == 2));
  CHECK(ours.edges[0].score == Approx(0.6));
  CHECK((ours.edges[1].from == 4 && ours.edges[1].to == 1 && ours.edges[1].block == 1));
  CHECK((ours.edges[2].from == 2 && ours.edges[2].to == 3 && ours.edges[2].block == 1));
  CHECK(ours.nodes == std::vector<int>{4, 2, 1, 3});

  // Reference: row sums of the positive off-diagonal Σ_l M_l (CLS row dropped): patch 1: 2.0 + 1.0
  // + 0.7 = 3.7; 2: 0.5 + 0.8 = 1.3; 3: 1.0 + 1.0 = 2.0; 4: 1.2 + 0.45 + 0.9 = 2.55 → root 1.
  // Block 2 (root's row only, j in index order): 1 → 0 (CLS, 0.5), 1 → 3 (1.0).
  // Block 1 (i = 1…4 in order): i = 1: (1, 2) 0.7 → 1 → 2; i = 2: (2, 3) 3 is in; i = 3:
  // (3, 4) 1.0 → 3 → 4 (3 joined in block 2); block 0: nothing left (2, 4 are nodes).
  const AttrTree ref = attattr_tree(attr, 0.4, 1, TreeConvention::reference);
  CHECK(ref.root == 1);
  REQUIRE(ref.edges.size() == 4);
  CHECK((ref.edges[0].from == 1 && ref.edges[0].to == 0 && ref.edges[0].block == 2));
  CHECK(ref.edges[0].score == Approx(0.5));
  CHECK((ref.edges[1].from == 1 && ref.edges[1].to == 3 && ref.edges[1].block == 2));
  CHECK((ref.edges[2].from == 1 && ref.edges[2].to == 2 && ref.edges[2].block == 1));
  CHECK((ref.edges[3].from == 3 && ref.edges[3].to == 4 && ref.edges[3].block == 1));
  CHECK(ref.nodes == std::vector<int>{1, 0, 3, 2, 4});

  // A node added in a block parents another in the same block (reference only): in block 0 of a
  // second case, 1 → 2 then 2 → 3 (2 < 3 in index order); ours adds 1 → 2 in block 0 and stops.
  std::vector<AttAttrBlock> chain(3);
  for (AttAttrBlock& b : chain) b.attr.assign(1, Mat::Zero(4, 4));
  chain[2].attr[0](0, 1) = 1.0f;  // our root: 1
  chain[1].attr[0](1, 1) = 1.0f;  // the diagonal: the reference root is decided off it
  chain[1].attr[0](1, 2) = 0.1f;
  chain[0].attr[0](1, 2) = 1.0f;
  chain[0].attr[0](2, 3) = 0.8f;
  const AttrTree a = attattr_tree(chain, 0.4);
  const AttrTree b = attattr_tree(chain, 0.4, 1, TreeConvention::reference);
  CHECK(a.root == 1);
  CHECK(b.root == 1);  // row sums off the diagonal: 1: 0.1 + 1.0 = 1.1, 2: 0.8
  REQUIRE(a.edges.size() == 1);
  CHECK((a.edges[0].from == 1 && a.edges[0].to == 2 && a.edges[0].block == 0));
  REQUIRE(b.edges.size() == 2);
  CHECK((b.edges[0].from == 1 && b.edges[0].to == 2 && b.edges[0].block == 0));
  CHECK((b.edges[1].from == 2 && b.edges[1].to == 3 && b.edges[1].block == 0));
  CHECK(b.edges[1].score == Approx(0.8));

  const nlohmann::json j = nlohmann::json::parse(attr_tree_json(ref, test::engine_fixture_model("nonsquare").config));
  CHECK(j["nodes"][1]["token"] == 0);
  CHECK(j["nodes"][1]["row"] == -1);  // CLS has no place in the grid
  CHECK(parse_tree_convention("reference") == TreeConvention::reference);
  CHECK_THROWS_AS(parse_tree_convention("paper"), Error);
}

TEST_CASE("the gold-label loss gradient, worked by hand", "[attattr]") {
  Config c;
  c.classes = 3;
  Vec z(3);
  z << 0.0f, std::log(2.0f), -std::log(3.0f);
  c.output = OutputKind::sigmoid;  // σ = 1/2, 2/3, 1/4; y = (0, 1, 1)
  Vec g = gold_loss_grad(c, z, {1, 2});
  CHECK(g[0] == Approx(0.5));
  CHECK(g[1] == Approx(2.0 / 3.0 - 1.0));
  CHECK(g[2] == Approx(0.25 - 1.0));
  c.output = OutputKind::softmax;  // e^z = 1, 2, 1/3: p = 3/10, 6/10, 1/10; target mean of e_1, e_2
  g = gold_loss_grad(c, z, {1, 2});
  CHECK(g[0] == Approx(0.3));
  CHECK(g[1] == Approx(0.6 - 0.5));
  CHECK(g[2] == Approx(0.1 - 0.5));
  g = gold_loss_grad(c, z, {0});
  CHECK(g[0] == Approx(0.3 - 1.0));
  CHECK(g.sum() == Approx(0.0).margin(1e-6));
  CHECK_THROWS_AS(gold_loss_grad(c, z, {}), Error);
  CHECK_THROWS_AS(gold_loss_grad(c, z, {3}), Error);
}

TEST_CASE("the attribution tree on hand-made matrices", "[attattr]") {
  // 3 blocks, 1 head, n = 5 (CLS + 4 patches). The last block: the CLS row favours patch 3.
  std::vector<AttAttrBlock> attr(3);
  for (AttAttrBlock& b : attr) b.attr.assign(1, Mat::Zero(5, 5));
  attr[2].attr[0](0, 3) = 1.0f;
  attr[2].attr[0](0, 1) = 0.5f;
  // block 1: 3 → 1 (1.0), 3 → 2 (0.3, below τ), 2 → 4 (0.9, but 2 is not in the tree); the CLS row
  // holds the largest entry (5.0), which does not count for the normalisation
  attr[1].attr[0](3, 1) = 2.0f;
  attr[1].attr[0](3, 2) = 0.6f;
  attr[1].attr[0](2, 4) = 1.8f;
  attr[1].attr[0](0, 2) = 5.0f;
  // block 0: 1 → 4 (0.5), 3 → 4 (1.0: wins the parent), 1 → 2 (0.41)
  attr[0].attr[0](1, 4) = 0.5f;
  attr[0].attr[0](3, 4) = 1.0f;
  attr[0].attr[0](1, 2) = 0.41f;
  const AttrTree t = attattr_tree(attr, 0.4);
  CHECK(t.root == 3);
  REQUIRE(t.edges.size() == 3);
  CHECK((t.edges[0].from == 3 && t.edges[0].to == 1 && t.edges[0].block == 1));
  CHECK(t.edges[0].score == Approx(1.0));
  CHECK((t.edges[1].from == 3 && t.edges[1].to == 4 && t.edges[1].block == 0));
  CHECK((t.edges[2].from == 1 && t.edges[2].to == 2 && t.edges[2].block == 0));
  CHECK(t.edges[2].score == Approx(0.41));
  CHECK(t.nodes == std::vector<int>{3, 1, 4, 2});
  CHECK(attattr_tree(attr, 0.95).edges.size() == 2);  // 3 → 1 and 3 → 4 (both 1.0) remain
}

TEST_CASE("attattr reports progress per block and stops when asked", "[attattr]") {
  const Case c = load_case("nonsquare", "softmax");
  MethodOptions opt;
  opt.steps = 4;
  std::vector<double> seen;
  opt.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  explain(c.model, c.input, "attattr", opt);
  REQUIRE(seen.size() == size_t(c.model.config.depth));
  CHECK(seen.back() == Approx(1.0));
  for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] > seen[i - 1]);
  int calls = 0;
  opt.progress = [&](double) { return ++calls < 2; };
  try {
    explain(c.model, c.input, "attattr", opt);
    FAIL("attattr did not stop");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(calls == 2);
}

// A stopped attattr keeps the units of the batched pass it finished in the state
// (ExplainState::attattr) and goes on with the rest when asked again: the same matrices and map,
// bit for bit, whatever the threads. Complete, the same target and steps compute nothing (the
// page's grid and heads section share one pass); another target starts anew.
TEST_CASE("attattr: a stopped pass goes on from the units it finished", "[attattr]") {
  const Case c = load_case("nonsquare", "softmax");
  const int L = c.model.config.depth;
  ExplainState whole, st;
  whole.set_input(c.model, c.input);
  st.set_input(c.model, c.input);
  MethodOptions opt;
  opt.steps = 6;
  const Explanation a = explain(c.model, whole, "attattr", opt);
  const auto done_units = [](const ExplainState& s) {
    int k = 0;
    for (const Mat& u : s.attattr.units) k += u.size() > 0;
    for (int f : s.attattr.folded) k += f;
    return k;
  };
  int calls = 0;
  MethodOptions stop = opt;
  stop.progress = [&](double) { return ++calls < 2; };
  try {
    explain(c.model, st, "attattr", stop);
    FAIL("attattr did not stop");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  const size_t units = st.attattr.units.size();
  REQUIRE(units >= size_t(L));
  CHECK(done_units(st) == 2);
  CHECK(!st.attattr.complete);
  const auto same = [&](const Explanation& b) {
    REQUIRE(b.attattr.size() == a.attattr.size());
    for (size_t l = 0; l < a.attattr.size(); ++l)
      for (size_t h = 0; h < a.attattr[l].attr.size(); ++h) CHECK(b.attattr[l].attr[h] == a.attattr[l].attr[h]);
    CHECK(b.token_map == a.token_map);
  };
  for (int threads : {1, 2}) {
    ExplainState s = st;
    MethodOptions go = opt;
    go.threads = threads;
    std::vector<double> seen;
    go.progress = [&](double f) {
      seen.push_back(f);
      return true;
    };
    same(explain(c.model, s, "attattr", go));
    CHECK(seen.size() == units - 2);  // the units not done
    CHECK(seen.back() == Approx(1.0));
    CHECK(s.attattr.complete);
    CHECK(done_units(s) == int(units));  // every unit in its block's sum
    for (const Mat& u : s.attattr.units) CHECK(u.size() == 0);
  }
  // Several units per block (many steps), finished out of order on two threads, stopped midway:
  // each block's sum still adds its units in order.
  {
    MethodOptions many;
    many.steps = 1500;
    ExplainState w = whole, s = st;
    const Explanation ref = explain(c.model, w, "attattr", many);
    REQUIRE(w.attattr.units.size() > size_t(2 * L));
    int k = 0;
    many.threads = 2;
    many.progress = [&k](double) { return ++k < 5; };
    CHECK_THROWS_AS(explain(c.model, s, "attattr", many), Error);
    CHECK(!s.attattr.complete);
    CHECK(done_units(s) < int(w.attattr.units.size()));  // some units are left to go on with
    many.progress = {};
    const Explanation b = explain(c.model, s, "attattr", many);
    for (size_t l = 0; l < ref.attattr.size(); ++l)
      for (size_t h = 0; h < ref.attattr[l].attr.size(); ++h) CHECK(b.attattr[l].attr[h] == ref.attattr[l].attr[h]);
  }
  // Complete: the same target and steps compute nothing, explain or attattr_blocks alike.
  std::vector<double> seen;
  opt.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  same(explain(c.model, whole, "attattr", opt));
  CHECK(seen.empty());
  const std::vector<AttAttrBlock> direct = attattr_blocks(c.model, whole.trace, a.target, opt.steps, 1, opt.progress, &whole.attattr);
  CHECK(seen.empty());
  CHECK(direct[0].attr[0] == a.attattr[0].attr[0]);
  // Another target: computed anew, and kept in place of the first.
  opt.target = top_k(c.model.config, whole.trace.logits, 2)[1].cls;
  const Explanation other = explain(c.model, whole, "attattr", opt);
  CHECK(seen.size() >= size_t(L));
  CHECK(whole.attattr.target == opt.target);
  ExplainState fresh;
  fresh.set_input(c.model, c.input);
  opt.progress = {};
  CHECK(explain(c.model, fresh, "attattr", opt).token_map == other.token_map);
  whole.set_input(c.model, c.input);  // a new forward pass forgets them
  CHECK(whole.attattr.target == -1);
  CHECK(!whole.attattr.complete);
  CHECK(whole.attattr.blocks.empty());
}

TEST_CASE("head pruning: the order is ascending and the curve starts at the unmasked accuracy", "[attattr]") {
  const Case c = load_case("nonsquare", "softmax");
  const Config& cfg = c.model.config;
  MatD scores(cfg.depth, cfg.heads);
  for (int i = 0; i < scores.size(); ++i) scores.data()[i] = double((i * 7) % 5);  // ties included
  const std::vector<int> order = pruning_order(scores);
  REQUIRE(order.size() == size_t(scores.size()));
  for (size_t i = 1; i < order.size(); ++i) {
    CHECK(scores.data()[order[i - 1]] <= scores.data()[order[i]]);
    if (scores.data()[order[i - 1]] == scores.data()[order[i]]) CHECK(order[i - 1] < order[i]);
  }
  std::vector<Image> images;
  std::vector<std::vector<int>> labels;
  for (uint64_t seed = 600; seed < 606; ++seed) {
    images.push_back(random_input(cfg, seed));
    const Trace tr = trace_of(c.model, images.back());
    labels.push_back({top_k(cfg, tr.logits, 1)[0].cls});  // the unmasked prediction is correct
  }
  const std::vector<double> curve = pruning_curve(c.model, images, labels, order);
  REQUIRE(curve.size() == size_t(cfg.depth * cfg.heads + 1));
  CHECK(curve[0] == 1.0);
  // every head masked: the prediction no longer depends on the image, so all agree
  ForwardOptions fo;
  fo.head_mask.assign(size_t(cfg.depth * cfg.heads), 0.0f);
  int agree = 0;
  Trace tr;
  vit_forward(tr, c.model, images[0], fo);
  const int constant = top_k(cfg, tr.logits, 1)[0].cls;
  for (const auto& l : labels) agree += l[0] == constant ? 1 : 0;
  CHECK(curve.back() == Approx(double(agree) / double(images.size())));
}

TEST_CASE("the per-layer analysis prunes or keeps a block's top-k heads", "[attattr]") {
  const Case c = load_case("nonsquare", "softmax");
  const Config& cfg = c.model.config;
  const int L = cfg.depth, H = cfg.heads;
  std::vector<Image> images;
  std::vector<std::vector<int>> labels;
  for (uint64_t seed = 700; seed < 712; ++seed) {
    images.push_back(random_input(cfg, seed));
    const Trace tr = trace_of(c.model, images.back());
    labels.push_back({top_k(cfg, tr.logits, 1)[0].cls, int(seed % uint64_t(cfg.classes))});
  }
  MatD scores(L, H);
  for (int i = 0; i < scores.size(); ++i) scores.data()[i] = double((i * 5 + 3) % 7);  // ties included
  const LayerPruning lp = layer_pruning(c.model, images, labels, scores);
  REQUIRE(lp.prune_top.size() == size_t(L));
  const double clean = masked_accuracy(c.model, images, labels, std::vector<float>(size_t(L * H), 1.0f));
  CHECK(clean == 1.0);
  for (int l = 0; l < L; ++l) {
    INFO("block " << l);
    REQUIRE(lp.prune_top[size_t(l)].size() == size_t(H + 1));
    CHECK(lp.prune_top[size_t(l)][0] == clean);
    CHECK(lp.keep_top[size_t(l)][size_t(H)] == clean);
    CHECK(lp.prune_top[size_t(l)][size_t(H)] == lp.keep_top[size_t(l)][0]);  // the whole block pruned
    // k = 1 by hand: the block's highest score (first index on a tie) pruned, or kept alone
    int best = 0;
    for (int h = 1; h < H; ++h)
      if (scores(l, h) > scores(l, best)) best = h;
    std::vector<float> prune(size_t(L * H), 1.0f), keep(size_t(L * H), 1.0f);
    prune[size_t(l * H + best)] = 0.0f;
    for (int h = 0; h < H; ++h)
      if (h != best) keep[size_t(l * H + h)] = 0.0f;
    CHECK(lp.prune_top[size_t(l)][1] == masked_accuracy(c.model, images, labels, prune));
    CHECK(lp.keep_top[size_t(l)][1] == masked_accuracy(c.model, images, labels, keep));
  }
  // the accuracy counts a label set hit: with a label no prediction can reach, nothing is correct
  std::vector<std::vector<int>> none(images.size(), std::vector<int>{cfg.classes + 5});
  CHECK(masked_accuracy(c.model, images, none, std::vector<float>(size_t(L * H), 1.0f)) == 0.0);
  CHECK_THROWS_AS(layer_pruning(c.model, images, labels, MatD::Zero(L, H + 1)), Error);
}
