// test_import.cpp — importing every ViT family of METHODS.md ("Model variants") from safetensors
// and config.json: checkpoints written here from random models (renamed to timm or Hugging Face
// names by a table of this file, independent of the importer's), imported back, and compared
// tensor by tensor and logit by logit with the model they came from; then the refusals, each with
// the error that names the feature, key or tensor. The independent PyTorch reference's variant
// fixtures (tests/fixtures/variants/, when present) are imported and their logits matched.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/io/io.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
using json = nlohmann::json;

namespace {

// ---- writing checkpoints ------------------------------------------------------------------

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t to_f16(float f) {  // round to nearest; normal and subnormal halves (|f| < 65504)
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a < std::ldexp(1.0, -14)) return uint16_t(sign | uint16_t(std::nearbyint(a / std::ldexp(1.0, -24))));
  int e;
  const double m = std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1)
  uint32_t mant = uint32_t(std::nearbyint((m * 2.0 - 1.0) * 1024.0));
  int exp = e - 1 + 15;
  if (mant == 1024) {
    mant = 0;
    ++exp;
  }
  return uint16_t(sign | uint16_t(exp << 10) | uint16_t(mant));
}
float from_f16(uint16_t h) {
  const int exp = (h >> 10) & 0x1F;
  const double mant = h & 0x3FF;
  const double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return float((h & 0x8000) ? -v : v);
}

// A safetensors file under construction: tensors in insertion order.
struct Checkpoint {
  std::string dtype = "F32";
  json header = json::object();
  std::vector<uint8_t> data;

  void add(const std::string& name, const std::vector<int64_t>& shape, const float* v, size_t n,
           const std::string& as = "") {
    const std::string dt = as.empty() ? dtype : as;
    const size_t begin = data.size();
    for (size_t i = 0; i < n; ++i) {
      if (dt == "F32") {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&v[i]);
        data.insert(data.end(), p, p + 4);
      } else if (dt == "F64") {
        const double x = v[i];
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&x);
        data.insert(data.end(), p, p + 8);
      } else {
        const uint16_t h = dt == "BF16" ? to_bf16(v[i]) : to_f16(v[i]);
        data.push_back(uint8_t(h));
        data.push_back(uint8_t(h >> 8));
      }
    }
    header[name] = {{"dtype", dt}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  void add_i64(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& v) {
    const size_t begin = data.size();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
    data.insert(data.end(), p, p + v.size() * 8);
    header[name] = {{"dtype", "I64"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  void erase(const std::string& name) { header.erase(name); }  // its bytes stay, unreferenced
  bool has(const std::string& name) const { return header.contains(name); }
  std::vector<uint8_t> bytes() const {
    const std::string h = header.dump();
    std::vector<uint8_t> out(8 + h.size() + data.size());
    for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(uint64_t(h.size()) >> (8 * i));
    std::copy(h.begin(), h.end(), out.begin() + 8);
    std::copy(data.begin(), data.end(), out.begin() + 8 + std::ptrdiff_t(h.size()));
    return out;
  }
};

// ---- the families, as this test names them ------------------------------------------------

enum class Family { timm, vit, deit, dinov2, dinov2_reg, clip };

// Our (timm) name → the checkpoint's names (q/k/v: three) and the shape each is stored with.
std::vector<std::pair<std::string, std::vector<int64_t>>> checkpoint_names(const ParamRef& r, Family f, const Config& c) {
  std::vector<int64_t> shape(r.shape.begin(), r.shape.end());
  if (f == Family::timm) return {{r.name, shape}};
  const std::map<Family, std::string> prefix = {{Family::vit, "vit."},
                                                {Family::deit, "deit."},
                                                {Family::dinov2, "dinov2."},
                                                {Family::dinov2_reg, "dinov2_with_registers."},
                                                {Family::clip, "vision_model."}};
  const std::string P = prefix.at(f);
  const bool clip = f == Family::clip, dino = f == Family::dinov2 || f == Family::dinov2_reg;
  const std::map<std::string, std::string> top = {
      {"patch_embed.proj.weight", clip ? "embeddings.patch_embedding.weight" : "embeddings.patch_embeddings.projection.weight"},
      {"patch_embed.proj.bias", "embeddings.patch_embeddings.projection.bias"},
      {"cls_token", clip ? "embeddings.class_embedding" : "embeddings.cls_token"},
      {"dist_token", "embeddings.distillation_token"},
      {"reg_token", "embeddings.register_tokens"},
      {"pos_embed", clip ? "embeddings.position_embedding.weight" : "embeddings.position_embeddings"},
      {"norm_pre.weight", "pre_layrnorm.weight"},
      {"norm_pre.bias", "pre_layrnorm.bias"},
      {"norm.weight", "layernorm.weight"},
      {"norm.bias", "layernorm.bias"}};
  if (top.count(r.name)) {
    if (clip && r.name == "cls_token") shape = {c.dim};
    if (clip && r.name == "pos_embed") shape = {c.pos_rows(), c.dim};
    return {{P + top.at(r.name), shape}};
  }
  if (r.name.rfind("head_dist.", 0) == 0) return {{"distillation_classifier." + r.name.substr(10), shape}};
  if (r.name.rfind("head.", 0) == 0) return {{(f == Family::deit ? "cls_classifier." : "classifier.") + r.name.substr(5), shape}};
  const size_t dot = r.name.find('.', 7);
  const std::string n = r.name.substr(7, dot - 7), part = r.name.substr(dot + 1);
  const std::string L = P + (clip ? "encoder.layers." : "encoder.layer.") + n + ".";
  const std::string kind = part.substr(part.rfind('.') + 1);
  if (part.rfind("attn.qkv.", 0) == 0) {
    shape[0] /= 3;
    if (clip)
      return {{L + "self_attn.q_proj." + kind, shape}, {L + "self_attn.k_proj." + kind, shape}, {L + "self_attn.v_proj." + kind, shape}};
    return {{L + "attention.attention.query." + kind, shape},
            {L + "attention.attention.key." + kind, shape},
            {L + "attention.attention.value." + kind, shape}};
  }
  const std::map<std::string, std::string> hf = {{"attn.proj", "attention.output.dense"}, {"norm1", "layernorm_before"},
                                                 {"norm2", "layernorm_after"},           {"mlp.fc1", "intermediate.dense"},
                                                 {"mlp.fc2", "output.dense"}};
  const std::map<std::string, std::string> dn = {{"attn.proj", "attention.output.dense"}, {"norm1", "norm1"}, {"norm2", "norm2"},
                                                 {"mlp.fc1", "mlp.fc1"}, {"mlp.fc2", "mlp.fc2"},
                                                 {"ls1", "layer_scale1"}, {"ls2", "layer_scale2"}};
  const std::map<std::string, std::string> cl = {{"attn.proj", "self_attn.out_proj"}, {"norm1", "layer_norm1"},
                                                 {"norm2", "layer_norm2"}, {"mlp.fc1", "mlp.fc1"}, {"mlp.fc2", "mlp.fc2"}};
  const std::string module = part.substr(0, part.rfind('.'));
  const std::map<std::string, std::string>& table = clip ? cl : dino ? dn : hf;
  REQUIRE(table.count(module));
  return {{L + table.at(module) + (kind == "gamma" ? ".lambda1" : "." + kind), shape}};
}

struct Case {
  std::string name;
  Family family;
  Config cfg;
  json config_json;
  std::string dtype = "F32";
  bool qkv_bias = true, patch_bias = true;
};

// The source model of a case: random weights, rounded to the checkpoint's dtype, with the biases
// the checkpoint lacks zero.
Model source_model(const Case& k, uint64_t seed) {
  Model m = random_model(k.cfg, seed);
  for (ParamRef& r : param_list(m.params, m.config)) {
    for (size_t i = 0; i < r.size; ++i) {
      if (k.dtype == "BF16") r.data[i] = from_bf16(to_bf16(r.data[i]));
      if (k.dtype == "F16") r.data[i] = from_f16(to_f16(r.data[i]));
    }
  }
  if (!k.qkv_bias)
    for (BlockParams& b : m.params.blocks) b.qkv_b.setZero();
  if (!k.patch_bias) m.params.patch_b.setZero();
  return m;
}

Checkpoint write_checkpoint(const Case& k, Model& m) {
  Checkpoint ck;
  ck.dtype = k.dtype;
  for (const ParamRef& r : param_list(m.params, m.config)) {
    const bool qkv_b = r.name.find("attn.qkv.bias") != std::string::npos;
    if ((qkv_b && !k.qkv_bias) || (r.name == "patch_embed.proj.bias" && !k.patch_bias)) continue;
    const auto names = checkpoint_names(r, k.family, m.config);
    const size_t part = r.size / names.size();
    for (size_t i = 0; i < names.size(); ++i) ck.add(names[i].first, names[i].second, r.data + i * part, part);
  }
  // What each Hugging Face class stores and does not read.
  const Vec d_zero = Vec::Zero(k.cfg.dim), d_one = Vec::Ones(k.cfg.dim);
  if (k.family == Family::dinov2) ck.add("dinov2.embeddings.mask_token", {1, k.cfg.dim}, d_zero.data(), size_t(k.cfg.dim));
  if (k.family == Family::dinov2_reg)
    ck.add("dinov2_with_registers.embeddings.mask_token", {1, k.cfg.dim}, d_zero.data(), size_t(k.cfg.dim));
  if (k.family == Family::clip) {
    ck.add("vision_model.post_layernorm.weight", {k.cfg.dim}, d_one.data(), size_t(k.cfg.dim));
    ck.add("vision_model.post_layernorm.bias", {k.cfg.dim}, d_zero.data(), size_t(k.cfg.dim));
  }
  return ck;
}

json labels(int classes) {
  json j = json::object();
  for (int i = 0; i < classes; ++i) j[std::to_string(i)] = "class " + std::to_string(i);
  return j;
}

// The base keys every config.json here has (Hugging Face names), for `c`.
json hf_keys(const Config& c) {
  return json{{"image_size", {c.image_h, c.image_w}},
              {"patch_size", c.patch},
              {"num_channels", c.channels},
              {"hidden_size", c.dim},
              {"num_hidden_layers", c.depth},
              {"num_attention_heads", c.heads},
              {"intermediate_size", c.mlp_dim},
              {"layer_norm_eps", c.ln_eps},
              {"hidden_act", activation_name(c.act)},
              {"id2label", labels(c.classes)},
              {"image_mean", c.mean},
              {"image_std", c.std}};
}

Config small(int h, int w, int channels, int patch, int dim, int depth, int heads, int mlp, int classes) {
  Config c;
  c.image_h = h;
  c.image_w = w;
  c.channels = channels;
  c.patch = patch;
  c.dim = dim;
  c.depth = depth;
  c.heads = heads;
  c.mlp_dim = mlp;
  c.classes = classes;
  c.ln_eps = 1e-6f;
  for (int i = 0; i < classes; ++i) c.class_names.push_back("class " + std::to_string(i));
  fill_config_defaults(c);
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  {  // timm deit3_*: LayerScale, pos_embed without the class row
    Case k{"timm deit3", Family::timm, small(12, 16, 3, 4, 24, 2, 3, 48, 5), {}};
    k.cfg.layer_scale = true;
    k.cfg.no_embed_class = true;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"global_pool", "token"}, {"class_token", true}, {"no_embed_class", true}, {"layerscale_value", 1e-6}});
    out.push_back(k);
  }
  {  // timm deit_*_distilled_*, F16
    Case k{"timm distilled", Family::timm, small(16, 12, 3, 4, 32, 2, 4, 64, 4), {}, "F16"};
    k.cfg.dist_token = true;
    k.config_json = hf_keys(k.cfg);
    out.push_back(k);
  }
  {  // timm vit_*_reg4_gap_*: no class token, registers, no_embed_class, avg + fc_norm, LayerScale (inferred)
    Case k{"timm reg gap", Family::timm, small(16, 12, 1, 4, 16, 2, 2, 32, 3), {}};
    k.cfg.class_token = false;
    k.cfg.registers = 4;
    k.cfg.no_embed_class = true;
    k.cfg.layer_scale = true;
    k.cfg.final_norm = false;
    k.cfg.fc_norm = true;
    k.cfg.pool = Pooling::avg;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"global_pool", "avg"}, {"class_token", false}, {"reg_tokens", 4}, {"no_embed_class", true}});
    out.push_back(k);
  }
  {  // timm CLIP-like: class token, avg + fc_norm, norm_pre, no patch bias, no q/k/v bias, tanh GELU, F64
    Case k{"timm avg fc_norm pre_norm", Family::timm, small(12, 12, 3, 4, 16, 3, 2, 32, 4), {}, "F64"};
    k.cfg.pool = Pooling::avg;
    k.cfg.final_norm = false;
    k.cfg.fc_norm = true;
    k.cfg.pre_norm = true;
    k.cfg.act = Activation::gelu_tanh;
    k.qkv_bias = false;
    k.patch_bias = false;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"global_pool", "avg"}, {"qkv_bias", false}, {"pre_norm", true}});
    out.push_back(k);
  }
  {  // a plain checkpoint whose config.json says global_pool avg: avg pooling of the final-norm
     // tokens (its `norm`, not an fc_norm, says where the norm is), quick GELU
    Case k{"timm avg norm", Family::timm, small(8, 16, 3, 4, 16, 2, 2, 32, 3), {}};
    k.cfg.pool = Pooling::avg;
    k.cfg.act = Activation::quick_gelu;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"global_pool", "avg"}});
    out.push_back(k);
  }
  {  // Hugging Face ViTForImageClassification, BF16
    Case k{"HF ViT", Family::vit, small(12, 16, 3, 4, 16, 2, 2, 32, 3), {}, "BF16"};
    k.cfg.ln_eps = 1e-12f;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"architectures", {"ViTForImageClassification"}}, {"model_type", "vit"}, {"qkv_bias", true},
                          {"hidden_dropout_prob", 0.0}, {"encoder_stride", 4}, {"torch_dtype", "bfloat16"}});
    out.push_back(k);
  }
  {  // Hugging Face DeiTForImageClassificationWithTeacher
    Case k{"HF DeiT with teacher", Family::deit, small(12, 16, 3, 4, 16, 3, 2, 32, 6), {}};
    k.cfg.dist_token = true;
    k.cfg.ln_eps = 1e-12f;
    k.config_json = hf_keys(k.cfg);
    k.config_json.update({{"architectures", {"DeiTForImageClassificationWithTeacher"}}, {"model_type", "deit"}});
    out.push_back(k);
  }
  {  // Hugging Face Dinov2ForImageClassification: token+avg, LayerScale, mlp_ratio, mask_token
    Case k{"HF Dinov2", Family::dinov2, small(15, 15, 3, 5, 24, 2, 3, 48, 5), {}};
    k.cfg.layer_scale = true;
    k.cfg.pool = Pooling::token_avg;
    k.config_json = hf_keys(k.cfg);
    k.config_json.erase("intermediate_size");
    k.config_json.update({{"architectures", {"Dinov2ForImageClassification"}}, {"model_type", "dinov2"}, {"mlp_ratio", 2},
                          {"layerscale_value", 1.0}, {"use_swiglu_ffn", false}, {"drop_path_rate", 0.0}});
    out.push_back(k);
  }
  {  // Hugging Face Dinov2WithRegistersForImageClassification
    Case k{"HF Dinov2 registers", Family::dinov2_reg, small(12, 12, 3, 4, 16, 2, 2, 64, 3), {}};
    k.cfg.layer_scale = true;
    k.cfg.registers = 2;
    k.cfg.pool = Pooling::token_avg;
    k.config_json = hf_keys(k.cfg);
    k.config_json.erase("intermediate_size");
    k.config_json.update({{"architectures", {"Dinov2WithRegistersForImageClassification"}},
                          {"model_type", "dinov2_with_registers"}, {"mlp_ratio", 4}, {"num_register_tokens", 2},
                          {"out_features", {"stage2"}}, {"out_indices", {2}}});
    out.push_back(k);
  }
  {  // Hugging Face CLIPForImageClassification: vision_config, pre_layrnorm, no patch bias, quick GELU
    Case k{"HF CLIP", Family::clip, small(18, 18, 3, 6, 16, 2, 2, 64, 4), {}};
    k.cfg.pre_norm = true;
    k.cfg.pool = Pooling::avg;
    k.cfg.final_norm = false;
    k.cfg.act = Activation::quick_gelu;
    k.cfg.ln_eps = 1e-5f;
    k.patch_bias = false;
    json vision = hf_keys(k.cfg);
    for (const char* top : {"id2label", "image_mean", "image_std"}) vision.erase(top);
    vision["image_size"] = 18;
    vision["model_type"] = "clip_vision_model";
    vision["projection_dim"] = 16;
    k.config_json = {{"architectures", {"CLIPForImageClassification"}}, {"model_type", "clip"}, {"projection_dim", 16},
                     {"vision_config", vision}, {"text_config", json::object()}, {"id2label", labels(4)},
                     {"image_mean", k.cfg.mean}, {"image_std", k.cfg.std}};
    out.push_back(k);
  }
  return out;
}

Model import(const Checkpoint& ck, const json& cfg, Naming* naming = nullptr) {
  const std::vector<uint8_t> b = ck.bytes();
  return import_checkpoint(b.data(), b.size(), cfg.dump(), naming);
}

void expect_error(const Checkpoint& ck, const json& cfg, ErrorCode code, const std::string& text) {
  try {
    import(ck, cfg);
    FAIL("imported: " << cfg.dump());
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(error_code_name(e.code()) == std::string(error_code_name(code)));
    CHECK_THAT(e.what(), Catch::Contains(text));
  }
}

const Case& find_case(const std::vector<Case>& all, const std::string& name) {
  for (const Case& k : all)
    if (k.name == name) return k;
  FAIL("no case " << name);
  return all[0];
}

}  // namespace

TEST_CASE("every family imports to the model it was written from: config, tensors and logits", "[import]") {
  for (const Case& k : cases()) {
    INFO(k.name);
    Model src = source_model(k, 7);
    const Checkpoint ck = write_checkpoint(k, src);
    Naming naming;
    Model m = import(ck, k.config_json, &naming);
    CHECK((naming == Naming::timm) == (k.family == Family::timm));
    const Config &a = m.config, &b = src.config;
    CHECK(a.image_h == b.image_h);
    CHECK(a.image_w == b.image_w);
    CHECK(a.channels == b.channels);
    CHECK(a.dim == b.dim);
    CHECK(a.mlp_dim == b.mlp_dim);
    CHECK(a.ln_eps == b.ln_eps);
    CHECK(a.class_token == b.class_token);
    CHECK(a.dist_token == b.dist_token);
    CHECK(a.registers == b.registers);
    CHECK(a.no_embed_class == b.no_embed_class);
    CHECK(a.pre_norm == b.pre_norm);
    CHECK(a.layer_scale == b.layer_scale);
    CHECK(a.final_norm == b.final_norm);
    CHECK(a.fc_norm == b.fc_norm);
    CHECK(a.pool == b.pool);
    CHECK(a.act == b.act);
    CHECK(a.pos_grid_h == 0);
    CHECK(a.pos_grid_w == 0);
    CHECK(a.class_names == b.class_names);
    CHECK(a.mean == b.mean);
    const std::vector<ParamRef> ra = param_list(m.params, a), rb = param_list(src.params, b);
    REQUIRE(ra.size() == rb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      INFO(ra[i].name);
      REQUIRE(ra[i].name == rb[i].name);
      CHECK(std::memcmp(ra[i].data, rb[i].data, ra[i].size * 4) == 0);
    }
    const Image x = random_input(b, 11);
    Trace t1, t2;
    vit_forward(t1, m, x);
    vit_forward(t2, src, x);
    CHECK((t1.logits - t2.logits).cwiseAbs().maxCoeff() <= 1e-6f);
  }
}

TEST_CASE("CLIP's position_ids buffer is accepted only when it is 0, 1, …, n−1", "[import]") {
  const std::vector<Case> all = cases();
  const Case& k = find_case(all, "HF CLIP");
  Model src = source_model(k, 3);
  Checkpoint ck = write_checkpoint(k, src);
  const int n = src.config.pos_rows();
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = i;
  ck.add_i64("vision_model.embeddings.position_ids", {1, n}, ids);
  CHECK_NOTHROW(import(ck, k.config_json));
  std::swap(ids[1], ids[2]);
  ck.add_i64("vision_model.embeddings.position_ids", {1, n}, ids);
  expect_error(ck, k.config_json, ErrorCode::unknown_tensor, "'vision_model.embeddings.position_ids'");
}

TEST_CASE("the importer refuses what the engine does not implement, naming it", "[import]") {
  const std::vector<Case> all = cases();
  auto checkpoint_of = [&](const std::string& name) {
    const Case& k = find_case(all, name);
    Model m = source_model(k, 5);
    return std::make_pair(write_checkpoint(k, m), k.config_json);
  };
  const auto [timm, timm_cfg] = checkpoint_of("timm deit3");
  const auto [reg, reg_cfg] = checkpoint_of("timm reg gap");
  const auto [vit, vit_cfg] = checkpoint_of("HF ViT");
  const auto [deit, deit_cfg] = checkpoint_of("HF DeiT with teacher");
  const auto [dino, dino_cfg] = checkpoint_of("HF Dinov2");
  const auto [clip, clip_cfg] = checkpoint_of("HF CLIP");
  auto with = [](json cfg, const json& patch) {
    cfg.update(patch);
    return cfg;
  };
  auto without = [](Checkpoint ck, const std::string& name) {
    ck.erase(name);
    return ck;
  };
  const std::vector<float> zero_values(4096, 0.0f);
  const float* zeros = zero_values.data();

  SECTION("config keys of features vitlens lacks") {
    expect_error(timm, with(timm_cfg, {{"global_pool", "map"}}), ErrorCode::bad_config, "attention pooling (global_pool 'map')");
    expect_error(timm, with(timm_cfg, {{"global_pool", ""}}), ErrorCode::bad_config, "without pooling (global_pool '')");
    expect_error(timm, with(timm_cfg, {{"global_pool", "avgmax"}}), ErrorCode::bad_config, "max pooling");
    expect_error(vit, with(vit_cfg, {{"model_type", "swin"}, {"architectures", {"SwinForImageClassification"}}}),
                 ErrorCode::bad_config, "windowed attention");
    expect_error(vit, with(vit_cfg, {{"window_size", 7}}), ErrorCode::bad_config, "windowed attention (Swin: window_size)");
    expect_error(vit, with(vit_cfg, {{"use_relative_position_bias", true}}), ErrorCode::bad_config, "relative position bias");
    expect_error(vit, with(vit_cfg, {{"rope_theta", 10000}}), ErrorCode::bad_config, "rotary position embeddings ('rope_theta')");
    expect_error(vit, with(vit_cfg, {{"model_type", "vit_hybrid"}, {"architectures", {"ViTHybridForImageClassification"}}}),
                 ErrorCode::bad_config, "convolutional stem");
    expect_error(dino, with(dino_cfg, {{"use_swiglu_ffn", true}}), ErrorCode::bad_config, "SwiGLU FFN (use_swiglu_ffn: true)");
    expect_error(vit, with(vit_cfg, {{"hidden_act", "relu"}}), ErrorCode::bad_config, "hidden_act 'relu' is not supported");
    expect_error(vit, with(vit_cfg, {{"qk_norm", true}}), ErrorCode::bad_config, "q/k normalisation");
    expect_error(vit, with(vit_cfg, {{"some_new_switch", 3}}), ErrorCode::bad_config, "key 'some_new_switch' is not one vitlens knows");
    expect_error(timm, with(timm_cfg, {{"architecture", "vit_base_patch16_rope_reg1_gap_256"}}), ErrorCode::bad_config, "rotary");
    expect_error(vit, with(vit_cfg, {{"architectures", {"DeiTForImageClassification"}}, {"model_type", "deit"}}),
                 ErrorCode::bad_config, "DeiTForImageClassification (a [DIST] token, but only the CLS head is read)");
    // Harmless keys are accepted.
    CHECK_NOTHROW(import(vit, with(vit_cfg, {{"initializer_range", 0.02}, {"transformers_version", "4.40.0"},
                                             {"label2id", {{"class 0", 0}}}, {"chunk_size_feed_forward", 0}})));
  }
  SECTION("keys that contradict each other, the family or the tensors") {
    expect_error(timm, with(timm_cfg, {{"class_token", false}}), ErrorCode::bad_config, "global_pool 'token' needs a class token, but class_token is false");
    expect_error(timm, with(timm_cfg, {{"class_token", false}, {"global_pool", "avg"}, {"fc_norm", false}}), ErrorCode::bad_config,
                 "'class_token: false' contradicts the checkpoint, which has 'cls_token'");
    expect_error(reg, with(reg_cfg, {{"global_pool", "token"}}), ErrorCode::bad_config, "global_pool 'token' needs a class token");
    expect_error(timm, with(timm_cfg, {{"fc_norm", true}}), ErrorCode::bad_config, "'fc_norm: true' with global_pool 'token'");
    {  // an fc_norm tensor with token pooling: timm's norm on the class token, not implemented
      Checkpoint ck = without(without(timm, "norm.weight"), "norm.bias");
      ck.add("fc_norm.weight", {24}, zeros, 24);
      ck.add("fc_norm.bias", {24}, zeros, 24);
      expect_error(ck, timm_cfg, ErrorCode::bad_config, "an 'fc_norm' with global_pool 'token'");
      ck.add("norm.weight", {24}, zeros, 24);
      expect_error(ck, timm_cfg, ErrorCode::unknown_tensor, "both a final 'norm' and an 'fc_norm'");
    }
    expect_error(timm, with(timm_cfg, {{"global_pool", "avg"}, {"fc_norm", true}}), ErrorCode::bad_config,
                 "'fc_norm: true', 'final_norm: true' imply an 'fc_norm', which the checkpoint lacks");
    expect_error(reg, with(reg_cfg, {{"fc_norm", false}}), ErrorCode::bad_config,
                 "'fc_norm: false', 'final_norm: true' imply no 'fc_norm', but the checkpoint has 'fc_norm.weight'");
    expect_error(reg, with(reg_cfg, {{"final_norm", false}}), ErrorCode::bad_config,
                 "'final_norm: false' imply no 'fc_norm', but the checkpoint has 'fc_norm.weight'");
    expect_error(reg, with(reg_cfg, {{"reg_tokens", 3}}), ErrorCode::bad_config, "'reg_tokens' 3 disagrees with the checkpoint's 4 register tokens");
    expect_error(reg, with(reg_cfg, {{"num_register_tokens", 5}}), ErrorCode::bad_config, "disagrees with 'num_register_tokens' 5");
    expect_error(reg, with(reg_cfg, {{"reg_tokens", int64_t(1) << 31}}), ErrorCode::bad_config, "disagrees");
    expect_error(dino, with(dino_cfg, {{"global_pool", "token"}}), ErrorCode::bad_config, "contradicts Hugging Face Dinov2ForImageClassification, which pools 'token+avg'");
    expect_error(vit, with(vit_cfg, {{"qkv_bias", false}}), ErrorCode::bad_config, "'qkv_bias: false' contradicts the checkpoint");
    expect_error(vit, with(vit_cfg, {{"architectures", {"Dinov2ForImageClassification"}}, {"model_type", "dinov2"}}),
                 ErrorCode::bad_config, "but the checkpoint's tensors are named for Hugging Face ViTForImageClassification");
    expect_error(timm, with(timm_cfg, {{"no_embed_class", false}}), ErrorCode::bad_config, "'no_embed_class: false' contradicts");
    json no_key = timm_cfg;  // no_embed_class is not inferred: a pos_embed of the patches only is mis-shaped, with a hint
    no_key.erase("no_embed_class");
    expect_error(timm, no_key, ErrorCode::bad_shape, "say \"no_embed_class\": true");
    expect_error(vit, with(vit_cfg, {{"intermediate_size", 32}, {"mlp_ratio", 4}}), ErrorCode::bad_config, "disagrees with hidden_size · mlp_ratio");
    json no_dim = clip_cfg;  // CLIP's dimensions are read from vision_config, and named so
    no_dim["vision_config"].erase("hidden_size");
    expect_error(clip, no_dim, ErrorCode::bad_config, "'vision_config.hidden_size' is missing");
    no_dim = clip_cfg;
    no_dim["vision_config"]["use_relative_position_bias"] = true;
    expect_error(clip, no_dim, ErrorCode::bad_config, "relative position bias");
    no_dim = clip_cfg;
    no_dim["vision_config"]["layer_scale_init"] = 0.1;
    expect_error(clip, no_dim, ErrorCode::bad_config, "key 'vision_config.layer_scale_init' is not one vitlens knows");
    expect_error(vit, with(vit_cfg, {{"num_labels", 7}}), ErrorCode::bad_config, "'num_labels' 7 disagrees with the 3 classes of the labels of id2label");
  }
  SECTION("tensors of features vitlens lacks, or missing in some blocks") {
    Checkpoint ck = timm;
    ck.add("blocks.0.attn.relative_position_bias_table", {4, 3}, zeros, 12);
    expect_error(ck, timm_cfg, ErrorCode::unknown_tensor, "relative position bias");
    ck = timm;
    ck.add("patch_embed.backbone.stem.conv.weight", {4}, zeros, 4);
    expect_error(ck, timm_cfg, ErrorCode::unknown_tensor, "convolutional");
    ck = timm;
    ck.add("blocks.1.mlp.w12.weight", {4}, zeros, 4);
    expect_error(ck, timm_cfg, ErrorCode::unknown_tensor, "SwiGLU");
    ck = timm;
    ck.add("attn_pool.latent", {1, 1, 24}, zeros, 24);
    expect_error(ck, timm_cfg, ErrorCode::unknown_tensor, "attention pooling");
    ck = vit;
    ck.add("vit.embeddings.mask_token", {1, 1, 16}, zeros, 16);  // only Dinov2's mask_token is accepted
    expect_error(ck, vit_cfg, ErrorCode::unknown_tensor, "'vit.embeddings.mask_token'");
    // A q/k/v bias in some blocks only.
    expect_error(without(vit, "vit.encoder.layer.1.attention.attention.key.bias"), vit_cfg, ErrorCode::missing_tensor,
                 "present in some blocks and not in others");
    // LayerScale in one block only.
    expect_error(without(timm, "blocks.1.ls2.gamma"), timm_cfg, ErrorCode::missing_tensor, "'blocks.1.ls2.gamma' is missing");
    // A distillation token without its head, and a head without its token.
    ck = timm;
    ck.add("dist_token", {1, 1, 24}, zeros, 24);
    expect_error(ck, timm_cfg, ErrorCode::missing_tensor, "a distillation token 'dist_token' without its head 'head_dist.weight'");
    ck = timm;
    ck.add("head_dist.weight", {5, 24}, zeros, 5 * 24);
    ck.add("head_dist.bias", {5}, zeros, 5);
    expect_error(ck, timm_cfg, ErrorCode::missing_tensor, "a distillation head 'head_dist.weight' without its token 'dist_token'");
  }
  SECTION("shapes: LayerScale of the wrong length, registers of the wrong width, pos_embed with register rows") {
    Checkpoint ck = timm;
    ck.add("blocks.0.ls1.gamma", {23}, zeros, 23);
    expect_error(ck, timm_cfg, ErrorCode::bad_shape, "'blocks.0.ls1.gamma' has shape [23]");
    ck = reg;
    ck.add("reg_token", {1, 4, 15}, zeros, 60);
    expect_error(ck, reg_cfg, ErrorCode::bad_shape, "register tokens 'reg_token' have shape [1, 4, 15]");
    // pos_embed with 4 register rows (12 patches + 4): refused with the reason.
    ck = reg;
    std::vector<float> pos(16 * 16, 0.0f);
    ck.add("pos_embed", {1, 16, 16}, pos.data(), pos.size());
    json cfg = reg_cfg;
    cfg.erase("no_embed_class");
    expect_error(ck, cfg, ErrorCode::bad_config, "a pos_embed with rows for the register tokens");
  }
  SECTION("DeiT weights without the teacher head") {
    Checkpoint ck = deit;
    ck.erase("cls_classifier.weight");
    ck.erase("cls_classifier.bias");
    ck.erase("distillation_classifier.weight");
    ck.erase("distillation_classifier.bias");
    ck.add("classifier.weight", {6, 16}, zeros, 96);
    ck.add("classifier.bias", {6}, zeros, 6);
    expect_error(ck, with(deit_cfg, {{"architectures", {"DeiTForImageClassificationWithTeacher"}}}), ErrorCode::bad_config,
                 "DeiTForImageClassification (a [DIST] token, but only the CLS head is read)");
  }
  SECTION("CLIP: only post_layernorm goes unused") {
    Checkpoint ck = clip;
    ck.add("vision_model.post_layernorm.extra", {16}, zeros, 16);
    expect_error(ck, clip_cfg, ErrorCode::unknown_tensor, "'vision_model.post_layernorm.extra'");
    ck = clip;
    ck.add("visual_projection.weight", {16, 16}, zeros, 256);
    expect_error(ck, clip_cfg, ErrorCode::unknown_tensor, "CLIP's image projection");
  }
}

TEST_CASE("a checkpoint is checked against its config.json before the parameters are allocated", "[import]") {
  const std::vector<Case> all = cases();
  const Case& k = find_case(all, "HF ViT");
  Model m = source_model(k, 5);
  const Checkpoint vit = write_checkpoint(k, m);
  SECTION("tensors that share bytes are refused by the parser") {
    Checkpoint ck = vit;
    json& cls = ck.header["vit.embeddings.cls_token"]["data_offsets"];
    const size_t bytes = cls[1].get<size_t>() - cls[0].get<size_t>();
    const size_t pos = ck.header["vit.embeddings.position_embeddings"]["data_offsets"][0].get<size_t>();
    cls = {pos, pos + bytes};  // the cls token read from pos_embed's first row
    expect_error(ck, k.config_json, ErrorCode::bad_format, "overlap in the data section");
  }
  SECTION("a config.json of ~350 M parameters (1.4 GB) over a checkpoint of a few kilobytes") {
    json cfg = k.config_json;
    cfg.update({{"hidden_size", 2048}, {"num_hidden_layers", 7}, {"num_attention_heads", 16}, {"intermediate_size", 8192}});
    expect_error(vit, cfg, ErrorCode::bad_shape,
                 "'vit.embeddings.patch_embeddings.projection.weight' has shape [16, 3, 4, 4] but config.json implies [2048, 3, 4, 4]");
  }
  SECTION("a tensor of a dtype that cannot be imported, with no bytes") {
    Checkpoint ck = vit;
    ck.header["classifier.weight"]["dtype"] = "I8";
    ck.header["classifier.weight"]["data_offsets"] = {0, 0};
    expect_error(ck, k.config_json, ErrorCode::bad_format, "'classifier.weight' has dtype 'I8'");
  }
}

TEST_CASE("the independent reference's variant checkpoints import and give its logits", "[import][reference]") {
  // tests/fixtures/variants/<case>/ (tests/reference/make_variant_fixtures.py); another directory
  // with VITLENS_VARIANT_FIXTURES.
  const char* env = std::getenv("VITLENS_VARIANT_FIXTURES");
  const std::string dir = env ? std::string(env) : test::source_path("tests/fixtures/variants");
  int checked = 0;
  for (const char* name : {"deit3", "distilled_timm", "distilled_hf", "reg_gap", "avg_fcnorm_cls", "dinov2", "dinov2_reg",
                           "clip", "resized"}) {
    const std::string d = dir + "/" + name + "/";
    std::ifstream meta_file(d + "meta.json");
    if (!meta_file.good()) continue;
    INFO(name);
    const json meta = json::parse(meta_file);
    const std::vector<uint8_t> cfg = read_file(d + "config.json", 1 << 20);
    const std::vector<uint8_t> ckpt = read_file(d + "model.safetensors", 1 << 26);
    Model m = import_checkpoint(ckpt.data(), ckpt.size(), std::string(cfg.begin(), cfg.end()));
    const json& flags = meta["variant_flags"];
    CHECK(m.config.class_token == flags["class_token"].get<bool>());
    CHECK(m.config.dist_token == flags["dist_token"].get<bool>());
    CHECK(m.config.registers == flags["registers"].get<int>());
    CHECK(m.config.no_embed_class == flags["no_embed_class"].get<bool>());
    CHECK(m.config.pre_norm == flags["pre_norm"].get<bool>());
    CHECK(m.config.layer_scale == flags["layer_scale"].get<bool>());
    CHECK(m.config.final_norm == flags["final_norm"].get<bool>());
    CHECK(m.config.fc_norm == flags["fc_norm"].get<bool>());
    const std::string pool = flags["pool"].get<std::string>();
    CHECK(std::string(pooling_name(m.config.pool)) == (pool == "distilled" ? "token" : pool));
    CHECK(std::string(activation_name(m.config.act)) == flags["act"].get<std::string>());
    CHECK(m.config.ln_eps == meta["config"]["ln_eps"].get<float>());
    const int h = meta["config"]["image_h"].get<int>(), w = meta["config"]["image_w"].get<int>();
    if (h != m.config.image_h || w != m.config.image_w) m = resize_input(m, h, w);
    const NpyArray x = read_npy(d + "input.npy");
    Image img(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
    for (size_t i = 0; i < x.data.size(); ++i) img.data[i] = float(x.data[i]);
    Trace tr;
    vit_forward(tr, m, img);
    const NpyArray logits = read_npy(d + "logits.npy");
    REQUIRE(logits.data.size() == size_t(m.config.classes));
    double err = 0.0;
    for (int i = 0; i < m.config.classes; ++i) err = std::max(err, std::fabs(double(tr.logits[i]) - logits.data[size_t(i)]));
    INFO("max |logit − reference| = " << err);
    CHECK(err < 1e-5);
    ++checked;
  }
  if (checked == 0) WARN("no variant fixtures in " << dir << ": skipped");
}

TEST_CASE("a checkpoint read through a ByteReader imports as from memory, reporting progress", "[import]") {
  // The wasm module reads a checkpoint from a JS array one tensor at a time: the header first, then
  // each tensor when the importer asks for it. Every read stays inside the file, the model is the
  // one imported from memory, progress rises to 1, and returning false stops the import.
  const std::vector<Case> all = cases();
  const Case& k = find_case(all, "HF ViT");
  Model src = source_model(k, 5);
  const std::vector<uint8_t> file = write_checkpoint(k, src).bytes();
  size_t reads = 0, read_bytes = 0;
  const ByteReader read = [&](uint64_t offset, size_t n, uint8_t* out) {
    REQUIRE(offset + n <= file.size());
    std::memcpy(out, file.data() + offset, n);
    ++reads;
    read_bytes += n;
  };
  const SafeTensors st = parse_safetensors(read, file.size());
  CHECK(reads == 2);  // the header's length, then the header
  std::vector<double> seen;
  Model m = import_checkpoint(st, k.config_json.dump(), nullptr, [&](double f) {
    seen.push_back(f);
    return true;
  });
  CHECK(read_bytes == file.size());  // each tensor once, nothing else
  REQUIRE(!seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
  CHECK(seen.front() > 0.0);
  CHECK(seen.back() == Approx(1.0));
  Model ref = import(write_checkpoint(k, src), k.config_json);
  const std::vector<ParamRef> ra = param_list(m.params, m.config), rb = param_list(ref.params, ref.config);
  REQUIRE(ra.size() == rb.size());
  for (size_t i = 0; i < ra.size(); ++i) CHECK(std::memcmp(ra[i].data, rb[i].data, ra[i].size * 4) == 0);

  int calls = 0;
  try {
    import_checkpoint(st, k.config_json.dump(), nullptr, [&](double) { return ++calls < 3; });
    FAIL("not cancelled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::cancelled);
  }
  CHECK(calls == 3);
}
