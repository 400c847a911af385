// cmd_convert.cpp — `vitlens convert MODEL -o OUT [--quant f32|int8]`: rewrite a model file
// (or materialise the random 'deit-tiny' benchmark model) in either storage mode.
#include <cstdio>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/model_file.h"

namespace vitlens::cli {

int cmd_convert(int argc, char** argv) {
  Args args(argc, argv, {"o", "out", "quant"}, {"help"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens convert MODEL -o OUT.vitl [--quant f32|int8]\n\n"
        "MODEL is a .vitl file or 'deit-tiny[:SEED]' (the random-weight benchmark model).\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string out = args.has("o") ? args.get("o") : args.get("out");
  if (out.empty()) throw Error(ErrorCode::bad_argument, "-o OUT is required");
  const std::string quant = args.get("quant", "f32");
  if (quant != "f32" && quant != "int8") throw Error(ErrorCode::bad_argument, "--quant must be f32 or int8");
  const Model m = load_model_arg(args.positional()[0]);
  save_model_file(out, m, quant == "int8" ? Storage::int8 : Storage::f32);
  std::printf("wrote %s (%s)\n", out.c_str(), quant.c_str());
  return 0;
}

}  // namespace vitlens::cli
