// norm_stages.h — `--save-stages` and `--ff-summary` of `vitlens explain --method norm-based`
// (cmd_explain.cpp): the per-block maps of every stage, the mixing ratios and the per-head atb maps
// as one .npz; the FF's effect on the image per block (eval/norm_ff.h, norm_image_summary).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"

namespace vitlens::cli {

// Writes `path` from the norm-based explanation `ex` of input x (its per-head maps from a forward
// pass of x). Throws Error(bad_argument) when `ex` has no norm-based maps.
void save_norm_stages(const std::string& path, const Model& m, const Image& x, const Explanation& ex);

// --ff-summary: per block, the FF's transition atb-res-ln → atb-res-ln-ff of this image
// (norm_image_summary): {"transition", "blocks": [{"rho_flat", "rho_rows", "rho_query": (n),
// "mixing_mean": {stage: r̄}}]}; or printed as a table (ρ of row `query`). Throws Error(bad_argument)
// when `ex` has no norm-based maps.
nlohmann::json ff_summary_json(const Explanation& ex);
void print_ff_summary(const Explanation& ex, int query);

}  // namespace vitlens::cli
