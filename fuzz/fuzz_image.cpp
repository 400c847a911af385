// fuzz_image.cpp — libFuzzer target: image decoding (stb_image behind our guards) and
// preprocessing to a small model input. Images above 64 Kpx (256 × 256) are refused here; the
// limit path is the same as the real 50 Mpx limit's. Large images do not reach new parser code,
// only more of the same rows, and under ASan they dominate the time: a 208-byte progressive JPEG
// that declares 255 × 49168 pixels decodes, correctly, in 0.5 s natively but 26 s under ASan. With
// a 1 Mpx limit the 260 largest of 4503 corpus files (each 50–800 ms) took 82 % of a replay of the
// corpus; at 64 Kpx the target runs several times as many units per second (fuzz/runs.md).
#include <cstdint>

#include "vitlens/model/config.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vitlens::Pixels px = vitlens::decode_image(data, size, int64_t(1) << 16);
    vitlens::Config cfg;
    cfg.image_h = cfg.image_w = 32;
    cfg.patch = 8;
    vitlens::fill_config_defaults(cfg);
    vitlens::preprocess(px, cfg);
  } catch (const vitlens::Error&) {
  }
  return 0;
}
