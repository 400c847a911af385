// bindings.cpp — the Embind API of vitlens: the only file that includes Emscripten headers.
//
// Every entry point catches vitlens::Error (and any std::exception) and rethrows it as a JS
// Error whose message starts with the error code, e.g. "bad_format: model file: ...". Arrays
// cross the boundary as copies (typed_memory_view goes stale when memory grows).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <memory>
#include <string>
#include <vector>

#include "vitlens/error.h"
#include "vitlens/image.h"
#include "vitlens/limits.h"
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

  val logits() const { return float32_out(trace_.logits.data(), size_t(trace_.logits.size())); }

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
    vit_forward(trace_, model_, x);
    return predictions_to_js(model_.config, top_k(model_.config, trace_.logits, k));
  }

  Model model_;
  Trace trace_;
};

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
      .function("save", &WasmModel::save);
  emscripten::function("decodeImage", &decode_image_js);
}
