// norm_stages.cpp — `--save-stages FILE.npz` and `--ff-summary` (see norm_stages.h; the arrays
// and the summary: eval/norm_ff.h).
#include "norm_stages.h"

#include <cstdio>

#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

void save_norm_stages(const std::string& path, const Model& m, const Image& x, const Explanation& ex) {
  if (ex.norm.empty())
    throw Error(ErrorCode::bad_argument, "--save-stages needs --method norm-based (it saves that method's stage maps)");
  Trace tr;
  vit_forward(tr, m, x);
  std::vector<std::vector<Mat>> heads;
  for (int b = 0; b < m.config.depth; ++b) heads.push_back(norm_head_maps(m, tr, b));
  const std::vector<uint8_t> bytes = encode_norm_stages_npz(ex.norm, heads);
  write_file(path, bytes.data(), bytes.size());
}

namespace {

std::vector<NormImageBlock> ff_summary(const Explanation& ex) {
  if (ex.norm.empty())
    throw Error(ErrorCode::bad_argument, "--ff-summary needs --method norm-based (it summarises that method's stage maps)");
  return norm_image_summary(ex.norm);
}

}  // namespace

nlohmann::json ff_summary_json(const Explanation& ex) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const NormImageBlock& o : ff_summary(ex)) {
    nlohmann::json mix = nlohmann::json::object();
    for (int s = 0; s < norm_stage_count; ++s) mix[norm_stage_name(NormStage(s))] = o.mixing_mean[s];
    blocks.push_back({{"rho_flat", o.rho_flat}, {"rho_rows", o.rho_rows}, {"rho_query", o.rho_query}, {"mixing_mean", mix}});
  }
  return {{"transition", "atb-res-ln → atb-res-ln-ff"}, {"blocks", blocks}};
}

void print_ff_summary(const Explanation& ex, int query) {
  const std::vector<NormImageBlock> sum = ff_summary(ex);
  if (query < 0 || size_t(query) >= sum[0].rho_query.size())
    throw Error(ErrorCode::bad_argument, "--ff-query must be a token index in [0, " + std::to_string(sum[0].rho_query.size()) + ")");
  std::printf("the FF's effect on this image (atb-res-ln → atb-res-ln-ff): Spearman ρ of the maps; mixing ratio mean over tokens\n");
  std::printf("| block | ρ whole map | ρ per row (mean) | ρ row %d |", query);
  for (int s = 0; s < norm_stage_count; ++s) std::printf(" r̄ %s |", norm_stage_name(NormStage(s)));
  std::printf("\n|---:|---:|---:|---:|");
  for (int s = 0; s < norm_stage_count; ++s) std::printf("---:|");
  std::printf("\n");
  for (size_t b = 0; b < sum.size(); ++b) {
    const NormImageBlock& o = sum[b];
    std::printf("| %zu | %.4f | %.4f | %.4f |", b, o.rho_flat, o.rho_rows, o.rho_query[size_t(query)]);
    for (int s = 0; s < norm_stage_count; ++s) std::printf(" %.4f |", o.mixing_mean[s]);
    std::printf("\n");
  }
}

}  // namespace vitlens::cli
