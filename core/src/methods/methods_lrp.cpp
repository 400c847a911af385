// methods_lrp.cpp — the LRP-based methods: transformer-attribution (Chefer, Gur & Wolf, CVPR
// 2021) with its ablations, partial-lrp (Voita et al. 2019), lrp (full, to the pixels) and
// attnlrp (Achtibat et al., ICML 2024). Small functions over the relevance passes of lrp.h, which
// run once per (input, target) on the double-precision trace and only as deep as a method needs.
#include "methods_internal.h"

#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/parallel.h"

namespace vitlens::detail {

namespace {

// The activations the relevance rules read, in the precision asked for: recomputed in double, or
// the float pass cast. A change of precision on the same input restarts the relevance passes.
const TraceD& trace_d(const Model& m, ExplainState& st, LrpPrecision precision) {
  const bool float32 = precision == LrpPrecision::float32;
  if (!st.has_trace_d || st.trace_d_float32 != float32) {
    if (float32) lrp_trace_from_float(st.trace_d, m, st.trace);
    else lrp_forward(st.trace_d, m, st.trace.input, st.trace.head_mask);  // the same heads off
    if (st.has_trace_d) st.chefer.target = st.chefer_variant.target = st.attnlrp.target = -1;
    st.has_trace_d = true;
    st.trace_d_float32 = float32;
  }
  return st.trace_d;
}

void add_relevance_intermediates(Explanation& out, const RelevancePass& pass) {
  for (size_t b = 0; b < out.blocks.size(); ++b) {
    const std::vector<MatD>& r = pass.r_attn[b];
    if (r.empty()) continue;
    MatD mean = MatD::Zero(r[0].rows(), r[0].cols());
    out.blocks[b].relevance_heads.clear();
    for (const MatD& rh : r) {
      mean += rh;
      out.blocks[b].relevance_heads.push_back(rh.cast<float>());
    }
    out.blocks[b].relevance = (mean / double(r.size())).cast<float>();
  }
}

// Σ over features of the relevance at E0 (position embedding included; below norm_pre if the
// model has one), the prefix dropped: the relevance of each patch token.
Mat token_relevance(const RelevancePass& pass, const Config& c) {
  return grid_from_row(pass.r_tokens.rowwise().sum().transpose(), c);
}

}  // namespace

RelevancePass& chefer_pass(ExplainState& st, const MethodOptions& opt, LrpRules& rules) {
  rules = chefer_rules(opt.linear_rule == CheferLinear::separate ? LinearRule::alpha1beta0_separate : LinearRule::alpha1beta0,
                       opt.add_rule == CheferAdd::plain ? AddRule::plain : AddRule::normalised);
  return same_rules(rules, kCheferRules) ? st.chefer : st.chefer_variant;
}

const RelevancePass& chefer_pass_to_input(const Model& m, ExplainState& st, const MethodOptions& opt, int target,
                                          int block, LrpRules& rules) {
  RelevancePass& pass = chefer_pass(st, opt, rules);
  lrp_propagate(pass, m, trace_d(m, st, opt.precision), rules, target, block, LrpDepth::block_input);
  return pass;
}

// Chefer, Gur & Wolf 2021: Ā_b = E_h[(∇A_b ⊙ R_{A_b})⁺], C = (I + Ā_L)·…·(I + Ā_s), no row
// normalisation; map = C[0, 1:] (qᵀC on the patch columns). The ablations: Ā_b = E_h[(R_{A_b})⁺]
// ("without gradients", as the paper's code runs it: weight none), Ā_b = E_h[(A_b ⊙ R_{A_b})⁺] (as
// its text states it, ∇A replaced by A: weight attn), and one block only: (I + Ā_b)[0, 1:] =
// Ā_b[0, 1:].
void transformer_attribution(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Config& c = m.config;
  const int lowest = opt.block >= 0 ? opt.block : opt.start_layer;
  // The float backward (∇A) and the double forward the relevance pass reads are independent. On a
  // small model (the largest product under kSideBySideMacs; the shipped model's) with a second
  // thread free (vitlens-mt.js), they run side by side, one thread each: 18.3–18.7 → 16.4–16.9
  // ms on the shipped model in node; with the layers splitting their own work (parallel.h) it
  // still pays there, if less (13.0–13.5 against 13.3–13.6 ms with the forward pass, three
  // interleaved runs). Larger models split each pass, which paid more before the layers' splits
  // (DeiT-tiny: 314 ms against 324 ms side by side; not measured since). The calling thread takes
  // the longer double forward (~5 ms against the backward's ~2.7 on the shipped model) and, once
  // the worker has finished the backward, splits the rest of it with the worker (WorkerPool::run,
  // parallel.h): 0.90–0.92× the time of the worker taking the double forward alone (node, two
  // interleaved runs of 41 rounds); the calling thread also reads that trace in the relevance pass.
  constexpr double kSideBySideMacs = double(1 << 21);
  const double largest_product =  // qkv or fc1, or the patch embedding (large patches)
      double(c.dim) * std::max(double(c.tokens()) * std::max(3 * c.dim, c.mlp_dim),
                               double(c.num_patches()) * c.channels * c.patch * c.patch);
  if (opt.weight == AttnWeight::grad && st.grads_target != out.target && !st.has_trace_d &&
      opt.precision == LrpPrecision::float64 && largest_product < kSideBySideMacs && compute_pool().available() >= 2)
    compute_pool().run(2, [&](int t) { t == 0 ? void(trace_d(m, st, opt.precision)) : void(target_grads(m, st, out.target)); });
  const Grads* g = opt.weight == AttnWeight::grad ? &target_grads(m, st, out.target) : nullptr;
  // The per-block, per-head weights W_h of Ā_b (nullptr: none).
  auto weights = [&](int b) -> const std::vector<Mat>* {
    if (opt.weight == AttnWeight::grad) return &g->blocks[size_t(b)].attn;
    if (opt.weight == AttnWeight::attn) return &st.trace.blocks[size_t(b)].attn;
    return nullptr;
  };
  // Where block b's per-head terms of Ā_b go (nullptr: intermediates not asked for).
  auto heads = [&](int b) { return opt.want_intermediates ? &out.blocks[size_t(b)].product_heads : nullptr; };
  LrpRules rules;
  RelevancePass& pass = chefer_pass(st, opt, rules);
  // The map needs R_A down to block `lowest` only: the pass stops there, after that block's
  // attention core (the report then ends at its attn.q_kT; a later method that needs more, lrp or
  // the guided walk, resumes the pass). That block's qkv layer, three products, was 2–3 % of the
  // method (node, 2026-12-03: 0.974× on the shipped model, 0.982× on DeiT-tiny).
  lrp_propagate(pass, m, trace_d(m, st, opt.precision), rules, out.target, lowest, LrpDepth::attention);
  Eigen::RowVectorXd row = query_row(c);  // (n) qᵀ·C
  if (opt.block >= 0) {
    MatD bar = positive_head_mean(pass.r_attn[size_t(opt.block)], weights(opt.block), heads(opt.block));
    bar.diagonal().array() += 1.0;  // qᵀ(I + Ā_b): for the CLS query, Ā_b[0, 1:]
    row = row * bar;
    if (opt.want_intermediates) out.blocks[size_t(opt.block)].step = out.blocks[size_t(opt.block)].accumulated = bar.cast<float>();
  } else {
    std::vector<MatD> steps(size_t(c.depth));  // (L) × (n, n) I + Ā_b
    for (int b = lowest; b < c.depth; ++b) {
      steps[size_t(b)] = positive_head_mean(pass.r_attn[size_t(b)], weights(b), heads(b));
      steps[size_t(b)].diagonal().array() += 1.0;
    }
    row = rollout_row(steps, lowest, c, opt.want_intermediates ? &out.blocks : nullptr);
  }
  out.token_map = grid_from_row(row, c);
  out.conservation = pass.report;
  add_attention_intermediates(out, st.trace, g);
  add_relevance_intermediates(out, pass);
}

// Voita et al. 2019, as Chefer et al. 2021's baseline: E_h[(R_{A_L})⁺][0, 1:] (the paper's row used
// the older linear and add rules: linear-rule separate, add-rule plain).
void partial_lrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  const Config& c = m.config;
  LrpRules rules;
  RelevancePass& pass = chefer_pass(st, opt, rules);
  // Down to the last block's R_A only: not through its qkv layer, whose k and v rows all carry
  // relevance (0.948× on the shipped model, 0.958× on DeiT-tiny; the rest is mostly the double
  // forward pass of every block).
  lrp_propagate(pass, m, trace_d(m, st, opt.precision), rules, out.target, c.depth - 1, LrpDepth::attention);
  out.token_map = grid_from_row(query_row(c) * positive_head_mean(pass.r_attn.back(), nullptr, nullptr), c);
  out.conservation = pass.report;
  add_attention_intermediates(out, st.trace, nullptr);
  add_relevance_intermediates(out, pass);
}

namespace {

// A relevance pass all the way to the pixels: pixel map Σ_c R_x, token map Σ_d R_{E0} per patch.
void lrp_to_pixels(Explanation& out, const Model& m, ExplainState& st, RelevancePass& pass,
                   const LrpRules& rules, LrpPrecision precision) {
  lrp_propagate(pass, m, trace_d(m, st, precision), rules, out.target, 0, LrpDepth::pixels);
  out.pixel_map = pass.pixel_map.cast<float>();
  out.token_map = token_relevance(pass, m.config);
  out.conservation = pass.report;
  add_attention_intermediates(out, st.trace, nullptr);
  add_relevance_intermediates(out, pass);
}

}  // namespace

// Full LRP with Chefer's rules (or the older linear and add rules of the paper's baseline)
// through every layer, the position-embedding add (CLS share dropped) and z^B at the patch
// embedding.
void lrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  LrpRules rules;
  RelevancePass& pass = chefer_pass(st, opt, rules);
  lrp_to_pixels(out, m, st, pass, rules, opt.precision);
}

// AttnLRP (Achtibat et al. 2024), seeded with the target logit: the pixel map is
// Σ_c x ⊙ (modified gradient) = Σ_c R_x.
void attnlrp(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  lrp_to_pixels(out, m, st, st.attnlrp, kAttnLrpRules, opt.precision);
}

}  // namespace vitlens::detail
