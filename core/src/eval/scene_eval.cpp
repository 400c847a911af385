// scene_eval.cpp — average precision, exact-set and top-k accuracy of a model on test scenes.
#include "vitlens/eval/scene_eval.h"

#include <algorithm>
#include <numeric>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/data/scenes.h"
#include "vitlens/model/vit.h"

namespace vitlens {

double average_precision(const std::vector<float>& scores, const std::vector<uint8_t>& labels) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[size_t(a)] > scores[size_t(b)]; });
  int hits = 0;
  double sum = 0.0;
  for (size_t r = 0; r < order.size(); ++r) {
    if (!labels[size_t(order[r])]) continue;
    ++hits;
    sum += double(hits) / double(r + 1);  // precision at this positive's rank
  }
  return hits ? sum / hits : 0.0;
}

void score_report(SceneEvalReport& r) {
  const int n = int(r.probs.size());
  r.n = n;
  r.single_n = r.two_n = 0;
  int exact = 0, exact1 = 0, exact2 = 0, top1 = 0, top2 = 0;
  for (int i = 0; i < n; ++i) {
    const auto& p = r.probs[size_t(i)];
    const auto& y = r.target[size_t(i)];
    int items = 0;
    bool same = true;
    for (int k = 0; k < fashion_classes; ++k) {
      items += y[size_t(k)] > 0.5f;
      same = same && ((p[size_t(k)] > 0.5f) == (y[size_t(k)] > 0.5f));
    }
    std::array<int, fashion_classes> order{};
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    exact += same;
    if (items == 1) {
      r.single_n++;
      exact1 += same;
      top1 += y[size_t(order[0])] > 0.5f;
    } else if (items == 2) {
      r.two_n++;
      exact2 += same;
      top2 += (y[size_t(order[0])] > 0.5f) && (y[size_t(order[1])] > 0.5f);
    }
  }
  r.exact_acc = n ? double(exact) / n : 0.0;
  r.exact_single = r.single_n ? double(exact1) / r.single_n : 0.0;
  r.exact_two = r.two_n ? double(exact2) / r.two_n : 0.0;
  r.single_top1 = r.single_n ? double(top1) / r.single_n : 0.0;
  r.two_top2 = r.two_n ? double(top2) / r.two_n : 0.0;
  double ap_sum = 0.0;
  int ap_classes = 0;
  for (int k = 0; k < fashion_classes; ++k) {
    std::vector<float> s(static_cast<size_t>(n));
    std::vector<uint8_t> l(static_cast<size_t>(n));
    int pos = 0;
    for (int i = 0; i < n; ++i) {
      s[size_t(i)] = r.probs[size_t(i)][size_t(k)];
      l[size_t(i)] = r.target[size_t(i)][size_t(k)] > 0.5f;
      pos += l[size_t(i)];
    }
    r.positives[size_t(k)] = pos;
    r.ap[size_t(k)] = average_precision(s, l);
    if (pos) {
      ap_sum += r.ap[size_t(k)];
      ap_classes++;
    }
  }
  r.map = ap_classes ? ap_sum / ap_classes : 0.0;
}

SceneEvalReport evaluate_scenes(const Model& m, const FashionMnist& test, const SceneOptions& opt, uint64_t seed,
                                int n, int threads) {
  const Config& c = m.config;
  if (c.classes != fashion_classes || c.image_h != opt.size || c.image_w != opt.size || c.channels != 3)
    throw Error(ErrorCode::bad_argument, "the model must take 3 × " + std::to_string(opt.size) + " × " +
                                             std::to_string(opt.size) + " scenes and have 10 classes");
  if (n < 1) throw Error(ErrorCode::bad_argument, "evaluation needs at least one scene");
  threads = std::max(1, std::min(usable_threads(threads), n));
  SceneEvalReport r;
  r.probs.assign(size_t(n), {});
  r.target.assign(size_t(n), {});
  auto job = [&](int t) {
    Trace tr;
    for (int i = t; i < n; i += threads) {
      const Scene sc = make_scene(test, opt, seed, uint64_t(i));
      vit_logits(tr, m, scene_input(sc.pixels, c));
      const Vec p = output_probs(c, tr.logits);
      for (int k = 0; k < fashion_classes; ++k) {
        r.probs[size_t(i)][size_t(k)] = p[k];
        r.target[size_t(i)][size_t(k)] = sc.target[size_t(k)];
      }
    }
  };
  run_workers(threads, job);
  score_report(r);
  return r;
}

}  // namespace vitlens
