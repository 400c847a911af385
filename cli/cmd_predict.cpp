// cmd_predict.cpp — `vitlens predict MODEL (IMAGE | --input x.npy)`: the top-k classes.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/model/vit.h"

namespace vitlens::cli {

int cmd_predict(int argc, char** argv) {
  Args args(argc, argv, {"top", "input"}, {"help", "json"});
  if (args.has("help") || args.positional().empty() || args.positional().size() > 2) {
    std::printf(
        "usage: vitlens predict MODEL (IMAGE | --input x.npy) [--top K] [--json]\n\n"
        "IMAGE (PNG, JPEG, BMP) is resized to the model's input with an antialiased bilinear filter\n"
        "and normalised; --input takes a float32 C×H×W tensor that is used exactly.\n");
    return args.has("help") ? 0 : 2;
  }
  const Model m = load_model_arg(args.positional()[0]);
  const Image x = load_input(args, m.config, args.positional().size() > 1 ? args.positional()[1] : "");
  const int k = args.get_int("top", 5);
  if (k < 1) throw Error(ErrorCode::bad_argument, "--top must be at least 1");
  Trace tr;
  vit_logits(tr, m, x);
  const std::vector<Prediction> top = top_k(m.config, tr.logits, k);
  if (args.has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const Prediction& p : top)
      out.push_back({{"class", p.cls}, {"name", m.config.class_names[size_t(p.cls)]}, {"logit", p.logit}, {"prob", p.prob}});
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const Prediction& p : top)
      std::printf("%6.2f%%  %3d  %-24s  logit %.4f\n", 100.0 * p.prob, p.cls, m.config.class_names[size_t(p.cls)].c_str(),
                  double(p.logit));
  }
  return 0;
}

}  // namespace vitlens::cli
