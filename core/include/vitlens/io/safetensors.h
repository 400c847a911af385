// safetensors.h — a reader for the safetensors format, and importing timm / Hugging Face ViTs.
//
// safetensors: u64 little-endian header length N, N bytes of JSON
//   {name: {"dtype": "F32"|"F16"|"BF16"|"F64", "shape": [...], "data_offsets": [begin, end]},
//    "__metadata__": {...}}, then the data (offsets relative to its start).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vitlens/model/model.h"

namespace vitlens {

struct SafeTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // within SafeTensors::data
};

// A parsed file; `data` points into the caller's buffer, which must outlive it.
struct SafeTensors {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  const uint8_t* data = nullptr;
  size_t data_size = 0;

  // The tensor converted to float32 (F32, F16, BF16, F64 accepted); Error if absent.
  std::vector<float> floats(const std::string& name) const;
};

SafeTensors parse_safetensors(const uint8_t* bytes, size_t size);

// A Hugging-Face-style config.json (image_size, patch_size, num_channels, hidden_size,
// num_hidden_layers, num_attention_heads, intermediate_size, layer_norm_eps, hidden_act,
// id2label, optional image_mean/image_std, problem_type). `timm_names` picks the default
// layer_norm_eps when the file has none (timm 1e-6, Hugging Face 1e-12).
Config config_from_hf_json(const std::string& text, bool timm_names);

enum class Naming { timm, huggingface };

// Builds a Model from a checkpoint with timm or Hugging Face ViTForImageClassification names
// (detected from the keys). Missing, extra or mis-shaped tensors are named in the Error.
Model import_checkpoint(const uint8_t* bytes, size_t size, const std::string& config_json,
                        Naming* detected = nullptr);

}  // namespace vitlens
