// limits.h — every size limit vitlens enforces on untrusted input, in one place.
//
// Each limit is checked before anything of that size is allocated. They are generous for real
// ViTs (ViT-L/16 at 384×384 fits) and small enough that a hostile header cannot make us allocate
// gigabytes or overflow a 32-bit size_t in wasm.
#pragma once

#include <cstdint>

namespace vitlens::limits {

constexpr int64_t max_image_side = 4096;            // model input H or W, in pixels
constexpr int64_t max_decoded_pixels = 50'000'000;  // an image file, width × height, before resizing
constexpr int64_t max_image_file_bytes = 256ll << 20;
constexpr int64_t max_channels = 16;
constexpr int64_t max_patch = 64;
constexpr int64_t max_tokens = 4097;                // prefix + patches
constexpr int64_t max_registers = 64;               // register tokens
constexpr int64_t max_dim = 4096;                   // width
constexpr int64_t max_depth = 64;
constexpr int64_t max_heads = 64;
constexpr int64_t max_mlp_dim = 16384;
constexpr int64_t max_classes = 100'000;
constexpr int64_t max_class_name_bytes = 256;
constexpr int64_t max_params = 400'000'000;         // total floats in a model
constexpr int64_t max_model_file_bytes = 1600ll << 20;  // f32 of max_params, plus headers
constexpr int64_t max_header_bytes = 16ll << 20;    // JSON headers (ours, safetensors, config.json)
constexpr int64_t max_tensors = 100'000;
constexpr int64_t max_tensor_rank = 8;
constexpr int64_t max_npy_elements = 64ll << 20;
constexpr int max_method_steps = 4096;              // IG / attattr steps, smoothgrad samples
constexpr int max_threads = 64;                     // MethodOptions::threads

}  // namespace vitlens::limits
