// config.h — the hyper-parameters of a ViT in the timm / DeiT layout, and its variants.
//
// Pre-LN blocks and a learned position embedding. The plain model (the defaults) has a CLS token,
// exact (erf) GELU and the head on the final-LN CLS token. The variants of the timm / Hugging Face
// families (shared METHODS.md, "Model variants") are properties of the config: a distillation
// token, register tokens, no class token, pos_embed without prefix rows, LayerScale, another
// activation, a LayerNorm before block 1, and the pooling (`token`, `avg` with or without the final
// norm and `fc_norm`, `token+avg`). H and W need not be equal; both must be multiples of the patch.
//
// Token order: [CLS][DIST][REG × r][patches], each present or not; the tokens before the patches
// are the prefix. Maps cover the patch tokens only.
#pragma once

#include <string>
#include <vector>

#include "vitlens/layers/activation.h"

namespace vitlens {

enum class OutputKind { softmax, sigmoid };  // single-label or multi-label classifier

// What the head reads (METHODS.md "Model variants", pooling).
enum class Pooling {
  token,      // the CLS row of the final norm (distilled: ½(head(CLS) + head_dist(DIST)))
  avg,        // the mean of the patch rows (prefix excluded), then fc_norm if present
  token_avg,  // concat[CLS row, mean of the patch rows] of the final norm (Dinov2)
};


struct Config {
  int image_h = 224, image_w = 224;  // model input size, pixels
  int channels = 3;
  int patch = 16;
  int dim = 192;                     // token width d
  int depth = 12;                    // blocks L
  int heads = 3;                     // H, d must be a multiple of H
  int mlp_dim = 768;
  int classes = 1000;
  float ln_eps = 1e-6f;
  OutputKind output = OutputKind::softmax;
  std::vector<float> mean;           // (channels) input normalisation: (v/255 - mean) / std
  std::vector<float> std;            // (channels)
  std::vector<std::string> class_names;  // (classes)

  // The variants. Defaults: the plain timm / DeiT ViT.
  bool class_token = true;     // a CLS token (timm `class_token`)
  bool dist_token = false;     // a distillation token and head_dist (DeiT distilled)
  int registers = 0;           // register tokens r (`num_register_tokens`, timm `reg_tokens`)
  bool no_embed_class = false; // pos_embed covers only the patches (timm `no_embed_class`)
  bool pre_norm = false;       // a LayerNorm before block 1 (timm `norm_pre`, CLIP `pre_layrnorm`)
  bool layer_scale = false;    // x' = x + γ1 ⊙ o, x_{b+1} = x' + γ2 ⊙ f (DeiT-III, DINOv2)
  bool final_norm = true;      // the final `norm` over all tokens (off: timm avg with fc_norm, CLIP)
  bool fc_norm = false;        // a LayerNorm on the pooled vector (`avg` only)
  Pooling pool = Pooling::token;
  Activation act = Activation::gelu;
  // The grid pos_embed was trained on (the checkpoint's); differs from grid_h × grid_w when the
  // model was resampled to another input size (resize_input, METHODS.md). 0 = the same.
  int pos_grid_h = 0, pos_grid_w = 0;

  int grid_h() const { return image_h / patch; }
  int grid_w() const { return image_w / patch; }
  int num_patches() const { return grid_h() * grid_w(); }
  // [CLS][DIST] rows of pos_embed (0 with no_embed_class).
  int pos_prefix() const { return no_embed_class ? 0 : int(class_token) + int(dist_token); }
  int pos_rows() const { return pos_prefix() + num_patches(); }
  // Tokens before the patches: [CLS][DIST][REG × r].
  int prefix() const { return int(class_token) + int(dist_token) + registers; }
  int first_register() const { return int(class_token) + int(dist_token); }
  int tokens() const { return prefix() + num_patches(); }
  // Width of the head's input: 2d for token+avg, else d (the distilled heads read d each).
  int head_in() const { return pool == Pooling::token_avg ? 2 * dim : dim; }
  int head_dim() const { return dim / heads; }
  int patch_dim() const { return channels * patch * patch; }
};

// The names config.json uses for them ("token", "avg", "token+avg"; "gelu", "gelu_pytorch_tanh",
// "quick_gelu").
const char* pooling_name(Pooling p);
const char* activation_name(Activation a);

// Throws Error(bad_config / limit) naming the first field that is wrong, or the combination of
// variants that contradicts itself (token pooling without a class token, a distillation token
// without one, fc_norm with two pooled parts, …).
void validate_config(const Config& cfg);

// Fills mean/std/class names with defaults where they are empty (mean 0.5, std 0.5,
// names "class 0", ...). Used by builders and importers before validate_config.
void fill_config_defaults(Config& cfg);

// A config with the DeiT-tiny shape (224×224, patch 16, d 192, 12 blocks, 3 heads, MLP 768,
// 1000 classes) — the benchmark shape.
Config deit_tiny_config();

}  // namespace vitlens
