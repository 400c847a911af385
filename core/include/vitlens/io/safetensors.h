// safetensors.h — a reader for the safetensors format, and importing timm / Hugging Face ViTs.
//
// safetensors: u64 little-endian header length N, N bytes of JSON
//   {name: {"dtype": "F32"|"F16"|"BF16"|"F64", "shape": [...], "data_offsets": [begin, end]},
//    "__metadata__": {...}}, then the data (offsets relative to its start).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vitlens/model/model.h"

namespace vitlens {

// Reads n bytes at byte `offset` of a file into out[0 … n); the caller has checked that they lie
// inside the file. Throws Error when it cannot read.
using ByteReader = std::function<void(uint64_t offset, size_t n, uint8_t* out)>;

struct SafeTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // within the data section
};

// A parsed header. The tensors' bytes are read through `read` only when asked for, so that a file
// held elsewhere (the wasm page's JS ArrayBuffer) is never copied whole into the engine's memory.
struct SafeTensors {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
  ByteReader read;           // the file's bytes
  uint64_t data_offset = 0;  // where the data section starts in the file: 8 + the header's length
  uint64_t data_size = 0;

  // The element count of a tensor that can be read as floats; Error if it is absent or its dtype
  // is not F32, F16, BF16 or F64.
  size_t float_count(const std::string& name) const;
  // The tensor converted to float32; Error as float_count, or if it holds NaN / Inf.
  std::vector<float> floats(const std::string& name) const;
  // The same, converted straight into out[0 … n), where n is the tensor's element count (the
  // importer fills the model's parameters without a temporary copy).
  void read_floats(const std::string& name, float* out, size_t n) const;
};

// Every tensor's bytes lie inside the data section and no two tensors share bytes (as the
// safetensors format requires), so the tensors of a file never describe more data than it holds.
// `bytes` must outlive the result.
SafeTensors parse_safetensors(const uint8_t* bytes, size_t size);
// A file of `size` bytes read through `read`: only the header is read here.
SafeTensors parse_safetensors(const ByteReader& read, uint64_t size);

enum class Naming { timm, huggingface };

// Builds a Model from a safetensors checkpoint and its config.json (core/src/io/import.cpp;
// docs/import.md lists the names and keys). The names decide the family: timm VisionTransformer
// (plain, DeiT-III / LayerScale, registers, no class token, avg pooling with fc_norm, norm_pre,
// distilled DeiT) or Hugging Face ViTForImageClassification, DeiTForImageClassificationWithTeacher,
// Dinov2ForImageClassification, Dinov2WithRegistersForImageClassification,
// CLIPForImageClassification. The variants come from config.json (Hugging Face keys, plus timm's
// global_pool, class_token, no_embed_class, reg_tokens / num_register_tokens, fc_norm,
// final_norm, pre_norm, layerscale_value) or, where unambiguous, from the tensors; the two must
// agree. Missing q/k/v biases (in every block) and a missing patch-embedding bias load as zeros.
// The model is at its checkpoint's size (pos_grid 0). Throws Error naming the tensor or key: a
// missing, extra or mis-shaped tensor, a key or tensor of a feature vitlens does not implement
// (Swin, relative position bias, RoPE, hybrids, SwiGLU, attention pooling, a pos_embed with
// register rows, DeiTForImageClassification without teacher, …), an unknown config key that
// may change the computation, or contradicting keys.
Model import_checkpoint(const uint8_t* bytes, size_t size, const std::string& config_json,
                        Naming* detected = nullptr);
// The same from a parsed file (parse_safetensors), for a caller that reads its tensors too.
// `progress` (may be empty) is called after each tensor is converted with the share of the data
// section's bytes read so far (0 … 1]; returning false stops the import with Error(cancelled).
using ImportProgressFn = std::function<bool(double fraction)>;
Model import_checkpoint(const SafeTensors& st, const std::string& config_json, Naming* detected = nullptr,
                        const ImportProgressFn& progress = {});

}  // namespace vitlens
