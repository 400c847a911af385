// cmd_bench.cpp — `vitlens bench MODEL`: median latency of the forward (and backward) pass.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "common.h"
#include "vitlens/vit.h"

namespace vitlens::cli {

namespace {

struct Stats {
  double median, min, p90;
};

template <typename F>
Stats time_it(F&& f, int iters) {
  for (int i = 0; i < 3; ++i) f();  // warm up: page in buffers, settle the allocator
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t[std::min(t.size() - 1, t.size() * 9 / 10)]};
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args(argc, argv, {"iters"}, {"help", "json"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens bench MODEL [--iters N] [--json]\n\n"
        "MODEL is a .vitl file or 'deit-tiny' (224×224, patch 16, width 192, 12 blocks, 3 heads, random\n"
        "weights). Reports the median, minimum and 90th-percentile latency over N runs (default 30)\n"
        "after 3 warm-up runs, single thread.\n");
    return args.has("help") ? 0 : 2;
  }
  const Model m = load_model_arg(args.positional()[0]);
  const int iters = std::max(1, args.get_int("iters", 30));
  const Image x = random_input(m.config, 1);
  Trace tr;
  Grads g;
  Vec dlogits = Vec::Zero(m.config.classes);
  const Stats fwd = time_it([&] { vit_forward(tr, m, x); }, iters);
  vit_forward(tr, m, x);
  dlogits[top_k(m.config, tr.logits, 1)[0].cls] = 1.0f;
  const Stats bwd = time_it([&] { vit_backward(g, nullptr, m, tr, dlogits); }, iters);
  if (args.has("json")) {
    std::printf("{\"forward_ms\": {\"median\": %.3f, \"min\": %.3f, \"p90\": %.3f}, "
                "\"backward_ms\": {\"median\": %.3f, \"min\": %.3f, \"p90\": %.3f}}\n",
                fwd.median, fwd.min, fwd.p90, bwd.median, bwd.min, bwd.p90);
  } else {
    std::printf("%-26s %10s %10s %10s\n", "pass", "median ms", "min ms", "p90 ms");
    std::printf("%-26s %10.3f %10.3f %10.3f\n", "forward", fwd.median, fwd.min, fwd.p90);
    std::printf("%-26s %10.3f %10.3f %10.3f\n", "backward (activations)", bwd.median, bwd.min, bwd.p90);
  }
  return 0;
}

}  // namespace vitlens::cli
