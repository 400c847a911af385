// cmd_eval.cpp — `vitlens eval MODEL`: the faithfulness benchmark of the attribution methods on
// held-out scenes (the protocol is core/include/vitlens/eval/eval.h). Stores one JSON line per
// (scene, method) in DIR/scenes.jsonl as it goes and skips those on a rerun; then writes
// DIR/results.md, results.csv and the perturbation_*.svg plots. Progress on stderr.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/eval/eval.h"
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
// file; any other line that is not a record is an error.
std::vector<EvalRecord> load_records(const std::string& path) {
  std::vector<EvalRecord> out;
  if (!fs::exists(path)) return out;
  const std::vector<uint8_t> bytes = read_file(path, int64_t(1) << 34);
  const std::string text(bytes.begin(), bytes.end());
  const size_t end = text.rfind('\n');
  const size_t keep = end == std::string::npos ? 0 : end + 1;
  if (keep < text.size()) {
    std::fprintf(stderr, "eval: dropping an incomplete last line of %s\n", path.c_str());
    fs::resize_file(path, keep);
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
    std::fprintf(stderr, "%seval [%s] %d/%d scenes to do (of %d) %3d%%  elapsed %s  ETA %s%s", tty_ ? "\r" : "",
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

int cmd_eval(int argc, char** argv) {
  Args args(argc, argv, {"methods", "n", "out", "seed", "random-seed", "threads", "compare", "chunk", "data"},
            {"help", "slow", "no-compare"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens eval MODEL [--methods all|LIST] [--n 1000] [--out eval-out] [--seed %llu]\n"
        "                    [--threads 2] [--compare MODEL2 | --no-compare] [--slow] [--random-seed 1]\n"
        "                    [--chunk 16] [--data %s]\n\n"
        "Scores attribution methods on N held-out scenes (t10k items, stream SEED) against the items'\n"
        "masks, as in Chefer et al. 2021: perturbation tests (positive / negative, maps of the predicted\n"
        "and of the true class, accuracy at 0-90 %% removed, AUC) and segmentation (pixel accuracy, mIoU,\n"
        "mAP) on single-item scenes; class-specific share and pointing game on two-item scenes; Spearman\n"
        "between the maps of MODEL and MODEL2 (default: X-f32.vitl beside X.vitl); latency per map.\n"
        "--methods all = every method of 'vitlens explain --list' except the slow ones (--slow adds:\n"
        "%s) plus the baselines random and oracle; or a comma-separated list.\n"
        "DIR/scenes.jsonl grows one line per scene and method; a rerun skips what is there (same model,\n"
        "seed and options; a larger --n or more methods add to it). Then DIR/results.md, results.csv and\n"
        "perturbation_*.svg. Results do not depend on --threads or on interruptions; timings do.\n",
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

  EvalOptions opt;
  opt.methods = eval_resolve_methods(args.get("methods", "all"), args.has("slow"));
  opt.n = args.get_int("n", 1000);
  opt.seed = args.get_u64("seed", eval_default_seed);
  opt.random_seed = args.get_u64("random-seed", 1);
  opt.threads = args.get_int("threads", 2);
  opt.chunk = args.get_int("chunk", 16);
  if (opt.n < 1 || opt.threads < 1 || opt.chunk < 1)
    throw Error(ErrorCode::bad_argument, "--n, --threads and --chunk must be ≥ 1");
  opt.scenes.size = m.config.image_h;
  const std::string dir = args.get("out", "eval-out");

  // The folder belongs to one (model, compare model, scene stream, baseline seed).
  const json identity = {
      {"format", "vitlens-eval-1"},
      {"model_fnv1a", file_digest(model_path)},
      {"compare_fnv1a", compare_path.empty() ? json(nullptr) : json(file_digest(compare_path))},
      {"seed", opt.seed},
      {"random_seed", opt.random_seed},
      {"scenes", {{"split", "t10k"}, {"size", opt.scenes.size}, {"min_item", opt.scenes.min_item},
                  {"max_item", opt.scenes.max_item}, {"two_items_permille", opt.scenes.two_items_permille},
                  {"alpha_gain_percent", opt.scenes.alpha_gain_percent}, {"mask_alpha", opt.scenes.mask_alpha},
                  {"min_visible_permille", opt.scenes.min_visible_permille}, {"flip", opt.scenes.flip}}}};
  fs::create_directories(dir);
  const std::string run_path = dir + "/run.json";
  if (fs::exists(run_path)) {
    const std::vector<uint8_t> bytes = read_file(run_path, int64_t(1) << 20);
    const json old = json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (old != identity)
      throw Error(ErrorCode::bad_argument, dir + " holds results of another model, compare model, seed or scene "
                                                 "options (see its run.json): choose another --out or delete it");
  } else {
    write_file(run_path, identity.dump(2) + "\n");
  }

  const std::string records_path = dir + "/scenes.jsonl";
  std::vector<EvalRecord> records = load_records(records_path);
  const FashionMnist test = load_fashion_mnist(args.get("data", fashion_mnist_default_dir), false);
  FILE* f = std::fopen(records_path.c_str(), "a");
  if (!f) throw Error(ErrorCode::io, "cannot append to " + records_path);
  std::fprintf(stderr, "eval: %zu methods × %d scenes (seed %llu) → %s; %zu results already there\n",
               opt.methods.size(), opt.n, (unsigned long long)opt.seed, dir.c_str(), records.size());
  ProgressBar bar(opt.n);
  const double t0 = now_ms();
  try {
    run_eval(
        m, compare_path.empty() ? nullptr : &compare, test, opt, records,
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

  const EvalSummary s = summarise_eval(records, opt.methods, opt.n);
  std::string command = "vitlens eval";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const std::string title = model_path + (compare_path.empty() ? "" : ", ρ against " + compare_path) +
                            " (t10k scenes, seed " + std::to_string(opt.seed) + ")";
  const std::string md = eval_markdown(s, title, command);
  write_file(dir + "/results.md", md);
  write_file(dir + "/results.csv", eval_csv(s));
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d) write_file(dir + "/" + eval_svg_name(c, d), eval_svg(s, c, d));
  std::printf("%s\nwall time of this run: %s (%.1f s); wrote %s/results.md, results.csv, perturbation_*.svg\n",
              md.c_str(), clock_text(wall_s).c_str(), wall_s, dir.c_str());
  return 0;
}

}  // namespace vitlens::cli
