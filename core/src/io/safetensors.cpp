// safetensors.cpp — parsing safetensors files and importing timm / Hugging Face ViT checkpoints.
//
// The parser checks every offset against the bytes present and the header against the limits;
// the importer maps checkpoint names onto our parameters (named after timm's keys), splitting
// nothing and guessing nothing: each expected tensor must be there with the shape the config
// implies, and any tensor we cannot place is reported rather than ignored.
#include "vitlens/io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw Error(code, "safetensors: " + msg);
}

size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);              // subnormal or zero
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400), exp - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

SafeTensors parse_unchecked(const uint8_t* bytes, size_t size) {
  if (size < 8) fail(ErrorCode::truncated, "the file is shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  if (n > uint64_t(limits::max_header_bytes))
    fail(ErrorCode::limit, "header length " + std::to_string(n) + " exceeds the limit (is this a safetensors file?)");
  if (n > size - 8) fail(ErrorCode::truncated, "the file ends inside its JSON header");
  // The JSON parser keeps the last of two equal keys: a tensor named twice is refused here rather
  // than one of its two entries silently dropped.
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json h = json::parse(bytes + 8, bytes + 8 + n, note_keys, false);
  if (h.is_discarded() || !h.is_object()) fail(ErrorCode::bad_format, "the header is not a JSON object");
  if (!duplicate.empty()) fail(ErrorCode::unknown_tensor, "tensor '" + duplicate + "' appears twice in the header");
  if (h.size() > size_t(limits::max_tensors)) fail(ErrorCode::limit, "too many tensors");
  SafeTensors st;
  st.data = bytes + 8 + n;
  st.data_size = size - 8 - size_t(n);
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) st.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const json& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    SafeTensor x;
    x.dtype = t["dtype"].is_string() ? t["dtype"].get<std::string>() : "";
    if (!t["shape"].is_array() || t["shape"].size() > size_t(limits::max_tensor_rank))
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' has an invalid shape");
    uint64_t count = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned()) fail(ErrorCode::bad_shape, "tensor '" + it.key() + "' has a negative dimension");
      const uint64_t v = d.get<uint64_t>();
      if (v > uint64_t(limits::max_params)) fail(ErrorCode::limit, "tensor '" + it.key() + "' is too large");
      count *= v;
      if (count > uint64_t(limits::max_params)) fail(ErrorCode::limit, "tensor '" + it.key() + "' is too large");
      x.shape.push_back(int64_t(v));
    }
    const json& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' has invalid data_offsets");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > st.data_size)
      fail(ErrorCode::truncated, "tensor '" + it.key() + "' lies outside the file (truncated download?)");
    const size_t es = dtype_size(x.dtype);
    if (es && e - b != count * es)
      fail(ErrorCode::bad_shape, "tensor '" + it.key() + "' holds " + std::to_string(e - b) + " bytes, its shape " +
                                     shape_str(x.shape) + " needs " + std::to_string(count * es));
    x.begin = size_t(b);
    x.end = size_t(e);
    st.tensors[it.key()] = x;
  }
  return st;
}

}  // namespace

SafeTensors parse_safetensors(const uint8_t* bytes, size_t size) {
  try {
    return parse_unchecked(bytes, size);
  } catch (const json::exception& e) {
    fail(ErrorCode::bad_format, std::string("malformed header: ") + e.what());
  }
}

std::vector<float> SafeTensors::floats(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(ErrorCode::missing_tensor, "checkpoint: tensor '" + name + "' is missing");
  const SafeTensor& t = it->second;
  const size_t es = dtype_size(t.dtype);
  if (!es)
    throw Error(ErrorCode::bad_format, "checkpoint: tensor '" + name + "' has dtype '" + t.dtype +
                                           "'; only F32, F16, BF16 and F64 can be imported");
  const size_t count = (t.end - t.begin) / es;
  std::vector<float> out(count);
  const uint8_t* p = data + t.begin;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* q = p + i * es;
    if (t.dtype == "F32") {
      std::memcpy(&out[i], q, 4);
    } else if (t.dtype == "F64") {
      double v;
      std::memcpy(&v, q, 8);
      out[i] = float(v);
    } else if (t.dtype == "F16") {
      out[i] = half_to_float(uint16_t(q[0] | q[1] << 8));
    } else {
      const uint32_t bits = uint32_t(q[0] | q[1] << 8) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
    if (!std::isfinite(out[i]))
      throw Error(ErrorCode::bad_value, "checkpoint: tensor '" + name + "' contains NaN or Inf");
  }
  return out;
}

namespace {

int int_or_first(const json& v, const char* key) {
  const json& x = v.is_array() && !v.empty() ? v[0] : v;
  if (!x.is_number_integer()) throw Error(ErrorCode::bad_config, std::string("config.json: '") + key + "' must be an integer");
  const int64_t i = x.get<int64_t>();
  return int(std::max<int64_t>(-1, std::min<int64_t>(i, 1 << 30)));
}

int get_int(const json& j, const char* key) {
  if (!j.contains(key)) throw Error(ErrorCode::bad_config, std::string("config.json: '") + key + "' is missing");
  return int_or_first(j[key], key);
}

Config hf_config_unchecked(const std::string& text, bool timm_names) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(ErrorCode::bad_format, "config.json is not a JSON object");
  Config c;
  const json& size = j.contains("image_size") ? j["image_size"] : json(224);
  if (size.is_array() && size.size() == 2) {
    c.image_h = int_or_first(size[0], "image_size");
    c.image_w = int_or_first(size[1], "image_size");
  } else {
    c.image_h = c.image_w = int_or_first(size, "image_size");
  }
  c.patch = get_int(j, "patch_size");
  c.channels = j.contains("num_channels") ? get_int(j, "num_channels") : 3;
  c.dim = get_int(j, "hidden_size");
  c.depth = get_int(j, "num_hidden_layers");
  c.heads = get_int(j, "num_attention_heads");
  c.mlp_dim = get_int(j, "intermediate_size");
  c.ln_eps = timm_names ? 1e-6f : 1e-12f;
  if (j.contains("layer_norm_eps")) {
    if (!j["layer_norm_eps"].is_number()) throw Error(ErrorCode::bad_config, "config.json: layer_norm_eps must be a number");
    c.ln_eps = j["layer_norm_eps"].get<float>();
  }
  if (j.contains("hidden_act") && j["hidden_act"] != "gelu")
    throw Error(ErrorCode::bad_config, "config.json: hidden_act '" + j["hidden_act"].dump() +
                                           "' is not supported; vitlens implements the exact (erf) GELU, 'gelu'");
  if (j.contains("qkv_bias") && j["qkv_bias"] == false)
    throw Error(ErrorCode::bad_config, "config.json: qkv_bias = false is not supported");
  if (j.contains("problem_type") && j["problem_type"] == "multi_label_classification") c.output = OutputKind::sigmoid;
  if (j.contains("id2label") && j["id2label"].is_object()) {
    const json& labels = j["id2label"];
    if (labels.size() > size_t(limits::max_classes)) throw Error(ErrorCode::limit, "config.json: too many labels");
    c.classes = int(labels.size());
    c.class_names.assign(size_t(c.classes), "");
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      char* end = nullptr;
      const long id = std::strtol(it.key().c_str(), &end, 10);
      if (*end || id < 0 || id >= c.classes || !it->is_string())
        throw Error(ErrorCode::bad_config, "config.json: id2label must map 0…N−1 to names (bad key '" + it.key() + "')");
      c.class_names[size_t(id)] = it->get<std::string>();
    }
  } else if (j.contains("num_labels")) {
    c.classes = get_int(j, "num_labels");
  } else {
    throw Error(ErrorCode::bad_config, "config.json: needs id2label (or num_labels) to know the classes");
  }
  for (const char* key : {"image_mean", "image_std"}) {
    if (!j.contains(key)) continue;
    const json& v = j[key];
    if (!v.is_array() || v.size() > size_t(limits::max_channels))
      throw Error(ErrorCode::bad_config, std::string("config.json: ") + key + " must be a list of numbers");
    std::vector<float>& dst = std::string(key) == "image_mean" ? c.mean : c.std;
    for (const json& x : v) {
      if (!x.is_number()) throw Error(ErrorCode::bad_config, std::string("config.json: ") + key + " must hold numbers");
      dst.push_back(x.get<float>());
    }
  }
  fill_config_defaults(c);
  validate_config(c);
  if (param_count(c) > limits::max_params) throw Error(ErrorCode::limit, "config.json: the model is too large");
  return c;
}

// Where each of our tensors comes from in a Hugging Face checkpoint (prefix "vit." or none).
// qkv is assembled from three tensors.
std::vector<std::string> hf_sources(const std::string& ours, const std::string& pre) {
  if (ours == "patch_embed.proj.weight") return {pre + "embeddings.patch_embeddings.projection.weight"};
  if (ours == "patch_embed.proj.bias") return {pre + "embeddings.patch_embeddings.projection.bias"};
  if (ours == "cls_token") return {pre + "embeddings.cls_token"};
  if (ours == "pos_embed") return {pre + "embeddings.position_embeddings"};
  if (ours == "norm.weight") return {pre + "layernorm.weight"};
  if (ours == "norm.bias") return {pre + "layernorm.bias"};
  if (ours == "head.weight") return {"classifier.weight"};
  if (ours == "head.bias") return {"classifier.bias"};
  // blocks.N.<part>
  const size_t dot = ours.find('.', 7);
  const std::string n = ours.substr(7, dot - 7), part = ours.substr(dot + 1);
  const std::string L = pre + "encoder.layer." + n + ".";
  if (part == "norm1.weight") return {L + "layernorm_before.weight"};
  if (part == "norm1.bias") return {L + "layernorm_before.bias"};
  if (part == "attn.qkv.weight")
    return {L + "attention.attention.query.weight", L + "attention.attention.key.weight", L + "attention.attention.value.weight"};
  if (part == "attn.qkv.bias")
    return {L + "attention.attention.query.bias", L + "attention.attention.key.bias", L + "attention.attention.value.bias"};
  if (part == "attn.proj.weight") return {L + "attention.output.dense.weight"};
  if (part == "attn.proj.bias") return {L + "attention.output.dense.bias"};
  if (part == "norm2.weight") return {L + "layernorm_after.weight"};
  if (part == "norm2.bias") return {L + "layernorm_after.bias"};
  if (part == "mlp.fc1.weight") return {L + "intermediate.dense.weight"};
  if (part == "mlp.fc1.bias") return {L + "intermediate.dense.bias"};
  if (part == "mlp.fc2.weight") return {L + "output.dense.weight"};
  if (part == "mlp.fc2.bias") return {L + "output.dense.bias"};
  return {};
}

Model import_unchecked(const uint8_t* bytes, size_t size, const std::string& config_json, Naming* detected) {
  const SafeTensors st = parse_safetensors(bytes, size);
  Naming naming;
  std::string hf_prefix;
  if (st.tensors.count("vit.embeddings.cls_token")) {
    naming = Naming::huggingface;
    hf_prefix = "vit.";
  } else if (st.tensors.count("embeddings.cls_token")) {
    naming = Naming::huggingface;
  } else if (st.tensors.count("cls_token")) {
    naming = Naming::timm;
  } else {
    throw Error(ErrorCode::missing_tensor,
                "checkpoint: no 'cls_token' (timm) or 'vit.embeddings.cls_token' (Hugging Face) tensor; "
                "is this a ViT classifier checkpoint?");
  }
  if (detected) *detected = naming;

  Model m;
  m.config = config_from_hf_json(config_json, naming == Naming::timm);
  m.params = params_zeros(m.config);
  m.provenance = std::string("imported from a ") + (naming == Naming::timm ? "timm" : "Hugging Face") + " safetensors checkpoint";
  auto meta = st.metadata.find("provenance");
  if (meta != st.metadata.end()) m.provenance += ": " + meta->second;

  std::set<std::string> used;
  for (ParamRef& r : param_list(m.params, m.config)) {
    const std::vector<std::string> srcs = naming == Naming::timm ? std::vector<std::string>{r.name} : hf_sources(r.name, hf_prefix);
    std::vector<int64_t> want(r.shape.begin(), r.shape.end());
    size_t filled = 0;
    for (const std::string& src : srcs) {
      auto it = st.tensors.find(src);
      if (it == st.tensors.end())
        throw Error(ErrorCode::missing_tensor, "checkpoint: tensor '" + src + "' is missing (needed for " + r.name + ")");
      // Each source fills an equal slice along the first dimension (qkv from q, k, v).
      std::vector<int64_t> part = want;
      if (srcs.size() > 1) part[0] /= int64_t(srcs.size());
      std::vector<int64_t> got = it->second.shape;
      // Hugging Face stores cls/pos with the same (1, 1, d) / (1, n, d) shapes as timm.
      if (got != part)
        throw Error(ErrorCode::bad_shape, "checkpoint: tensor '" + src + "' has shape " + shape_str(got) +
                                              " but config.json implies " + shape_str(part));
      const std::vector<float> v = st.floats(src);
      std::copy(v.begin(), v.end(), r.data + filled);
      filled += v.size();
      used.insert(src);
    }
  }
  for (const auto& [name, t] : st.tensors) {
    if (used.count(name)) continue;
    std::string hint;
    if (name.find("dist_token") != std::string::npos || name.find("head_dist") != std::string::npos)
      hint = " (a distilled DeiT: its distillation token is not supported)";
    else if (name.find("fc_norm") != std::string::npos)
      hint = " (a global-pool ViT: only CLS-token pooling is supported)";
    else if (name.find("pooler") != std::string::npos)
      hint = " (ViTModel's pooler is not part of ViTForImageClassification)";
    throw Error(ErrorCode::unknown_tensor, "checkpoint: tensor '" + name + "' does not belong to a timm/DeiT-layout ViT" + hint);
  }
  return m;
}

}  // namespace

Config config_from_hf_json(const std::string& text, bool timm_names) {
  try {
    return hf_config_unchecked(text, timm_names);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::bad_format, std::string("config.json: ") + e.what());
  }
}

Model import_checkpoint(const uint8_t* bytes, size_t size, const std::string& config_json, Naming* detected) {
  try {
    return import_unchecked(bytes, size, config_json, detected);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::bad_format, std::string("checkpoint: ") + e.what());
  }
}

}  // namespace vitlens
