// fuzz_image.cpp — libFuzzer target: image decoding (stb_image behind our guards) and
// preprocessing to a small model input.
#include <cstdint>

#include "vitlens/model/config.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vitlens::Pixels px = vitlens::decode_image(data, size);
    vitlens::Config cfg;
    cfg.image_h = cfg.image_w = 32;
    cfg.patch = 8;
    vitlens::fill_config_defaults(cfg);
    vitlens::preprocess(px, cfg);
  } catch (const vitlens::Error&) {
  }
  return 0;
}
