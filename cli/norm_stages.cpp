// norm_stages.cpp — `--save-stages FILE.npz` (see norm_stages.h; the arrays: eval/norm_ff.h).
#include "norm_stages.h"

#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

void save_norm_stages(const std::string& path, const Model& m, const Trace& tr, const Explanation& ex) {
  if (ex.norm.empty())
    throw Error(ErrorCode::bad_argument, "--save-stages needs --method norm-based (it saves that method's stage maps)");
  std::vector<std::vector<Mat>> heads;
  for (int b = 0; b < m.config.depth; ++b) heads.push_back(norm_head_maps(m, tr, b));
  const std::vector<uint8_t> bytes = encode_norm_stages_npz(ex.norm, heads);
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace vitlens::cli
