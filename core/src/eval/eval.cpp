// eval.cpp — the faithfulness benchmark: method specs, the scene data, the per-sample protocol
// (with ROAD, SRG, relevance mass and rank accuracy — each map's figures by map_faithfulness — and
// the model randomisation check of issue 16), the chunked two-core driver, the per-sample records (JSON lines) and their reduction. The
// protocol is in eval.h; the image sets in image_set.cpp; the reports (markdown, CSV, SVG) in
// eval_report.cpp.
#include "vitlens/eval/eval.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/methods/methods.h"
#include "vitlens/methods/options.h"
#include "vitlens/metrics/faithfulness.h"
#include "vitlens/metrics/map_faithfulness.h"
#include "vitlens/metrics/perturbation.h"
#include "vitlens/metrics/road.h"
#include "vitlens/data/scenes.h"
#include "vitlens/model/randomise.h"
#include "vitlens/model/vit.h"

namespace vitlens {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kRandomSalt = 0x5EED0FBA5E11E5ull;  // the `random` baseline's stream
constexpr uint64_t kRoadSalt = 0x0000A0ADB1A5ull;     // ROAD's noise per sample

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}


[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorCode::bad_argument, msg); }

// A scene model takes 3 × size × size scenes and has 10 classes.
void check_scene_model(const Config& c, const SceneOptions& so, const char* what) {
  if (c.classes != fashion_classes || c.channels != 3 || c.image_h != so.size || c.image_w != so.size)
    fail(std::string(what) + " must take 3 × " + std::to_string(so.size) + " × " + std::to_string(so.size) +
         " scenes and have " + std::to_string(fashion_classes) +
         " classes (a scene model); evaluate other models on labelled images (--images DIR)");
}

// The shortest "%.{p}g" text of v that reads back as v (0.9, not 0.90000000000000002).
std::string shortest_number(double v) {
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// One worker's reusable state.
struct Worker {
  ExplainState st;   // the evaluated model on the clean input
  ExplainState cmp;  // the compare model on the clean input
  PerturbationWork pw;  // forward passes of perturbed inputs
  MapFaithfulness faith;  // one map's figures (map_faithfulness)
  ExplainState rnd;     // the randomised model on the clean input
};

// The pixel map (H, W) of a registry method spec for `target` on the input `st` holds.
Mat method_map(const Model& m, ExplainState& st, const EvalMethod& method, int target, bool& nonfinite) {
  MethodOptions o = method.options;
  o.target = target;
  Explanation e = explain(m, st, method.info->name, o);
  const Config& c = m.config;
  Mat px;
  if (e.pixel_map.rows() == c.image_h && e.pixel_map.cols() == c.image_w)
    px = std::move(e.pixel_map);
  else if (e.token_map.size() > 0)
    px = upsample_bilinear(e.token_map, c.image_h, c.image_w);
  else
    fail("method '" + method.spec + "' returned no map to evaluate");
  nonfinite = zero_nonfinite(px.data(), int(px.size())) || nonfinite;
  return px;
}

// `random`: u = (splitmix64(key + i) >> 40)·2⁻²⁴ per pixel i, key from (random seed, sample, class).
Mat random_map(uint64_t random_seed, int sample, int cls, int h, int w) {
  const uint64_t key = splitmix64(splitmix64(random_seed ^ kRandomSalt) + (uint64_t(sample) << 8) + uint64_t(cls));
  Mat r(h, w);  // (h, w)
  for (Eigen::Index i = 0; i < r.size(); ++i)
    r.data()[i] = float(double(splitmix64(key + uint64_t(i)) >> 40) * (1.0 / 16777216.0));
  return r;
}

Mat mask_map(const std::vector<uint8_t>& mask, int h, int w) {
  if (mask.size() != size_t(h) * size_t(w)) fail("the oracle needs the item's mask, and this sample has none");
  Mat r(h, w);  // (h, w)
  for (Eigen::Index i = 0; i < r.size(); ++i) r.data()[i] = mask[size_t(i)] ? 1.0f : 0.0f;
  return r;
}

// The map of `method` for class `cls`, whose object is `item` (oracle) on sample `sample`.
Mat any_map(const Model& m, ExplainState& st, const EvalOptions& opt, const EvalMethod& method, int sample,
            const EvalItem& item, int cls, bool& nonfinite) {
  const Config& c = m.config;
  if (method.spec == eval_random) return random_map(opt.random_seed, sample, cls, c.image_h, c.image_w);
  if (method.spec == eval_oracle) return mask_map(item.mask, c.image_h, c.image_w);
  return method_map(m, st, method, cls, nonfinite);
}

bool same_map(const Mat& a, const Mat& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && std::equal(a.data(), a.data() + a.size(), b.data());
}

bool has_score(const EvalRecord& r, const char* name) { return r.scores.count(name) != 0; }

// Whether the randomisation check applies to (sample, method): samples below the limit, every
// method but the oracle.
bool wants_randomisation(const EvalOptions& opt, int sample, const std::string& method) {
  return sample < opt.randomisation && method != eval_oracle;
}

// Whether a stored record holds every figure `opt` asks for (records of older runs lack the
// metrics added since; they are recomputed).
bool record_complete(const EvalRecord& r, const EvalOptions& opt) {
  if (!r.skipped.empty()) return true;
  if (r.items == 1) {
    if (!has_score(r, "srg_black")) return false;
    if (r.segmented && !has_score(r, "mass_accuracy")) return false;
    if (r.scene < opt.road && (!r.road || !has_score(r, "srg_road"))) return false;
  }
  return !wants_randomisation(opt, r.scene, r.method) || !r.randomisation.empty();
}

// One sample as the workers see it, with its clean prediction.
struct SampleInput {
  int index = 0;
  EvalSample sample;
  int pred = 0;     // arg-max class of the evaluated model
  double forward_ms = 0;
};

// The record of `method` on a sample whose forward passes w.st and w.cmp hold; `pred_out`
// receives the predicted-class map when one was made (for the randomisation check).
EvalRecord method_record(Worker& w, const Model& m, const Model* compare, const EvalOptions& opt,
                         const SampleInput& in, const EvalMethod& method, Mat& pred_out) {
  const Config& c = m.config;
  const int hw = c.image_h * c.image_w;
  const std::vector<EvalItem>& items_of = in.sample.items;
  const int items = int(items_of.size()), pred = in.pred;
  EvalRecord r;
  r.scene = in.index;
  r.method = method.spec;
  r.items = items;
  for (int k = 0; k < items && k < 2; ++k) r.classes[size_t(k)] = items_of[size_t(k)].cls;
  r.pred = pred;
  r.forward_ms = in.forward_ms;
  const bool baseline = method.info == nullptr;

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
    const EvalItem& item = items_of[0];
    if (baseline) pred_map = any_map(m, w.st, opt, method, in.index, item, pred, r.nonfinite);
    const Mat target_map =
        item.cls == pred ? pred_map : any_map(m, w.st, opt, method, in.index, item, item.cls, r.nonfinite);
    // The predicted-class map: both fills, SRG of the predicted class, and the mask figures.
    MapFaithfulnessOptions fo;
    fo.cls = pred;
    fo.road = in.index < opt.road;
    fo.road_options.seed = road_seed(in.index);
    if (!item.mask.empty()) fo.mask = item.mask.data();
    map_faithfulness(w.faith, w.pw, m, in.sample.x, w.st.trace.logits, pred_map.data(), hw, fo);
    const MapFaithfulness& f = w.faith;
    for (size_t d = 0; d < 2; ++d) r.top[0][d] = curve_tops(f.black_curves[d].curve);
    r.scores["srg_black"] = f.srg_black;
    if (f.road) {
      for (size_t d = 0; d < 2; ++d) r.road_top[d] = curve_tops(f.road_curves[d].curve);
      r.road = true;
      r.scores["srg_road"] = f.srg_road;
    }
    if (f.masked) {
      r.segmented = true;
      r.seg = f.seg;
      r.seg_ap = f.seg_ap;
      r.scores["mass_accuracy"] = f.mass_accuracy;
      r.scores["rank_accuracy"] = f.rank_accuracy;
    }
    // The target-class map: the black-fill test only (the same map when the prediction is right).
    if (same_map(pred_map, target_map)) {
      r.top[1] = r.top[0];
    } else {
      MapFaithfulnessOptions to;
      to.cls = item.cls;
      map_faithfulness(w.faith, w.pw, m, in.sample.x, w.st.trace.logits, target_map.data(), hw, to);
      for (size_t d = 0; d < 2; ++d) r.top[1][d] = curve_tops(w.faith.black_curves[d].curve);
    }
  } else if (items == 2) {
    for (int k = 0; k < 2; ++k) {
      const EvalItem& own = items_of[size_t(k)];
      const EvalItem& other = items_of[size_t(1 - k)];
      if (own.mask.size() != size_t(hw) || other.mask.size() != size_t(hw))
        fail("a two-item sample needs both items' masks");
      const Mat mk = !baseline && own.cls == pred
                         ? pred_map
                         : any_map(m, w.st, opt, method, in.index, own, own.cls, r.nonfinite);
      // The mask figures of item k's class map against item k and the other item.
      MapFaithfulnessOptions fo;
      fo.cls = own.cls;
      fo.black = false;
      fo.mask = own.mask.data();
      fo.other = other.mask.data();
      map_faithfulness(w.faith, w.pw, m, in.sample.x, w.st.trace.logits, mk.data(), hw, fo);
      r.share[size_t(k)] = w.faith.share;
      r.pointing[size_t(k)] = w.faith.pointing;
    }
  }
  if (pred_map.size() > 0) pred_out = std::move(pred_map);
  return r;
}

// The randomisation check of one sample (Adebayo et al. 2018, §3.1): one copy of the weights,
// randomised one cascade step more at a time (randomise_step), each step's forward pass shared by
// the methods; records[k] gets one MapSimilarity per step for the map of the trained model's
// predicted class against the trained model's map trained[k].
void randomisation_check(Worker& w, const Model& m, const EvalOptions& opt, const SampleInput& in,
                         const std::vector<const EvalMethod*>& methods, const std::vector<Mat>& trained,
                         std::vector<EvalRecord>& records) {
  std::vector<size_t> todo;
  for (size_t k = 0; k < methods.size(); ++k)
    if (wants_randomisation(opt, in.index, methods[k]->spec) && trained[k].size() > 0) todo.push_back(k);
  if (todo.empty()) return;
  const Config& c = m.config;
  Model rm = m;  // the cascade's one copy
  const int steps = randomisation_steps(c);
  for (int step = 1; step <= steps; ++step) {
    randomise_step(rm, step, opt.randomisation_seed);
    w.rnd.set_input(rm, in.sample.x);
    for (size_t k : todo) {
      bool nonfinite = false;  // a randomised model's NaN map is set to 0 and compared as such
      w.rnd.clear_derived();
      const Mat map = any_map(rm, w.rnd, opt, *methods[k], in.index, in.sample.items[0], in.pred, nonfinite);
      records[k].randomisation.push_back(map_similarity(trained[k].data(), map.data(), c.image_h, c.image_w));
    }
  }
}

// A loaded sample must fit the model (a loader's programming error otherwise).
void check_sample(const EvalSample& s, const Config& c, int index) {
  const std::string where = "sample " + std::to_string(index) + ": ";
  if (s.x.c != c.channels || s.x.h != c.image_h || s.x.w != c.image_w)
    throw Error(ErrorCode::bad_shape, where + "the input does not have the model's shape");
  if (s.items.empty() || s.items.size() > 2) fail(where + "a sample has one or two items");
  for (const EvalItem& it : s.items) {
    if (it.cls < 0 || it.cls >= c.classes) fail(where + "class " + std::to_string(it.cls) + " is not a class of the model");
    if (!it.mask.empty() && it.mask.size() != size_t(c.image_h) * size_t(c.image_w))
      throw Error(ErrorCode::bad_shape, where + "the mask does not have the model's input size");
  }
}

// The records of `sample` for `methods`, in that order.
std::vector<EvalRecord> sample_records(Worker& w, const Model& m, const Model* compare, const EvalData& data,
                                       const EvalOptions& opt, int sample,
                                       const std::vector<const EvalMethod*>& methods) {
  SampleInput in;
  in.index = sample;
  in.sample = data.load(sample, m.config);
  std::vector<EvalRecord> out;
  if (!in.sample.skipped.empty()) {
    for (const EvalMethod* method : methods) {
      EvalRecord r;
      r.scene = sample;
      r.method = method->spec;
      r.skipped = in.sample.skipped;
      out.push_back(std::move(r));
    }
    return out;
  }
  check_sample(in.sample, m.config, sample);
  const auto t0 = Clock::now();
  w.st.set_input(m, in.sample.x);
  in.forward_ms = ms_since(t0);
  if (compare) w.cmp.set_input(*compare, in.sample.x);
  in.pred = arg_max_class(w.st.trace.logits);
  std::vector<Mat> trained(methods.size());  // the predicted-class maps, for the randomisation check
  for (size_t k = 0; k < methods.size(); ++k) {
    const EvalMethod* method = methods[k];
    try {
      out.push_back(method_record(w, m, compare, opt, in, *method, trained[k]));
      if (method->spec == eval_random && trained[k].size() == 0)
        trained[k] = random_map(opt.random_seed, sample, in.pred, m.config.image_h, m.config.image_w);
    } catch (const Error& e) {
      throw Error(e.code(), "method '" + method->spec + "' on sample " + std::to_string(sample) + ": " + e.what());
    }
  }
  try {
    randomisation_check(w, m, opt, in, methods, trained, out);
  } catch (const Error& e) {
    throw Error(e.code(), "the randomisation check on sample " + std::to_string(sample) + ": " + e.what());
  }
  return out;
}

// Checks the models, the data and the options; returns the parsed methods.
std::vector<EvalMethod> check_options(const Model& m, const Model* compare, const EvalData& data,
                                      const EvalOptions& opt) {
  if (data.check) data.check(m.config, "the model");
  if (compare) {
    if (data.check) data.check(compare->config, "the compare model");
    const Config &a = m.config, &b = compare->config;
    if (a.patch != b.patch || a.dim != b.dim || a.depth != b.depth || a.heads != b.heads || a.mlp_dim != b.mlp_dim ||
        a.classes != b.classes || a.channels != b.channels || a.image_h != b.image_h || a.image_w != b.image_w)
      fail("the compare model has another shape than the model: give the same weights in another storage "
           "(e.g. the -f32 file of an int8 model)");
  }
  if (opt.n < 1) fail("the benchmark needs at least one sample");
  if (opt.n > data.size)
    fail("there are only " + std::to_string(data.size) + " samples: give --n " + std::to_string(data.size) +
         " or less");
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    fail("a shard is I/N with 0 ≤ I < N");
  if (opt.methods.empty()) fail("no method to evaluate");
  if (opt.road < 0 || opt.randomisation < 0) fail("--road and --randomisation take a sample count ≥ 0");
  std::vector<EvalMethod> methods;
  for (const std::string& spec : opt.methods) {
    methods.push_back(eval_parse_method(spec, &m.config));
    if (methods.back().spec == eval_oracle && !data.masks)
      fail("the oracle baseline needs object masks: give --masks MDIR or leave out oracle");
  }
  return methods;
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

EvalMethod eval_parse_method(const std::string& spec, const Config* model) {
  EvalMethod out;
  if (is_baseline(spec)) {
    out.spec = spec;
    return out;
  }
  const std::string name = spec.substr(0, spec.find(':'));
  if (is_baseline(name)) fail("the baseline " + name + " takes no options: give '" + name + "'");
  if (name.empty()) fail("a method spec starts with the method's name: NAME or NAME:key=value, got '" + spec + "'");
  MethodOptions o;
  const MethodInfo& info = parse_method_spec(spec, o, model);
  for (const std::string& key : o.given) {
    if (key == "target")
      fail("'" + spec + "': eval explains the predicted and the true class itself; leave out target");
    if (key == "threads")
      fail("'" + spec + "': threads does not change a map; eval's --threads sets the workers");
  }
  o.threads = 1;
  // The canonical text: the options not at their default, keys in byte order.
  const MethodOptions got = resolve_defaults(info, o), def = resolve_defaults(info, default_options(&info));
  std::vector<std::string> keys = o.given;
  std::sort(keys.begin(), keys.end());
  std::string canon = info.name;
  for (const std::string& key : keys) {
    const OptionSpec& s = method_option(info, key);
    std::string text;
    switch (s.kind) {
      case OptionKind::integer:
      case OptionKind::number:
      case OptionKind::flag:
      case OptionKind::choice: {
        const double v = s.get(got);
        if (v == s.get(def)) continue;
        if (s.kind == OptionKind::integer || s.kind == OptionKind::number) text = key + "=" + shortest_number(v);
        else if (s.kind == OptionKind::choice) {
          text = key + "=" + s.choices[size_t(v)];
          for (const OptionSpec::Alias& a : s.aliases)  // the value's alias word: "no-grad"
            if (s.choices[size_t(v)] == a.value) text = a.word;
        } else if (v != 0) text = key;
        else text = key + "=false";
        break;
      }
      case OptionKind::method: {
        const std::string v = s.get_text(got);
        if (v == s.get_text(def)) continue;
        text = key + "=" + (v.find(':') == std::string::npos ? v : "(" + v + ")");  // a spec in parentheses
        break;
      }
      case OptionKind::image: fail("'" + spec + "': " + key + " takes an image, which a method spec cannot give");
    }
    canon += ":" + text;
  }
  out.spec = canon;
  out.info = &info;
  out.options = std::move(o);
  return out;
}

std::string eval_canonical_spec(const std::string& spec, const Config* model) {
  return eval_parse_method(spec, model).spec;
}

std::vector<std::string> eval_resolve_methods(const std::string& list, bool include_slow, const Config* model) {
  std::vector<std::string> out;
  if (list == "all") {
    for (const MethodInfo& info : method_registry())
      if (include_slow || !info.long_running) out.push_back(info.name);
    out.push_back(eval_random);
    out.push_back(eval_oracle);
    return out;
  }
  std::vector<std::string> given;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string spec = list.substr(start, comma - start);
    if (spec.empty()) fail("empty method spec in '" + list + "'");
    std::string canon;
    try {
      canon = eval_canonical_spec(spec, model);
    } catch (const Error& e) {
      fail(std::string(e.what()) + " — give 'all' or a comma-separated list of method specs, NAME or "
           "NAME:key=value[:key=value…] (vitlens explain --list), and the baselines random, oracle");
    }
    const auto it = std::find(out.begin(), out.end(), canon);
    if (it != out.end()) {
      const std::string& first = given[size_t(it - out.begin())];
      fail(first == spec ? "method '" + spec + "' is listed twice"
                         : "'" + first + "' and '" + spec + "' are the same method spec (" + canon + ")");
    }
    out.push_back(canon);
    given.push_back(spec);
    start = comma + 1;
  }
  return out;
}

EvalData scene_data(const FashionMnist& test, const SceneOptions& so, uint64_t seed) {
  EvalData d;
  d.kind = "scenes";
  d.size = INT_MAX;
  d.masks = true;
  const FashionMnist* src = &test;
  d.load = [src, so, seed](int i, const Config& c) {
    const Scene sc = make_scene(*src, so, seed, uint64_t(i));
    EvalSample s;
    s.x = scene_input(sc.pixels, c);
    for (const SceneItem& item : sc.items) s.items.push_back({item.cls, item.mask});
    return s;
  };
  d.check = [so](const Config& c, const char* what) {
    validate_scene_options(so);
    check_scene_model(c, so, what);
  };
  return d;
}

uint64_t road_seed(int sample) { return splitmix64(kRoadSalt + uint64_t(sample)); }

std::string eval_randomisation_step_name(int step, int steps) {
  if (step < 1 || step > steps || steps < 2) fail("a randomisation step is 1 … the model's depth + 2");
  if (step == 1) return "head";
  if (step == steps) return "embedding";
  return "block " + std::to_string(steps - 1 - step);
}

std::vector<int> eval_shard_samples(int n, int index, int count) {
  if (count < 1 || index < 0 || index >= count) fail("a shard is I/N with 0 ≤ I < N");
  std::vector<int> out;
  for (int i = index; i < n; i += count) out.push_back(i);
  return out;
}

std::string eval_record_to_json(const EvalRecord& r) {
  auto round_us = [](double ms) { return std::round(ms * 1000.0) / 1000.0; };
  json j = {{"scene", r.scene}, {"method", r.method}};
  if (!r.skipped.empty()) {
    j["skipped"] = r.skipped;
    return j.dump();
  }
  j["items"] = r.items;
  j["pred"] = r.pred;
  json classes = json::array();
  for (int k = 0; k < r.items && k < 2; ++k) classes.push_back(r.classes[size_t(k)]);
  j["classes"] = classes;
  if (r.items == 1) {
    j["top"] = r.top;
    if (r.segmented)
      j["seg"] = {{"correct", r.seg.correct}, {"pixels", r.seg.pixels}, {"inter", r.seg.inter},
                  {"union", r.seg.uni}, {"ap", r.seg_ap}};
  } else if (r.items == 2) {
    j["share"] = r.share;
    j["pointing"] = r.pointing;
  }
  if (r.road) j["road_top"] = r.road_top;
  if (!r.randomisation.empty()) {
    json sp = json::array(), sa = json::array(), ss = json::array();
    for (const MapSimilarity& q : r.randomisation) {
      sp.push_back(q.spearman);
      sa.push_back(q.spearman_abs);
      ss.push_back(q.ssim);
    }
    j["randomisation"] = {{"spearman", sp}, {"spearman_abs", sa}, {"ssim", ss}};
  }
  if (!r.scores.empty()) j["scores"] = r.scores;
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
    if (r.scene < 0) throw Error(ErrorCode::bad_format, "a record's sample index is negative");
    if (j.contains("skipped")) {
      r.skipped = j["skipped"].get<std::string>();
      if (r.skipped.empty()) throw Error(ErrorCode::bad_format, "a skipped record gives no reason");
      return r;
    }
    r.items = j.at("items").get<int>();
    r.pred = j.at("pred").get<int>();
    const json& classes = j.at("classes");
    if (r.items < 1 || r.items > 2 || int(classes.size()) != r.items)
      throw Error(ErrorCode::bad_format, "a record's items or classes are out of range");
    for (int k = 0; k < r.items; ++k) r.classes[size_t(k)] = classes[size_t(k)].get<int>();
    if (r.items == 1) {
      r.top = j.at("top").get<decltype(r.top)>();
      if (j.contains("seg")) {
        const json& s = j["seg"];
        r.segmented = true;
        r.seg.correct = s.at("correct").get<int64_t>();
        r.seg.pixels = s.at("pixels").get<int64_t>();
        r.seg.inter = s.at("inter").get<std::array<int64_t, 2>>();
        r.seg.uni = s.at("union").get<std::array<int64_t, 2>>();
        r.seg_ap = s.at("ap").get<double>();
      }
    } else {
      r.share = j.at("share").get<std::array<double, 2>>();
      r.pointing = j.at("pointing").get<std::array<double, 2>>();
    }
    if (j.contains("road_top")) {
      r.road = true;
      r.road_top = j["road_top"].get<decltype(r.road_top)>();
    }
    if (j.contains("randomisation")) {
      const json& q = j["randomisation"];
      const auto sp = q.at("spearman").get<std::vector<double>>(), sa = q.at("spearman_abs").get<std::vector<double>>(),
                 ss = q.at("ssim").get<std::vector<double>>();
      if (sp.empty() || sa.size() != sp.size() || ss.size() != sp.size())
        throw Error(ErrorCode::bad_format, "a record's randomisation lists are empty or of different lengths");
      for (size_t k = 0; k < sp.size(); ++k) r.randomisation.push_back({sp[k], sa[k], ss[k]});
    }
    if (j.contains("scores")) r.scores = j["scores"].get<std::map<std::string, double>>();
    if (j.contains("rho")) r.rho = j["rho"].get<double>();
    if (j.contains("ms")) r.ms = j["ms"].get<double>();
    if (j.contains("forward_ms")) r.forward_ms = j["forward_ms"].get<double>();
    r.nonfinite = j.value("nonfinite", false);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::bad_format, std::string("not a benchmark record: ") + e.what());
  }
  return r;
}

std::vector<EvalRecord> eval_sample(const Model& m, const Model* compare, const EvalData& data,
                                    const EvalOptions& opt, int sample) {
  const std::vector<EvalMethod> methods = check_options(m, compare, data, opt);
  std::vector<const EvalMethod*> all;
  for (const EvalMethod& e : methods) all.push_back(&e);
  Worker w;
  return sample_records(w, m, compare, data, opt, sample, all);
}

std::vector<EvalRecord> eval_scene(const Model& m, const Model* compare, const FashionMnist& test,
                                   const EvalOptions& opt, int scene) {
  return eval_sample(m, compare, scene_data(test, opt.scenes, opt.seed), opt, scene);
}

void run_eval(const Model& m, const Model* compare, const FashionMnist& test, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress) {
  run_eval(m, compare, scene_data(test, opt.scenes, opt.seed), opt, done, sink, progress);
}

void run_eval(const Model& m, const Model* compare, const EvalData& data, const EvalOptions& opt,
              const std::vector<EvalRecord>& done, const EvalSink& sink, const EvalProgressFn& progress) {
  const std::vector<EvalMethod> methods = check_options(m, compare, data, opt);
  const size_t nm = methods.size();
  std::vector<std::vector<char>> have(size_t(opt.n), std::vector<char>(nm, 0));  // (n, methods)
  for (const EvalRecord& r : done) {
    if (r.scene < 0 || r.scene >= opt.n) continue;
    for (size_t k = 0; k < nm; ++k)
      if (methods[k].spec == r.method) have[size_t(r.scene)][k] = record_complete(r, opt);
  }
  std::vector<std::pair<int, std::vector<const EvalMethod*>>> todo;  // (sample, its missing methods)
  for (int i : eval_shard_samples(opt.n, opt.shard_index, opt.shard_count)) {
    std::vector<const EvalMethod*> missing;
    for (size_t k = 0; k < nm; ++k)
      if (!have[size_t(i)][k]) missing.push_back(&methods[k]);
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
        slots[j] = sample_records(workers[size_t(t)], m, compare, data, opt, job.first, job.second);
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
  std::vector<int> samples;
  for (int i = 0; i < n; ++i) samples.push_back(i);
  return summarise_eval(records, methods, samples);
}

EvalSummary summarise_eval(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods,
                           const std::vector<int>& samples, const std::string& kind, int road, int randomisation) {
  if (methods.empty()) fail("no method to summarise");
  std::map<std::pair<int, std::string>, const EvalRecord*> index;  // the last record of each
  for (const EvalRecord& r : records) index[std::make_pair(r.scene, r.method)] = &r;
  EvalSummary s;
  s.kind = kind;
  s.n = int(samples.size());
  constexpr size_t kReasons = 10;  // skipped samples listed by name
  std::vector<double> forward;
  for (size_t k = 0; k < methods.size(); ++k) {
    EvalMethodSummary ms;
    ms.method = methods[k];
    double ap_sum = 0, share_sum = 0, pointing_sum = 0, rho_sum = 0;
    std::map<std::string, std::pair<double, int>> score_sums;  // name → (sum, count)
    std::vector<double> times;
    int single = 0, two = 0, segmented = 0, skipped = 0;
    for (int i : samples) {
      const auto it = index.find({i, methods[k]});
      if (it == index.end())
        fail("no result for sample " + std::to_string(i) + " and method '" + methods[k] +
             "': run the benchmark to complete it");
      const EvalRecord& r = *it->second;
      if (!r.skipped.empty()) {
        ++skipped;
        if (k == 0 && s.skipped_reasons.size() < kReasons)
          s.skipped_reasons.push_back("sample " + std::to_string(i) + ": " + r.skipped);
        continue;
      }
      if (k == 0 && std::isfinite(r.forward_ms)) forward.push_back(r.forward_ms);
      ms.nonfinite += r.nonfinite;
      if (std::isfinite(r.rho)) {
        rho_sum += r.rho;
        ms.rho_scenes++;
      }
      if (std::isfinite(r.ms)) times.push_back(r.ms);
      for (const auto& [name, v] : r.scores) {
        if (name == "srg_road" && i >= road) continue;
        score_sums[name].first += v;
        score_sums[name].second++;
      }
      if (!r.randomisation.empty() && i < randomisation) {
        if (ms.randomisation.empty()) ms.randomisation.assign(r.randomisation.size(), MapSimilarity{});
        if (r.randomisation.size() != ms.randomisation.size())
          fail("sample " + std::to_string(i) + " of method '" + methods[k] +
               "' has another number of randomisation steps than the others: the records are of different models");
        for (size_t st = 0; st < r.randomisation.size(); ++st) {
          ms.randomisation[st].spearman += r.randomisation[st].spearman;
          ms.randomisation[st].spearman_abs += r.randomisation[st].spearman_abs;
          ms.randomisation[st].ssim += r.randomisation[st].ssim;
        }
        ms.randomisation_scenes++;
      }
      if (r.items == 1) {
        ++single;
        const int gt = r.classes[0];
        for (size_t c = 0; c < 2; ++c)
          for (size_t d = 0; d < 2; ++d) {
            ms.acc[c][d][0] += r.pred == gt;
            for (size_t st = 1; st < size_t(perturbation_steps); ++st) ms.acc[c][d][st] += r.top[c][d][st - 1] == gt;
          }
        if (r.road && i < road) {
          ++ms.road_scenes;
          for (size_t d = 0; d < 2; ++d) {
            ms.road_acc[d][0] += r.pred == gt;
            for (size_t st = 1; st < size_t(perturbation_steps); ++st) ms.road_acc[d][st] += r.road_top[d][st - 1] == gt;
          }
        }
        if (r.segmented) {
          ++segmented;
          ms.seg.add(r.seg);
          ap_sum += r.seg_ap;
        }
      } else if (r.items == 2) {
        ++two;
        share_sum += r.share[0] + r.share[1];
        pointing_sum += r.pointing[0] + r.pointing[1];
      }
    }
    ms.perturbation_scenes = single;
    ms.segmentation_scenes = segmented;
    ms.class_maps = 2 * two;
    for (size_t c = 0; c < 2; ++c)
      for (size_t d = 0; d < 2; ++d) {
        for (double& a : ms.acc[c][d]) a = single ? a / single : 0.0;
        ms.auc[c][d] = perturbation_auc(ms.acc[c][d]);
      }
    if (segmented) {
      ms.pixel_acc = ms.seg.pixel_accuracy();
      ms.miou = ms.seg.miou();
      ms.map = ap_sum / segmented;
    }
    if (two) {
      ms.share = share_sum / (2 * two);
      ms.pointing = pointing_sum / (2 * two);
    }
    for (const auto& [name, sum] : score_sums) ms.scores[name] = sum.first / sum.second;
    if (ms.road_scenes)
      for (size_t d = 0; d < 2; ++d) {
        for (double& a : ms.road_acc[d]) a /= ms.road_scenes;
        ms.road_auc[d] = perturbation_auc(ms.road_acc[d]);
      }
    if (ms.randomisation_scenes) {
      std::vector<double> rho;
      for (MapSimilarity& q : ms.randomisation) {
        q.spearman /= ms.randomisation_scenes;
        q.spearman_abs /= ms.randomisation_scenes;
        q.ssim /= ms.randomisation_scenes;
        rho.push_back(q.spearman);
      }
      ms.survives = randomisation_survives(rho);
    }
    if (ms.rho_scenes) ms.rho = rho_sum / ms.rho_scenes;
    ms.timed = int(times.size());
    ms.ms = median(times);
    s.single = single;
    s.two = two;
    s.skipped = skipped;
    s.methods.push_back(std::move(ms));
  }
  s.forward_ms = median(forward);
  return s;
}

void eval_drop_timings(EvalSummary& s) {
  s.forward_ms = EvalRecord::none;
  for (EvalMethodSummary& m : s.methods) m.ms = EvalRecord::none;
}

}  // namespace vitlens
