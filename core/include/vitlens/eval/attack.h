// attack.h — the ViT analogue of the adversarial triggers of Hao, Dong, Wei & Xu (AAAI 2021,
// "Self-Attention Attribution", section 6): the strongest links of an image's attribution tree
// name the patches whose interaction carries its prediction; pasted into images of other classes,
// do they move those predictions to the source's class?
//
// Hao et al. take, over the training examples of a class, the most frequent token pairs at the
// ends of the strongest attattr links and insert them into other examples (a non-targeted attack
// on BERT). Here, per source image:
//   1. source: an image whose top-1 class c is one of its labels; attattr for c (m = `steps`),
//      its attribution tree (attattr.h, `convention`, τ = `threshold`);
//   2. trigger: the patches at both ends of the tree's `links` strongest edges (by score, ties in
//      the tree's order), each once, prefix tokens (CLS) excluded;
//   3. for each of `targets_per_source` target images (c not among their labels and not their
//      top-1 class, drawn without replacement), paste the trigger's patches — every channel of
//      each p×p square, exactly, in normalised space — at their own positions (PasteMode::same)
//      or at distinct random positions (PasteMode::random), and re-classify;
//   4. control: as many patches of the same source, drawn uniformly without replacement from all
//      of its patches, pasted the same way into the same target;
//   5. item control (when the item masks are given): as many patches drawn the same way from the
//      patches that lie on the source's item of class c (mask_patches), all of them when it has
//      fewer. The trigger's patches mostly lie on the item; this control asks whether the tree
//      picks better patches than any patches of the item.
// A trial succeeds when the pasted target's top-1 class is c (arg-max ties: the lower index).
// The attack success rate of a class is its successes over its trials, for the trigger and the
// control alike.
//
// Deterministic: every draw comes from splitmix64 on (seed, source, target slot, purpose), so the
// trials depend on the options and the data only. No file I/O (the CLI, cli/cmd_attack.cpp,
// writes the report).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/methods/attattr.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

enum class PasteMode { same, random };
const char* paste_mode_name(PasteMode m);
// "same" | "random"; throws Error(bad_argument) otherwise.
PasteMode parse_paste_mode(const std::string& name);

// The trigger of a tree: the patch indices (token − prefix, row-major in the grid) at both ends of
// its `links` highest-scoring edges, in the order they first appear; tokens < prefix skipped.
std::vector<int> trigger_patches(const AttrTree& tree, int links, int prefix);

// `dst` with patch src_patches[i] of `src` copied onto patch dst_patches[i] (all channels of the
// p×p square, bit for bit). Both images have the model's shape; throws Error(bad_argument) when
// they do not, when the lists differ in length, or when a patch index is outside the grid.
Image paste_patches(const Image& dst, const Image& src, const std::vector<int>& src_patches,
                    const std::vector<int>& dst_patches, const Config& c);

// The patches (row-major indices) of which at least `min_share` of the pixels are in `mask`
// ((H, W) of the model's input, nonzero = in); throws Error(bad_argument) for another size.
std::vector<int> mask_patches(const std::vector<uint8_t>& mask, int h, int w, const Config& c, double min_share = 0.5);

// `count` distinct patch indices in [0, patches), uniformly without replacement, from the
// counter-based stream `key` (the same key gives the same draw).
std::vector<int> draw_patches(int count, int patches, uint64_t key);

struct AttackOptions {
  int links = 3;                 // the strongest tree edges whose ends form the trigger
  PasteMode mode = PasteMode::same;
  int sources_per_class = 10;    // at most this many source images per class (the first in image order)
  int targets_per_source = 5;    // target images per source
  int steps = 20;                // attattr's m
  double threshold = 0.4;        // the tree's τ
  TreeConvention convention = TreeConvention::ours;
  uint64_t seed = 1;
  int threads = 1;               // attattr's block threads (the result does not depend on it)
};

struct AttackTrial {
  int source = 0, target = 0, cls = 0;  // image indices; c, the source's top-1 class
  std::vector<int> trigger, trigger_at;  // patches of the source and where they were pasted
  std::vector<int> control, control_at;  // the control's, as many
  std::vector<int> item, item_at;        // the item control's (empty without masks)
  int pred_clean = 0, pred_trigger = 0, pred_control = 0, pred_item = -1;  // the target's top-1 class
  double p_clean = 0, p_trigger = 0, p_control = 0, p_item = 0;           // the target's probability of c
  bool trigger_hit() const { return pred_trigger == cls; }
  bool control_hit() const { return pred_control == cls; }
  bool has_item() const { return !item.empty(); }
  bool item_hit() const { return has_item() && pred_item == cls; }
};

struct AttackResult {
  std::vector<AttackTrial> trials;    // by source (image order), then target slot
  std::vector<int> sources;           // every source image used, in that order
  std::vector<int> sources_no_edges;  // sources whose tree had no edge (no trial)
};

// Runs the protocol above on `images` with their gold label sets. `item_patches` (may be null):
// per image, per label (aligned with `labels`), the patches of that item (mask_patches), for the
// item control. `progress` (may be empty) gets the fraction of sources done; returning false
// throws Error(cancelled).
AttackResult run_attack(const Model& m, const std::vector<Image>& images, const std::vector<std::vector<int>>& labels,
                        const AttackOptions& opt, const ProgressFn& progress = {},
                        const std::vector<std::vector<std::vector<int>>>* item_patches = nullptr);

// Success counts per class (index 0 … classes − 1) and over all trials (index `classes`).
struct AttackSummary {
  int sources = 0, trials = 0, trigger_hits = 0, control_hits = 0;
  double trigger_rate = 0, control_rate = 0;        // hits / trials (0 without trials)
  double mean_dp_trigger = 0, mean_dp_control = 0;  // mean of p_after − p_clean of class c
  int item_trials = 0, item_hits = 0;               // over the trials with an item control
  double item_rate = 0, mean_dp_item = 0;
};
std::vector<AttackSummary> attack_summary(const std::vector<AttackTrial>& trials, int classes);

}  // namespace vitlens
