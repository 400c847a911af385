// norm_stages.h — `--save-stages` of `vitlens explain --method norm-based` (cmd_explain.cpp): the
// per-block maps of every stage, the mixing ratios and the per-head atb maps as one .npz.
#pragma once

#include <string>

#include "vitlens/methods/methods.h"
#include "vitlens/model/model.h"

namespace vitlens::cli {

// Writes `path` from the norm-based explanation `ex` of the input traced in `tr` (its per-head maps
// from that forward pass, with the heads it switched off). Throws Error(bad_argument) when `ex` has
// no norm-based maps.
void save_norm_stages(const std::string& path, const Model& m, const Trace& tr, const Explanation& ex);

}  // namespace vitlens::cli
