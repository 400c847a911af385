// methods_gradient.cpp — the input-gradient methods: saliency, grad-x-input, integrated
// gradients and smoothgrad (a wrapper over any other method).
//
// y_t is the target's logit (pre-softmax/sigmoid) and x the normalised (C, H, W) input. Each
// method fills the native (H, W) pixel map and the (H/p, W/p) token map = the sum of the pixel
// map over each patch (a patch's share of the attribution, as lrp/attnlrp's token maps are).
// The long methods (IG steps, smoothgrad samples) run their independent units on opt.threads
// workers, reduce them in unit order (the result does not depend on the thread count), report
// progress after each unit on the calling thread and stop with Error(cancelled) when asked.
// Not here: gradients themselves (vit.cpp), attention-level IG (methods_attattr.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "methods_internal.h"
#include "vitlens/tensor/recent.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/parallel.h"

namespace vitlens::detail {

namespace {

// One forward + backward pass: ∂y_t/∂x, of the model as `fo` runs it (the explained input's head
// mask; head_rows_only, as only the gradient is read). Owns its buffers so that each worker thread
// can keep one.
struct GradientPass {
  Trace trace;
  Grads grads;
  Vec dlogits;  // (classes) one-hot at the target

  void run(const Model& m, const Image& x, int target, const ForwardOptions& fo) {
    vit_forward(trace, m, x, fo);
    dlogits = Vec::Zero(m.config.classes);
    dlogits[target] = 1.0f;
    vit_backward(grads, nullptr, m, trace, dlogits, fo);
  }
};

// Σ of an (H, W) pixel map over each p×p patch → (H/p, W/p).
Mat patch_sums(const MatD& pixels, const Config& c) {
  const int p = c.patch;
  Mat out(c.grid_h(), c.grid_w());  // (H/p, W/p)
  for (int gy = 0; gy < c.grid_h(); ++gy)
    for (int gx = 0; gx < c.grid_w(); ++gx) out(gy, gx) = float(pixels.block(gy * p, gx * p, p, p).sum());
  return out;
}

void set_maps(Explanation& out, const MatD& pixels, const Config& c) {
  out.pixel_map = pixels.cast<float>();
  out.token_map = patch_sums(pixels, c);
}

// Runs unit(k, worker) for k = first … n−1 in batches of one unit per worker, then, on the calling
// thread and in k order, reduce(k, worker) and opt.progress((k+1)/n). Because every unit's
// result is reduced in k order, the result is the same for any number of workers, and the same
// when a stopped run's sums are gone on with from `first`.
void for_each_unit(int first, int n, int workers, const ProgressFn& progress, const char* what,
                   const std::function<void(int k, int worker)>& unit,
                   const std::function<void(int k, int worker)>& reduce) {
  for (int base = first; base < n; base += workers) {
    const int count = std::min(workers, n - base);
    run_workers(count, [&](int t) { unit(base + t, t); });
    for (int t = 0; t < count; ++t) {
      reduce(base + t, t);
      if (progress && !progress(double(base + t + 1) / double(n)))
        throw Error(ErrorCode::cancelled, std::string(what) + " cancelled");
    }
  }
}

// The running sum of `method` for these options that `st` keeps (ExplainState::sampled), moved to
// the end (the most recently used); else a new one of `size` zeros, in place of the least recently
// used when the state keeps kSampledKept. The key holds every option of the registry, not only
// the method's: smoothgrad's wrapped method reads others.
UnitSums& kept_sums(ExplainState& st, const char* method, const MethodOptions& opt, int target, size_t size) {
  std::string key = std::string(method) + " target=" + std::to_string(target);
  std::vector<std::vector<float>> images;
  for (const OptionSpec* spec : all_options()) {
    const OptionSpec& o = *spec;
    const std::string k = o.key;
    if (k == "threads" || k == "target") continue;
    key += ' ' + k + '=';
    if (o.get_image) {
      const Image* im = o.get_image(opt);
      key += im ? "image" : "none";
      images.push_back(im ? im->data : std::vector<float>{});
    } else if (o.get_text) {
      key += o.get_text(opt);
    } else if (o.get) {
      char v[32];
      std::snprintf(v, sizeof v, "%.17g", o.get(opt));
      key += v;
    }
  }
  std::vector<UnitSums>& kept = st.sampled;
  auto found = std::find_if(kept.begin(), kept.end(),
                            [&](const UnitSums& u) { return u.key == key && u.images == images && u.sums.size() == size; });
  return use_recent(kept, found, ExplainState::kSampledKept, [&] {
    UnitSums u;
    u.key = std::move(key);
    u.images = std::move(images);
    u.sums.assign(size, 0.0);
    return u;
  });
}

// Workers a batch really has (per-worker traces are allocated for each): never more than there
// are units or threads to run them, nor than kMaxWorkers (bounds the memory of the traces).
constexpr int kMaxWorkers = 8;
int worker_count(int threads, int units) { return std::max(1, std::min({usable_threads(threads), units, kMaxWorkers})); }

}  // namespace

// n-point Gauss–Legendre rule mapped to [0, 1], nodes ascending: Newton's method on P_n from
// the initial guesses cos(π(i + ¾)/(n + ½)); P_n and P_n′ by the three-term recurrence
// (k+1)P_{k+1} = (2k+1)xP_k − kP_{k−1}, P_n′ = n(xP_n − P_{n−1})/(x² − 1); weight on [−1, 1]
// 2/((1 − x²)P_n′²), halved on [0, 1].
void gauss_legendre_01(int n, std::vector<double>& nodes, std::vector<double>& weights) {
  nodes.assign(size_t(n), 0.0);
  weights.assign(size_t(n), 0.0);
  const double pi = 3.14159265358979323846;
  // P_n(x) and P_{n−1}(x) by the recurrence
  auto legendre = [n](double x, double& pn, double& pn1) {
    double p0 = 1.0, p1 = x;  // P_0, P_1
    for (int k = 1; k < n; ++k) {
      const double p2 = ((2.0 * k + 1.0) * x * p1 - k * p0) / (k + 1.0);
      p0 = p1;
      p1 = p2;
    }
    pn = p1;
    pn1 = p0;
  };
  for (int i = 0; i < (n + 1) / 2; ++i) {
    double x = std::cos(pi * (i + 0.75) / (n + 0.5));  // near the (i+1)-th largest root
    double pn = 0.0, pn1 = 0.0;
    for (int iter = 0; iter < 100; ++iter) {
      legendre(x, pn, pn1);
      const double dx = pn / (n * (x * pn - pn1) / (x * x - 1.0));
      x -= dx;
      if (std::fabs(dx) < 1e-15) break;
    }
    legendre(x, pn, pn1);
    const double dp = n * (x * pn - pn1) / (x * x - 1.0);  // P_n′ at the root
    const double w = 1.0 / ((1.0 - x * x) * dp * dp);      // 2/((1 − x²)P_n′²), halved for [0, 1]
    // the root x ≥ 0 maps to (1 + x)/2 on [0, 1], its mirror −x to (1 − x)/2
    nodes[size_t(n - 1 - i)] = 0.5 * (1.0 + x);
    nodes[size_t(i)] = 0.5 * (1.0 - x);
    weights[size_t(n - 1 - i)] = weights[size_t(i)] = w;
  }
  if (n % 2 == 1) nodes[size_t(n / 2)] = 0.5;  // the middle root is exactly 0
}

// Simonyan, Vedaldi & Zisserman 2014: max_c |∂y_t/∂x_c|.
void saliency(Explanation& out, const Model& m, ExplainState& st, const MethodOptions&) {
  const Config& c = m.config;
  const Image& g = target_grads(m, st, out.target).input;  // (C, H, W)
  MatD px = MatD::Zero(c.image_h, c.image_w);                // (H, W)
  for (int ch = 0; ch < c.channels; ++ch)
    for (int y = 0; y < c.image_h; ++y)
      for (int x = 0; x < c.image_w; ++x) px(y, x) = std::max(px(y, x), std::fabs(double(g.at(ch, y, x))));
  set_maps(out, px, c);
}

// Shrikumar et al. 2016: Σ_c x_c·∂y_t/∂x_c.
void grad_x_input(Explanation& out, const Model& m, ExplainState& st, const MethodOptions&) {
  const Config& c = m.config;
  const Image& g = target_grads(m, st, out.target).input;  // (C, H, W)
  const Image& in = st.trace.input;                          // (C, H, W)
  MatD px = MatD::Zero(c.image_h, c.image_w);                // (H, W)
  for (int ch = 0; ch < c.channels; ++ch)
    for (int y = 0; y < c.image_h; ++y)
      for (int x = 0; x < c.image_w; ++x) px(y, x) += double(in.at(ch, y, x)) * double(g.at(ch, y, x));
  set_maps(out, px, c);
}

// Sundararajan, Taly & Yan 2017: attr = (x − x') ⊙ Σ_k w_k ∇y_t(x' + α_k(x − x')), the quadrature
// of ∫₀¹ ∇y_t(x' + α(x − x')) dα; completeness: Σ attr ≈ y_t(x) − y_t(x').
void integrated_gradients(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Config& c = m.config;
  const int n = opt.steps;  // resolved by explain() from the method's option table
  const Image& x = st.trace.input;  // (C, H, W)
  Image base(c.channels, c.image_h, c.image_w);  // x' (C, H, W), normalised
  if (opt.baseline) {
    base = *opt.baseline;
  } else {
    for (int ch = 0; ch < c.channels; ++ch) {  // black: 0 before normalisation
      const float v = float((0.0 - double(c.mean[size_t(ch)])) / double(c.std[size_t(ch)]));
      std::fill(base.data.begin() + ptrdiff_t(size_t(ch) * c.image_h * c.image_w),
                base.data.begin() + ptrdiff_t(size_t(ch + 1) * c.image_h * c.image_w), v);
    }
  }

  std::vector<double> alpha(static_cast<size_t>(n)), weight(static_cast<size_t>(n), 1.0 / n);
  switch (opt.quadrature) {
    case Quadrature::left:
      for (int k = 0; k < n; ++k) alpha[size_t(k)] = double(k) / n;
      break;
    case Quadrature::right:
      for (int k = 0; k < n; ++k) alpha[size_t(k)] = double(k + 1) / n;
      break;
    case Quadrature::middle:
      for (int k = 0; k < n; ++k) alpha[size_t(k)] = (k + 0.5) / n;
      break;
    case Quadrature::gauss_legendre:
      gauss_legendre_01(n, alpha, weight);
      break;
  }

  const size_t N = x.data.size();
  const int workers = worker_count(opt.threads, n);
  std::vector<GradientPass> pass(static_cast<size_t>(workers));
  std::vector<Image> point(size_t(workers), Image(c.channels, c.image_h, c.image_w));  // x' + α(x − x')
  // Σ_k w_k ∇y_t(point_k), (C, H, W), over the points [0, kept.next): kept in the state, so that a
  // stopped run goes on from its next point
  UnitSums& kept = kept_sums(st, "integrated-gradients", opt, out.target, N);
  std::vector<double>& integral = kept.sums;

  ForwardOptions fo = masked(st.trace);  // the path through the same masked model
  fo.head_rows_only = true;  // only y_t and ∂y_t/∂x are read: the last block's other rows are not
  Trace at_baseline;
  vit_forward(at_baseline, m, base, fo);
  const double f_baseline = double(at_baseline.logits[out.target]);

  for_each_unit(
      kept.next, n, workers, opt.progress, "integrated-gradients",
      [&](int k, int t) {
        Image& z = point[size_t(t)];
        const double a = alpha[size_t(k)];
        for (size_t i = 0; i < N; ++i) z.data[i] = float(base.data[i] + a * (double(x.data[i]) - base.data[i]));
        pass[size_t(t)].run(m, z, out.target, fo);
      },
      [&](int k, int t) {
        const double w = weight[size_t(k)];
        const std::vector<float>& g = pass[size_t(t)].grads.input.data;
        for (size_t i = 0; i < N; ++i) integral[i] += w * double(g[i]);
        kept.next = k + 1;
      });

  MatD px = MatD::Zero(c.image_h, c.image_w);  // (H, W) Σ_c attr
  const size_t plane = size_t(c.image_h) * c.image_w;
  double total = 0.0;
  for (size_t i = 0; i < N; ++i) {
    const double attr = (double(x.data[i]) - base.data[i]) * integral[i];
    px.data()[i % plane] += attr;
    total += attr;
  }
  set_maps(out, px, c);
  out.has_completeness = true;
  out.completeness.attribution_sum = total;
  out.completeness.f_input = double(st.trace.logits[out.target]);
  out.completeness.f_baseline = f_baseline;
}

// Smilkov et al. 2017: the mean of the wrapped method's maps over x + ε_s, ε ~ N(0, σ²) i.i.d.,
// σ = noise·(max x − min x). ε for sample s, element i (flat CHW), from counter
// c = 2(s·N + i): Box–Muller on u1, u2 = ((splitmix64(seed + c (+1)) >> 11) + ½)·2⁻⁵³.
void smoothgrad(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Config& c = m.config;
  const int samples = opt.samples;  // resolved by explain() from the method's option table
  const Image& x = st.trace.input;  // (C, H, W)
  const size_t N = x.data.size();
  const auto range = std::minmax_element(x.data.begin(), x.data.end());
  const double sigma = opt.noise * (double(*range.second) - double(*range.first));
  const double two_pi = 6.28318530717958647692, two_m53 = 1.0 / 9007199254740992.0;

  const int workers = worker_count(opt.threads, samples);
  std::vector<Explanation> part(static_cast<size_t>(workers));
  std::vector<ExplainState> state(static_cast<size_t>(workers));  // per worker, its buffers reused
  // The wrapped method's options, copied here on the calling thread: opt.progress may hold a JS
  // function (wasm), whose handle must not be copied on a worker thread.
  MethodOptions base = opt;
  base.target = -1;
  base.want_intermediates = false;
  base.threads = 1;
  base.progress = nullptr;
  base.given.clear();  // smoothgrad's own keys (inner, samples...) are not the inner method's
  // The wrapped method: a name, or a spec with its own options ("rollout:head-fusion=max"), which
  // are set on top of the ones smoothgrad passes on (steps, quadrature, baseline).
  const std::string inner_method = apply_method_spec(opt.inner, base, &c).name;
  const MethodInfo* inner_info = find_method(inner_method);
  const bool gradients_only = inner_info && inner_info->input_gradient_only;
  // Σ_s of the maps (H, W) and (H/p, W/p) and of the completeness terms, with whether any copy
  // had them, over the copies [0, kept.next): kept in the state, so that a stopped run goes on
  // from its next copy.
  const Eigen::Index HW = Eigen::Index(c.image_h) * c.image_w, G = Eigen::Index(c.grid_h()) * c.grid_w();
  UnitSums& kept = kept_sums(st, "smoothgrad", opt, out.target, size_t(HW + G + 4));
  Eigen::Map<MatD> pixels(kept.sums.data(), c.image_h, c.image_w), tokens(kept.sums.data() + HW, c.grid_h(), c.grid_w());
  double* const terms = kept.sums.data() + HW + G;  // attribution_sum, f_input, f_baseline; any (0/1)

  for_each_unit(
      kept.next, samples, workers, opt.progress, "smoothgrad",
      [&](int s, int t) {
        Image noisy = x;
        const uint64_t first = 2 * (uint64_t(s) * uint64_t(N));
        for (size_t i = 0; i < N; ++i) {
          const uint64_t ctr = opt.seed + first + 2 * uint64_t(i);
          const double u1 = (double(splitmix64(ctr) >> 11) + 0.5) * two_m53;
          const double u2 = (double(splitmix64(ctr + 1) >> 11) + 0.5) * two_m53;
          noisy.data[i] = float(double(x.data[i]) + sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
        }
        MethodOptions inner = base;
        inner.target = out.target;  // the outer target, not each noisy copy's arg-max
        if (workers == 1 && opt.progress) {
          // the inner method's own progress, mapped into this sample's share of the outer bar
          inner.progress = [&opt, s, samples](double f) { return opt.progress((s + std::min(f, 1.0)) / samples); };
        }
        ExplainState& copy = state[size_t(t)];  // the noisy copy through the same masked model
        copy.set_input(m, noisy, st.trace.head_mask, gradients_only);
        part[size_t(t)] = explain(m, copy, inner_method, inner);
      },
      [&](int s, int t) {
        const Explanation& e = part[size_t(t)];
        pixels += e.pixel_map.cast<double>();
        tokens += e.token_map.cast<double>();
        if (e.has_completeness) {
          terms[3] = 1;
          terms[0] += e.completeness.attribution_sum;
          terms[1] += e.completeness.f_input;
          terms[2] += e.completeness.f_baseline;
        }
        kept.next = s + 1;
      });

  out.pixel_map = (pixels / samples).cast<float>();
  out.token_map = (tokens / samples).cast<float>();
  if (terms[3] != 0) {
    out.has_completeness = true;
    out.completeness.attribution_sum = terms[0] / samples;
    out.completeness.f_input = terms[1] / samples;
    out.completeness.f_baseline = terms[2] / samples;
  }
}

}  // namespace vitlens::detail
