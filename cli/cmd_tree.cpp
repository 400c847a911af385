// cmd_tree.cpp — `vitlens tree MODEL IMAGE`: the attribution tree of one image (Hao et al. 2021,
// core/include/vitlens/methods/attattr.h) as JSON for the page to draw: nodes are patches, edges carry
// their block and normalised score. --convention picks ours (the default) or the published code's
// (attattr.h says how they differ and why ours is the default).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/tensor/error.h"
#include "vitlens/methods/methods.h"

namespace vitlens::cli {

int cmd_tree(int argc, char** argv) {
  Args args(argc, argv, {"input", "target", "steps", "threshold", "threads", "out", "convention"}, {"help"});
  if (args.has("help") || args.positional().empty() || args.positional().size() > 2) {
    std::printf(
        "usage: vitlens tree MODEL (IMAGE | --input x.npy) [--target T] [--steps M] [--threshold 0.4]\n"
        "         [--convention ours|reference] [--threads N] [--out tree.json]\n\n"
        "The attribution tree of attattr (Hao et al. 2021): per block M = Σ_h Attr, normalised by its\n"
        "maximum over the patch query rows; entries ≤ --threshold dropped; the root is the patch with\n"
        "the largest attribution in the last block; edges parent→child from the last-but-one block down,\n"
        "one parent per patch, the strongest edge first (--convention ours, the default).\n"
        "--convention reference: the published code's (github.com/YRdddream/attattr): the root is the\n"
        "query token with the largest positive off-diagonal attribution summed over the blocks, edges\n"
        "are taken in token-index order (a node added in a block may parent another in that block) and\n"
        "CLS may be a node (row, col = -1). --target: the class (default: the predicted one); --steps:\n"
        "attattr's m (20). Writes {root, threshold, convention, grid, nodes:[{token,row,col}],\n"
        "edges:[{from,to,block,score}], target, class} to --out or stdout.\n");
    return args.has("help") ? 0 : 2;
  }
  const Model m = load_model_arg(args.positional()[0]);
  const Image x = load_input(args, m.config, args.positional().size() > 1 ? args.positional()[1] : "");
  const double threshold = args.get_double("threshold", 0.4);
  if (!(threshold >= 0.0 && threshold < 1.0))
    throw Error(ErrorCode::bad_argument, "--threshold must be in [0, 1): entries are normalised to at most 1");
  const TreeConvention convention = parse_tree_convention(args.get("convention", "ours"));
  MethodOptions opt;
  opt.target = args.get_int("target", -1);
  if (args.has("target") && opt.target < 0)
    throw Error(ErrorCode::bad_argument, "--target must be a class index ≥ 0");
  opt.steps = args.get_int("steps", 0);
  opt.threads = args.get_int("threads", 1);
  const Explanation e = explain(m, x, "attattr", opt);
  nlohmann::json j = nlohmann::json::parse(attr_tree_json(attattr_tree(e.attattr, threshold, m.config.prefix(), convention), m.config));
  j["target"] = e.target;
  if (size_t(e.target) < m.config.class_names.size()) j["class"] = m.config.class_names[size_t(e.target)];
  const std::string text = j.dump(1) + "\n";
  write_output(args, text);
  return 0;
}

}  // namespace vitlens::cli
