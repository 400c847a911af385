// fuzz_model.cpp — libFuzzer target: the .vitl model-file reader on arbitrary bytes.
// Any input must either load (then a forward pass must run) or raise vitlens::Error.
#include <cstdint>

#include "vitlens/tensor/error.h"
#include "vitlens/io/model_file.h"
#include "vitlens/model/vit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vitlens::Model m = vitlens::load_model(data, size);
    if (vitlens::param_count(m.config) < 2'000'000) {
      vitlens::Trace tr;
      vitlens::vit_forward(tr, m, vitlens::random_input(m.config, 1));
    }
  } catch (const vitlens::Error&) {
  }
  return 0;
}
