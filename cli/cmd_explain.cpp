// cmd_explain.cpp — `vitlens explain MODEL (IMAGE | --input x.npy) --method NAME`: one
// attribution map, saved raw as .npy and/or rendered as a jet overlay on the image.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/npy.h"

namespace vitlens::cli {

namespace {

void print_list() {
  for (const MethodInfo& m : method_registry()) {
    std::string opts;
    auto add = [&](unsigned bit, const char* flag) {
      if (m.options & bit) opts += std::string(opts.empty() ? "" : " ") + flag;
    };
    add(opt_start_layer, "--start-layer");
    add(opt_head_fusion, "--head-fusion");
    add(opt_discard_ratio, "--discard-ratio");
    add(opt_block, "--block");
    add(opt_use_grad, "--no-grad");
    add(opt_steps, "--steps");
    add(opt_quadrature, "--quadrature");
    add(opt_baseline, "--baseline");
    add(opt_smooth, "--inner --samples --noise --seed");
    add(opt_stage, "--stage");
    std::printf("%-24s %s\n%-24s   %s%s%s\n", m.name, m.description, "", m.paper,
                opts.empty() ? "" : "; options: ", opts.c_str());
  }
}

// The jet colour map of v in [0, 1] (piecewise linear, as matplotlib's "jet").
void jet(float v, uint8_t rgb[3]) {
  auto ramp = [](float x) { return uint8_t(255.0f * std::min(1.0f, std::max(0.0f, x))); };
  rgb[0] = ramp(1.5f - std::fabs(4.0f * v - 3.0f));
  rgb[1] = ramp(1.5f - std::fabs(4.0f * v - 2.0f));
  rgb[2] = ramp(1.5f - std::fabs(4.0f * v - 1.0f));
}

// Half the image, half the min-max-normalised map in jet colours.
void write_overlay(const std::string& path, const Mat& map, const Image& x, const Config& cfg) {
  const Pixels img = denormalise(x, cfg);
  Pixels out;
  out.w = img.w;
  out.h = img.h;
  out.channels = 3;
  out.data.resize(size_t(out.w) * size_t(out.h) * 3);
  const float lo = map.minCoeff(), hi = map.maxCoeff();
  const float range = hi > lo ? hi - lo : 1.0f;
  for (int y = 0; y < out.h; ++y)
    for (int xx = 0; xx < out.w; ++xx) {
      uint8_t c[3];
      jet((map(y, xx) - lo) / range, c);
      const size_t o = (size_t(y) * size_t(out.w) + size_t(xx)) * 3;
      const size_t i = (size_t(y) * size_t(img.w) + size_t(xx)) * size_t(img.channels);
      for (int k = 0; k < 3; ++k) {
        const int src = img.data[i + size_t(img.channels >= 3 ? k : 0)];
        out.data[o + size_t(k)] = uint8_t((src + int(c[k]) + 1) / 2);
      }
    }
  write_png(path, out);
}

nlohmann::json report_json(const ConservationReport& r) {
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerRelevance& l : r.layers)
    layers.push_back({{"layer", l.layer}, {"relevance_out", l.relevance_out}, {"relevance_in", l.relevance_in}});
  nlohmann::json blocks = nlohmann::json::array();
  for (double s : r.block_input_sums) blocks.push_back(num(s));
  return {{"seed_sum", r.seed_sum}, {"block_input_sums", blocks}, {"tokens_sum", num(r.tokens_sum)},
          {"image_sum", num(r.image_sum)}, {"layers", layers}};
}

HeadFusion parse_fusion(const std::string& s) {
  if (s == "mean") return HeadFusion::mean;
  if (s == "max") return HeadFusion::max;
  if (s == "min") return HeadFusion::min;
  throw Error(ErrorCode::bad_argument, "--head-fusion must be mean, max or min, got '" + s + "'");
}

Quadrature parse_quadrature(const std::string& s) {
  if (s == "left") return Quadrature::left;
  if (s == "right") return Quadrature::right;
  if (s == "middle") return Quadrature::middle;
  if (s == "gauss-legendre") return Quadrature::gauss_legendre;
  throw Error(ErrorCode::bad_argument, "--quadrature must be left, right, middle or gauss-legendre, got '" + s + "'");
}

NormStage parse_stage(const std::string& s) {
  if (s == "atb") return NormStage::atb;
  if (s == "atb-res") return NormStage::atb_res;
  if (s == "atb-res-ln") return NormStage::atb_res_ln;
  if (s == "atb-res-ln-ff") return NormStage::atb_res_ln_ff;
  if (s == "layer") return NormStage::layer;
  throw Error(ErrorCode::bad_argument, "--stage must be atb, atb-res, atb-res-ln, atb-res-ln-ff or layer, got '" + s + "'");
}

// A progress bar on stderr for the long methods (only when stderr is a terminal or asked).
ProgressFn progress_bar(const std::string& method) {
  return [method, last = -1](double f) mutable {
    const int pct = int(f * 100.0);
    if (pct != last) {
      last = pct;
      std::fprintf(stderr, "\r%s %3d%%", method.c_str(), pct);
      if (pct >= 100) std::fprintf(stderr, "\n");
    }
    return true;
  };
}

}  // namespace

int cmd_explain(int argc, char** argv) {
  Args args(argc, argv,
            {"input", "method", "target", "start-layer", "head-fusion", "discard-ratio", "block", "save-map", "out",
             "steps", "quadrature", "baseline", "inner", "samples", "noise", "seed", "stage", "threads"},
            {"help", "list", "no-grad", "json", "conservation", "progress"});
  if (args.has("list")) {
    print_list();
    return 0;
  }
  if (args.has("help") || args.positional().empty() || args.positional().size() > 2 || !args.has("method")) {
    std::printf(
        "usage: vitlens explain MODEL (IMAGE | --input x.npy) --method NAME [--target T]\n"
        "         [--start-layer S] [--head-fusion mean|max|min] [--discard-ratio R] [--block B] [--no-grad]\n"
        "         [--steps N] [--quadrature left|right|middle|gauss-legendre] [--baseline IMAGE]\n"
        "         [--inner METHOD] [--samples N] [--noise SIGMA] [--seed S] [--stage STAGE] [--threads T]\n"
        "         [--save-map map.npy] [--out overlay.png] [--json] [--conservation] [--progress]\n"
        "       vitlens explain --list\n\n"
        "--target: class to explain (default: the predicted class). --start-layer, --block: 0-based blocks.\n"
        "--save-map writes the raw, unnormalised map as float32 .npy: (H/p, W/p) tokens, or (H, W) pixels\n"
        "for lrp and attnlrp. --out writes a jet overlay of the min-max-normalised pixel map on the image.\n"
        "--json prints the map and, for LRP methods, the conservation report (Σ relevance after each\n"
        "layer); --conservation prints only the report. --steps: attattr's m (20) or integrated-gradients'\n"
        "n (32); --baseline: IG's baseline image (default black); smoothgrad wraps --inner (saliency) over\n"
        "--samples noisy copies (σ = --noise × the input range, stream --seed); norm-based rolls out\n"
        "--stage (atb, atb-res, atb-res-ln, atb-res-ln-ff, layer; default layer). --threads runs\n"
        "independent passes in parallel; --progress shows a progress bar for the long methods.\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string method = args.get("method");
  const MethodInfo* info = find_method(method);
  if (!info) throw Error(ErrorCode::bad_argument, "unknown method '" + method + "' (see vitlens explain --list)");
  auto needs = [&](const char* flag, unsigned bit) {
    if (args.has(flag) && !(info->options & bit))
      throw Error(ErrorCode::bad_argument,
                  std::string("--") + flag + " does not apply to " + method + " (see vitlens explain --list)");
  };
  needs("start-layer", opt_start_layer);
  needs("head-fusion", opt_head_fusion);
  needs("discard-ratio", opt_discard_ratio);
  needs("block", opt_block);
  needs("no-grad", opt_use_grad);
  needs("steps", opt_steps);
  needs("quadrature", opt_quadrature);
  needs("baseline", opt_baseline);
  needs("inner", opt_smooth);
  needs("samples", opt_smooth);
  needs("noise", opt_smooth);
  needs("seed", opt_smooth);
  needs("stage", opt_stage);

  const Model m = load_model_arg(args.positional()[0]);
  const Image x = load_input(args, m.config, args.positional().size() > 1 ? args.positional()[1] : "");
  MethodOptions opt;
  opt.target = args.get_int("target", -1);
  if (args.has("target") && opt.target < 0)
    throw Error(ErrorCode::bad_argument, "--target must be a class index from 0 to " + std::to_string(m.config.classes - 1));
  opt.start_layer = args.get_int("start-layer", 0);
  opt.head_fusion = parse_fusion(args.get("head-fusion", "mean"));
  opt.discard_ratio = args.get_double("discard-ratio", 0.0);
  opt.block = args.get_int("block", -1);
  if (args.has("block") && opt.block < 0)
    throw Error(ErrorCode::bad_argument, "--block must be a block index from 0 to " + std::to_string(m.config.depth - 1));
  opt.use_grad = !args.has("no-grad");
  opt.steps = args.get_int("steps", 0);
  if (args.has("steps") && opt.steps < 1) throw Error(ErrorCode::bad_argument, "--steps must be at least 1");
  opt.quadrature = parse_quadrature(args.get("quadrature", "gauss-legendre"));
  Image baseline;
  if (args.has("baseline")) {
    baseline = load_image_or_npy(args.get("baseline"), m.config);
    opt.baseline = &baseline;
  }
  opt.inner = args.get("inner", "saliency");
  opt.samples = args.get_int("samples", 0);
  if (args.has("samples") && opt.samples < 1) throw Error(ErrorCode::bad_argument, "--samples must be at least 1");
  opt.noise = args.get_double("noise", 0.15);
  opt.seed = args.get_u64("seed", 0);
  opt.stage = parse_stage(args.get("stage", "layer"));
  opt.threads = args.get_int("threads", 1);
  if (args.has("progress") && info->long_running) opt.progress = progress_bar(method);

  const Explanation ex = explain(m, x, method, opt);
  const Mat& saved = info->native_pixels ? ex.pixel_map : ex.token_map;
  if (args.has("save-map"))
    write_npy_f32(args.get("save-map"), {saved.rows(), saved.cols()}, saved.data());
  if (args.has("out")) write_overlay(args.get("out"), ex.pixel_map, x, m.config);

  if (args.has("json")) {
    nlohmann::json out = {{"method", method},
                          {"target", ex.target},
                          {"class_name", m.config.class_names[size_t(ex.target)]},
                          {"shape", {saved.rows(), saved.cols()}},
                          {"map", std::vector<float>(saved.data(), saved.data() + saved.size())}};
    if (info->reports_relevance) out["conservation"] = report_json(ex.conservation);
    if (ex.has_completeness)
      out["completeness"] = {{"attribution_sum", ex.completeness.attribution_sum},
                             {"f_input", ex.completeness.f_input},
                             {"f_baseline", ex.completeness.f_baseline},
                             {"gap", ex.completeness.gap()}};
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  if (args.has("conservation")) {
    if (!info->reports_relevance) throw Error(ErrorCode::bad_argument, method + " is not an LRP method: no conservation report");
    std::printf("%s\n", report_json(ex.conservation).dump(1).c_str());
    return 0;
  }
  std::printf("%s for class %d (%s): %s map %lld×%lld, min %.6g, max %.6g, sum %.6g\n", method.c_str(), ex.target,
              m.config.class_names[size_t(ex.target)].c_str(), info->native_pixels ? "pixel" : "token",
              (long long)saved.rows(), (long long)saved.cols(), double(saved.minCoeff()), double(saved.maxCoeff()),
              double(saved.cast<double>().sum()));
  if (ex.has_completeness)
    std::printf("completeness: Σ attributions %.6g, F(x) − F(baseline) = %.6g − %.6g, gap %.3g\n",
                ex.completeness.attribution_sum, ex.completeness.f_input, ex.completeness.f_baseline,
                ex.completeness.gap());
  if (info->reports_relevance) {
    const ConservationReport& r = ex.conservation;
    std::printf("relevance: seed %.6g", r.seed_sum);
    if (!std::isnan(r.tokens_sum)) std::printf(", at the tokens E0 %.6g", r.tokens_sum);
    if (!std::isnan(r.image_sum)) std::printf(", at the pixels %.6g", r.image_sum);
    std::printf(" (--conservation: after each layer)\n");
  }
  return 0;
}

}  // namespace vitlens::cli
