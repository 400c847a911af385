// randomise.h — copies of a model with its layers re-initialised from the top down, cumulatively:
// the cascading model randomisation of Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim,
// NeurIPS 2018, "Sanity Checks for Saliency Maps" (§3.1). Their code randomises InceptionV3 from
// the logits down to the first convolution, one block more per step, keeping the earlier
// re-initialisations. For a ViT the steps are:
//
//   step 0          the trained model (a copy)
//   step 1          the head: head (and head_dist), fc_norm and the final norm — everything after
//                   the last block
//   step 1 + k      also blocks L−1 … L−k (k = 1 … L): the last k blocks
//   step L + 2      also the embedding: patch_embed, cls/dist/register tokens, pos_embed, norm_pre
//
// randomisation_steps(c) = L + 2 is the last step; every parameter is random there.
//
// Initialisation (timm's ViT init): linear and patch-embedding weights, tokens and pos_embed from
// a normal with σ = 0.02 truncated at ±2σ (redrawn beyond; timm's trunc_normal_(std=.02) cuts at
// ±2 absolute, i.e. not at all, so ours is slightly narrower: σ·0.880); biases 0; LayerNorm
// weights 1 and biases 0; LayerScale γ = 1 (timm uses the checkpoint's init_values, e.g. 1e-5,
// which no config records and which would leave a randomised block nearly the identity).
// The draws come from a counter-based generator of (seed, tensor index in param_list, element),
// so a tensor gets the same values at every step that randomises it: step k + 1 is step k with
// one more layer randomised, as in the paper's cascade.
//
// Models loaded from int8 files hold their weights dequantised (model.h); the copy is an f32
// model (stored_int8 = false) whose untouched tensors keep those dequantised values.
#pragma once

#include <cstdint>
#include <string>

#include "vitlens/model/model.h"

namespace vitlens {

// The last cascade step of a config: depth + 2.
int randomisation_steps(const Config& c);

// A short name of what step `step` randomises last: "trained", "head", "block 11", …, "block 0",
// "embedding". Throws Error(bad_argument) for a step outside 0 … randomisation_steps(c).
std::string randomisation_step_name(const Config& c, int step);

// Whether the parameter `name` (a param_list name) is random at `step`.
bool randomised_at(const Config& c, const std::string& name, int step);

// A copy of `m` with the parameters of steps 1 … `step` re-initialised as above. Throws
// Error(bad_argument) for a step outside 0 … randomisation_steps(m.config).
Model randomise_cascade(const Model& m, int step, uint64_t seed);

// In place: re-initialises only the parameters that become random at `step` (none at step 0), and
// clears stored_int8. Applying steps 1 … s in turn to a trained model gives randomise_cascade(m, s,
// seed) exactly, with one copy of the weights for the whole cascade (a ViT-B is 330 MB).
void randomise_step(Model& m, int step, uint64_t seed);

}  // namespace vitlens
