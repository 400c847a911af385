// cmd_info.cpp — `vitlens info MODEL`: the config, classes and provenance of a model file.
#include <cstdio>

#include "common.h"
#include "vitlens/io/model_file.h"

namespace vitlens::cli {

int cmd_info(int argc, char** argv) {
  Args args(argc, argv, {}, {"help", "json"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf("usage: vitlens info MODEL [--json]\n\nPrints the model's config, classes and provenance.\n");
    return args.has("help") ? 0 : 2;
  }
  const Model m = load_model_arg(args.positional()[0]);
  const Config& c = m.config;
  std::printf("input       %d×%d, %d channel(s), patch %d → %d×%d patches, %d tokens\n", c.image_h, c.image_w,
              c.channels, c.patch, c.grid_h(), c.grid_w(), c.tokens());
  std::printf("transformer width %d, depth %d, heads %d (head dim %d), MLP %d, LayerNorm eps %g\n", c.dim, c.depth,
              c.heads, c.head_dim(), c.mlp_dim, double(c.ln_eps));
  std::printf("variants    %s\n", variant_summary(c).c_str());
  std::printf("output      %d classes, %s\n", c.classes, c.output == OutputKind::sigmoid ? "sigmoid (multi-label)" : "softmax");
  std::printf("normalise   mean");
  for (float v : c.mean) std::printf(" %g", double(v));
  std::printf(", std");
  for (float v : c.std) std::printf(" %g", double(v));
  std::printf("\nparameters  %lld, stored %s\n", (long long)param_count(c), m.stored_int8 ? "int8 (per-channel)" : "f32");
  std::printf("provenance  %s\nclasses    ", m.provenance.c_str());
  for (int i = 0; i < c.classes && i < 50; ++i) std::printf(" %d:%s", i, c.class_names[size_t(i)].c_str());
  if (c.classes > 50) std::printf(" … (%d more)", c.classes - 50);
  std::printf("\n");
  return 0;
}

}  // namespace vitlens::cli
