// model_file.h — the vitlens model file (.vitl): reading with full validation, and writing.
//
// Layout (all integers little-endian; docs/model-format.md is the specification):
//   0   8 bytes   magic "VITLENS\x1A"
//   8   u32       format version (2; version 1 files, without the variant fields, still load)
//   12  u32       reserved, 0
//   16  u64       header length J
//   24  J bytes   header: UTF-8 JSON {config, class_names, provenance, storage, tensors[]}
//   …   padding to a multiple of 16, then the data section
// Each tensors[] entry: {name, dtype "f32"|"i8", shape, offset, bytes} (offset relative to the
// data section start, a multiple of 4). In int8 files every quantisable weight W (out, …) is
// stored as "NAME" (i8) plus "NAME.scale" (f32, (out)): W = scale[o] · q, with
// scale[o] = max|W[o,:]| / 127 (symmetric, per output channel); everything else is f32.
// The data section ends with a u32 CRC-32 (IEEE) of the data before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/model/model.h"

namespace vitlens {

enum class Storage { f32, int8 };

// Parses and validates a model file held in memory (format version 1 or 2). Throws Error with a
// code naming the problem: bad_format (magic, JSON, an unknown header field), bad_version,
// truncated, bad_config (a missing or unknown config field, an unknown pool or act value, a
// contradictory combination of variants), limit, bad_shape, missing_tensor, unknown_tensor (a
// tensor the config's variants do not have: the message names the config field),
// bad_value (NaN/Inf, checksum).
Model load_model(const uint8_t* bytes, size_t size);
Model load_model_file(const std::string& path);

// Writes the current version (2), with every variant field of the config.
std::vector<uint8_t> save_model(const Model& m, Storage storage);
void save_model_file(const std::string& path, const Model& m, Storage storage);

// Quantise-dequantise one (out, in) weight per output channel, as saving to int8 does.
// Returns the scales (out).
std::vector<float> quantise_rows(const float* w, int64_t rows, int64_t cols, int8_t* q);
// The model as it would be after an int8 round trip (for tests and fidelity reports).
Model quantised_copy(const Model& m);
// The same in place, without a second copy of the weights (an imported ViT-B kept as int8).
void quantise_in_place(Model& m);

}  // namespace vitlens
