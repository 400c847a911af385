// cmd_faithfulness.cpp — `vitlens faithfulness MODEL IMAGE --methods A,B`: every faithfulness
// figure of each method's map on one image and class, by core's map_faithfulness
// (core/include/vitlens/metrics/map_faithfulness.h, the figures `vitlens eval` records per sample
// and the page's "Compare two methods" shows): the perturbation test and ROAD in both orders with
// their curves and AUCs, SRG, and against an object mask the relevance mass and rank accuracy,
// the pointing game, the segmentation test and the class share. A table, or --json with the curves.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "vitlens/eval/image_set.h"
#include "vitlens/io/image.h"
#include "vitlens/methods/methods.h"
#include "vitlens/methods/options.h"
#include "vitlens/metrics/map_faithfulness.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

namespace {

using json = nlohmann::json;

// The specs of a comma-separated list (a spec holds ':' and '=', never ',').
std::vector<std::string> split_specs(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = list.find(',', at);
    const std::string s = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (s.empty()) throw Error(ErrorCode::bad_argument, "--methods has an empty entry: give SPEC[,SPEC…]");
    out.push_back(s);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::vector<uint8_t> read_mask(const std::string& path, const Config& c) {
  return resize_mask_nearest(read_image_file(path), c.image_w, c.image_h);
}

json curve_json(const FaithfulnessCurve& fc) {
  std::vector<int> top;
  for (const Vec& z : fc.curve.logits) top.push_back(arg_max_class(z));
  return {{"removed", fc.curve.removed}, {"top", top},         {"prob", fc.prob},
          {"hit", fc.hit},               {"auc_prob", fc.auc_prob}, {"auc_hit", fc.auc_hit}};
}

json orders_json(const std::array<FaithfulnessCurve, 2>& curves, double srg) {
  return {{"positive", curve_json(curves[0])}, {"negative", curve_json(curves[1])}, {"srg", srg}};
}

json figures_json(const MapFaithfulness& f, const RoadOptions& road) {
  json j = {{"black", nullptr}, {"road", nullptr}, {"mask", nullptr}};
  if (f.black) j["black"] = orders_json(f.black_curves, f.srg_black);
  if (f.road) {
    j["road"] = orders_json(f.road_curves, f.srg_road);
    j["road"]["noise"] = road.noise;
    j["road"]["seed"] = road.seed;
  }
  if (f.masked)
    j["mask"] = {{"mass_accuracy", f.mass_accuracy},
                 {"rank_accuracy", f.rank_accuracy},
                 {"pointing", f.pointing},
                 {"pixel_accuracy", f.seg.pixel_accuracy()},
                 {"iou_background", f.seg.iou(0)},
                 {"iou_object", f.seg.iou(1)},
                 {"miou", f.seg.miou()},
                 {"ap", f.seg_ap},
                 {"share", f.two ? json(f.share) : json(nullptr)}};
  return j;
}

// One row of the text table: the figure's name, its direction and each method's value.
struct Row {
  const char* name;
  const char* better;
  double (*get)(const MapFaithfulness&);
};

const Row kRows[] = {
    {"perturbation AUC, most relevant first (black)", "lower", [](const MapFaithfulness& f) { return f.black ? f.black_curves[0].auc_prob : MapFaithfulness::none; }},
    {"perturbation AUC, least relevant first (black)", "higher", [](const MapFaithfulness& f) { return f.black ? f.black_curves[1].auc_prob : MapFaithfulness::none; }},
    {"SRG, black fill", "higher", [](const MapFaithfulness& f) { return f.srg_black; }},
    {"ROAD AUC, MoRF", "lower", [](const MapFaithfulness& f) { return f.road ? f.road_curves[0].auc_prob : MapFaithfulness::none; }},
    {"ROAD AUC, LeRF", "higher", [](const MapFaithfulness& f) { return f.road ? f.road_curves[1].auc_prob : MapFaithfulness::none; }},
    {"SRG, ROAD", "higher", [](const MapFaithfulness& f) { return f.srg_road; }},
    {"relevance mass accuracy", "higher", [](const MapFaithfulness& f) { return f.mass_accuracy; }},
    {"relevance rank accuracy", "higher", [](const MapFaithfulness& f) { return f.rank_accuracy; }},
    {"pointing game", "higher", [](const MapFaithfulness& f) { return f.pointing; }},
    {"segmentation mIoU", "higher", [](const MapFaithfulness& f) { return f.masked ? f.seg.miou() : MapFaithfulness::none; }},
    {"segmentation AP", "higher", [](const MapFaithfulness& f) { return f.seg_ap; }},
    {"class share", "higher", [](const MapFaithfulness& f) { return f.share; }},
};

}  // namespace

int cmd_faithfulness(int argc, char** argv) {
  Args args(argc, argv,
            {"input", "methods", "target", "mask", "other-mask", "road-seed", "road-noise", "input-size", "threads", "out"},
            {"help", "road", "no-black", "json"});
  if (args.has("help") || args.positional().empty() || args.positional().size() > 2 || !args.has("methods")) {
    std::printf(
        "usage: vitlens faithfulness MODEL (IMAGE | --input x.npy) --methods SPEC[,SPEC…] [--target T]\n"
        "         [--mask OBJECT.png [--other-mask OTHER.png]] [--road] [--road-seed S] [--road-noise 0.01]\n"
        "         [--no-black] [--input-size HxW|image] [--threads N] [--json] [--out F]\n\n"
        "Every faithfulness figure of each method's pixel map on one image, for class --target (default:\n"
        "the arg-max class), as `vitlens eval` records them per sample (core's map_faithfulness):\n"
        "the perturbation test (pixels set to black, most / least relevant first, 0–90 %%), with --road\n"
        "also ROAD (removed pixels filled by noisy linear imputation, σ --road-noise in [0, 1] pixel\n"
        "units, noise seed --road-seed, default 0), each order's AUC of the class probability (× 100)\n"
        "and the Symmetric Relevance Gain of each fill; with --mask (an image of the object, nonzero =\n"
        "object, resized by nearest neighbour) the relevance mass and rank accuracy, the pointing game\n"
        "and the segmentation test, and with --other-mask (another object) the class share. SPEC is a\n"
        "method spec as for explain (`rollout:head-fusion=max`). --json writes every figure and curve.\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string image_path = args.positional().size() > 1 ? args.positional()[1] : "";
  const Model m = apply_input_size(load_model_arg(args.positional()[0]), args, image_path);
  const Config& c = m.config;
  const Image x = load_input(args, c, image_path);
  if (args.has("other-mask") && !args.has("mask"))
    throw Error(ErrorCode::bad_argument, "--other-mask needs --mask (the class share compares the two objects)");
  const std::vector<uint8_t> mask = args.has("mask") ? read_mask(args.get("mask"), c) : std::vector<uint8_t>();
  const std::vector<uint8_t> other = args.has("other-mask") ? read_mask(args.get("other-mask"), c) : std::vector<uint8_t>();
  const int threads = args.get_int("threads", 1);
  if (threads < 1) throw Error(ErrorCode::bad_argument, "--threads must be at least 1");

  ExplainState st;
  st.set_input(m, x);
  const int target = args.get_int("target", arg_max_class(st.trace.logits));
  if (target < 0 || target >= c.classes)
    throw Error(ErrorCode::bad_argument, "--target " + std::to_string(target) + " is not a class of the model (0 … " +
                                             std::to_string(c.classes - 1) + ")");
  MapFaithfulnessOptions fo;
  fo.cls = target;
  fo.black = !args.has("no-black");
  fo.road = args.has("road");
  fo.road_options.noise = args.get_double("road-noise", fo.road_options.noise);
  const int seed = args.get_int("road-seed", 0);
  if (seed < 0) throw Error(ErrorCode::bad_argument, "--road-seed must be ≥ 0");
  fo.road_options.seed = uint64_t(seed);
  if (!mask.empty()) fo.mask = mask.data();
  if (!other.empty()) fo.other = other.data();

  const std::vector<std::string> specs = split_specs(args.get("methods"));
  json out = {{"target", target},
              {"class_name", c.class_names[size_t(target)]},
              {"input", {c.image_h, c.image_w}},
              {"methods", json::array()}};
  std::vector<MapFaithfulness> figures(specs.size());
  PerturbationWork w;
  for (size_t k = 0; k < specs.size(); ++k) {
    MethodOptions opt = default_options();
    const MethodInfo& info = apply_method_spec(specs[k], opt, &c);
    if (info.class_specific) opt.target = target;
    opt.threads = threads;
    st.clear_derived();
    double t0 = now_ms();
    const Explanation ex = explain(m, st, info.name, opt);
    const double explain_ms = now_ms() - t0;
    t0 = now_ms();
    Mat map = ex.pixel_map;  // (H, W)
    const bool nonfinite = zero_nonfinite(map.data(), int(map.size()));
    map_faithfulness(figures[k], w, m, x, st.trace.logits, map.data(), int(map.size()), fo);
    const double figures_ms = now_ms() - t0;
    json j = figures_json(figures[k], fo.road_options);
    j["spec"] = specs[k];
    j["nonfinite"] = nonfinite;
    j["explain_ms"] = explain_ms;
    j["figures_ms"] = figures_ms;
    out["methods"].push_back(j);
  }

  std::string text;
  if (args.has("json")) {
    text = out.dump(1) + "\n";
  } else {
    char line[512];
    std::snprintf(line, sizeof line, "%s, class %d (%s), input %d×%d\n", image_path.empty() ? args.get("input").c_str() : image_path.c_str(),
                  target, c.class_names[size_t(target)].c_str(), c.image_h, c.image_w);
    text += line;
    std::snprintf(line, sizeof line, "%-48s %-7s", "figure", "better");
    text += line;
    for (const std::string& s : specs) text += " " + s;
    text += "\n";
    for (const Row& row : kRows) {
      if (std::isnan(row.get(figures[0]))) continue;
      std::snprintf(line, sizeof line, "%-48s %-7s", row.name, row.better);
      text += line;
      for (size_t k = 0; k < specs.size(); ++k) {
        std::snprintf(line, sizeof line, " %*.4f", int(specs[k].size()), row.get(figures[k]));
        text += line;
      }
      text += "\n";
    }
    for (size_t k = 0; k < specs.size(); ++k) {
      std::snprintf(line, sizeof line, "%s: explained in %.1f ms, figures in %.1f ms\n", specs[k].c_str(),
                    out["methods"][k]["explain_ms"].get<double>(), out["methods"][k]["figures_ms"].get<double>());
      text += line;
    }
  }
  write_output(args, text);
  return 0;
}

}  // namespace vitlens::cli
