// config.cpp — validating a ViT config against the engine's limits.
#include "vitlens/model/config.h"

#include <cmath>
#include <string>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

void check_range(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    ErrorCode code = v > hi ? ErrorCode::limit : ErrorCode::bad_config;
    throw Error(code, std::string("config: ") + field + " = " + std::to_string(v) +
                          " is outside the supported range " + std::to_string(lo) + "…" +
                          std::to_string(hi));
  }
}

}  // namespace

void validate_config(const Config& c) {
  check_range("image height", c.image_h, 1, limits::max_image_side);
  check_range("image width", c.image_w, 1, limits::max_image_side);
  check_range("channels", c.channels, 1, limits::max_channels);
  check_range("patch size", c.patch, 1, limits::max_patch);
  check_range("width (hidden size)", c.dim, 1, limits::max_dim);
  check_range("depth (blocks)", c.depth, 1, limits::max_depth);
  check_range("heads", c.heads, 1, limits::max_heads);
  check_range("MLP width", c.mlp_dim, 1, limits::max_mlp_dim);
  check_range("classes", c.classes, 1, limits::max_classes);
  if (c.image_h % c.patch || c.image_w % c.patch)
    throw Error(ErrorCode::bad_config, "config: image size " + std::to_string(c.image_h) + "×" +
                                           std::to_string(c.image_w) +
                                           " is not a multiple of the patch size " +
                                           std::to_string(c.patch));
  check_range("register tokens", c.registers, 0, limits::max_registers);
  check_range("tokens (prefix + patches)",
              int64_t(c.prefix()) + int64_t(c.image_h / c.patch) * (c.image_w / c.patch), 2,
              limits::max_tokens);
  auto contradiction = [](const std::string& why) { throw Error(ErrorCode::bad_config, "config: " + why); };
  if (c.pool == Pooling::token && !c.class_token)
    contradiction("token pooling needs a class token (this model has none: use global_pool 'avg')");
  if (c.pool == Pooling::token_avg && !c.class_token)
    contradiction("token+avg pooling needs a class token");
  if (c.dist_token && !c.class_token)
    contradiction("a distillation token needs a class token before it");
  if (c.dist_token && c.pool != Pooling::token)
    contradiction(std::string("a distilled model pools its two tokens ('token'), not '") +
                  pooling_name(c.pool) + "'");
  if (c.fc_norm && c.pool != Pooling::avg)
    contradiction(std::string("fc_norm is implemented for 'avg' pooling only, not '") +
                  pooling_name(c.pool) + "'");
  if (c.pool != Pooling::avg && !c.final_norm)
    contradiction(std::string("'") + pooling_name(c.pool) + "' pooling reads the final norm, which this model lacks");
  if ((c.pos_grid_h == 0) != (c.pos_grid_w == 0) || c.pos_grid_h < 0 || c.pos_grid_w < 0 ||
      c.pos_grid_h > limits::max_image_side || c.pos_grid_w > limits::max_image_side)
    contradiction("the checkpoint's position grid must be two positive sizes (or absent)");
  if (c.dim % c.heads)
    throw Error(ErrorCode::bad_config, "config: width " + std::to_string(c.dim) +
                                           " is not a multiple of the number of heads " +
                                           std::to_string(c.heads));
  if (!(std::isfinite(c.ln_eps) && c.ln_eps > 0.0f && c.ln_eps < 1.0f))
    throw Error(ErrorCode::bad_config, "config: layer_norm_eps must be in (0, 1)");
  if (int(c.mean.size()) != c.channels || int(c.std.size()) != c.channels)
    throw Error(ErrorCode::bad_config, "config: image mean and std need one value per channel (" +
                                           std::to_string(c.channels) + ")");
  for (int i = 0; i < c.channels; ++i) {
    if (!std::isfinite(c.mean[i]) || !std::isfinite(c.std[i]) || !(c.std[i] > 0.0f))
      throw Error(ErrorCode::bad_config, "config: image mean must be finite and std positive");
  }
  if (int(c.class_names.size()) != c.classes)
    throw Error(ErrorCode::bad_config, "config: " + std::to_string(c.class_names.size()) +
                                           " class names for " + std::to_string(c.classes) +
                                           " classes");
  for (const std::string& name : c.class_names) {
    if (int64_t(name.size()) > limits::max_class_name_bytes)
      throw Error(ErrorCode::limit, "config: a class name is longer than " +
                                        std::to_string(limits::max_class_name_bytes) + " bytes");
  }
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::token: return "token";
    case Pooling::avg: return "avg";
    case Pooling::token_avg: return "token+avg";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_pytorch_tanh";
    case Activation::quick_gelu: return "quick_gelu";
  }
  return "?";
}

void fill_config_defaults(Config& c) {
  if (c.mean.empty()) c.mean.assign(size_t(c.channels > 0 ? c.channels : 0), 0.5f);
  if (c.std.empty()) c.std.assign(size_t(c.channels > 0 ? c.channels : 0), 0.5f);
  if (c.class_names.empty() && c.classes > 0 && c.classes <= limits::max_classes) {
    for (int i = 0; i < c.classes; ++i) c.class_names.push_back("class " + std::to_string(i));
  }
}

Config deit_tiny_config() {
  Config c;
  c.image_h = c.image_w = 224;
  c.channels = 3;
  c.patch = 16;
  c.dim = 192;
  c.depth = 12;
  c.heads = 3;
  c.mlp_dim = 768;
  c.classes = 1000;
  c.ln_eps = 1e-6f;
  c.mean = {0.485f, 0.456f, 0.406f};
  c.std = {0.229f, 0.224f, 0.225f};
  fill_config_defaults(c);
  return c;
}

}  // namespace vitlens
