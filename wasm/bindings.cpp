// bindings.cpp — the Embind API of vitlens: the only file that includes Emscripten headers.
//
// Every entry point catches vitlens::Error (and any std::exception) and rethrows it as a JS
// Error whose message starts with the error code, e.g. "bad_format: model file: ...". Arrays
// cross the boundary as copies (typed_memory_view goes stale when memory grows).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vitlens/error.h"
#include "vitlens/image.h"
#include "vitlens/limits.h"
#include "vitlens/methods.h"
#include "vitlens/model_file.h"
#include "vitlens/safetensors.h"
#include "vitlens/vit.h"

using emscripten::val;
using namespace vitlens;

namespace {

[[noreturn]] void throw_js(const std::string& msg) {
  val::global("Error").new_(val(msg)).throw_();
  __builtin_unreachable();
}

template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw_js(std::string(error_code_name(e.code())) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw_js("limit: out of memory");
  } catch (const std::exception& e) {
    throw_js(std::string("internal: ") + e.what());
  }
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

val float32_out(const float* p, size_t n) {
  return val::global("Float32Array").new_(emscripten::typed_memory_view(n, p));
}

val mat_out(const Mat& m) {
  if (m.size() == 0) return val::null();
  return float32_out(m.data(), size_t(m.size()));
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

MethodOptions options_from_js(const val& o) {
  MethodOptions opt;
  if (o.isUndefined() || o.isNull()) return opt;
  if (o.typeOf().as<std::string>() != "object") throw Error(ErrorCode::bad_argument, "explain options must be an object");
  opt.target = int_option(o, "target", -1);
  opt.start_layer = int_option(o, "startLayer", 0);
  opt.block = int_option(o, "block", -1);
  opt.discard_ratio = number_option(o, "discardRatio", 0.0);
  opt.use_grad = bool_option(o, "useGrad", true);
  opt.want_intermediates = bool_option(o, "intermediates", false);
  const val f = o["headFusion"];
  if (!f.isUndefined() && !f.isNull()) {
    const std::string s = f.isString() ? f.as<std::string>() : "";
    if (s == "mean") opt.head_fusion = HeadFusion::mean;
    else if (s == "max") opt.head_fusion = HeadFusion::max;
    else if (s == "min") opt.head_fusion = HeadFusion::min;
    else throw Error(ErrorCode::bad_argument, "option headFusion must be \"mean\", \"max\" or \"min\"");
  }
  return opt;
}

val report_to_js(const ConservationReport& r) {
  val layers = val::array();
  for (const LayerRelevance& l : r.layers) {
    val o = val::object();
    o.set("layer", l.layer);
    o.set("relevanceOut", l.relevance_out);
    o.set("relevanceIn", l.relevance_in);
    layers.call<void>("push", o);
  }
  return layers;
}

val explanation_to_js(const Explanation& ex, const ConservationReport* report) {
  val o = val::object();
  o.set("method", ex.method);
  o.set("target", ex.target);
  o.set("tokenMap", mat_out(ex.token_map));
  o.set("gridH", int(ex.token_map.rows()));
  o.set("gridW", int(ex.token_map.cols()));
  o.set("pixelMap", mat_out(ex.pixel_map));
  o.set("height", int(ex.pixel_map.rows()));
  o.set("width", int(ex.pixel_map.cols()));
  o.set("conservation", report ? report_to_js(*report) : val::array());
  if (report) {
    auto num = [](double v) { return std::isnan(v) ? val::null() : val(v); };
    val sums = val::object();
    sums.set("seed", report->seed_sum);
    val blocks = val::array();
    for (double b : report->block_input_sums) blocks.call<void>("push", num(b));
    sums.set("blockInputs", blocks);
    sums.set("tokens", num(report->tokens_sum));
    sums.set("image", num(report->image_sum));
    o.set("relevanceSums", sums);
  }
  if (!ex.blocks.empty()) {
    val blocks = val::array();
    for (const BlockIntermediates& b : ex.blocks) {
      val bo = val::object();
      bo.set("attn", mat_out(b.attn));
      bo.set("grad", mat_out(b.grad));
      bo.set("relevance", mat_out(b.relevance));
      bo.set("step", mat_out(b.step));
      bo.set("accumulated", mat_out(b.accumulated));
      blocks.call<void>("push", bo);
    }
    val in = val::object();
    in.set("tokens", ex.blocks.empty() || ex.blocks[0].attn.size() == 0 ? 0 : int(ex.blocks[0].attn.rows()));
    in.set("blocks", blocks);
    o.set("intermediates", in);
  }
  return o;
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

// A loaded model. Immutable; the trace of the last call is kept for the explain calls.
class WasmModel {
 public:
  explicit WasmModel(Model m) : model_(std::move(m)) {}

  static WasmModel* from_bytes(val bytes) {
    return guarded([&] {
      const std::vector<uint8_t> b = copy_in<uint8_t>(bytes, limits::max_model_file_bytes, "model bytes");
      return new WasmModel(load_model(b.data(), b.size()));
    });
  }

  static WasmModel* from_safetensors(val ckpt, std::string config_json) {
    return guarded([&] {
      const std::vector<uint8_t> b = copy_in<uint8_t>(ckpt, limits::max_model_file_bytes, "checkpoint");
      return new WasmModel(import_checkpoint(b.data(), b.size(), config_json));
    });
  }

  val info() const {
    const Config& c = model_.config;
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
    o.set("storedInt8", model_.stored_int8);
    o.set("provenance", model_.provenance);
    val names = val::array();
    for (const std::string& n : c.class_names) names.call<void>("push", n);
    o.set("classNames", names);
    val mean = val::array(), stdv = val::array();
    for (float v : c.mean) mean.call<void>("push", v);
    for (float v : c.std) stdv.call<void>("push", v);
    o.set("mean", mean);
    o.set("std", stdv);
    return o;
  }

  // The model input (C×H×W, normalised) from RGBA pixels of any size.
  val preprocess_rgba(val rgba, int w, int h) const {
    return guarded([&] {
      const Image x = image_from_rgba(rgba, w, h);
      return float32_out(x.data.data(), x.data.size());
    });
  }

  val predict_rgba(val rgba, int w, int h, int k) {
    return guarded([&] { return predict(image_from_rgba(rgba, w, h), k); });
  }

  val predict_tensor(val data, int k) {
    return guarded([&] {
      const Config& c = model_.config;
      const std::vector<float> v = copy_in<float>(data, limits::max_npy_elements, "tensor");
      if (v.size() != size_t(c.channels) * c.image_h * c.image_w)
        throw Error(ErrorCode::bad_shape, "the tensor has " + std::to_string(v.size()) + " values; the model needs " +
                                              std::to_string(c.channels) + "×" + std::to_string(c.image_h) + "×" +
                                              std::to_string(c.image_w));
      Image x(c.channels, c.image_h, c.image_w);
      x.data = v;
      return predict(x, k);
    });
  }

  val logits() const { return float32_out(state_.trace.logits.data(), size_t(state_.trace.logits.size())); }

  // An attribution map of the last predicted input. The forward pass is reused, and so are the
  // backward and relevance passes while the target class stays the same.
  val explain_js(std::string method, val options) {
    return guarded([&] {
      const Explanation ex = explain(model_, state_, method, options_from_js(options));
      return explanation_to_js(ex, find_method(method)->reports_relevance ? &ex.conservation : nullptr);
    });
  }

  val save(std::string storage) const {
    return guarded([&] {
      if (storage != "f32" && storage != "int8") throw Error(ErrorCode::bad_argument, "storage must be f32 or int8");
      const std::vector<uint8_t> b = save_model(model_, storage == "int8" ? Storage::int8 : Storage::f32);
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
    return preprocess(px, model_.config);
  }

  val predict(const Image& x, int k) {
    if (k < 1) throw Error(ErrorCode::bad_argument, "k must be at least 1");
    state_.set_input(model_, x);
    return predictions_to_js(model_.config, top_k(model_.config, state_.trace.logits, k));
  }

  Model model_;
  ExplainState state_;  // the last predicted input's forward pass and what explain derived from it
};

val methods_js() {
  val out = val::array();
  for (const MethodInfo& m : method_registry()) {
    val o = val::object();
    o.set("name", std::string(m.name));
    o.set("description", std::string(m.description));
    o.set("paper", std::string(m.paper));
    val opts = val::array();
    const std::pair<unsigned, const char*> names[] = {{opt_target, "target"},         {opt_start_layer, "startLayer"},
                                                      {opt_head_fusion, "headFusion"}, {opt_discard_ratio, "discardRatio"},
                                                      {opt_block, "block"},           {opt_use_grad, "useGrad"}};
    for (const auto& [bit, name] : names)
      if (m.options & bit) opts.call<void>("push", std::string(name));
    o.set("options", opts);
    o.set("classSpecific", m.class_specific);
    o.set("reportsRelevance", m.reports_relevance);
    o.set("conserves", m.conserves);
    o.set("nativePixels", m.native_pixels);
    out.call<void>("push", o);
  }
  return out;
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

EMSCRIPTEN_BINDINGS(vitlens) {
  emscripten::class_<WasmModel>("Model")
      .class_function("fromBytes", &WasmModel::from_bytes, emscripten::allow_raw_pointers())
      .class_function("fromSafetensors", &WasmModel::from_safetensors, emscripten::allow_raw_pointers())
      .function("info", &WasmModel::info)
      .function("preprocessRGBA", &WasmModel::preprocess_rgba)
      .function("predictRGBA", &WasmModel::predict_rgba)
      .function("predictTensor", &WasmModel::predict_tensor)
      .function("logits", &WasmModel::logits)
      .function("explain", &WasmModel::explain_js)
      .function("save", &WasmModel::save);
  emscripten::function("decodeImage", &decode_image_js);
  emscripten::function("methods", &methods_js);
}
