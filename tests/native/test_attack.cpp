// test_attack.cpp — the attribution-tree trigger attack (core/include/vitlens/eval/attack.h): the
// patch pasting bit for bit, the trigger read off a hand-made tree, the seeded draws, and the
// trials and their counts on the small engine fixture model, each re-done independently here.
#include <catch2/catch.hpp>
#include <set>

#include "helpers.h"
#include "vitlens/eval/attack.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

namespace {

int top1(const Model& m, const Image& x, double* p = nullptr, int cls = 0) {
  Trace tr;
  vit_forward(tr, m, x);
  if (p) *p = double(output_probs(m.config, tr.logits)[cls]);
  return top_k(m.config, tr.logits, 1)[0].cls;
}

}  // namespace

TEST_CASE("paste_patches copies whole patches exactly and nothing else", "[attack]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Config& c = m.config;
  REQUIRE(c.grid_h() != c.grid_w());  // a non-square grid catches a row/column mix-up
  const Image dst = random_input(c, 11), src = random_input(c, 12);
  const int P = c.num_patches(), gw = c.grid_w(), p = c.patch;
  const std::vector<int> from = {0, P - 1, gw + 1}, to = {P - 1, 0, 2};
  const Image out = paste_patches(dst, src, from, to, c);
  // by hand: the pixel (ch, y, x) of destination patch d comes from the same offset in source patch s
  std::vector<int> owner(size_t(P), -1);
  for (size_t k = 0; k < to.size(); ++k) owner[size_t(to[k])] = from[k];
  for (int ch = 0; ch < c.channels; ++ch)
    for (int y = 0; y < c.image_h; ++y)
      for (int x = 0; x < c.image_w; ++x) {
        const int d = (y / p) * gw + x / p, s = owner[size_t(d)];
        const float want = s < 0 ? dst.at(ch, y, x) : src.at(ch, (s / gw) * p + y % p, (s % gw) * p + x % p);
        REQUIRE(out.at(ch, y, x) == want);
      }
  CHECK(out.at(0, c.image_h - 1, c.image_w - 1) == src.at(0, p - 1, p - 1));  // patch 0's last pixel → patch P−1's
  CHECK(paste_patches(dst, src, {}, {}, c).data == dst.data);
  CHECK_THROWS_AS(paste_patches(dst, src, {0}, {}, c), Error);
  CHECK_THROWS_AS(paste_patches(dst, src, {P}, {0}, c), Error);
  CHECK_THROWS_AS(paste_patches(Image(c.channels, c.image_h + 1, c.image_w), src, {0}, {0}, c), Error);
}

TEST_CASE("the trigger is the ends of the strongest tree edges, patches only", "[attack]") {
  AttrTree t;
  t.root = 5;
  t.nodes = {5, 3, 0, 7, 2};
  t.edges = {{5, 3, 4, 0.6}, {5, 0, 4, 0.9}, {3, 7, 2, 0.95}, {7, 2, 1, 0.6}};
  // by score: (3, 7) 0.95, (5, 0) 0.9, then the two 0.6 in tree order: (5, 3), (7, 2)
  CHECK(trigger_patches(t, 1, 1) == std::vector<int>{2, 6});        // tokens 3, 7 → patches 2, 6
  CHECK(trigger_patches(t, 2, 1) == std::vector<int>{2, 6, 4});     // + token 5; CLS (0) skipped
  CHECK(trigger_patches(t, 3, 1) == std::vector<int>{2, 6, 4});     // (5, 3): both already in
  CHECK(trigger_patches(t, 4, 1) == std::vector<int>{2, 6, 4, 1});  // (7, 2): token 2 → patch 1
  CHECK(trigger_patches(t, 99, 1) == trigger_patches(t, 4, 1));
  CHECK(trigger_patches(t, 1, 3) == std::vector<int>{0, 4});        // a prefix of 3 tokens
  CHECK(trigger_patches(AttrTree{}, 3, 1).empty());
}

TEST_CASE("mask_patches keeps the patches at least half covered", "[attack]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Config& c = m.config;
  const int H = c.image_h, W = c.image_w, p = c.patch, gw = c.grid_w();
  std::vector<uint8_t> mask(size_t(H) * size_t(W), 0);
  auto fill = [&](int patch, int pixels) {  // the first `pixels` pixels of the patch, row by row
    for (int k = 0; k < pixels; ++k) mask[size_t((patch / gw) * p + k / p) * size_t(W) + size_t((patch % gw) * p + k % p)] = 255;
  };
  fill(0, p * p);          // whole
  fill(1, p * p / 2);      // exactly half: kept
  fill(gw, p * p / 2 - 1); // just under half: dropped
  fill(c.num_patches() - 1, p * p);
  CHECK(mask_patches(mask, H, W, c) == std::vector<int>{0, 1, c.num_patches() - 1});
  CHECK(mask_patches(mask, H, W, c, 1.0) == std::vector<int>{0, c.num_patches() - 1});
  CHECK(mask_patches(mask, H, W, c, 0.0).size() == size_t(c.num_patches()));
  CHECK_THROWS_AS(mask_patches(mask, H, W + 1, c), Error);
}

TEST_CASE("patch draws are distinct, in range and reproducible", "[attack]") {
  const std::vector<int> a = draw_patches(10, 40, 123), b = draw_patches(10, 40, 123), d = draw_patches(10, 40, 124);
  CHECK(a == b);
  CHECK(a != d);
  CHECK(std::set<int>(a.begin(), a.end()).size() == 10);
  for (int v : a) CHECK((v >= 0 && v < 40));
  const std::vector<int> all = draw_patches(40, 40, 5);
  CHECK(std::set<int>(all.begin(), all.end()).size() == 40);
  // roughly uniform: each patch drawn about 5000 × 10/40 times
  std::vector<int> hits(40, 0);
  for (uint64_t k = 0; k < 5000; ++k)
    for (int v : draw_patches(10, 40, 1000 + k * 7919)) hits[size_t(v)] += 1;
  for (int h : hits) CHECK(std::abs(h - 1250) < 200);
  CHECK_THROWS_AS(draw_patches(41, 40, 1), Error);
}

TEST_CASE("the attack's trials and counts, re-done by hand on a small model", "[attack]") {
  const Model m = test::engine_fixture_model("nonsquare");
  const Config& c = m.config;
  std::vector<Image> images;
  std::vector<std::vector<int>> labels;
  std::vector<int> pred;
  for (uint64_t seed = 900; seed < 924; ++seed) {
    images.push_back(random_input(c, seed));
    pred.push_back(top1(m, images.back()));
    // every third image mislabelled, so it can be neither a source nor (for its class) skipped as a target
    labels.push_back(seed % 3 == 0 ? std::vector<int>{(pred.back() + 1) % c.classes} : std::vector<int>{pred.back()});
  }
  for (PasteMode mode : {PasteMode::same, PasteMode::random}) {
    INFO(paste_mode_name(mode));
    AttackOptions opt;
    opt.links = 2;
    opt.mode = mode;
    opt.sources_per_class = 2;
    opt.targets_per_source = 3;
    opt.steps = 4;
    opt.threshold = 0.2;
    opt.seed = 42;
    // item control: hand-made item patch lists, one per label; image 0's item is small (2 patches)
    std::vector<std::vector<std::vector<int>>> items;
    for (size_t i = 0; i < images.size(); ++i)
      items.push_back({i == 0 ? std::vector<int>{3, 5} : draw_patches(10, c.num_patches(), 77 + i)});
    const AttackResult r = run_attack(m, images, labels, opt, {}, &items);
    REQUIRE(!r.trials.empty());
    // sources: correctly classified, ≤ 2 per class, in image order
    std::vector<int> per_class(size_t(c.classes), 0), want_sources;
    for (size_t i = 0; i < images.size(); ++i)
      if (labels[i][0] == pred[i] && per_class[size_t(pred[i])]++ < 2) want_sources.push_back(int(i));
    CHECK(r.sources == want_sources);
    int trigger_hits = 0, control_hits = 0, item_hits = 0;
    for (const AttackTrial& t : r.trials) {
      CHECK(t.cls == pred[size_t(t.source)]);
      CHECK(t.pred_clean == pred[size_t(t.target)]);
      CHECK(pred[size_t(t.target)] != t.cls);
      CHECK(std::find(labels[size_t(t.target)].begin(), labels[size_t(t.target)].end(), t.cls) ==
            labels[size_t(t.target)].end());
      REQUIRE(!t.trigger.empty());
      CHECK(int(t.trigger.size()) <= 2 * opt.links);
      CHECK(t.control.size() == t.trigger.size());
      // the item control: as many patches as the trigger (or all of a small item), all on the item
      REQUIRE(t.has_item());
      CHECK(t.item.size() == std::min(t.trigger.size(), items[size_t(t.source)][0].size()));
      for (int q : t.item)
        CHECK(std::find(items[size_t(t.source)][0].begin(), items[size_t(t.source)][0].end(), q) !=
              items[size_t(t.source)][0].end());
      CHECK(std::set<int>(t.item.begin(), t.item.end()).size() == t.item.size());
      if (mode == PasteMode::same) {
        CHECK(t.trigger_at == t.trigger);
        CHECK(t.control_at == t.control);
        CHECK(t.item_at == t.item);
      } else {
        CHECK(t.item_at.size() == t.item.size());
      }
      // the trial's predictions, recomputed here
      double p = 0;
      CHECK(top1(m, paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.trigger, t.trigger_at, c), &p,
                 t.cls) == t.pred_trigger);
      CHECK(p == Approx(t.p_trigger).margin(1e-12));
      CHECK(top1(m, paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.control, t.control_at, c), &p,
                 t.cls) == t.pred_control);
      CHECK(p == Approx(t.p_control).margin(1e-12));
      CHECK(top1(m, paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.item, t.item_at, c), &p, t.cls) ==
            t.pred_item);
      CHECK(p == Approx(t.p_item).margin(1e-12));
      item_hits += t.pred_item == t.cls ? 1 : 0;
      trigger_hits += t.pred_trigger == t.cls ? 1 : 0;
      control_hits += t.pred_control == t.cls ? 1 : 0;
    }
    const std::vector<AttackSummary> s = attack_summary(r.trials, c.classes);
    REQUIRE(s.size() == size_t(c.classes + 1));
    CHECK(s.back().trials == int(r.trials.size()));
    CHECK(s.back().trigger_hits == trigger_hits);
    CHECK(s.back().control_hits == control_hits);
    CHECK(s.back().item_trials == s.back().trials);
    CHECK(s.back().item_hits == item_hits);
    CHECK(s.back().sources == int(r.sources.size() - r.sources_no_edges.size()));
    // deterministic: the same options give the same trials
    const AttackResult again = run_attack(m, images, labels, opt, {}, &items);
    REQUIRE(again.trials.size() == r.trials.size());
    for (size_t k = 0; k < r.trials.size(); ++k) {
      CHECK(again.trials[k].target == r.trials[k].target);
      CHECK(again.trials[k].control == r.trials[k].control);
      CHECK(again.trials[k].trigger_at == r.trials[k].trigger_at);
      CHECK(again.trials[k].p_trigger == r.trials[k].p_trigger);
      CHECK(again.trials[k].item == r.trials[k].item);
    }
    // without masks: no item control, the same trigger and random control
    const AttackResult plain = run_attack(m, images, labels, opt);
    REQUIRE(plain.trials.size() == r.trials.size());
    for (size_t k = 0; k < r.trials.size(); ++k) {
      CHECK(!plain.trials[k].has_item());
      CHECK(plain.trials[k].control == r.trials[k].control);
      CHECK(plain.trials[k].pred_trigger == r.trials[k].pred_trigger);
    }
    CHECK(attack_summary(plain.trials, c.classes).back().item_trials == 0);
    std::vector<std::vector<std::vector<int>>> wrong(images.size());
    CHECK_THROWS_AS(run_attack(m, images, labels, opt, {}, &wrong), Error);
  }
}

TEST_CASE("attack_summary counts hits and mean probability changes per class", "[attack]") {
  auto trial = [](int source, int cls, int pt, int pc, double p0, double p1, double p2) {
    AttackTrial t;
    t.source = source;
    t.cls = cls;
    t.pred_trigger = pt;
    t.pred_control = pc;
    t.p_clean = p0;
    t.p_trigger = p1;
    t.p_control = p2;
    return t;
  };
  std::vector<AttackTrial> trials = {trial(0, 1, 1, 0, 0.1, 0.7, 0.2), trial(0, 1, 2, 1, 0.2, 0.3, 0.6),
                                     trial(3, 1, 1, 2, 0.0, 0.9, 0.0), trial(5, 2, 0, 0, 0.5, 0.4, 0.5)};
  trials[0].item = {4};  // item controls on two trials of class 1: one hit (p 0.1 → 0.5), one miss
  trials[0].pred_item = 1;
  trials[0].p_item = 0.5;
  trials[2].item = {7};
  trials[2].pred_item = 0;
  trials[2].p_item = 0.2;
  const std::vector<AttackSummary> s = attack_summary(trials, 3);
  REQUIRE(s.size() == 4);
  CHECK(s[0].trials == 0);
  CHECK(s[0].trigger_rate == 0.0);
  CHECK(s[1].sources == 2);
  CHECK(s[1].trials == 3);
  CHECK(s[1].trigger_hits == 2);
  CHECK(s[1].control_hits == 1);
  CHECK(s[1].trigger_rate == Approx(2.0 / 3.0));
  CHECK(s[1].control_rate == Approx(1.0 / 3.0));
  CHECK(s[1].mean_dp_trigger == Approx((0.6 + 0.1 + 0.9) / 3.0));
  CHECK(s[1].mean_dp_control == Approx((0.1 + 0.4 + 0.0) / 3.0));
  CHECK(s[1].item_trials == 2);
  CHECK(s[1].item_hits == 1);
  CHECK(s[1].item_rate == Approx(0.5));
  CHECK(s[1].mean_dp_item == Approx((0.4 + 0.2) / 2.0));
  CHECK(s[2].item_trials == 0);
  CHECK(s[2].item_rate == 0.0);
  CHECK(s[2].trigger_hits == 0);
  CHECK(s[2].mean_dp_trigger == Approx(-0.1));
  CHECK(s[3].sources == 3);
  CHECK(s[3].trials == 4);
  CHECK(s[3].trigger_hits == 2);
  CHECK(s[3].trigger_rate == Approx(0.5));
  CHECK(s[3].control_rate == Approx(0.25));
  CHECK_THROWS_AS(attack_summary({trial(0, 3, 0, 0, 0, 0, 0)}, 3), Error);
  CHECK(parse_paste_mode("random") == PasteMode::random);
  CHECK_THROWS_AS(parse_paste_mode("elsewhere"), Error);
}
