// norm_ff.cpp — the analyses of Kobayashi et al. (ICLR 2024) over norm-based maps, their reports,
// and the .npz export of the maps (see norm_ff.h for every definition).
#include "vitlens/eval/norm_ff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "vitlens/io/npy.h"
#include "vitlens/io/npz.h"
#include "vitlens/metrics/metrics.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

constexpr int T = norm_ff_transition_count, S = norm_stage_count, P = pair_type_count;

const std::array<NormTransition, T> kTransitions = {{
    {NormStage::atb, NormStage::atb_res},
    {NormStage::atb_res, NormStage::atb_res_ln},
    {NormStage::atb_res_ln, NormStage::atb_res_ln_ff},
    {NormStage::atb_res_ln_ff, NormStage::layer},
    {NormStage::atb_res_ln, NormStage::layer},
    {NormStage::atb_res, NormStage::layer},
}};

const char* const kPairNames[P] = {"same item", "other item", "item–background", "background"};

std::string transition_name(int t) {
  return std::string(norm_stage_name(kTransitions[size_t(t)].from)) + " → " + norm_stage_name(kTransitions[size_t(t)].to);
}

// The (n, n) map's context shares in double: s[i, j] = N[i, j] / Σ_{k≠i} N[i, k] for j ≠ i (the
// query's own entry, which the residual dominates, is left out and set to 0; a zero row stays zero).
MatD context_shares(const Mat& m) {
  MatD s = m.cast<double>();
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    s(i, i) = 0;
    const double sum = s.row(i).sum();
    if (sum > 0) s.row(i) /= sum;
  }
  return s;
}

double geometric_mean(double log_sum, int64_t n) { return n > 0 ? std::exp(log_sum / double(n)) : NAN; }

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

nlohmann::json num(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

// A line chart: x positions 0 … k−1 labelled `xticks`, one polyline per series (dashed when
// asked), y range from the data padded a little (and including `y_ref`, drawn as a grey line).
struct Series {
  std::string name;
  std::vector<double> y;  // NaN: a gap
  bool dashed = false;
  int colour = -1;  // index into the palette; −1: the series' own index
};

std::string lines_svg(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<std::string>& xticks, const std::vector<Series>& series, double y_ref) {
  const double width = 760, height = 420, x0 = 70, x1 = 500, y0 = 50, y1 = 360;
  const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  double lo = y_ref, hi = y_ref;
  for (const Series& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  if (!(hi > lo)) hi = lo + 1;
  const double pad = 0.06 * (hi - lo);
  lo -= pad;
  hi += pad;
  const int k = int(xticks.size());
  auto px = [&](int i) { return k > 1 ? x0 + (x1 - x0) * i / double(k - 1) : (x0 + x1) / 2; };
  auto py = [&](double v) { return y1 - (y1 - y0) * (v - lo) / (hi - lo); };
  char buf[512];
  std::string svg;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height, width, height);
  svg += buf;
  std::snprintf(buf, sizeof buf, "<text x=\"%.0f\" y=\"26\" font-size=\"14\" text-anchor=\"middle\">%s</text>\n",
                (x0 + x1) / 2, title.c_str());
  svg += buf;
  // axes, ticks and grid
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                x0, y1, x1, y1, x0, y0, x0, y1);
  svg += buf;
  for (int i = 0; i < k; ++i) {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px(i), y1 + 18,
                  xticks[size_t(i)].c_str());
    svg += buf;
  }
  for (int i = 0; i <= 5; ++i) {
    const double v = lo + (hi - lo) * i / 5.0;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n",
                  x0, py(v), x1, py(v), x0 - 6, py(v) + 4, v);
    svg += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>\n",
                x0, py(y_ref), x1, py(y_ref));
  svg += buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n"
                "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">%s</text>\n",
                (x0 + x1) / 2, y1 + 40, xlabel.c_str(), (y0 + y1) / 2, (y0 + y1) / 2, ylabel.c_str());
  svg += buf;
  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    const char* colour = colours[size_t(s.colour >= 0 ? s.colour : int(si)) % std::size(colours)];
    std::string path;
    bool pen = false;
    for (int i = 0; i < k && i < int(s.y.size()); ++i) {
      if (!std::isfinite(s.y[size_t(i)])) {
        pen = false;
        continue;
      }
      std::snprintf(buf, sizeof buf, "%s%.1f %.1f ", pen ? "L" : "M", px(i), py(s.y[size_t(i)]));
      path += buf;
      pen = true;
    }
    std::snprintf(buf, sizeof buf, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", path.c_str(),
                  colour, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    svg += buf;
    const double ly = y0 + 8 + 20.0 * double(si);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"520\" y1=\"%.1f\" x2=\"550\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                  "<text x=\"556\" y=\"%.1f\">%s</text>\n",
                  ly, ly, colour, s.dashed ? " stroke-dasharray=\"6 4\"" : "", ly + 4, s.name.c_str());
    svg += buf;
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string norm_stage_array_name(NormStage s) {
  std::string name = norm_stage_name(s);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::vector<uint8_t> encode_norm_stages_npz(const std::vector<NormBlock>& blocks,
                                            const std::vector<std::vector<Mat>>& heads) {
  if (blocks.empty()) throw Error(ErrorCode::bad_argument, "norm stages: no blocks (explain with norm-based first)");
  const int64_t L = int64_t(blocks.size()), n = blocks[0].maps[0].rows();
  for (const NormBlock& b : blocks)
    for (int s = 0; s < S; ++s)
      if (b.maps[s].rows() != n || b.maps[s].cols() != n || b.mixing[s].size() != n)
        throw Error(ErrorCode::bad_argument, "norm stages: every block needs (n, n) maps and (n) mixing ratios of "
                                             "all five stages, with the same n");
  if (!heads.empty() && int64_t(heads.size()) != L)
    throw Error(ErrorCode::bad_argument, "norm stages: per-head maps of " + std::to_string(heads.size()) +
                                             " blocks for " + std::to_string(L) + " blocks");
  const int64_t H = heads.empty() ? 0 : int64_t(heads[0].size());
  for (const std::vector<Mat>& hb : heads) {
    if (int64_t(hb.size()) != H || H == 0)
      throw Error(ErrorCode::bad_argument, "norm stages: every block needs the same number (≥ 1) of head maps");
    for (const Mat& m : hb)
      if (m.rows() != n || m.cols() != n) throw Error(ErrorCode::bad_argument, "norm stages: a head map is not (n, n)");
  }
  std::vector<NpzMember> members;
  std::vector<float> buf;
  for (int s = 0; s < S; ++s) {
    buf.clear();
    for (const NormBlock& b : blocks) buf.insert(buf.end(), b.maps[s].data(), b.maps[s].data() + n * n);  // (L, n, n)
    members.push_back({norm_stage_array_name(NormStage(s)), encode_npy_f32({L, n, n}, buf.data())});
  }
  buf.clear();
  for (const NormBlock& b : blocks)
    for (int s = 0; s < S; ++s) buf.insert(buf.end(), b.mixing[s].data(), b.mixing[s].data() + n);  // (L, 5, n)
  members.push_back({"mixing_ratio", encode_npy_f32({L, S, n}, buf.data())});
  if (H > 0) {
    buf.clear();
    for (const std::vector<Mat>& hb : heads)
      for (const Mat& m : hb) buf.insert(buf.end(), m.data(), m.data() + n * n);  // (L, H, n, n)
    members.push_back({"atb_heads", encode_npy_f32({L, H, n, n}, buf.data())});
  }
  return encode_npz(members);
}

std::vector<int> patch_regions(const std::vector<std::vector<uint8_t>>& masks, int height, int width, int patch,
                               const RegionOptions& opt) {
  if (patch <= 0 || height <= 0 || width <= 0 || height % patch || width % patch)
    throw Error(ErrorCode::bad_argument, "patch_regions: the image (" + std::to_string(height) + "×" +
                                             std::to_string(width) + ") must be a positive multiple of the patch (" +
                                             std::to_string(patch) + ")");
  for (const std::vector<uint8_t>& m : masks)
    if (m.size() != size_t(height) * size_t(width))
      throw Error(ErrorCode::bad_argument, "patch_regions: a mask is not " + std::to_string(height) + "×" +
                                               std::to_string(width));
  const int gh = height / patch, gw = width / patch, K = int(masks.size());
  const double area = double(patch) * patch;
  std::vector<int> out(size_t(gh) * size_t(gw));
  std::vector<int> count(static_cast<size_t>(K));  // (K) pixels of each mask in the patch
  for (int pr = 0; pr < gh; ++pr)
    for (int pc = 0; pc < gw; ++pc) {
      std::fill(count.begin(), count.end(), 0);
      int any = 0;  // pixels covered by some mask
      for (int y = pr * patch; y < (pr + 1) * patch; ++y)
        for (int x = pc * patch; x < (pc + 1) * patch; ++x) {
          bool hit = false;
          for (int k = 0; k < K; ++k)
            if (masks[size_t(k)][size_t(y) * size_t(width) + size_t(x)]) {
              ++count[size_t(k)];
              hit = true;
            }
          any += hit;
        }
      int region = any <= opt.background_share * area ? region_background : region_mixed;
      for (int k = 0; k < K; ++k)
        if (count[size_t(k)] > opt.item_share * area) region = k;  // more than half: at most one k
      out[size_t(pr) * size_t(gw) + size_t(pc)] = region;
    }
  return out;
}

const char* pair_type_name(PairType t) { return kPairNames[int(t)]; }

int pair_type(int rq, int rk) {
  if (rq == region_mixed || rk == region_mixed) return -1;
  if (rq >= 0 && rk >= 0) return int(rq == rk ? PairType::same_item : PairType::other_item);
  if (rq >= 0 || rk >= 0) return int(PairType::item_background);
  return int(PairType::background_background);
}

const std::array<NormTransition, norm_ff_transition_count>& norm_ff_transitions() { return kTransitions; }

double NormFfStats::amp_type(int b, int t, int type) const {
  const size_t k = size_t((b * T + t) * P + type);
  return geometric_mean(log_type[k], n_type[k]);
}

int64_t NormFfStats::pairs_type(int b, int t, int type) const { return n_type[size_t((b * T + t) * P + type)]; }

double NormFfStats::amp_dist(int b, int t, int d) const {
  const size_t k = size_t((b * T + t) * max_distance + d - 1);
  return geometric_mean(log_dist[k], n_dist[k]);
}

double NormFfStats::amp_prefix(int b, int t) const {
  return geometric_mean(log_prefix[size_t(b * T + t)], n_prefix[size_t(b * T + t)]);
}

NormFfStats norm_ff_start(const Config& c) {
  NormFfStats s;
  s.blocks = c.depth;
  s.max_distance = std::max(c.grid_h(), c.grid_w()) - 1;
  const size_t L = size_t(c.depth), D = size_t(std::max(1, s.max_distance));
  s.rho_flat.assign(L * T, 0.0);
  s.rho_row.assign(L * T, 0.0);
  s.mixing.assign(L * S, 0.0);
  s.log_type.assign(L * T * P, 0.0);
  s.n_type.assign(L * T * P, 0);
  s.log_prefix.assign(L * T, 0.0);
  s.n_prefix.assign(L * T, 0);
  s.log_dist.assign(L * T * D, 0.0);
  s.n_dist.assign(L * T * D, 0);
  return s;
}

double spearman_rows(const Mat& a, const Mat& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols() || a.rows() == 0)
    throw Error(ErrorCode::bad_argument, "spearman_rows: the maps differ in shape or are empty");
  double sum = 0;
  for (Eigen::Index i = 0; i < a.rows(); ++i) sum += spearman(a.row(i).data(), b.row(i).data(), int(a.cols()));
  return sum / double(a.rows());
}

void norm_ff_add(NormFfStats& s, const std::vector<NormBlock>& norm, const Config& c, const std::vector<int>& regions) {
  const int n = c.tokens(), prefix = c.prefix(), gw = c.grid_w(), np = c.num_patches();
  if (int(norm.size()) != s.blocks || s.blocks != c.depth)
    throw Error(ErrorCode::bad_argument, "norm_ff_add: " + std::to_string(norm.size()) + " blocks of maps for a " +
                                             std::to_string(s.blocks) + "-block analysis");
  if (!regions.empty() && int(regions.size()) != np)
    throw Error(ErrorCode::bad_argument, "norm_ff_add: " + std::to_string(regions.size()) + " patch regions for " +
                                             std::to_string(np) + " patches");
  for (const NormBlock& nb : norm)
    for (int st = 0; st < S; ++st)
      if (nb.maps[st].rows() != n || nb.maps[st].cols() != n || nb.mixing[st].size() != n)
        throw Error(ErrorCode::bad_argument, "norm_ff_add: the maps are not (n, n) for this model");
  for (int r : regions) {
    s.item_patches += r >= 0;
    s.background_patches += r == region_background;
    s.mixed_patches += r == region_mixed;
  }
  const int D = s.max_distance;
  for (int b = 0; b < s.blocks; ++b) {
    const NormBlock& nb = norm[size_t(b)];
    for (int st = 0; st < S; ++st) s.mixing[size_t(b * S + st)] += nb.mixing[st].cast<double>().mean();
    for (int t = 0; t < T; ++t) {
      const Mat& before = nb.maps[int(kTransitions[size_t(t)].from)];
      const Mat& after = nb.maps[int(kTransitions[size_t(t)].to)];
      // (a) ρ over the whole map flattened, and per query row
      s.rho_flat[size_t(b * T + t)] += spearman(before.data(), after.data(), n * n);
      s.rho_row[size_t(b * T + t)] += spearman_rows(before, after);
      // (b) amplification of each patch pair's share of its query's context
      const MatD sb = context_shares(before), sa = context_shares(after);
      for (int p = 0; p < np; ++p)
        for (int k = 0; k < prefix; ++k) {
          const double x = sb(prefix + p, k), y = sa(prefix + p, k);
          if (!(x > 0) || !(y > 0)) {
            ++s.skipped;
            continue;
          }
          s.log_prefix[size_t(b * T + t)] += std::log(y / x);
          ++s.n_prefix[size_t(b * T + t)];
        }
      for (int p = 0; p < np; ++p)
        for (int q = 0; q < np; ++q) {
          if (p == q) continue;
          const double x = sb(prefix + p, prefix + q), y = sa(prefix + p, prefix + q);
          if (!(x > 0) || !(y > 0)) {
            ++s.skipped;
            continue;
          }
          const double lr = std::log(y / x);
          const int d = std::max(std::abs(p / gw - q / gw), std::abs(p % gw - q % gw));
          const size_t kd = size_t((b * T + t) * D + d - 1);
          s.log_dist[kd] += lr;
          ++s.n_dist[kd];
          const int type = regions.empty() ? -1 : pair_type(regions[size_t(p)], regions[size_t(q)]);
          if (type < 0) continue;
          const size_t kt = size_t((b * T + t) * P + type);
          s.log_type[kt] += lr;
          ++s.n_type[kt];
        }
    }
  }
  ++s.images;
}

std::vector<NormImageBlock> norm_image_summary(const std::vector<NormBlock>& norm, NormTransition t) {
  if (norm.empty()) throw Error(ErrorCode::bad_argument, "norm_image_summary: no block of norm-based maps");
  const int from = int(t.from), to = int(t.to);
  const Eigen::Index n = norm[0].maps[from].rows();
  for (const NormBlock& nb : norm) {
    bool ok = n > 0 && nb.maps[from].rows() == n && nb.maps[from].cols() == n && nb.maps[to].rows() == n &&
              nb.maps[to].cols() == n;
    for (int st = 0; st < S; ++st) ok = ok && nb.mixing[st].size() == n;
    if (!ok)
      throw Error(ErrorCode::bad_argument, std::string("norm_image_summary: every block needs the (n, n) maps of ") +
                                               norm_stage_name(t.from) + " and " + norm_stage_name(t.to) +
                                               " and the n mixing ratios of every stage, with one n");
  }
  std::vector<NormImageBlock> out(norm.size());
  for (size_t b = 0; b < norm.size(); ++b) {
    const Mat& before = norm[b].maps[from];
    const Mat& after = norm[b].maps[to];
    NormImageBlock& o = out[b];
    // the share of query i's context that key j holds, its own entry left out (as in (b) of norm_ff.h)
    o.share_before = context_shares(before).cast<float>();
    o.share_after = context_shares(after).cast<float>();
    // ρ between the two maps of the block, as norm_ff_add takes it for one image
    o.rho_query.resize(size_t(n));
    double sum = 0;
    for (Eigen::Index i = 0; i < n; ++i) sum += o.rho_query[size_t(i)] = spearman(before.row(i).data(), after.row(i).data(), int(n));
    o.rho_rows = sum / double(n);
    o.rho_flat = spearman(before.data(), after.data(), int(n * n));
    // r̄_s: the mean over the n tokens of r_i = ‖Σ_{j≠i} z_{i←j}‖ / (‖Σ_{j≠i} z_{i←j}‖ + ‖z_{i←i}‖)
    for (int st = 0; st < S; ++st) o.mixing_mean[st] = norm[b].mixing[st].cast<double>().mean();
  }
  return out;
}

std::string norm_ff_markdown(const NormFfStats& s, const std::string& title, const std::string& command) {
  std::string md = "# Norm-based analysis of the FF (Kobayashi et al. 2024): " + title + "\n\n";
  md += "Made by `" + command + "` over " + std::to_string(s.images) + " images.\n\n";
  md += "## Spearman's ρ between the maps of two stages (mean over images)\n\n"
        "Whole n×n map flattened (per query row, mean over rows, in brackets). ρ near 1: the transition "
        "keeps the map's ranking; lower: it changes the contextualisation.\n\n| block |";
  for (int t = 0; t < T; ++t) md += " " + transition_name(t) + " |";
  md += "\n|---|";
  for (int t = 0; t < T; ++t) md += "---:|";
  md += "\n";
  for (int b = 0; b < s.blocks; ++b) {
    md += "| " + std::to_string(b) + " |";
    for (int t = 0; t < T; ++t)
      md += " " + fmt("%.3f", s.mean_rho_flat(b, t)) + " (" + fmt("%.3f", s.mean_rho_row(b, t)) + ") |";
    md += "\n";
  }
  md += "\n## Mixing ratio per stage (mean over tokens and images)\n\n| block |";
  for (int st = 0; st < S; ++st) md += std::string(" ") + norm_stage_name(NormStage(st)) + " |";
  md += "\n|---|";
  for (int st = 0; st < S; ++st) md += "---:|";
  md += "\n";
  for (int b = 0; b < s.blocks; ++b) {
    md += "| " + std::to_string(b) + " |";
    for (int st = 0; st < S; ++st) md += " " + fmt("%.3f", s.mean_mixing(b, st)) + " |";
    md += "\n";
  }
  for (int t : {norm_ff_ff, norm_ff_res2}) {
    md += "\n## Amplification by pair type, " + transition_name(t) +
          "\n\nGeometric mean over patch pairs (i ≠ j) of s_after[i, j] / s_before[i, j], s[i, j] = N[i, j] / "
          "Σ_{k≠i} N[i, k] (key j's share of query i's context, the query's own entry left out). Above 1: the "
          "pairs of that type gain share.\n\n"
          "| block |";
    for (int k = 0; k < P; ++k) md += std::string(" ") + kPairNames[k] + " |";
    md += " patch → CLS |\n|---|";
    for (int k = 0; k <= P; ++k) md += "---:|";
    md += "\n";
    for (int b = 0; b < s.blocks; ++b) {
      md += "| " + std::to_string(b) + " |";
      for (int k = 0; k < P; ++k) md += " " + fmt("%.3f", s.amp_type(b, t, k)) + " |";
      md += " " + fmt("%.3f", s.amp_prefix(b, t)) + " |\n";
    }
    md += "| pairs |";
    for (int k = 0; k < P; ++k) md += " " + std::to_string(s.pairs_type(0, t, k)) + " |";
    md += " " + std::to_string(s.n_prefix[size_t(t)]) + " |\n";
  }
  md += "\n## Amplification by distance, " + transition_name(norm_ff_ff) +
        "\n\nAs above, by the Chebyshev distance between the two patches (in patches).\n\n| block |";
  for (int d = 1; d <= s.max_distance; ++d) md += " " + std::to_string(d) + " |";
  md += "\n|---|";
  for (int d = 1; d <= s.max_distance; ++d) md += "---:|";
  md += "\n";
  for (int b = 0; b < s.blocks; ++b) {
    md += "| " + std::to_string(b) + " |";
    for (int d = 1; d <= s.max_distance; ++d) md += " " + fmt("%.3f", s.amp_dist(b, norm_ff_ff, d)) + " |";
    md += "\n";
  }
  const int64_t patches = s.item_patches + s.background_patches + s.mixed_patches;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "\nPatches: %lld item, %lld background, %lld mixed (excluded from the pair types) of %lld. "
                "Pairs skipped for a zero share: %lld.\n",
                (long long)s.item_patches, (long long)s.background_patches, (long long)s.mixed_patches,
                (long long)patches, (long long)s.skipped);
  md += buf;
  md += "\n![ρ per block](ff_spearman.svg)\n![pair types](ff_pair_types.svg)\n![distance](ff_distance.svg)\n"
        "![mixing ratio](mixing.svg)\n";
  return md;
}

std::string norm_ff_csv(const NormFfStats& s) {
  std::string csv = "block,quantity,transition,key,value,count\n";
  char buf[256];
  auto row = [&](int b, const char* q, const std::string& tr, const std::string& key, double v, long long count) {
    std::snprintf(buf, sizeof buf, "%d,%s,%s,%s,%s,%lld\n", b, q, tr.c_str(), key.c_str(),
                  std::isnan(v) ? "" : fmt("%.9g", v).c_str(), count);
    csv += buf;
  };
  for (int b = 0; b < s.blocks; ++b) {
    for (int t = 0; t < T; ++t) {
      const std::string tr = transition_name(t);
      row(b, "rho_flat", tr, "", s.mean_rho_flat(b, t), s.images);
      row(b, "rho_row", tr, "", s.mean_rho_row(b, t), s.images);
      for (int k = 0; k < P; ++k) row(b, "amp_type", tr, kPairNames[k], s.amp_type(b, t, k), s.pairs_type(b, t, k));
      row(b, "amp_type", tr, "patch → prefix", s.amp_prefix(b, t), s.n_prefix[size_t(b * T + t)]);
      for (int d = 1; d <= s.max_distance; ++d)
        row(b, "amp_distance", tr, std::to_string(d), s.amp_dist(b, t, d),
            s.n_dist[size_t((b * T + t) * s.max_distance + d - 1)]);
    }
    for (int st = 0; st < S; ++st) row(b, "mixing", "", norm_stage_name(NormStage(st)), s.mean_mixing(b, st), s.images);
  }
  return csv;
}

std::string norm_ff_json(const NormFfStats& s) {
  nlohmann::json j;
  j["images"] = s.images;
  j["patches"] = {{"item", s.item_patches}, {"background", s.background_patches}, {"mixed", s.mixed_patches}};
  j["skipped_pairs"] = s.skipped;
  nlohmann::json blocks = nlohmann::json::array();
  for (int b = 0; b < s.blocks; ++b) {
    nlohmann::json jb, tr = nlohmann::json::array(), mix;
    for (int st = 0; st < S; ++st) mix[norm_stage_name(NormStage(st))] = num(s.mean_mixing(b, st));
    for (int t = 0; t < T; ++t) {
      nlohmann::json jt, types, dist = nlohmann::json::array();
      jt["from"] = norm_stage_name(kTransitions[size_t(t)].from);
      jt["to"] = norm_stage_name(kTransitions[size_t(t)].to);
      jt["rho_flat"] = num(s.mean_rho_flat(b, t));
      jt["rho_row"] = num(s.mean_rho_row(b, t));
      for (int k = 0; k < P; ++k) types[kPairNames[k]] = {{"amplification", num(s.amp_type(b, t, k))}, {"pairs", s.pairs_type(b, t, k)}};
      for (int d = 1; d <= s.max_distance; ++d) dist.push_back(num(s.amp_dist(b, t, d)));
      jt["amplification_by_type"] = types;
      jt["amplification_patch_to_prefix"] = {{"amplification", num(s.amp_prefix(b, t))},
                                             {"pairs", s.n_prefix[size_t(b * T + t)]}};
      jt["amplification_by_distance"] = dist;
      tr.push_back(jt);
    }
    jb["block"] = b;
    jb["mixing_ratio"] = mix;
    jb["transitions"] = tr;
    blocks.push_back(jb);
  }
  j["blocks"] = blocks;
  return j.dump(1) + "\n";
}

std::vector<std::pair<std::string, std::string>> norm_ff_svgs(const NormFfStats& s) {
  std::vector<std::string> block_ticks, dist_ticks;
  for (int b = 0; b < s.blocks; ++b) block_ticks.push_back(std::to_string(b));
  for (int d = 1; d <= s.max_distance; ++d) dist_ticks.push_back(std::to_string(d));
  std::vector<Series> rho;
  for (int t = 0; t < T; ++t) {
    Series se{transition_name(t), {}, t >= 4};
    for (int b = 0; b < s.blocks; ++b) se.y.push_back(s.mean_rho_flat(b, t));
    rho.push_back(se);
  }
  std::vector<Series> types;
  for (int t : {norm_ff_ff, norm_ff_res2})
    for (int k = 0; k < P; ++k) {
      Series se{std::string(kPairNames[k]) + (t == norm_ff_ff ? " (FF)" : " (FF + res.)"), {}, t != norm_ff_ff, k};
      for (int b = 0; b < s.blocks; ++b) se.y.push_back(s.amp_type(b, t, k));
      types.push_back(se);
    }
  for (int t : {norm_ff_ff, norm_ff_res2}) {
    Series se{std::string("patch → CLS") + (t == norm_ff_ff ? " (FF)" : " (FF + res.)"), {}, t != norm_ff_ff, P};
    for (int b = 0; b < s.blocks; ++b) se.y.push_back(s.amp_prefix(b, t));
    types.push_back(se);
  }
  std::vector<Series> dist;
  for (int b = 0; b < s.blocks; ++b) {
    Series se{"block " + std::to_string(b), {}, false};
    for (int d = 1; d <= s.max_distance; ++d) se.y.push_back(s.amp_dist(b, norm_ff_ff, d));
    dist.push_back(se);
  }
  std::vector<Series> mix;
  for (int st = 0; st < S; ++st) {
    Series se{norm_stage_name(NormStage(st)), {}, false};
    for (int b = 0; b < s.blocks; ++b) se.y.push_back(s.mean_mixing(b, st));
    mix.push_back(se);
  }
  std::string pair_svg = lines_svg("FF amplification by pair type (solid: FF; dashed: FF + residual)", "block",
                                   "geometric mean of s_after / s_before", block_ticks, types, 1.0);
  return {
      {"ff_spearman.svg", lines_svg("Spearman ρ between stage maps (whole map)", "block", "ρ", block_ticks, rho, 1.0)},
      {"ff_pair_types.svg", pair_svg},
      {"ff_distance.svg", lines_svg("FF amplification by patch distance (atb-res-ln → atb-res-ln-ff)",
                                    "Chebyshev distance (patches)", "geometric mean of s_after / s_before", dist_ticks,
                                    dist, 1.0)},
      {"mixing.svg", lines_svg("Mixing ratio per stage", "block", "mean r", block_ticks, mix, 0.0)},
  };
}

}  // namespace vitlens
