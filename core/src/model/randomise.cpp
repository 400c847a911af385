// randomise.cpp — the cascading re-initialisation of randomise.h (Adebayo et al. 2018).
#include "vitlens/model/randomise.h"

#include <algorithm>
#include <cmath>

#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The step from which a parameter is random: 1 for the head, 1 + (L − N) for block N, L + 2 for
// the embedding.
int first_random_step(const Config& c, const std::string& name) {
  if (starts_with(name, "head.") || starts_with(name, "head_dist.") || starts_with(name, "norm.") ||
      starts_with(name, "fc_norm."))
    return 1;
  if (starts_with(name, "blocks.")) {
    const int block = std::stoi(name.substr(7));
    return 1 + (c.depth - block);
  }
  return c.depth + 2;
}

void check_step(const Config& c, int step) {
  if (step < 0 || step > randomisation_steps(c))
    throw Error(ErrorCode::bad_argument, "randomisation step " + std::to_string(step) + " is outside 0 … " +
                                             std::to_string(randomisation_steps(c)) +
                                             " (0: trained, 1: head, 1 + k: the last k blocks, " +
                                             std::to_string(randomisation_steps(c)) + ": also the embedding)");
}

// A standard normal truncated at ±2 (redrawn beyond), element i of tensor k: Box–Muller on
// splitmix64 uniforms of (seed, k, i, attempt).
double truncated_normal(uint64_t seed, uint64_t k, uint64_t i) {
  const uint64_t tensor_key = splitmix64(splitmix64(seed ^ 0x52414E444F4D4953ull) + k);
  for (uint64_t attempt = 0; attempt < 16; ++attempt) {
    const uint64_t key = tensor_key + 2 * ((i << 4) + attempt);
    const double u1 = double((splitmix64(key) >> 11) + 1) * 0x1.0p-53;
    const double u2 = double(splitmix64(key + 1) >> 11) * 0x1.0p-53;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    if (std::fabs(z) <= 2.0) return z;
  }
  return 0.0;  // 16 draws beyond ±2: probability 0.0455^16 ≈ 3·10⁻²²
}

}  // namespace

int randomisation_steps(const Config& c) { return c.depth + 2; }

std::string randomisation_step_name(const Config& c, int step) {
  check_step(c, step);
  if (step == 0) return "trained";
  if (step == 1) return "head";
  if (step <= c.depth + 1) return "block " + std::to_string(c.depth - (step - 1));
  return "embedding";
}

bool randomised_at(const Config& c, const std::string& name, int step) {
  check_step(c, step);
  return step >= first_random_step(c, name);
}

namespace {

// Re-initialises the parameters first random at a step in [from, to].
void reinit(Model& m, int from, int to, uint64_t seed) {
  m.stored_int8 = false;
  const std::vector<ParamRef> refs = param_list(m.params, m.config);
  for (size_t k = 0; k < refs.size(); ++k) {
    const ParamRef& r = refs[k];
    const int first = first_random_step(m.config, r.name);
    if (first < from || first > to) continue;
    const bool layer_norm_weight = ends_with(r.name, "norm1.weight") || ends_with(r.name, "norm2.weight") ||
                                   r.name == "norm.weight" || r.name == "fc_norm.weight" || r.name == "norm_pre.weight";
    if (ends_with(r.name, ".bias")) {
      std::fill(r.data, r.data + r.size, 0.0f);  // biases (LayerNorm's too): 0
    } else if (layer_norm_weight || ends_with(r.name, ".gamma")) {
      std::fill(r.data, r.data + r.size, 1.0f);  // LayerNorm weight, LayerScale γ: 1
    } else {
      for (size_t i = 0; i < r.size; ++i) r.data[i] = float(0.02 * truncated_normal(seed, k, i));  // timm: σ = 0.02
    }
  }
}

}  // namespace

Model randomise_cascade(const Model& m, int step, uint64_t seed) {
  check_step(m.config, step);
  Model out = m;
  reinit(out, 1, step, seed);
  return out;
}

void randomise_step(Model& m, int step, uint64_t seed) {
  check_step(m.config, step);
  reinit(m, step, step, seed);
}

}  // namespace vitlens
