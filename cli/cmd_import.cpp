// cmd_import.cpp — `vitlens import CKPT.safetensors --config config.json -o MODEL --quant f32|int8`.
#include <cstdio>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/safetensors.h"

namespace vitlens::cli {

int cmd_import(int argc, char** argv) {
  Args args(argc, argv, {"config", "o", "out", "quant", "provenance"}, {"help"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens import CKPT.safetensors --config config.json -o MODEL.vitl [--quant f32|int8]\n"
        "                      [--provenance TEXT]\n\n"
        "Reads a ViT checkpoint with its config.json and writes a vitlens model: timm VisionTransformer names\n"
        "(patch_embed.proj.*, blocks.N.*, head.*; DeiT-III LayerScale, registers, no class token, avg pooling\n"
        "with fc_norm, norm_pre, distilled DeiT) or Hugging Face ViTForImageClassification,\n"
        "DeiTForImageClassificationWithTeacher, Dinov2ForImageClassification,\n"
        "Dinov2WithRegistersForImageClassification or CLIPForImageClassification names. Features vitlens does\n"
        "not implement (Swin, relative position bias, RoPE, hybrids, SwiGLU, attention pooling, ...) and\n"
        "config keys it does not know are refused with the reason (docs/import.md). int8 stores linear and\n"
        "patch weights with one scale per output channel.\n");
    return args.has("help") ? 0 : 2;
  }
  const std::string out = args.has("o") ? args.get("o") : args.get("out");
  if (out.empty()) throw Error(ErrorCode::bad_argument, "-o MODEL is required");
  if (!args.has("config")) throw Error(ErrorCode::bad_argument, "--config config.json is required");
  const std::string quant = args.get("quant", "f32");
  if (quant != "f32" && quant != "int8") throw Error(ErrorCode::bad_argument, "--quant must be f32 or int8");
  const std::vector<uint8_t> ckpt = read_file(args.positional()[0], limits::max_model_file_bytes);
  const std::vector<uint8_t> cfg = read_file(args.get("config"), limits::max_header_bytes);
  Naming naming;
  Model m = import_checkpoint(ckpt.data(), ckpt.size(), std::string(cfg.begin(), cfg.end()), &naming);
  if (args.has("provenance")) m.provenance = args.get("provenance");
  save_model_file(out, m, quant == "int8" ? Storage::int8 : Storage::f32);
  const Config& c = m.config;
  std::printf("imported %s names: %d blocks, width %d, %d classes; %s → %s (%s)\n",
              naming == Naming::timm ? "timm" : "Hugging Face", c.depth, c.dim, c.classes, variant_summary(c).c_str(),
              out.c_str(), quant.c_str());
  return 0;
}

}  // namespace vitlens::cli
