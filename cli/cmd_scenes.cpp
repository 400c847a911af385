// cmd_scenes.cpp — `vitlens scenes`: writes Fashion-MNIST scenes, their masks and labels.json.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/data/scenes.h"

namespace vitlens::cli {

int cmd_scenes(int argc, char** argv) {
  Args args(argc, argv, {"split", "n", "seed", "out", "size", "data", "first"}, {"help"});
  const bool usage_error = !args.positional().empty() || !args.has("split") || !args.has("out") || !args.has("n");
  if (args.has("help") || usage_error) {
    std::printf(
        "usage: vitlens scenes --split train|test --n N --seed S --out DIR [--size 64] [--first 0]\n"
        "                      [--data %s]\n\n"
        "Composes one or two Fashion-MNIST items (of different classes) over a varied backdrop and\n"
        "writes DIR/scene_XXXX.png, DIR/scene_XXXX_mask_K.png (item K's visible pixels, 0/255) and\n"
        "DIR/labels.json (classes, class names, boxes, source images). Scene i depends only on the\n"
        "split, the size, S and i: --first F writes scenes F … F+N-1 of the same stream.\n"
        "Item sides are 28…44 px at --size 64 and scale with the size.\n"
        "The train split draws its items from train-*, the test split from t10k-* only.\n",
        fashion_mnist_default_dir);
    return args.has("help") ? 0 : 2;
  }
  const std::string split = args.get("split");
  if (split != "train" && split != "test")
    throw Error(ErrorCode::bad_argument, "--split must be train or test, got '" + split + "'");
  const int n = args.get_int("n", 0);
  if (n < 0) throw Error(ErrorCode::bad_argument, "--n must be ≥ 0");
  SceneOptions opt;
  opt.size = args.get_int("size", opt.size);
  if (opt.size < 16 || opt.size > limits::max_image_side)
    throw Error(ErrorCode::bad_argument, "--size must be in 16…" + std::to_string(limits::max_image_side));
  opt.max_item = std::min(opt.max_item * opt.size / 64, opt.size);
  opt.min_item = std::min(opt.min_item * opt.size / 64, opt.max_item);
  opt.min_item = std::max(opt.min_item, 8);
  validate_scene_options(opt);

  const uint64_t seed = args.get_u64("seed", 0);
  const uint64_t first = args.get_u64("first", 0);
  const std::string out = args.get("out");
  const FashionMnist data = load_fashion_mnist(args.get("data", fashion_mnist_default_dir), split == "train");
  export_scenes(out, data, opt, seed, first, uint64_t(n));
  std::printf("wrote %d %s scenes (%d×%d, items %d…%d px, seed %llu) to %s\n", n, split.c_str(), opt.size,
              opt.size, opt.min_item, opt.max_item, static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}

}  // namespace vitlens::cli
