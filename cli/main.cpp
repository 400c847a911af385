// main.cpp — the vitlens command line: one binary, one subcommand per file (cmd_*.cpp).
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {
int cmd_eval(int argc, char** argv);  // cmd_eval.cpp
int cmd_heads(int argc, char** argv);  // cmd_heads.cpp
int cmd_tree(int argc, char** argv);   // cmd_tree.cpp
int cmd_attack(int argc, char** argv); // cmd_attack.cpp
int cmd_analyze_ff(int argc, char** argv);  // cmd_analyze_ff.cpp
int cmd_faithfulness(int argc, char** argv);  // cmd_faithfulness.cpp
}

namespace {

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
  const char* summary;
};

const Command kCommands[] = {
    {"info", vitlens::cli::cmd_info, "show a model file's config, classes and provenance"},
    {"predict", vitlens::cli::cmd_predict, "classify an image or a .npy tensor"},
    {"import", vitlens::cli::cmd_import, "convert a timm / Hugging Face .safetensors checkpoint"},
    {"bench", vitlens::cli::cmd_bench, "time the forward pass (median latency)"},
    {"explain", vitlens::cli::cmd_explain, "an attribution map: raw .npy and/or an overlay (--list: the methods)"},
    {"convert", vitlens::cli::cmd_convert, "rewrite a model as f32 or int8 (or write the deit-tiny benchmark model)"},
    {"scenes", vitlens::cli::cmd_scenes, "generate Fashion-MNIST scenes with masks"},
    {"train", vitlens::cli::cmd_train, "train a multi-label ViT on Fashion-MNIST scenes"},
    {"evaluate-model", vitlens::cli::cmd_evaluate_model, "AP and accuracy of a scene model on test scenes"},
    {"eval", vitlens::cli::cmd_eval, "faithfulness benchmark of the attribution methods (scenes or labelled images; merge shards)"},
    {"heads", vitlens::cli::cmd_heads, "head importance (attattr) and head pruning curves over a set of images"},
    {"tree", vitlens::cli::cmd_tree, "the attattr attribution tree of an image, as JSON"},
    {"attack", vitlens::cli::cmd_attack, "attribution-tree trigger attack: paste an image's strongest-link patches into others"},
    {"faithfulness", vitlens::cli::cmd_faithfulness, "every faithfulness figure of some methods' maps on one image (as eval records them)"},
    {"analyze-ff", vitlens::cli::cmd_analyze_ff, "what the FF does to the norm-based maps (Kobayashi et al. 2024)"},
};

void print_usage() {
  std::printf("vitlens — explain Vision Transformer predictions\n\nusage: vitlens COMMAND [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf("\n'vitlens COMMAND --help' describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const vitlens::Error& e) {
        std::fprintf(stderr, "vitlens %s: error (%s): %s\n", c.name, vitlens::error_code_name(e.code()),
                     e.what());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "vitlens %s: internal error: %s\n", c.name, e.what());
        return 3;
      }
    }
  }
  std::fprintf(stderr, "vitlens: unknown command '%s' (see 'vitlens --help')\n", argv[1]);
  return 2;
}
