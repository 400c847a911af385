// cmd_explain.cpp — `vitlens explain MODEL (IMAGE | --input x.npy) --method SPEC`: one
// attribution map, saved raw as .npy and/or rendered as a jet overlay on the image. SPEC is a
// method name or a method spec NAME:key=value[:key=value…] (options.h). The method options —
// flags, parsing, checks, --list and --help — come from the method tables (options.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.h"
#include "norm_stages.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/npy.h"

namespace vitlens::cli {

namespace {

// How --help and --list show an option's value: "N", "X", "mean|max|min", "METHOD", "IMAGE".
std::string metavar(const OptionSpec& o) {
  switch (o.kind) {
    case OptionKind::integer: return "N";
    case OptionKind::number: return "X";
    case OptionKind::flag: return "";
    case OptionKind::choice: {
      std::string s;
      for (const std::string& c : o.choices) s += (s.empty() ? "" : "|") + c;
      return s;
    }
    case OptionKind::method: return "METHOD";
    case OptionKind::image: return "IMAGE";
  }
  return "";
}

// "--start-layer N" / "--weight grad|none|attn".
std::string usage_of(const OptionSpec& o) {
  const std::string v = metavar(o);
  return o.flag() + (v.empty() ? "" : " " + v);
}

// "0…last-block" (a model-dependent bound by name).
std::string range_of(const OptionSpec& o) {
  if (o.kind != OptionKind::integer && o.kind != OptionKind::number) return "";
  auto b = [](const OptionBound& x) {
    if (x.ref != OptionRef::none) return std::string(option_ref_name(x.ref));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.16g", x.value);
    return std::string(buf);
  };
  return b(o.min) + "…" + b(o.max) + (o.zero_is_default ? " or 0" : "");
}

// One line per option: flag, help, default and range; then one per alias word, and what each
// choice stands for when the table says it.
void print_option(const OptionSpec& o, const std::string& help) {
  const std::string range = range_of(o);
  std::printf("    %-32s %s (default %s%s%s)\n", usage_of(o).c_str(), help.c_str(), default_text(o).c_str(),
              range.empty() ? "" : "; ", range.c_str());
  for (size_t i = 0; i < o.choice_help.size() && i < o.choices.size(); ++i)
    std::printf("    %-32s   %s: %s\n", "", o.choices[i].c_str(), o.choice_help[i].c_str());
  for (const OptionSpec::Alias& a : o.aliases)
    std::printf("    %-32s the same as %s %s\n", (std::string("--") + a.word).c_str(), o.flag().c_str(), a.value);
}

void print_list() {
  for (const MethodInfo& m : method_registry()) {
    std::printf("%s\n  %s\n  %s\n", m.name, m.description, m.paper);
    for (const OptionSpec& o : m.options) print_option(o, o.help);
    std::printf("  outputs:");
    for (const OutputSpec& out : m.outputs) std::printf(" %s %s;", out.key, out.shape);
    std::printf("\n");
  }
}

// --help: every option of the registry once, with the methods that read it (their own help and
// default where they differ: --steps is m for attattr and n for integrated-gradients).
void print_help() {
  std::printf(
      "usage: vitlens explain MODEL (IMAGE | --input x.npy) --method SPEC [OPTIONS]\n"
      "         [--input-size HxW|image] [--save-map map.npy] [--out overlay.png] [--json]\n"
      "         [--conservation] [--progress]\n"
      "       vitlens explain --list       (each method with its options, defaults and outputs)\n\n"
      "SPEC is a method name or NAME:key=value[:key=value…], a bare key for a flag or an alias word\n"
      "(transformer-attribution:start-layer=1, transformer-attribution:no-grad, rollout:head-fusion=max);\n"
      "an option may be given in the spec or as a flag, not both (that is an error).\n"
      "--save-map writes the raw, unnormalised map as float32 .npy: (H/p, W/p) tokens, or (H, W) pixels\n"
      "for the methods that compute it at the input. --out writes a jet overlay of the min-max-normalised\n"
      "pixel map on the image. --json prints the map and, for LRP methods, the conservation report\n"
      "(Σ relevance after each layer); --conservation prints only the report. --progress shows a\n"
      "progress bar for the long methods. --key=value works for every option.\n"
      "--input-size explains at another input size than the checkpoint's: HxW in pixels (multiples of\n"
      "the patch size, at most 4097 tokens), or 'image' for the image's own aspect with about as many\n"
      "patches as the checkpoint; the position embedding is resampled bicubically (as Hugging Face's\n"
      "interpolate_pos_encoding, without antialiasing).\n"
      "--save-stages FILE.npz (norm-based): every block's map of each stage, the mixing ratios and the\n"
      "per-head atb maps (arrays: README, \"Norm-based analysis\").\n"
      "--ff-summary (norm-based): the FF's effect on this image per block (atb-res-ln → atb-res-ln-ff):\n"
      "Spearman ρ of the two maps (whole map, mean over query rows, the row of token --ff-query N,\n"
      "default 0) and each stage's mixing ratio averaged over the tokens; with --json, as \"ff_summary\"\n"
      "with ρ of every query row.\n\n"
      "method options (a method rejects the ones it does not read):\n");
  for (const OptionSpec* o : all_options()) {
    std::string users;
    size_t count = 0;
    bool same = true;
    for (const MethodInfo& m : method_registry())
      if (const OptionSpec* mine = find_option(m, o->key)) {
        users += std::string(users.empty() ? "" : ", ") + m.name;
        ++count;
        same = same && mine->help == o->help && default_text(*mine) == default_text(*o);
      }
    if (same) {
      print_option(*o, o->help);
    } else {
      std::printf("    %-32s per method:\n", usage_of(*o).c_str());
      for (const MethodInfo& m : method_registry())
        if (const OptionSpec* mine = find_option(m, o->key))
          std::printf("      %-30s %s (default %s)\n", m.name, mine->help.c_str(), default_text(*mine).c_str());
      continue;
    }
    if (count < method_registry().size()) std::printf("    %-32s   for %s\n", "", users.c_str());
  }
}

// The name an option has on the command line (no dashes): its key.
std::string flag_name(const OptionSpec& o) { return o.key; }

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
  // The flags: this command's own, and every method option of the registry (options.h).
  std::vector<std::string> values = {"input", "method", "save-map", "out", "input-size", "save-stages", "ff-query"};
  std::vector<std::string> flags = {"help", "list", "json", "conservation", "progress", "ff-summary"};
  for (const OptionSpec* o : all_options()) {
    (o->kind == OptionKind::flag ? flags : values).push_back(flag_name(*o));
    for (const OptionSpec::Alias& a : o->aliases) flags.push_back(a.word);
  }
  Args args(argc, argv, values, flags);
  if (args.has("list")) {
    print_list();
    return 0;
  }
  if (args.has("help") || args.positional().empty() || args.positional().size() > 2 || !args.has("method")) {
    print_help();
    return args.has("help") ? 0 : 2;
  }
  const std::string spec = args.get("method");
  const MethodInfo* info = find_method(method_spec_name(spec));
  if (!info)
    throw Error(ErrorCode::bad_argument, "unknown method '" + method_spec_name(spec) + "' (see vitlens explain --list)");
  const std::string method = info->name;
  if (args.has("save-stages") && method != "norm-based")
    throw Error(ErrorCode::bad_argument, "--save-stages needs --method norm-based (it saves that method's stage maps)");
  if ((args.has("ff-summary") || args.has("ff-query")) && method != "norm-based")
    throw Error(ErrorCode::bad_argument, "--ff-summary needs --method norm-based (it summarises that method's stage maps)");
  if (args.has("ff-query") && !args.has("ff-summary"))
    throw Error(ErrorCode::bad_argument, "--ff-query goes with --ff-summary (the query row whose ρ is printed)");
  const std::string image_path = args.positional().size() > 1 ? args.positional()[1] : "";
  const Model m = apply_input_size(load_model_arg(args.positional()[0]), args, image_path);
  const Image x = load_input(args, m.config, image_path);
  if (args.has("ff-query") && (args.get_int("ff-query", 0) < 0 || args.get_int("ff-query", 0) >= m.config.tokens()))
    throw Error(ErrorCode::bad_argument, "--ff-query must be a token index in [0, " + std::to_string(m.config.tokens()) + ")");
  // Every option given as a flag, through core's parser in the order the API uses (each value's
  // own checks first; explain() then rejects the ones this method does not read), then the spec's
  // own options on top: an option given both ways is refused (apply_method_spec).
  MethodOptions opt = default_options(info);
  Image baseline;
  for (const OptionSpec* o : all_options()) {
    for (const OptionSpec::Alias& a : o->aliases)
      if (args.has(a.word)) set_option(opt, a.word, OptionValue::of_bool(true), &m.config);
    const std::string name = flag_name(*o);
    if (!args.has(name)) continue;
    OptionValue v = OptionValue::of_text(args.get(name));
    if (o->kind == OptionKind::flag) v = OptionValue::of_bool(true);
    if (o->kind == OptionKind::image) {
      baseline = load_image_or_npy(args.get(name), m.config);
      v = OptionValue::of_image(&baseline);
    }
    set_option(opt, name, v, &m.config);
  }
  apply_method_spec(spec, opt, &m.config);
  if (args.has("progress") && info->long_running) opt.progress = progress_bar(method);

  const Explanation ex = explain(m, x, method, opt);
  const Mat& saved = info->native_pixels ? ex.pixel_map : ex.token_map;
  if (args.has("save-map"))
    write_npy_f32(args.get("save-map"), {saved.rows(), saved.cols()}, saved.data());
  if (args.has("out")) write_overlay(args.get("out"), ex.pixel_map, x, m.config);
  if (args.has("save-stages")) save_norm_stages(args.get("save-stages"), m, x, ex);

  if (args.has("json")) {
    nlohmann::json out = {{"method", method},
                          {"spec", spec},
                          {"target", ex.target},
                          {"class_name", m.config.class_names[size_t(ex.target)]},
                          {"shape", {saved.rows(), saved.cols()}},
                          {"map", std::vector<float>(saved.data(), saved.data() + saved.size())}};
    if (info->reports_relevance) out["conservation"] = report_json(ex.conservation);
    if (args.has("ff-summary")) out["ff_summary"] = ff_summary_json(ex);
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
  std::printf("%s for class %d (%s): %s map %lld×%lld, min %.6g, max %.6g, sum %.6g\n", spec.c_str(), ex.target,
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
  if (args.has("ff-summary")) print_ff_summary(ex, args.get_int("ff-query", 0));
  return 0;
}

}  // namespace vitlens::cli
