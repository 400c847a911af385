// model_file.cpp — reading (with full validation) and writing .vitl model files.
//
// The reader trusts nothing: every length is checked against the bytes that are actually
// there before it is used, every number against the limits before anything is allocated, and
// every tensor against the shape the config implies. See model_file.h for the layout.
#include "vitlens/io/model_file.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

using json = nlohmann::json;

constexpr char kMagic[8] = {'V', 'I', 'T', 'L', 'E', 'N', 'S', '\x1A'};
// Version 2 stores every variant field of Config; version 1 files (written before the variants
// existed) hold only the plain fields and load as the plain model.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
constexpr size_t kPreamble = 24;

uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t read_u64(const uint8_t* p) { return uint64_t(read_u32(p)) | uint64_t(read_u32(p + 4)) << 32; }
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  put_u32(out, uint32_t(v));
  put_u32(out, uint32_t(v >> 32));
}

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw Error(code, "model file: " + msg);
}

int64_t get_int(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(ErrorCode::bad_config, std::string("config field '") + key + "' is missing");
  if (!it->is_number_integer())
    fail(ErrorCode::bad_config, std::string("config field '") + key + "' must be an integer");
  return it->get<int64_t>();
}

int clamp_int(int64_t v) {
  return int(std::max<int64_t>(std::min<int64_t>(v, 1ll << 30), -(1ll << 30)));
}

std::vector<float> get_floats(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array())
    fail(ErrorCode::bad_config, std::string("config field '") + key + "' must be a list of numbers");
  if (it->size() > size_t(limits::max_channels))
    fail(ErrorCode::limit, std::string("config field '") + key + "' is too long");
  std::vector<float> out;
  for (const json& v : *it) {
    if (!v.is_number()) fail(ErrorCode::bad_config, std::string("config field '") + key + "' must hold numbers");
    out.push_back(v.get<float>());
  }
  return out;
}

bool get_bool(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(ErrorCode::bad_config, std::string("config field '") + key + "' is missing");
  if (!it->is_boolean()) fail(ErrorCode::bad_config, std::string("config field '") + key + "' must be true or false");
  return it->get<bool>();
}

// An enum field: its value must be one of `names` (written by pooling_name / activation_name).
template <typename E, size_t N>
E get_enum(const json& obj, const char* key, const std::array<E, N>& values, const char* (*name)(E)) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(ErrorCode::bad_config, std::string("config field '") + key + "' is missing");
  std::string allowed;
  for (E v : values) {
    if (it->is_string() && it->get<std::string>() == name(v)) return v;
    allowed += std::string(allowed.empty() ? "" : ", ") + "'" + name(v) + "'";
  }
  fail(ErrorCode::bad_config, std::string("config field '") + key + "' is " + it->dump() + "; it must be one of " + allowed);
}

constexpr std::array<Pooling, 3> kPoolings = {Pooling::token, Pooling::avg, Pooling::token_avg};
constexpr std::array<Activation, 3> kActivations = {Activation::gelu, Activation::gelu_tanh, Activation::quick_gelu};

// The config fields of each version: a field not listed is refused (it would otherwise be
// silently ignored by this reader while meaning something to the writer).
const std::set<std::string>& config_fields(uint32_t version) {
  static const std::set<std::string> v1 = {"image_h", "image_w", "channels", "patch", "dim", "depth", "heads",
                                           "mlp_dim", "classes", "ln_eps", "mean", "std", "output"};
  static const std::set<std::string> v2 = [] {
    std::set<std::string> f = v1;
    f.insert({"class_token", "dist_token", "registers", "no_embed_class", "pre_norm", "layer_scale", "final_norm",
              "fc_norm", "pool", "act", "pos_grid_h", "pos_grid_w"});
    return f;
  }();
  return version == 1 ? v1 : v2;
}

json config_to_json(const Config& c) {
  return json{{"image_h", c.image_h},   {"image_w", c.image_w}, {"channels", c.channels},
              {"patch", c.patch},       {"dim", c.dim},         {"depth", c.depth},
              {"heads", c.heads},       {"mlp_dim", c.mlp_dim}, {"classes", c.classes},
              {"ln_eps", c.ln_eps},     {"mean", c.mean},       {"std", c.std},
              {"output", c.output == OutputKind::sigmoid ? "sigmoid" : "softmax"},
              // The variants (version 2), every one written explicitly.
              {"class_token", c.class_token}, {"dist_token", c.dist_token}, {"registers", c.registers},
              {"no_embed_class", c.no_embed_class}, {"pre_norm", c.pre_norm}, {"layer_scale", c.layer_scale},
              {"final_norm", c.final_norm}, {"fc_norm", c.fc_norm}, {"pool", pooling_name(c.pool)},
              {"act", activation_name(c.act)}, {"pos_grid_h", c.pos_grid_h}, {"pos_grid_w", c.pos_grid_w}};
}

Config config_from_json(const json& j, const json& names, uint32_t version) {
  if (!j.is_object()) fail(ErrorCode::bad_config, "'config' must be an object");
  const std::set<std::string>& known = config_fields(version);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      fail(ErrorCode::bad_config, "unknown config field '" + it.key() + "' (not part of format version " +
                                      std::to_string(version) + ")");
  Config c;
  // Range-check the raw 64-bit values before narrowing, so that 2^40 is "too large", not garbage.
  const std::pair<const char*, int*> ints[] = {
      {"image_h", &c.image_h}, {"image_w", &c.image_w}, {"channels", &c.channels},
      {"patch", &c.patch},     {"dim", &c.dim},         {"depth", &c.depth},
      {"heads", &c.heads},     {"mlp_dim", &c.mlp_dim}, {"classes", &c.classes}};
  for (const auto& [key, dst] : ints) *dst = clamp_int(get_int(j, key));
  auto eps = j.find("ln_eps");
  if (eps == j.end() || !eps->is_number()) fail(ErrorCode::bad_config, "config field 'ln_eps' must be a number");
  c.ln_eps = eps->get<float>();
  c.mean = get_floats(j, "mean");
  c.std = get_floats(j, "std");
  auto out = j.find("output");
  if (out != j.end()) {
    if (*out == "sigmoid") c.output = OutputKind::sigmoid;
    else if (*out != "softmax") fail(ErrorCode::bad_config, "config field 'output' must be softmax or sigmoid");
  }
  if (version >= 2) {
    c.class_token = get_bool(j, "class_token");
    c.dist_token = get_bool(j, "dist_token");
    c.registers = clamp_int(get_int(j, "registers"));
    c.no_embed_class = get_bool(j, "no_embed_class");
    c.pre_norm = get_bool(j, "pre_norm");
    c.layer_scale = get_bool(j, "layer_scale");
    c.final_norm = get_bool(j, "final_norm");
    c.fc_norm = get_bool(j, "fc_norm");
    c.pool = get_enum(j, "pool", kPoolings, pooling_name);
    c.act = get_enum(j, "act", kActivations, activation_name);
    c.pos_grid_h = clamp_int(get_int(j, "pos_grid_h"));
    c.pos_grid_w = clamp_int(get_int(j, "pos_grid_w"));
  }
  if (!names.is_array()) fail(ErrorCode::bad_config, "'class_names' must be a list of strings");
  if (names.size() > size_t(limits::max_classes)) fail(ErrorCode::limit, "too many class names");
  for (const json& n : names) {
    if (!n.is_string()) fail(ErrorCode::bad_config, "'class_names' must be a list of strings");
    c.class_names.push_back(n.get<std::string>());
  }
  validate_config(c);
  if (param_count(c) > limits::max_params)
    fail(ErrorCode::limit, "the config describes " + std::to_string(param_count(c)) +
                               " parameters, more than the limit of " + std::to_string(limits::max_params));
  return c;
}

// The config fields that decide whether a tensor exists and its shape, for error messages about
// a tensor that contradicts the config: " (config: layer_scale false)".
std::string config_says(std::string name, const Config& c) {
  const std::string scale = ".scale";
  if (name.size() > scale.size() && name.compare(name.size() - scale.size(), scale.size(), scale) == 0)
    name.resize(name.size() - scale.size());
  auto b = [](bool v) { return v ? std::string("true") : std::string("false"); };
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  std::string says;
  if (name == "cls_token") says = "class_token " + b(c.class_token);
  else if (name == "dist_token" || has("head_dist")) says = "dist_token " + b(c.dist_token);
  else if (name == "reg_token") says = "registers " + std::to_string(c.registers);
  else if (name == "pos_embed")
    says = "class_token " + b(c.class_token) + ", dist_token " + b(c.dist_token) + ", no_embed_class " +
           b(c.no_embed_class) + ": " + std::to_string(c.pos_rows()) + " rows";
  else if (has("norm_pre")) says = "pre_norm " + b(c.pre_norm);
  else if (has(".ls1.") || has(".ls2.")) says = "layer_scale " + b(c.layer_scale);
  else if (has("fc_norm")) says = "fc_norm " + b(c.fc_norm);
  else if (name.rfind("norm.", 0) == 0) says = "final_norm " + b(c.final_norm);
  else if (name == "head.weight") says = std::string("pool '") + pooling_name(c.pool) + "'";
  return says.empty() ? "" : " (config: " + says + ")";
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A tensor the config implies: parameter `param` of param_specs, or (scale) its int8 row scales.
struct Expected {
  size_t param;
  std::vector<int64_t> shape;
  bool int8;   // stored as i8 (then NAME.scale holds the per-row scales)
  bool scale;  // a ".scale" entry: the scales of parameter `param`
};

// Where a tensor of the file lies in the data section, once its entry has been checked.
struct Located {
  const std::string* name;
  const Expected* e;
  uint64_t offset, bytes;
};

}  // namespace

std::vector<float> quantise_rows(const float* w, int64_t rows, int64_t cols, int8_t* q) {
  std::vector<float> scales(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float mx = 0.0f;
    for (int64_t i = 0; i < cols; ++i) mx = std::max(mx, std::fabs(w[r * cols + i]));
    const float s = mx > 0.0f ? mx / 127.0f : 1.0f;
    scales[size_t(r)] = s;
    for (int64_t i = 0; i < cols; ++i) {
      const float v = std::nearbyint(w[r * cols + i] / s);
      q[r * cols + i] = int8_t(std::max(-127.0f, std::min(127.0f, v)));
    }
  }
  return scales;
}

void quantise_in_place(Model& m) {
  m.stored_int8 = true;
  for (ParamRef& r : param_list(m.params, m.config)) {
    if (!r.quantisable) continue;
    const int64_t rows = r.shape[0], cols = int64_t(r.size) / rows;
    std::vector<int8_t> q(r.size);
    const std::vector<float> s = quantise_rows(r.data, rows, cols, q.data());
    for (int64_t i = 0; i < int64_t(r.size); ++i) r.data[i] = s[size_t(i / cols)] * float(q[size_t(i)]);
  }
}

Model quantised_copy(const Model& m) {
  Model out = m;
  quantise_in_place(out);
  return out;
}

namespace {

// The loader's element loops are functions of their own, never inlined: V8 optimises a wasm
// function once it has run long enough in baseline code, counting the loops inlined into it, and
// with these inside, the 20 KB loader (run once per model) was the second longest optimising compile
// of the page's start-up (102 ms of a background core on a 2-core machine, while the first image
// was explained). Out of line, only these small loops are optimised.

// Whether every value is finite.
[[gnu::noinline]] bool all_finite(const float* v, size_t n) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) ok &= std::isfinite(v[i]);
  return ok;
}

// Whether no value is negative.
[[gnu::noinline]] bool all_nonnegative(const float* v, size_t n) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) ok &= !(v[i] < 0.0f);
  return ok;
}

// w (rows, cols) = scale[r] · q (rows, cols): an int8 tensor and its row scales.
[[gnu::noinline]] void dequantise_rows(float* w, const int8_t* q, const float* scale, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) w[r * cols + i] = scale[r] * float(q[r * cols + i]);
}

const std::set<std::string> kHeaderFields = {"format", "config", "class_names", "provenance", "storage", "tensors",
                                             "data_bytes"};

Model load_model_unchecked_json(const uint8_t* bytes, size_t size) {
  if (size < kPreamble) fail(ErrorCode::truncated, "only " + std::to_string(size) + " bytes, too short to be a model file");
  if (std::memcmp(bytes, kMagic, 8) != 0)
    fail(ErrorCode::bad_format, "not a vitlens model (wrong magic number); import checkpoints with 'vitlens import'");
  const uint32_t version = read_u32(bytes + 8);
  if (version < kOldestVersion || version > kVersion)
    fail(ErrorCode::bad_version, "format version " + std::to_string(version) + " is not supported (this build reads versions " +
                                     std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) + ")");
  const uint64_t header_len = read_u64(bytes + 16);
  if (header_len > uint64_t(limits::max_header_bytes))
    fail(ErrorCode::limit, "header of " + std::to_string(header_len) + " bytes exceeds the limit");
  if (header_len > size - kPreamble) fail(ErrorCode::truncated, "the file ends inside its header");

  json h = json::parse(bytes + kPreamble, bytes + kPreamble + header_len, nullptr, false);
  if (h.is_discarded() || !h.is_object()) fail(ErrorCode::bad_format, "the header is not valid JSON");
  if (!h.contains("config") || !h.contains("class_names") || !h.contains("tensors") || !h.contains("data_bytes"))
    fail(ErrorCode::bad_format, "the header lacks config, class_names, tensors or data_bytes");
  for (auto it = h.begin(); it != h.end(); ++it)
    if (!kHeaderFields.count(it.key())) fail(ErrorCode::bad_format, "unknown header field '" + it.key() + "'");

  Model m;
  m.config = config_from_json(h["config"], h["class_names"], version);
  if (h.contains("provenance") && h["provenance"].is_string()) m.provenance = h["provenance"].get<std::string>();
  const json& storage = h.contains("storage") ? h["storage"] : json("f32");
  if (storage != "f32" && storage != "int8") fail(ErrorCode::bad_format, "storage must be f32 or int8");
  m.stored_int8 = storage == "int8";

  if (!h["data_bytes"].is_number_unsigned()) fail(ErrorCode::bad_format, "data_bytes must be a non-negative integer");
  const uint64_t data_bytes = h["data_bytes"].get<uint64_t>();
  const uint64_t data_start = (kPreamble + header_len + 15) / 16 * 16;
  if (data_start > size || data_bytes > size - data_start || 4 > size - data_start - data_bytes)
    fail(ErrorCode::truncated, "the file is " + std::to_string(size) + " bytes but its header announces " +
                                   std::to_string(data_start + data_bytes + 4) + " (truncated download?)");
  const uint8_t* data = bytes + data_start;
  if (crc32(data, size_t(data_bytes)) != read_u32(data + data_bytes))
    fail(ErrorCode::bad_value, "checksum mismatch: the tensor data is corrupted");

  // Every entry is checked against the tensors the config implies before the parameters are
  // allocated: a hostile or truncated file fails without allocating what its config claims.
  const std::vector<ParamSpec> specs = param_specs(m.config);
  std::map<std::string, Expected> expected;
  for (size_t k = 0; k < specs.size(); ++k) {
    const ParamSpec& r = specs[k];
    std::vector<int64_t> shape(r.shape.begin(), r.shape.end());
    const bool q = m.stored_int8 && r.quantisable;
    expected[r.name] = Expected{k, shape, q, false};
    if (q) expected[r.name + ".scale"] = Expected{k, {shape[0]}, false, true};
  }

  const json& tensors = h["tensors"];
  if (!tensors.is_array()) fail(ErrorCode::bad_format, "'tensors' must be a list");
  if (tensors.size() > size_t(limits::max_tensors)) fail(ErrorCode::limit, "too many tensors");
  std::vector<Located> located;
  std::set<const Expected*> seen;
  for (const json& t : tensors) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      fail(ErrorCode::bad_format, "a tensor entry has no name");
    const std::string name = t["name"].get<std::string>();
    auto it = expected.find(name);
    if (it == expected.end())
      fail(ErrorCode::unknown_tensor, "unexpected tensor '" + name + "' (not part of this config's ViT)" + config_says(name, m.config));
    const Expected& e = it->second;
    if (!seen.insert(&e).second) fail(ErrorCode::unknown_tensor, "tensor '" + name + "' appears twice");
    const std::string dtype = t.value("dtype", std::string());
    const std::string want = e.int8 ? "i8" : "f32";
    if (dtype != want) fail(ErrorCode::bad_format, "tensor '" + name + "' has dtype '" + dtype + "', expected " + want);
    if (!t.contains("shape") || !t["shape"].is_array() || t["shape"].size() > size_t(limits::max_tensor_rank))
      fail(ErrorCode::bad_format, "tensor '" + name + "' has no valid shape");
    std::vector<int64_t> shape;
    for (const json& s : t["shape"]) {
      if (!s.is_number_unsigned()) fail(ErrorCode::bad_shape, "tensor '" + name + "' has a negative or non-integer dimension");
      shape.push_back(int64_t(std::min<uint64_t>(s.get<uint64_t>(), uint64_t(1) << 40)));
    }
    if (shape != e.shape)
      fail(ErrorCode::bad_shape, "tensor '" + name + "' has shape " + shape_str(shape) + " but the config implies " +
                                     shape_str(e.shape) + config_says(name, m.config));
    int64_t count = 1;
    for (int64_t s : shape) count *= s;  // bounded: equals the expected shape
    if (!t.contains("offset") || !t["offset"].is_number_unsigned() || !t.contains("bytes") || !t["bytes"].is_number_unsigned())
      fail(ErrorCode::bad_format, "tensor '" + name + "' lacks offset or bytes");
    const uint64_t offset = t["offset"].get<uint64_t>(), nbytes = t["bytes"].get<uint64_t>();
    const uint64_t elem = e.int8 ? 1 : 4;
    if (nbytes != uint64_t(count) * elem)
      fail(ErrorCode::bad_shape, "tensor '" + name + "' holds " + std::to_string(nbytes) + " bytes, its shape needs " + std::to_string(count * elem));
    if (offset % 4 || offset > data_bytes || nbytes > data_bytes - offset)
      fail(ErrorCode::truncated, "tensor '" + name + "' lies outside the data section");
    located.push_back(Located{&it->first, &e, offset, nbytes});
  }
  for (const auto& [name, e] : expected)
    if (!seen.count(&e)) fail(ErrorCode::missing_tensor, "tensor '" + name + "' is missing" + config_says(name, m.config));
  // No two tensors may share bytes: otherwise a small file could describe a model of any size.
  std::vector<const Located*> by_offset;
  for (const Located& l : located)
    if (l.bytes) by_offset.push_back(&l);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Located* a, const Located* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(ErrorCode::bad_format, "tensors '" + *by_offset[i - 1]->name + "' and '" + *by_offset[i]->name +
                                      "' overlap in the data section (each tensor must have bytes of its own)");

  // The parameters (at most 4 bytes for each byte of the data section), then the values.
  m.params = params_zeros(m.config);
  std::vector<ParamRef> refs = param_list(m.params, m.config);
  std::vector<std::vector<float>> scales(refs.size());  // per int8 parameter, its row scales
  for (const Located& l : located) {
    const uint8_t* src = data + l.offset;
    const ParamRef& r = refs[l.e->param];
    if (l.e->int8) continue;  // dequantised below, once its scales are read
    float* dst = r.data;
    if (l.e->scale) {
      scales[l.e->param].resize(size_t(l.bytes / 4));
      dst = scales[l.e->param].data();
    }
    std::memcpy(dst, src, size_t(l.bytes));  // little-endian hosts only (x86, wasm)
    const size_t n = size_t(l.bytes / 4);
    if (!all_finite(dst, n)) fail(ErrorCode::bad_value, "tensor '" + *l.name + "' contains NaN or Inf");
    if (l.e->scale && !all_nonnegative(dst, n)) fail(ErrorCode::bad_value, "tensor '" + *l.name + "' has a negative scale");
  }
  for (const Located& l : located) {
    if (!l.e->int8) continue;
    const ParamRef& r = refs[l.e->param];
    const std::vector<float>& s = scales[l.e->param];
    const int8_t* q = reinterpret_cast<const int8_t*>(data + l.offset);
    const int64_t count = int64_t(l.bytes), rows = int64_t(s.size()), cols = count / rows;
    dequantise_rows(r.data, q, s.data(), rows, cols);
  }
  return m;
}

}  // namespace

Model load_model(const uint8_t* bytes, size_t size) {
  try {
    return load_model_unchecked_json(bytes, size);
  } catch (const json::exception& e) {  // a header field of the wrong JSON type
    fail(ErrorCode::bad_format, std::string("malformed header: ") + e.what());
  }
}

Model load_model_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, limits::max_model_file_bytes);
  return load_model(bytes.data(), bytes.size());
}

std::vector<uint8_t> save_model(const Model& model, Storage storage) {
  Model m = model;  // param_list needs mutable access; the copy also keeps `model` untouched
  validate_config(m.config);
  json tensors = json::array();
  std::vector<uint8_t> data;
  auto append = [&](const std::string& name, const char* dtype, const std::vector<int>& shape,
                    const void* src, size_t nbytes) {
    while (data.size() % 16) data.push_back(0);
    tensors.push_back({{"name", name}, {"dtype", dtype}, {"shape", shape}, {"offset", data.size()}, {"bytes", nbytes}});
    const uint8_t* p = static_cast<const uint8_t*>(src);
    data.insert(data.end(), p, p + nbytes);
  };
  for (const ParamRef& r : param_list(m.params, m.config)) {
    if (storage == Storage::int8 && r.quantisable) {
      const int64_t rows = r.shape[0], cols = int64_t(r.size) / rows;
      std::vector<int8_t> q(r.size);
      const std::vector<float> s = quantise_rows(r.data, rows, cols, q.data());
      append(r.name, "i8", r.shape, q.data(), q.size());
      append(r.name + ".scale", "f32", {r.shape[0]}, s.data(), s.size() * 4);
    } else {
      append(r.name, "f32", r.shape, r.data, r.size * 4);
    }
  }
  json h{{"format", "vitlens model"},
         {"config", config_to_json(m.config)},
         {"class_names", m.config.class_names},
         {"provenance", m.provenance},
         {"storage", storage == Storage::int8 ? "int8" : "f32"},
         {"tensors", tensors},
         {"data_bytes", data.size()}};
  const std::string header = h.dump();
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put_u32(out, kVersion);
  put_u32(out, 0);
  put_u64(out, header.size());
  out.insert(out.end(), header.begin(), header.end());
  while (out.size() % 16) out.push_back(0);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, crc32(data.data(), data.size()));
  return out;
}

void save_model_file(const std::string& path, const Model& m, Storage storage) {
  const std::vector<uint8_t> bytes = save_model(m, storage);
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace vitlens
