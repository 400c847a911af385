// bindings.cpp — the Embind API of vitlens: the only file that includes Emscripten headers.
//
// Every entry point catches vitlens::Error (and any std::exception) and rethrows it as a JS
// Error whose message starts with the error code, e.g. "bad_format: model file: ...". Arrays
// cross the boundary as copies (typed_memory_view goes stale when memory grows).
#include <emscripten/bind.h>
#include <emscripten/heap.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "vitlens/tensor/error.h"
#include "vitlens/eval/image_set.h"
#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/image.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/methods/head_pruning.h"
#include "vitlens/methods/methods.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/methods/options.h"
#include "vitlens/methods/walk.h"
#include "vitlens/metrics/map_faithfulness.h"
#include "vitlens/metrics/perturbation.h"
#include "vitlens/io/model_file.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/model/vit.h"

using emscripten::val;
using namespace vitlens;

namespace {

#if !defined(__EMSCRIPTEN_PTHREADS__)
[[noreturn]] void throw_js(const std::string& msg) {
  val::global("Error").new_(val(msg)).throw_();
  __builtin_unreachable();
}
#else
// The pthreads build uses Emscripten's JS-emulated C++ exceptions where clang-16 is missing
// (core/CMakeLists.txt). A JS Error thrown from C++ there unwinds the C++ frames without their
// destructors (the Embind invoker's argument handles, our strings), leaking on every failing
// call. So the message is parked here, the call returns normally, and wasm/mt_errors.js (the
// module's post-js) throws it in JS; the build with wasm exceptions keeps the same path, so the
// two behave alike. Only the thread that owns the module calls the bindings.
std::string pending_error;

std::string take_error() {
  std::string e;
  e.swap(pending_error);
  return e;
}
#endif

std::string megabytes(double bytes) { return std::to_string(int64_t(std::ceil(bytes / double(1 << 20)))) + " MB"; }

// Why memory ran out: the engine's memory (the wasm heap) grows on demand up to the build's
// maximum (4 GB, the wasm32 limit), but a browser may refuse to grow it sooner. malloc then
// returns null (ABORTING_MALLOC is off with memory growth), and operator new / Eigen throw
// std::bad_alloc, which ends here instead of aborting the module. `need` (bytes, 0 when unknown)
// is what the failing step asked for, as far as the engine knows.
std::string out_of_memory_message(const std::string& what, double need) {
  const double heap = double(emscripten_get_heap_size()), max = double(emscripten_get_heap_max());
  const bool at_limit = need > 0 ? heap + need > max : heap > 0.9 * max;
  const std::string limit = at_limit ? "the engine's limit is " + megabytes(max) + " (the wasm32 address space)"
                                     : "this browser allows at most that much here (the engine itself may grow to " +
                                           megabytes(max) + ")";
  return "out_of_memory: " + what + "; the engine's memory could not grow past " + megabytes(heap) + ": " + limit +
         ". Close other tabs, or use a smaller model (or the native CLI)";
}

// Runs a binding's body; an engine error becomes a JS Error whose message starts with its code.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  std::string message;
  try {
    return f();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::out_of_memory) message = out_of_memory_message(e.what(), e.bytes());
    else message = std::string(error_code_name(e.code())) + ": " + e.what();
  } catch (const std::bad_alloc&) {
    message = out_of_memory_message("the engine ran out of memory", 0);
  } catch (const std::exception& e) {
    message = std::string("internal: ") + e.what();
  }
#if defined(__EMSCRIPTEN_PTHREADS__)
  pending_error = std::move(message);
  // undefined / null / nothing: the post-js wrapper throws instead
  using R = decltype(f());
  if constexpr (std::is_same_v<R, val>) return val::undefined();
  else if constexpr (!std::is_void_v<R>) return R();
#else
  throw_js(message);
#endif
}

// Copies a JS typed array (any element type matching T) into a vector.
template <typename T>
std::vector<T> copy_in(const val& array, int64_t max_elems, const char* what) {
  const val length = array["length"];
  if (!length.isNumber()) throw Error(ErrorCode::bad_argument, std::string(what) + " must be a typed array");
  const double n = length.as<double>();
  if (n < 0 || n > double(max_elems)) throw Error(ErrorCode::limit, std::string(what) + " is too large");
  std::vector<T> out(static_cast<size_t>(n));
  val view(emscripten::typed_memory_view(out.size(), out.data()));
  view.call<void>("set", array);
  return out;
}

// A file's bytes as a Uint8Array: an ArrayBuffer is viewed, any other array of byte values copied
// (as copy_in accepts them).
val byte_array(const val& bytes, int64_t max_bytes, const char* what) {
  const val u8 = val::global("Uint8Array");
  if (bytes.instanceof(val::global("ArrayBuffer"))) return u8.new_(bytes);
  const val length = bytes["length"];
  if (!length.isNumber()) throw Error(ErrorCode::bad_argument, std::string(what) + " must be a typed array");
  if (length.as<double>() > double(max_bytes)) throw Error(ErrorCode::limit, std::string(what) + " is too large");
  return bytes.instanceof(u8) ? bytes : u8.new_(bytes);
}

val float32_out(const float* p, size_t n) {
  return val::global("Float32Array").new_(emscripten::typed_memory_view(n, p));
}

// A matrix as a Float32Array (null when empty).
val mat_out(const Mat& m) { return m.size() == 0 ? val::null() : float32_out(m.data(), size_t(m.size())); }

// Matrices as Float32Arrays (null for an empty one) that all view one new ArrayBuffer, in order.
// The outputs of many matrices (the intermediates: ~80 for the shipped model, 1.35 MB) come out
// with one allocation (two cheap calls per matrix, set and subarray, instead of one constructor).
// With one Float32Array per matrix, their constructors took half of what the intermediates add to a
// warm transformer-attribution call in chromium (2.3 ms), mostly faulting in each new buffer's
// fresh pages; one buffer: 0.91× that call (docs/performance.md). A transfer list must name the
// shared buffer once (web/worker.js).
std::vector<val> mats_shared(const std::vector<const Mat*>& mats) {
  size_t total = 0;
  for (const Mat* m : mats) total += size_t(m->size());
  const val data = val::global("Float32Array").new_(double(total));
  std::vector<val> out;
  out.reserve(mats.size());
  size_t at = 0;
  for (const Mat* m : mats) {
    if (m->size() == 0) {
      out.push_back(val::null());
      continue;
    }
    data.call<void>("set", emscripten::typed_memory_view(size_t(m->size()), m->data()), double(at));
    out.push_back(data.call<val>("subarray", double(at), double(at + size_t(m->size()))));
    at += size_t(m->size());
  }
  return out;
}

// views[at … at + count) as a JS array; advances `at`.
val next_views(const std::vector<val>& views, size_t& at, size_t count) {
  val a = val::array();
  for (size_t k = 0; k < count; ++k) a.set(k, views[at++]);
  return a;
}

// Nested lists of matrices (per block, per head) as JS arrays of Float32Arrays viewing one
// ArrayBuffer (mats_shared).
val mats_out(const std::vector<const std::vector<Mat>*>& lists) {
  std::vector<const Mat*> all;
  for (const std::vector<Mat>* l : lists)
    for (const Mat& m : *l) all.push_back(&m);
  const std::vector<val> views = mats_shared(all);
  val out = val::array();
  size_t at = 0;
  for (size_t i = 0; i < lists.size(); ++i) out.set(i, next_views(views, at, lists[i]->size()));
  return out;
}

// A number option of a plain JS options object, `def` when absent.
double number_option(const val& o, const char* key, double def) {
  const val v = o[key];
  if (v.isUndefined() || v.isNull()) return def;
  if (!v.isNumber()) throw Error(ErrorCode::bad_argument, std::string("option ") + key + " must be a number");
  return v.as<double>();
}

int int_option(const val& o, const char* key, int def) {
  const double v = number_option(o, key, def);
  if (v != std::floor(v) || std::fabs(v) > 1e9)
    throw Error(ErrorCode::bad_argument, std::string("option ") + key + " must be an integer");
  return int(v);
}

bool bool_option(const val& o, const char* key, bool def) {
  const val v = o[key];
  if (v.isUndefined() || v.isNull()) return def;
  if (!v.isTrue() && !v.isFalse()) throw Error(ErrorCode::bad_argument, std::string("option ") + key + " must be a boolean");
  return v.isTrue();
}

// A string argument. Entry points take strings as val, not std::string: Embind 3.1.6 frees its
// copy of a std::string argument only when the call returns, so every call that throws a JS
// Error would leak it (a whole config.json for a failed import).
std::string string_arg(const val& v, const char* what) {
  if (!v.isString()) throw Error(ErrorCode::bad_argument, std::string(what) + " must be a string");
  return v.as<std::string>();
}

// One option value of a plain JS object as core's OptionValue: a number, a boolean or a string as
// it is (a string is parsed as the CLI's text is); an image option's Float32Array becomes
// `baseline`. core's set_option then gives the same errors as for the CLI's text.
OptionValue option_value_from_js(const OptionSpec* spec, const std::string& key, const val& v, const Config& c,
                                 Image& baseline) {
  if (spec && spec->kind == OptionKind::image) {
    const int64_t size = int64_t(c.channels) * c.image_h * c.image_w;
    std::vector<float> data = copy_in<float>(v, size, "option baseline");
    if (int64_t(data.size()) != size)
      throw Error(ErrorCode::bad_shape, "option " + key + " must be a normalised C×H×W Float32Array of " +
                                            std::to_string(size) + " values");
    baseline = Image(c.channels, c.image_h, c.image_w);
    baseline.data = std::move(data);
    return OptionValue::of_image(&baseline);
  }
  if (v.isNumber()) return OptionValue::of_number(v.as<double>());
  if (v.isTrue() || v.isFalse()) return OptionValue::of_bool(v.isTrue());
  if (v.isString()) return OptionValue::of_text(v.as<std::string>());
  throw Error(ErrorCode::bad_argument, key + " must be a number, a boolean or a string, got " + v.typeOf().as<std::string>());
}

// The option onProgress(fraction) of a long call: a function, or absent (undefined / null: an
// empty ProgressFn). The callback may return false to cancel; anything else continues.
ProgressFn progress_in(const val& v) {
  if (v.isUndefined() || v.isNull()) return {};
  if (v.typeOf().as<std::string>() != "function") throw Error(ErrorCode::bad_argument, "option onProgress must be a function");
  return [v](double f) { return !v(f).isFalse(); };
}

// The method options of a plain JS object: every key is an option of the method tables
// (options.h) by its JS name, set through core's set_option, or one of the call-level keys
// `intermediates` and `onProgress`. Absent keys (or undefined / null) keep the defaults; explain()
// rejects keys the method does not read. `baseline` receives the integrated-gradients baseline
// (a normalised C×H×W Float32Array); `opt.baseline` points to it.
MethodOptions options_from_js(const val& o, const Config& c, Image& baseline) {
  MethodOptions opt = default_options();
  if (o.isUndefined() || o.isNull()) return opt;
  if (o.typeOf().as<std::string>() != "object") throw Error(ErrorCode::bad_argument, "explain options must be an object");
  const val keys = val::global("Object").call<val>("keys", o);
  const int n = keys["length"].as<int>();
  for (int i = 0; i < n; ++i) {
    const std::string key = keys[i].as<std::string>();
    const val v = o[key];
    if (v.isUndefined() || v.isNull()) continue;
    if (key == "intermediates") {
      if (!v.isTrue() && !v.isFalse()) throw Error(ErrorCode::bad_argument, "option intermediates must be a boolean");
      opt.want_intermediates = v.isTrue();
    } else if (key == "onProgress") {
      opt.progress = progress_in(v);
    } else {
      // By key: core finds the option (JS or canonical key), or raises its "unknown option" error.
      set_option(opt, key, option_value_from_js(find_any_option(key), key, v, c, baseline), &c);
    }
  }
  return opt;
}

// The conservation report's layers as JS objects (objects.js makes them from two values: one
// string and one Float64Array).
val report_to_js(const ConservationReport& r) {
  std::string names;
  std::vector<double> sums;  // (layers, 2) relevance out, relevance in
  sums.reserve(2 * r.layers.size());
  for (const LayerRelevance& l : r.layers) {
    assert(l.layer.find('\n') == std::string::npos);
    if (!sums.empty()) names += '\n';
    names += l.layer;
    sums.push_back(l.relevance_out);
    sums.push_back(l.relevance_in);
  }
  const val sums_js = val::global("Float64Array").new_(emscripten::typed_memory_view(sums.size(), sums.data()));
  return val::module_property("layerRelevanceObjects")(val(names), sums_js);
}

// One output of the method's table (OutputSpec) as JS, set on `o` under its JS key; nothing when
// this explanation did not fill it (intermediates not asked for, completeness of a smoothgrad
// over another method).
void output_to_js(val& o, const OutputSpec& out, const Explanation& ex, const ConservationReport* report) {
  const std::string key = out.js_key();
  auto num = [](double v) { return std::isnan(v) ? val::null() : val(v); };
  switch (out.id) {
    case OutputId::token_map:  // (H/p, W/p)
      o.set(key, mat_out(ex.token_map));
      o.set("gridH", int(ex.token_map.rows()));
      o.set("gridW", int(ex.token_map.cols()));
      break;
    case OutputId::pixel_map:  // (H, W)
      o.set(key, mat_out(ex.pixel_map));
      o.set("height", int(ex.pixel_map.rows()));
      o.set("width", int(ex.pixel_map.cols()));
      break;
    case OutputId::conservation:
      if (report) o.set(key, report_to_js(*report));
      break;
    case OutputId::relevance_sums: {
      if (!report) break;
      val sums = val::object();
      sums.set("seed", report->seed_sum);
      val blocks = val::array();
      for (double b : report->block_input_sums) blocks.call<void>("push", num(b));
      sums.set("blockInputs", blocks);
      sums.set("tokens", num(report->tokens_sum));
      sums.set("image", num(report->image_sum));
      o.set(key, sums);
      break;
    }
    case OutputId::completeness: {
      if (!ex.has_completeness) break;
      val c = val::object();
      c.set("attributionSum", ex.completeness.attribution_sum);
      c.set("fInput", ex.completeness.f_input);
      c.set("fBaseline", ex.completeness.f_baseline);
      c.set("gap", ex.completeness.gap());
      o.set(key, c);
      break;
    }
    case OutputId::attattr: {  // L × H × (n, n) row-major Float32Arrays
      std::vector<const std::vector<Mat>*> blocks;
      for (const AttAttrBlock& b : ex.attattr) blocks.push_back(&b.attr);
      o.set(key, mats_out(blocks));
      break;
    }
    case OutputId::norm: {  // L × {maps: {stage: (n, n)}, mixing: {stage: (n)}}
      val blocks = val::array();
      for (const NormBlock& b : ex.norm) {
        val maps = val::object(), mixing = val::object();
        for (int k = 0; k < norm_stage_count; ++k) {
          const char* stage = norm_stage_name(NormStage(k));
          if (b.maps[k].size()) maps.set(stage, mat_out(b.maps[k]));
          if (b.mixing[k].size()) mixing.set(stage, float32_out(b.mixing[k].data(), size_t(b.mixing[k].size())));
        }
        val bo = val::object();
        bo.set("maps", maps);
        bo.set("mixing", mixing);
        blocks.call<void>("push", bo);
      }
      o.set(key, blocks);
      break;
    }
    case OutputId::intermediates: {  // L × head means (n, n), per-head arrays H × (n, n)
      if (ex.blocks.empty()) break;
      // Every block's matrices in one buffer, in this order: attn, grad, relevance, step,
      // accumulated, then its relevance heads and its product heads.
      std::vector<const Mat*> all;
      for (const BlockIntermediates& b : ex.blocks) {
        for (const Mat* m : {&b.attn, &b.grad, &b.relevance, &b.step, &b.accumulated}) all.push_back(m);
        for (const Mat& m : b.relevance_heads) all.push_back(&m);
        for (const Mat& m : b.product_heads) all.push_back(&m);
      }
      const std::vector<val> views = mats_shared(all);
      val blocks = val::array();
      size_t at = 0;
      for (size_t i = 0; i < ex.blocks.size(); ++i) {
        const BlockIntermediates& b = ex.blocks[i];
        val bo = val::object();
        for (const char* field : {"attn", "grad", "relevance", "step", "accumulated"}) bo.set(field, views[at++]);
        bo.set("relevanceHeads", next_views(views, at, b.relevance_heads.size()));
        bo.set("productHeads", next_views(views, at, b.product_heads.size()));
        blocks.set(i, bo);
      }
      val in = val::object();
      in.set("tokens", ex.blocks[0].attn.size() == 0 ? 0 : int(ex.blocks[0].attn.rows()));
      in.set("blocks", blocks);
      o.set(key, in);
      break;
    }
  }
}

// An Explanation as JS: the method, the target and each output of the method's table.
// `conservation` is always there (an empty array for the methods that do not report relevance).
val explanation_to_js(const Explanation& ex, const ConservationReport* report) {
  val o = val::object();
  o.set("method", ex.method);
  o.set("target", ex.target);
  o.set("conservation", val::array());
  for (const OutputSpec& out : find_method(ex.method)->outputs) output_to_js(o, out, ex, report);
  return o;
}

// A guided walk (walk.h) as JS: per step its words, its tensors, its values as Float32Arrays (null
// when the step has none) and its Σ relevance (null when none).
val walk_to_js(const MethodWalk& w) {
  auto num = [](double v) { return std::isnan(v) ? val::null() : val(v); };
  auto tensors = [](const std::vector<WalkTensor>& ts) {
    val a = val::array();
    for (const WalkTensor& t : ts) {
      val o = val::object();
      o.set("name", t.name);
      val shape = val::array();
      for (int s : t.shape) shape.call<void>("push", s);
      o.set("shape", shape);
      o.set("dims", t.dims);
      a.call<void>("push", o);
    }
    return a;
  };
  val steps = val::array();
  for (const WalkStep& s : w.steps) {
    val o = val::object();
    o.set("id", s.id);
    o.set("title", s.title);
    o.set("block", s.block);
    val f = val::object();
    f.set("before", s.formula.before);
    f.set("mark", s.formula.mark);
    f.set("after", s.formula.after);
    o.set("formula", f);
    o.set("equation", s.equation);
    o.set("reads", tensors(s.reads));
    o.set("writes", tensors(s.writes));
    o.set("values", s.values);
    o.set("row", s.row.size() ? float32_out(s.row.data(), size_t(s.row.size())) : val::null());
    o.set("matrix", mat_out(s.matrix));
    o.set("map", mat_out(s.map));
    val shape = val::null();
    if (s.map.size()) {
      shape = val::array();
      shape.call<void>("push", int(s.map.rows()));
      shape.call<void>("push", int(s.map.cols()));
    }
    o.set("mapShape", shape);
    o.set("relevance", num(s.relevance));
    val sums = val::array();
    for (const WalkSum& p : s.sums) {
      val so = val::object();
      so.set("label", p.label);
      so.set("value", num(p.value));
      sums.call<void>("push", so);
    }
    o.set("sums", sums);
    o.set("conservation", s.conservation);
    val layers = val::array();
    for (const std::string& l : s.layers) layers.call<void>("push", l);
    o.set("layers", layers);
    steps.call<void>("push", o);
  }
  val out = val::object();
  out.set("method", w.method);
  out.set("target", w.target);
  out.set("query", w.query);
  out.set("queryText", w.query_text);
  out.set("seed", num(w.seed));
  out.set("steps", steps);
  return out;
}

val predictions_to_js(const Config& c, const std::vector<Prediction>& top) {
  val out = val::array();
  for (const Prediction& p : top) {
    val o = val::object();
    o.set("class", p.cls);
    o.set("name", c.class_names[size_t(p.cls)]);
    o.set("logit", p.logit);
    o.set("prob", p.prob);
    out.call<void>("push", o);
  }
  return out;
}

}  // namespace

// A plain options object of the Input queries ({} when undefined or null).
val options_object(const val& o) {
  if (o.isUndefined() || o.isNull()) return val::object();
  if (o.typeOf().as<std::string>() != "object") throw Error(ErrorCode::bad_argument, "options must be an object");
  return o;
}

// attattr matrices from JS (per block an array of H Float32Arrays, n·n each), checked against
// the model's shape: what an explanation of "attattr" returned.
std::vector<AttAttrBlock> attattr_from_js(const val& blocks, const Config& c) {
  const int n = c.tokens();
  const std::string shape = std::to_string(c.depth) + " blocks of " + std::to_string(c.heads) + " heads of " +
                            std::to_string(n) + "×" + std::to_string(n) + " values";
  if (!blocks.isArray() || blocks["length"].as<int>() != c.depth)
    throw Error(ErrorCode::bad_shape, "attattr must be " + shape + " (an explanation's attattr)");
  std::vector<AttAttrBlock> out(size_t(c.depth));
  for (int l = 0; l < c.depth; ++l) {
    const val heads = blocks[l];
    if (!heads.isArray() || heads["length"].as<int>() != c.heads)
      throw Error(ErrorCode::bad_shape, "attattr must be " + shape + " (an explanation's attattr)");
    for (int h = 0; h < c.heads; ++h) {
      std::vector<float> v = copy_in<float>(heads[h], int64_t(n) * n, "attattr");
      if (int64_t(v.size()) != int64_t(n) * n) throw Error(ErrorCode::bad_shape, "attattr must be " + shape);
      out[size_t(l)].attr.push_back(Mat(Eigen::Map<const Mat>(v.data(), n, n)));
    }
  }
  return out;
}

val grid_to_js(const MatD& g) {
  val rows = val::array();
  for (Eigen::Index l = 0; l < g.rows(); ++l) {
    val row = val::array();
    for (Eigen::Index h = 0; h < g.cols(); ++h) row.call<void>("push", g(l, h));
    rows.call<void>("push", row);
  }
  return rows;
}

template <typename T>
val numbers_to_js(const T& values) {
  val out = val::array();
  for (const auto& v : values) out.call<void>("push", double(v));
  return out;
}

// Throws Error(bad_argument) naming the first key of a plain options object that is not in `keys`.
template <size_t N>
void check_keys(const val& o, const char* const (&keys)[N], const char* call) {
  const val names = val::global("Object").call<val>("keys", o);
  for (int i = 0; i < names["length"].as<int>(); ++i) {
    const std::string key = names[i].as<std::string>();
    if (std::find(std::begin(keys), std::end(keys), key) != std::end(keys)) continue;
    std::string known;
    for (const char* k : keys) known += std::string(known.empty() ? "" : ", ") + k;
    throw Error(ErrorCode::bad_argument, "unknown option '" + key + "' (" + call + " takes " + known + ")");
  }
}

// An object mask from JS: `n` bytes (H·W at the model's input size), nonzero = object.
std::vector<uint8_t> mask_in(const val& v, int n, const char* what) {
  std::vector<uint8_t> mask = copy_in<uint8_t>(v, n, what);
  if (int(mask.size()) != n)
    throw Error(ErrorCode::bad_shape, std::string("option ") + what + " must hold " + std::to_string(n) +
                                          " bytes, one per pixel of the model's input (Input.maskFromImage makes one "
                                          "from an image file)");
  return mask;
}

// One order of a perturbation or ROAD curve as JS: fraction and removed pixels per step, the
// arg-max class (top), the target's probability (prob) and logit, whether the arg-max is the
// target (correct), and the two AUCs (core's perturbation_auc).
val curve_to_js(const PerturbationCurve& curve, const std::array<double, perturbation_steps>& prob,
                const std::array<double, perturbation_steps>& correct, double auc_prob, double auc_correct, int target) {
  std::array<double, perturbation_steps> fraction{}, logit{};
  std::array<int, perturbation_steps> top{};
  for (size_t s = 0; s < size_t(perturbation_steps); ++s) {
    fraction[s] = double(s) / 10.0;
    top[s] = arg_max_class(curve.logits[s]);
    logit[s] = curve.logits[s][target];
  }
  val o = val::object();
  o.set("positive", curve.positive);
  o.set("fraction", numbers_to_js(fraction));
  o.set("removed", numbers_to_js(curve.removed));
  o.set("top", numbers_to_js(top));
  o.set("prob", numbers_to_js(prob));
  o.set("logit", numbers_to_js(logit));
  o.set("correct", numbers_to_js(correct));
  o.set("aucProb", auc_prob);
  o.set("aucAccuracy", auc_correct);
  return o;
}

// A head mask from JS: an array (or typed array) of depth × heads numbers, 1 = on, 0 = off, flat
// index l·H + h; null or undefined: every head on (an empty mask).
std::vector<float> head_mask_from_js(const val& mask, const Config& c) {
  if (mask.isUndefined() || mask.isNull()) return {};
  const int total = c.depth * c.heads;
  const std::string what = "the head mask must be " + std::to_string(c.depth) + " × " + std::to_string(c.heads) + " = " +
                           std::to_string(total) + " numbers, 1 (on) or 0 (off), block by block";
  const val length = mask["length"];
  if (!length.isNumber() || length.as<double>() != double(total)) throw Error(ErrorCode::bad_argument, what);
  std::vector<float> out(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    const val v = mask[i];
    const double x = v.isNumber() ? v.as<double>() : v.isTrue() ? 1.0 : v.isFalse() ? 0.0 : -1.0;
    if (x != 0.0 && x != 1.0) throw Error(ErrorCode::bad_argument, what + "; entry " + std::to_string(i) + " is not");
    out[size_t(i)] = float(x);
  }
  return out;
}

// One input of a model, prepared by Model.prepare* (or Input.withHeadMask): its forward pass, with
// the heads its mask switches off, and what explain derived from it (ExplainState). The caller owns
// it (.delete()). Inputs share the immutable model and nothing else, so several can be alive at
// once and no result depends on the order of calls.
class WasmInput {
 public:
  WasmInput(std::shared_ptr<const Model> m, Image x, std::vector<float> head_mask = {})
      : model_(std::move(m)), x_(std::move(x)) {
    state_.set_input(*model_, x_, head_mask);
  }

  // The same image with the heads `mask` switches off (head_mask_from_js): a new Input the caller
  // owns, whose prediction and every explanation are of the masked model (methods.h, ExplainState).
  // This input is unchanged.
  WasmInput* with_head_mask(val mask) const {
    return guarded([&] { return new WasmInput(model_, x_, head_mask_from_js(mask, model_->config)); });
  }

  // This input's head mask: depth × heads numbers (1 on, 0 off), all 1 for an input without one.
  val head_mask() const {
    const Config& c = model_->config;
    std::vector<float> m = state_.trace.head_mask;
    if (m.empty()) m.assign(size_t(c.depth) * size_t(c.heads), 1.0f);
    return float32_out(m.data(), m.size());
  }

  // One image's pruning curve (core's image_pruning_curve): the image with every head on (whatever
  // this input's mask), then with the first k heads of an order switched off, k = 1 … the order's
  // length. Options: {order: flat indices l·H + h (e.g. the heads in the order a user clicked
  // them), or ranking: 'attattr' | 'attention-max' | 'attention-confidence' | 'taylor-loss' |
  // 'taylor-prob' (this image's heads by core's image_head_ranking; needs an input without a head
  // mask), count (the first `count` heads of the order only), target = −1 (the unpruned
  // prediction), and for the attattr ranking steps = 20, threads, attattr (an explanation's attattr
  // for this input and target, reused); onProgress(fraction) as explain's: returning false cancels}.
  // The input keeps the steps of its last few curves (core's PruningKept): a stopped curve goes on
  // where it was, an order that adds a head to a kept one runs one step, one that drops heads from
  // its end none. Returns {target, original, ranking ('order' when given),
  // order, heads ('B.H' each), prob, logit, top (k = 0 … K), firstChange (−1: none), and for a
  // ranking scores (depth × heads)}.
  val pruning_curve(val options) {
    return guarded([&] {
      const Config& c = model_->config;
      const val o = options_object(options);
      const val order_js = o["order"], ranking_js = o["ranking"];
      const bool has_order = !order_js.isUndefined() && !order_js.isNull();
      const bool has_ranking = !ranking_js.isUndefined() && !ranking_js.isNull();
      if (has_order == has_ranking) throw Error(ErrorCode::bad_argument, "pruningCurve needs either order or ranking");
      const int target = resolve_target(int_option(o, "target", -1));
      // onProgress(fraction): the attattr ranking's matrices the first 70 %, the curve the rest;
      // returning false cancels (Error "cancelled: …").
      const val on_progress = o["onProgress"];
      if (!on_progress.isUndefined() && !on_progress.isNull() && on_progress.typeOf().as<std::string>() != "function")
        throw Error(ErrorCode::bad_argument, "option onProgress must be a function");
      const bool reports = !on_progress.isUndefined() && !on_progress.isNull();
      double from = 0.0, span = 1.0;  // the share of the bar the current step fills
      const ProgressFn progress = [&](double f) { return !reports || !on_progress(from + span * f).isFalse(); };
      std::vector<int> order;
      val result = val::object();
      if (has_order) {
        if (!order_js.isArray()) throw Error(ErrorCode::bad_argument, "option order must be an array of head indices l·H + h");
        const int n = order_js["length"].as<int>();
        if (n > c.depth * c.heads) throw Error(ErrorCode::bad_argument, "option order names more heads than the model has");
        for (int i = 0; i < n; ++i) {
          const val v = order_js[i];
          const double f = v.isNumber() ? v.as<double>() : -1.0;
          if (f != std::floor(f) || f < 0 || f >= double(c.depth * c.heads))
            throw Error(ErrorCode::bad_argument, "option order: entry " + std::to_string(i) + " is not a head index 0…" +
                                                     std::to_string(c.depth * c.heads - 1));
          order.push_back(int(f));
        }
        result.set("ranking", std::string("order"));
      } else {
        if (!ranking_js.isString()) throw Error(ErrorCode::bad_argument, "option ranking must be a string");
        const HeadRanking r = parse_head_ranking(ranking_js.as<std::string>());
        int attr_target = target;
        const bool computes = r == HeadRanking::attattr && (o["attattr"].isUndefined() || o["attattr"].isNull());
        if (computes) span = 0.7;
        const std::vector<AttAttrBlock> attr = r == HeadRanking::attattr ? attattr_of(options, attr_target, progress) : std::vector<AttAttrBlock>{};
        if (computes) {
          from = 0.7;
          span = 0.3;
        }
        const ImageHeadRanking ranked = image_head_ranking(*model_, state_.trace, target, r, attr);
        order = ranked.order;
        result.set("ranking", std::string(head_ranking_name(r)));
        result.set("scores", grid_to_js(ranking_scores(ranked.scores, r)));
      }
      const int count = int_option(o, "count", int(order.size()));
      if (count < 0) throw Error(ErrorCode::bad_argument, "option count must be ≥ 0");
      if (size_t(count) < order.size()) order.resize(size_t(count));
      const ImagePruningCurve curve = image_pruning_curve(*model_, x_, order, target, progress, &pruning_);
      val heads = val::array();
      for (int f : curve.order) heads.call<void>("push", head_name(f, c));
      result.set("target", curve.target);
      result.set("original", curve.original);
      result.set("order", numbers_to_js(curve.order));
      result.set("heads", heads);
      result.set("prob", numbers_to_js(curve.prob));
      result.set("logit", numbers_to_js(curve.logit));
      result.set("top", numbers_to_js(curve.top));
      result.set("firstChange", curve.first_change);
      return result;
    });
  }

  // The k best classes, best first.
  val predict(int k) const {
    return guarded([&] {
      if (k < 1) throw Error(ErrorCode::bad_argument, "k must be at least 1");
      return predictions_to_js(model_->config, top_k(model_->config, state_.trace.logits, k));
    });
  }

  val logits() const { return float32_out(state_.trace.logits.data(), size_t(state_.trace.logits.size())); }

  // The normalised C×H×W tensor the model sees.
  val tensor() const { return float32_out(x_.data.data(), x_.data.size()); }

  // An attribution map of this input. `method_spec` is a method name or a method spec
  // "NAME:key=value…" (options.h), combined with the options object by core's apply_method_spec (a
  // key given both ways is an error). Its forward pass is reused, and so are the backward and
  // relevance passes while the target class (and the rule set) stays the same.
  val explain_js(val method_spec, val options) {
    return guarded([&] {
      const std::string spec = string_arg(method_spec, "method");
      Image baseline;
      MethodOptions opt = options_from_js(options, model_->config, baseline);
      const MethodInfo& info = apply_method_spec(spec, opt, &model_->config);
      const Explanation ex = explain(*model_, state_, info.name, opt);
      return explanation_to_js(ex, info.reports_relevance ? &ex.conservation : nullptr);
    });
  }

  // The guided walk through `method_spec` (transformer-attribution, attnlrp, rollout: core's
  // method_walk) on this input. `options`: the method's options as explain() takes them, and two
  // of the walk's own: query (a token whose rows the steps draw; −1, the default, the method's
  // query q) and matrices (default true: each step's n×n matrix where the matrix is the point).
  val walk_js(val method_spec, val options) {
    return guarded([&] {
      const std::string spec = string_arg(method_spec, "method");
      const val given = options_object(options);
      WalkOptions w;
      w.query = int_option(given, "query", -1);
      w.matrices = bool_option(given, "matrices", true);
      // The method's own options: everything else (core rejects the keys the method does not read).
      val rest = val::global("Object").call<val>("assign", val::object(), given);
      rest.delete_("query");
      rest.delete_("matrices");
      if (!rest["intermediates"].isUndefined())
        throw Error(ErrorCode::bad_argument, "walk takes no intermediates option: its steps carry them");
      Image baseline;
      MethodOptions opt = options_from_js(rest, model_->config, baseline);
      const MethodInfo& info = apply_method_spec(spec, opt, &model_->config);
      return walk_to_js(method_walk(*model_, state_, info.name, opt, w));
    });
  }

  // Per block, per head, the attention A (n·n Float32Arrays, row i = query i): the teaching view
  // of each head's attention for a chosen query patch.
  val attention() const {
    return guarded([&] {
      std::vector<const std::vector<Mat>*> blocks;
      for (const BlockTrace& b : state_.trace.blocks) blocks.push_back(&b.attn);
      return mats_out(blocks);
    });
  }

  // Per block, per head, ∂y_t/∂A for class `target` (−1: the predicted class), same layout: the
  // gradients the methods read (target_grads), computed once per class and kept for them; after a
  // gradient method's explanation of that class (the page's teaching view asks right after one)
  // no backward pass runs.
  val attention_grads(int target) {
    return guarded([&] {
      const Grads& g = target_grads(*model_, state_, resolve_target(target));
      std::vector<const std::vector<Mat>*> blocks;
      for (const BlockGrads& b : g.blocks) blocks.push_back(&b.attn);
      return mats_out(blocks);
    });
  }

  // The perturbation test of `map` (H×W at the model's input size) in one direction, by core's
  // perturbation_curve, as `vitlens eval` runs it: options {positive = true, target = −1 (the
  // arg-max class), inputs = false (also return each step's perturbed C×H×W input),
  // onProgress(fraction) (after each forward pass; returning false cancels: Error "cancelled: …")}.
  // The input keeps the steps of its last few maps and directions (core's PerturbationKept): a
  // stopped test of the same map goes on from the step it was in.
  val perturbation(val map_js, val options_js) {
    return guarded([&] {
      const Config& c = model_->config;
      if (!state_.trace.head_mask.empty())
        throw Error(ErrorCode::bad_argument,
                    "the perturbation test runs the model with every head on: call it on the input without a head mask");
      const val options = options_object(options_js);
      static const char* const keys[] = {"positive", "target", "inputs", "onProgress"};
      check_keys(options, keys, "perturbation");
      const bool positive = bool_option(options, "positive", true);
      const int target = resolve_target(int_option(options, "target", -1), true);
      const bool want_inputs = bool_option(options, "inputs", false);
      const ProgressFn progress = progress_in(options["onProgress"]);
      bool nonfinite = false;
      const std::vector<float> map = map_in(map_js, nonfinite);
      val inputs = val::array();
      // Step s ≥ 1 follows a forward pass: perturbation_steps − 1 of them.
      const PerturbationStepFn on_step = [&](int s, const Image& x) {
        if (want_inputs) inputs.call<void>("push", float32_out(x.data.data(), x.data.size()));
        if (s > 0 && progress && !progress(double(s) / double(perturbation_steps - 1)))
          throw Error(ErrorCode::cancelled, "the perturbation test was cancelled");
      };
      PerturbationCurve curve;
      PerturbationWork work;
      perturbation_curve(curve, work, *model_, x_, state_.trace.logits, map.data(), int(map.size()), positive, on_step,
                         &perturbation_);
      std::array<double, perturbation_steps> prob{}, correct{};
      for (size_t s = 0; s < size_t(perturbation_steps); ++s) {
        prob[s] = output_probs(c, curve.logits[s])[target];
        correct[s] = arg_max_class(curve.logits[s]) == target ? 1.0 : 0.0;
      }
      val o = curve_to_js(curve, prob, correct, perturbation_auc(prob), perturbation_auc(correct), target);
      o.set("target", target);
      o.set("nonfinite", nonfinite);
      if (want_inputs) o.set("inputs", inputs);
      return o;
    });
  }

  // Every faithfulness figure of `map` (H×W at the model's input size) for one class, by core's
  // map_faithfulness (what `vitlens eval` records per sample): options {target = −1 (the arg-max
  // class), black = true (the perturbation test, both orders), road = false (ROAD, both orders),
  // roadNoise = 0.01, roadSeed = 0, mask / otherMask (H·W bytes, nonzero = the explained object /
  // a second object: maskFromImage), onProgress(fraction) (after each forward pass; returning
  // false cancels: Error "cancelled: …")}. The perturbation test reads and extends the steps the
  // input keeps (as perturbation's): a map the live test ran costs no forward pass here.
  val faithfulness(val map_js, val options_js) {
    return guarded([&] {
      const Config& c = model_->config;
      const int hw = c.image_h * c.image_w;
      const val options = options_object(options_js);
      static const char* const keys[] = {"target", "black", "road", "roadNoise", "roadSeed", "mask", "otherMask", "onProgress"};
      check_keys(options, keys, "faithfulness");
      MapFaithfulnessOptions fo;
      fo.cls = resolve_target(int_option(options, "target", -1), true);
      fo.black = bool_option(options, "black", true);
      fo.road = bool_option(options, "road", false);
      fo.road_options.noise = number_option(options, "roadNoise", fo.road_options.noise);
      const double seed = number_option(options, "roadSeed", 0);
      if (!(seed >= 0 && seed <= 9007199254740991.0 && seed == std::floor(seed)))
        throw Error(ErrorCode::bad_argument, "option roadSeed must be an integer from 0 to 2^53 − 1");
      fo.road_options.seed = uint64_t(seed);
      std::vector<uint8_t> mask, other;
      const val mask_js = options["mask"], other_js = options["otherMask"];
      if (!mask_js.isUndefined() && !mask_js.isNull()) mask = mask_in(mask_js, hw, "mask");
      if (!other_js.isUndefined() && !other_js.isNull()) other = mask_in(other_js, hw, "otherMask");
      if (!mask.empty()) fo.mask = mask.data();
      if (!other.empty()) fo.other = other.data();
      fo.progress = progress_in(options["onProgress"]);
      fo.kept = &perturbation_;
      bool nonfinite = false;
      const std::vector<float> map = map_in(map_js, nonfinite);
      MapFaithfulness f;
      PerturbationWork work;
      map_faithfulness(f, work, *model_, x_, state_.trace.logits, map.data(), int(map.size()), fo);
      auto orders = [&](const std::array<FaithfulnessCurve, 2>& curves, double srg) {
        val o = val::object();
        const char* names[2] = {"positive", "negative"};
        for (size_t d = 0; d < 2; ++d) {
          const FaithfulnessCurve& fc = curves[d];
          o.set(names[d], curve_to_js(fc.curve, fc.prob, fc.hit, fc.auc_prob, fc.auc_hit, f.cls));
        }
        o.set("srg", srg);
        return o;
      };
      val o = val::object();
      o.set("target", f.cls);
      o.set("nonfinite", nonfinite);
      o.set("black", f.black ? orders(f.black_curves, f.srg_black) : val::null());
      val road = val::null();
      if (f.road) {
        road = orders(f.road_curves, f.srg_road);
        road.set("noise", fo.road_options.noise);
        road.set("seed", double(fo.road_options.seed));
      }
      o.set("road", road);
      val m = val::null();
      if (f.masked) {
        m = val::object();
        m.set("massAccuracy", f.mass_accuracy);
        m.set("rankAccuracy", f.rank_accuracy);
        m.set("pointing", f.pointing);
        m.set("pixelAccuracy", f.seg.pixel_accuracy());
        m.set("iouBackground", f.seg.iou(0));
        m.set("iouObject", f.seg.iou(1));
        m.set("miou", f.seg.miou());
        m.set("ap", f.seg_ap);
        m.set("share", f.two ? val(f.share) : val::null());
        int pixels = 0;
        for (uint8_t v : mask) pixels += v != 0;
        m.set("maskPixels", pixels);
      }
      o.set("mask", m);
      return o;
    });
  }

  // A 0/1 object mask at this input's size (H·W bytes, row-major) from an image file's bytes (PNG,
  // JPEG, BMP…; a pixel is object when any colour channel is nonzero), resized by nearest
  // neighbour: core's resize_mask_nearest, as `vitlens eval --masks` reads masks.
  val mask_from_image(val bytes) const {
    return guarded([&] {
      const Config& c = model_->config;
      const std::vector<uint8_t> b = copy_in<uint8_t>(bytes, limits::max_image_file_bytes, "mask image bytes");
      const Pixels px = decode_image(b.data(), b.size());
      const std::vector<uint8_t> mask = resize_mask_nearest(px, c.image_w, c.image_h);
      return val::global("Uint8Array").new_(emscripten::typed_memory_view(mask.size(), mask.data()));
    });
  }

  // Per block, per head, the atb stage's norm map ‖A_h[i, j]·V_h'[j]‖ (norm_head_maps), n·n
  // Float32Arrays: what encodeNormStages stores as atb_heads.
  val norm_heads() const {
    return guarded([&] {
      std::vector<std::vector<Mat>> maps;
      for (int b = 0; b < model_->config.depth; ++b) maps.push_back(norm_head_maps(*model_, state_.trace, b));
      std::vector<const std::vector<Mat>*> blocks;
      for (const std::vector<Mat>& m : maps) blocks.push_back(&m);
      return mats_out(blocks);
    });
  }

  // The attribution tree (Hao et al. 2021) by core's attattr_tree: options {threshold = 0.4,
  // target = −1, steps = 20, threads, attattr (an explanation's attattr for this input and
  // target: reused instead of computed again)}. Returns attr_tree_json's object plus target.
  val attr_tree(val options) {
    return guarded([&] {
      const double threshold = number_option(options_object(options), "threshold", 0.4);
      if (!(threshold >= 0.0 && threshold < 1.0))
        throw Error(ErrorCode::bad_argument, "option threshold must be in [0, 1): entries are normalised to at most 1");
      int target = 0;
      const std::vector<AttAttrBlock> attr = attattr_of(options, target);
      val o = val::global("JSON").call<val>("parse", attr_tree_json(attattr_tree(attr, threshold, model_->config.prefix()), model_->config));
      o.set("target", target);
      return o;
    });
  }

  // Per-head scores of this input (core's head_scores_add over one image): {attattr, attention,
  // taylor} as L×H arrays of numbers, and target. Options as attrTree's (without threshold).
  val head_scores(val options) {
    return guarded([&] {
      int target = 0;
      const std::vector<AttAttrBlock> attr = attattr_of(options, target);
      HeadScores s = head_scores_zero(model_->config);
      head_scores_add(s, *model_, state_.trace, target, attr);
      val o = val::object();
      o.set("attattr", grid_to_js(s.attattr));
      o.set("attention", grid_to_js(s.attention));
      o.set("taylor", grid_to_js(s.taylor));
      o.set("target", target);
      return o;
    });
  }

 private:
  // −1 → the predicted class (top_k's first, as explain; arg_max_class for the perturbation test,
  // as the benchmark); else checked against the model's classes.
  int resolve_target(int target, bool arg_max = false) const {
    const Config& c = model_->config;
    if (target < -1 || target >= c.classes)
      throw Error(ErrorCode::bad_argument, "target class " + std::to_string(target) + " is out of range: the model has " +
                                               std::to_string(c.classes) + " classes");
    if (target >= 0) return target;
    return arg_max ? arg_max_class(state_.trace.logits) : top_k(c, state_.trace.logits, 1)[0].cls;
  }

  // A map from JS (H·W floats at the model's input size); NaN and ±Inf become 0 (core's
  // zero_nonfinite, as the benchmark does), and set `nonfinite`.
  std::vector<float> map_in(const val& map_js, bool& nonfinite) const {
    const Config& c = model_->config;
    std::vector<float> map = copy_in<float>(map_js, int64_t(c.image_h) * c.image_w, "the map");
    nonfinite = zero_nonfinite(map.data(), int(map.size()));
    return map;
  }

  // The attattr blocks the options give, or computed for their target and steps (reporting to
  // `progress`, which may be empty, and stopping with Error(cancelled) when it returns false),
  // going on from what this input's attattr explanations and rankings computed (state_.attattr).
  std::vector<AttAttrBlock> attattr_of(const val& options, int& target, const ProgressFn& progress = {}) {
    const val o = options_object(options);
    target = resolve_target(int_option(o, "target", -1));
    const val given = o["attattr"];
    if (!given.isUndefined() && !given.isNull()) return attattr_from_js(given, model_->config);
    const int steps = int_option(o, "steps", 20);
    if (steps < 1 || steps > 10000) throw Error(ErrorCode::bad_argument, "option steps must be 1…10000");
    const int threads = int_option(o, "threads", thread_limit());
    if (threads < 1) throw Error(ErrorCode::bad_argument, "option threads must be at least 1");
    return attattr_blocks(*model_, state_.trace, target, steps, threads, progress, &state_.attattr);
  }

  std::shared_ptr<const Model> model_;  // shared with the Model handle and the other inputs
  Image x_;                             // (C, H, W) normalised
  ExplainState state_;                  // this input's forward pass and what explain derived from it
  PerturbationKept perturbation_;       // the perturbation test's steps done, for its last maps
  PruningKept pruning_;                 // the pruning curves' steps done
};

// A loaded model: immutable, shared by the inputs prepared from it (deleting the handle frees the
// weights once no input needs them), its linear weights packed for the forward pass once here,
// where it becomes immutable (pack_weights, model.h).
class WasmModel {
  static std::shared_ptr<const Model> packed(Model m) {
    auto shared = std::make_shared<Model>(std::move(m));
    pack_weights(*shared);
    return shared;
  }

 public:
  explicit WasmModel(Model m) : model_(packed(std::move(m))) {}

  static WasmModel* from_bytes(val bytes) {
    return guarded([&] {
      const std::vector<uint8_t> b = copy_in<uint8_t>(bytes, limits::max_model_file_bytes, "model bytes");
      return new WasmModel(load_model(b.data(), b.size()));
    });
  }

  static WasmModel* from_safetensors(val ckpt, val config_json) {
    return from_safetensors_with(ckpt, config_json, val::undefined());
  }

  // The checkpoint is read from the JS array one tensor at a time (core's ByteReader), never copied
  // into the wasm heap whole: a ViT-B/16 (330 MB of F32) needs its weights' 330 MB, not twice that.
  // Options: {onProgress(fraction)}, called after each tensor with the share of the checkpoint's
  // bytes converted; returning false cancels (Error "cancelled: …").
  static WasmModel* from_safetensors_with(val ckpt, val config_json, val options) {
    return guarded([&] {
      const val bytes = byte_array(ckpt, limits::max_model_file_bytes, "checkpoint");
      const std::string config = string_arg(config_json, "config.json text");
      const val o = options_object(options);
      ImportProgressFn progress;
      bool int8 = false;
      const val keys = val::global("Object").call<val>("keys", o);
      for (int i = 0; i < keys["length"].as<int>(); ++i) {
        const std::string key = keys[i].as<std::string>();
        const val v = o[key];
        if (key != "onProgress" && key != "storage")
          throw Error(ErrorCode::bad_argument, "unknown option '" + key + "' (fromSafetensors takes onProgress, storage)");
        if (v.isUndefined() || v.isNull()) continue;
        if (key == "storage") {
          const std::string storage = v.isString() ? v.as<std::string>() : "";
          if (storage != "f32" && storage != "int8") throw Error(ErrorCode::bad_argument, "option storage must be 'f32' or 'int8'");
          int8 = storage == "int8";
          continue;
        }
        progress = progress_in(v);
      }
      const ByteReader read = [&bytes](uint64_t offset, size_t n, uint8_t* out) {
        const val part = bytes.call<val>("subarray", double(offset), double(offset + n));
        val(emscripten::typed_memory_view(n, out)).call<void>("set", part);  // no allocation since `out`: the view is fresh
      };
      const SafeTensors st = parse_safetensors(read, uint64_t(bytes["length"].as<double>()));
      Model m = import_checkpoint(st, config, nullptr, progress);
      if (int8) quantise_in_place(m);  // as a saved int8 file would load, without a second copy
      return new WasmModel(std::move(m));
    });
  }

  val info() const {
    const Model& m = *model_;
    const Config& c = m.config;
    val o = val::object();
    o.set("imageH", c.image_h);
    o.set("imageW", c.image_w);
    o.set("channels", c.channels);
    o.set("patch", c.patch);
    o.set("dim", c.dim);
    o.set("depth", c.depth);
    o.set("heads", c.heads);
    o.set("mlpDim", c.mlp_dim);
    o.set("classes", c.classes);
    o.set("lnEps", c.ln_eps);
    o.set("multiLabel", c.output == OutputKind::sigmoid);
    o.set("params", double(param_count(c)));
    o.set("storedInt8", m.stored_int8);
    o.set("provenance", m.provenance);
    val names = val::array();
    for (const std::string& n : c.class_names) names.call<void>("push", n);
    o.set("classNames", names);
    val mean = val::array(), stdv = val::array();
    for (float v : c.mean) mean.call<void>("push", v);
    for (float v : c.std) stdv.call<void>("push", v);
    o.set("mean", mean);
    o.set("std", stdv);
    // The token sequence [CLS][DIST][REG × r][patches] and the variant (METHODS.md).
    o.set("tokens", c.tokens());
    o.set("prefix", c.prefix());
    val kinds = val::array();
    if (c.class_token) kinds.call<void>("push", std::string("cls"));
    if (c.dist_token) kinds.call<void>("push", std::string("dist"));
    for (int r = 0; r < c.registers; ++r) kinds.call<void>("push", std::string("reg"));
    o.set("prefixKinds", kinds);
    o.set("pooling", std::string(c.dist_token ? "distilled" : pooling_name(c.pool)));
    o.set("activation", std::string(activation_name(c.act)));
    o.set("layerScale", c.layer_scale);
    o.set("preNorm", c.pre_norm);
    o.set("fcNorm", c.fc_norm);
    o.set("finalNorm", c.final_norm);
    const VecD q = query_weights(c);
    o.set("query", float32_out(q.cast<float>().eval().data(), size_t(q.size())));
    val grid = val::array();
    grid.call<void>("push", c.pos_grid_h ? c.pos_grid_h : c.grid_h());
    grid.call<void>("push", c.pos_grid_w ? c.pos_grid_w : c.grid_w());
    o.set("checkpointGrid", grid);
    return o;
  }

  // The model at another input size (pixels, multiples of the patch): a new Model whose position
  // embedding is resampled (core's resize_input). This model is unchanged.
  WasmModel* at_input_size(int h, int w) const {
    return guarded([&] { return new WasmModel(resize_input(*model_, h, w)); });
  }

  // [h, w]: the input size for an image of imgH × imgW pixels at its own aspect, with about as
  // many patches as the checkpoint (core's aspect_input_size).
  val aspect_input_size_js(int img_h, int img_w) const {
    return guarded([&] {
      int h = 0, w = 0;
      aspect_input_size(model_->config, img_h, img_w, h, w);
      val out = val::array();
      out.call<void>("push", h);
      out.call<void>("push", w);
      return out;
    });
  }

  // The model input (C×H×W, normalised) from RGBA pixels of any size.
  val preprocess_rgba(val rgba, int w, int h) const {
    return guarded([&] {
      const Image x = image_from_rgba(rgba, w, h);
      return float32_out(x.data.data(), x.data.size());
    });
  }

  // An input from RGBA pixels of any size (resized and normalised as preprocessRGBA).
  WasmInput* prepare_rgba(val rgba, int w, int h) const {
    return guarded([&] { return new WasmInput(model_, image_from_rgba(rgba, w, h)); });
  }

  // An input from a normalised C×H×W tensor, used exactly.
  WasmInput* prepare(val data) const {
    return guarded([&] {
      const Config& c = model_->config;
      const std::vector<float> v = copy_in<float>(data, limits::max_npy_elements, "tensor");
      if (v.size() != size_t(c.channels) * c.image_h * c.image_w)
        throw Error(ErrorCode::bad_shape, "the tensor has " + std::to_string(v.size()) + " values; the model needs " +
                                              std::to_string(c.channels) + "×" + std::to_string(c.image_h) + "×" +
                                              std::to_string(c.image_w));
      Image x(c.channels, c.image_h, c.image_w);
      x.data = v;
      return new WasmInput(model_, std::move(x));
    });
  }

  val save(val storage_name) const {
    return guarded([&] {
      const std::string storage = string_arg(storage_name, "storage");
      if (storage != "f32" && storage != "int8") throw Error(ErrorCode::bad_argument, "storage must be f32 or int8");
      const std::vector<uint8_t> b = save_model(*model_, storage == "int8" ? Storage::int8 : Storage::f32);
      return val::global("Uint8Array").new_(emscripten::typed_memory_view(b.size(), b.data()));
    });
  }

 private:
  Image image_from_rgba(const val& rgba, int w, int h) const {
    if (w < 1 || h < 1 || int64_t(w) * h > limits::max_decoded_pixels)
      throw Error(ErrorCode::bad_image, "image size " + std::to_string(w) + "×" + std::to_string(h) + " is invalid or too large");
    Pixels px;
    px.w = w;
    px.h = h;
    px.channels = 4;
    px.data = copy_in<uint8_t>(rgba, limits::max_decoded_pixels * 4, "RGBA pixels");
    if (px.data.size() != size_t(w) * size_t(h) * 4)
      throw Error(ErrorCode::bad_image, "RGBA data has " + std::to_string(px.data.size()) + " bytes for a " +
                                            std::to_string(w) + "×" + std::to_string(h) + " image");
    return preprocess(px, model_->config);
  }

  std::shared_ptr<const Model> model_;
};

// The method registry crosses to JS as one JSON text, parsed there once. Built value by value
// through Embind (a JS call per property) it took 10–22 ms in node and 16–65 ms in the page's
// worker, on the way to the first explanation (issue 15), mostly the first call's compiling of
// the many Embind instantiations; this writer is a few small functions.
class JsonText {
 public:
  JsonText& begin_object() { return open('{'); }
  JsonText& end_object() { return close('}'); }
  JsonText& begin_array() { return open('['); }
  JsonText& end_array() { return close(']'); }
  // The next value's key (inside an object).
  JsonText& key(const char* k) {
    separate();
    quoted(k);
    out_ += ':';
    first_ = true;
    return *this;
  }
  JsonText& value(const std::string& v) {
    separate();
    quoted(v);
    return *this;
  }
  JsonText& value(const char* v) { return value(std::string(v)); }
  JsonText& value(bool v) { return raw(v ? "true" : "false"); }
  // %.17g reads back as the same double; JSON has no Infinity or NaN: null.
  JsonText& value(double v) {
    if (!std::isfinite(v)) return null();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return raw(buf);
  }
  JsonText& null() { return raw("null"); }
  const std::string& text() const { return out_; }

 private:
  JsonText& open(char c) {
    separate();
    out_ += c;
    first_ = true;
    return *this;
  }
  JsonText& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  JsonText& raw(const char* v) {
    separate();
    out_ += v;
    return *this;
  }
  void separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  // "…" with ", \ and control characters escaped; UTF-8 passes through. The runs between the
  // characters to escape are appended whole: a character at a time was a call each through the
  // JS exception trampolines of a threaded build without clang-16 (core/CMakeLists.txt).
  void quoted(const std::string& v) {
    out_ += '"';
    size_t run = 0;  // the first character not yet appended
    for (size_t i = 0; i < v.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(v[i]);
      if (c != '"' && c != '\\' && c >= 0x20) continue;
      out_.append(v, run, i - run);
      run = i + 1;
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += char(c);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ += buf;
      }
    }
    out_.append(v, run, std::string::npos);
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;  // no comma before the next value
};

// A bound of an option: the number, or null when it depends on the model (then its `…Of` names
// the bound: "lastBlock", "lastClass"); a build-dependent one (the thread limit) resolved.
void bound_json(JsonText& o, const char* name, const OptionBound& b) {
  const bool model_dependent = b.ref == OptionRef::last_block || b.ref == OptionRef::last_class;
  if (model_dependent) o.key(name).null();
  else o.key(name).value(resolve(b, nullptr));
  const std::string of = std::string(name) + "Of";
  if (model_dependent) o.key(of.c_str()).value(camel_case(option_ref_name(b.ref)));
  else o.key(of.c_str()).null();
}

// One option of `method` (a method option's choices: every other method).
void option_spec_json(JsonText& o, const OptionSpec& s, const MethodInfo& method) {
  o.begin_object();
  o.key("key").value(s.key);
  o.key("jsKey").value(s.js_key());
  o.key("flag").value(s.flag());
  o.key("aliases").begin_array();
  for (const OptionSpec::Alias& a : s.aliases) {
    o.begin_object();
    o.key("word").value(a.word);
    o.key("jsKey").value(camel_case(a.word));
    o.key("value").value(a.value);
    o.end_object();
  }
  o.end_array();
  o.key("kind").value(option_kind_name(s.kind));
  o.key("choices").begin_array();
  if (s.kind == OptionKind::choice)
    for (const std::string& c : s.choices) o.value(c);
  if (s.kind == OptionKind::method)
    for (const MethodInfo& m : method_registry())
      if (&m != &method) o.value(m.name);
  o.end_array();
  o.key("choiceHelp").begin_array();
  for (const std::string& h : s.choice_help) o.value(h);
  o.end_array();
  if (s.kind == OptionKind::integer || s.kind == OptionKind::number) {
    bound_json(o, "min", s.min);
    bound_json(o, "max", s.max);
  } else {
    for (const char* k : {"min", "minOf", "max", "maxOf"}) o.key(k).null();
  }
  o.key("default");
  switch (s.kind) {
    case OptionKind::integer:
    case OptionKind::number: o.value(resolve(s.def, nullptr)); break;
    case OptionKind::flag: o.value(s.def.value != 0); break;
    case OptionKind::choice: o.value(s.choices[size_t(s.def.value)]); break;
    case OptionKind::method: o.value(s.def_text); break;
    case OptionKind::image: o.null(); break;  // black
  }
  o.key("defaultText").value(default_text(s));
  o.key("zeroIsDefault").value(s.zero_is_default);
  if (s.min_means) o.key("minMeans").value(s.min_means);
  else o.key("minMeans").null();
  o.key("help").value(s.help);
  o.end_object();
}

void output_spec_json(JsonText& o, const OutputSpec& s) {
  o.begin_object();
  o.key("key").value(s.key);
  o.key("jsKey").value(s.js_key());
  o.key("shape").value(s.shape);
  o.key("dims").begin_array();
  for (const char* d : s.dims) o.value(d);
  o.end_array();
  o.key("when").value(s.when);
  o.key("help").value(s.help);
  o.end_object();
}

// An explanation's norm output (L × {maps: {stage: n·n}, mixing: {stage: n}}, every stage) back
// into core's blocks; `n` is set to the side of the maps.
std::vector<NormBlock> norm_blocks_in(const val& norm, int& n) {
  if (!norm.isArray() || norm["length"].as<int>() < 1)
    throw Error(ErrorCode::bad_argument, "norm must be an explanation's norm output (an array of blocks)");
  const int L = norm["length"].as<int>();
  if (L > limits::max_depth) throw Error(ErrorCode::limit, "norm has more blocks than any model");
  const int64_t max_n2 = limits::max_tokens * limits::max_tokens;
  std::vector<NormBlock> blocks(static_cast<size_t>(L));  // (L)
  n = -1;
  for (int b = 0; b < L; ++b) {
    const val maps = norm[b]["maps"], mixing = norm[b]["mixing"];
    for (int s = 0; s < norm_stage_count; ++s) {
      const char* stage = norm_stage_name(NormStage(s));
      if (maps.isUndefined() || mixing.isUndefined() || maps[stage].isUndefined() || mixing[stage].isUndefined())
        throw Error(ErrorCode::bad_argument, std::string("norm block lacks the stage ") + stage);
      const std::vector<float> m = copy_in<float>(maps[stage], max_n2, "a norm map");
      const int side = int(std::lround(std::sqrt(double(m.size()))));
      if (side < 1 || int64_t(side) * side != int64_t(m.size()) || (n >= 0 && side != n))
        throw Error(ErrorCode::bad_shape, "norm maps must all be n·n values of the same n");
      n = side;
      blocks[size_t(b)].maps[s] = Eigen::Map<const Mat>(m.data(), n, n);
      const std::vector<float> r = copy_in<float>(mixing[stage], limits::max_tokens, "a mixing ratio");
      blocks[size_t(b)].mixing[s] = Eigen::Map<const Vec>(r.data(), Eigen::Index(r.size()));
    }
  }
  return blocks;
}

// The norm-based stages as the .npz `vitlens explain --save-stages` writes (encode_norm_stages_npz):
// `norm` is an explanation's norm output (L × {maps: {stage: n·n}, mixing: {stage: n}}), `heads`
// Input.normHeads() or an empty array. Returns the file's bytes (Uint8Array).
val encode_norm_stages_js(val norm, val heads) {
  return guarded([&] {
    int n = -1;
    const std::vector<NormBlock> blocks = norm_blocks_in(norm, n);
    const int64_t max_n2 = limits::max_tokens * limits::max_tokens;
    auto square = [&](const std::vector<float>& v) {
      if (int64_t(n) * n != int64_t(v.size())) throw Error(ErrorCode::bad_shape, "head maps must be n·n values, n as the norm maps'");
    };
    std::vector<std::vector<Mat>> head_maps;
    if (!heads.isUndefined() && !heads.isNull()) {
      if (!heads.isArray()) throw Error(ErrorCode::bad_argument, "heads must be Input.normHeads() or []");
      const int hl = heads["length"].as<int>();
      for (int b = 0; b < hl && b <= limits::max_depth; ++b) {
        const val hb = heads[b];
        if (!hb.isArray()) throw Error(ErrorCode::bad_argument, "heads must be Input.normHeads() or []");
        std::vector<Mat> per;
        for (int h = 0; h < hb["length"].as<int>() && h <= limits::max_heads; ++h) {
          const std::vector<float> m = copy_in<float>(hb[h], max_n2, "a head map");
          square(m);
          per.push_back(Eigen::Map<const Mat>(m.data(), n, n));
        }
        head_maps.push_back(std::move(per));
      }
    }
    const std::vector<uint8_t> bytes = encode_norm_stages_npz(blocks, head_maps);
    return val::global("Uint8Array").new_(emscripten::typed_memory_view(bytes.size(), bytes.data()));
  });
}

// One image's FF effect per block (norm_image_summary, atb-res-ln → atb-res-ln-ff), from an
// explanation's norm output: L × {shareBefore, shareAfter: n·n Float32Array (s[i, j] = N[i, j] /
// Σ_{k≠i} N[i, k], s[i, i] = 0), rhoQuery: n Float64Array (ρ of each query row), rhoFlat, rhoRows,
// mixingMean: {stage: r̄}}.
val norm_image_summary_js(val norm) {
  return guarded([&] {
    int n = -1;
    const std::vector<NormImageBlock> sum = norm_image_summary(norm_blocks_in(norm, n));
    val out = val::array();
    for (const NormImageBlock& o : sum) {
      val b = val::object();
      b.set("shareBefore", mat_out(o.share_before));
      b.set("shareAfter", mat_out(o.share_after));
      b.set("rhoQuery", val::global("Float64Array").new_(emscripten::typed_memory_view(o.rho_query.size(), o.rho_query.data())));
      b.set("rhoFlat", o.rho_flat);
      b.set("rhoRows", o.rho_rows);
      val mix = val::object();
      for (int s = 0; s < norm_stage_count; ++s) mix.set(norm_stage_name(NormStage(s)), o.mixing_mean[s]);
      b.set("mixingMean", mix);
      out.call<void>("push", b);
    }
    return out;
  });
}

// The registry with each method's option and output tables (options.h).
val methods_js() {
  JsonText o;
  o.begin_array();
  for (const MethodInfo& m : method_registry()) {
    o.begin_object();
    o.key("name").value(m.name);
    o.key("description").value(m.description);
    o.key("paper").value(m.paper);
    o.key("options").begin_array();
    for (const OptionSpec& s : m.options) o.value(s.js_key());
    o.end_array();
    o.key("optionSpecs").begin_array();
    for (const OptionSpec& s : m.options) option_spec_json(o, s, m);
    o.end_array();
    o.key("outputs").begin_array();
    for (const OutputSpec& s : m.outputs) output_spec_json(o, s);
    o.end_array();
    o.key("classSpecific").value(m.class_specific);
    o.key("reportsRelevance").value(m.reports_relevance);
    o.key("conserves").value(m.conserves);
    o.key("nativePixels").value(m.native_pixels);
    o.key("longRunning").value(m.long_running);
    o.key("stepFormula").value(m.step_formula);
    o.key("featured").value(m.featured);
    o.key("walk").value(has_walk(m.name));
    o.end_object();
  }
  o.end_array();
  // The text crosses as bytes copied into a Uint8Array of JS's own and decoded there at once.
  // As a std::string, Embind reads it a byte at a time, and the threaded build's every read of
  // memory first checks whether memory has grown: half of this call's 3.0 ms in node's profile.
  const std::string& text = o.text();
  const val bytes = val::global("Uint8Array").new_(emscripten::typed_memory_view(text.size(), text.data()));
  return val::global("JSON").call<val>("parse", val::global("TextDecoder").new_().call<val>("decode", bytes));
}

val decode_image_js(val bytes) {
  return guarded([&] {
    const std::vector<uint8_t> b = copy_in<uint8_t>(bytes, limits::max_image_file_bytes, "image bytes");
    Pixels px = decode_image(b.data(), b.size());
    val o = val::object();
    o.set("width", px.w);
    o.set("height", px.h);
    o.set("channels", px.channels);
    o.set("data", val::global("Uint8Array").new_(emscripten::typed_memory_view(px.data.size(), px.data.data())));
    return o;
  });
}

// The wasm heap's size (it only grows) and the bytes malloc has handed out and not taken back:
// what leak tests compare before and after many calls.
val memory_stats_js() {
  const struct mallinfo mi = mallinfo();
  val o = val::object();
  o.set("heapBytes", double(emscripten_get_heap_size()));
  o.set("allocatedBytes", double(mi.uordblks));
  return o;
}

EMSCRIPTEN_BINDINGS(vitlens) {
  emscripten::class_<WasmModel>("Model")
      .class_function("fromBytes", &WasmModel::from_bytes, emscripten::allow_raw_pointers())
      .class_function("fromSafetensors", &WasmModel::from_safetensors, emscripten::allow_raw_pointers())
      .class_function("fromSafetensors", &WasmModel::from_safetensors_with, emscripten::allow_raw_pointers())
      .function("info", &WasmModel::info)
      .function("preprocessRGBA", &WasmModel::preprocess_rgba)
      .function("prepare", &WasmModel::prepare, emscripten::allow_raw_pointers())
      .function("prepareRGBA", &WasmModel::prepare_rgba, emscripten::allow_raw_pointers())
      .function("atInputSize", &WasmModel::at_input_size, emscripten::allow_raw_pointers())
      .function("aspectInputSize", &WasmModel::aspect_input_size_js)
      .function("save", &WasmModel::save);
  emscripten::class_<WasmInput>("Input")
      .function("predict", &WasmInput::predict)
      .function("logits", &WasmInput::logits)
      .function("tensor", &WasmInput::tensor)
      .function("explain", &WasmInput::explain_js)
      .function("walk", &WasmInput::walk_js)
      .function("attention", &WasmInput::attention)
      .function("attentionGrads", &WasmInput::attention_grads)
      .function("perturbation", &WasmInput::perturbation)
      .function("faithfulness", &WasmInput::faithfulness)
      .function("maskFromImage", &WasmInput::mask_from_image)
      .function("attrTree", &WasmInput::attr_tree)
      .function("headScores", &WasmInput::head_scores)
      .function("withHeadMask", &WasmInput::with_head_mask, emscripten::allow_raw_pointers())
      .function("headMask", &WasmInput::head_mask)
      .function("pruningCurve", &WasmInput::pruning_curve)
      .function("normHeads", &WasmInput::norm_heads);
  emscripten::function("decodeImage", &decode_image_js);
  emscripten::function("methods", &methods_js);
  emscripten::function("memoryStats", &memory_stats_js);
  emscripten::function("warmUp", +[] { return gemm_warm_up(); });
  emscripten::function("threads", &thread_limit);
  emscripten::function("activeThreads", +[] { return compute_pool().size(); });
  emscripten::function("encodeNormStages", &encode_norm_stages_js);
  emscripten::function("normImageSummary", &norm_image_summary_js);
#if defined(__EMSCRIPTEN_PTHREADS__)
  emscripten::function("takeError", &take_error);
  emscripten::function("startComputeThreads", &start_compute_threads);
#endif
}
