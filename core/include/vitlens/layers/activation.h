// activation.h — the MLP activations of the ViT families (Hugging Face `hidden_act`).
#pragma once

namespace vitlens {

enum class Activation {
  gelu,        // exact: x·Φ(x)                                       ("gelu")
  gelu_tanh,   // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))          ("gelu_pytorch_tanh", "gelu_new")
  quick_gelu,  // x·σ(1.702·x)                                          ("quick_gelu", CLIP)
};

}  // namespace vitlens
