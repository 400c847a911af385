// eval.h — the faithfulness benchmark (`vitlens eval`): attribution methods scored on held-out
// Fashion-MNIST scenes whose item masks are the ground truth, or on the user's labelled images
// (image_set.h) with optional object masks.
//
// Samples. Scenes: make_scene(t10k split, options, seed, 0 … n−1), seed 777 by default (a stream
// of its own: training uses the train split, seed 1; monitoring 9001; the model figures 424242;
// the gallery 2026). Labelled images: sample i is the i-th file of the set in sorted order of its
// path relative to the folder, resized to the model's input by preprocess() (image.h), its mask
// resized with nearest neighbour to the same size. A sample is a single-item sample (a labelled
// image, a one-item scene) or a two-item scene. The metrics are the pure functions of metrics.h;
// the protocol, per sample and method spec, is:
//
// - Single-item samples (the protocol of Chefer, Gur & Wolf 2021, whose ImageNet images have one
//   label): the map of the predicted class (the clean input's arg-max) and the map of the
//   ground-truth class (the label; the same map when the prediction is right). Perturbation
//   test: each map's pixels are removed in perturbation_order (positive and negative), set to 0
//   in [0, 1] space, i.e. (0 − mean_c)/std_c after normalisation, in all channels of the model's
//   input (after the resize); after each 10 % the input is re-classified. As in the reference
//   code, a step is correct when the arg-max class equals the ground-truth class, for the
//   predicted-class maps too; so p = 0 is the clean top-1 accuracy. For a sigmoid (multi-label)
//   model the arg-max of the logits is used the same way, i.e. the label must be the most
//   probable class. Segmentation test (samples with a mask): the predicted-class map (as the
//   reference) against the mask.
// - Two-item scenes: the class-specific share and the pointing game of the map of each item's
//   class against that item's mask (and the other item's).
// - Single-item samples, further metrics of the predicted-class map (issue 16):
//   · ROAD (Rong et al., ICML 2022; metrics/road.h): the same two orders as the perturbation test
//     (MoRF = positive, LeRF = negative), the removed pixels filled by noisy linear imputation
//     instead of black, noise seed road_seed(sample) (the same noise for every method of a
//     sample); scored like the black-fill test (a step is correct when the arg-max class is the
//     ground truth), AUC = trapezoid × 100. Only for the predicted-class map (the black-fill test
//     also runs the target-class map; on correctly classified samples the two are the same map).
//     EvalOptions::road limits it to samples i < road (it costs a sparse solve per step).
//   · Symmetric Relevance Gain (Blücher et al., TMLR 2024; metrics/faithfulness.h), scores
//     "srg_black" and "srg_road": the curves of the model's probability of the predicted class
//     (the explained class; curve_probabilities: softmax, sigmoid for a multi-label model) under
//     black fill and under ROAD, SRG = AUC(LeRF) − AUC(MoRF) × 100.
//   · Samples with a mask: Relevance Mass Accuracy and Relevance Rank Accuracy (Arras et al.
//     2022), scores "mass_accuracy" and "rank_accuracy", of the predicted-class map against the
//     item's (the image's) mask.
// - Model randomisation (Adebayo et al., NeurIPS 2018), samples i < EvalOptions::randomisation
//   (of any kind): the model's parameters are re-initialised top down, cumulatively
//   (model/randomise.h: randomise_step, seed EvalOptions::randomisation_seed, one copy of the
//   weights per worker and sample), and at each cascade step 1 … randomisation_steps each
//   method's map of the trained model's predicted class on the randomised model is compared with
//   its map on the trained model (map_similarity: Spearman's ρ, ρ of |maps|, SSIM). Per method,
//   the mean over samples at each step, and the flag randomisation_survives (|mean ρ| > 0.5 after
//   the last step). The `random` baseline (independent of the model: ρ = 1, flagged) is included
//   as the check's own control; the oracle is not (it has no predicted-class map).
// - Every sample: Spearman's ρ between the predicted-class maps of the evaluated model and of a
//   second model (the f32 weights of an int8 model), and the latency of the predicted-class
//   explanation (the forward pass is shared by all methods of a sample and timed on its own; the
//   method's backward and relevance passes are not shared, so each is timed alone).
//
// Method specs: a registry method with options, "NAME" or "NAME:key=value[:key=value…]"
// (parse_method_spec, options.h). Each spec is its own row and the key of its records, in its
// canonical form (eval_canonical_spec): the keys sorted, values in one spelling, options at their
// default dropped, flags as their key, a choice with an alias word as that word ("rollout:discard-ratio=0.9:head-fusion=max",
// "transformer-attribution:no-grad"); the canonical form is also what the reports show.
// Baselines, pseudo-methods of this benchmark only (not in the method registry, no options):
// `random`, a seeded uniform value per pixel drawn from (random seed, sample, class), and
// `oracle`, the mask of the explained item itself (for a single-item sample, its mask whatever
// the class; only for data with masks).
//
// Arg-max ties go to the lower class index. Maps with NaN or ±Inf have those pixels set to 0
// and the record says so. A sample that cannot be read (a corrupt image file, a mask of another
// size) gives one `skipped` record per method with the reason, and is counted and listed in the
// report, not evaluated. Everything but the timings is a function of the models, the options
// and the sample index alone: samples are computed independently (on `threads` workers, each
// taking the next sample of a chunk) and handed over in sample order, so the records do not
// depend on the thread count, on timing, on being resumed, or on the shard that computed them
// (EvalOptions::shard_*: sample i belongs to shard i mod N).
//
// Records written before ROAD and the randomisation check (no road_top, no randomisation, no
// scores) still read: the missing figures count as not computed. run_eval recomputes a stored
// record that lacks a figure its options ask for (the whole record, which is deterministic) and
// appends it; readers keep the last record of a (sample, method).
//
// The per-map figures (both fills' curves, SRG, the mask figures, the class share and pointing
// game) come from one call of map_faithfulness (metrics/map_faithfulness.h) per map, the function
// the wasm API gives the page, so a record holds exactly what that call returns for its map.
//
// Adding a per-record figure (e.g. a ROAD or relevance-mass score): compute it in eval.cpp's
// method_record into EvalRecord::scores under its name; it is stored in the record's JSON,
// averaged per method into EvalMethodSummary::scores and gets a column of its own in the markdown
// and CSV reports. Curves or counts that do not average go into their own fields beside `top`.
//
// This file has no file I/O besides the image sets' loaders (image_set.h): the CLI
// (cli/cmd_eval.cpp) stores records and reports.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "vitlens/metrics/faithfulness.h"
#include "vitlens/metrics/metrics.h"
#include "vitlens/methods/methods.h"
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

// One method spec, parsed: what a row of the benchmark computes.
struct EvalMethod {
  std::string spec;                 // canonical ("rollout:discard-ratio=0.9:head-fusion=max")
  const MethodInfo* info = nullptr; // nullptr: a baseline (spec is its name)
  MethodOptions options;            // parse_method_spec's, threads 1 (the workers run in parallel)
};

// Parses "NAME" or "NAME:key=value[:key=value…]", or a baseline name. Options eval sets itself
// (target) or that do not change a map (threads) are refused, as are options of a baseline.
// `model` (may be null) checks model-dependent ranges (start-layer below the depth). Throws
// Error(bad_argument) with parse_method_spec's message for an unknown method, key or value.
EvalMethod eval_parse_method(const std::string& spec, const Config* model);
// The canonical form of a spec: NAME, then ":key=value" for each option not at the method's
// default, keys in byte order; integers in decimal, numbers in the shortest "%g" form that reads
// back the same double, choices and methods by name (a method spec in parentheses), a choice
// value that has an alias word as that word ("no-grad" for weight=none), flags as their key when
// true (or "key=false").
std::string eval_canonical_spec(const std::string& spec, const Config* model);

// "all" → every registry method (without the slow ones unless include_slow) then random and
// oracle; otherwise a comma-separated list of method specs and baselines (a spec holds ':' and
// '=' but never ','), kept in the given order, each in its canonical form. Throws
// Error(bad_argument) for an unknown name, option or value, for a spec listed twice (in any
// spelling of the same canonical form) or an empty list.
std::vector<std::string> eval_resolve_methods(const std::string& list, bool include_slow,
                                              const Config* model = nullptr);

// One object of a sample: its class and, if known, its mask at the model's input size.
struct EvalItem {
  int cls = -1;
  std::vector<uint8_t> mask;  // (H·W) 1 = object, row-major; empty = no mask
};

// One sample as the workers see it.
struct EvalSample {
  Image x;                     // (C, H, W) the model's normalised input
  std::vector<EvalItem> items; // 1 (a labelled image, a single-item scene) or 2 (a two-item scene)
  std::string skipped;         // non-empty: why the sample could not be used (then x, items empty)
};

// Where the samples come from: scenes (scene_data) or labelled images (image_data, image_set.h).
struct EvalData {
  std::string kind;  // "scenes" or "images"
  int size = 0;      // samples available: 0 … size−1
  bool masks = false;  // every sample may carry masks (required by the oracle)
  // Sample i for a model of config `c`; thread-safe; a sample that cannot be read comes back
  // with `skipped` set, any other problem throws.
  std::function<EvalSample(int i, const Config& c)> load;
  // Throws Error(bad_argument) when the model cannot take these samples (a scene model must take
  // 3 × size × size inputs and have 10 classes).
  std::function<void(const Config& c, const char* what)> check;
};

// The scene stream: make_scene(test, so, seed, i), fed through scene_input. `test` must outlive
// the returned object.
EvalData scene_data(const FashionMnist& test, const SceneOptions& so, uint64_t seed);

struct EvalOptions {
  std::vector<std::string> methods;  // canonical specs and baselines (eval_resolve_methods)
  int n = 1000;                      // samples 0 … n−1
  uint64_t seed = eval_default_seed; // scene stream (test split); used by the scene overloads
  uint64_t random_seed = 1;          // the `random` baseline
  int threads = 2;                   // workers (1 under Emscripten); does not change results
  int chunk = 16;                    // samples handed to the sink at a time
  int shard_index = 0, shard_count = 1;  // evaluate only samples i with i mod count == index
  SceneOptions scenes;               // scene generator options; size = the model's input side
  int road = 200;                    // ROAD on single-item samples i < road (0: off; all_samples: all)
  int randomisation = 20;            // the randomisation check on samples i < randomisation (0: off)
  uint64_t randomisation_seed = 1;   // randomise_step's seed (the same randomised models for all samples)
  static constexpr int all_samples = std::numeric_limits<int>::max();
};

// The noise seed of ROAD on sample `sample` (the same for every method and both orders).
uint64_t road_seed(int sample);

// The samples of shard `index` of `count` among 0 … n−1: i with i mod count == index, ascending.
// Throws Error(bad_argument) unless 0 ≤ index < count.
std::vector<int> eval_shard_samples(int n, int index, int count);

// The results of one method on one sample: what the raw per-sample file stores, one line each.
struct EvalRecord {
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();
  int scene = -1;                         // the sample's index (the scene's index for scenes)
  std::string method;                     // the canonical spec
  std::string skipped;                    // non-empty: the sample could not be read (nothing else set)
  int items = 0;                          // 1 or 2 (0 when skipped)
  std::array<int, 2> classes{{-1, -1}};   // the items' classes, drawing order (−1: no item)
  int pred = -1;                          // arg-max class of the clean input
  // Single-item samples. top[c][d][s]: arg-max class after removing perturbation_count(n, s + 1)
  // pixels of the map of c (0 the predicted class, 1 the ground-truth class) in direction d
  // (0 positive: most relevant first, 1 negative: least relevant first).
  std::array<std::array<std::array<int, perturbation_steps - 1>, 2>, 2> top{};
  bool segmented = false;                 // the item had a mask: seg and seg_ap are set
  SegmentationCounts seg;                 // predicted-class map vs the item's mask
  double seg_ap = 0;
  // Two-item scenes, per item k (the map of item k's class): class_share against the other item
  // and pointing_game in item k's mask.
  std::array<double, 2> share{{0, 0}}, pointing{{0, 0}};
  // ROAD of the predicted-class map (single-item samples; road = computed): road_top[d][s] the
  // arg-max class after removing perturbation_count(n, s + 1) pixels, d 0 MoRF / 1 LeRF.
  bool road = false;
  std::array<std::array<int, perturbation_steps - 1>, 2> road_top{};
  // The randomisation check: one entry per cascade step 1 … randomisation_steps (empty: not
  // computed), the predicted-class map on the randomised model against the trained model's.
  std::vector<MapSimilarity> randomisation;
  // Further per-record figures by name (see the file header); averaged per method. This file
  // sets srg_black, srg_road (single-item samples), mass_accuracy and rank_accuracy (with a mask).
  std::map<std::string, double> scores;
  double rho = none;         // Spearman, evaluated vs compare model (none: not computed)
  double ms = none;          // the predicted-class explanation, forward pass excluded (none: baseline)
  double forward_ms = none;  // the sample's forward pass
  bool nonfinite = false;    // some map held NaN or ±Inf (set to 0)
};

// One JSON object on one line (no newline); ms fields are rounded to 1 µs. Throws
// Error(bad_format) when a line is not a record.
std::string eval_record_to_json(const EvalRecord& r);
EvalRecord eval_record_from_json(const std::string& line);

struct EvalProgress {
  int done = 0, total = 0;  // samples finished in this run, samples this run has to do
  double elapsed_s = 0, eta_s = 0;
};
// Receives a chunk's records, samples ascending, methods in EvalOptions::methods order.
using EvalSink = std::function<void(const std::vector<EvalRecord>&)>;
using EvalProgressFn = std::function<void(const EvalProgress&)>;

// Computes every (sample < n of this shard, method) not already in `done` and hands them to
// `sink`. `compare` may be null (no ρ). Throws Error(bad_argument) when a model does not fit the
// data (data.check), the models' shapes differ, n exceeds the data, or `oracle` is asked for
// data without masks.
void run_eval(const Model& m, const Model* compare, const EvalData& data, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress = {});
// The same on scene_data(test, opt.scenes, opt.seed).
void run_eval(const Model& m, const Model* compare, const FashionMnist& test, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress = {});

// The records of one sample, one per method (what a worker of run_eval computes).
std::vector<EvalRecord> eval_sample(const Model& m, const Model* compare, const EvalData& data,
                                    const EvalOptions& opt, int sample);
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
  // Means over the samples that have them; none (NaN, shown "–") when there are none.
  double pixel_acc = EvalRecord::none, miou = EvalRecord::none, map = EvalRecord::none;  // map = mean segmentation AP
  double share = EvalRecord::none, pointing = EvalRecord::none;  // over the two-item maps
  std::map<std::string, double> scores;     // EvalRecord::scores, mean over the records that have each
  // ROAD (predicted-class map) over the road_scenes records that have it: accuracy at p = 0 … 0.9
  // and perturbation_auc, [d] 0 MoRF / 1 LeRF; auc none without records.
  int road_scenes = 0;
  std::array<std::array<double, perturbation_steps>, 2> road_acc{};
  std::array<double, 2> road_auc{{EvalRecord::none, EvalRecord::none}};
  // The randomisation check over the randomisation_scenes records that have it: the mean of each
  // MapSimilarity field per cascade step (index 0 = step 1), and randomisation_survives of the
  // mean ρ (false without records).
  int randomisation_scenes = 0;
  std::vector<MapSimilarity> randomisation;
  bool survives = false;
  double rho = EvalRecord::none;            // mean over samples
  double ms = EvalRecord::none;             // median over samples
};

struct EvalSummary {
  std::string kind = "scenes";  // EvalData::kind: how the reports name the samples
  int n = 0, single = 0, two = 0;
  int skipped = 0;                    // samples not evaluated
  std::vector<std::string> skipped_reasons;  // the first few: "sample 12: …"
  double forward_ms = EvalRecord::none;  // median over the records' samples
  std::vector<EvalMethodSummary> methods;
};

// Reduces the records of `samples` (indices; or of 0 … n−1) for `methods` (extra records, e.g.
// of other samples or methods, are ignored; of several records of one (sample, method) the last
// counts). ROAD and randomisation figures count only for samples below `road` and
// `randomisation` (a folder resumed with a smaller limit keeps records beyond it). Throws
// Error(bad_argument) naming a missing (sample, method).
EvalSummary summarise_eval(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods,
                           const std::vector<int>& samples, const std::string& kind = "scenes",
                           int road = EvalOptions::all_samples, int randomisation = EvalOptions::all_samples);
EvalSummary summarise_eval(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods, int n);
// Sets every timing of `s` to none, so that reports of the same records compare byte for byte
// (`--no-timings`).
void eval_drop_timings(EvalSummary& s);

// Reports (eval_report.cpp). `title` heads the markdown; `command` is shown as how to
// regenerate it (empty: omitted).
std::string eval_markdown(const EvalSummary& s, const std::string& title, const std::string& command);
std::string eval_csv(const EvalSummary& s);
// One perturbation plot: accuracy (%) over the fraction removed, one curve per method.
// c: 0 predicted / 1 target map; d: 0 positive / 1 negative.
std::string eval_svg(const EvalSummary& s, int c, int d);
// "perturbation_{positive,negative}_{predicted,target}.svg"
std::string eval_svg_name(int c, int d);
// The ROAD plot of direction d (0 MoRF, 1 LeRF): accuracy over the fraction removed, one curve per
// method that has ROAD records; empty when none has.
std::string eval_road_svg(const EvalSummary& s, int d);
// "road_{morf,lerf}.svg"
std::string eval_road_svg_name(int d);
// The name of cascade step `step` (1 … steps) of a model whose last step is `steps` (depth + 2),
// as randomisation_step_name: "head", "block <depth−1>", …, "block 0", "embedding".
std::string eval_randomisation_step_name(int step, int steps);

}  // namespace vitlens
