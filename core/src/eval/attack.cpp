// attack.cpp — the attribution-tree trigger attack (Hao et al. 2021, section 6, as a ViT analogue;
// the protocol is in attack.h): trigger selection, patch pasting, the trials and their counts.
#include "vitlens/eval/attack.h"

#include <algorithm>
#include <numeric>

#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

// A counter-based key for one purpose of one (source, slot): the draws do not depend on the
// order in which trials run.
enum Purpose : uint64_t {
  purpose_targets = 1,
  purpose_trigger_at = 2,
  purpose_control = 3,
  purpose_control_at = 4,
  purpose_item = 5,
  purpose_item_at = 6
};
uint64_t draw_key(uint64_t seed, int source, int slot, Purpose purpose) {
  return splitmix64(splitmix64(splitmix64(seed) + uint64_t(source)) + uint64_t(slot) * 8u + uint64_t(purpose));
}

// `count` distinct values of [0, n): the first `count` steps of a Fisher–Yates shuffle of 0…n−1,
// step i swapping in position i + (splitmix64(key + i) mod (n − i)).
std::vector<int> draw_distinct(int count, int n, uint64_t key) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  for (int i = 0; i < count; ++i) {
    const int j = i + int(splitmix64(key + uint64_t(i)) % uint64_t(n - i));
    std::swap(v[size_t(i)], v[size_t(j)]);
  }
  v.resize(size_t(count));
  return v;
}

bool has_label(const std::vector<int>& labels, int c) { return std::find(labels.begin(), labels.end(), c) != labels.end(); }

}  // namespace

const char* paste_mode_name(PasteMode m) { return m == PasteMode::random ? "random" : "same"; }

PasteMode parse_paste_mode(const std::string& name) {
  if (name == "same") return PasteMode::same;
  if (name == "random") return PasteMode::random;
  throw Error(ErrorCode::bad_argument, "unknown paste mode '" + name + "': use same or random");
}

std::vector<int> trigger_patches(const AttrTree& tree, int links, int prefix) {
  std::vector<size_t> order(tree.edges.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tree.edges[a].score > tree.edges[b].score; });
  std::vector<int> out;
  const size_t take = std::min(order.size(), size_t(std::max(links, 0)));
  for (size_t e = 0; e < take; ++e)
    for (int tok : {tree.edges[order[e]].from, tree.edges[order[e]].to})
      if (tok >= prefix && std::find(out.begin(), out.end(), tok - prefix) == out.end()) out.push_back(tok - prefix);
  return out;
}

Image paste_patches(const Image& dst, const Image& src, const std::vector<int>& src_patches,
                    const std::vector<int>& dst_patches, const Config& c) {
  auto shaped = [&](const Image& x) { return x.c == c.channels && x.h == c.image_h && x.w == c.image_w; };
  if (!shaped(dst) || !shaped(src))
    throw Error(ErrorCode::bad_argument, "paste_patches needs two images of the model's shape (" +
                                             std::to_string(c.channels) + "×" + std::to_string(c.image_h) + "×" +
                                             std::to_string(c.image_w) + ")");
  if (src_patches.size() != dst_patches.size())
    throw Error(ErrorCode::bad_argument, "paste_patches needs one destination per source patch");
  const int P = c.num_patches(), gw = c.grid_w(), p = c.patch;
  Image out = dst;
  for (size_t k = 0; k < src_patches.size(); ++k) {
    const int s = src_patches[k], d = dst_patches[k];
    if (s < 0 || s >= P || d < 0 || d >= P)
      throw Error(ErrorCode::bad_argument, "patch index out of the grid (0…" + std::to_string(P - 1) + ")");
    const int sy = (s / gw) * p, sx = (s % gw) * p, dy = (d / gw) * p, dx = (d % gw) * p;
    for (int ch = 0; ch < c.channels; ++ch)
      for (int y = 0; y < p; ++y)
        for (int x = 0; x < p; ++x) out.at(ch, dy + y, dx + x) = src.at(ch, sy + y, sx + x);
  }
  return out;
}

std::vector<int> mask_patches(const std::vector<uint8_t>& mask, int h, int w, const Config& c, double min_share) {
  if (h != c.image_h || w != c.image_w || mask.size() != size_t(h) * size_t(w))
    throw Error(ErrorCode::bad_argument, "the mask must be " + std::to_string(c.image_w) + "×" + std::to_string(c.image_h) +
                                             " (the model's input), got " + std::to_string(w) + "×" + std::to_string(h));
  const int gw = c.grid_w(), p = c.patch;
  std::vector<int> out;
  for (int q = 0; q < c.num_patches(); ++q) {
    int in = 0;
    for (int y = 0; y < p; ++y)
      for (int x = 0; x < p; ++x) in += mask[size_t((q / gw) * p + y) * size_t(w) + size_t((q % gw) * p + x)] != 0 ? 1 : 0;
    if (double(in) >= min_share * double(p * p)) out.push_back(q);
  }
  return out;
}

std::vector<int> draw_patches(int count, int patches, uint64_t key) {
  if (count < 0 || count > patches)
    throw Error(ErrorCode::bad_argument, "cannot draw " + std::to_string(count) + " distinct patches of " +
                                             std::to_string(patches));
  return draw_distinct(count, patches, key);
}

AttackResult run_attack(const Model& m, const std::vector<Image>& images, const std::vector<std::vector<int>>& labels,
                        const AttackOptions& opt, const ProgressFn& progress,
                        const std::vector<std::vector<std::vector<int>>>* item_patches) {
  const Config& c = m.config;
  if (images.size() != labels.size()) throw Error(ErrorCode::bad_argument, "one label set per image is needed");
  if (item_patches && item_patches->size() != images.size())
    throw Error(ErrorCode::bad_argument, "one list of item patches per image is needed");
  for (size_t i = 0; item_patches && i < images.size(); ++i)
    if ((*item_patches)[i].size() != labels[i].size())
      throw Error(ErrorCode::bad_argument, "one list of item patches per label is needed");
  if (opt.links < 1) throw Error(ErrorCode::bad_argument, "--links must be ≥ 1");
  if (opt.sources_per_class < 1 || opt.targets_per_source < 1)
    throw Error(ErrorCode::bad_argument, "sources per class and targets per source must be ≥ 1");
  const int N = int(images.size()), P = c.num_patches();

  // Every image's clean top-1 class and probabilities.
  std::vector<int> pred(static_cast<size_t>(N));
  std::vector<Vec> probs(static_cast<size_t>(N));
  Trace tr;
  for (int i = 0; i < N; ++i) {
    vit_logits(tr, m, images[size_t(i)]);
    pred[size_t(i)] = top_k(c, tr.logits, 1)[0].cls;
    probs[size_t(i)] = output_probs(c, tr.logits);
  }
  // Sources: correctly classified, at most sources_per_class per class, in image order.
  AttackResult out;
  std::vector<int> per_class(static_cast<size_t>(c.classes), 0);
  for (int i = 0; i < N; ++i) {
    const int cls = pred[size_t(i)];
    if (has_label(labels[size_t(i)], cls) && per_class[size_t(cls)] < opt.sources_per_class) {
      per_class[size_t(cls)] += 1;
      out.sources.push_back(i);
    }
  }
  auto classify = [&](const Image& x, int cls, int& top, double& p) {
    vit_logits(tr, m, x);
    top = top_k(c, tr.logits, 1)[0].cls;
    p = double(output_probs(c, tr.logits)[cls]);
  };
  for (size_t si = 0; si < out.sources.size(); ++si) {
    const int s = out.sources[si], cls = pred[size_t(s)];
    vit_forward(tr, m, images[size_t(s)]);
    const AttrTree tree = attattr_tree(attattr_blocks(m, tr, cls, opt.steps, opt.threads), opt.threshold,
                                       c.prefix(), opt.convention);
    const std::vector<int> trigger = trigger_patches(tree, opt.links, c.prefix());
    if (trigger.empty()) {
      out.sources_no_edges.push_back(s);
    } else {
      std::vector<int> pool;  // targets: c neither a label nor the prediction
      for (int j = 0; j < N; ++j)
        if (!has_label(labels[size_t(j)], cls) && pred[size_t(j)] != cls) pool.push_back(j);
      const int T = std::min(opt.targets_per_source, int(pool.size()));
      const std::vector<int> picks = draw_distinct(T, int(pool.size()), draw_key(opt.seed, s, 0, purpose_targets));
      const int K = int(trigger.size());
      std::vector<int> item_pool;  // the patches of the source's item of class c
      if (item_patches) {
        const std::vector<int>& ls = labels[size_t(s)];
        item_pool = (*item_patches)[size_t(s)][size_t(std::find(ls.begin(), ls.end(), cls) - ls.begin())];
      }
      const int KI = std::min(K, int(item_pool.size()));
      for (int slot = 0; slot < T; ++slot) {
        AttackTrial t;
        t.source = s;
        t.target = pool[size_t(picks[size_t(slot)])];
        t.cls = cls;
        t.trigger = trigger;
        t.control = draw_distinct(K, P, draw_key(opt.seed, s, slot, purpose_control));
        for (int q : draw_distinct(KI, int(item_pool.size()), draw_key(opt.seed, s, slot, purpose_item)))
          t.item.push_back(item_pool[size_t(q)]);
        if (opt.mode == PasteMode::same) {
          t.trigger_at = t.trigger;
          t.control_at = t.control;
          t.item_at = t.item;
        } else {
          t.trigger_at = draw_distinct(K, P, draw_key(opt.seed, s, slot, purpose_trigger_at));
          t.control_at = draw_distinct(K, P, draw_key(opt.seed, s, slot, purpose_control_at));
          t.item_at = draw_distinct(KI, P, draw_key(opt.seed, s, slot, purpose_item_at));
        }
        const Image& target = images[size_t(t.target)];
        const Image& source = images[size_t(s)];
        t.pred_clean = pred[size_t(t.target)];
        t.p_clean = double(probs[size_t(t.target)][cls]);
        classify(paste_patches(target, source, t.trigger, t.trigger_at, c), cls, t.pred_trigger, t.p_trigger);
        classify(paste_patches(target, source, t.control, t.control_at, c), cls, t.pred_control, t.p_control);
        if (t.has_item()) classify(paste_patches(target, source, t.item, t.item_at, c), cls, t.pred_item, t.p_item);
        out.trials.push_back(std::move(t));
      }
    }
    if (progress && !progress(double(si + 1) / double(out.sources.size())))
      throw Error(ErrorCode::cancelled, "the attack was cancelled");
  }
  return out;
}

std::vector<AttackSummary> attack_summary(const std::vector<AttackTrial>& trials, int classes) {
  std::vector<AttackSummary> s(size_t(classes) + 1);
  std::vector<std::vector<int>> seen(size_t(classes) + 1);  // distinct sources per row
  for (const AttackTrial& t : trials) {
    if (t.cls < 0 || t.cls >= classes) throw Error(ErrorCode::bad_argument, "a trial's class is out of range");
    for (size_t row : {size_t(t.cls), size_t(classes)}) {
      AttackSummary& a = s[row];
      a.trials += 1;
      a.trigger_hits += t.trigger_hit() ? 1 : 0;
      a.control_hits += t.control_hit() ? 1 : 0;
      a.mean_dp_trigger += t.p_trigger - t.p_clean;
      a.mean_dp_control += t.p_control - t.p_clean;
      if (t.has_item()) {
        a.item_trials += 1;
        a.item_hits += t.item_hit() ? 1 : 0;
        a.mean_dp_item += t.p_item - t.p_clean;
      }
      if (std::find(seen[row].begin(), seen[row].end(), t.source) == seen[row].end()) seen[row].push_back(t.source);
    }
  }
  for (size_t r = 0; r < s.size(); ++r) {
    AttackSummary& a = s[r];
    a.sources = int(seen[r].size());
    if (a.trials > 0) {
      a.trigger_rate = double(a.trigger_hits) / a.trials;
      a.control_rate = double(a.control_hits) / a.trials;
      a.mean_dp_trigger /= a.trials;
      a.mean_dp_control /= a.trials;
    }
    if (a.item_trials > 0) {
      a.item_rate = double(a.item_hits) / a.item_trials;
      a.mean_dp_item /= a.item_trials;
    }
  }
  return s;
}

}  // namespace vitlens
