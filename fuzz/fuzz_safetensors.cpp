// fuzz_safetensors.cpp — libFuzzer target: safetensors parsing and checkpoint import.
// The input is split at the first 0 byte: before it the config.json text, after it the checkpoint.
// The file is parsed once; the importer reads it, and when the importer stops early every tensor
// is converted to floats as well, so that each dtype's conversion is reached whatever the config.
#include <cstdint>
#include <cstring>
#include <string>

#include "vitlens/tensor/error.h"
#include "vitlens/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* zero = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t cut = zero ? size_t(zero - data) : size;
  const std::string config(reinterpret_cast<const char*>(data), cut);
  const uint8_t* ckpt = zero ? zero + 1 : data + size;
  const size_t ckpt_size = zero ? size - cut - 1 : 0;
  try {
    const vitlens::SafeTensors st = vitlens::parse_safetensors(ckpt, ckpt_size);
    try {
      vitlens::import_checkpoint(st, config);
      return 0;  // every tensor was placed (and read) or accepted as unused
    } catch (const vitlens::Error&) {
    }
    for (const auto& [name, t] : st.tensors) {
      try {
        st.floats(name);
      } catch (const vitlens::Error&) {
      }
    }
  } catch (const vitlens::Error&) {
  }
  return 0;
}
