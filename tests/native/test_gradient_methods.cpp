// test_gradient_methods.cpp — saliency, grad-x-input, integrated-gradients and smoothgrad against
// the float64 reference (tests/reference/gradient_ref.py, fixtures in tests/fixtures/gradient/),
// the Gauss–Legendre rule, the IG completeness gap as the steps grow, thread-count independence,
// progress reports and cancellation.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "json_fixture.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/safetensors.h"

namespace vitlens::detail {
// methods_gradient.cpp: the n-point Gauss–Legendre rule on [0, 1], nodes ascending.
void gauss_legendre_01(int n, std::vector<double>& nodes, std::vector<double>& weights);
}  // namespace vitlens::detail

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::read_json;
using vitlens::test::source_path;

namespace {

constexpr double kMapTol = 1e-4;  // max |ours − ref| / max |ref|, float32 engine vs float64 reference

Image image_from_npy(const std::string& path) {
  const NpyArray a = read_npy(path);
  REQUIRE(a.shape.size() == 3);
  Image x(int(a.shape[0]), int(a.shape[1]), int(a.shape[2]));
  for (size_t i = 0; i < a.data.size(); ++i) x.data[i] = float(a.data[i]);
  return x;
}

struct GradCase {
  std::string name, dir;
  Model model;
  Image input, baseline;
  nlohmann::json meta, index;
};

GradCase load_grad_case(const std::string& name) {
  GradCase c;
  c.name = name;
  c.dir = source_path("tests/fixtures/gradient/" + name + "/");
  c.meta = read_json(c.dir + "meta.json");
  c.index = read_json(c.dir + "index.json");
  c.model = test::engine_fixture_model(name);
  c.input = test::engine_fixture_input(name);
  c.baseline = image_from_npy(c.dir + "baseline.npy");
  return c;
}

Quadrature quadrature_named(const std::string& q) {
  if (q == "left") return Quadrature::left;
  if (q == "right") return Quadrature::right;
  if (q == "middle") return Quadrature::middle;
  REQUIRE(q == "gauss-legendre");
  return Quadrature::gauss_legendre;
}

// The long methods' runs the progress and resumption tests go through: the method, the wrapped
// method (smoothgrad) and the threads; each with steps 6, samples 4 (long_options).
struct LongCase {
  std::string method, inner;
  int threads;
};
const LongCase long_cases[] = {{"integrated-gradients", "", 1}, {"integrated-gradients", "", 2},
                               {"smoothgrad", "saliency", 1},   {"smoothgrad", "saliency", 2},
                               {"smoothgrad", "integrated-gradients", 1}, {"smoothgrad", "integrated-gradients", 2}};

MethodOptions long_options(const LongCase& k) {
  MethodOptions opt;
  opt.steps = 6;
  opt.samples = 4;
  opt.seed = 3;
  opt.threads = k.threads;
  if (!k.inner.empty()) opt.inner = k.inner;
  return opt;
}

MethodOptions options_from_json(const nlohmann::json& o, const GradCase& c) {
  MethodOptions opt;
  opt.target = c.meta["target"];
  if (o.contains("steps")) opt.steps = o["steps"];
  if (o.contains("quadrature")) opt.quadrature = quadrature_named(o["quadrature"]);
  if (o.contains("baseline") && o["baseline"] == "image") opt.baseline = &c.baseline;
  if (o.contains("inner")) opt.inner = o["inner"];
  if (o.contains("samples")) opt.samples = o["samples"];
  if (o.contains("noise")) opt.noise = o["noise"];
  if (o.contains("seed")) opt.seed = o["seed"];
  return opt;
}

// Σ of an (H, W) reference map over p×p patches, row-major (H/p, W/p).
std::vector<double> patch_sums(const NpyArray& px, int p) {
  const int h = int(px.shape[0]), w = int(px.shape[1]);
  std::vector<double> out(size_t(h / p) * size_t(w / p), 0.0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) out[size_t(y / p) * size_t(w / p) + size_t(x / p)] += px.data[size_t(y) * w + x];
  return out;
}

bool close_rel(double a, double b, double tol) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); }

bool same_bits(const Mat& a, const Mat& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::equal(a.data(), a.data() + a.size(), b.data());
}

}  // namespace

TEST_CASE("input-gradient methods match the float64 reference (both engine shapes)", "[gradient]") {
  for (const char* name : {"nonsquare", "gray"}) {
    GradCase c = load_grad_case(name);
    int variants = 0, ig = 0;
    for (const nlohmann::json& e : c.index) {
      const std::string variant = e["variant"];
      INFO(c.name << " " << variant);
      const Explanation ex = explain(c.model, c.input, e["method"].get<std::string>(), options_from_json(e["options"], c));
      const NpyArray ref = read_npy(c.dir + e["file"].get<std::string>());
      REQUIRE(ex.pixel_map.rows() == int(ref.shape[0]));
      REQUIRE(ex.pixel_map.cols() == int(ref.shape[1]));
      CHECK(ex.target == c.meta["target"].get<int>());
      CHECK(rel_max_error(ex.pixel_map.data(), ref.data) <= kMapTol);
      // the token map is the pixel map summed over each patch
      REQUIRE(ex.token_map.rows() == c.model.config.grid_h());
      REQUIRE(ex.token_map.cols() == c.model.config.grid_w());
      CHECK(rel_max_error(ex.token_map.data(), patch_sums(ref, c.model.config.patch)) <= kMapTol);
      CHECK(ex.has_completeness == e.contains("completeness"));
      if (e.contains("completeness")) {
        const nlohmann::json& r = e["completeness"];
        CHECK(close_rel(ex.completeness.attribution_sum, r["attribution_sum"], kMapTol));
        CHECK(close_rel(ex.completeness.f_input, r["f_input"], kMapTol));
        CHECK(close_rel(ex.completeness.f_baseline, r["f_baseline"], kMapTol));
        CHECK(close_rel(ex.completeness.gap(), r["gap"], kMapTol));
        ++ig;
      }
      ++variants;
    }
    CHECK(variants == 12);  // saliency, grad-x-input, 4 quadratures × 2 baselines, 2 smoothgrads
    CHECK(ig == 9);
  }
}

TEST_CASE("saliency and grad-x-input: the engine fixtures' input gradient", "[gradient]") {
  // A second, independent check on the same float64 gradient (tests/fixtures/engine/*/grad_input.npy).
  GradCase c = load_grad_case("nonsquare");
  const NpyArray g = read_npy(source_path("tests/fixtures/engine/nonsquare/grad_input.npy"));
  const Config& cfg = c.model.config;
  const size_t plane = size_t(cfg.image_h) * cfg.image_w;
  std::vector<double> sal(plane, 0.0), gxi(plane, 0.0);
  for (size_t i = 0; i < g.data.size(); ++i) {
    sal[i % plane] = std::max(sal[i % plane], std::fabs(g.data[i]));
    gxi[i % plane] += double(c.input.data[i]) * g.data[i];
  }
  CHECK(rel_max_error(explain(c.model, c.input, "saliency").pixel_map.data(), sal) <= kMapTol);
  CHECK(rel_max_error(explain(c.model, c.input, "grad-x-input").pixel_map.data(), gxi) <= kMapTol);
}

TEST_CASE("Gauss–Legendre nodes and weights on [0, 1]", "[gradient]") {
  std::vector<double> x, w;
  SECTION("known closed forms") {
    detail::gauss_legendre_01(1, x, w);
    CHECK(x[0] == Approx(0.5).margin(1e-15));
    CHECK(w[0] == Approx(1.0).margin(1e-15));
    detail::gauss_legendre_01(2, x, w);
    const double r2 = 0.5 / std::sqrt(3.0);  // roots ±1/√3 on [−1, 1]
    CHECK(x[0] == Approx(0.5 - r2).margin(1e-15));
    CHECK(x[1] == Approx(0.5 + r2).margin(1e-15));
    CHECK(w[0] == Approx(0.5).margin(1e-15));
    CHECK(w[1] == Approx(0.5).margin(1e-15));
    detail::gauss_legendre_01(3, x, w);
    const double r3 = 0.5 * std::sqrt(0.6);  // roots 0, ±√(3/5); weights 8/9, 5/9 on [−1, 1]
    CHECK(x[0] == Approx(0.5 - r3).margin(1e-15));
    CHECK(x[1] == Approx(0.5).margin(1e-15));
    CHECK(x[2] == Approx(0.5 + r3).margin(1e-15));
    CHECK(w[0] == Approx(5.0 / 18.0).margin(1e-15));
    CHECK(w[1] == Approx(8.0 / 18.0).margin(1e-15));
    CHECK(w[2] == Approx(5.0 / 18.0).margin(1e-15));
  }
  SECTION("numpy's leggauss (tests/fixtures/gradient/gauss_legendre.json)") {
    const nlohmann::json rules = read_json(source_path("tests/fixtures/gradient/gauss_legendre.json"))["rules"];
    REQUIRE(rules.size() >= 8);
    for (const auto& kv : rules.items()) {
      const int n = std::stoi(kv.key());
      INFO("n = " << n);
      detail::gauss_legendre_01(n, x, w);
      const std::vector<double> rx = kv.value()["nodes"], rw = kv.value()["weights"];
      REQUIRE(x.size() == rx.size());
      for (size_t i = 0; i < x.size(); ++i) {
        CHECK(std::fabs(x[i] - rx[i]) <= 1e-14);
        CHECK(std::fabs(w[i] - rw[i]) <= 1e-14);
      }
    }
  }
  SECTION("exact for polynomials of degree 2n − 1, up to large n") {
    for (int n : {7, 100, 1000, 4096}) {
      INFO("n = " << n);
      detail::gauss_legendre_01(n, x, w);
      for (int i = 1; i < n; ++i) REQUIRE(x[size_t(i)] > x[size_t(i - 1)]);
      REQUIRE(x.front() > 0.0);
      REQUIRE(x.back() < 1.0);
      for (int deg : {0, 1, 5, std::min(2 * n - 1, 40)}) {
        double s = 0.0;  // ∫₀¹ t^deg dt = 1/(deg + 1)
        for (size_t i = 0; i < x.size(); ++i) s += w[i] * std::pow(x[i], deg);
        CHECK(s == Approx(1.0 / (deg + 1)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("the IG completeness gap shrinks as the steps grow", "[gradient]") {
  GradCase c = load_grad_case("nonsquare");
  auto gap = [&](Quadrature q, int steps) {
    MethodOptions opt;
    opt.quadrature = q;
    opt.steps = steps;
    const Explanation ex = explain(c.model, c.input, "integrated-gradients", opt);
    REQUIRE(ex.has_completeness);
    return std::fabs(ex.completeness.gap());
  };
  const double l4 = gap(Quadrature::left, 4), l16 = gap(Quadrature::left, 16), l64 = gap(Quadrature::left, 64);
  const double g4 = gap(Quadrature::gauss_legendre, 4), g16 = gap(Quadrature::gauss_legendre, 16),
               g64 = gap(Quadrature::gauss_legendre, 64);
  INFO("left " << l4 << " " << l16 << " " << l64 << "; gauss-legendre " << g4 << " " << g16 << " " << g64);
  // left Riemann: error ~ 1/n, so roughly ÷4 per ×4 steps
  CHECK(l16 < 0.5 * l4);
  CHECK(l64 < 0.5 * l16);
  // Gauss–Legendre converges much faster: already below the left rule with 16× fewer steps
  CHECK(g16 <= g4);
  CHECK(g64 <= g16 + 1e-5);  // at 16 steps it may already sit at the float32 noise floor
  CHECK(g4 < l4);
  CHECK(g16 < l64);
  CHECK(g64 < 1e-3);
}

TEST_CASE("IG and smoothgrad do not depend on the thread count", "[gradient]") {
  GradCase c = load_grad_case("gray");
  for (const std::string method : {"integrated-gradients", "smoothgrad"}) {
    INFO(method);
    MethodOptions opt;
    opt.steps = 7;
    opt.samples = 5;
    opt.seed = 3;
    opt.inner = "integrated-gradients";
    opt.quadrature = Quadrature::middle;
    opt.threads = 1;
    const Explanation one = explain(c.model, c.input, method, opt);
    opt.threads = 2;
    const Explanation two = explain(c.model, c.input, method, opt);
    opt.threads = 3;
    const Explanation three = explain(c.model, c.input, method, opt);
    CHECK(same_bits(one.pixel_map, two.pixel_map));
    CHECK(same_bits(one.token_map, two.token_map));
    CHECK(same_bits(one.pixel_map, three.pixel_map));
    CHECK(one.completeness.attribution_sum == two.completeness.attribution_sum);
    CHECK(one.completeness.f_input == three.completeness.f_input);
  }
}

TEST_CASE("smoothgrad: wraps token methods, averages, and is reproducible from the seed", "[gradient]") {
  GradCase c = load_grad_case("nonsquare");
  MethodOptions opt;
  opt.inner = "rollout";
  opt.samples = 3;
  opt.noise = 0.0;  // no noise: every copy is the input itself
  const Explanation plain = explain(c.model, c.input, "rollout");
  const Explanation smooth = explain(c.model, c.input, "smoothgrad", opt);
  CHECK(rel_max_error(smooth.token_map.data(), std::vector<double>(plain.token_map.data(),
                                                                    plain.token_map.data() + plain.token_map.size())) <= 1e-6);
  CHECK(smooth.pixel_map.rows() == c.model.config.image_h);
  CHECK_FALSE(smooth.has_completeness);
  opt.inner = "saliency";
  opt.noise = 0.2;
  opt.seed = 5;
  const Explanation a = explain(c.model, c.input, "smoothgrad", opt), b = explain(c.model, c.input, "smoothgrad", opt);
  CHECK(same_bits(a.pixel_map, b.pixel_map));
  opt.seed = 6;
  CHECK_FALSE(same_bits(a.pixel_map, explain(c.model, c.input, "smoothgrad", opt).pixel_map));
  opt.inner = "smoothgrad";
  CHECK_THROWS_AS(explain(c.model, c.input, "smoothgrad", opt), Error);
}

TEST_CASE("long methods report monotone progress and stop when asked", "[gradient]") {
  GradCase c = load_grad_case("gray");
  for (const LongCase& k : long_cases) {
    INFO(k.method << " " << k.inner << " threads " << k.threads);
    MethodOptions opt = long_options(k);
    std::vector<double> seen;
    opt.progress = [&seen](double f) {
      seen.push_back(f);
      return true;
    };
    const Explanation full = explain(c.model, c.input, k.method, opt);
    REQUIRE(seen.size() >= 4);
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
    CHECK(seen.front() > 0.0);
    CHECK(seen.back() == 1.0);
    // nested IG inside smoothgrad on one thread: the inner steps show up between the samples
    if (k.inner == "integrated-gradients" && k.threads == 1) CHECK(seen.size() == size_t(4 * 6 + 4));

    // cancel at the third report: the method throws cancelled and reports no further progress
    int calls = 0;
    opt.progress = [&calls](double) { return ++calls < 3; };
    try {
      explain(c.model, c.input, k.method, opt);
      FAIL("no cancellation");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::cancelled);
      CHECK(std::string(e.what()).find("cancelled") != std::string::npos);
    }
    CHECK(calls == 3);
    // and the model still explains afterwards
    opt.progress = nullptr;
    CHECK(same_bits(explain(c.model, c.input, k.method, opt).pixel_map, full.pixel_map));
  }
}

// A stopped run keeps its sum in the input's state (ExplainState::sampled) and goes on from its next
// unit when asked again with the same options: the same maps and completeness, bit for bit, as one
// uninterrupted run, on any thread count; complete, it computes nothing; other options start anew
// beside it (the state keeps two option sets), a third replaces the least recently used, and a new
// input forgets them.
TEST_CASE("IG and smoothgrad: a stopped run goes on from its next unit", "[gradient]") {
  GradCase c = load_grad_case("gray");
  for (const LongCase& k : long_cases) {
    INFO(k.method << " " << k.inner << " threads " << k.threads);
    const MethodOptions opt = long_options(k);
    const int units = k.method == "smoothgrad" ? opt.samples : opt.steps;
    const Explanation full = explain(c.model, c.input, k.method, opt);
    ExplainState st;
    st.set_input(c.model, c.input);
    int calls = 0;
    MethodOptions stop = opt;
    stop.progress = [&calls](double) { return ++calls < 3; };
    CHECK_THROWS_AS(explain(c.model, st, k.method, stop), Error);
    REQUIRE(st.sampled.size() == 1);
    const int next = st.sampled.back().next;
    CHECK(next < units);
    if (k.inner.empty()) CHECK(next == 3);  // the third unit's report stopped it, after its sum
    std::vector<double> seen;
    MethodOptions go = opt;
    go.progress = [&seen](double f) {
      seen.push_back(f);
      return true;
    };
    const auto same = [&](const Explanation& e) {
      CHECK(same_bits(e.pixel_map, full.pixel_map));
      CHECK(same_bits(e.token_map, full.token_map));
      CHECK(e.has_completeness == full.has_completeness);
      CHECK(e.completeness.attribution_sum == full.completeness.attribution_sum);
      CHECK(e.completeness.f_baseline == full.completeness.f_baseline);
    };
    same(explain(c.model, st, k.method, go));
    REQUIRE(!seen.empty());
    // from its next unit (a wrapped IG reports its own steps when one worker runs the copies)
    if (k.inner != "integrated-gradients") CHECK(seen.front() == double(next + 1) / units);
    CHECK(st.sampled.back().next == units);
    seen.clear();
    same(explain(c.model, st, k.method, go));  // complete: nothing computed
    CHECK(seen.empty());
    MethodOptions other = go;
    other.seed = 4;
    other.quadrature = Quadrature::right;
    explain(c.model, st, k.method, other);  // other options: computed anew, beside the first
    CHECK(seen.size() >= size_t(units));
    seen.clear();
    same(explain(c.model, st, k.method, go));  // the first options' sum is still kept
    CHECK(seen.empty());
    MethodOptions third = other;
    third.seed = 5;
    explain(c.model, st, k.method, third);  // replaces the least recently used: `other`'s
    CHECK(st.sampled.size() == ExplainState::kSampledKept);
    seen.clear();
    same(explain(c.model, st, k.method, go));
    CHECK(seen.empty());
    st.set_input(c.model, c.input);
    CHECK(st.sampled.empty());
  }
}

