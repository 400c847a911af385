// eval_report.cpp — the benchmark's reports: a markdown table in the layout of Chefer et al.'s
// tables (methods as rows, the perturbation AUCs for the predicted and the target class, then the
// segmentation figures), a CSV with every figure and curve point, and SVG plots of the
// perturbation curves drawn here (no plotting dependency). A markdown column whose figure no
// method has (no masks, no two-item scenes, no compare model, no ROAD or randomisation records,
// timings dropped) is left out. The randomisation check gets a table of its own (mean ρ per
// cascade step).
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "vitlens/eval/eval.h"

namespace vitlens {

namespace {


std::string fmt(const char* format, double v) {
  if (!std::isfinite(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

const char* kDirection[2] = {"positive", "negative"};
const char* kMapClass[2] = {"predicted", "target"};

// A column of the markdown table: its header, how a method's value is read and printed, and
// whether higher is better (for the bold best entry; 0 = not ranked).
struct Column {
  std::string header;
  std::function<double(const EvalMethodSummary&)> value;
  const char* format;
  int better;  // +1 higher, −1 lower, 0 none
};

// The scores eval.cpp sets, with their headers (others get their name as header, "%.4f", unranked).
struct KnownScore {
  const char* name;
  const char* header;
  double scale;
  const char* format;
  int better;
};
const KnownScore kKnownScores[] = {
    {"srg_black", "SRG black ↑", 1.0, "%.2f", +1},
    {"srg_road", "SRG ROAD ↑", 1.0, "%.2f", +1},
    {"mass_accuracy", "Mass acc. ↑", 100.0, "%.2f", +1},
    {"rank_accuracy", "Rank acc. ↑", 100.0, "%.2f", +1},
};

// The last cascade step's mean of a MapSimilarity field (none without randomisation records).
double last_step(const EvalMethodSummary& m, double MapSimilarity::*field) {
  return m.randomisation.empty() ? EvalRecord::none : m.randomisation.back().*field;
}

// The columns of `s`: the fixed ones, then one per EvalRecord::scores name (the known ones in
// kKnownScores order, then the others in byte order), the randomisation check's last step, and
// the latency; those no method has a value for are left out.
std::vector<Column> columns(const EvalSummary& s) {
  std::vector<Column> all = {
      {"Neg. AUC ↑ predicted", [](const EvalMethodSummary& m) { return m.auc[0][1]; }, "%.2f", +1},
      {"Neg. AUC ↑ target", [](const EvalMethodSummary& m) { return m.auc[1][1]; }, "%.2f", +1},
      {"Pos. AUC ↓ predicted", [](const EvalMethodSummary& m) { return m.auc[0][0]; }, "%.2f", -1},
      {"Pos. AUC ↓ target", [](const EvalMethodSummary& m) { return m.auc[1][0]; }, "%.2f", -1},
      {"ROAD LeRF ↑", [](const EvalMethodSummary& m) { return m.road_auc[1]; }, "%.2f", +1},
      {"ROAD MoRF ↓", [](const EvalMethodSummary& m) { return m.road_auc[0]; }, "%.2f", -1},
      {"Pixel acc. ↑", [](const EvalMethodSummary& m) { return 100.0 * m.pixel_acc; }, "%.2f", +1},
      {"mIoU ↑", [](const EvalMethodSummary& m) { return 100.0 * m.miou; }, "%.2f", +1},
      {"mAP ↑", [](const EvalMethodSummary& m) { return 100.0 * m.map; }, "%.2f", +1},
      {"Class share ↑", [](const EvalMethodSummary& m) { return 100.0 * m.share; }, "%.2f", +1},
      {"Pointing ↑", [](const EvalMethodSummary& m) { return 100.0 * m.pointing; }, "%.2f", +1},
      {"int8–f32 ρ ↑", [](const EvalMethodSummary& m) { return m.rho; }, "%.4f", +1},
  };
  std::vector<std::string> names;
  for (const EvalMethodSummary& m : s.methods)
    for (const auto& kv : m.scores)
      if (std::find(names.begin(), names.end(), kv.first) == names.end()) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  auto score = [](const std::string& name, double scale) {
    return [name, scale](const EvalMethodSummary& m) {
      const auto it = m.scores.find(name);
      return it == m.scores.end() ? EvalRecord::none : scale * it->second;
    };
  };
  for (const KnownScore& k : kKnownScores) all.push_back({k.header, score(k.name, k.scale), k.format, k.better});
  for (const std::string& name : names)
    if (std::none_of(std::begin(kKnownScores), std::end(kKnownScores), [&](const KnownScore& k) { return name == k.name; }))
      all.push_back({name, score(name, 1.0), "%.4f", 0});
  all.push_back({"Rand. ρ", [](const EvalMethodSummary& m) { return last_step(m, &MapSimilarity::spearman); }, "%.3f", 0});
  all.push_back({"Rand. SSIM", [](const EvalMethodSummary& m) { return last_step(m, &MapSimilarity::ssim); }, "%.3f", 0});
  all.push_back({"ms / image", [](const EvalMethodSummary& m) { return m.ms; }, "%.2f", 0});
  std::vector<Column> shown;
  for (Column& col : all)
    if (std::any_of(s.methods.begin(), s.methods.end(),
                    [&](const EvalMethodSummary& m) { return std::isfinite(col.value(m)); }))
      shown.push_back(std::move(col));
  return shown;
}

// "12 held-out test scenes" / "12 labelled images".
std::string samples_text(const EvalSummary& s, int count) {
  return std::to_string(count) + (s.kind == "scenes" ? " held-out test scenes" : " labelled images");
}

}  // namespace

std::string eval_svg_name(int c, int d) {
  return std::string("perturbation_") + kDirection[d] + "_" + kMapClass[c] + ".svg";
}

std::string eval_markdown(const EvalSummary& s, const std::string& title, const std::string& command) {
  const bool scenes = s.kind == "scenes";
  const std::vector<Column> cols = columns(s);
  std::string md = "# Faithfulness benchmark: " + title + "\n\n";
  const EvalMethodSummary& any = s.methods.front();
  if (scenes) {
    md += samples_text(s, s.n) + ": " + std::to_string(s.single) +
          " single-item scenes for the perturbation and segmentation tests, " + std::to_string(s.two) +
          " two-item scenes (" + std::to_string(2 * s.two) +
          " maps, one per item) for the class-specific share and the pointing game, all " +
          std::to_string(s.n - s.skipped) + " for ρ and the latency.\n\n";
  } else {
    md += samples_text(s, s.n) + ": " + std::to_string(s.single) + " for the perturbation tests, " +
          std::to_string(any.segmentation_scenes) + " with a mask for the segmentation test" +
          (s.skipped ? ", " + std::to_string(s.skipped) + " skipped (listed below)" : std::string()) + ".\n\n";
  }
  md += "| Method |";
  for (const Column& col : cols) md += " " + col.header + " |";
  md += "\n|---|";
  for (size_t i = 0; i < cols.size(); ++i) md += "---:|";
  md += "\n";
  // The best printed value per ranked column among the registry methods.
  std::vector<std::string> best(cols.size());
  for (size_t k = 0; k < cols.size(); ++k) {
    const Column& col = cols[k];
    if (!col.better) continue;
    double top = NAN;
    for (const EvalMethodSummary& m : s.methods) {
      if (is_baseline(m.method)) continue;
      const std::string text = fmt(col.format, col.value(m));
      if (text == "–") continue;
      const double v = std::stod(text);
      if (std::isnan(top) || v * col.better > top * col.better) top = v;
    }
    if (!std::isnan(top)) best[k] = fmt(col.format, top);
  }
  for (int pass = 0; pass < 2; ++pass)  // the methods, then the baselines
    for (const EvalMethodSummary& m : s.methods) {
      if (is_baseline(m.method) != (pass == 1)) continue;
      md += pass ? "| *" + m.method + "* |" : "| " + m.method + " |";
      for (size_t k = 0; k < cols.size(); ++k) {
        const std::string text = fmt(cols[k].format, cols[k].value(m));
        md += !pass && text == best[k] ? " **" + text + "** |" : " " + text + " |";
      }
      md += "\n";
    }
  md += std::string("\n- Perturbation AUC: accuracy (the arg-max class equals the ") +
        (scenes ? "item's class" : "label") +
        ") over 0–90 % of the pixels removed, trapezoid × 100 (at most 90); clean " +
        (scenes ? "single-item " : "") + "accuracy (p = 0): " + fmt("%.2f", 100.0 * any.acc[0][0][0]) +
        " %. Maps of the predicted or of the ground-truth (target) class; pixels removed most relevant "
        "first (positive, lower is better) or least relevant first (negative, higher is better).\n";
  const auto road_of = std::max_element(s.methods.begin(), s.methods.end(), [](const EvalMethodSummary& a, const EvalMethodSummary& b) {
    return a.road_scenes < b.road_scenes;
  });
  if (road_of->road_scenes)
    md += "- ROAD (Rong et al. 2022): the perturbation test of the predicted-class map with the removed pixels "
          "filled by noisy linear imputation from their neighbours instead of black; AUC of the accuracy as above, "
          "most relevant first (MoRF, lower is better) and least relevant first (LeRF, higher is better), on " +
          std::to_string(road_of->road_scenes) + " samples.\n";
  if (std::any_of(s.methods.begin(), s.methods.end(), [](const EvalMethodSummary& m) { return m.scores.count("srg_black") != 0; }))
    md += "- SRG (Symmetric Relevance Gain, Blücher et al. 2024): the area between the least- and the most-relevant-first "
          "curves of the model's probability of the predicted class, × 100, with black fill or ROAD; higher is better, "
          "a random map scores ≈ 0.\n";
  if (any.segmentation_scenes)
    md += std::string("- Segmentation (predicted-class map against the ") + (scenes ? "item's" : "object") +
          " mask; the min-max map > its mean is foreground): pixel accuracy, mIoU of background and "
          "foreground, mAP of [1−m, m], in %. Mass acc. (Arras et al. 2022): the share of the positive relevance "
          "inside the mask; Rank acc.: the share of the |mask| most relevant pixels inside it, in %.\n";
  if (s.two)
    md += "- Class share: positive relevance on the explained item over that on both items, %. Pointing: "
          "the map's maximum lies inside the explained item, %.\n";
  const bool timed = std::isfinite(s.forward_ms) ||
                     std::any_of(s.methods.begin(), s.methods.end(), [](const EvalMethodSummary& m) { return std::isfinite(m.ms); });
  md += timed ? std::string("- ρ: Spearman between the two models' maps, mean over samples. ms / image: median "
                            "time of one predicted-class map after the forward pass, which all methods of a sample "
                            "share (median ") +
                    fmt("%.2f", s.forward_ms) +
                    " ms). Timings depend on the machine and its load; every other figure is deterministic.\n"
              : std::string("- ρ: Spearman between the two models' maps, mean over samples. Timings are left out "
                            "of this report; every figure in it is deterministic.\n");
  md += "- Bold: the best attribution method per column. *random* (uniform per pixel) and *oracle* (the "
        "object's mask) are baselines.\n";
  // The randomisation check: mean ρ per cascade step, the last step's |ρ| and SSIM, the flag.
  size_t steps = 0;
  int rand_scenes = 0;
  for (const EvalMethodSummary& m : s.methods) {
    steps = std::max(steps, m.randomisation.size());
    rand_scenes = std::max(rand_scenes, m.randomisation_scenes);
  }
  if (steps) {
    md += "- Rand. ρ, Rand. SSIM: the model randomisation check (Adebayo et al. 2018) after every parameter is "
          "re-initialised (table below); near 0 is what a map that depends on the model shows.\n";
    md += "\n**Model randomisation** (Adebayo et al. 2018) on " + std::to_string(rand_scenes) +
          " samples: the parameters re-initialised from the head down, cumulatively; Spearman's ρ between "
          "the map of the trained model's predicted class on the randomised and on the trained model, mean over "
          "samples, after each step. *Survives*: |ρ| > 0.5 after the last step (the map does not depend on "
          "the model's weights).\n\n| Method |";
    for (size_t st = 1; st <= steps; ++st) md += " " + eval_randomisation_step_name(int(st), int(steps)) + " |";
    md += " ρ of \\|maps\\|, last | SSIM, last | Survives |\n|---|";
    for (size_t st = 0; st < steps + 3; ++st) md += "---:|";
    md += "\n";
    for (int pass = 0; pass < 2; ++pass)
      for (const EvalMethodSummary& m : s.methods) {
        if (m.randomisation.size() != steps || is_baseline(m.method) != (pass == 1)) continue;
        md += pass ? "| *" + m.method + "* |" : "| " + m.method + " |";
        for (const MapSimilarity& q : m.randomisation) md += " " + fmt("%.3f", q.spearman) + " |";
        md += " " + fmt("%.3f", m.randomisation.back().spearman_abs) + " | " + fmt("%.3f", m.randomisation.back().ssim) +
              " | " + (m.survives ? "**yes**" : "no") + " |\n";
      }
  }
  int nonfinite = 0;
  for (const EvalMethodSummary& m : s.methods) nonfinite += m.nonfinite;
  if (nonfinite) {
    md += "\nMaps with NaN or ±Inf (set to 0):";
    for (const EvalMethodSummary& m : s.methods)
      if (m.nonfinite) md += " " + m.method + " " + std::to_string(m.nonfinite) + ";";
    md += "\n";
  }
  if (s.skipped) {
    md += "\nSkipped (" + std::to_string(s.skipped) + " samples could not be read" +
          (s.skipped > int(s.skipped_reasons.size()) ? "; the first " + std::to_string(s.skipped_reasons.size())
                                                     : std::string()) +
          "):\n\n";
    for (const std::string& r : s.skipped_reasons) md += "- " + r + "\n";
  }
  md += "\nPerturbation curves: ";
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d) md += std::string(c || d ? ", " : "") + "[" + eval_svg_name(c, d) + "](" + eval_svg_name(c, d) + ")";
  if (road_of->road_scenes)
    for (int d = 0; d < 2; ++d) md += ", [" + eval_road_svg_name(d) + "](" + eval_road_svg_name(d) + ")";
  md += "; every figure: results.csv; per sample: scenes.jsonl.\n";
  if (!command.empty())
    md += "\nRegenerate (with --out DIR; a rerun into the same folder resumes from its scenes.jsonl):\n\n```sh\n" +
          command + "\n```\n";
  return md;
}

std::string eval_csv(const EvalSummary& s) {
  std::string csv =
      "method,perturbation_scenes,segmentation_scenes,class_maps,rho_scenes,timed,nonfinite,"
      "neg_auc_predicted,neg_auc_target,pos_auc_predicted,pos_auc_target,pixel_accuracy,iou_background,"
      "iou_foreground,miou,map,class_share,pointing,rho,ms_median";
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d)
      for (int st = 0; st < perturbation_steps; ++st) {
        char col[64];
        std::snprintf(col, sizeof col, ",acc_%s_%s_p%02d", kDirection[d], kMapClass[c], 10 * st);
        csv += col;
      }
  size_t steps = 0;  // randomisation steps
  for (const EvalMethodSummary& m : s.methods) steps = std::max(steps, m.randomisation.size());
  csv += ",road_scenes,road_morf_auc,road_lerf_auc";
  for (int d = 0; d < 2; ++d)
    for (int st = 0; st < perturbation_steps; ++st) {
      char col[64];
      std::snprintf(col, sizeof col, ",acc_road_%s_p%02d", d ? "lerf" : "morf", 10 * st);
      csv += col;
    }
  csv += ",randomisation_scenes,randomisation_survives";
  for (const char* field : {"spearman", "spearman_abs", "ssim"})
    for (size_t st = 1; st <= steps; ++st) {
      char col[64];
      std::snprintf(col, sizeof col, ",rand_%s_s%02zu", field, st);
      csv += col;
    }
  std::vector<std::string> names;  // EvalRecord::scores, one column each after the curves
  for (const EvalMethodSummary& m : s.methods)
    for (const auto& kv : m.scores)
      if (std::find(names.begin(), names.end(), kv.first) == names.end()) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) csv += "," + name;
  csv += "\n";
  auto num = [](double v) { return std::isfinite(v) ? fmt("%.6f", v) : std::string(); };
  for (const EvalMethodSummary& m : s.methods) {
    csv += m.method + "," + std::to_string(m.perturbation_scenes) + "," + std::to_string(m.segmentation_scenes) +
           "," + std::to_string(m.class_maps) + "," + std::to_string(m.rho_scenes) + "," + std::to_string(m.timed) +
           "," + std::to_string(m.nonfinite);
    for (double v : {m.auc[0][1], m.auc[1][1], m.auc[0][0], m.auc[1][0], m.pixel_acc, m.seg.iou(0), m.seg.iou(1),
                     m.miou, m.map, m.share, m.pointing, m.rho, m.ms})
      csv += "," + num(v);
    for (size_t c = 0; c < 2; ++c)
      for (size_t d = 0; d < 2; ++d)
        for (double a : m.acc[c][d]) csv += "," + num(a);
    csv += "," + std::to_string(m.road_scenes) + "," + num(m.road_auc[0]) + "," + num(m.road_auc[1]);
    for (size_t d = 0; d < 2; ++d)
      for (double a : m.road_acc[d]) csv += "," + (m.road_scenes ? num(a) : std::string());
    csv += "," + std::to_string(m.randomisation_scenes) + "," +
           (m.randomisation_scenes ? std::string(m.survives ? "1" : "0") : std::string());
    for (double MapSimilarity::*field : {&MapSimilarity::spearman, &MapSimilarity::spearman_abs, &MapSimilarity::ssim})
      for (size_t st = 0; st < steps; ++st)
        csv += "," + (st < m.randomisation.size() ? num(m.randomisation[st].*field) : std::string());
    for (const std::string& name : names) {
      const auto it = m.scores.find(name);
      csv += "," + (it == m.scores.end() ? std::string() : num(it->second));
    }
    csv += "\n";
  }
  return csv;
}

namespace {

// The accuracy curve of one method (null: the method has none) and its AUC.
using CurveOf = std::function<const std::array<double, perturbation_steps>*(const EvalMethodSummary&)>;

// One plot: accuracy (%) over the fraction removed, one curve per method that has one; `title`
// heads it, `order` names the removal order on the x axis.
std::string curves_svg(const EvalSummary& s, const std::string& title, const char* order, const CurveOf& curve_of,
                       const std::function<double(const EvalMethodSummary&)>& auc_of) {
  // Layout (px): the plot spans x0…x1 × y0…y1; the legend sits to the right.
  const double width = 820, height = 440, x0 = 64, x1 = 500, y0 = 48, y1 = 380;
  const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                           "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};
  auto px = [&](double p) { return x0 + (x1 - x0) * p / 0.9; };       // fraction removed → x
  auto py = [&](double acc) { return y1 - (y1 - y0) * acc; };         // accuracy (0…1) → y
  char buf[512];
  std::string svg;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height, width, height);
  svg += buf;
  std::snprintf(buf, sizeof buf, "<text x=\"%.0f\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
                (x0 + x1) / 2, xml_escape(title).c_str());
  svg += buf;
  // Grid, ticks and axis labels.
  for (int t = 0; t <= 9; ++t) {
    const double x = px(0.1 * t);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e0e0e0\"/>"
                  "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n",
                  x, y0, x, y1, x, y1 + 18, 10 * t);
    svg += buf;
  }
  for (int t = 0; t <= 10; t += 2) {
    const double y = py(0.1 * t);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>"
                  "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n",
                  x0, y, x1, y, x0 - 8, y + 4, 10 * t);
    svg += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n"
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">pixels removed (%%, %s)</text>\n"
                "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">accuracy (%%)</text>\n",
                x0, y0, x1 - x0, y1 - y0, (x0 + x1) / 2, y1 + 40, order, (y0 + y1) / 2, (y0 + y1) / 2);
  svg += buf;
  // One curve per method, with its legend entry (name and AUC).
  int colour = 0;
  size_t shown = 0, count = 0;
  for (const EvalMethodSummary& m : s.methods) count += curve_of(m) != nullptr;
  for (size_t k = 0; k < s.methods.size(); ++k) {
    const EvalMethodSummary& m = s.methods[k];
    const std::array<double, perturbation_steps>* curve = curve_of(m);
    if (!curve) continue;
    std::string stroke, dash;
    if (m.method == eval_random) {
      stroke = "#7f7f7f", dash = " stroke-dasharray=\"6 4\"";
    } else if (m.method == eval_oracle) {
      stroke = "#000000", dash = " stroke-dasharray=\"2 3\"";
    } else {
      stroke = colours[size_t(colour++) % std::size(colours)];
    }
    svg += "<polyline fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"2\"" + dash + " points=\"";
    for (int st = 0; st < perturbation_steps; ++st) {
      std::snprintf(buf, sizeof buf, "%s%.1f,%.1f", st ? " " : "", px(0.1 * st), py((*curve)[size_t(st)]));
      svg += buf;
    }
    svg += "\"/>\n";
    const double step = std::min(20.0, (y1 - y0 - 8) / double(count));
    const double ly = y0 + 8 + step * double(shown++);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                  "<text x=\"%.0f\" y=\"%.0f\">%s (AUC %.2f)</text>\n",
                  x1 + 16, ly, x1 + 44, ly, stroke.c_str(), dash.c_str(), x1 + 52, ly + 4,
                  xml_escape(m.method).c_str(), auc_of(m));
    svg += buf;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

std::string eval_svg(const EvalSummary& s, int c, int d) {
  char title[160];
  std::snprintf(title, sizeof title, "%s perturbation, %s-class maps (%d %s)", d ? "Negative" : "Positive", kMapClass[c],
                s.single, s.kind == "scenes" ? "single-item scenes" : "images");
  return curves_svg(
      s, title, d ? "least relevant first" : "most relevant first",
      [c, d](const EvalMethodSummary& m) { return &m.acc[size_t(c)][size_t(d)]; },
      [c, d](const EvalMethodSummary& m) { return m.auc[size_t(c)][size_t(d)]; });
}

std::string eval_road_svg_name(int d) { return std::string("road_") + (d ? "lerf" : "morf") + ".svg"; }

std::string eval_road_svg(const EvalSummary& s, int d) {
  int samples = 0;
  for (const EvalMethodSummary& m : s.methods) samples = std::max(samples, m.road_scenes);
  if (!samples) return "";
  char title[160];
  std::snprintf(title, sizeof title, "ROAD %s, predicted-class maps (%d %s)", d ? "LeRF" : "MoRF", samples,
                s.kind == "scenes" ? "single-item scenes" : "images");
  return curves_svg(
      s, title, d ? "least relevant first, imputed" : "most relevant first, imputed",
      [d](const EvalMethodSummary& m) { return m.road_scenes ? &m.road_acc[size_t(d)] : nullptr; },
      [d](const EvalMethodSummary& m) { return m.road_auc[size_t(d)]; });
}

}  // namespace vitlens
