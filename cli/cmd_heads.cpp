// cmd_heads.cpp — `vitlens heads MODEL`: head importance from attattr (Hao et al. 2021) over a set
// of images; head pruning curves under five rankings (attattr; the paper's attention score, the
// max attention weight; attention confidence; Taylor of the gold-label loss, the paper's baseline;
// Taylor of the target's probability); and the paper's per-layer analysis (in each block, the top-k
// heads by attattr vs by attention score pruned, or kept alone).
// Writes OUT.md (the report), OUT.json (every number), OUT.svg (the pruning curves) and
// OUT-layers.svg (the per-layer analysis).
//
// Accuracy of the multi-label scene model: a scene counts as correct when the top-1 class is one
// of its labels (DIR/labels.json, as written by `vitlens scenes`). Without labels.json, each
// image's label is the unpruned model's own top-1 class (the curve measures agreement).
//
// `vitlens heads MODEL IMAGE --curve …`: the pruning curve of one image (head_pruning.h) — the
// target's probability as the heads of a ranking of this image, or of a list given by hand, are
// switched off one after another; printed as a table or --json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "scene_set.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/methods/head_pruning.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"

namespace vitlens::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string grid_table(const MatD& g) {
  std::string t = "| block |";
  for (int h = 0; h < g.cols(); ++h) t += " head " + std::to_string(h) + " |";
  t += "\n|---|";
  for (int h = 0; h < g.cols(); ++h) t += "---|";
  t += "\n";
  char buf[64];
  for (int l = 0; l < g.rows(); ++l) {
    t += "| " + std::to_string(l) + " |";
    for (int h = 0; h < g.cols(); ++h) {
      std::snprintf(buf, sizeof buf, " %.4g |", g(l, h));
      t += buf;
    }
    t += "\n";
  }
  return t;
}

json grid_json(const MatD& g) {
  json a = json::array();
  for (int l = 0; l < g.rows(); ++l) {
    json row = json::array();
    for (int h = 0; h < g.cols(); ++h) row.push_back(g(l, h));
    a.push_back(row);
  }
  return a;
}

// The three curves on one plot: x = % of heads pruned, y = accuracy.
std::string curves_svg(const std::vector<std::string>& names, const std::vector<std::vector<double>>& curves) {
  const double W = 600, H = 340, x0 = 60, y0 = 20, pw = 360, ph = 260;
  const char* colours[] = {"#d62728", "#1f77b4", "#17becf", "#2ca02c", "#9467bd"};
  const size_t ncol = sizeof colours / sizeof colours[0];
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  s += buf;
  for (int k = 0; k <= 10; ++k) {
    const double gx = x0 + pw * k / 10.0, gy = y0 + ph - ph * k / 10.0;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><line x1=\"%g\" y1=\"%g\" x2=\"%g\" "
                  "y2=\"%g\" stroke=\"#ddd\"/>\n<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text><text x=\"%g\" "
                  "y=\"%g\" text-anchor=\"end\">%.1f</text>\n",
                  gx, y0, gx, y0 + ph, x0, gy, x0 + pw, gy, gx, y0 + ph + 16, k * 10, x0 - 6, gy + 4, k / 10.0);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">heads pruned (%%)</text>\n<text x=\"14\" y=\"%g\" "
                "transform=\"rotate(-90 14 %g)\" text-anchor=\"middle\">accuracy</text>\n",
                x0 + pw / 2, y0 + ph + 34, y0 + ph / 2, y0 + ph / 2);
  s += buf;
  for (size_t c = 0; c < curves.size(); ++c) {
    s += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + colours[c % ncol] + "\" points=\"";
    const size_t n = curves[c].size();
    for (size_t k = 0; k < n; ++k) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x0 + pw * double(k) / double(n - 1), y0 + ph - ph * curves[c][k]);
      s += buf;
    }
    s += "\"/>\n";
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%g\" "
                  "y=\"%g\">%s</text>\n",
                  x0 + pw + 15, y0 + 20 + 20.0 * c, x0 + pw + 40, y0 + 20 + 20.0 * c, colours[c % ncol], x0 + pw + 46,
                  y0 + 24 + 20.0 * c, names[c].c_str());
    s += buf;
  }
  return s + "</svg>\n";
}

// The per-layer analysis: one panel per block, x = k (top-k heads of the block), y = accuracy;
// solid: the top k pruned, dashed: only the top k kept; red: ranked by attattr, blue: by attention.
std::string layers_svg(const LayerPruning& attr, const LayerPruning& attn, int heads) {
  const int L = int(attr.prune_top.size()), cols = std::min(L, 4), rows = (L + cols - 1) / cols;
  const double pw = 150, ph = 110, gx = 60, gy = 50, W = 40 + cols * (pw + gx), H = 30 + rows * (ph + gy) + 20;
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  s += buf;
  struct Line {
    const LayerPruning* lp;
    bool keep;
    const char* colour;
    const char* dash;
  };
  const Line lines[] = {{&attr, false, "#d62728", ""}, {&attn, false, "#1f77b4", ""},
                        {&attr, true, "#d62728", " stroke-dasharray=\"5 3\""}, {&attn, true, "#1f77b4", " stroke-dasharray=\"5 3\""}};
  // One y range for every panel: the values' range, widened to tenths.
  double lo = 1.0, hi = 0.0;
  for (const LayerPruning* lp : {&attr, &attn})
    for (const auto* table : {&lp->prune_top, &lp->keep_top})
      for (const auto& row : *table)
        for (double v : row) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
  lo = std::floor(lo * 10.0) / 10.0;
  hi = std::max(lo + 0.1, std::ceil(hi * 10.0) / 10.0);
  auto ypos = [&](double y0, double v) { return y0 + ph - ph * (v - lo) / (hi - lo); };
  for (int l = 0; l < L; ++l) {
    const double x0 = 50 + (l % cols) * (pw + gx), y0 = 30 + (l / cols) * (ph + gy);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#999\"/>\n"
                  "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">block %d</text>\n"
                  "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.1f</text><text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.1f</text>\n",
                  x0, y0, pw, ph, x0 + pw / 2, y0 - 6, l, x0 - 4, y0 + 4, hi, x0 - 4, y0 + ph + 4, lo);
    s += buf;
    for (int k = 0; k <= heads; ++k) {
      std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text>\n", x0 + pw * k / heads,
                    y0 + ph + 14, k);
      s += buf;
    }
    for (const Line& ln : lines) {
      const std::vector<double>& v = (ln.keep ? ln.lp->keep_top : ln.lp->prune_top)[size_t(l)];
      s += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + ln.colour + "\"" + ln.dash + " points=\"";
      for (int k = 0; k <= heads; ++k) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x0 + pw * k / heads, ypos(y0, v[size_t(k)]));
        s += buf;
      }
      s += "\"/>\n";
    }
  }
  const double ly = 30 + rows * (ph + gy) + 6;
  std::snprintf(buf, sizeof buf,
                "<text x=\"50\" y=\"%g\">k = the block's top-k heads; y = accuracy.  "
                "<tspan fill=\"#d62728\">red: ranked by attattr</tspan>, <tspan fill=\"#1f77b4\">blue: by attention score "
                "(max A)</tspan>; solid: top k pruned, dashed: only top k kept</text>\n",
                ly);
  s += buf;
  return s + "</svg>\n";
}

std::string layer_table(const LayerPruning& attr, const LayerPruning& attn, int heads) {
  std::string t = "| block | k | prune top-k: attattr | prune top-k: attention | keep top-k: attattr | keep top-k: attention |\n"
                  "|---|---|---|---|---|---|\n";
  char buf[160];
  for (size_t l = 0; l < attr.prune_top.size(); ++l)
    for (int k = 1; k <= heads; ++k) {
      std::snprintf(buf, sizeof buf, "| %zu | %d | %.3f | %.3f | %.3f | %.3f |\n", l, k, attr.prune_top[l][size_t(k)],
                    attn.prune_top[l][size_t(k)], attr.keep_top[l][size_t(k)], attn.keep_top[l][size_t(k)]);
      t += buf;
    }
  return t;
}

json layer_json(const LayerPruning& lp) { return {{"prune_top", lp.prune_top}, {"keep_top", lp.keep_top}}; }

// --curve: ranking names (comma-separated) when every entry is one, else a head list.
struct CurveRequest {
  std::vector<HeadRanking> rankings;
  std::vector<int> heads;  // flat indices, the order given
  bool by_hand = false;
};

CurveRequest parse_curve(const std::string& text, const Config& c) {
  CurveRequest r;
  if (text == "all") {
    for (int i = 0; i < head_ranking_count; ++i) r.rankings.push_back(HeadRanking(i));
    return r;
  }
  if (text.find('.') != std::string::npos) {
    r.by_hand = true;
    r.heads = parse_head_list(text, c);
    if (r.heads.empty()) throw Error(ErrorCode::bad_argument, "--curve names no head");
    return r;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    r.rankings.push_back(parse_head_ranking(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

// `vitlens heads MODEL (IMAGE | --input x.npy) [--curve …]`: one image's pruning curves.
int heads_of_image(const Args& args, const Model& m, const std::string& image_path) {
  const Config& c = m.config;
  const Image x = load_input(args, c, image_path);
  const CurveRequest req = parse_curve(args.get("curve", "attattr,attention-confidence"), c);
  const int steps = args.get_int("steps", 20);
  if (steps < 1 || steps > 10000) throw Error(ErrorCode::bad_argument, "--steps must be 1…10000");
  const int threads = args.get_int("threads", 1);
  if (threads < 1 || threads > 64) throw Error(ErrorCode::bad_argument, "--threads must be 1…64");
  const int total = c.depth * c.heads;
  const int count = args.get_int("count", total);
  if (count < 0) throw Error(ErrorCode::bad_argument, "--count must be ≥ 0");
  Trace tr;
  vit_forward(tr, m, x);
  const int pred = top_k(c, tr.logits, 1)[0].cls;
  int target = pred;
  const std::string target_arg = args.get("target", "predicted");
  if (target_arg != "predicted") {
    const bool digits = !target_arg.empty() && target_arg.size() < 9 &&
                        std::all_of(target_arg.begin(), target_arg.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    target = digits ? std::stoi(target_arg) : -1;
    if (target < 0 || target >= c.classes)
      throw Error(ErrorCode::bad_argument, "--target must be predicted or a class index 0…" + std::to_string(c.classes - 1));
  }
  std::vector<AttAttrBlock> attr;
  if (std::find(req.rankings.begin(), req.rankings.end(), HeadRanking::attattr) != req.rankings.end())
    attr = attattr_blocks(m, tr, target, steps, threads);

  struct Named {
    std::string name;
    std::vector<int> order;
  };
  std::vector<Named> orders;
  for (HeadRanking r : req.rankings) orders.push_back({head_ranking_name(r), image_head_ranking(m, tr, target, r, attr).order});
  if (req.by_hand) orders.push_back({"by hand", req.heads});
  json out = {{"target", target}, {"class_name", c.class_names[size_t(target)]}, {"prediction", pred}, {"curves", json::array()}};
  const bool as_json = args.has("json");
  for (Named& o : orders) {
    if (o.order.size() > size_t(count)) o.order.resize(size_t(count));
    const ImagePruningCurve curve = image_pruning_curve(m, x, o.order, target);
    std::vector<std::string> names;
    for (int f : curve.order) names.push_back(head_name(f, c));
    out["curves"].push_back({{"ranking", o.name}, {"order", names}, {"flat", curve.order}, {"prob", curve.prob},
                             {"logit", curve.logit}, {"top", curve.top}, {"first_change", curve.first_change}});
    if (as_json) continue;
    std::printf("%s: class %d (%s), unpruned prediction %d (%s); heads off one after another%s\n", o.name.c_str(), target,
                c.class_names[size_t(target)].c_str(), curve.original, c.class_names[size_t(curve.original)].c_str(),
                o.name == "by hand" ? " in the order given" : ", the lowest score first");
    std::printf("  k  head   %-10s logit       top-1\n", c.output == OutputKind::sigmoid ? "sigmoid" : "softmax");
    for (size_t k = 0; k < curve.prob.size(); ++k)
      std::printf("%3zu  %-5s  %-10.6f %-10.6g  %d (%s)%s\n", k, k ? names[k - 1].c_str() : "-", curve.prob[k],
                  curve.logit[k], curve.top[k], c.class_names[size_t(curve.top[k])].c_str(),
                  int(k) == curve.first_change ? "  ← the prediction changes" : "");
    std::printf("\n");
  }
  if (as_json) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace

int cmd_heads(int argc, char** argv) {
  Args args(argc, argv, {"images", "target", "steps", "threads", "out", "n", "curve", "count", "input"},
            {"help", "no-layers", "json"});
  const size_t npos = args.positional().size();
  if (args.has("help") || npos < 1 || npos > 2 || (npos == 2 && args.has("input"))) {
    std::printf(
        "usage: vitlens heads MODEL [--images DIR] [--n N] [--target predicted|gold|T] [--steps M] [--threads N]\n"
        "                     [--no-layers] [--out report]\n"
        "       vitlens heads MODEL (IMAGE | --input x.npy) [--curve RANKINGS | B.H,B.*,…] [--count K]\n"
        "                     [--target predicted|T] [--steps M] [--threads N] [--json]\n\n"
        "With an image: its pruning curve — the target's probability (softmax, or sigmoid for a multi-label\n"
        "model), logit and top-1 class with every head on, then after each head of an order is switched off\n"
        "(attention × 0, projection bias kept), up to --count heads (default: all of them). --curve gives\n"
        "the orders: comma-separated rankings of this image's heads, the lowest score first — attattr (max Attr,\n"
        "m = --steps), attention-max, attention-confidence (or attention), taylor-loss, taylor-prob, or all —\n"
        "(default attattr,attention-confidence), or heads by hand: B.H (block B, head H, from 0) and B.*\n"
        "(every head of block B), in the order to switch them off. --json prints every curve as JSON.\n\n"
        "Head importance by attattr (Hao et al. 2021), I_{l,h} = Σ_x max_{i,j} Attr_{l,h}(x) over the images of\n"
        "DIR (default: the gallery next to MODEL, e.g. models/gallery; --n: the first N only), each explained\n"
        "for --target: its predicted class (default), `gold` (the predicted class when it is a label, else the\n"
        "first label: the published code explains the gold label) or a fixed class T; m = --steps (20).\n"
        "Then head pruning: heads masked in ascending score (attention × 0, projection bias kept) under five\n"
        "rankings, with the accuracy after each head:\n"
        "  attattr               Σ_x max_{i,j} Attr                     (Hao et al.)\n"
        "  attention-max         Σ_x max_{i,j} A                        (Hao et al.'s attention score)\n"
        "  attention-confidence  Σ_x mean_i max_j A                     (Voita et al. 2019)\n"
        "  taylor-loss           Σ_x |Σ A ⊙ ∂L/∂A|, L = BCE / CE on the gold labels (Michel et al. 2019, the\n"
        "                        Taylor baseline of Hao et al.)\n"
        "  taylor-prob           Σ_x |Σ A ⊙ ∂F/∂A|, F = the target's probability (no labels needed)\n"
        "Accuracy: top-1 class ∈ the scene's labels (DIR/labels.json), or agreement with the unpruned\n"
        "prediction when there are no labels (the losses then use that prediction as the gold label).\n"
        "The per-layer analysis (skip with --no-layers): in each block alone, the top-k heads by attattr vs\n"
        "by attention-max pruned, or kept alone (the block's other heads pruned), k = 1…H.\n"
        "Writes report.md, report.json, report.svg and report-layers.svg (default --out heads).\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string model_path = args.positional()[0];
  const Model m = load_model_arg(model_path);
  const Config& c = m.config;
  if (npos == 2 || args.has("input")) {
    for (const char* set_only : {"images", "n", "out", "no-layers"})
      if (args.has(set_only)) throw Error(ErrorCode::bad_argument, std::string("--") + set_only + " is for a set of images, not with IMAGE");
    return heads_of_image(args, m, npos == 2 ? args.positional()[1] : "");
  }
  for (const char* image_only : {"curve", "count", "json"})
    if (args.has(image_only)) throw Error(ErrorCode::bad_argument, std::string("--") + image_only + " needs an image (vitlens heads MODEL IMAGE)");
  std::string dir = args.get("images", "");
  if (dir.empty()) dir = (fs::path(model_path).parent_path() / "gallery").string();
  if (!fs::is_directory(dir)) throw Error(ErrorCode::io, "no image directory " + dir + " (give --images DIR)");
  const std::string target_arg = args.get("target", "predicted");
  int fixed_target = -1;
  if (target_arg != "predicted" && target_arg != "gold") {
    const bool digits = !target_arg.empty() && target_arg.size() < 9 &&
                        std::all_of(target_arg.begin(), target_arg.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    fixed_target = digits ? std::stoi(target_arg) : -1;
    if (fixed_target < 0 || fixed_target >= c.classes)
      throw Error(ErrorCode::bad_argument, "--target must be predicted, gold or a class index 0…" + std::to_string(c.classes - 1));
  }
  const int steps = args.get_int("steps", 20);
  if (steps < 1 || steps > 10000) throw Error(ErrorCode::bad_argument, "--steps must be 1…10000");
  const int threads = args.get_int("threads", 1);
  if (threads < 1 || threads > 64) throw Error(ErrorCode::bad_argument, "--threads must be 1…64");
  const int limit = args.get_int("n", 0);
  if (limit < 0) throw Error(ErrorCode::bad_argument, "--n must be ≥ 0 (0: every image)");
  std::string out = args.get("out", "heads");
  if (out.size() > 3 && out.compare(out.size() - 3, 3, ".md") == 0) out.resize(out.size() - 3);

  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
  SceneSet set = load_scene_set(dir, c);
  if (limit > 0 && size_t(limit) < set.images.size()) {
    set.names.resize(size_t(limit));
    set.images.resize(size_t(limit));
    set.labels.resize(size_t(limit));
  }
  HeadScores scores = head_scores_zero(c);
  Trace tr;
  const double t0 = now_ms();
  for (size_t i = 0; i < set.images.size(); ++i) {
    vit_forward(tr, m, set.images[i]);
    const int pred = top_k(c, tr.logits, 1)[0].cls;
    if (!set.labelled) set.labels[i] = {pred};
    const std::vector<int>& gold = set.labels[i];
    int target = pred;
    if (fixed_target >= 0) target = fixed_target;
    else if (target_arg == "gold" && std::find(gold.begin(), gold.end(), pred) == gold.end()) target = gold[0];
    head_scores_add(scores, m, tr, target, attattr_blocks(m, tr, target, steps, threads), gold);
    std::fprintf(stderr, "\rattattr %zu/%zu", i + 1, set.images.size());
  }
  const double attattr_ms = now_ms() - t0;
  std::fprintf(stderr, "\n");

  const std::vector<std::string> names = {"attattr", "attention-max", "attention-confidence", "taylor-loss", "taylor-prob"};
  const std::vector<const MatD*> grids = {&scores.attattr, &scores.attention_max, &scores.attention, &scores.taylor_loss,
                                          &scores.taylor};
  const std::vector<std::string> titles = {
      "attattr, Σ_x max_{i,j} Attr_{l,h}(x) (Hao et al. 2021)",
      "attention score, Σ_x max_{i,j} A_{l,h}(x) (Hao et al.'s attention baseline)",
      "attention confidence, Σ_x mean_i max_j A_{l,h}(x) (Voita et al. 2019)",
      "Taylor of the loss, Σ_x |Σ_{i,j} A ⊙ ∂L/∂A|, L on the gold labels (Michel et al. 2019; Hao et al.'s baseline)",
      "Taylor of the probability, Σ_x |Σ_{i,j} A ⊙ ∂F/∂A|, F = the target's probability"};
  std::vector<std::vector<double>> curves;
  std::vector<std::vector<int>> orders;
  for (const MatD* g : grids) {
    orders.push_back(pruning_order(*g));
    curves.push_back(pruning_curve(m, set.images, set.labels, orders.back()));
    std::fprintf(stderr, "\rpruning curves %zu/%zu", curves.size(), grids.size());
  }
  std::fprintf(stderr, "\n");
  const bool layers = !args.has("no-layers");
  LayerPruning layer_attr, layer_attn;
  if (layers) {
    layer_attr = layer_pruning(m, set.images, set.labels, scores.attattr);
    layer_attn = layer_pruning(m, set.images, set.labels, scores.attention_max);
  }
  const int heads = c.depth * c.heads;

  json j;
  j["model"] = model_path;
  j["images"] = dir;
  j["count"] = set.images.size();
  j["labelled"] = set.labelled;
  j["steps"] = steps;
  j["target"] = fixed_target >= 0 ? json(fixed_target) : json(target_arg);
  j["attattr_ms_per_image"] = attattr_ms / double(set.images.size());
  for (size_t r = 0; r < names.size(); ++r) {
    j["scores"][names[r]] = grid_json(*grids[r]);
    j["order"][names[r]] = orders[r];
    j["accuracy"][names[r]] = curves[r];
  }
  if (layers) j["layers"] = {{"attattr", layer_json(layer_attr)}, {"attention-max", layer_json(layer_attn)}};
  write_file(out + ".json", j.dump(1) + "\n");
  write_file(out + ".svg", curves_svg(names, curves));
  if (layers) write_file(out + "-layers.svg", layers_svg(layer_attr, layer_attn, c.heads));

  std::string md;
  char buf[320];
  md += "# Head importance and pruning: " + fs::path(model_path).filename().string() + "\n\n";
  const std::string target_text = fixed_target >= 0 ? "class " + std::to_string(fixed_target)
                                  : target_arg == "gold" ? std::string("the gold class (the prediction when it is a label, else the first label)")
                                                         : std::string("the predicted class");
  std::snprintf(buf, sizeof buf,
                "%zu images from `%s`%s; attattr with m = %d, F = the %s probability of %s; %.0f ms of attattr per "
                "image (%d thread%s). Written by `vitlens heads`.\n\n",
                set.images.size(), dir.c_str(), set.labelled ? " (labels.json)" : " (no labels: agreement)", steps,
                c.output == OutputKind::sigmoid ? "sigmoid" : "softmax", target_text.c_str(),
                attattr_ms / double(set.images.size()), threads, threads > 1 ? "s" : "");
  md += buf;
  md += std::string("Accuracy: a scene is correct when the model's top-1 class is one of its labels. Pruning masks a head's "
                    "attention (× 0; the projection bias stays), heads in ascending score, ties by index (block·H + head). "
                    "The loss L of taylor-loss is the training loss on the gold labels (") +
        (c.output == OutputKind::sigmoid ? "binary cross-entropy summed over the classes" : "cross-entropy") + ").\n\n";
  for (size_t r = 0; r < names.size(); ++r) md += "## " + names[r] + ": " + titles[r] + "\n\n" + grid_table(*grids[r]) + "\n";
  md += "## Pruning curves\n\n![pruning curves](" + fs::path(out).filename().string() + ".svg)\n\n";
  md += "| heads pruned | % |";
  std::string rule = "|---|---|";
  for (const std::string& n : names) {
    md += " " + n + " |";
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (int k = 0; k <= heads; ++k) {
    std::snprintf(buf, sizeof buf, "| %d | %.0f |", k, 100.0 * k / heads);
    md += buf;
    for (const auto& cv : curves) {
      std::snprintf(buf, sizeof buf, " %.3f |", cv[size_t(k)]);
      md += buf;
    }
    md += "\n";
  }
  md += "| mean over all levels | |";
  for (const auto& cv : curves) {
    double sum = 0;
    for (double v : cv) sum += v;
    std::snprintf(buf, sizeof buf, " %.3f |", sum / double(cv.size()));
    md += buf;
  }
  md += "\n";
  if (layers) {
    md += "\n## Per-layer analysis (Hao et al. 2021, section 4.1)\n\nIn each block alone, its heads ranked by attattr or by "
          "the attention score (max A); accuracy with the top k pruned (the block's other heads on), and with only the top "
          "k kept (the block's other heads pruned); every other block unpruned. Clean accuracy: ";
    std::snprintf(buf, sizeof buf, "%.3f.\n\n", curves[0][0]);
    md += buf;
    md += "![per-layer analysis](" + fs::path(out).filename().string() + "-layers.svg)\n\n" +
          layer_table(layer_attr, layer_attn, c.heads);
  }
  write_file(out + ".md", md);
  std::printf("wrote %s.md, %s.json, %s.svg%s\n", out.c_str(), out.c_str(), out.c_str(),
              layers ? (", " + out + "-layers.svg").c_str() : "");
  return 0;
}

}  // namespace vitlens::cli
