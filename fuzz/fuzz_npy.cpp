// fuzz_npy.cpp — libFuzzer target: the .npy reader on arbitrary bytes.
#include <cstdint>

#include "vitlens/tensor/error.h"
#include "vitlens/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    vitlens::parse_npy(data, size);
  } catch (const vitlens::Error&) {
  }
  return 0;
}
