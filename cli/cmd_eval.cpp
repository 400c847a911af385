// cmd_eval.cpp — `vitlens eval MODEL`: the faithfulness benchmark of the attribution methods on
// held-out scenes or on labelled images (the protocol is core/include/vitlens/eval/eval.h, the
// image sets image_set.h). Stores one JSON line per (sample, method spec) in DIR/scenes.jsonl as
// it goes and skips those on a rerun; then writes DIR/results.md, results.csv and the
// perturbation_*.svg and road_*.svg plots. Progress on stderr. `--shard I/N` runs a share of the samples;
// `vitlens eval merge OUT DIR...` combines the shards' folders into the reports of the whole run.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/eval/eval.h"
#include "vitlens/eval/image_set.h"
#include "vitlens/io/io.h"
#include "vitlens/io/model_file.h"

namespace vitlens::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// FNV-1a (64 bit) of a file's bytes, as hex: identifies the weights a results folder belongs to.
std::string file_digest(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, int64_t(1) << 32);
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

// X.vitl → X-f32.vitl when that file exists (the shipped int8 model's f32 weights); else "".
std::string default_compare(const std::string& model_path) {
  const std::string ext = ".vitl";
  if (model_path.size() <= ext.size() || model_path.compare(model_path.size() - ext.size(), ext.size(), ext) != 0)
    return "";
  const std::string stem = model_path.substr(0, model_path.size() - ext.size());
  if (stem.size() >= 4 && stem.compare(stem.size() - 4, 4, "-f32") == 0) return "";
  const std::string candidate = stem + "-f32.vitl";
  return fs::exists(candidate) ? candidate : "";
}

// Reads DIR/scenes.jsonl. A last line without its newline (an interrupted write) is cut off the
// file (only read past when !repair, as merge does with the shards' folders); any other line that
// is not a record is an error.
std::vector<EvalRecord> load_records(const std::string& path, bool repair) {
  std::vector<EvalRecord> out;
  if (!fs::exists(path)) return out;
  const std::vector<uint8_t> bytes = read_file(path, int64_t(1) << 34);
  const std::string text(bytes.begin(), bytes.end());
  const size_t end = text.rfind('\n');
  const size_t keep = end == std::string::npos ? 0 : end + 1;
  if (keep < text.size()) {
    std::fprintf(stderr, "eval: %s an incomplete last line of %s\n", repair ? "dropping" : "ignoring", path.c_str());
    if (repair) fs::resize_file(path, keep);
  }
  size_t start = 0;
  int line = 0;
  while (start < keep) {
    const size_t nl = text.find('\n', start);
    ++line;
    try {
      out.push_back(eval_record_from_json(text.substr(start, nl - start)));
    } catch (const Error& e) {
      throw Error(ErrorCode::bad_format, path + " line " + std::to_string(line) + ": " + e.what() +
                                             " (delete the file to start over)");
    }
    start = nl + 1;
  }
  return out;
}

// DIR/run.json: {"format", "identity": what must match to resume or merge (model and compare
// digests, baseline seed, the data, the shard), "run": what the reports need (paths as given,
// method specs, n, the ROAD and randomisation sample limits, title, the command that regenerates
// the results)}. A run.json of a run before ROAD and the randomisation check has no limits: its
// records have no such figures, and a rerun with this version adds them (eval.h).
constexpr const char* kRunFormat = "vitlens-eval-2";

json read_run(const std::string& dir) {
  const std::string path = dir + "/run.json";
  if (!fs::exists(path))
    throw Error(ErrorCode::io, path + " does not exist: " + dir + " is not a folder written by vitlens eval");
  const std::vector<uint8_t> bytes = read_file(path, int64_t(1) << 24);
  const json j = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kRunFormat || !j.contains("identity") ||
      !j.contains("run"))
    throw Error(ErrorCode::bad_format, path + " is not a run.json of this version (" + kRunFormat +
                                           "): rerun the benchmark into a new folder");
  const json& id = j["identity"];
  const json& run = j["run"];
  const bool shard_ok = id.is_object() && id.contains("shard") && id["shard"].is_array() && id["shard"].size() == 2 &&
                        id["shard"][0].is_number_integer() && id["shard"][1].is_number_integer();
  const bool run_ok = run.is_object() && run.contains("methods") && run["methods"].is_array() &&
                      std::all_of(run["methods"].begin(), run["methods"].end(), [](const json& m) { return m.is_string(); }) &&
                      run.contains("n") && run["n"].is_number_integer() && run.value("kind", json()).is_string() &&
                      run.value("title", json()).is_string() && run.value("command", json()).is_string() &&
                      run.value("road", json(0)).is_number_integer() && run.value("randomisation", json(0)).is_number_integer();
  if (!shard_ok || !run_ok) throw Error(ErrorCode::bad_format, path + " is damaged: rerun the benchmark into a new folder");
  return j;
}

// "I/N" → (I, N), 0 ≤ I < N.
std::pair<int, int> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  auto number = [&](const std::string& t) {
    if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(t);
  };
  const int i = slash == std::string::npos ? -1 : number(text.substr(0, slash));
  const int n = slash == std::string::npos ? -1 : number(text.substr(slash + 1));
  if (i < 0 || n < 1 || i >= n)
    throw Error(ErrorCode::bad_argument, "--shard takes I/N with 0 ≤ I < N (e.g. 0/4 … 3/4), got '" + text + "'");
  return {i, n};
}

// Writes DIR/results.md, results.csv and the plots for `samples`; returns the markdown.
std::string write_reports(const std::string& dir, const std::vector<EvalRecord>& records, const json& run,
                          const std::vector<int>& samples, const std::string& title_suffix, bool timings) {
  const std::vector<std::string> methods = run.at("methods").get<std::vector<std::string>>();
  EvalSummary s = summarise_eval(records, methods, samples, run.at("kind").get<std::string>(),
                                 run.value("road", EvalOptions::all_samples),
                                 run.value("randomisation", EvalOptions::all_samples));
  if (!timings) eval_drop_timings(s);
  const std::string md = eval_markdown(s, run.at("title").get<std::string>() + title_suffix,
                                       run.at("command").get<std::string>());
  write_file(dir + "/results.md", md);
  write_file(dir + "/results.csv", eval_csv(s));
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d) write_file(dir + "/" + eval_svg_name(c, d), eval_svg(s, c, d));
  for (int d = 0; d < 2; ++d) {
    const std::string svg = eval_road_svg(s, d);
    if (!svg.empty()) write_file(dir + "/" + eval_road_svg_name(d), svg);
  }
  return md;
}

// The keys in which two JSON objects differ, for messages.
std::string differing_keys(const json& a, const json& b) {
  std::string out;
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b[it.key()] != it.value()) out += (out.empty() ? "" : ", ") + it.key();
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key())) out += (out.empty() ? "" : ", ") + it.key();
  return out;
}

class ProgressBar {
 public:
  explicit ProgressBar(int n) : n_(n), tty_(isatty(fileno(stderr)) != 0) {}
  void update(const EvalProgress& p) {
    const int pct = p.total ? int(100.0 * p.done / p.total) : 100;
    if (!tty_ && pct / 5 == last_ / 5 && p.done != p.total) return;  // a line every 5 % off a terminal
    last_ = pct;
    const int width = 28, fill = p.total ? int(double(width) * p.done / p.total) : width;
    std::string bar(size_t(fill), '#');
    bar.resize(size_t(width), '.');
    std::fprintf(stderr, "%seval [%s] %d/%d samples to do (of %d) %3d%%  elapsed %s  ETA %s%s", tty_ ? "\r" : "",
                 bar.c_str(), p.done, p.total, n_, pct, clock_text(p.elapsed_s).c_str(),
                 p.done ? clock_text(p.eta_s).c_str() : "–", tty_ && p.done != p.total ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  int n_;
  bool tty_;
  int last_ = -5;
};

}  // namespace

int cmd_eval_merge(int argc, char** argv) {
  Args args(argc, argv, {}, {"help", "no-timings"});
  if (args.has("help") || args.positional().size() < 2) {
    std::printf(
        "usage: vitlens eval merge OUT DIR... [--no-timings]\n\n"
        "Combines the folders of the shards of one benchmark (vitlens eval ... --shard I/N --out DIR, for\n"
        "I = 0 … N-1) into OUT: OUT/scenes.jsonl with every record, and the same results.md, results.csv and\n"
        "perturbation_*.svg as one run without --shard. Refuses folders of different models, data,\n"
        "options, method specs or N, a missing or repeated shard, a shard that is not finished (rerun its\n"
        "command: it resumes) and records that belong to another shard. OUT must not hold results.\n"
        "--no-timings leaves the timings out of the reports (to compare them byte for byte).\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string out = args.positional()[0];
  const std::vector<std::string> dirs(args.positional().begin() + 1, args.positional().end());
  std::vector<json> runs;
  for (const std::string& d : dirs) runs.push_back(read_run(d));
  // Every folder: the same identity apart from the shard, the same methods and n, one N.
  auto without_shard = [](json id) {
    id.erase("shard");
    return id;
  };
  const int count = runs[0]["identity"]["shard"][1].get<int>();
  std::vector<int> owner(size_t(count), -1);  // shard index → position in dirs
  for (size_t k = 0; k < runs.size(); ++k) {
    const json& id = runs[k]["identity"];
    if (without_shard(id) != without_shard(runs[0]["identity"]))
      throw Error(ErrorCode::bad_argument, dirs[k] + " and " + dirs[0] + " are not shards of one benchmark: their "
                                               "run.json differ in " + differing_keys(without_shard(id), without_shard(runs[0]["identity"])));
    if (runs[k]["run"]["methods"] != runs[0]["run"]["methods"] || runs[k]["run"]["n"] != runs[0]["run"]["n"] ||
        runs[k]["run"].value("road", json()) != runs[0]["run"].value("road", json()) ||
        runs[k]["run"].value("randomisation", json()) != runs[0]["run"].value("randomisation", json()))
      throw Error(ErrorCode::bad_argument, dirs[k] + " and " + dirs[0] + " were run with other --methods, --n, --road or "
                                               "--randomisation: rerun the shards with the same ones");
    const int i = id["shard"][0].get<int>(), n = id["shard"][1].get<int>();
    if (n != count)
      throw Error(ErrorCode::bad_argument, dirs[k] + " is shard " + std::to_string(i) + "/" + std::to_string(n) +
                                               " but " + dirs[0] + " one of " + std::to_string(count));
    if (i < 0 || i >= n) throw Error(ErrorCode::bad_format, dirs[k] + "/run.json: a shard out of range");
    if (owner[size_t(i)] >= 0)
      throw Error(ErrorCode::bad_argument, "shard " + std::to_string(i) + "/" + std::to_string(n) + " is given twice: " +
                                               dirs[size_t(owner[size_t(i)])] + " and " + dirs[k]);
    owner[size_t(i)] = int(k);
  }
  for (int i = 0; i < count; ++i)
    if (owner[size_t(i)] < 0)
      throw Error(ErrorCode::bad_argument, "shard " + std::to_string(i) + "/" + std::to_string(count) +
                                               " is missing: give the folders of all " + std::to_string(count) + " shards");
  const json& run = runs[size_t(owner[0])]["run"];
  const std::vector<std::string> methods = run["methods"].get<std::vector<std::string>>();
  const int n = run["n"].get<int>();
  // Each shard's records: only its own samples, and all of them.
  std::vector<EvalRecord> merged;
  for (int i = 0; i < count; ++i) {
    const std::string& dir = dirs[size_t(owner[size_t(i)])];
    std::map<std::pair<int, std::string>, EvalRecord> mine;
    for (EvalRecord& r : load_records(dir + "/scenes.jsonl", false)) {
      if (r.scene % count != i)
        throw Error(ErrorCode::bad_argument, dir + " (shard " + std::to_string(i) + "/" + std::to_string(count) +
                                                 ") holds sample " + std::to_string(r.scene) + ", which belongs to shard " +
                                                 std::to_string(r.scene % count) + ": the shards overlap");
      if (r.scene >= n || std::find(methods.begin(), methods.end(), r.method) == methods.end()) continue;
      mine[std::make_pair(r.scene, r.method)] = std::move(r);  // the last record of each (a resumed run's)
    }
    for (int s : eval_shard_samples(n, i, count))
      for (const std::string& m : methods)
        if (!mine.count({s, m}))
          throw Error(ErrorCode::bad_argument, dir + " (shard " + std::to_string(i) + "/" + std::to_string(count) +
                                                   ") has no result for sample " + std::to_string(s) + " and method '" + m +
                                                   "': finish it by rerunning its command (it resumes)");
    for (auto& kv : mine) merged.push_back(std::move(kv.second));
  }
  std::stable_sort(merged.begin(), merged.end(), [&](const EvalRecord& a, const EvalRecord& b) {
    if (a.scene != b.scene) return a.scene < b.scene;
    return std::find(methods.begin(), methods.end(), a.method) < std::find(methods.begin(), methods.end(), b.method);
  });
  if (fs::exists(out + "/run.json") || fs::exists(out + "/scenes.jsonl"))
    throw Error(ErrorCode::bad_argument, out + " already holds benchmark results: merge into a new folder");
  fs::create_directories(out);
  json merged_run = runs[size_t(owner[0])];
  merged_run["identity"]["shard"] = {0, 1};
  write_file(out + "/run.json", merged_run.dump(2) + "\n");
  std::string lines;
  for (const EvalRecord& r : merged) lines += eval_record_to_json(r) + "\n";
  write_file(out + "/scenes.jsonl", lines);
  const std::string md = write_reports(out, merged, run, eval_shard_samples(n, 0, 1), "", !args.has("no-timings"));
  std::printf("%s\nmerged %d shards (%zu records) into %s: results.md, results.csv, perturbation_*.svg\n", md.c_str(),
              count, merged.size(), out.c_str());
  return 0;
}

int cmd_eval(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "merge") return cmd_eval_merge(argc - 1, argv + 1);
  Args args(argc, argv,
            {"methods", "n", "out", "seed", "random-seed", "threads", "compare", "chunk", "data", "images", "labels",
             "masks", "shard", "road", "randomisation"},
            {"help", "slow", "no-compare", "no-timings"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens eval MODEL [--methods all|LIST] [--n N] [--out eval-out] [--threads 2]\n"
        "                    [--compare MODEL2 | --no-compare] [--slow] [--random-seed 1] [--chunk 16]\n"
        "                    [--seed %llu] [--data %s]               (scenes, the default)\n"
        "                    [--images DIR [--labels labels.csv] [--masks MDIR]]   (labelled images)\n"
        "                    [--road N] [--randomisation 20] [--shard I/N] [--no-timings]\n"
        "       vitlens eval merge OUT DIR... [--no-timings]\n\n"
        "Scores attribution methods as in Chefer et al. 2021: perturbation tests (positive / negative,\n"
        "maps of the predicted and of the true class, accuracy at 0-90 %% removed, AUC) and segmentation\n"
        "(pixel accuracy, mIoU, mAP) on single-item samples with a mask; class-specific share and pointing\n"
        "game on two-item scenes; Spearman between the maps of MODEL and MODEL2 (default: X-f32.vitl\n"
        "beside X.vitl); latency per map. On single-item samples also ROAD (noisy linear imputation instead\n"
        "of black; MoRF/LeRF AUC), the Symmetric Relevance Gain with black fill and with ROAD, and with a\n"
        "mask Relevance Mass and Rank Accuracy, all of the predicted-class map.\n"
        "--road N: ROAD on samples 0 … N-1 (default 200; 0 = off): a sparse solve per step, 50 ms per map at\n"
        "64×64, ~7 s at 224×224.\n"
        "--randomisation N: the model randomisation check (Adebayo et al. 2018) on samples 0 … N-1 (default\n"
        "20; 0 = off): each method's map after re-initialising the model from the head down, per step;\n"
        "one explanation per method, step and sample.\n"
        "Samples: N held-out scenes (t10k items, stream SEED; N default 1000), or with --images the\n"
        "labelled images DIR/<class>/*.png|jpg|jpeg|bmp (class by name or index), or those listed in\n"
        "labels.csv (file,class rows, file relative to DIR), in sorted order (N default: all); --masks:\n"
        "MDIR/<same relative path>.png, non-zero = object, for the segmentation test and the oracle.\n"
        "Images are resized to the model's input (masks by nearest neighbour); unreadable ones are\n"
        "skipped, counted and listed in results.md.\n"
        "--methods all = every method of 'vitlens explain --list' except the slow ones (--slow adds:\n"
        "%s) plus the baselines random and oracle; or a comma-separated list of specs\n"
        "NAME or NAME:key=value[:key=value...] (e.g. rollout:head-fusion=max:discard-ratio=0.9,\n"
        "transformer-attribution:no-grad), each its own row, shown in a canonical form.\n"
        "DIR/scenes.jsonl grows one line per sample and method; a rerun skips what is there (same model,\n"
        "data and options; a larger --n or more methods add to it). Then DIR/results.md, results.csv and\n"
        "perturbation_*.svg. Results do not depend on --threads, on interruptions or on sharding;\n"
        "timings do (--no-timings leaves them out of the reports).\n"
        "--shard I/N: only samples i with i mod N = I, into its own --out; then 'vitlens eval merge OUT\n"
        "DIR0 ... DIRN-1' writes the reports of the whole run.\n",
        (unsigned long long)eval_default_seed, fashion_mnist_default_dir, [] {
          std::string s;
          for (const std::string& n : eval_slow_methods()) s += (s.empty() ? "" : ", ") + n;
          return s;
        }().c_str());
    return args.has("help") ? 0 : 2;
  }
  const std::string model_path = args.positional()[0];
  const Model m = load_model_file(model_path);
  if (args.has("compare") && args.has("no-compare"))
    throw Error(ErrorCode::bad_argument, "give --compare MODEL2 or --no-compare, not both");
  const std::string compare_path = args.has("no-compare") ? "" : args.get("compare", default_compare(model_path));
  Model compare;
  if (!compare_path.empty()) compare = load_model_file(compare_path);
  const bool images = args.has("images");
  if (!images && (args.has("labels") || args.has("masks")))
    throw Error(ErrorCode::bad_argument, "--labels and --masks go with --images DIR");
  if (images && (args.has("seed") || args.has("data")))
    throw Error(ErrorCode::bad_argument, "--seed and --data choose the scenes; they do not apply to --images");

  EvalOptions opt;
  const std::string methods_text = args.get("methods", "all");
  opt.methods = eval_resolve_methods(methods_text, args.has("slow"), &m.config);
  opt.seed = args.get_u64("seed", eval_default_seed);
  opt.random_seed = args.get_u64("random-seed", 1);
  opt.threads = args.get_int("threads", 2);
  opt.chunk = args.get_int("chunk", 16);
  if (args.has("shard")) std::tie(opt.shard_index, opt.shard_count) = parse_shard(args.get("shard"));
  opt.road = args.get_int("road", opt.road);
  opt.randomisation = args.get_int("randomisation", opt.randomisation);
  if (opt.road < 0 || opt.randomisation < 0)
    throw Error(ErrorCode::bad_argument, "--road and --randomisation take a sample count ≥ 0 (0 = off)");
  opt.scenes.size = m.config.image_h;
  const std::string dir = args.get("out", "eval-out");

  // The data: scenes (Fashion-MNIST loaded only for them) or the labelled images.
  FashionMnist test;
  ImageSet set;
  EvalData data;
  json data_id;
  std::string data_title, data_args;
  if (images) {
    const std::string root = args.get("images");
    set = args.has("labels") ? read_image_labels(root, args.get("labels"), m.config) : list_image_folders(root, m.config);
    if (args.has("masks")) attach_masks(set, args.get("masks"));
    data = image_data(set);
    opt.n = args.get_int("n", data.size);
    data_id = {{"kind", "images"}, {"source", set.source}, {"images", set.images.size()},
               {"files_fnv1a", image_set_digest(set)}};
    data_title = "images " + root + (args.has("labels") ? " labelled by " + args.get("labels") : "") +
                 (args.has("masks") ? ", masks " + args.get("masks") : "");
    data_args = " --images " + root + (args.has("labels") ? " --labels " + args.get("labels") : "") +
                (args.has("masks") ? " --masks " + args.get("masks") : "");
  } else {
    test = load_fashion_mnist(args.get("data", fashion_mnist_default_dir), false);
    data = scene_data(test, opt.scenes, opt.seed);
    opt.n = args.get_int("n", 1000);
    data_id = {{"kind", "scenes"}, {"split", "t10k"}, {"seed", opt.seed}, {"size", opt.scenes.size},
               {"min_item", opt.scenes.min_item}, {"max_item", opt.scenes.max_item},
               {"two_items_permille", opt.scenes.two_items_permille},
               {"alpha_gain_percent", opt.scenes.alpha_gain_percent}, {"mask_alpha", opt.scenes.mask_alpha},
               {"min_visible_permille", opt.scenes.min_visible_permille}, {"flip", opt.scenes.flip}};
    data_title = "t10k scenes, seed " + std::to_string(opt.seed);
    data_args = (args.has("seed") ? " --seed " + args.get("seed") : "") +
                (args.has("data") ? " --data " + args.get("data") : "");
  }
  if (opt.n < 1 || opt.threads < 1 || opt.chunk < 1)
    throw Error(ErrorCode::bad_argument, "--n, --threads and --chunk must be ≥ 1");

  // The folder belongs to one (model, compare model, data, baseline seed, shard).
  const json identity = {
      {"model_fnv1a", file_digest(model_path)},
      {"compare_fnv1a", compare_path.empty() ? json(nullptr) : json(file_digest(compare_path))},
      {"random_seed", opt.random_seed},
      {"data", data_id},
      {"shard", {opt.shard_index, opt.shard_count}}};
  // How the whole (unsharded) run is regenerated: the options that change results, no paths of
  // this machine's output.
  std::string command = "vitlens eval " + model_path;
  if (compare_path.empty()) command += " --no-compare";
  else if (args.has("compare")) command += " --compare " + compare_path;
  std::string canonical_methods;  // "all", or the specs in their canonical form
  for (const std::string& spec : opt.methods) canonical_methods += (canonical_methods.empty() ? "" : ",") + spec;
  if (methods_text == "all") canonical_methods = "all";
  command += data_args + " --methods " + canonical_methods + (args.has("slow") ? " --slow" : "") + " --n " +
             std::to_string(opt.n) + (args.has("random-seed") ? " --random-seed " + args.get("random-seed") : "") +
             (args.has("road") ? " --road " + std::to_string(opt.road) : "") +
             (args.has("randomisation") ? " --randomisation " + std::to_string(opt.randomisation) : "");
  const json run = {{"model", model_path},
                    {"compare", compare_path.empty() ? json(nullptr) : json(compare_path)},
                    {"kind", data.kind},
                    {"methods", opt.methods},
                    {"n", opt.n},
                    {"road", opt.road},
                    {"randomisation", opt.randomisation},
                    {"title", model_path + (compare_path.empty() ? "" : ", ρ against " + compare_path) + " (" +
                                  data_title + ")"},
                    {"command", command}};
  fs::create_directories(dir);
  const std::string run_path = dir + "/run.json";
  if (fs::exists(run_path)) {
    const json old = read_run(dir);
    if (old["identity"] != identity)
      throw Error(ErrorCode::bad_argument, dir + " holds results of another model, compare model, data, seed or shard "
                                                 "(its run.json differs in " + differing_keys(old["identity"], identity) +
                                                 "): choose another --out or delete it");
  }
  write_file(run_path, json({{"format", kRunFormat}, {"identity", identity}, {"run", run}}).dump(2) + "\n");

  const std::string records_path = dir + "/scenes.jsonl";
  std::vector<EvalRecord> records = load_records(records_path, true);
  FILE* f = std::fopen(records_path.c_str(), "a");
  if (!f) throw Error(ErrorCode::io, "cannot append to " + records_path);
  const std::vector<int> samples = eval_shard_samples(opt.n, opt.shard_index, opt.shard_count);
  std::fprintf(stderr, "eval: %zu methods × %zu %s%s → %s; %zu results already there\n", opt.methods.size(),
               samples.size(), images ? "images" : "scenes",
               opt.shard_count > 1 ? (" (shard " + args.get("shard") + " of " + std::to_string(opt.n) + ")").c_str() : "",
               dir.c_str(), records.size());
  ProgressBar bar(int(samples.size()));
  const double t0 = now_ms();
  try {
    run_eval(
        m, compare_path.empty() ? nullptr : &compare, data, opt, records,
        [&](const std::vector<EvalRecord>& batch) {
          for (const EvalRecord& r : batch) {
            const std::string line = eval_record_to_json(r) + "\n";
            if (std::fwrite(line.data(), 1, line.size(), f) != line.size())
              throw Error(ErrorCode::io, "cannot write to " + records_path);
            records.push_back(r);
          }
          std::fflush(f);
        },
        [&](const EvalProgress& p) { bar.update(p); });
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  const double wall_s = (now_ms() - t0) / 1000.0;

  const std::string suffix = opt.shard_count > 1 ? ", shard " + args.get("shard") + " only" : "";
  const std::string md = write_reports(dir, records, run, samples, suffix, !args.has("no-timings"));
  std::printf("%s\nwall time of this run: %s (%.1f s); wrote %s/results.md, results.csv, perturbation_*.svg%s\n",
              md.c_str(), clock_text(wall_s).c_str(), wall_s, dir.c_str(),
              opt.shard_count > 1 ? " (this shard's samples; vitlens eval merge combines the shards)" : "");
  return 0;
}

}  // namespace vitlens::cli
