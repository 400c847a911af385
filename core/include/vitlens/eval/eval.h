// eval.h — the faithfulness benchmark (`vitlens eval`): attribution methods scored on held-out
// Fashion-MNIST scenes whose item masks are the ground truth.
//
// Scenes: make_scene(t10k split, options, seed, 0 … n−1), seed 777 by default (a stream of its
// own: training uses the train split, seed 1; monitoring 9001; the model figures 424242; the
// gallery 2026). The metrics are the pure functions of metrics.h; the protocol, per scene and
// method, is:
//
// - Single-item scenes (the protocol of Chefer, Gur & Wolf 2021, whose ImageNet images have one
//   label): the map of the predicted class (the clean scene's arg-max) and the map of the
//   ground-truth class (the item; the same map when the prediction is right). Perturbation
//   test: each map's pixels are removed in perturbation_order (positive and negative), set to 0
//   in [0, 1] space, i.e. (0 − mean_c)/std_c after normalisation, in all channels; after each
//   10 % the scene is re-classified. As in the reference code, a step is correct when the arg-max
//   class equals the ground-truth class, for the predicted-class maps too; so p = 0 is the clean
//   single-item top-1 accuracy. Segmentation test: the predicted-class map (as the reference)
//   against the item's mask.
// - Two-item scenes: the class-specific share and the pointing game of the map of each item's
//   class against that item's mask (and the other item's).
// - Every scene: Spearman's ρ between the predicted-class maps of the evaluated model and of a
//   second model (the f32 weights of an int8 model), and the latency of the predicted-class
//   explanation (the forward pass is shared by all methods of a scene and timed on its own; the
//   method's backward and relevance passes are not shared, so each is timed alone).
//
// Baselines, pseudo-methods of this benchmark only (not in the method registry): `random`, a
// seeded uniform value per pixel drawn from (random seed, scene, class), and `oracle`, the mask of
// the explained item itself (for a single-item scene, its item whatever the class).
//
// Arg-max ties go to the lower class index. Maps with NaN or ±Inf have those pixels set to 0
// and the record says so. Everything but the timings is a function of the models, the options
// and the scene index alone: scenes are computed independently (on `threads` workers, each
// taking the next scene of a chunk) and handed over in scene order, so the records do not
// depend on the thread count, on timing, or on being resumed.
//
// This file has no file I/O: the CLI (cli/cmd_eval.cpp) stores records and reports.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "vitlens/metrics/metrics.h"
#include "vitlens/model/model.h"
#include "vitlens/data/scenes.h"

namespace vitlens {

constexpr uint64_t eval_default_seed = 777;
constexpr const char* eval_random = "random";
constexpr const char* eval_oracle = "oracle";
// The two reference rows that are not attribution methods.
inline bool is_baseline(const std::string& name) { return name == eval_random || name == eval_oracle; }

// Registry methods that `all` leaves out unless slow ones are asked for: those marked
// MethodInfo::long_running (tens of forward and backward passes per map: integrated gradients,
// attattr, smoothgrad).
std::vector<std::string> eval_slow_methods();

// "all" → every registry method (without the slow ones unless include_slow) then random and
// oracle; otherwise a comma-separated list of registry methods and baselines, kept in the given
// order. Throws Error(bad_argument) for an unknown or repeated name or an empty list.
std::vector<std::string> eval_resolve_methods(const std::string& spec, bool include_slow);

struct EvalOptions {
  std::vector<std::string> methods;  // registry names and baselines (eval_resolve_methods)
  int n = 1000;                      // scenes 0 … n−1
  uint64_t seed = eval_default_seed; // scene stream (test split)
  uint64_t random_seed = 1;          // the `random` baseline
  int threads = 2;                   // workers (1 under Emscripten); does not change results
  int chunk = 16;                    // scenes handed to the sink at a time
  SceneOptions scenes;               // scene generator options; size = the model's input side
};

// The results of one method on one scene: what the raw per-scene file stores, one line each.
struct EvalRecord {
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();
  int scene = -1;
  std::string method;
  int items = 0;                          // 1 or 2
  std::array<int, 2> classes{{-1, -1}};   // the items' classes, drawing order (−1: no item)
  int pred = -1;                          // arg-max class of the clean scene
  // Single-item scenes. top[c][d][s]: arg-max class after removing perturbation_count(n, s + 1)
  // pixels of the map of c (0 the predicted class, 1 the ground-truth class) in direction d
  // (0 positive: most relevant first, 1 negative: least relevant first).
  std::array<std::array<std::array<int, perturbation_steps - 1>, 2>, 2> top{};
  SegmentationCounts seg;                 // predicted-class map vs the item's mask
  double seg_ap = 0;
  // Two-item scenes, per item k (the map of item k's class): class_share against the other item
  // and pointing_game in item k's mask.
  std::array<double, 2> share{{0, 0}}, pointing{{0, 0}};
  double rho = none;         // Spearman, evaluated vs compare model (none: not computed)
  double ms = none;          // the predicted-class explanation, forward pass excluded (none: baseline)
  double forward_ms = none;  // the scene's forward pass
  bool nonfinite = false;    // some map held NaN or ±Inf (set to 0)
};

// One JSON object on one line (no newline); ms fields are rounded to 1 µs. Throws
// Error(bad_format) when a line is not a record.
std::string eval_record_to_json(const EvalRecord& r);
EvalRecord eval_record_from_json(const std::string& line);

struct EvalProgress {
  int done = 0, total = 0;  // scenes finished in this run, scenes this run has to do
  double elapsed_s = 0, eta_s = 0;
};
// Receives a chunk's records, scenes ascending, methods in EvalOptions::methods order.
using EvalSink = std::function<void(const std::vector<EvalRecord>&)>;
using EvalProgressFn = std::function<void(const EvalProgress&)>;

// Computes every (scene < n, method) not already in `done` and hands them to `sink`. `compare`
// may be null (no ρ). Throws Error(bad_argument) when a model does not fit 3×size×size scenes
// with 10 classes, or the models' shapes differ.
void run_eval(const Model& m, const Model* compare, const FashionMnist& test, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress = {});

// The records of one scene, one per method (what a worker of run_eval computes).
std::vector<EvalRecord> eval_scene(const Model& m, const Model* compare, const FashionMnist& test,
                                   const EvalOptions& opt, int scene);

// Perturbation curve index: [c][d] with c 0 predicted / 1 target map, d 0 positive / 1 negative.
struct EvalMethodSummary {
  std::string method;
  int perturbation_scenes = 0, segmentation_scenes = 0, class_maps = 0, rho_scenes = 0, timed = 0;
  int nonfinite = 0;  // records with a non-finite map
  std::array<std::array<std::array<double, perturbation_steps>, 2>, 2> acc{};  // accuracy at p = 0 … 0.9
  std::array<std::array<double, 2>, 2> auc{};                                  // perturbation_auc of acc
  SegmentationCounts seg;
  double pixel_acc = 0, miou = 0, map = 0;  // map = mean segmentation AP
  double share = 0, pointing = 0;           // means over the two-item maps
  double rho = EvalRecord::none;            // mean over scenes
  double ms = EvalRecord::none;             // median over scenes
};

struct EvalSummary {
  int n = 0, single = 0, two = 0;
  double forward_ms = EvalRecord::none;  // median over the records' scenes
  std::vector<EvalMethodSummary> methods;
};

// Reduces the records of scenes 0 … n−1 for `methods` (in scene order; extra records, e.g. of
// scenes ≥ n or other methods, are ignored). Throws Error(bad_argument) naming a missing
// (scene, method).
EvalSummary summarise_eval(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods, int n);

// Reports (eval_report.cpp). `title` heads the markdown; `command` is shown as how to
// regenerate it (empty: omitted).
std::string eval_markdown(const EvalSummary& s, const std::string& title, const std::string& command);
std::string eval_csv(const EvalSummary& s);
// One perturbation plot: accuracy (%) over the fraction removed, one curve per method.
// c: 0 predicted / 1 target map; d: 0 positive / 1 negative.
std::string eval_svg(const EvalSummary& s, int c, int d);
// "perturbation_{positive,negative}_{predicted,target}.svg"
std::string eval_svg_name(int c, int d);

}  // namespace vitlens
