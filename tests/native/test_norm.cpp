// test_norm.cpp — the norm-based maps (Kobayashi et al.) against the independent float64 reference
// (tests/reference/norm_ref.py, fixtures in tests/fixtures/norm/): every block's five stage maps,
// the mixing ratios and the rollout token map of every stage; the decomposition identities (the
// pieces of a row plus the bias term reproduce the actual activation at every stage); results
// independent of the thread count; the memory held per block and per row (no n×n×d array);
// cancellation, and a stopped explanation going on from the blocks it finished; not class-specific;
// the atb map per head (norm_head_maps); one image's FF summary
// (norm_image_summary: context shares, Spearman ρ, mixing means) against the reference's.
//
// Set VITLENS_PARITY_REPORT=1 to print the worst error per shape and stage.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/io/safetensors.h"

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::source_path;

namespace {

struct NormCase {
  std::string name, dir;
  Model model;
  Image input;
  nlohmann::json meta;
};

NormCase load_norm_case(const std::string& name) {
  NormCase c;
  c.name = name;
  c.dir = source_path("tests/fixtures/norm/" + name + "/");
  std::ifstream meta(c.dir + "meta.json");
  REQUIRE(meta.good());
  c.meta = nlohmann::json::parse(meta);
  c.model = test::engine_fixture_model(name);
  c.input = test::engine_fixture_input(name);
  return c;
}

const NormStage all_stages[] = {NormStage::atb, NormStage::atb_res, NormStage::atb_res_ln, NormStage::atb_res_ln_ff,
                                NormStage::layer};

// max |Σ_j pieces[j] + bias − actual| / max |actual|.
double identity_error(const MatD& pieces, const VecD& bias, const Eigen::RowVectorXf& actual) {
  const Eigen::RowVectorXd sum = pieces.colwise().sum() + bias.transpose();
  const Eigen::RowVectorXd ref = actual.cast<double>();
  return (sum - ref).cwiseAbs().maxCoeff() / ref.cwiseAbs().maxCoeff();
}

// Options on `threads` threads whose progress reports go to `seen`.
MethodOptions watching(std::vector<double>& seen, int threads = 1) {
  MethodOptions o;
  o.threads = threads;
  o.progress = [&seen](double f) {
    seen.push_back(f);
    return true;
  };
  return o;
}

}  // namespace

TEST_CASE("norm-based stage maps, mixing ratios and token maps match the float64 reference", "[norm][reference]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    const NormCase c = load_norm_case(shape);
    const Config& cfg = c.model.config;
    const int n = cfg.tokens(), L = cfg.depth;
    INFO("shape " << shape);
    REQUIRE(c.meta["tokens"].get<int>() == n);
    REQUIRE(c.meta["depth"].get<int>() == L);
    ExplainState st;
    st.set_input(c.model, c.input);
    const NpyArray maps = read_npy(c.dir + "maps.npy");      // (L, 5, n, n)
    const NpyArray mixing = read_npy(c.dir + "mixing.npy");  // (L, 5, n)
    REQUIRE(maps.shape == std::vector<int64_t>{L, 5, n, n});
    REQUIRE(mixing.shape == std::vector<int64_t>{L, 5, n});
    for (NormStage stage : all_stages) {
      double worst_map = 0, worst_mix = 0;
      MethodOptions opt;
      opt.stage = stage;
      const Explanation e = explain(c.model, st, "norm-based", opt);
      const int s = int(stage);
      INFO("stage " << norm_stage_name(stage));
      REQUIRE(e.norm.size() == size_t(L));
      for (int b = 0; b < L; ++b) {
        INFO("block " << b);
        const size_t off = (size_t(b) * 5 + size_t(s)) * size_t(n) * size_t(n);
        const std::vector<double> ref_map(maps.data.begin() + long(off), maps.data.begin() + long(off + size_t(n * n)));
        const double em = rel_max_error(e.norm[size_t(b)].maps[s].data(), ref_map);
        CHECK(em <= 1e-4);
        worst_map = std::max(worst_map, em);
        const size_t moff = (size_t(b) * 5 + size_t(s)) * size_t(n);
        const std::vector<double> ref_mix(mixing.data.begin() + long(moff), mixing.data.begin() + long(moff + size_t(n)));
        const double er = rel_max_error(e.norm[size_t(b)].mixing[s].data(), ref_mix);
        CHECK(er <= 1e-4);
        worst_mix = std::max(worst_mix, er);
      }
      const NpyArray tok = read_npy(c.dir + "token_" + norm_stage_name(stage) + ".npy");
      REQUIRE(e.token_map.rows() == cfg.grid_h());
      REQUIRE(e.token_map.cols() == cfg.grid_w());
      const double et = rel_max_error(e.token_map.data(), tok.data);
      CHECK(et <= 1e-4);
      if (std::getenv("VITLENS_PARITY_REPORT"))
        std::printf("norm-based %-9s %-13s maps %.2e  mixing %.2e  token map %.2e\n", shape, norm_stage_name(stage),
                    worst_map, worst_mix, et);
      CHECK(e.pixel_map.rows() == cfg.image_h);
    }
  }
}

TEST_CASE("norm-based pieces plus the bias term reproduce every stage's activation", "[norm]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    const NormCase c = load_norm_case(shape);
    const Config& cfg = c.model.config;
    Trace tr;
    vit_forward(tr, c.model, c.input);
    double worst[5] = {0, 0, 0, 0, 0};
    for (int b = 0; b < cfg.depth; ++b) {
      const BlockTrace& bt = tr.blocks[size_t(b)];
      const Mat& next = b + 1 < cfg.depth ? tr.blocks[size_t(b) + 1].x : tr.x_final;
      for (int i = 0; i < cfg.tokens(); ++i) {
        const NormRow r = norm_row_pieces(c.model, tr, b, i);
        const Eigen::RowVectorXf actual[5] = {bt.attn_out.row(i), bt.x_mid.row(i), bt.ln2.row(i), bt.mlp_out.row(i),
                                              next.row(i)};
        for (int s = 0; s < 5; ++s) {
          REQUIRE(r.pieces[s].rows() == cfg.tokens());
          REQUIRE(r.pieces[s].cols() == cfg.dim);
          worst[s] = std::max(worst[s], identity_error(r.pieces[s], r.bias[s], actual[s]));
        }
        // the maps are the norms of these pieces
        CHECK(std::fabs(r.pieces[int(NormStage::layer)].row(0).norm() -
                        (r.pieces[int(NormStage::atb_res)].row(0) + r.pieces[int(NormStage::atb_res_ln_ff)].row(0)).norm()) <
              1e-9);
      }
    }
    INFO("shape " << shape << ": atb " << worst[0] << ", atb-res " << worst[1] << ", atb-res-ln " << worst[2]
                  << ", atb-res-ln-ff " << worst[3] << ", layer " << worst[4]);
    for (double w : worst) CHECK(w <= 1e-4);
  }
}

TEST_CASE("norm-based: thread count, class, cancellation, option errors", "[norm]") {
  const NormCase c = load_norm_case("nonsquare");
  // Each call on a state of its own: a state keeps the blocks it has computed (ExplainState::norm).
  const auto fresh = [&c] {
    ExplainState s;
    s.set_input(c.model, c.input);
    return s;
  };
  ExplainState st = fresh(), st2 = fresh();
  MethodOptions one, two;
  two.threads = 2;
  two.target = (top_k(c.model.config, st.trace.logits, 2)[1].cls);  // another class: same maps
  const Explanation a = explain(c.model, st, "norm-based", one);
  const Explanation b = explain(c.model, st2, "norm-based", two);
  for (int blk = 0; blk < c.model.config.depth; ++blk)
    for (int s = 0; s < 5; ++s) {
      CHECK(a.norm[size_t(blk)].maps[s] == b.norm[size_t(blk)].maps[s]);
      CHECK(a.norm[size_t(blk)].mixing[s] == b.norm[size_t(blk)].mixing[s]);
      CHECK(a.norm[size_t(blk)].maps[s].minCoeff() >= 0.0f);
      CHECK(a.norm[size_t(blk)].mixing[s].minCoeff() >= 0.0f);
      CHECK(a.norm[size_t(blk)].mixing[s].maxCoeff() <= 1.0f);
    }
  CHECK(a.token_map == b.token_map);

  MethodOptions stop;
  int calls = 0;
  stop.progress = [&calls](double) { return ++calls < 2; };
  try {
    ExplainState s = fresh();
    explain(c.model, s, "norm-based", stop);
    FAIL("not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(calls == 2);  // the second call is inside block 0: a block's rows are cancelled too
  // Progress per row, not only per block (a ViT-B block takes seconds), rising to 1, and with
  // threads only the calling thread reports.
  for (int threads : {1, 2}) {
    std::vector<double> seen;
    ExplainState s = fresh();
    explain(c.model, s, "norm-based", watching(seen, threads));
    CHECK(seen.size() > size_t(c.model.config.depth) + 1);
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
    CHECK(seen.back() == 1.0);
  }
  CHECK_THROWS_AS(norm_row_pieces(c.model, st.trace, c.model.config.depth, 0), Error);
  CHECK_THROWS_AS(norm_row_pieces(c.model, st.trace, 0, c.model.config.tokens()), Error);

  MethodOptions inter;
  inter.want_intermediates = true;
  const Explanation e = explain(c.model, st, "norm-based", inter);
  REQUIRE(e.blocks.size() == size_t(c.model.config.depth));
  const Mat& step = e.blocks.back().step;  // row-stochastic N̂_L
  CHECK((step.rowwise().sum().array() - 1.0f).abs().maxCoeff() < 1e-5f);
  // row 0 of the accumulated product, columns 1:, is the token map
  for (int k = 0; k < c.model.config.num_patches(); ++k)
    CHECK(std::fabs(e.blocks.back().accumulated(0, k + 1) - e.token_map.data()[k]) <= 1e-6f);
}

// A norm-based explanation stopped by its progress callback keeps the blocks it finished in the
// state (ExplainState::norm) and goes on from the next one when asked again (the page's views ask
// again after a withdrawal: web/background.js): the same maps, bit for bit, as one uninterrupted
// call, whatever the threads; a state with every block answers without computing any; a new input
// forgets them.
TEST_CASE("norm-based: a stopped explanation goes on from the blocks it finished", "[norm]") {
  const NormCase c = load_norm_case("nonsquare");
  const int L = c.model.config.depth;
  REQUIRE(L >= 3);
  ExplainState whole, st;
  whole.set_input(c.model, c.input);
  st.set_input(c.model, c.input);
  const Explanation a = explain(c.model, whole, "norm-based");

  MethodOptions stop;  // stops halfway through block 2
  stop.progress = [L](double f) { return f < (2.5 / L); };
  try {
    explain(c.model, st, "norm-based", stop);
    FAIL("not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  REQUIRE(st.norm.size() == 2);

  for (int threads : {1, 2}) {
    ExplainState s = st;  // blocks 0 and 1 done
    std::vector<double> seen;
    const Explanation b = explain(c.model, s, "norm-based", watching(seen, threads));
    REQUIRE(!seen.empty());
    CHECK(seen.front() == 2.0 / L);  // block 2 first: 0 and 1 are not computed again
    CHECK(seen.back() == 1.0);
    for (int blk = 0; blk < L; ++blk)
      for (int k = 0; k < 5; ++k) {
        CHECK(a.norm[size_t(blk)].maps[k] == b.norm[size_t(blk)].maps[k]);
        CHECK(a.norm[size_t(blk)].mixing[k] == b.norm[size_t(blk)].mixing[k]);
      }
    CHECK(a.token_map == b.token_map);
  }

  // Every block done: another stage's map from the same blocks, computing none.
  std::vector<double> seen;
  MethodOptions other = watching(seen);
  other.stage = NormStage::atb;
  const Explanation atb = explain(c.model, whole, "norm-based", other);
  CHECK(seen == std::vector<double>{1.0});
  ExplainState again;
  again.set_input(c.model, c.input);
  other.progress = {};
  CHECK(explain(c.model, again, "norm-based", other).token_map == atb.token_map);

  whole.set_input(c.model, c.input);  // a new forward pass: the blocks are of the last one
  CHECK(whole.norm.empty());
}

// The memory claim: per block the tables hold H·n·(d + mlp) values plus (n, mlp) twice, per row
// five (n, d) pieces and one (n, mlp) scratch — linear in n. On the DeiT-tiny shape an n×n×d
// array would be 197·197·192 ≈ 7.5 M values; everything held here together is far below n·n·d.
TEST_CASE("norm-based holds no n×n×d buffer (DeiT-tiny shape)", "[norm][memory]") {
  const Model m = random_model(deit_tiny_config(), 3);
  const Config& c = m.config;
  Trace tr;
  vit_forward(tr, m, random_input(c, 4));
  NormTables t;
  norm_tables_build(t, m, tr, c.depth - 1);
  NormRow r;
  norm_row(r, t, m, tr, 5, true);
  size_t held = size_t(t.x_ff.size() + t.phi.size() + t.ln_bias_core.size() + r.scratch.size());
  for (const MatD& v : t.value_out) held += size_t(v.size());
  for (const Mat& v : t.value_ff) held += size_t(v.size());
  for (int s = 0; s < 5; ++s) held += size_t(r.pieces[s].size() + r.bias[s].size());
  const size_t n = size_t(c.tokens()), d = size_t(c.dim), H = size_t(c.heads), mlp = size_t(c.mlp_dim);
  CHECK(held <= H * n * (d + mlp) + 3 * n * mlp + 5 * n * d + 6 * d);
  CHECK(held * 5 < n * n * d);
  // and the row is still exact on this shape
  const NormRow full = norm_row_pieces(m, tr, c.depth - 1, 5);
  const Eigen::RowVectorXf out = tr.x_final.row(5);
  CHECK(identity_error(full.pieces[int(NormStage::layer)], full.bias[int(NormStage::layer)], out) <= 1e-4);
}

// The atb stage per head, ‖A_h[i, j]·V_h'[j]‖ (norm_head_maps), against the reference's full
// (H, n, n, d) pieces (heads.npy), with the tolerance of the stage maps; and the heads' pieces sum to
// the atb piece, so the atb map is at most the sum of the head maps.
TEST_CASE("norm-based per-head atb maps match the float64 reference", "[norm][reference]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    const NormCase c = load_norm_case(shape);
    const Config& cfg = c.model.config;
    const int n = cfg.tokens(), L = cfg.depth, H = cfg.heads;
    INFO("shape " << shape);
    const NpyArray heads = read_npy(c.dir + "heads.npy");  // (L, H, n, n)
    REQUIRE(heads.shape == std::vector<int64_t>{L, H, n, n});
    Trace tr;
    vit_forward(tr, c.model, c.input);
    double worst = 0;
    for (int b = 0; b < L; ++b) {
      const std::vector<Mat> mine = norm_head_maps(c.model, tr, b);
      REQUIRE(mine.size() == size_t(H));
      const NormBlock nb = norm_block(c.model, tr, b);
      Mat sum = Mat::Zero(n, n);
      for (int h = 0; h < H; ++h) {
        const size_t off = (size_t(b) * size_t(H) + size_t(h)) * size_t(n) * size_t(n);
        const std::vector<double> ref(heads.data.begin() + long(off), heads.data.begin() + long(off + size_t(n * n)));
        const double e = rel_max_error(mine[size_t(h)].data(), ref);
        CHECK(e <= 1e-4);
        worst = std::max(worst, e);
        sum += mine[size_t(h)];
      }
      CHECK((nb.maps[int(NormStage::atb)].array() <= sum.array() * 1.0001f + 1e-6f).all());
    }
    if (std::getenv("VITLENS_PARITY_REPORT")) std::printf("norm-based %-9s per-head atb maps %.2e\n", shape, worst);
  }
  const NormCase c = load_norm_case("nonsquare");
  Trace tr;
  vit_forward(tr, c.model, c.input);
  CHECK_THROWS_AS(norm_head_maps(c.model, tr, c.model.config.depth), Error);
  CHECK_THROWS_AS(norm_head_maps(c.model, Trace{}, 0), Error);
}

// One image's FF summary (norm_image_summary) against the reference's (norm_ref.image_summary,
// ff_*.npy): (a) on the reference's own maps, rounded to float32 as the engine holds them, the
// statistics alone (shares 1e-6, ρ 1e-9: the same ranks; mixing means 1e-6); (b) on the engine's maps
// (shares and mixing means 1e-4 as the maps; ρ to 1e-9 too when no two entries of a row swap ranks
// under the maps' error, which holds on these fixtures — a swap would move a row's ρ by ≥ 6·2/(n³ − n)).
TEST_CASE("norm_image_summary matches the float64 reference", "[norm][reference][norm_ff]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    const NormCase c = load_norm_case(shape);
    const int n = c.model.config.tokens(), L = c.model.config.depth;
    INFO("shape " << shape);
    const NpyArray maps = read_npy(c.dir + "maps.npy");      // (L, 5, n, n)
    const NpyArray mixing = read_npy(c.dir + "mixing.npy");  // (L, 5, n)
    const NpyArray shares = read_npy(c.dir + "ff_shares.npy");           // (L, 2, n, n)
    const NpyArray rho = read_npy(c.dir + "ff_rho.npy");                 // (L, n + 2)
    const NpyArray mix_mean = read_npy(c.dir + "ff_mixing_mean.npy");    // (L, 5)
    REQUIRE(shares.shape == std::vector<int64_t>{L, 2, n, n});
    REQUIRE(rho.shape == std::vector<int64_t>{L, n + 2});
    REQUIRE(mix_mean.shape == std::vector<int64_t>{L, 5});
    std::vector<NormBlock> ref_blocks(static_cast<size_t>(L));
    for (int b = 0; b < L; ++b)
      for (int s = 0; s < 5; ++s) {
        Mat m(n, n);
        Vec r(n);
        for (int k = 0; k < n * n; ++k) m.data()[k] = float(maps.data[(size_t(b) * 5 + size_t(s)) * size_t(n * n) + size_t(k)]);
        for (int k = 0; k < n; ++k) r[k] = float(mixing.data[(size_t(b) * 5 + size_t(s)) * size_t(n) + size_t(k)]);
        ref_blocks[size_t(b)].maps[s] = m;
        ref_blocks[size_t(b)].mixing[s] = r;
      }
    ExplainState st;
    st.set_input(c.model, c.input);
    const Explanation e = explain(c.model, st, "norm-based", MethodOptions{});
    const double tol_share[2] = {1e-6, 1e-4};
    int k_case = 0;
    const std::vector<NormBlock>* cases[2] = {&ref_blocks, &e.norm};
    for (const std::vector<NormBlock>* blocks : cases) {
      INFO((k_case == 0 ? "the reference's maps" : "the engine's maps"));
      const std::vector<NormImageBlock> sum = norm_image_summary(*blocks);
      REQUIRE(sum.size() == size_t(L));
      for (int b = 0; b < L; ++b) {
        INFO("block " << b);
        const NormImageBlock& o = sum[size_t(b)];
        for (int w = 0; w < 2; ++w) {
          const size_t off = (size_t(b) * 2 + size_t(w)) * size_t(n * n);
          const std::vector<double> ref(shares.data.begin() + long(off), shares.data.begin() + long(off + size_t(n * n)));
          CHECK(rel_max_error((w == 0 ? o.share_before : o.share_after).data(), ref) <= tol_share[k_case]);
        }
        const double* r = rho.data.data() + size_t(b) * size_t(n + 2);
        for (int i = 0; i < n; ++i) CHECK(o.rho_query[size_t(i)] == Approx(r[i]).margin(1e-9));
        CHECK(o.rho_flat == Approx(r[n]).margin(1e-9));
        CHECK(o.rho_rows == Approx(r[n + 1]).margin(1e-9));
        for (int s = 0; s < 5; ++s) CHECK(o.mixing_mean[s] == Approx(mix_mean.data[size_t(b) * 5 + size_t(s)]).margin(tol_share[k_case]));
      }
      ++k_case;
    }
  }
}
