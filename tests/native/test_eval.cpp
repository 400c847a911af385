// test_eval.cpp — the faithfulness benchmark: method lists, records and their reduction on
// hand-made records, the reports, and on the shipped model a sanity ordering (a random map
// scores worse than transformer-attribution, the oracle map best), thread-count independence and
// resuming; the metrics of issue 16 (ROAD, SRG, relevance mass and rank accuracy, the model
// randomisation check) against direct calls of their functions, in the summary and the reports,
// and their behaviour on the shipped model. Tests that need Fashion-MNIST or the shipped models
// skip with a warning without them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/eval/eval.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/model_file.h"
#include "vitlens/metrics/faithfulness.h"
#include "vitlens/metrics/perturbation.h"
#include "vitlens/metrics/road.h"
#include "vitlens/model/randomise.h"

using namespace vitlens;
namespace fs = std::filesystem;

namespace {

#if defined(__EMSCRIPTEN__)
constexpr int kThreads = 1;
#else
constexpr int kThreads = 2;
#endif

// Every field except the timings.
void check_same(const EvalRecord& a, const EvalRecord& b) {
  CHECK(a.scene == b.scene);
  CHECK(a.method == b.method);
  CHECK(a.items == b.items);
  CHECK(a.classes == b.classes);
  CHECK(a.pred == b.pred);
  CHECK(a.skipped == b.skipped);
  CHECK(a.segmented == b.segmented);
  CHECK(a.scores == b.scores);
  CHECK(a.top == b.top);
  CHECK(a.seg.correct == b.seg.correct);
  CHECK(a.seg.inter == b.seg.inter);
  CHECK(a.seg.uni == b.seg.uni);
  CHECK(a.seg_ap == b.seg_ap);
  CHECK(a.share == b.share);
  CHECK(a.pointing == b.pointing);
  CHECK((a.rho == b.rho || (std::isnan(a.rho) && std::isnan(b.rho))));
  CHECK(a.nonfinite == b.nonfinite);
  CHECK(a.road == b.road);
  CHECK(a.road_top == b.road_top);
  REQUIRE(a.randomisation.size() == b.randomisation.size());
  for (size_t k = 0; k < a.randomisation.size(); ++k) {
    CHECK(a.randomisation[k].spearman == b.randomisation[k].spearman);
    CHECK(a.randomisation[k].spearman_abs == b.randomisation[k].spearman_abs);
    CHECK(a.randomisation[k].ssim == b.randomisation[k].ssim);
  }
}

// A record's ROAD steps all `cls`, and a randomisation list of `steps` steps with ρ = rho (the
// other fields rho/2 and rho/4).
void add_new_metrics(EvalRecord& r, int road_cls, int steps, double rho) {
  r.road = true;
  for (auto& d : r.road_top) d.fill(road_cls);
  for (int k = 0; k < steps; ++k) r.randomisation.push_back({rho, rho / 2, rho / 4});
}

EvalRecord single_record(int scene, const std::string& method, int gt, int pred, int pos_top, int neg_top) {
  EvalRecord r;
  r.scene = scene;
  r.method = method;
  r.items = 1;
  r.classes = {{gt, -1}};
  r.pred = pred;
  for (auto& c : r.top) {
    c[0].fill(pos_top);
    c[1].fill(neg_top);
  }
  r.segmented = true;
  r.seg.correct = 3;
  r.seg.pixels = 4;
  r.seg.inter = {{2, 1}};
  r.seg.uni = {{3, 2}};
  r.seg_ap = 0.75;
  r.rho = 0.5;
  r.ms = 2.0;
  r.forward_ms = 1.0;
  return r;
}

EvalRecord two_record(int scene, const std::string& method) {
  EvalRecord r;
  r.scene = scene;
  r.method = method;
  r.items = 2;
  r.classes = {{1, 7}};
  r.pred = 7;
  r.share = {{0.75, 0.25}};
  r.pointing = {{1.0, 0.0}};
  r.rho = 1.0;
  r.ms = 4.0;
  r.forward_ms = 1.0;
  return r;
}

bool have_data() {
  const bool ok = fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz") &&
                  fs::exists(test::source_path("models/vitlens-scenes.vitl")) &&
                  fs::exists(test::source_path("models/vitlens-scenes-f32.vitl"));
  if (!ok) WARN("dataset-fashion-mnist or models/vitlens-scenes{,-f32}.vitl is absent: skipped");
  return ok;
}

const EvalMethodSummary& find(const EvalSummary& s, const std::string& name) {
  for (const EvalMethodSummary& m : s.methods)
    if (m.method == name) return m;
  FAIL("no summary for " << name);
  return s.methods.front();
}

}  // namespace

TEST_CASE("method lists: all, the slow ones, explicit lists", "[eval]") {
  const std::vector<std::string> all = eval_resolve_methods("all", false);
  const std::vector<std::string> slow = eval_slow_methods();
  REQUIRE(all.size() >= 3);
  CHECK(all[all.size() - 2] == "random");
  CHECK(all.back() == "oracle");
  for (const MethodInfo& info : method_registry()) {
    const bool listed = std::find(all.begin(), all.end(), info.name) != all.end();
    CHECK(listed == !info.long_running);
  }
  CHECK(eval_resolve_methods("all", true).size() == method_registry().size() + 2);
  CHECK(eval_resolve_methods("oracle,rollout", false) == std::vector<std::string>{"oracle", "rollout"});
  for (const char* bad : {"rollout,nonsense", "rollout,rollout", "", "rollout,"}) {
    try {
      eval_resolve_methods(bad, false);
      FAIL("accepted '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_argument);
    }
  }
}

TEST_CASE("records round-trip through their JSON line", "[eval]") {
  EvalRecord a = single_record(5, "rollout", 3, 2, 4, 3);
  a.top[1][0][4] = 9;
  a.seg_ap = 0.1234567890123;
  a.rho = -0.25;
  a.ms = 1.23456789;
  a.nonfinite = true;
  const std::string line = eval_record_to_json(a);
  CHECK(line.find('\n') == std::string::npos);
  const EvalRecord b = eval_record_from_json(line);
  check_same(a, b);
  CHECK(b.ms == Approx(1.235).margin(1e-12));  // rounded to 1 µs
  const EvalRecord c = two_record(6, "random");
  EvalRecord c2 = c;
  c2.rho = EvalRecord::none;  // a baseline has no ρ
  c2.ms = EvalRecord::none;
  const EvalRecord d = eval_record_from_json(eval_record_to_json(c2));
  check_same(c2, d);
  CHECK(std::isnan(d.ms));
  // The metrics of issue 16; a line without them (an older run's) reads as "not computed".
  EvalRecord e = single_record(7, "saliency", 2, 2, 1, 2);
  add_new_metrics(e, 4, 8, -0.123456789012345);
  e.road_top[1][3] = 2;
  e.scores = {{"srg_black", 12.5}, {"srg_road", -0.25}, {"mass_accuracy", 0.5}, {"rank_accuracy", 0.75}};
  check_same(e, eval_record_from_json(eval_record_to_json(e)));
  const EvalRecord old = eval_record_from_json(
      "{\"scene\":3,\"method\":\"rollout\",\"items\":1,\"pred\":2,\"classes\":[2],\"top\":[[[2,2,2,2,2,2,2,2,2],"
      "[2,2,2,2,2,2,2,2,2]],[[2,2,2,2,2,2,2,2,2],[2,2,2,2,2,2,2,2,2]]],\"rho\":0.9}");
  CHECK(!old.road);
  CHECK(old.randomisation.empty());
  CHECK(old.scores.empty());
  for (const char* bad : {"", "{", "{\"scene\": 1}", "[1, 2]", "{\"scene\":1,\"method\":\"x\",\"items\":3,\"pred\":0,\"classes\":[1,2,3]}",
                          "{\"scene\":1,\"method\":\"x\",\"items\":2,\"pred\":0,\"classes\":[1,2],\"share\":[0,1],"
                          "\"pointing\":[0,1],\"randomisation\":{\"spearman\":[1,2],\"spearman_abs\":[1],\"ssim\":[1,2]}}",
                          "{\"scene\":1,\"method\":\"x\",\"items\":1,\"pred\":0,\"classes\":[1],\"top\":[[[1,1,1,1,1,1,1,1,1],"
                          "[1,1,1,1,1,1,1,1,1]],[[1,1,1,1,1,1,1,1,1],[1,1,1,1,1,1,1,1,1]]],\"road_top\":[[1,1],[1,1]]}"}) {
    try {
      eval_record_from_json(bad);
      FAIL("accepted '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_format);
    }
  }
}

TEST_CASE("the summary of hand-made records", "[eval]") {
  // Scene 0: one item of class 3, predicted 3; removing the most relevant pixels flips the
  // prediction to 5 at once, removing the least relevant never does. Scene 1: two items.
  // Scene 2: one item of class 4, predicted 6; the perturbed scenes say 4 throughout.
  std::vector<EvalRecord> recs = {single_record(0, "m", 3, 3, 5, 3), two_record(1, "m"),
                                  single_record(2, "m", 4, 6, 4, 4), single_record(9, "m", 1, 1, 1, 1)};
  const EvalSummary s = summarise_eval(recs, {"m"}, 3);  // scene 9 is beyond n
  CHECK(s.n == 3);
  CHECK(s.single == 2);
  CHECK(s.two == 1);
  const EvalMethodSummary& m = s.methods[0];
  CHECK(m.perturbation_scenes == 2);
  CHECK(m.class_maps == 2);
  // positive: p = 0 → 1/2 correct (scene 0), then only scene 2 is correct: 1/2 throughout.
  for (double a : m.acc[0][0]) CHECK(a == Approx(0.5));
  CHECK(m.auc[0][0] == Approx(45.0));
  // negative: p = 0 → 1/2, then both correct.
  CHECK(m.acc[0][1][0] == Approx(0.5));
  CHECK(m.acc[0][1][1] == Approx(1.0));
  CHECK(m.auc[0][1] == Approx(100.0 * (0.1 * 0.75 + 0.8 * 1.0)));
  CHECK(m.pixel_acc == Approx(6.0 / 8.0));
  CHECK(m.miou == Approx(0.5 * (4.0 / 6.0 + 2.0 / 4.0)));
  CHECK(m.map == Approx(0.75));
  CHECK(m.share == Approx(0.5));
  CHECK(m.pointing == Approx(0.5));
  CHECK(m.rho == Approx((0.5 + 1.0 + 0.5) / 3.0));
  CHECK(m.ms == Approx(2.0));  // median of 2, 4, 2
  CHECK(s.forward_ms == Approx(1.0));
  recs.erase(recs.begin() + 1);
  try {
    summarise_eval(recs, {"m"}, 3);
    FAIL("a missing scene was not noticed");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("sample 1") != std::string::npos);
  }
}

TEST_CASE("the summary of the new metrics: ROAD curves, scores, the randomisation check", "[eval]") {
  // Scene 0: class 3, predicted 3; ROAD flips MoRF to 5 at once and LeRF never. Scene 2: class 4,
  // predicted 6; every ROAD step says 4. Scene 1: two items, randomised only. Scene 3 has ROAD
  // and randomisation but lies beyond the limits of the second summary.
  EvalRecord a = single_record(0, "m", 3, 3, 5, 3), b = two_record(1, "m"), c = single_record(2, "m", 4, 6, 4, 4),
             d = single_record(3, "m", 1, 1, 1, 1);
  add_new_metrics(a, 3, 3, 0.9);
  a.road_top[0].fill(5);
  add_new_metrics(b, 0, 3, 0.1);
  b.road = false;
  add_new_metrics(c, 4, 0, 0);
  add_new_metrics(d, 1, 3, 0.2);
  a.randomisation[0].spearman = 0.3;  // step 1 of scene 0
  a.scores = {{"srg_black", 10}, {"srg_road", 30}, {"mass_accuracy", 0.5}};
  c.scores = {{"srg_black", 20}, {"srg_road", 50}, {"mass_accuracy", 1.0}};
  d.scores = {{"srg_black", 0}, {"srg_road", 100}};
  const std::vector<EvalRecord> recs = {a, b, c, d};
  const EvalSummary s = summarise_eval(recs, {"m"}, 4);
  const EvalMethodSummary& m = s.methods[0];
  CHECK(m.road_scenes == 3);
  // MoRF: p = 0 → 2/3 (scenes 0, 3), then scenes 2 and 3: 2/3 throughout; LeRF: 2/3, then all.
  for (double v : m.road_acc[0]) CHECK(v == Approx(2.0 / 3.0));
  CHECK(m.road_auc[0] == Approx(60.0));
  CHECK(m.road_acc[1][0] == Approx(2.0 / 3.0));
  CHECK(m.road_acc[1][1] == Approx(1.0));
  CHECK(m.road_auc[1] == Approx(100.0 * (0.1 * (2.0 / 3.0 + 1.0) / 2 + 0.8)));
  CHECK(m.scores.at("srg_black") == Approx(10.0));
  CHECK(m.scores.at("srg_road") == Approx(60.0));
  CHECK(m.scores.at("mass_accuracy") == Approx(0.75));
  // Randomisation over scenes 0, 1, 3: mean ρ per step (0.3 + 0.1 + 0.2)/3 = 0.2, then 0.4.
  CHECK(m.randomisation_scenes == 3);
  REQUIRE(m.randomisation.size() == 3);
  CHECK(m.randomisation[0].spearman == Approx(0.2));
  CHECK(m.randomisation[2].spearman == Approx(0.4));
  CHECK(m.randomisation[2].spearman_abs == Approx(0.2));
  CHECK(m.randomisation[2].ssim == Approx(0.1));
  CHECK(!m.survives);  // |0.4| ≤ 0.5
  // Limits: ROAD on samples < 3, randomisation on samples < 1 (scene 0 alone: ρ 0.9 at the end).
  const EvalSummary lim = summarise_eval(recs, {"m"}, {0, 1, 2, 3}, "scenes", 3, 1);
  CHECK(lim.methods[0].road_scenes == 2);
  CHECK(lim.methods[0].scores.at("srg_road") == Approx(40.0));
  CHECK(lim.methods[0].randomisation_scenes == 1);
  CHECK(lim.methods[0].randomisation.back().spearman == Approx(0.9));
  CHECK(lim.methods[0].survives);
  // Of two records of one (sample, method), the last counts (a resumed run's recomputed record).
  std::vector<EvalRecord> twice = recs;
  twice.push_back(a);
  twice.back().scores["srg_black"] = 40;
  CHECK(summarise_eval(twice, {"m"}, 4).methods[0].scores.at("srg_black") == Approx(20.0));
  // Records of different models (another number of cascade steps) are refused.
  twice.back().randomisation.pop_back();
  try {
    summarise_eval(twice, {"m"}, 4);
    FAIL("mixed randomisation step counts were accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("randomisation steps") != std::string::npos);
  }
  CHECK(eval_randomisation_step_name(1, 8) == "head");
  CHECK(eval_randomisation_step_name(2, 8) == "block 5");
  CHECK(eval_randomisation_step_name(7, 8) == "block 0");
  CHECK(eval_randomisation_step_name(8, 8) == "embedding");
  Config six = deit_tiny_config();
  six.depth = 6;
  for (int st = 1; st <= 8; ++st) CHECK(eval_randomisation_step_name(st, 8) == randomisation_step_name(six, st));
}

TEST_CASE("reports: markdown table, CSV and SVG plots", "[eval]") {
  std::vector<EvalRecord> recs;
  for (const char* name : {"rollout", "transformer-attribution", "random", "oracle"}) {
    recs.push_back(single_record(0, name, 3, 3, std::string(name) == "oracle" ? 5 : 3, 3));
    recs.push_back(two_record(1, name));
  }
  const EvalSummary s = summarise_eval(recs, {"rollout", "transformer-attribution", "random", "oracle"}, 2);
  const std::string md = eval_markdown(s, "test", "vitlens eval x");
  CHECK(md.find("| rollout |") != std::string::npos);
  CHECK(md.find("| *oracle* |") != std::string::npos);
  CHECK(md.find("**90.00**") != std::string::npos);  // negative AUC, best among the methods
  CHECK(md.find("vitlens eval x") != std::string::npos);
  const std::string csv = eval_csv(s);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 5);
  CHECK(csv.rfind("oracle,1,1,2,", std::string::npos) != std::string::npos);
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d) {
      const std::string svg = eval_svg(s, c, d);
      CHECK(svg.rfind("<svg", 0) == 0);
      CHECK(svg.find("</svg>") != std::string::npos);
      size_t lines = 0;
      for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
      CHECK(lines == 4);
    }
  CHECK(eval_svg_name(0, 1) == "perturbation_negative_predicted.svg");
  // Without ROAD or randomisation records: neither columns nor the ROAD plots.
  CHECK(md.find("ROAD") == std::string::npos);
  CHECK(md.find("Model randomisation") == std::string::npos);
  CHECK(eval_road_svg(s, 0).empty());
  // With them: the columns, the randomisation table, the CSV columns and the ROAD plots.
  for (EvalRecord& r : recs) {
    const bool flat = r.method == "random";
    add_new_metrics(r, r.classes[0], 8, flat ? 1.0 : 0.25);
    if (r.items == 2) r.road = false;
    if (r.method == "oracle") r.randomisation.clear();  // as eval: the oracle is not randomised
    if (r.items == 1) r.scores = {{"srg_black", flat ? 0.5 : 12.0}, {"srg_road", flat ? -0.5 : 34.0},
                                  {"mass_accuracy", 0.125}, {"rank_accuracy", 0.25}};
  }
  const EvalSummary s2 = summarise_eval(recs, {"rollout", "transformer-attribution", "random", "oracle"}, 2);
  const std::string md2 = eval_markdown(s2, "test", "");
  for (const char* col : {"| ROAD LeRF ↑ |", "| ROAD MoRF ↓ |", "| SRG black ↑ |", "| SRG ROAD ↑ |", "| Mass acc. ↑ |",
                          "| Rank acc. ↑ |", "| Rand. ρ |", "| Rand. SSIM |"})
    CHECK(md2.find(col) != std::string::npos);
  // The oracle's row: black-fill AUCs neg. 90, pos. 5 (its top says 5), then ROAD's 90 and 90.
  CHECK(md2.find("| *oracle* | 90.00 | 90.00 | 5.00 | 5.00 | 90.00 | 90.00 |") != std::string::npos);
  CHECK(md2.find("| **12.00** | **34.00** | **12.50** | **25.00** |") != std::string::npos);  // the methods
  CHECK(md2.find("| 0.50 | -0.50 | 12.50 | 25.00 |") != std::string::npos);                // random
  CHECK(md2.find("| *random* |") != std::string::npos);
  CHECK(md2.find("**Model randomisation** (Adebayo et al. 2018) on 2 samples") != std::string::npos);
  CHECK(md2.find("| Method | head | block 5 | block 4 | block 3 | block 2 | block 1 | block 0 | embedding |") !=
        std::string::npos);
  CHECK(md2.find("| 0.250 | 0.125 | 0.062 | no |") != std::string::npos);
  CHECK(md2.find("| 1.000 | 0.500 | 0.250 | **yes** |") != std::string::npos);
  CHECK(md2.find("[road_lerf.svg](road_lerf.svg)") != std::string::npos);
  const std::string csv2 = eval_csv(s2);
  const std::string header = csv2.substr(0, csv2.find('\n'));
  for (const char* col : {",road_scenes,road_morf_auc,road_lerf_auc,acc_road_morf_p00,", ",acc_road_lerf_p90,",
                          ",randomisation_scenes,randomisation_survives,rand_spearman_s01,", ",rand_spearman_s08,",
                          ",rand_spearman_abs_s01,", ",rand_ssim_s08,mass_accuracy,rank_accuracy,srg_black,srg_road"})
    CHECK(header.find(col) != std::string::npos);
  CHECK(csv2.find(",1,90.000000,90.000000,1.000000,") != std::string::npos);  // rollout: road_scenes, AUCs, acc p00
  CHECK(csv2.find(",2,1,1.000000,") != std::string::npos);  // random: 2 randomised samples, survives, ρ step 1
  CHECK(csv2.find(",0.125000,0.250000,12.000000,34.000000\n") != std::string::npos);
  for (int d = 0; d < 2; ++d) {
    const std::string svg = eval_road_svg(s2, d);
    CHECK(svg.find(d ? "ROAD LeRF" : "ROAD MoRF") != std::string::npos);
    size_t lines = 0;
    for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    CHECK(lines == 4);
  }
  CHECK(eval_road_svg_name(1) == "road_lerf.svg");
}

TEST_CASE("sanity ordering on the shipped model: random < transformer-attribution < oracle", "[eval]") {
  if (!have_data()) return;
  const Model m = load_model_file(test::source_path("models/vitlens-scenes.vitl"));
  const Model f32 = load_model_file(test::source_path("models/vitlens-scenes-f32.vitl"));
  const FashionMnist test = load_fashion_mnist(fashion_mnist_default_dir, false);
  EvalOptions opt;
  opt.methods = {"transformer-attribution", "rollout", "random", "oracle"};
  opt.n = 48;
  opt.threads = kThreads;
  opt.chunk = 12;
  opt.road = 48;
  opt.randomisation = 6;
  opt.scenes.size = m.config.image_h;
  std::vector<EvalRecord> recs;
  int chunks = 0;
  run_eval(m, &f32, test, opt, {}, [&](const std::vector<EvalRecord>& b) {
    ++chunks;
    recs.insert(recs.end(), b.begin(), b.end());
  });
  CHECK(chunks == 4);
  REQUIRE(recs.size() == size_t(opt.n) * opt.methods.size());
  for (size_t i = 1; i < recs.size(); ++i) CHECK(recs[i - 1].scene <= recs[i].scene);  // scene order
  const EvalSummary s = summarise_eval(recs, opt.methods, opt.n);
  REQUIRE(s.single >= 15);
  REQUIRE(s.two >= 15);
  const EvalMethodSummary &ta = find(s, "transformer-attribution"), &rnd = find(s, "random"),
                          &oracle = find(s, "oracle"), &rollout = find(s, "rollout");
  INFO("negative AUC (predicted, target): TA " << ta.auc[0][1] << ", " << ta.auc[1][1] << "; random "
                                               << rnd.auc[0][1] << ", " << rnd.auc[1][1] << "; oracle "
                                               << oracle.auc[0][1] << ", " << oracle.auc[1][1]);
  INFO("positive AUC (predicted): TA " << ta.auc[0][0] << ", random " << rnd.auc[0][0] << ", oracle "
                                       << oracle.auc[0][0] << "; mIoU: TA " << ta.miou << ", random " << rnd.miou);
  // Random is worse than transformer-attribution on the negative test, predicted and target maps.
  for (size_t c = 0; c < 2; ++c) CHECK(rnd.auc[c][1] < ta.auc[c][1]);
  CHECK(rnd.miou < ta.miou);
  // The oracle keeps the item longest, so it beats random on the negative test. It is not the
  // best on the perturbation tests, and is not asserted to be: pixels set to black leave the
  // item's silhouette, which this model still recognises (README, "Faithfulness benchmark"),
  // and within the mask the order is raster order.
  for (size_t c = 0; c < 2; ++c) CHECK(oracle.auc[c][1] > rnd.auc[c][1]);
  CHECK(oracle.miou == 1.0);
  CHECK(oracle.pixel_acc == 1.0);
  CHECK(oracle.map == Approx(1.0));
  CHECK(oracle.share == 1.0);
  CHECK(oracle.pointing == 1.0);
  for (const EvalMethodSummary* x : {&ta, &rnd, &rollout}) {
    CHECK(oracle.miou > x->miou);
    CHECK(oracle.map > x->map);
    CHECK(oracle.share > x->share);
  }
  // The clean accuracy (p = 0) is the same for every method and map.
  for (const EvalMethodSummary& x : s.methods)
    for (size_t c = 0; c < 2; ++c)
      for (size_t d = 0; d < 2; ++d) CHECK(x.acc[c][d][0] == ta.acc[0][0][0]);
  // A class-agnostic map explained for each of two items shares s and 1 − s.
  CHECK(rollout.share == Approx(0.5).margin(1e-12));
  CHECK(ta.share > 0.5);
  // The int8 and f32 maps: ρ for the methods, none for the baselines.
  CHECK(ta.rho_scenes == opt.n);
  CHECK(ta.rho > 0.8);
  CHECK(rollout.rho > 0.8);
  CHECK(rnd.rho_scenes == 0);
  CHECK(ta.timed == opt.n);
  CHECK(oracle.timed == 0);
  // The metrics of issue 16. SRG: a random map scores near 0 under either removal (measured
  // −0.13 black, 1.06 ROAD on these scenes, against transformer-attribution's 33.7 and 64.9; per
  // image SRG lies in ±100, so the mean of ~20 images is allowed ±10), transformer-attribution
  // well above it. The oracle's mass and rank accuracy
  // are 1 by construction; random's is about the item's share of the image.
  const double rs_black = rnd.scores.at("srg_black"), rs_road = rnd.scores.at("srg_road");
  const double ts_black = ta.scores.at("srg_black"), ts_road = ta.scores.at("srg_road");
  INFO("SRG black / ROAD: random " << rs_black << " / " << rs_road << ", TA " << ts_black << " / " << ts_road
                                   << "; ROAD AUC MoRF/LeRF: TA " << ta.road_auc[0] << "/" << ta.road_auc[1]
                                   << ", random " << rnd.road_auc[0] << "/" << rnd.road_auc[1]);
  CHECK(std::abs(rs_black) < 10.0);
  CHECK(std::abs(rs_road) < 10.0);
  CHECK(ts_road > rs_road + 20.0);
  CHECK(ts_black > rs_black + 10.0);
  CHECK(ta.road_auc[1] > ta.road_auc[0]);  // LeRF keeps the class longer than MoRF
  CHECK(rnd.road_auc[0] > ta.road_auc[0]);
  CHECK(ta.road_scenes == s.single);
  CHECK(oracle.scores.at("mass_accuracy") == 1.0);
  CHECK(oracle.scores.at("rank_accuracy") == 1.0);
  CHECK(rnd.scores.at("mass_accuracy") < 0.3);
  CHECK(ta.scores.at("mass_accuracy") > rnd.scores.at("mass_accuracy"));
  // Randomisation: the random map does not depend on the model (ρ = 1 at every step: flagged);
  // transformer-attribution's and rollout's do, and lose their correlation (not flagged); the
  // oracle is not part of the check.
  CHECK(rnd.randomisation_scenes == 6);
  CHECK(rnd.survives);
  for (const MapSimilarity& q : rnd.randomisation) CHECK(q.spearman == 1.0);
  CHECK(!ta.survives);
  CHECK(!rollout.survives);
  CHECK(ta.randomisation.front().spearman > ta.randomisation.back().spearman);
  CHECK(oracle.randomisation_scenes == 0);
}

TEST_CASE("the new metrics of a record equal direct calls of the metric functions", "[eval]") {
  if (!have_data()) return;
  const Model m = load_model_file(test::source_path("models/vitlens-scenes.vitl"));
  const FashionMnist test = load_fashion_mnist(fashion_mnist_default_dir, false);
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  EvalOptions opt;
  opt.methods = {"transformer-attribution", "saliency", "random", "oracle"};
  opt.n = 8;
  opt.road = 6;           // scenes 6 and 7 have no ROAD
  opt.randomisation = 3;  // scenes 0…2 are randomised
  opt.scenes.size = c.image_h;
  int single = 0, randomised = 0, no_road = 0;
  for (int i = 0; i < opt.n; ++i) {
    const std::vector<EvalRecord> recs = eval_scene(m, nullptr, test, opt, i);
    const Scene sc = make_scene(test, opt.scenes, opt.seed, uint64_t(i));
    const Image x = scene_input(sc.pixels, c);
    ExplainState st;
    st.set_input(m, x);
    const Vec& logits = st.trace.logits;
    const int pred = arg_max_class(logits);
    const bool one = sc.items.size() == 1;
    for (size_t k = 0; k < opt.methods.size(); ++k) {
      const EvalRecord& r = recs[k];
      const std::string& method = opt.methods[k];
      INFO("scene " << i << ", " << method);
      REQUIRE(r.pred == pred);
      if (method == "random") {  // its map is eval's own: only the model-independence is checked
        if (i < opt.randomisation) {
          REQUIRE(r.randomisation.size() == size_t(randomisation_steps(c)));
          for (const MapSimilarity& q : r.randomisation) CHECK((q.spearman == 1.0 && q.ssim == Approx(1.0)));
        }
        continue;
      }
      Mat map(c.image_h, c.image_w);  // (H, W) the predicted-class map
      if (method == "oracle")
        for (int p = 0; p < hw; ++p) map.data()[p] = sc.items[0].mask[size_t(p)] ? 1.0f : 0.0f;
      else
        map = test::eval_pixel_map(m, x, method, pred);
      if (one) {
        ++single;
        PerturbationWork pw;
        PerturbationCurve morf, lerf;
        perturbation_curve(morf, pw, m, x, logits, map.data(), hw, true);
        perturbation_curve(lerf, pw, m, x, logits, map.data(), hw, false);
        CHECK(r.scores.at("srg_black") ==
              symmetric_relevance_gain(curve_probabilities(c, lerf, pred), curve_probabilities(c, morf, pred)));
        if (i < opt.road) {
          RoadOptions ro;
          ro.seed = road_seed(i);
          road_curve(morf, pw, m, x, logits, map.data(), hw, true, ro);
          road_curve(lerf, pw, m, x, logits, map.data(), hw, false, ro);
          REQUIRE(r.road);
          for (int at = 1; at < perturbation_steps; ++at) {
            CHECK(r.road_top[0][size_t(at - 1)] == arg_max_class(morf.logits[size_t(at)]));
            CHECK(r.road_top[1][size_t(at - 1)] == arg_max_class(lerf.logits[size_t(at)]));
          }
          CHECK(r.scores.at("srg_road") ==
                symmetric_relevance_gain(curve_probabilities(c, lerf, pred), curve_probabilities(c, morf, pred)));
        } else {
          ++no_road;
          CHECK(!r.road);
          CHECK(r.scores.count("srg_road") == 0);
        }
        CHECK(r.scores.at("mass_accuracy") == relevance_mass_accuracy(map.data(), sc.items[0].mask.data(), hw));
        CHECK(r.scores.at("rank_accuracy") == relevance_rank_accuracy(map.data(), sc.items[0].mask.data(), hw));
      } else {
        CHECK(!r.road);
        CHECK(r.scores.empty());
      }
      if (i < opt.randomisation && method != "oracle") {
        ++randomised;
        REQUIRE(r.randomisation.size() == size_t(randomisation_steps(c)));
        for (int step = 1; step <= randomisation_steps(c); ++step) {
          const Model rm = randomise_cascade(m, step, opt.randomisation_seed);
          const Mat other = test::eval_pixel_map(rm, x, method, pred);
          const MapSimilarity want = map_similarity(map.data(), other.data(), c.image_h, c.image_w);
          const MapSimilarity& got = r.randomisation[size_t(step - 1)];
          CHECK(got.spearman == want.spearman);
          CHECK(got.spearman_abs == want.spearman_abs);
          CHECK(got.ssim == want.ssim);
        }
      } else {
        CHECK(r.randomisation.empty());
      }
    }
  }
  CHECK(single >= 6);  // some single-item scenes, with and without ROAD, and two-item ones
  CHECK(no_road >= 1);
  CHECK(single < 3 * opt.n);
  CHECK(randomised == 2 * opt.randomisation);
}

TEST_CASE("records do not depend on the thread count, and a resumed run adds only what is missing", "[eval]") {
  if (!have_data()) return;
  const Model m = load_model_file(test::source_path("models/vitlens-scenes.vitl"));
  const Model f32 = load_model_file(test::source_path("models/vitlens-scenes-f32.vitl"));
  const FashionMnist test = load_fashion_mnist(fashion_mnist_default_dir, false);
  EvalOptions opt;
  opt.methods = {"grad-rollout", "random"};
  opt.n = 6;
  opt.threads = kThreads;
  opt.chunk = 4;
  opt.road = 5;
  opt.randomisation = 3;
  opt.scenes.size = m.config.image_h;
  // One scene at a time on this thread, the reference.
  std::vector<EvalRecord> ref;
  for (int i = 0; i < opt.n; ++i)
    for (EvalRecord& r : eval_scene(m, &f32, test, opt, i)) ref.push_back(r);
  // Scenes 0…3 of grad-rollout and 0…1 of random are done; the run must add the rest only.
  std::vector<EvalRecord> done;
  for (const EvalRecord& r : ref)
    if ((r.method == "grad-rollout" && r.scene < 4) || (r.method == "random" && r.scene < 2)) done.push_back(r);
  std::vector<EvalRecord> added;
  run_eval(m, &f32, test, opt, done, [&](const std::vector<EvalRecord>& b) { added.insert(added.end(), b.begin(), b.end()); });
  CHECK(added.size() == ref.size() - done.size());
  std::vector<EvalRecord> all = done;
  all.insert(all.end(), added.begin(), added.end());
  for (const EvalRecord& r : ref) {
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const EvalRecord& x) { return x.scene == r.scene && x.method == r.method; });
    REQUIRE(it != all.end());
    check_same(*it, r);
  }
  // Nothing left: no scene is computed again.
  std::vector<EvalRecord> again;
  run_eval(m, &f32, test, opt, all, [&](const std::vector<EvalRecord>& b) { again.insert(again.end(), b.begin(), b.end()); });
  CHECK(again.empty());
  int with_road = 0, with_randomisation = 0;
  for (const EvalRecord& r : ref) {
    with_road += r.road;
    with_randomisation += !r.randomisation.empty();
  }
  CHECK(with_road >= 2);
  CHECK(with_randomisation == 2 * opt.randomisation);
  // Records of an older run (no ROAD, randomisation or scores) are recomputed, whole and equal;
  // so are records that lack only the randomisation a larger --randomisation asks for.
  std::vector<EvalRecord> old = ref;
  for (EvalRecord& r : old) {
    if (r.scene == 1) {
      r.road = false;
      r.randomisation.clear();
      r.scores.clear();
    }
    if (r.scene == 4) r.randomisation.clear();
  }
  EvalOptions more = opt;
  more.randomisation = 5;
  std::vector<EvalRecord> redone;
  run_eval(m, &f32, test, more, old, [&](const std::vector<EvalRecord>& b) { redone.insert(redone.end(), b.begin(), b.end()); });
  REQUIRE(redone.size() == 3 * opt.methods.size());  // scene 1, and 3 and 4 for the randomisation
  for (const EvalRecord& r : redone) {
    CHECK((r.scene == 1 || r.scene == 3 || r.scene == 4));
    const auto it = std::find_if(ref.begin(), ref.end(), [&](const EvalRecord& x) { return x.scene == r.scene && x.method == r.method; });
    REQUIRE(it != ref.end());
    EvalRecord want = *it;
    if (r.scene >= 3) {  // asked for now, not in ref
      CHECK(r.randomisation.size() == size_t(randomisation_steps(m.config)));
      want.randomisation = r.randomisation;
    }
    check_same(r, want);
  }
}

TEST_CASE("models that are not scene models are refused", "[eval]") {
  Config c = deit_tiny_config();
  fill_config_defaults(c);
  const Model big = random_model(c, 3);
  FashionMnist none;
  EvalOptions opt;
  opt.methods = {"rollout"};
  opt.n = 1;
  try {
    run_eval(big, nullptr, none, opt, {}, [](const std::vector<EvalRecord>&) {});
    FAIL("accepted a 224×224, 1000-class model");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_argument);
  }
}
