// metrics.cpp — the faithfulness metrics of metrics.h (perturbation order and AUC, segmentation,
// tied average precision, Spearman, pointing game, class-specific share).
#include "vitlens/metrics/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace vitlens {

std::vector<int> perturbation_order(const float* map, int n, bool positive) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (positive)
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return map[a] > map[b]; });
  else
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return map[a] < map[b]; });
  return order;
}

int perturbation_count(int n, int step) {
  assert(step >= 0 && step < perturbation_steps);
  return int(int64_t(n) * step / 10);
}

double perturbation_auc(const std::array<double, perturbation_steps>& acc) {
  // trapezoid over x = 0, 0.1, …, 0.9: 0.1 · Σ_i (acc_i + acc_{i+1}) / 2
  double area = 0.0;
  for (int i = 0; i + 1 < perturbation_steps; ++i) area += 0.1 * 0.5 * (acc[size_t(i)] + acc[size_t(i + 1)]);
  return 100.0 * area;
}

bool minmax_normalise(std::vector<double>& out, const float* map, int n) {
  out.assign(static_cast<size_t>(n), 0.0);
  if (n == 0) return false;
  double lo = map[0], hi = map[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, double(map[i]));
    hi = std::max(hi, double(map[i]));
  }
  if (!(hi > lo)) return false;
  const double inv = 1.0 / (hi - lo);
  for (int i = 0; i < n; ++i) out[size_t(i)] = (double(map[i]) - lo) * inv;
  return true;
}

void SegmentationCounts::add(const SegmentationCounts& o) {
  correct += o.correct;
  pixels += o.pixels;
  for (size_t k = 0; k < 2; ++k) {
    inter[k] += o.inter[k];
    uni[k] += o.uni[k];
  }
}

double SegmentationCounts::pixel_accuracy() const { return pixels ? double(correct) / double(pixels) : 0.0; }

double SegmentationCounts::iou(int cls) const {
  const size_t k = size_t(cls);
  return uni[k] ? double(inter[k]) / double(uni[k]) : 0.0;
}

double SegmentationCounts::miou() const { return 0.5 * (iou(0) + iou(1)); }

SegmentationCounts segmentation_counts(const float* map, const uint8_t* mask, int n) {
  std::vector<double> m;
  const bool varies = minmax_normalise(m, map, n);
  double mean = 0.0;
  for (double v : m) mean += v;
  mean = n ? mean / n : 0.0;
  SegmentationCounts c;
  c.pixels = n;
  for (int i = 0; i < n; ++i) {
    const int pred = varies && m[size_t(i)] > mean ? 1 : 0;
    const int label = mask[i] ? 1 : 0;
    c.correct += pred == label;
    if (pred == label) {
      c.inter[size_t(label)]++;
      c.uni[size_t(label)]++;
    } else {
      c.uni[0]++;  // the pixel is in the prediction of one class and the label of the other
      c.uni[1]++;
    }
  }
  return c;
}

double average_precision_tied(const std::vector<double>& scores, const std::vector<uint8_t>& labels) {
  assert(scores.size() == labels.size());
  const size_t n = scores.size();
  int64_t positives = 0;
  for (uint8_t l : labels) positives += l ? 1 : 0;
  if (positives == 0) return 0.0;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  double ap = 0.0, recall_prev = 0.0;
  int64_t tp = 0, seen = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;  // one threshold: every score equal to scores[order[i]]
    while (j < n && scores[order[j]] == scores[order[i]]) {
      tp += labels[order[j]] ? 1 : 0;
      ++j;
    }
    seen += int64_t(j - i);
    const double recall = double(tp) / double(positives), precision = double(tp) / double(seen);
    ap += (recall - recall_prev) * precision;
    recall_prev = recall;
    i = j;
  }
  return ap;
}

double segmentation_ap(const float* map, const uint8_t* mask, int n) {
  std::vector<double> m;
  const bool constant = !minmax_normalise(m, map, n);
  std::vector<double> scores(size_t(2) * size_t(n));  // (2, n): background channel, foreground channel
  std::vector<uint8_t> labels(size_t(2) * size_t(n));
  for (int i = 0; i < n; ++i) {
    // The reference's NaN → 0 for an all-equal map zeroes both channels.
    scores[size_t(i)] = constant ? 0.0 : 1.0 - m[size_t(i)];
    scores[size_t(n + i)] = m[size_t(i)];
    labels[size_t(i)] = mask[i] ? 0 : 1;
    labels[size_t(n + i)] = mask[i] ? 1 : 0;
  }
  return average_precision_tied(scores, labels);
}

std::vector<double> average_ranks(const float* v, int n) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a] < v[b]; });
  std::vector<double> rank(static_cast<size_t>(n));
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && v[order[size_t(j)]] == v[order[size_t(i)]]) ++j;
    const double r = 0.5 * double(i + 1 + j);  // mean of the ranks i+1 … j
    for (int k = i; k < j; ++k) rank[size_t(order[size_t(k)])] = r;
    i = j;
  }
  return rank;
}

double spearman(const float* a, const float* b, int n) {
  const std::vector<double> ra = average_ranks(a, n), rb = average_ranks(b, n);
  const double mean = 0.5 * double(n + 1);
  double sab = 0.0, saa = 0.0, sbb = 0.0;
  for (int i = 0; i < n; ++i) {
    const double da = ra[size_t(i)] - mean, db = rb[size_t(i)] - mean;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  if (saa == 0.0 && sbb == 0.0) return 1.0;
  if (saa == 0.0 || sbb == 0.0) return 0.0;
  return sab / std::sqrt(saa * sbb);
}

double pointing_game(const float* map, const uint8_t* mask, int n) {
  if (n == 0) return 0.0;
  float top = map[0];
  for (int i = 1; i < n; ++i) top = std::max(top, map[i]);
  int at_max = 0, inside = 0;
  for (int i = 0; i < n; ++i) {
    if (map[i] != top) continue;
    ++at_max;
    inside += mask[i] ? 1 : 0;
  }
  return double(inside) / double(at_max);
}

double class_share(const float* map, const uint8_t* own, const uint8_t* other, int n) {
  double in = 0.0, out = 0.0;
  for (int i = 0; i < n; ++i) {
    const double r = std::max(0.0, double(map[i]));
    if (own[i]) in += r;
    if (other[i]) out += r;
  }
  return in + out > 0.0 ? in / (in + out) : 0.5;
}

}  // namespace vitlens
