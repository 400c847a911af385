// eval.cpp — the faithfulness benchmark: per-scene protocol, the chunked two-core driver, the
// per-scene records (JSON lines) and their reduction. The protocol is in eval.h; the reports
// (markdown, CSV, SVG) are in eval_report.cpp.
#include "vitlens/eval/eval.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/methods/methods.h"
#include "vitlens/metrics/perturbation.h"
#include "vitlens/data/scenes.h"
#include "vitlens/model/vit.h"

namespace vitlens {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kRandomSalt = 0x5EED0FBA5E11E5ull;  // the `random` baseline's stream

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}


void check_model(const Model& m, const SceneOptions& so, const char* what) {
  const Config& c = m.config;
  if (c.classes != fashion_classes || c.channels != 3 || c.image_h != so.size || c.image_w != so.size)
    throw Error(ErrorCode::bad_argument, std::string(what) + " must take 3 × " + std::to_string(so.size) + " × " +
                                             std::to_string(so.size) + " scenes and have " +
                                             std::to_string(fashion_classes) + " classes (a scene model)");
}

// Sets NaN / ±Inf entries to 0; returns whether there were any.
bool sanitise(Mat& map) {
  bool bad = false;
  for (Eigen::Index i = 0; i < map.size(); ++i)
    if (!std::isfinite(map.data()[i])) {
      map.data()[i] = 0.0f;
      bad = true;
    }
  return bad;
}

// One worker's reusable state.
struct Worker {
  ExplainState st;   // the evaluated model on the clean scene
  ExplainState cmp;  // the compare model on the clean scene
  PerturbationWork pw;  // forward passes of perturbed scenes
  PerturbationCurve curve;
};

// The pixel map (H, W) of a registry method for `target` on the input `st` holds.
Mat method_map(const Model& m, ExplainState& st, const std::string& method, int target, bool& nonfinite) {
  MethodOptions o;
  o.target = target;
  Explanation e = explain(m, st, method, o);
  const Config& c = m.config;
  Mat px;
  if (e.pixel_map.rows() == c.image_h && e.pixel_map.cols() == c.image_w)
    px = std::move(e.pixel_map);
  else if (e.token_map.size() > 0)
    px = upsample_bilinear(e.token_map, c.image_h, c.image_w);
  else
    throw Error(ErrorCode::bad_argument, "method '" + method + "' returned no map to evaluate");
  nonfinite = sanitise(px) || nonfinite;
  return px;
}

// `random`: u = (splitmix64(key + i) >> 40)·2⁻²⁴ per pixel i, key from (random seed, scene, class).
Mat random_map(uint64_t random_seed, int scene, int cls, int h, int w) {
  const uint64_t key = splitmix64(splitmix64(random_seed ^ kRandomSalt) + (uint64_t(scene) << 8) + uint64_t(cls));
  Mat r(h, w);  // (h, w)
  for (Eigen::Index i = 0; i < r.size(); ++i)
    r.data()[i] = float(double(splitmix64(key + uint64_t(i)) >> 40) * (1.0 / 16777216.0));
  return r;
}

Mat mask_map(const std::vector<uint8_t>& mask, int h, int w) {
  Mat r(h, w);  // (h, w)
  for (Eigen::Index i = 0; i < r.size(); ++i) r.data()[i] = mask[size_t(i)] ? 1.0f : 0.0f;
  return r;
}

// The map of `method` for class `cls`, whose object is `item` (oracle) on scene `scene`.
Mat any_map(const Model& m, ExplainState& st, const EvalOptions& opt, const std::string& method, int scene,
            const SceneItem& item, int cls, bool& nonfinite) {
  const Config& c = m.config;
  if (method == eval_random) return random_map(opt.random_seed, scene, cls, c.image_h, c.image_w);
  if (method == eval_oracle) return mask_map(item.mask, c.image_h, c.image_w);
  return method_map(m, st, method, cls, nonfinite);
}

bool same_map(const Mat& a, const Mat& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && std::equal(a.data(), a.data() + a.size(), b.data());
}

// top[d][s]: the arg-max class after removing perturbation_count(n, s + 1) pixels in direction d
// (the per-image test of perturbation.h, which the wasm API runs too).
void perturbation_tops(std::array<std::array<int, perturbation_steps - 1>, 2>& top, const Model& m, Worker& w,
                       const Image& clean, const Mat& map) {
  for (int d = 0; d < 2; ++d) {
    perturbation_curve(w.curve, w.pw, m, clean, w.st.trace.logits, map.data(), int(map.size()), d == 0);
    for (int s = 1; s < perturbation_steps; ++s) top[size_t(d)][size_t(s - 1)] = arg_max_class(w.curve.logits[size_t(s)]);
  }
}

// One scene as the workers see it: the scene, its normalised input and the clean prediction.
struct SceneInput {
  int index = 0;
  Scene scene;
  Image x;          // (3, H, W)
  int pred = 0;     // arg-max class of the evaluated model
  double forward_ms = 0;
};

// The record of `method` on a scene whose forward passes w.st and w.cmp hold.
EvalRecord method_record(Worker& w, const Model& m, const Model* compare, const EvalOptions& opt,
                         const SceneInput& in, const std::string& method) {
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  const Scene& sc = in.scene;
  const int items = int(sc.items.size()), pred = in.pred;
  EvalRecord r;
  r.scene = in.index;
  r.method = method;
  r.items = items;
  for (int k = 0; k < items && k < 2; ++k) r.classes[size_t(k)] = sc.items[size_t(k)].cls;
  r.pred = pred;
  r.forward_ms = in.forward_ms;
  const bool baseline = is_baseline(method);

  Mat pred_map;  // the predicted-class map: timed, and compared across models
  if (!baseline) {
    w.st.clear_derived();
    const auto t0 = Clock::now();
    pred_map = method_map(m, w.st, method, pred, r.nonfinite);
    r.ms = ms_since(t0);
    if (compare) {
      const Mat other = method_map(*compare, w.cmp, method, pred, r.nonfinite);
      r.rho = spearman(pred_map.data(), other.data(), hw);
    }
  }

  if (items == 1) {
    const SceneItem& item = sc.items[0];
    if (baseline) pred_map = any_map(m, w.st, opt, method, in.index, item, pred, r.nonfinite);
    const Mat target_map =
        item.cls == pred ? pred_map : any_map(m, w.st, opt, method, in.index, item, item.cls, r.nonfinite);
    perturbation_tops(r.top[0], m, w, in.x, pred_map);
    if (same_map(pred_map, target_map))
      r.top[1] = r.top[0];
    else
      perturbation_tops(r.top[1], m, w, in.x, target_map);
    r.seg = segmentation_counts(pred_map.data(), item.mask.data(), hw);
    r.seg_ap = segmentation_ap(pred_map.data(), item.mask.data(), hw);
  } else if (items == 2) {
    for (int k = 0; k < 2; ++k) {
      const SceneItem& own = sc.items[size_t(k)];
      const SceneItem& other = sc.items[size_t(1 - k)];
      const Mat mk = !baseline && own.cls == pred
                         ? pred_map
                         : any_map(m, w.st, opt, method, in.index, own, own.cls, r.nonfinite);
      r.share[size_t(k)] = class_share(mk.data(), own.mask.data(), other.mask.data(), hw);
      r.pointing[size_t(k)] = pointing_game(mk.data(), own.mask.data(), hw);
    }
  }
  return r;
}

// The records of `scene` for `methods`, in that order.
std::vector<EvalRecord> scene_records(Worker& w, const Model& m, const Model* compare, const FashionMnist& test,
                                      const EvalOptions& opt, int scene, const std::vector<std::string>& methods) {
  SceneInput in;
  in.index = scene;
  in.scene = make_scene(test, opt.scenes, opt.seed, uint64_t(scene));
  in.x = scene_input(in.scene.pixels, m.config);
  const auto t0 = Clock::now();
  w.st.set_input(m, in.x);
  in.forward_ms = ms_since(t0);
  if (compare) w.cmp.set_input(*compare, in.x);
  in.pred = arg_max_class(w.st.trace.logits);
  std::vector<EvalRecord> out;
  for (const std::string& method : methods) {
    try {
      out.push_back(method_record(w, m, compare, opt, in, method));
    } catch (const Error& e) {
      throw Error(e.code(), "method '" + method + "' on scene " + std::to_string(scene) + ": " + e.what());
    }
  }
  return out;
}

void check_options(const Model& m, const Model* compare, const EvalOptions& opt) {
  validate_scene_options(opt.scenes);
  check_model(m, opt.scenes, "the model");
  if (compare) {
    check_model(*compare, opt.scenes, "the compare model");
    const Config &a = m.config, &b = compare->config;
    if (a.patch != b.patch || a.dim != b.dim || a.depth != b.depth || a.heads != b.heads || a.mlp_dim != b.mlp_dim)
      throw Error(ErrorCode::bad_argument, "the compare model has another shape than the model: give the same "
                                           "weights in another storage (e.g. the -f32 file of an int8 model)");
  }
  if (opt.n < 1) throw Error(ErrorCode::bad_argument, "the benchmark needs at least one scene");
  if (opt.methods.empty()) throw Error(ErrorCode::bad_argument, "no method to evaluate");
  for (const std::string& name : opt.methods)
    if (!is_baseline(name) && !find_method(name))
      throw Error(ErrorCode::bad_argument, "unknown method '" + name + "' (see vitlens explain --list)");
}

double median(std::vector<double> v) {
  if (v.empty()) return EvalRecord::none;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

std::vector<std::string> eval_slow_methods() {
  std::vector<std::string> names;
  for (const MethodInfo& info : method_registry())
    if (info.long_running) names.push_back(info.name);
  return names;
}

std::vector<std::string> eval_resolve_methods(const std::string& spec, bool include_slow) {
  std::vector<std::string> out;
  if (spec == "all") {
    for (const MethodInfo& info : method_registry())
      if (include_slow || !info.long_running) out.push_back(info.name);
    out.push_back(eval_random);
    out.push_back(eval_oracle);
    return out;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string name = spec.substr(start, comma - start);
    if (name.empty()) throw Error(ErrorCode::bad_argument, "empty method name in '" + spec + "'");
    if (!is_baseline(name) && !find_method(name))
      throw Error(ErrorCode::bad_argument, "unknown method '" + name + "': give 'all' or a comma-separated list of "
                                           "methods (vitlens explain --list) and the baselines random, oracle");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw Error(ErrorCode::bad_argument, "method '" + name + "' is listed twice");
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

std::string eval_record_to_json(const EvalRecord& r) {
  auto round_us = [](double ms) { return std::round(ms * 1000.0) / 1000.0; };
  json j = {{"scene", r.scene}, {"method", r.method}, {"items", r.items}, {"pred", r.pred}};
  json classes = json::array();
  for (int k = 0; k < r.items && k < 2; ++k) classes.push_back(r.classes[size_t(k)]);
  j["classes"] = classes;
  if (r.items == 1) {
    j["top"] = r.top;
    j["seg"] = {{"correct", r.seg.correct}, {"pixels", r.seg.pixels}, {"inter", r.seg.inter},
                {"union", r.seg.uni}, {"ap", r.seg_ap}};
  } else if (r.items == 2) {
    j["share"] = r.share;
    j["pointing"] = r.pointing;
  }
  if (std::isfinite(r.rho)) j["rho"] = r.rho;
  if (std::isfinite(r.ms)) j["ms"] = round_us(r.ms);
  if (std::isfinite(r.forward_ms)) j["forward_ms"] = round_us(r.forward_ms);
  if (r.nonfinite) j["nonfinite"] = true;
  return j.dump();
}

EvalRecord eval_record_from_json(const std::string& line) {
  EvalRecord r;
  try {
    const json j = json::parse(line);
    r.scene = j.at("scene").get<int>();
    r.method = j.at("method").get<std::string>();
    r.items = j.at("items").get<int>();
    r.pred = j.at("pred").get<int>();
    const json& classes = j.at("classes");
    if (r.scene < 0 || r.items < 1 || r.items > 2 || int(classes.size()) != r.items)
      throw Error(ErrorCode::bad_format, "a record's scene, items or classes are out of range");
    for (int k = 0; k < r.items; ++k) r.classes[size_t(k)] = classes[size_t(k)].get<int>();
    if (r.items == 1) {
      r.top = j.at("top").get<decltype(r.top)>();
      const json& s = j.at("seg");
      r.seg.correct = s.at("correct").get<int64_t>();
      r.seg.pixels = s.at("pixels").get<int64_t>();
      r.seg.inter = s.at("inter").get<std::array<int64_t, 2>>();
      r.seg.uni = s.at("union").get<std::array<int64_t, 2>>();
      r.seg_ap = s.at("ap").get<double>();
    } else {
      r.share = j.at("share").get<std::array<double, 2>>();
      r.pointing = j.at("pointing").get<std::array<double, 2>>();
    }
    if (j.contains("rho")) r.rho = j["rho"].get<double>();
    if (j.contains("ms")) r.ms = j["ms"].get<double>();
    if (j.contains("forward_ms")) r.forward_ms = j["forward_ms"].get<double>();
    r.nonfinite = j.value("nonfinite", false);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::bad_format, std::string("not a benchmark record: ") + e.what());
  }
  return r;
}

std::vector<EvalRecord> eval_scene(const Model& m, const Model* compare, const FashionMnist& test,
                                   const EvalOptions& opt, int scene) {
  check_options(m, compare, opt);
  Worker w;
  return scene_records(w, m, compare, test, opt, scene, opt.methods);
}

void run_eval(const Model& m, const Model* compare, const FashionMnist& test, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress) {
  check_options(m, compare, opt);
  const size_t nm = opt.methods.size();
  std::vector<std::vector<char>> have(size_t(opt.n), std::vector<char>(nm, 0));  // (n, methods)
  for (const EvalRecord& r : done) {
    if (r.scene < 0 || r.scene >= opt.n) continue;
    for (size_t k = 0; k < nm; ++k)
      if (opt.methods[k] == r.method) have[size_t(r.scene)][k] = 1;
  }
  std::vector<std::pair<int, std::vector<std::string>>> todo;  // (scene, its missing methods)
  for (int i = 0; i < opt.n; ++i) {
    std::vector<std::string> missing;
    for (size_t k = 0; k < nm; ++k)
      if (!have[size_t(i)][k]) missing.push_back(opt.methods[k]);
    if (!missing.empty()) todo.emplace_back(i, std::move(missing));
  }
  const int threads = std::max(1, opt.threads), chunk = std::max(1, opt.chunk);
  std::vector<Worker> workers(static_cast<size_t>(threads));
  const auto t0 = Clock::now();
  EvalProgress p;
  p.total = int(todo.size());
  if (progress) progress(p);
  for (size_t first = 0; first < todo.size(); first += size_t(chunk)) {
    const size_t count = std::min(size_t(chunk), todo.size() - first);
    std::vector<std::vector<EvalRecord>> slots(count);
    std::atomic<size_t> next{0};
    run_workers(threads, [&](int t) {
      for (size_t j = next++; j < count; j = next++) {
        const auto& job = todo[first + j];
        slots[j] = scene_records(workers[size_t(t)], m, compare, test, opt, job.first, job.second);
      }
    });
    std::vector<EvalRecord> batch;
    for (std::vector<EvalRecord>& s : slots)
      for (EvalRecord& r : s) batch.push_back(std::move(r));
    sink(batch);
    p.done += int(count);
    p.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    p.eta_s = p.elapsed_s / p.done * (p.total - p.done);
    if (progress) progress(p);
  }
}

EvalSummary summarise_eval(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods, int n) {
  if (methods.empty()) throw Error(ErrorCode::bad_argument, "no method to summarise");
  std::map<std::pair<int, std::string>, const EvalRecord*> index;
  for (const EvalRecord& r : records)
    if (r.scene >= 0 && r.scene < n) index.emplace(std::make_pair(r.scene, r.method), &r);
  EvalSummary s;
  s.n = n;
  std::vector<double> forward;
  for (size_t k = 0; k < methods.size(); ++k) {
    EvalMethodSummary ms;
    ms.method = methods[k];
    double ap_sum = 0, share_sum = 0, pointing_sum = 0, rho_sum = 0;
    std::vector<double> times;
    int single = 0, two = 0;
    for (int i = 0; i < n; ++i) {
      const auto it = index.find({i, methods[k]});
      if (it == index.end())
        throw Error(ErrorCode::bad_argument, "no result for scene " + std::to_string(i) + " and method '" +
                                                 methods[k] + "': run the benchmark to complete it");
      const EvalRecord& r = *it->second;
      if (k == 0 && std::isfinite(r.forward_ms)) forward.push_back(r.forward_ms);
      ms.nonfinite += r.nonfinite;
      if (std::isfinite(r.rho)) {
        rho_sum += r.rho;
        ms.rho_scenes++;
      }
      if (std::isfinite(r.ms)) times.push_back(r.ms);
      if (r.items == 1) {
        ++single;
        const int gt = r.classes[0];
        for (size_t c = 0; c < 2; ++c)
          for (size_t d = 0; d < 2; ++d) {
            ms.acc[c][d][0] += r.pred == gt;
            for (size_t st = 1; st < size_t(perturbation_steps); ++st) ms.acc[c][d][st] += r.top[c][d][st - 1] == gt;
          }
        ms.seg.add(r.seg);
        ap_sum += r.seg_ap;
      } else if (r.items == 2) {
        ++two;
        share_sum += r.share[0] + r.share[1];
        pointing_sum += r.pointing[0] + r.pointing[1];
      }
    }
    ms.perturbation_scenes = ms.segmentation_scenes = single;
    ms.class_maps = 2 * two;
    for (size_t c = 0; c < 2; ++c)
      for (size_t d = 0; d < 2; ++d) {
        for (double& a : ms.acc[c][d]) a = single ? a / single : 0.0;
        ms.auc[c][d] = perturbation_auc(ms.acc[c][d]);
      }
    ms.pixel_acc = ms.seg.pixel_accuracy();
    ms.miou = ms.seg.miou();
    ms.map = single ? ap_sum / single : 0.0;
    ms.share = two ? share_sum / (2 * two) : 0.0;
    ms.pointing = two ? pointing_sum / (2 * two) : 0.0;
    if (ms.rho_scenes) ms.rho = rho_sum / ms.rho_scenes;
    ms.timed = int(times.size());
    ms.ms = median(times);
    s.single = single;
    s.two = two;
    s.methods.push_back(std::move(ms));
  }
  s.forward_ms = median(forward);
  return s;
}

}  // namespace vitlens
