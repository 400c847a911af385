// cmd_evaluate_model.cpp — `vitlens evaluate-model MODEL`: AP, exact-set and top-1 accuracy of a
// 10-class scene model on held-out test scenes (t10k split).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/eval/scene_eval.h"

namespace vitlens::cli {

int cmd_evaluate_model(int argc, char** argv) {
  Args args(argc, argv, {"n", "seed", "threads", "data", "item-min", "item-max"}, {"help", "json"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens evaluate-model MODEL [--n 2000] [--seed 424242] [--threads 2] [--json]\n"
        "                              [--item-min %d --item-max %d] [--data %s]\n\n"
        "Generates N test scenes (t10k items only, stream SEED, 64×64) and reports per-class and mean\n"
        "average precision, exact-set accuracy (classes with p > 0.5 equal the true set), top-1 on\n"
        "single-item scenes and top-2 on two-item scenes. The figures do not depend on --threads.\n"
        "--item-min/--item-max: the side of a scaled item, pixels (as in `vitlens train`).\n",
        SceneOptions{}.min_item, SceneOptions{}.max_item, fashion_mnist_default_dir);
    return args.has("help") ? 0 : 2;
  }
  const Model m = load_model_arg(args.positional()[0]);
  const int n = args.get_int("n", 2000);
  const int threads = args.get_int("threads", 2);
  if (n < 1 || threads < 1) throw Error(ErrorCode::bad_argument, "--n and --threads must be ≥ 1");
  const std::string seed_text = args.get("seed", "424242");
  char* end = nullptr;
  errno = 0;
  const unsigned long long seed = std::strtoull(seed_text.c_str(), &end, 10);
  if (seed_text.empty() || seed_text[0] == '-' || *end || errno == ERANGE)
    throw Error(ErrorCode::bad_argument, "--seed needs a non-negative integer");
  SceneOptions opt;
  opt.size = m.config.image_h;
  opt.min_item = args.get_int("item-min", opt.min_item);
  opt.max_item = args.get_int("item-max", opt.max_item);
  const FashionMnist test = load_fashion_mnist(args.get("data", fashion_mnist_default_dir), false);
  const SceneEvalReport r = evaluate_scenes(m, test, opt, seed, n, threads);
  if (args.has("json")) {
    nlohmann::json ap = nlohmann::json::object();
    for (int k = 0; k < fashion_classes; ++k) ap[m.config.class_names[size_t(k)]] = r.ap[size_t(k)];
    nlohmann::json out = {{"scenes", r.n},          {"seed", seed},
                          {"single_item_scenes", r.single_n}, {"two_item_scenes", r.two_n},
                          {"average_precision", ap}, {"mAP", r.map},
                          {"exact_set_accuracy", r.exact_acc}, {"exact_set_single", r.exact_single},
                          {"exact_set_two", r.exact_two}, {"single_item_top1", r.single_top1},
                          {"two_item_top2", r.two_top2},
                          {"item_sides", {opt.min_item, opt.max_item}}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%d test scenes (seed %llu, items %d…%d px): %d single-item, %d two-item\n", r.n, seed, opt.min_item,
              opt.max_item, r.single_n, r.two_n);
  std::printf("%-14s %9s %6s\n", "class", "AP", "scenes");
  for (int k = 0; k < fashion_classes; ++k)
    std::printf("%-14s %9.4f %6d\n", m.config.class_names[size_t(k)].c_str(), r.ap[size_t(k)], r.positives[size_t(k)]);
  std::printf("mAP                      %.4f\n", r.map);
  std::printf("exact-set accuracy       %.2f%%  (single-item %.2f%%, two-item %.2f%%)\n", 100.0 * r.exact_acc,
              100.0 * r.exact_single, 100.0 * r.exact_two);
  std::printf("single-item top-1        %.2f%%\n", 100.0 * r.single_top1);
  std::printf("two-item top-2 = the set %.2f%%\n", 100.0 * r.two_top2);
  return 0;
}

}  // namespace vitlens::cli
