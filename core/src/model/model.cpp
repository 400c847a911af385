// model.cpp — parameter allocation, the named parameter list, and reproducible random models.
#include "vitlens/model/model.h"

#include <cmath>

namespace vitlens {

Params params_zeros(const Config& c) {
  const int d = c.dim, n = c.tokens();
  Params p;
  p.patch_w = Mat::Zero(d, c.patch_dim());
  p.patch_b = Vec::Zero(d);
  p.cls_token = Vec::Zero(d);
  p.pos_embed = Mat::Zero(n, d);
  p.blocks.resize(size_t(c.depth));
  for (BlockParams& b : p.blocks) {
    b.norm1_w = Vec::Zero(d);
    b.norm1_b = Vec::Zero(d);
    b.qkv_w = Mat::Zero(3 * d, d);
    b.qkv_b = Vec::Zero(3 * d);
    b.proj_w = Mat::Zero(d, d);
    b.proj_b = Vec::Zero(d);
    b.norm2_w = Vec::Zero(d);
    b.norm2_b = Vec::Zero(d);
    b.fc1_w = Mat::Zero(c.mlp_dim, d);
    b.fc1_b = Vec::Zero(c.mlp_dim);
    b.fc2_w = Mat::Zero(d, c.mlp_dim);
    b.fc2_b = Vec::Zero(d);
  }
  p.norm_w = Vec::Zero(d);
  p.norm_b = Vec::Zero(d);
  p.head_w = Mat::Zero(c.classes, d);
  p.head_b = Vec::Zero(c.classes);
  return p;
}

namespace {

template <typename T>
ParamRef ref(const std::string& name, T& t, std::vector<int> shape, bool quantisable) {
  return ParamRef{name, t.data(), std::move(shape), size_t(t.size()), quantisable};
}

}  // namespace

std::vector<ParamRef> param_list(Params& p, const Config& c) {
  const int d = c.dim, m = c.mlp_dim;
  std::vector<ParamRef> out;
  out.push_back(ref("patch_embed.proj.weight", p.patch_w, {d, c.channels, c.patch, c.patch}, true));
  out.push_back(ref("patch_embed.proj.bias", p.patch_b, {d}, false));
  out.push_back(ref("cls_token", p.cls_token, {1, 1, d}, false));
  out.push_back(ref("pos_embed", p.pos_embed, {1, c.tokens(), d}, false));
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    BlockParams& b = p.blocks[i];
    const std::string pre = "blocks." + std::to_string(i) + ".";
    out.push_back(ref(pre + "norm1.weight", b.norm1_w, {d}, false));
    out.push_back(ref(pre + "norm1.bias", b.norm1_b, {d}, false));
    out.push_back(ref(pre + "attn.qkv.weight", b.qkv_w, {3 * d, d}, true));
    out.push_back(ref(pre + "attn.qkv.bias", b.qkv_b, {3 * d}, false));
    out.push_back(ref(pre + "attn.proj.weight", b.proj_w, {d, d}, true));
    out.push_back(ref(pre + "attn.proj.bias", b.proj_b, {d}, false));
    out.push_back(ref(pre + "norm2.weight", b.norm2_w, {d}, false));
    out.push_back(ref(pre + "norm2.bias", b.norm2_b, {d}, false));
    out.push_back(ref(pre + "mlp.fc1.weight", b.fc1_w, {m, d}, true));
    out.push_back(ref(pre + "mlp.fc1.bias", b.fc1_b, {m}, false));
    out.push_back(ref(pre + "mlp.fc2.weight", b.fc2_w, {d, m}, true));
    out.push_back(ref(pre + "mlp.fc2.bias", b.fc2_b, {d}, false));
  }
  out.push_back(ref("norm.weight", p.norm_w, {d}, false));
  out.push_back(ref("norm.bias", p.norm_b, {d}, false));
  out.push_back(ref("head.weight", p.head_w, {c.classes, d}, true));
  out.push_back(ref("head.bias", p.head_b, {c.classes}, false));
  return out;
}

int64_t param_count(const Config& c) {
  const int64_t d = c.dim, m = c.mlp_dim;
  const int64_t per_block = 4 * d + 3 * d * d + 3 * d + d * d + d + m * d + m + d * m + d;
  return d * c.patch_dim() + d + d + int64_t(c.tokens()) * d + c.depth * per_block + 2 * d +
         int64_t(c.classes) * d + c.classes;
}

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

// u in [0, 1) with 24 bits: exact in float32.
double uniform01(uint64_t seed, uint64_t k, uint64_t i) {
  const uint64_t z = splitmix64(seed * 0x100000001B3ull + (k << 32) + i);
  return double(z >> 40) * (1.0 / 16777216.0);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Model random_model(const Config& cfg, uint64_t seed) {
  Model m;
  m.config = cfg;
  fill_config_defaults(m.config);
  m.params = params_zeros(m.config);
  m.provenance = "random weights, seed " + std::to_string(seed);
  std::vector<ParamRef> refs = param_list(m.params, m.config);
  for (size_t k = 0; k < refs.size(); ++k) {
    const ParamRef& r = refs[k];
    const bool is_norm = r.name.find("norm") != std::string::npos;
    double a = 0.1, offset = 0.0;
    if (r.quantisable || r.name == "head.weight") {
      size_t fan_in = 1;
      for (size_t j = 1; j < r.shape.size(); ++j) fan_in *= size_t(r.shape[j]);
      a = std::sqrt(3.0 / double(fan_in));
    } else if (is_norm && ends_with(r.name, ".weight")) {
      a = 0.2;
      offset = 1.0;
    } else if (r.name == "cls_token" || r.name == "pos_embed") {
      a = 0.5;
    }
    for (size_t i = 0; i < r.size; ++i)
      r.data[i] = float(offset + a * (2.0 * uniform01(seed, k, i) - 1.0));
  }
  return m;
}

Image random_input(const Config& cfg, uint64_t seed) {
  Image x(cfg.channels, cfg.image_h, cfg.image_w);
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = float(2.0 * uniform01(seed, 0xFFFF, i) - 1.0);
  return x;
}

}  // namespace vitlens
