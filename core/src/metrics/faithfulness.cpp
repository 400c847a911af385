// faithfulness.cpp — the pure metrics of faithfulness.h: Symmetric Relevance Gain, Relevance Mass
// and Rank Accuracy, Spearman of absolute values, SSIM, the randomisation survival flag.
#include "vitlens/metrics/faithfulness.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "vitlens/tensor/error.h"

namespace vitlens {

double symmetric_relevance_gain(const std::array<double, perturbation_steps>& lerf,
                                const std::array<double, perturbation_steps>& morf) {
  // Blücher et al. 2024: SRG = ∫₀¹ (LIF(p) − MIF(p)) dp, trapezoids at p = 0, 0.1, …, 0.9, 1 with
  // LIF(1) = MIF(1) (both orders have removed everything).
  double area = 0.0;
  for (size_t i = 0; i + 1 < size_t(perturbation_steps); ++i)
    area += 0.1 * 0.5 * ((lerf[i] - morf[i]) + (lerf[i + 1] - morf[i + 1]));
  const size_t last = size_t(perturbation_steps) - 1;
  area += 0.1 * 0.5 * (lerf[last] - morf[last]);
  return 100.0 * area;
}

double relevance_mass_accuracy(const float* map, const uint8_t* mask, int n) {
  // Arras et al. 2022: R_within / R_total on the positive relevance.
  double within = 0.0, total = 0.0;
  for (int i = 0; i < n; ++i) {
    const double r = std::max(0.0, double(map[i]));
    total += r;
    if (mask[i]) within += r;
  }
  return total > 0.0 ? within / total : 0.0;
}

double relevance_rank_accuracy(const float* map, const uint8_t* mask, int n) {
  // Arras et al. 2022: |top-K ∩ GT| / K, K = |GT|; ties at the K-th value shared.
  int k = 0;
  for (int i = 0; i < n; ++i) k += mask[i] ? 1 : 0;
  if (k == 0) return 0.0;
  std::vector<float> sorted(map, map + n);
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  const float t = sorted[size_t(k - 1)];  // the K-th largest value
  int above = 0, tied = 0, above_in = 0, tied_in = 0;
  for (int i = 0; i < n; ++i) {
    if (map[i] > t) {
      ++above;
      above_in += mask[i] ? 1 : 0;
    } else if (map[i] == t) {
      ++tied;
      tied_in += mask[i] ? 1 : 0;
    }
  }
  // `above` < K ≤ above + tied: the K − above remaining places go to the tied pixels.
  const double share = double(k - above) / double(tied);
  return (double(above_in) + share * double(tied_in)) / double(k);
}

double spearman_abs(const float* a, const float* b, int n) {
  std::vector<float> aa(static_cast<size_t>(n)), bb(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    aa[size_t(i)] = std::fabs(a[i]);
    bb[size_t(i)] = std::fabs(b[i]);
  }
  return spearman(aa.data(), bb.data(), n);
}

namespace {

// The window weights (side × side, row-major, summing to 1).
std::vector<double> ssim_window(const SsimOptions& opt, int& side) {
  if (!opt.gaussian) {
    side = opt.window;
    if (side < 3 || side % 2 == 0)
      throw Error(ErrorCode::bad_argument,
                  "the SSIM window must be an odd size ≥ 3 (got " + std::to_string(side) + "); 7 is scikit-image's default");
    return std::vector<double>(size_t(side) * size_t(side), 1.0 / (double(side) * double(side)));
  }
  if (!(opt.sigma > 0.0) || !(opt.sigma < 1e3))
    throw Error(ErrorCode::bad_argument, "the SSIM Gaussian σ must be positive (1.5 in Wang et al. 2004)");
  const int r = int(3.5 * opt.sigma + 0.5);  // scipy's gaussian_filter radius at truncate = 3.5
  side = 2 * r + 1;
  std::vector<double> g(static_cast<size_t>(side));
  double sum = 0.0;
  for (int k = -r; k <= r; ++k) sum += g[size_t(k + r)] = std::exp(-0.5 * double(k) * double(k) / (opt.sigma * opt.sigma));
  for (double& v : g) v /= sum;
  std::vector<double> w(size_t(side) * size_t(side));
  for (int i = 0; i < side; ++i)
    for (int j = 0; j < side; ++j) w[size_t(i) * size_t(side) + size_t(j)] = g[size_t(i)] * g[size_t(j)];
  return w;
}

}  // namespace

double ssim(const double* x, const double* y, int h, int w, double data_range, const SsimOptions& opt) {
  int side = 0;
  const std::vector<double> win = ssim_window(opt, side);
  if (side > h || side > w)
    throw Error(ErrorCode::bad_argument, "the SSIM window (" + std::to_string(side) + "×" + std::to_string(side) +
                                             ") is larger than the map (" + std::to_string(h) + "×" + std::to_string(w) +
                                             "); choose a smaller window");
  const double np = double(side) * double(side);
  const double cov_norm = opt.sample_covariance ? np / (np - 1.0) : 1.0;
  const double c1 = (opt.k1 * data_range) * (opt.k1 * data_range), c2 = (opt.k2 * data_range) * (opt.k2 * data_range);
  double total = 0.0;
  int64_t count = 0;
  for (int cy = 0; cy + side <= h; ++cy)
    for (int cx = 0; cx + side <= w; ++cx) {
      // Weighted local moments over the window with top-left corner (cy, cx).
      double mx = 0, my = 0, mxx = 0, myy = 0, mxy = 0;
      for (int i = 0; i < side; ++i)
        for (int j = 0; j < side; ++j) {
          const double wt = win[size_t(i) * size_t(side) + size_t(j)];
          const size_t p = size_t(cy + i) * size_t(w) + size_t(cx + j);
          mx += wt * x[p];
          my += wt * y[p];
          mxx += wt * x[p] * x[p];
          myy += wt * y[p] * y[p];
          mxy += wt * x[p] * y[p];
        }
      const double vx = cov_norm * (mxx - mx * mx), vy = cov_norm * (myy - my * my), vxy = cov_norm * (mxy - mx * my);
      // Wang et al. 2004, eq. (13).
      total += ((2.0 * mx * my + c1) * (2.0 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
      ++count;
    }
  return total / double(count);
}

double ssim_maps(const float* a, const float* b, int h, int w, const SsimOptions& opt) {
  std::vector<double> na, nb;
  minmax_normalise(na, a, h * w);
  minmax_normalise(nb, b, h * w);
  return ssim(na.data(), nb.data(), h, w, 1.0, opt);
}

MapSimilarity map_similarity(const float* trained, const float* randomised, int h, int w, const SsimOptions& opt) {
  MapSimilarity s;
  s.spearman = spearman(trained, randomised, h * w);
  s.spearman_abs = spearman_abs(trained, randomised, h * w);
  s.ssim = ssim_maps(trained, randomised, h, w, opt);
  return s;
}

bool randomisation_survives(const std::vector<double>& rho, double threshold) {
  return !rho.empty() && std::fabs(rho.back()) > threshold;
}

}  // namespace vitlens
