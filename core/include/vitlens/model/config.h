// config.h — the hyper-parameters of a ViT in the timm / DeiT layout.
//
// Pre-LN blocks, a CLS token, a learned position embedding, exact (erf) GELU, the head on the
// final-LN CLS token. H and W need not be equal; both must be multiples of the patch size.
#pragma once

#include <string>
#include <vector>

namespace vitlens {

enum class OutputKind { softmax, sigmoid };  // single-label or multi-label classifier

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

  int grid_h() const { return image_h / patch; }
  int grid_w() const { return image_w / patch; }
  int num_patches() const { return grid_h() * grid_w(); }
  int tokens() const { return 1 + num_patches(); }
  int head_dim() const { return dim / heads; }
  int patch_dim() const { return channels * patch * patch; }
};

// Throws Error(bad_config / limit) naming the first field that is wrong.
void validate_config(const Config& cfg);

// Fills mean/std/class names with defaults where they are empty (mean 0.5, std 0.5,
// names "class 0", ...). Used by builders and importers before validate_config.
void fill_config_defaults(Config& cfg);

// A config with the DeiT-tiny shape (224×224, patch 16, d 192, 12 blocks, 3 heads, MLP 768,
// 1000 classes) — the benchmark shape.
Config deit_tiny_config();

}  // namespace vitlens
