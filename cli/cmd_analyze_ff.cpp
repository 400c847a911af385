// cmd_analyze_ff.cpp — `vitlens analyze-ff MODEL`: the analyses of Kobayashi et al. (ICLR 2024) of
// what the feed-forward block does to the norm-based maps, on held-out scenes (eval/norm_ff.h for
// every definition). Writes DIR/report.md (printed too), report.csv, report.json and four SVG plots.
#include <cstdio>
#include <filesystem>
#include <string>

#include "common.h"
#include "vitlens/data/scenes.h"
#include "vitlens/eval/eval.h"
#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/io.h"
#include "vitlens/methods/norm_maps.h"
#include "vitlens/model/vit.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

int cmd_analyze_ff(int argc, char** argv) {
  Args args(argc, argv, {"n", "out", "seed", "threads", "data", "item-share", "background-share"}, {"help"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens analyze-ff MODEL [--n 200] [--out analyze-ff-out] [--seed %llu] [--threads 2]\n"
        "                          [--item-share 0.5] [--background-share 0.1] [--data %s]\n\n"
        "The norm-based maps (Kobayashi et al.) of N held-out scenes (t10k items, stream SEED, as\n"
        "`vitlens eval`), and per block: Spearman's rho between the maps of consecutive stages (the\n"
        "FF's contextualisation change: atb-res-ln vs atb-res-ln-ff; whole map and per query row), the\n"
        "mixing ratio of each stage, and which patch pairs a transition amplifies (the ratio of a key's\n"
        "share of its query's context after vs before), by pair type from the scene masks and by\n"
        "distance. A patch is an item's when more than --item-share of its pixels are in that item's\n"
        "mask, background when the masks cover at most --background-share of it, else mixed.\n"
        "Writes DIR/report.md (also printed), report.csv, report.json, ff_spearman.svg,\n"
        "ff_pair_types.svg, ff_distance.svg and mixing.svg. The figures do not depend on --threads.\n",
        (unsigned long long)eval_default_seed, fashion_mnist_default_dir);
    return args.has("help") ? 0 : 2;
  }
  const std::string model_path = args.positional()[0];
  const Model m = load_model_arg(model_path);
  const Config& c = m.config;
  const int n = args.get_int("n", 200), threads = args.get_int("threads", 2);
  if (n < 1 || n > 100000) throw Error(ErrorCode::bad_argument, "--n must be 1…100000");
  if (threads < 1 || threads > 64) throw Error(ErrorCode::bad_argument, "--threads must be 1…64");
  const uint64_t seed = args.get_u64("seed", eval_default_seed);
  RegionOptions regions_opt;
  regions_opt.item_share = args.get_double("item-share", regions_opt.item_share);
  regions_opt.background_share = args.get_double("background-share", regions_opt.background_share);
  if (!(regions_opt.item_share >= 0.5 && regions_opt.item_share < 1) ||
      !(regions_opt.background_share >= 0 && regions_opt.background_share < regions_opt.item_share))
    throw Error(ErrorCode::bad_argument,
                "--item-share must be in [0.5, 1) (so a patch has at most one item) and --background-share in "
                "[0, item-share)");
  SceneOptions scene_opt;
  scene_opt.size = c.image_h;
  if (c.image_h != c.image_w || c.channels != 3)
    throw Error(ErrorCode::bad_argument, "analyze-ff runs on square RGB scene models (such as models/vitlens-scenes.vitl)");
  validate_scene_options(scene_opt);
  const std::string out = args.get("out", "analyze-ff-out");
  std::filesystem::create_directories(out);
  const FashionMnist test = load_fashion_mnist(args.get("data", fashion_mnist_default_dir), false);

  NormFfStats stats = norm_ff_start(c);
  const double t0 = now_ms();
  for (int i = 0; i < n; ++i) {
    const Scene scene = make_scene(test, scene_opt, seed, uint64_t(i));
    Trace tr;
    vit_forward(tr, m, scene_input(scene.pixels, c));
    std::vector<NormBlock> norm;
    for (int b = 0; b < c.depth; ++b) norm.push_back(norm_block(m, tr, b, threads));
    std::vector<std::vector<uint8_t>> masks;
    for (const SceneItem& item : scene.items) masks.push_back(item.mask);
    norm_ff_add(stats, norm, c, patch_regions(masks, c.image_h, c.image_w, c.patch, regions_opt));
    const double el = (now_ms() - t0) / 1000.0;
    std::fprintf(stderr, "\ranalyze-ff: %d/%d scenes, %s elapsed, %s left", i + 1, n, clock_text(el).c_str(),
                 clock_text(el / (i + 1) * (n - i - 1)).c_str());
  }
  std::fprintf(stderr, "\n");

  char shares[96];
  std::snprintf(shares, sizeof shares, "%g", regions_opt.item_share);
  std::string command = "vitlens analyze-ff " + std::filesystem::path(model_path).filename().string() +
                        " --n " + std::to_string(n) + " --seed " + std::to_string(seed);
  if (args.has("item-share")) command += std::string(" --item-share ") + shares;
  if (args.has("background-share")) {
    std::snprintf(shares, sizeof shares, "%g", regions_opt.background_share);
    command += std::string(" --background-share ") + shares;
  }
  const std::string title = std::filesystem::path(model_path).filename().string() + ", " + std::to_string(n) +
                            " t10k scenes (seed " + std::to_string(seed) + ")";
  const std::string md = norm_ff_markdown(stats, title, command);
  const std::filesystem::path dir(out);
  write_file((dir / "report.md").string(), md);
  write_file((dir / "report.csv").string(), norm_ff_csv(stats));
  write_file((dir / "report.json").string(), norm_ff_json(stats));
  for (const auto& [name, svg] : norm_ff_svgs(stats)) write_file((dir / name).string(), svg);
  std::printf("%s\nwrote %s/report.md, report.csv, report.json and 4 SVG plots\n", md.c_str(), out.c_str());
  return 0;
}

}  // namespace vitlens::cli
