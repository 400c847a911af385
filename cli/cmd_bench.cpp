// cmd_bench.cpp — `vitlens bench MODEL`: median latency of the forward (and backward) pass and,
// with --methods, of each attribution method.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/tensor/error.h"
#include "vitlens/relevance/lrp.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/vit.h"

namespace vitlens::cli {

namespace {

struct Stats {
  double median, min, p90;
};

template <typename F>
Stats time_it(F&& f, int iters, int warmups = 3) {
  for (int i = 0; i < warmups; ++i) f();  // warm up: page in buffers, settle the allocator
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t[std::min(t.size() - 1, t.size() * 9 / 10)]};
}

// --methods: every method; --methods=a,b: those.
std::vector<std::string> method_list(const std::string& arg) {
  std::vector<std::string> out;
  if (arg == "1") {
    for (const MethodInfo& m : method_registry()) out.push_back(m.name);
    return out;
  }
  size_t start = 0;
  while (start <= arg.size()) {
    const size_t comma = std::min(arg.find(',', start), arg.size());
    const std::string name = arg.substr(start, comma - start);
    if (!find_method(name)) throw Error(ErrorCode::bad_argument, "--methods: unknown method '" + name + "' (see vitlens explain --list)");
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args(argc, argv, {"iters", "methods"}, {"help", "json", "methods"});
  if (args.has("help") || args.positional().size() != 1) {
    std::printf(
        "usage: vitlens bench MODEL [--iters N] [--methods[=a,b,...]] [--json]\n\n"
        "MODEL is a .vitl file or 'deit-tiny' (224×224, patch 16, width 192, 12 blocks, 3 heads, random\n"
        "weights). Reports the median, minimum and 90th-percentile latency over N runs (default 30)\n"
        "after 3 warm-up runs, single thread.\n"
        "--methods also times every attribution method (or the ones listed) as one explain() call from\n"
        "the input: forward, backward and relevance passes included; then the double-precision forward\n"
        "of the LRP methods alone, and all methods on one shared state (the page's grid). With attattr,\n"
        "also its matrices alone, batched and as m = 20 separate passes per block (the speed-up).\n");
    return args.has("help") ? 0 : 2;
  }
#if defined(__GLIBC__)
  // glibc returns large blocks to the kernel on free, so every large temporary (Eigen's GEMM
  // blocking, the passes' buffers) would page-fault again on each run; keep them in the heap,
  // as wasm's allocator does.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
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
  std::vector<std::pair<std::string, Stats>> rows;  // (name, latency) of the --methods lines
  if (args.has("methods")) {
    const std::vector<std::string> methods = method_list(args.get("methods"));
    for (const std::string& name : methods)
      rows.push_back({name, time_it([&] { explain(m, x, name); }, iters)});
    TraceD td;
    rows.push_back({"lrp forward (double)", time_it([&] { lrp_forward(td, m, x); }, iters)});
    if (std::find(methods.begin(), methods.end(), "attattr") != methods.end()) {
      // AttAttr's matrices alone (m = 20, one thread): the batched pass against the definition's
      // m separate forward + backward passes per block; at most 3 runs after 1 warm-up (slow).
      const int target = top_k(m.config, tr.logits, 1)[0].cls, slow = std::min(iters, 3);
      rows.push_back({"attattr blocks, batched", time_it([&] { attattr_blocks(m, tr, target, 20, 1); }, slow, 1)});
      rows.push_back({"attattr blocks, naive", time_it([&] { attattr_blocks_naive(m, tr, target, 20); }, slow, 1)});
    }
    rows.push_back({"all listed, shared state", time_it([&] {
                      ExplainState st;
                      st.set_input(m, x);
                      for (const std::string& name : methods) explain(m, st, name);
                    }, iters)});
  }
  if (args.has("json")) {
    std::printf("{\"forward_ms\": {\"median\": %.3f, \"min\": %.3f, \"p90\": %.3f}, "
                "\"backward_ms\": {\"median\": %.3f, \"min\": %.3f, \"p90\": %.3f}",
                fwd.median, fwd.min, fwd.p90, bwd.median, bwd.min, bwd.p90);
    if (!rows.empty()) {
      std::printf(", \"methods_ms\": {");
      for (size_t i = 0; i < rows.size(); ++i)
        std::printf("%s\"%s\": {\"median\": %.3f, \"min\": %.3f, \"p90\": %.3f}", i ? ", " : "", rows[i].first.c_str(),
                    rows[i].second.median, rows[i].second.min, rows[i].second.p90);
      std::printf("}");
    }
    std::printf("}\n");
  } else {
    std::printf("%-26s %10s %10s %10s\n", "pass", "median ms", "min ms", "p90 ms");
    std::printf("%-26s %10.3f %10.3f %10.3f\n", "forward", fwd.median, fwd.min, fwd.p90);
    std::printf("%-26s %10.3f %10.3f %10.3f\n", "backward (activations)", bwd.median, bwd.min, bwd.p90);
    for (const auto& [name, st] : rows) std::printf("%-26s %10.3f %10.3f %10.3f\n", name.c_str(), st.median, st.min, st.p90);
  }
  return 0;
}

}  // namespace vitlens::cli
