// cmd_attack.cpp — `vitlens attack MODEL DIR`: the attribution-tree trigger attack (the ViT
// analogue of Hao et al. 2021, section 6; the protocol is in core/include/vitlens/eval/attack.h).
// Writes OUT.md (the report), OUT.json (options, per-class counts, every trial), OUT.svg (the
// success rate per class, trigger against the controls) and OUT-examples.svg (a few trials,
// images embedded as PNG data). The item control reads the scenes' item masks (labels.json).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "scene_set.h"
#include "vitlens/eval/attack.h"
#include "vitlens/io/image.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string base64(const std::vector<uint8_t>& b) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  for (size_t i = 0; i < b.size(); i += 3) {
    const uint32_t v = uint32_t(b[i]) << 16 | (i + 1 < b.size() ? uint32_t(b[i + 1]) << 8 : 0u) |
                       (i + 2 < b.size() ? uint32_t(b[i + 2]) : 0u);
    s += k[(v >> 18) & 63];
    s += k[(v >> 12) & 63];
    s += i + 1 < b.size() ? k[(v >> 6) & 63] : '=';
    s += i + 2 < b.size() ? k[v & 63] : '=';
  }
  return s;
}

std::string class_name(const Config& c, int k) {
  return size_t(k) < c.class_names.size() ? c.class_names[size_t(k)] : "class " + std::to_string(k);
}

// Grouped bars per class (and "all"): trigger (red) and control (grey) success rates.
std::string rates_svg(const std::vector<AttackSummary>& s, const Config& c) {
  const int rows = int(s.size());
  const double x0 = 110, bw = 9, gap = 12, pw = 360, W = x0 + pw + 160, H = 40 + rows * (3 * bw + gap) + 40;
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  out += buf;
  const double yend = 30 + rows * (3 * bw + gap);
  for (int t = 0; t <= 10; ++t) {
    const double gx = x0 + pw * t / 10.0;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"24\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><text x=\"%g\" y=\"%g\" "
                  "text-anchor=\"middle\">%d</text>\n",
                  gx, gx, yend, gx, yend + 14, t * 10);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">attack success rate (%%)</text>\n", x0 + pw / 2,
                yend + 30);
  out += buf;
  for (int r = 0; r < rows; ++r) {
    const double y = 30 + r * (3 * bw + gap);
    const std::string label = r + 1 == rows ? "all" : class_name(c, r);
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%s (%d)</text>\n"
                  "<rect x=\"%g\" y=\"%g\" width=\"%.1f\" height=\"%g\" fill=\"#d62728\"/>\n"
                  "<rect x=\"%g\" y=\"%g\" width=\"%.1f\" height=\"%g\" fill=\"#1f77b4\"/>\n"
                  "<rect x=\"%g\" y=\"%g\" width=\"%.1f\" height=\"%g\" fill=\"#999\"/>\n",
                  x0 - 6, y + 1.5 * bw + 4, label.c_str(), s[size_t(r)].trials, x0, y, pw * s[size_t(r)].trigger_rate, bw, x0,
                  y + bw, pw * s[size_t(r)].item_rate, bw, x0, y + 2 * bw, pw * s[size_t(r)].control_rate, bw);
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<rect x=\"%g\" y=\"30\" width=\"12\" height=\"12\" fill=\"#d62728\"/><text x=\"%g\" y=\"40\">tree trigger</text>\n"
                "<rect x=\"%g\" y=\"50\" width=\"12\" height=\"12\" fill=\"#1f77b4\"/><text x=\"%g\" y=\"60\">random item patches</text>\n"
                "<rect x=\"%g\" y=\"70\" width=\"12\" height=\"12\" fill=\"#999\"/><text x=\"%g\" y=\"80\">random patches</text>\n"
                "<text x=\"%g\" y=\"100\">(trials per class)</text>\n",
                x0 + pw + 12, x0 + pw + 28, x0 + pw + 12, x0 + pw + 28, x0 + pw + 12, x0 + pw + 28, x0 + pw + 12);
  out += buf;
  return out + "</svg>\n";
}

// One row per example trial: the source (trigger patches outlined), the clean target, the target
// with the trigger and with the control, each with its top-1 class.
std::string examples_svg(const std::vector<const AttackTrial*>& ex, const std::vector<Image>& images, const Config& c) {
  const int scale = std::max(1, 128 / std::max(c.image_h, c.image_w));
  const double iw = c.image_w * scale, ih = c.image_h * scale, gx = 24, gy = 46;
  const double W = 20 + 5 * (iw + gx), H = 30 + ex.size() * (ih + gy);
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  s += buf;
  const char* heads[] = {"source (trigger outlined)", "target", "target + trigger", "+ random item patches",
                         "+ random patches"};
  for (int k = 0; k < 5; ++k) {
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"16\">%s</text>\n", 10 + k * (iw + gx), heads[k]);
    s += buf;
  }
  const int p = c.patch * scale;
  for (size_t r = 0; r < ex.size(); ++r) {
    const AttackTrial& t = *ex[r];
    const Image panels[] = {images[size_t(t.source)], images[size_t(t.target)],
                            paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.trigger, t.trigger_at, c),
                            paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.item, t.item_at, c),
                            paste_patches(images[size_t(t.target)], images[size_t(t.source)], t.control, t.control_at, c)};
    const std::string captions[] = {
        "class " + class_name(c, t.cls), "top-1: " + class_name(c, t.pred_clean),
        "top-1: " + class_name(c, t.pred_trigger) + (t.trigger_hit() ? " ✓" : ""),
        t.has_item() ? "top-1: " + class_name(c, t.pred_item) + (t.item_hit() ? " ✓" : "") : std::string("(no masks)"),
        "top-1: " + class_name(c, t.pred_control) + (t.control_hit() ? " ✓" : "")};
    const double y = 24 + r * (ih + gy);
    for (int k = 0; k < 5; ++k) {
      const double x = 10 + k * (iw + gx);
      s += "<image x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(iw) +
           "\" height=\"" + std::to_string(ih) + "\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64," +
           base64(encode_png(denormalise(panels[k], c))) + "\"/>\n";
      std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\">%s</text>\n", x, y + ih + 14, captions[k].c_str());
      s += buf;
      const std::vector<int>* marks = k == 0   ? &t.trigger
                                      : k == 2 ? &t.trigger_at
                                      : k == 3 ? &t.item_at
                                      : k == 4 ? &t.control_at
                                               : nullptr;
      for (size_t q = 0; marks && q < marks->size(); ++q) {
        const int patch = (*marks)[q];
        std::snprintf(buf, sizeof buf,
                      "<rect x=\"%g\" y=\"%g\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                      x + (patch % c.grid_w()) * p, y + (patch / c.grid_w()) * p, p, p,
                      k == 4 ? "#555" : k == 3 ? "#1f77b4" : "#d62728");
        s += buf;
      }
    }
  }
  return s + "</svg>\n";
}

}  // namespace

int cmd_attack(int argc, char** argv) {
  Args args(argc, argv,
            {"n", "links", "mode", "sources", "targets", "steps", "threshold", "convention", "seed", "threads", "out",
             "examples"},
            {"help", "no-trials", "no-item-control"});
  if (args.has("help") || args.positional().size() != 2) {
    std::printf(
        "usage: vitlens attack MODEL DIR [--n N] [--links 3] [--mode same|random] [--sources 10] [--targets 5]\n"
        "                      [--steps 20] [--threshold 0.4] [--convention ours|reference] [--seed 1]\n"
        "                      [--threads N] [--examples 4] [--no-trials] [--no-item-control] [--out attack]\n\n"
        "The attribution-tree trigger attack (the ViT analogue of Hao et al. 2021, section 6). DIR holds\n"
        "labelled images (DIR/labels.json, as `vitlens scenes` writes; --n: the first N only). For each\n"
        "class c, up to --sources images whose top-1 class c is one of their labels are explained by\n"
        "attattr (m = --steps) and their attribution tree built (--threshold, --convention); the patches\n"
        "at both ends of the tree's --links strongest edges form the trigger. Each trigger is pasted into\n"
        "--targets images that have neither c among their labels nor as their top-1 class (drawn with\n"
        "--seed), at the patches' own positions (--mode same) or at random ones (--mode random); the\n"
        "control pastes as many random patches of the same source the same way, and the item control as\n"
        "many random patches of the source's item of class c (from its mask in labels.json: patches at\n"
        "least half covered; all of them when fewer). Success: the target's\n"
        "top-1 class becomes c. Writes OUT.md, OUT.json (with every trial unless --no-trials), OUT.svg\n"
        "(success rate per class) and OUT-examples.svg (default --out attack).\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string model_path = args.positional()[0], dir = args.positional()[1];
  const Model m = load_model_arg(model_path);
  const Config& c = m.config;
  if (!fs::is_directory(dir)) throw Error(ErrorCode::io, "no image directory " + dir);
  AttackOptions opt;
  opt.links = args.get_int("links", 3);
  opt.mode = parse_paste_mode(args.get("mode", "same"));
  opt.sources_per_class = args.get_int("sources", 10);
  opt.targets_per_source = args.get_int("targets", 5);
  opt.steps = args.get_int("steps", 20);
  opt.threshold = args.get_double("threshold", 0.4);
  opt.convention = parse_tree_convention(args.get("convention", "ours"));
  opt.seed = args.get_u64("seed", 1);
  opt.threads = args.get_int("threads", 1);
  const int limit = args.get_int("n", 0), n_examples = args.get_int("examples", 4);
  if (opt.links < 1 || opt.links > c.tokens()) throw Error(ErrorCode::bad_argument, "--links must be 1…" + std::to_string(c.tokens()));
  if (opt.sources_per_class < 1 || opt.targets_per_source < 1)
    throw Error(ErrorCode::bad_argument, "--sources and --targets must be ≥ 1");
  if (opt.steps < 1 || opt.steps > 10000) throw Error(ErrorCode::bad_argument, "--steps must be 1…10000");
  if (!(opt.threshold >= 0.0 && opt.threshold < 1.0)) throw Error(ErrorCode::bad_argument, "--threshold must be in [0, 1)");
  if (opt.threads < 1 || opt.threads > 64) throw Error(ErrorCode::bad_argument, "--threads must be 1…64");
  if (limit < 0 || n_examples < 0) throw Error(ErrorCode::bad_argument, "--n and --examples must be ≥ 0");
  std::string out = args.get("out", "attack");
  if (out.size() > 3 && out.compare(out.size() - 3, 3, ".md") == 0) out.resize(out.size() - 3);

  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
  SceneSet set = load_scene_set(dir, c);
  if (!set.labelled) throw Error(ErrorCode::bad_argument, dir + " has no labels.json: the attack needs labelled images");
  if (limit > 0 && size_t(limit) < set.images.size()) {
    set.names.resize(size_t(limit));
    set.images.resize(size_t(limit));
    set.labels.resize(size_t(limit));
  }
  // The item control: each item's patches from its mask (≥ half of the patch's pixels on it).
  std::vector<std::vector<std::vector<int>>> items;
  bool masked = !args.has("no-item-control");
  for (size_t i = 0; masked && i < set.images.size(); ++i)
    for (const std::string& f : set.masks[i]) masked = masked && !f.empty();
  for (size_t i = 0; masked && i < set.images.size(); ++i) {
    items.emplace_back();
    for (const std::string& f : set.masks[i]) {
      const Pixels px = read_image_file(f);
      std::vector<uint8_t> mask(size_t(px.w) * size_t(px.h), 0);
      for (size_t q = 0; q < mask.size(); ++q)
        for (int ch = 0; ch < px.channels; ++ch) mask[q] = mask[q] | (px.data[q * size_t(px.channels) + size_t(ch)] != 0);
      items.back().push_back(mask_patches(mask, px.h, px.w, c));
    }
  }
  const double t0 = now_ms();
  const AttackResult res = run_attack(
      m, set.images, set.labels, opt,
      [](double f) {
        std::fprintf(stderr, "\rattack: %3.0f %% of the sources", 100.0 * f);
        return true;
      },
      masked ? &items : nullptr);
  std::fprintf(stderr, "\n");
  const double seconds = (now_ms() - t0) / 1000.0;
  const std::vector<AttackSummary> sum = attack_summary(res.trials, c.classes);

  std::vector<const AttackTrial*> examples;  // successful triggers first, one per source
  for (int pass = 0; pass < 2; ++pass)
    for (const AttackTrial& t : res.trials) {
      if (int(examples.size()) >= n_examples) break;
      const bool seen = std::any_of(examples.begin(), examples.end(), [&](const AttackTrial* e) { return e->source == t.source; });
      if (!seen && (pass == 1 || t.trigger_hit())) examples.push_back(&t);
    }

  json j;
  j["model"] = model_path;
  j["images"] = dir;
  j["count"] = set.images.size();
  j["options"] = {{"links", opt.links},       {"mode", paste_mode_name(opt.mode)},   {"sources", opt.sources_per_class},
                  {"targets", opt.targets_per_source}, {"steps", opt.steps},       {"threshold", opt.threshold},
                  {"convention", tree_convention_name(opt.convention)},            {"seed", opt.seed}};
  j["sources_no_edges"] = res.sources_no_edges;
  json per = json::array();
  for (size_t r = 0; r < sum.size(); ++r) {
    const AttackSummary& a = sum[r];
    per.push_back({{"class", r + 1 == sum.size() ? json("all") : json(int(r))}, {"sources", a.sources}, {"trials", a.trials},
                   {"trigger_hits", a.trigger_hits}, {"control_hits", a.control_hits}, {"trigger_rate", a.trigger_rate},
                   {"control_rate", a.control_rate}, {"mean_dp_trigger", a.mean_dp_trigger}, {"mean_dp_control", a.mean_dp_control},
                   {"item_trials", a.item_trials}, {"item_hits", a.item_hits}, {"item_rate", a.item_rate},
                   {"mean_dp_item", a.mean_dp_item}});
  }
  j["summary"] = per;
  json trials = json::array();
  for (const AttackTrial& t : res.trials)
    trials.push_back({{"source", set.names[size_t(t.source)]}, {"target", set.names[size_t(t.target)]}, {"class", t.cls},
                      {"trigger", t.trigger}, {"trigger_at", t.trigger_at}, {"control", t.control}, {"control_at", t.control_at},
                      {"item", t.item}, {"item_at", t.item_at}, {"pred_clean", t.pred_clean}, {"pred_trigger", t.pred_trigger},
                      {"pred_control", t.pred_control}, {"pred_item", t.pred_item}, {"p_clean", t.p_clean},
                      {"p_trigger", t.p_trigger}, {"p_control", t.p_control}, {"p_item", t.p_item}});
  if (!args.has("no-trials")) j["trials"] = trials;
  write_file(out + ".json", j.dump() + "\n");  // compact: one record per trial adds up
  write_file(out + ".svg", rates_svg(sum, c));
  write_file(out + "-examples.svg", examples_svg(examples, set.images, c));

  std::string md;
  char buf[1200];
  md += "# Attribution-tree trigger attack: " + fs::path(model_path).filename().string() + "\n\n";
  std::snprintf(buf, sizeof buf,
                "%zu images from `%s`; %zu sources (≤ %d per class; %zu without a tree edge), %d targets each; trigger = "
                "the ends of the %d strongest tree links (attattr m = %d, τ = %g, convention %s), pasted at %s; control = "
                "as many random patches of the same source, and the item control as many random patches of its item "
                "of class c (%s), pasted the same way; seed %llu; %.0f s. Written by `vitlens attack`.\n\n",
                set.images.size(), dir.c_str(), res.sources.size(), opt.sources_per_class, res.sources_no_edges.size(),
                opt.targets_per_source, opt.links, opt.steps, opt.threshold, tree_convention_name(opt.convention),
                opt.mode == PasteMode::same ? "their own positions" : "random positions",
                masked ? "masks from labels.json" : "off: no masks", static_cast<unsigned long long>(opt.seed), seconds);
  md += buf;
  size_t item_short = 0;  // item controls with fewer patches than the trigger (small items)
  for (const AttackTrial& t : res.trials) item_short += t.has_item() && t.item.size() < t.trigger.size() ? 1 : 0;
  size_t pasted = 0, fewest = res.trials.empty() ? 0 : size_t(-1), most = 0;
  for (const AttackTrial& t : res.trials) {
    pasted += t.trigger.size();
    fewest = std::min(fewest, t.trigger.size());
    most = std::max(most, t.trigger.size());
  }
  std::snprintf(buf, sizeof buf,
                "Patches pasted per trial (trigger and random control alike): mean %.2f, %zu…%zu of %d; the item control "
                "had fewer (all of its item's) in %zu trials.\n\n",
                res.trials.empty() ? 0.0 : double(pasted) / double(res.trials.size()), fewest, most, c.num_patches(), item_short);
  md += buf;
  md += "Success: the pasted target's top-1 class is the source's class c. Δp: the mean change of the target's "
        "probability of c.\n\n";
  md += "| class | sources | trials | trigger success | item control | random control | Δp trigger | Δp item | Δp random "
        "|\n|---|---|---|---|---|---|---|---|---|\n";
  for (size_t r = 0; r < sum.size(); ++r) {
    const AttackSummary& a = sum[r];
    const std::string name = r + 1 == sum.size() ? "**all**" : class_name(c, int(r));
    std::snprintf(buf, sizeof buf, "| %s | %d | %d | %.1f %% (%d) | %.1f %% (%d) | %.1f %% (%d) | %+.3f | %+.3f | %+.3f |\n",
                  name.c_str(), a.sources, a.trials, 100.0 * a.trigger_rate, a.trigger_hits, 100.0 * a.item_rate, a.item_hits,
                  100.0 * a.control_rate, a.control_hits, a.mean_dp_trigger, a.mean_dp_item, a.mean_dp_control);
    md += buf;
  }
  md += "\n![success rate per class](" + fs::path(out).filename().string() + ".svg)\n\n![examples](" +
        fs::path(out).filename().string() + "-examples.svg)\n";
  write_file(out + ".md", md);
  std::printf("%s", md.substr(md.find("| class")).c_str());
  std::printf("wrote %s.md, %s.json, %s.svg, %s-examples.svg\n", out.c_str(), out.c_str(), out.c_str(), out.c_str());
  return 0;
}

}  // namespace vitlens::cli
