// cmd_heads.cpp — `vitlens heads MODEL`: head importance from attattr (Hao et al. 2021) over a set
// of images, and head pruning curves under three rankings (attattr, attention confidence, Taylor).
// Writes OUT.md (the report), OUT.json (every number) and OUT.svg (the pruning curves).
//
// Accuracy of the multi-label scene model: a scene counts as correct when the top-1 class is one
// of its labels (DIR/labels.json, as written by `vitlens scenes`). Without labels.json, each
// image's label is the unpruned model's own top-1 class (the curve measures agreement).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"

namespace vitlens::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ImageSet {
  std::vector<std::string> names;
  std::vector<Image> images;
  std::vector<std::vector<int>> labels;  // empty per image when unknown
  bool labelled = false;
};

ImageSet load_set(const std::string& dir, const Config& cfg) {
  ImageSet s;
  const fs::path labels = fs::path(dir) / "labels.json";
  if (fs::exists(labels)) {
    const std::vector<uint8_t> bytes = read_file(labels.string(), 1 << 24);
    const json j = json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded() || !j.contains("scenes"))
      throw Error(ErrorCode::bad_format, labels.string() + " is not a scenes labels.json (no \"scenes\")");
    for (const json& sc : j["scenes"]) {
      s.names.push_back(sc.at("image").get<std::string>());
      std::vector<int> ls;
      for (const json& item : sc.at("items")) ls.push_back(item.at("class").get<int>());
      s.labels.push_back(ls);
    }
    s.labelled = true;
  } else {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".npy") files.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    s.names = files;
    s.labels.assign(files.size(), {});
  }
  if (s.names.empty()) throw Error(ErrorCode::bad_argument, "no images in " + dir);
  for (const std::string& n : s.names) s.images.push_back(load_image_or_npy((fs::path(dir) / n).string(), cfg));
  return s;
}

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
  const double W = 560, H = 340, x0 = 60, y0 = 20, pw = 360, ph = 260;
  const char* colours[] = {"#d62728", "#1f77b4", "#2ca02c"};
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
    s += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + colours[c % 3] + "\" points=\"";
    const size_t n = curves[c].size();
    for (size_t k = 0; k < n; ++k) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x0 + pw * double(k) / double(n - 1), y0 + ph - ph * curves[c][k]);
      s += buf;
    }
    s += "\"/>\n";
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%g\" "
                  "y=\"%g\">%s</text>\n",
                  x0 + pw + 15, y0 + 20 + 20.0 * c, x0 + pw + 40, y0 + 20 + 20.0 * c, colours[c % 3], x0 + pw + 46,
                  y0 + 24 + 20.0 * c, names[c].c_str());
    s += buf;
  }
  return s + "</svg>\n";
}

}  // namespace

int cmd_heads(int argc, char** argv) {
  Args args(argc, argv, {"images", "target", "steps", "threads", "out"}, {"help"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens heads MODEL [--images DIR] [--target T] [--steps M] [--threads N] [--out report]\n\n"
        "Head importance by attattr (Hao et al. 2021), I_{l,h} = Σ_x max_{i,j} Attr_{l,h}(x) over the images of\n"
        "DIR (default: the gallery next to MODEL, e.g. models/gallery), each explained for --target (default:\n"
        "its predicted class), with m = --steps (20). Then head pruning: heads masked in ascending score\n"
        "(attention × 0, projection bias kept) under three rankings — attattr, attention confidence\n"
        "(Σ_x mean_i max_j A, Voita et al. 2019) and Taylor (Σ_x |Σ A ⊙ ∂F/∂A|, Michel et al. 2019) — with the\n"
        "accuracy after each head: top-1 class ∈ the scene's labels (DIR/labels.json), or agreement with the\n"
        "unpruned prediction when there are no labels. Writes report.md, report.json and report.svg\n"
        "(default --out heads).\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string model_path = args.positional()[0];
  const Model m = load_model_arg(model_path);
  const Config& c = m.config;
  std::string dir = args.get("images", "");
  if (dir.empty()) dir = (fs::path(model_path).parent_path() / "gallery").string();
  if (!fs::is_directory(dir)) throw Error(ErrorCode::io, "no image directory " + dir + " (give --images DIR)");
  const int fixed_target = args.get_int("target", -1);
  if (args.has("target") && (fixed_target < 0 || fixed_target >= c.classes))
    throw Error(ErrorCode::bad_argument, "--target must be a class index 0…" + std::to_string(c.classes - 1));
  const int steps = args.get_int("steps", 20);
  if (steps < 1 || steps > 10000) throw Error(ErrorCode::bad_argument, "--steps must be 1…10000");
  const int threads = args.get_int("threads", 1);
  if (threads < 1 || threads > 64) throw Error(ErrorCode::bad_argument, "--threads must be 1…64");
  std::string out = args.get("out", "heads");
  if (out.size() > 3 && out.compare(out.size() - 3, 3, ".md") == 0) out.resize(out.size() - 3);

  ImageSet set = load_set(dir, c);
  HeadScores scores = head_scores_zero(c);
  Trace tr;
  const double t0 = now_ms();
  for (size_t i = 0; i < set.images.size(); ++i) {
    vit_forward(tr, m, set.images[i]);
    const int pred = top_k(c, tr.logits, 1)[0].cls;
    if (!set.labelled) set.labels[i] = {pred};
    const int target = fixed_target >= 0 ? fixed_target : pred;
    head_scores_add(scores, m, tr, target, attattr_blocks(m, tr, target, steps, threads));
    std::fprintf(stderr, "\rattattr %zu/%zu", i + 1, set.images.size());
  }
  const double attattr_ms = now_ms() - t0;
  std::fprintf(stderr, "\n");

  const std::vector<std::string> names = {"attattr", "attention", "taylor"};
  const std::vector<const MatD*> grids = {&scores.attattr, &scores.attention, &scores.taylor};
  std::vector<std::vector<double>> curves;
  std::vector<std::vector<int>> orders;
  for (const MatD* g : grids) {
    orders.push_back(pruning_order(*g));
    curves.push_back(pruning_curve(m, set.images, set.labels, orders.back()));
  }
  const int heads = c.depth * c.heads;

  json j;
  j["model"] = model_path;
  j["images"] = dir;
  j["count"] = set.images.size();
  j["labelled"] = set.labelled;
  j["steps"] = steps;
  j["target"] = fixed_target >= 0 ? json(fixed_target) : json("predicted");
  j["attattr_ms_per_image"] = attattr_ms / double(set.images.size());
  for (size_t r = 0; r < names.size(); ++r) {
    j["scores"][names[r]] = grid_json(*grids[r]);
    j["order"][names[r]] = orders[r];
    j["accuracy"][names[r]] = curves[r];
  }
  write_file(out + ".json", j.dump(1) + "\n");
  write_file(out + ".svg", curves_svg(names, curves));

  std::string md;
  char buf[256];
  md += "# Head importance and pruning: " + fs::path(model_path).filename().string() + "\n\n";
  std::snprintf(buf, sizeof buf,
                "%zu images from `%s`%s; attattr with m = %d, F = the %s probability of %s; %.0f ms of attattr per "
                "image (%d thread%s). Written by `vitlens heads`.\n\n",
                set.images.size(), dir.c_str(), set.labelled ? " (labels.json)" : " (no labels: agreement)", steps,
                c.output == OutputKind::sigmoid ? "sigmoid" : "softmax",
                fixed_target >= 0 ? ("class " + std::to_string(fixed_target)).c_str() : "the predicted class",
                attattr_ms / double(set.images.size()), threads, threads > 1 ? "s" : "");
  md += buf;
  md += "Accuracy: a scene is correct when the model's top-1 class is one of its labels. Pruning masks a head's "
        "attention (× 0; the projection bias stays), heads in ascending score, ties by index (block·H + head).\n\n";
  md += "## Importance: attattr, Σ_x max_{i,j} Attr_{l,h}(x)\n\n" + grid_table(scores.attattr) + "\n";
  md += "## Attention confidence, Σ_x mean_i max_j A_{l,h}(x)\n\n" + grid_table(scores.attention) + "\n";
  md += "## Taylor, Σ_x |Σ_{i,j} A ⊙ ∂F/∂A|\n\n" + grid_table(scores.taylor) + "\n";
  md += "## Pruning curves\n\n![pruning curves](" + fs::path(out).filename().string() + ".svg)\n\n";
  md += "| heads pruned | % |";
  for (const std::string& n : names) md += " " + n + " |";
  md += "\n|---|---|---|---|---|\n";
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
    double s = 0;
    for (double v : cv) s += v;
    std::snprintf(buf, sizeof buf, " %.3f |", s / double(cv.size()));
    md += buf;
  }
  md += "\n";
  write_file(out + ".md", md);
  std::printf("wrote %s.md, %s.json, %s.svg\n", out.c_str(), out.c_str(), out.c_str());
  return 0;
}

}  // namespace vitlens::cli
