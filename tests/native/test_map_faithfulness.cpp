// test_map_faithfulness.cpp — map_faithfulness (metrics/map_faithfulness.h), every faithfulness
// figure of one map in one call: that it is the composition of the metric functions it names
// (exactly, on a small random model), hand-worked values (a constant map's two orders are the
// same removal, so SRG is 0; a map equal to the mask scores 1 on every mask figure, its inverse
// 0), its progress and cancellation, the perturbation test going on from the steps it keeps, its
// argument checks, and that on the shipped model each record of the benchmark (eval_scene) holds
// exactly the figures map_faithfulness gives for the same map.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/data/scenes.h"
#include "vitlens/eval/eval.h"
#include "vitlens/io/model_file.h"
#include "vitlens/methods/methods.h"
#include "vitlens/metrics/faithfulness.h"
#include "vitlens/metrics/map_faithfulness.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
namespace fs = std::filesystem;

namespace {

// A map with distinct values (no ties) and an object: a 6×8 rectangle, and a second 4×4 one.
struct Fixture {
  Model m = random_model(test::small_vit_config(), 11);
  Image x = random_input(m.config, 12);
  Vec logits;
  int hw = m.config.image_h * m.config.image_w;
  std::vector<float> map;
  std::vector<uint8_t> mask, other;
  Fixture() {
    Trace tr;
    vit_forward(tr, m, x);
    logits = tr.logits;
    const int w = m.config.image_w;
    map.resize(size_t(hw));
    mask.assign(size_t(hw), 0);
    other.assign(size_t(hw), 0);
    for (int p = 0; p < hw; ++p) {
      map[size_t(p)] = std::sin(0.71f * float(p)) + 0.001f * float(p);
      const int y = p / w, xx = p % w;
      mask[size_t(p)] = y >= 4 && y < 10 && xx >= 3 && xx < 11;
      other[size_t(p)] = y >= 10 && y < 14 && xx >= 16 && xx < 20;
    }
  }
};

void check_curve(const FaithfulnessCurve& got, const PerturbationCurve& want, const Config& c, int cls) {
  CHECK(got.curve.positive == want.positive);
  CHECK(got.curve.removed == want.removed);
  for (size_t s = 0; s < size_t(perturbation_steps); ++s) CHECK(got.curve.logits[s] == want.logits[s]);
  CHECK(got.prob == curve_probabilities(c, want, cls));
  CHECK(got.hit == curve_hits(want, cls));
  CHECK(got.auc_prob == perturbation_auc(curve_probabilities(c, want, cls)));
  CHECK(got.auc_hit == perturbation_auc(curve_hits(want, cls)));
}

bool have_data() {
  const bool ok = fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz") &&
                  fs::exists(test::source_path("models/vitlens-scenes.vitl"));
  if (!ok) WARN("dataset-fashion-mnist or models/vitlens-scenes.vitl is absent: skipped");
  return ok;
}

}  // namespace

TEST_CASE("map_faithfulness is the composition of the metric functions", "[metrics][map_faithfulness]") {
  const Fixture f;
  const Config& c = f.m.config;
  MapFaithfulnessOptions opt;
  opt.cls = 2;
  opt.road = true;
  opt.road_options.seed = 7;
  opt.mask = f.mask.data();
  opt.other = f.other.data();
  MapFaithfulness got;
  PerturbationWork w;
  map_faithfulness(got, w, f.m, f.x, f.logits, f.map.data(), f.hw, opt);
  REQUIRE((got.black && got.road && got.masked && got.two));
  CHECK(got.cls == 2);
  PerturbationWork w2;
  std::array<PerturbationCurve, 2> black, road;
  for (int d = 0; d < 2; ++d) {
    perturbation_curve(black[size_t(d)], w2, f.m, f.x, f.logits, f.map.data(), f.hw, d == 0);
    road_curve(road[size_t(d)], w2, f.m, f.x, f.logits, f.map.data(), f.hw, d == 0, opt.road_options);
    INFO("order " << d);
    check_curve(got.black_curves[size_t(d)], black[size_t(d)], c, 2);
    check_curve(got.road_curves[size_t(d)], road[size_t(d)], c, 2);
  }
  CHECK(got.srg_black == symmetric_relevance_gain(curve_probabilities(c, black[1], 2), curve_probabilities(c, black[0], 2)));
  CHECK(got.srg_road == symmetric_relevance_gain(curve_probabilities(c, road[1], 2), curve_probabilities(c, road[0], 2)));
  CHECK(got.mass_accuracy == relevance_mass_accuracy(f.map.data(), f.mask.data(), f.hw));
  CHECK(got.rank_accuracy == relevance_rank_accuracy(f.map.data(), f.mask.data(), f.hw));
  CHECK(got.pointing == pointing_game(f.map.data(), f.mask.data(), f.hw));
  const SegmentationCounts seg = segmentation_counts(f.map.data(), f.mask.data(), f.hw);
  CHECK(got.seg.correct == seg.correct);
  CHECK(got.seg.pixels == seg.pixels);
  CHECK(got.seg.inter == seg.inter);
  CHECK(got.seg.uni == seg.uni);
  CHECK(got.seg_ap == segmentation_ap(f.map.data(), f.mask.data(), f.hw));
  CHECK(got.share == class_share(f.map.data(), f.mask.data(), f.other.data(), f.hw));
  CHECK(curve_tops(black[0])[8] == arg_max_class(black[0].logits[9]));

  // What is not asked for is not there, and a reused output keeps nothing of the previous call.
  MapFaithfulnessOptions less;
  less.cls = 1;
  map_faithfulness(got, w, f.m, f.x, f.logits, f.map.data(), f.hw, less);
  CHECK((got.black && !got.road && !got.masked && !got.two));
  CHECK((std::isnan(got.srg_road) && std::isnan(got.mass_accuracy) && std::isnan(got.share)));
  check_curve(got.black_curves[0], black[0], c, 1);
}

TEST_CASE("the perturbation and ROAD steps' logits are a full forward pass's of each perturbed input", "[metrics][map_faithfulness]") {
  // Their forward passes form the last block for the head's rows only (vit_logits); the other
  // rows never reach the logits, so each step's logits are those of the whole pass.
  const Fixture f;
  for (int road = 0; road < 2; ++road)
    for (int d = 0; d < 2; ++d) {
      INFO((road ? "ROAD" : "black") << ", order " << d);
      std::vector<Image> steps;
      const PerturbationStepFn keep = [&](int, const Image& x) { steps.push_back(x); };
      PerturbationWork w;
      PerturbationCurve curve;
      if (road) road_curve(curve, w, f.m, f.x, f.logits, f.map.data(), f.hw, d == 0, RoadOptions{}, keep);
      else perturbation_curve(curve, w, f.m, f.x, f.logits, f.map.data(), f.hw, d == 0, keep);
      REQUIRE(steps.size() == size_t(perturbation_steps));
      CHECK(w.tr.head_rows_only);
      for (size_t s = 1; s < steps.size(); ++s) {
        Trace full;
        vit_forward(full, f.m, steps[s]);
        REQUIRE(!full.head_rows_only);
        const std::vector<double> want(full.logits.data(), full.logits.data() + full.logits.size());
        CHECK(test::rel_max_error(curve.logits[s].data(), want) <= 1e-6);
        CHECK(arg_max_class(curve.logits[s]) == arg_max_class(full.logits));
      }
    }
}

TEST_CASE("perturbation_curve goes on from the steps it keeps, the same bit for bit", "[metrics][map_faithfulness]") {
  const Fixture f;
  PerturbationKept kept;
  auto steps_of = [&](const std::vector<float>& map, bool positive) -> PerturbationKept::Steps* {
    for (PerturbationKept::Steps& e : kept.entries)
      if (e.positive == positive && e.map == map) return &e;
    return nullptr;
  };
  for (bool positive : {true, false}) {
    INFO(positive);
    PerturbationWork w;
    PerturbationCurve whole;
    std::vector<std::vector<float>> whole_inputs;
    perturbation_curve(whole, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive,
                       [&](int, const Image& x) { whole_inputs.push_back(x.data); });

    // Stopped at step 4, after its forward pass.
    PerturbationCurve part;
    CHECK_THROWS_AS(perturbation_curve(part, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive,
                                       [](int s, const Image&) {
                                         if (s == 4) throw Error(ErrorCode::cancelled, "stopped");
                                       },
                                       &kept),
                    Error);
    PerturbationKept::Steps* k = steps_of(f.map, positive);
    REQUIRE(k);
    CHECK(k->done == 5);
    // Asked again: steps 1 … 4 are read, not run (a logit marked in the kept step 3 comes back),
    // and every step's perturbed input reaches on_step again.
    k->logits[3][0] = 1234.5f;
    PerturbationCurve resumed;
    std::vector<std::vector<float>> inputs;
    perturbation_curve(resumed, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive,
                       [&](int, const Image& x) { inputs.push_back(x.data); }, &kept);
    CHECK(resumed.logits[3][0] == 1234.5f);
    k = steps_of(f.map, positive);
    resumed.logits[3] = k->logits[3] = whole.logits[3];
    CHECK(resumed.removed == whole.removed);
    for (size_t s = 0; s < size_t(perturbation_steps); ++s) CHECK(resumed.logits[s] == whole.logits[s]);
    CHECK(inputs == whole_inputs);
    CHECK(k->done == perturbation_steps);

    // Another map has an entry of its own, and runs anew.
    std::vector<float> other = f.map;
    other[0] += 1.0f;
    PerturbationCurve fresh, anew;
    perturbation_curve(fresh, w, f.m, f.x, f.logits, other.data(), f.hw, positive);
    perturbation_curve(anew, w, f.m, f.x, f.logits, other.data(), f.hw, positive, {}, &kept);
    for (size_t s = 0; s < size_t(perturbation_steps); ++s) CHECK(anew.logits[s] == fresh.logits[s]);
    REQUIRE(steps_of(other, positive));
    CHECK(steps_of(f.map, positive));
  }
  REQUIRE(kept.entries.size() == 4);
  // Filled up with other maps, one entry more replaces the least recently used (the first map's
  // positive one).
  PerturbationWork w;
  PerturbationCurve c;
  for (size_t e = kept.entries.size(); e < PerturbationKept::capacity; ++e) {
    std::vector<float> more = f.map;
    more[2] += float(e);
    perturbation_curve(c, w, f.m, f.x, f.logits, more.data(), f.hw, false, {}, &kept);
  }
  CHECK(kept.entries.size() == PerturbationKept::capacity);
  CHECK(steps_of(f.map, true));
  std::vector<float> third = f.map;
  third[1] -= 1.0f;
  perturbation_curve(c, w, f.m, f.x, f.logits, third.data(), f.hw, true, {}, &kept);
  CHECK(kept.entries.size() == PerturbationKept::capacity);
  CHECK_FALSE(steps_of(f.map, true));
  CHECK(steps_of(f.map, false));

  // map_faithfulness reads them: a logit marked in a kept step comes back in its figures, and
  // without the mark they equal those of a run without the kept steps.
  MapFaithfulnessOptions o;
  o.cls = 1;
  o.kept = &kept;
  perturbation_curve(c, w, f.m, f.x, f.logits, f.map.data(), f.hw, true, {}, &kept);
  PerturbationKept::Steps* k = steps_of(f.map, true);
  const float clean = k->logits[5][1];
  k->logits[5][1] = 1234.5f;
  MapFaithfulness read, run;
  map_faithfulness(read, w, f.m, f.x, f.logits, f.map.data(), f.hw, o);
  CHECK(read.black_curves[0].curve.logits[5][1] == 1234.5f);
  steps_of(f.map, true)->logits[5][1] = clean;
  map_faithfulness(read, w, f.m, f.x, f.logits, f.map.data(), f.hw, o);
  o.kept = nullptr;
  map_faithfulness(run, w, f.m, f.x, f.logits, f.map.data(), f.hw, o);
  for (size_t d = 0; d < 2; ++d) {
    for (size_t s = 0; s < size_t(perturbation_steps); ++s)
      CHECK(read.black_curves[d].curve.logits[s] == run.black_curves[d].curve.logits[s]);
    CHECK(read.black_curves[d].prob == run.black_curves[d].prob);
  }
  CHECK(read.srg_black == run.srg_black);
}

TEST_CASE("road_curve goes on from the steps it keeps, apart from the black fill's and per noise", "[metrics][map_faithfulness][road]") {
  const Fixture f;
  RoadOptions ro;
  ro.seed = 7;
  PerturbationKept kept;
  auto steps_of = [&](bool positive, const PerturbationFill& fill) -> PerturbationKept::Steps* {
    for (PerturbationKept::Steps& e : kept.entries)
      if (e.positive == positive && e.fill == fill && e.map == f.map) return &e;
    return nullptr;
  };
  const PerturbationFill road{true, ro.noise, ro.seed};
  for (bool positive : {true, false}) {
    INFO(positive);
    PerturbationWork w;
    PerturbationCurve whole;
    road_curve(whole, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive, ro);

    // Stopped at step 4, after its forward pass.
    PerturbationCurve part;
    CHECK_THROWS_AS(road_curve(part, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive, ro,
                               [](int s, const Image&) {
                                 if (s == 4) throw Error(ErrorCode::cancelled, "stopped");
                               },
                               &kept),
                    Error);
    PerturbationKept::Steps* k = steps_of(positive, road);
    REQUIRE(k);
    CHECK(k->done == 5);
    CHECK_FALSE(steps_of(positive, PerturbationFill{}));
    // Asked again: steps 1 … 4 are read, not imputed nor run (a logit marked in the kept step 3
    // comes back; on_step gets them without an image), steps 5 … 9 run as in the whole curve.
    k->logits[3][0] = 1234.5f;
    PerturbationCurve resumed;
    std::vector<size_t> sizes;
    road_curve(resumed, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive, ro,
               [&](int, const Image& x) { sizes.push_back(x.data.size()); }, &kept);
    CHECK(resumed.logits[3][0] == 1234.5f);
    const size_t full = f.x.data.size();
    CHECK(sizes == std::vector<size_t>{full, 0, 0, 0, 0, full, full, full, full, full});
    k = steps_of(positive, road);
    resumed.logits[3] = k->logits[3] = whole.logits[3];
    CHECK(resumed.removed == whole.removed);
    for (size_t s = 0; s < size_t(perturbation_steps); ++s) CHECK(resumed.logits[s] == whole.logits[s]);
    CHECK(k->done == perturbation_steps);

    // Another seed is another curve: an entry of its own, run anew.
    RoadOptions other = ro;
    other.seed = 8;
    PerturbationCurve fresh, anew;
    road_curve(fresh, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive, other);
    road_curve(anew, w, f.m, f.x, f.logits, f.map.data(), f.hw, positive, other, {}, &kept);
    for (size_t s = 0; s < size_t(perturbation_steps); ++s) CHECK(anew.logits[s] == fresh.logits[s]);
    CHECK(steps_of(positive, PerturbationFill{true, ro.noise, 8}));
    CHECK(steps_of(positive, road));
  }

  // map_faithfulness reads ROAD's kept steps as it reads the black fill's.
  MapFaithfulnessOptions o;
  o.cls = 1;
  o.black = false;
  o.road = true;
  o.road_options = ro;
  o.kept = &kept;
  steps_of(false, road)->logits[6][1] = 1234.5f;
  PerturbationWork w;
  MapFaithfulness read, run;
  int passes = 0;
  o.progress = [&](double) { return ++passes > 0; };
  map_faithfulness(read, w, f.m, f.x, f.logits, f.map.data(), f.hw, o);
  CHECK(read.road_curves[1].curve.logits[6][1] == 1234.5f);
  CHECK(passes == 2 * (perturbation_steps - 1));  // progress still counts the steps read
  o.kept = nullptr;
  map_faithfulness(run, w, f.m, f.x, f.logits, f.map.data(), f.hw, o);
  CHECK(run.road_curves[1].curve.logits[6][1] != 1234.5f);
  for (size_t s = 0; s < size_t(perturbation_steps); ++s)
    if (s != 6) CHECK(read.road_curves[1].curve.logits[s] == run.road_curves[1].curve.logits[s]);
  for (size_t s = 0; s < size_t(perturbation_steps); ++s)
    CHECK(read.road_curves[0].curve.logits[s] == run.road_curves[0].curve.logits[s]);
}

TEST_CASE("map_faithfulness: hand-worked values", "[metrics][map_faithfulness]") {
  const Fixture f;
  const Config& c = f.m.config;
  PerturbationWork w;
  MapFaithfulness got;
  MapFaithfulnessOptions opt;
  opt.road = true;
  opt.road_options.noise = 0.0;

  // A constant map: ties go to the lower pixel index in both orders, so both orders remove the same
  // pixels at every step and the curves are equal: SRG exactly 0 for both fills.
  const std::vector<float> flat(size_t(f.hw), 0.25f);
  map_faithfulness(got, w, f.m, f.x, f.logits, flat.data(), f.hw, opt);
  CHECK(got.srg_black == 0.0);
  CHECK(got.srg_road == 0.0);
  CHECK(got.black_curves[0].prob == got.black_curves[1].prob);
  CHECK(got.black_curves[0].auc_prob == got.black_curves[1].auc_prob);
  // Step 0 is the clean input: its probability is the model's, its hit whether cls is the arg-max.
  const Vec p0 = output_probs(c, f.logits);
  CHECK(got.black_curves[0].prob[0] == Approx(double(p0[0])).epsilon(1e-6));
  CHECK(got.black_curves[0].hit[0] == (arg_max_class(f.logits) == 0 ? 1.0 : 0.0));
  CHECK(got.black_curves[0].curve.removed[5] == f.hw / 2);

  // The mask itself as the map: every mask figure is 1 (the object is the map's maximum and its
  // top |mask| pixels, holds all its positive relevance, and the threshold at the mean separates it
  // exactly); its inverse scores 0 on each (the object gets no relevance, and the threshold labels
  // every pixel wrongly: pixel accuracy and both IoUs 0).
  std::vector<float> as_mask(size_t(f.hw)), inverse(size_t(f.hw));
  for (int p = 0; p < f.hw; ++p) {
    as_mask[size_t(p)] = f.mask[size_t(p)] ? 1.0f : 0.0f;
    inverse[size_t(p)] = 1.0f - as_mask[size_t(p)];
  }
  MapFaithfulnessOptions mo;
  mo.black = false;
  mo.mask = f.mask.data();
  mo.other = f.other.data();
  map_faithfulness(got, w, f.m, f.x, f.logits, as_mask.data(), f.hw, mo);
  CHECK((!got.black && !got.road));
  CHECK(got.mass_accuracy == 1.0);
  CHECK(got.rank_accuracy == 1.0);
  CHECK(got.pointing == 1.0);
  CHECK(got.seg.pixel_accuracy() == 1.0);
  CHECK(got.seg.miou() == 1.0);
  CHECK(got.seg_ap == 1.0);
  CHECK(got.share == 1.0);
  map_faithfulness(got, w, f.m, f.x, f.logits, inverse.data(), f.hw, mo);
  CHECK(got.mass_accuracy == 0.0);
  CHECK(got.rank_accuracy == 0.0);
  CHECK(got.pointing == 0.0);
  CHECK(got.seg.pixel_accuracy() == 0.0);
  CHECK(got.seg.miou() == 0.0);
  CHECK(got.share == 0.0);
}

TEST_CASE("map_faithfulness: progress after each forward pass, and cancellation", "[metrics][map_faithfulness]") {
  const Fixture f;
  PerturbationWork w;
  MapFaithfulness got;
  MapFaithfulnessOptions opt;
  opt.road = true;
  std::vector<double> seen;
  opt.progress = [&](double x) {
    seen.push_back(x);
    return true;
  };
  map_faithfulness(got, w, f.m, f.x, f.logits, f.map.data(), f.hw, opt);
  REQUIRE(seen.size() == 36);  // 9 steps × 2 orders × 2 fills
  for (size_t k = 0; k < seen.size(); ++k) CHECK(seen[k] == Approx(double(k + 1) / 36.0));
  CHECK(seen.back() == 1.0);

  int calls = 0;
  opt.progress = [&](double) { return ++calls < 5; };
  try {
    map_faithfulness(got, w, f.m, f.x, f.logits, f.map.data(), f.hw, opt);
    FAIL("not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(calls == 5);
}

TEST_CASE("map_faithfulness: bad arguments", "[metrics][map_faithfulness]") {
  const Fixture f;
  PerturbationWork w;
  MapFaithfulness got;
  // The error code map_faithfulness throws with `opt` and a map of `size` values (none: no throw).
  auto code_of = [&](const MapFaithfulnessOptions& opt, int size) {
    try {
      map_faithfulness(got, w, f.m, f.x, f.logits, f.map.data(), size, opt);
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
    return std::string("none");
  };
  MapFaithfulnessOptions opt;
  opt.black = false;
  CHECK(code_of(opt, f.hw) == "none");
  opt.cls = 4;  // the model has 4 classes
  CHECK(code_of(opt, f.hw) == "bad_argument");
  opt.cls = 0;
  CHECK(code_of(opt, f.hw - 1) == "bad_shape");
  opt.other = f.other.data();  // a second object without the first
  CHECK(code_of(opt, f.hw) == "bad_argument");
}

TEST_CASE("each benchmark record holds exactly map_faithfulness's figures of its map", "[metrics][map_faithfulness][eval]") {
  if (!have_data()) return;
  const Model m = load_model_file(test::source_path("models/vitlens-scenes.vitl"));
  const FashionMnist test = load_fashion_mnist(fashion_mnist_default_dir, false);
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  EvalOptions opt;
  opt.methods = {"transformer-attribution", "rollout", "oracle"};
  opt.n = 40;
  opt.road = 5;  // scenes 5 … 39 without ROAD
  opt.randomisation = 0;
  opt.scenes.size = c.image_h;
  int single = 0, two = 0, target_maps = 0;
  PerturbationWork w;
  MapFaithfulness f;
  for (int i = 0; i < opt.n; ++i) {
    const std::vector<EvalRecord> recs = eval_scene(m, nullptr, test, opt, i);
    const Scene sc = make_scene(test, opt.scenes, opt.seed, uint64_t(i));
    const Image x = scene_input(sc.pixels, c);
    Trace tr;
    vit_forward(tr, m, x);
    const int pred = arg_max_class(tr.logits);
    for (size_t k = 0; k < opt.methods.size(); ++k) {
      const EvalRecord& r = recs[k];
      const std::string& method = opt.methods[k];
      INFO("scene " << i << ", " << method);
      // The map of class `cls` whose object is item `it`, as eval makes it.
      auto map_of = [&](int cls, size_t it) {
        if (method != "oracle") return test::eval_pixel_map(m, x, method, cls);
        Mat o(c.image_h, c.image_w);
        for (int p = 0; p < hw; ++p) o.data()[p] = sc.items[it].mask[size_t(p)] ? 1.0f : 0.0f;
        return o;
      };
      if (sc.items.size() == 1) {
        ++single;
        const Mat map = map_of(pred, 0);
        MapFaithfulnessOptions fo;
        fo.cls = pred;
        fo.road = i < opt.road;
        fo.road_options.seed = road_seed(i);
        fo.mask = sc.items[0].mask.data();
        map_faithfulness(f, w, m, x, tr.logits, map.data(), hw, fo);
        for (size_t d = 0; d < 2; ++d) CHECK(r.top[0][d] == curve_tops(f.black_curves[d].curve));
        CHECK(r.scores.at("srg_black") == f.srg_black);
        CHECK(r.road == f.road);
        if (f.road) {
          for (size_t d = 0; d < 2; ++d) CHECK(r.road_top[d] == curve_tops(f.road_curves[d].curve));
          CHECK(r.scores.at("srg_road") == f.srg_road);
        } else {
          CHECK(r.scores.count("srg_road") == 0);
        }
        CHECK(r.scores.at("mass_accuracy") == f.mass_accuracy);
        CHECK(r.scores.at("rank_accuracy") == f.rank_accuracy);
        CHECK(r.seg.correct == f.seg.correct);
        CHECK(r.seg.inter == f.seg.inter);
        CHECK(r.seg.uni == f.seg.uni);
        CHECK(r.seg_ap == f.seg_ap);
        // The target-class map (the true class) when the prediction is wrong: black fill only.
        const int gt = sc.items[0].cls;
        if (gt != pred && method != "oracle") {
          ++target_maps;
          MapFaithfulnessOptions to;
          to.cls = gt;
          const Mat tmap = map_of(gt, 0);
          map_faithfulness(f, w, m, x, tr.logits, tmap.data(), hw, to);
        }
        for (size_t d = 0; d < 2; ++d) CHECK(r.top[1][d] == curve_tops(f.black_curves[d].curve));
      } else {
        ++two;
        for (size_t it = 0; it < 2; ++it) {
          MapFaithfulnessOptions fo;
          fo.cls = sc.items[it].cls;
          fo.black = false;
          fo.mask = sc.items[it].mask.data();
          fo.other = sc.items[1 - it].mask.data();
          const Mat map = map_of(fo.cls, it);
          map_faithfulness(f, w, m, x, tr.logits, map.data(), hw, fo);
          CHECK(r.share[it] == f.share);
          CHECK(r.pointing[it] == f.pointing);
        }
      }
    }
  }
  CHECK(single >= 3);
  CHECK(two >= 3);
  CHECK(target_maps >= 1);  // a misclassified scene's target-class map
}
