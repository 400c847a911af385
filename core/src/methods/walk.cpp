// walk.cpp — the guided walk through transformer-attribution (Chefer, Gur & Wolf, CVPR 2021),
// attnlrp (Achtibat et al., ICML 2024) and rollout (Abnar & Zuidema, ACL 2020); see walk.h.
//
// The walk runs the method once (explain() with intermediates, on the caller's ExplainState, so
// the passes it needs are computed once and shared with the other views) and reads, in the order
// of the method's formula: the intermediates (per block E_h A, E_h ∇A, E_h R_A, the per-head terms
// of Ā, I + Ā or Â, the accumulated product), the relevance pass's per-token sums (lrp.h,
// BlockTokenRelevance) and the conservation report. The formulas and rules are written here once
// per method and per rule (the rule sets are data: lrp.h), with the block numbers filled in.
#include "vitlens/methods/walk.h"

#include <cassert>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "methods_internal.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- formulas ------------------------------------------------------------------------------

// A formula line as pieces with keys; a step marks the pieces from key `first` to key `last`.
struct Piece {
  std::string key, text;
};
using Line = std::vector<Piece>;

WalkFormula marked(const Line& line, const std::string& first = "", const std::string& last = "") {
  WalkFormula f;
  const std::string& end = last.empty() ? first : last;
  int where = 0;  // 0 before the mark, 1 in it, 2 after it
  for (const Piece& p : line) {
    if (where == 0 && !first.empty() && p.key == first) where = 1;
    (where == 0 ? f.before : where == 1 ? f.mark : f.after) += p.text;
    if (where == 1 && p.key == end) where = 2;
  }
  assert(first.empty() || where == 2);
  return f;
}

std::string idx(const std::string& symbol, int b) { return symbol + "_" + std::to_string(b); }

// "A_b" for the walk's general line (b < 0), "A_3" in block 3's steps.
std::string at(const std::string& symbol, int b) { return b < 0 ? symbol + "_b" : idx(symbol, b); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---- the rules in words (lrp.h's rule sets are data; each rule is written once here) --------

std::string linear_equation(LinearRule r) {
  switch (r) {
    case LinearRule::alpha1beta0:
      return "LRP-α1β0 (Bach et al. 2015): Z = x⁺·W⁺ᵀ + x⁻·W⁻ᵀ, S = R/Z, R_x = x⁺ ⊙ (S·W⁺) + x⁻ ⊙ (S·W⁻); the bias is ignored";
    case LinearRule::alpha1beta0_separate:
      return "LRP-α1β0, one denominator per sign: R_x = x⁺ ⊙ ((R/(x⁺·W⁺ᵀ))·W⁺) + x⁻ ⊙ ((R/(x⁻·W⁻ᵀ))·W⁻)";
    case LinearRule::epsilon:
      return "LRP-ε (AttnLRP, Eq. 8): z = x·Wᵀ + b, R_x = x ⊙ ((R/(z ± ε))·W), ε = 1e-6 with the sign of z";
  }
  return "";
}

std::string linear_conservation(LinearRule r) {
  switch (r) {
    case LinearRule::alpha1beta0:
      return "Conserved: the one shared denominator passes all of R on (the bias takes no share), up to the 1e-9 "
             "stabiliser and the rare outputs whose Z is exactly 0.";
    case LinearRule::alpha1beta0_separate:
      return "Not conserved: each sign passes all of R on wherever its own denominator is not 0, so up to 2ΣR "
             "leaves the layer (the older rule of the paper's LRP baselines).";
    case LinearRule::epsilon:
      return "Not conserved: the bias keeps its share b ⊙ R/(z ± ε) and ε keeps a little more; what the inputs "
             "receive is R·(z − b)/(z ± ε).";
  }
  return "";
}

std::string add_equation(AddRule r, const std::string& a, const std::string& b) {
  const std::string split = "R_" + a + " = " + a + " ⊙ R/(" + a + " + " + b + "), R_" + b + " = " + b + " ⊙ R/(" + a +
                            " + " + b + ")";
  switch (r) {
    case AddRule::normalised:
      return split + ", then both rescaled so that |ΣR_" + a + "| : |ΣR_" + b + "| is kept and ΣR_" + a + " + ΣR_" +
             b + " = ΣR (Chefer et al. 2021, Sec. 3)";
    case AddRule::plain: return split + " (the plain z rule)";
    case AddRule::epsilon:
      return "R_" + a + " = " + a + " ⊙ R/(" + a + " + " + b + " ± ε), R_" + b + " = " + b + " ⊙ R/(" + a + " + " +
             b + " ± ε) (the ε rule on a sum)";
  }
  return "";
}

std::string add_conservation(AddRule r) {
  switch (r) {
    case AddRule::normalised: return "Conserved: the rescaling makes ΣR_a + ΣR_b = ΣR exactly.";
    case AddRule::plain: return "Conserved up to the 1e-9 stabiliser: R_a + R_b = R·(a + b)/(a + b + 1e-9).";
    case AddRule::epsilon: return "Conserved up to ε: R_a + R_b = R·(a + b)/(a + b ± ε).";
  }
  return "";
}

std::string layernorm_equation(LayerNormRule r) {
  if (r == LayerNormRule::identity) return "LayerNorm: relevance passes unchanged (Chefer et al. 2021)";
  return "LayerNorm y = γ·rstd·(x − mean x) + β with γ·rstd held constant (AttnLRP): g = γ·rstd ⊙ R/(y ± ε), "
         "R_x = x ⊙ (g − mean g)";
}

std::string layernorm_conservation(LayerNormRule r) {
  if (r == LayerNormRule::identity) return "Conserved: the rule passes R unchanged.";
  return "Not conserved: β keeps its share β ⊙ R/(y ± ε), and the centring passes on only what x − mean x "
         "explains (Σ_i x_i(g_i − mean g) ≠ Σ_i R_i).";
}

std::string product_equation(ProductRule r, const std::string& x, const std::string& y) {
  if (r == ProductRule::halved)
    return "Z = " + x + "·" + y + ", S = R/Z: R_" + x + " = " + x + " ⊙ (S·" + y + "ᵀ)/2, R_" + y + " = " + y + " ⊙ (" +
           x + "ᵀ·S)/2 (each operand would receive all of ΣR: both are halved)";
  return "Z = " + x + "·" + y + ", S = R/(2Z ± ε): R_" + x + " = " + x + " ⊙ (S·" + y + "ᵀ), R_" + y + " = " + y +
         " ⊙ (" + x + "ᵀ·S) (AttnLRP Prop. 3.3: the ε rule on 2Z, half to each operand)";
}

std::string product_conservation(ProductRule r) {
  if (r == ProductRule::halved) return "Conserved: each operand gets half of ΣR (up to the 1e-9 stabiliser).";
  return "Conserved up to ε: the two halves add up to R·2Z/(2Z ± ε).";
}

std::string softmax_equation(SoftmaxRule r) {
  if (r == SoftmaxRule::identity) return "softmax: relevance passes unchanged (Chefer et al. 2021)";
  return "softmax (AttnLRP Prop. 3.1): R_s = s ⊙ (R − p·Σ_j R_ij) per query row i, s the scores, p = softmax(s)";
}

std::string softmax_conservation(SoftmaxRule r) {
  if (r == SoftmaxRule::identity) return "Conserved: the rule passes R unchanged.";
  return "Not conserved: Σ_j s_ij·(R_ij − p_ij·ΣR_i) differs from ΣR_i (the Taylor expansion at the scores keeps "
         "a bias term).";
}

// ---- shapes --------------------------------------------------------------------------------

WalkTensor tensor(const std::string& name, std::vector<int> shape, const std::string& dims) {
  return {name, std::move(shape), dims};
}

// What the walk shares between its steps.
struct Ctx {
  const Model& m;
  const Config& c;
  int n, d, H, L, P, k, classes;
  int query;                 // −1: q
  Eigen::RowVectorXd q;      // (n) the method's query
  bool matrices;

  Ctx(const Model& model, const WalkOptions& w)
      : m(model), c(model.config), n(c.tokens()), d(c.dim), H(c.heads), L(c.depth), P(c.num_patches()),
        k(c.prefix()), classes(c.classes), query(w.query), q(detail::query_row(c)), matrices(w.matrices) {}

  // The drawn row of an (n, n) matrix: the query token's row, or q·M (as the methods read maps).
  Vec row(const Mat& M) const {
    if (query >= 0) return M.row(query).transpose();
    return (q * M.cast<double>()).transpose().cast<float>();
  }

  // Fills a step's row (and matrix, when asked) from an (n, n) matrix.
  void draw(WalkStep& s, const Mat& M, const std::string& what) const {
    s.values = what + (query >= 0 ? ", row " + std::to_string(query) : ", the query's row q·M") +
               (matrices ? "; the whole n × n matrix" : "");
    s.row = row(M);
    if (matrices) s.matrix = M;
  }

  std::string q_text() const { return query >= 0 ? "e_" + std::to_string(query) : "q"; }
};

// The tokens of the model in words: "1 prefix token (CLS) + 14 × 14 patches".
std::string token_words(const Config& c) {
  std::vector<std::string> kinds;
  if (c.class_token) kinds.push_back("CLS");
  if (c.dist_token) kinds.push_back("DIST");
  if (c.registers) kinds.push_back(std::to_string(c.registers) + " register" + (c.registers > 1 ? "s" : ""));
  std::string s = std::to_string(c.prefix()) + " prefix token" + (c.prefix() == 1 ? "" : "s");
  if (!kinds.empty()) {
    s += " (";
    for (size_t i = 0; i < kinds.size(); ++i) s += (i ? ", " : "") + kinds[i];
    s += ")";
  }
  return s + " + " + std::to_string(c.grid_h()) + " × " + std::to_string(c.grid_w()) + " patches";
}

WalkStep input_step(const Ctx& x, const Line& line) {
  const Config& c = x.c;
  WalkStep s;
  s.id = "input";
  s.title = "The input: " + std::to_string(x.P) + " patches of " + std::to_string(c.patch) + " × " +
            std::to_string(c.patch) + " pixels become n = " + std::to_string(x.n) + " tokens";
  s.formula = marked(line, "input");
  s.equation = "E_0 = [prefix tokens; patches·W_Eᵀ + b_E] + pos_embed: each " + std::to_string(c.patch) + " × " +
               std::to_string(c.patch) + " × " + std::to_string(c.channels) + " patch becomes a d = " +
               std::to_string(x.d) + " vector, row by row; tokens: " + token_words(c);
  s.reads = {tensor("x", {c.channels, c.image_h, c.image_w}, "C × H × W"),
             tensor("W_E", {x.d, c.channels * c.patch * c.patch}, "d × C·p·p")};
  s.writes = {tensor("E_0", {x.n, x.d}, "n × d")};
  s.values = "the image and its patch grid";
  return s;
}

// The final token map of a query-row method: q·C (or row `query` of C) without the prefix columns.
WalkStep map_step(const Ctx& x, const Line& line, const Explanation& ex, const Mat& last, int last_block) {
  WalkStep s;
  s.id = "map";
  s.title = (x.query >= 0 ? "The map of token " + std::to_string(x.query) + "'s row of "
                          : std::string("The map: the query's row of ")) +
            idx("C", last_block) + ", the prefix dropped, on the patch grid";
  s.formula = marked(line, "map");
  s.equation = "map[r, c] = (" + x.q_text() + "·" + idx("C", last_block) + ")[k + r·gw + c]: the k = " +
               std::to_string(x.k) + " prefix columns are dropped and the P = " + std::to_string(x.P) +
               " patch values laid out row by row on the " + std::to_string(x.c.grid_h()) + " × " +
               std::to_string(x.c.grid_w()) + " grid";
  s.reads = {tensor(idx("C", last_block), {x.n, x.n}, "n × n"), tensor(x.q_text(), {x.n}, "n")};
  s.writes = {tensor("map", {x.c.grid_h(), x.c.grid_w()}, "H/p × W/p")};
  if (x.query >= 0) {
    s.values = "row " + std::to_string(x.query) + " of " + idx("C", last_block) +
               " over the patches (the method's own map reads the query q)";
    s.map = detail::grid_from_row(last.row(x.query).cast<double>(), x.c);
  } else {
    s.values = "the method's token map (raw)";
    s.map = ex.token_map;
  }
  return s;
}

// ---- the conservation report -------------------------------------------------------------

// The report's row of `layer` (the pass went through every layer the walk names: a missing one is
// a programming error; its sums then read NaN).
LayerRelevance report_row(const ConservationReport& r, const std::string& layer) {
  for (const LayerRelevance& l : r.layers)
    if (l.layer == layer) return l;
  assert(false && "the relevance pass has no such layer");
  return {layer, kNaN, kNaN};
}

// Σ R after the step that ends at `last` (its relevance_in), what arrived at `first`, the layers.
void relevance_of(WalkStep& s, const ConservationReport& r, const std::vector<std::string>& layers) {
  s.layers = layers;
  const double before = report_row(r, layers.front()).relevance_out;
  s.relevance = report_row(r, layers.back()).relevance_in;
  s.sums.insert(s.sums.begin(), {"Σ R arriving", before});
  s.sums.push_back({"change at this step (after − before)", s.relevance - before});
}

double vec_sum(const VecD& v) { return v.sum(); }

// The LRP steps before the blocks: the seed, the head and the pooling, the final norm.
void head_steps(std::vector<WalkStep>& out, const Ctx& x, const Line& line, const RelevancePass& pass,
                const LrpRules& rules, int target) {
  const Config& c = x.c;
  const ConservationReport& rep = pass.report;
  const std::string cls = c.class_names[size_t(target)];
  WalkStep seed;
  seed.id = "seed";
  seed.title = rules.seed == SeedRule::one_hot ? "The seed: R = onehot(t) at the logits"
                                               : "The seed: R = y_t·onehot(t) at the logits";
  seed.formula = marked(line, "seed");
  seed.equation = rules.seed == SeedRule::one_hot
                      ? "R_y = 1 at the class t = " + std::to_string(target) + " (" + cls +
                            "), 0 elsewhere: Chefer et al. seed with 1.0, not with the logit"
                      : "R_y = y_t = " + fmt("%.6g", rep.seed_sum) + " at the class t = " + std::to_string(target) +
                            " (" + cls + "), 0 elsewhere: AttnLRP seeds with the logit's value";
  seed.reads = {tensor("y", {x.classes}, "classes")};
  seed.writes = {tensor("R_y", {x.classes}, "classes")};
  seed.values = "nothing over the tokens yet: all of R sits on one logit";
  seed.relevance = rep.seed_sum;
  seed.sums = {{"Σ R at the logits", rep.seed_sum}};
  seed.conservation = "The seed: every later Σ R is compared with it.";
  out.push_back(seed);

  WalkStep head;
  head.id = "head";
  head.title = "Through the head and the pooling";
  head.formula = marked(line, "head");
  const bool avg = c.pool != Pooling::token;
  head.equation = "head " + linear_equation(rules.linear) +
                  (c.fc_norm ? "; fc_norm: " + layernorm_equation(rules.layernorm) : "") +
                  (avg ? "; the mean over the patch tokens as a linear layer with weights 1/P" : "") +
                  "; the pooled vector's relevance goes to the token(s) it was read from";
  head.reads = {tensor("R_y", {x.classes}, "classes"), tensor("W_head", {x.classes, c.head_in()}, "classes × d_in")};
  head.writes = {tensor("R(LN_f(x_L))", {x.n, x.d}, "n × d")};
  head.values = "Σ_d R per token at the final norm's output";
  head.row = pass.pool_tokens.cast<float>();
  std::vector<std::string> layers = {"head"};
  if (c.fc_norm) layers.push_back("fc_norm");
  layers.push_back("pool");
  for (const std::string& l : layers) head.sums.push_back({"after " + l, report_row(rep, l).relevance_in});
  relevance_of(head, rep, layers);
  head.conservation = "Head: " + linear_conservation(rules.linear) +
                      (avg ? " The mean over the patches: its own rule (lrp.cpp), conserving up to its stabiliser."
                           : " Pooling: all of R goes to the pooled token(s), conserved.") +
                      (c.fc_norm ? " fc_norm: " + layernorm_conservation(rules.layernorm) : "");
  out.push_back(head);

  if (!c.final_norm) return;
  WalkStep norm;
  norm.id = "norm";
  norm.title = "Through the final LayerNorm";
  norm.formula = marked(line, "norm");
  norm.equation = layernorm_equation(rules.layernorm);
  norm.reads = {tensor("R(LN_f(x_L))", {x.n, x.d}, "n × d"), tensor("x_L", {x.n, x.d}, "n × d")};
  norm.writes = {tensor("R(x_L)", {x.n, x.d}, "n × d")};
  norm.values = "Σ_d R per token at the last block's output";
  norm.row = pass.output_tokens.cast<float>();
  relevance_of(norm, rep, {"norm"});
  norm.conservation = layernorm_conservation(rules.layernorm);
  out.push_back(norm);
}

// ---- rollout (Abnar & Zuidema 2020) ------------------------------------------------------------

const char* fusion_symbol(HeadFusion f) { return f == HeadFusion::mean ? "mean_h" : f == HeadFusion::max ? "max_h" : "min_h"; }

Line rollout_line(const Ctx& x, const MethodOptions& opt, int b) {
  const int s = opt.start_layer, last = x.L - 1;
  Line l = {{"input", "x → E_0"}, {"", " → "}, {"attn", at("A", b) + " = softmax(Q·Kᵀ/√d_h)"}, {"", " → "},
            {"fuse", at("F", b) + " = " + fusion_symbol(opt.head_fusion) + " " + at("A", b)}};
  if (opt.discard_ratio > 0)
    l.insert(l.end(), {{"", " → "}, {"discard", at("F", b) + " with its ⌊" + fmt("%g", opt.discard_ratio) + "·n²⌋ smallest entries zeroed"}});
  l.insert(l.end(), {{"", " → "}, {"norm", at("Â", b) + " = rownorm(" + at("F", b) + " + I)"}, {"", " → "},
                     {"c_lhs", at("C", b) + " = "}, {"c_mid", at("Â", b)},
                     {"c_rhs", b == s ? "" : b < 0 ? "·C_(b−1)" : "·" + idx("C", b - 1)}, {"", " → "},
                     {"map", x.query >= 0 ? "map = " + idx("C", last) + "[" + std::to_string(x.query) + ", patches]"
                                          : "map = (q·" + idx("C", last) + ")[patches]"}});
  return l;
}

void rollout_walk(MethodWalk& w, const Ctx& x, ExplainState& st, const MethodOptions& opt, const Explanation& ex) {
  const int s0 = opt.start_layer, last = x.L - 1;
  w.steps.push_back(input_step(x, rollout_line(x, opt, -1)));
  const std::string fuse = fusion_symbol(opt.head_fusion);
  for (int b = s0; b < x.L; ++b) {
    const Line line = rollout_line(x, opt, b);
    const BlockIntermediates& bi = ex.blocks[size_t(b)];
    const std::string blk = "Block " + std::to_string(b) + ": ";
    MatD f = detail::fuse_heads(st.trace.blocks[size_t(b)].attn, opt.head_fusion);  // (n, n), the method's F_b

    WalkStep a;
    a.id = "block." + std::to_string(b) + ".fuse";
    a.block = b;
    a.title = blk + "the attention " + idx("A", b) + ", fused over the heads";
    a.formula = marked(line, "attn", "fuse");
    a.equation = idx("A", b) + " = softmax(Q_b·K_bᵀ/√d_h) per head, Q_b, K_b = LN1(x_b)·W_q, W_k; " + idx("F", b) +
                 " = " + fuse + " " + idx("A", b) + ", elementwise over the " + std::to_string(x.H) + " heads";
    a.reads = {tensor(idx("Q", b) + ", " + idx("K", b), {x.H, x.n, x.d / x.H}, "H × n × d_h")};
    a.writes = {tensor(idx("A", b), {x.H, x.n, x.n}, "H × n × n"), tensor(idx("F", b), {x.n, x.n}, "n × n")};
    x.draw(a, f.cast<float>(), idx("F", b));
    w.steps.push_back(a);

    if (opt.discard_ratio > 0) {
      detail::discard_lowest(f, opt.discard_ratio);
      WalkStep dsc;
      dsc.id = "block." + std::to_string(b) + ".discard";
      dsc.block = b;
      dsc.title = blk + "discard the smallest entries of " + idx("F", b);
      dsc.formula = marked(line, "discard");
      dsc.equation = "the ⌊" + fmt("%g", opt.discard_ratio) + "·n²⌋ smallest entries of " + idx("F", b) +
                     " are set to 0 (ties: the lower row-major index first), entry (0, 0) kept";
      dsc.reads = {tensor(idx("F", b), {x.n, x.n}, "n × n")};
      dsc.writes = {tensor(idx("F", b), {x.n, x.n}, "n × n")};
      x.draw(dsc, f.cast<float>(), idx("F", b) + " after the discard");
      w.steps.push_back(dsc);
    }

    WalkStep nr;
    nr.id = "block." + std::to_string(b) + ".step";
    nr.block = b;
    nr.title = blk + idx("Â", b) + " = rownorm(" + idx("F", b) + " + I)";
    nr.formula = marked(line, "norm");
    nr.equation = "I stands for the residual connection; each row is divided by its sum" +
                  std::string(opt.head_fusion == HeadFusion::mean && opt.discard_ratio == 0
                                  ? " (the rows of mean_h A sum to 1, so this is ½(F_b + I))"
                                  : "");
    nr.reads = {tensor(idx("F", b), {x.n, x.n}, "n × n")};
    nr.writes = {tensor(idx("Â", b), {x.n, x.n}, "n × n")};
    x.draw(nr, bi.step, idx("Â", b));
    w.steps.push_back(nr);

    WalkStep cb;
    cb.id = "block." + std::to_string(b) + ".accumulated";
    cb.block = b;
    cb.title = blk + (b == s0 ? idx("C", b) + " = " + idx("Â", b) + " (the first block of the product)"
                              : idx("C", b) + " = " + idx("Â", b) + "·" + idx("C", b - 1));
    cb.formula = marked(line, "c_lhs", "c_rhs");
    cb.equation = "each later block multiplies on the left: " + idx("C", b) + "[i, j] = Σ_m " + idx("Â", b) +
                  "[i, m]·" + (b == s0 ? "δ_mj" : idx("C", b - 1) + "[m, j]") +
                  ", how much token j flows into token i up to block " + std::to_string(b);
    cb.reads = {tensor(idx("Â", b), {x.n, x.n}, "n × n")};
    if (b > s0) cb.reads.push_back(tensor(idx("C", b - 1), {x.n, x.n}, "n × n"));
    cb.writes = {tensor(idx("C", b), {x.n, x.n}, "n × n")};
    x.draw(cb, bi.accumulated, idx("C", b));
    w.steps.push_back(cb);
  }
  w.steps.push_back(map_step(x, rollout_line(x, opt, -1), ex, ex.blocks[size_t(last)].accumulated, last));
}

// ---- transformer-attribution (Chefer, Gur & Wolf 2021) ------------------------------------------

std::string weighted(AttnWeight wt, int b) {
  switch (wt) {
    case AttnWeight::grad: return "(" + at("∇A", b) + " ⊙ " + at("R_A", b) + ")⁺";
    case AttnWeight::none: return "(" + at("R_A", b) + ")⁺";
    case AttnWeight::attn: return "(" + at("A", b) + " ⊙ " + at("R_A", b) + ")⁺";
  }
  return "";
}

Line ta_line(const Ctx& x, const MethodOptions& opt, int first, int b) {
  const int last = opt.block >= 0 ? opt.block : x.L - 1;
  Line l = {{"input", "x → E_0"}, {"", " → "}, {"attn", at("A", b)}, {"", " → "}, {"logit", "y_t"}, {"", ";  "}};
  if (opt.weight == AttnWeight::grad) l.insert(l.end(), {{"grad", at("∇A", b) + " = ∂y_t/∂" + at("A", b)}, {"", ";  "}});
  l.insert(l.end(), {{"seed", "R = onehot(t)"}, {"", " → "}, {"head", "head"}});
  if (x.c.final_norm) l.insert(l.end(), {{"", " → "}, {"norm", "LN_f"}});
  l.insert(l.end(), {{"", " → … → "}, {"relevance", at("R_A", b)}, {"", ";  "},
                     {"bar", at("Ā", b) + " = E_h[" + weighted(opt.weight, b) + "]"}, {"", ";  "},
                     {"c_lhs", at("C", b) + " = "}, {"step", "(I + " + at("Ā", b) + ")"},
                     {"c_rhs", b == first ? "" : b < 0 ? "·C_(b−1)" : "·" + idx("C", b - 1)}, {"", ";  "},
                     {"map", x.query >= 0 ? "map = " + idx("C", last) + "[" + std::to_string(x.query) + ", patches]"
                                          : "map = (q·" + idx("C", last) + ")[patches]"}});
  return l;
}

void ta_walk(MethodWalk& w, const Ctx& x, ExplainState& st, const MethodOptions& opt, const Explanation& ex) {
  const int first = opt.block >= 0 ? opt.block : opt.start_layer;
  const int last = opt.block >= 0 ? opt.block : x.L - 1;
  // The method's pass stopped at R_A of block `first`; the walk shows Σ R at each block's input too.
  LrpRules rules;
  const RelevancePass& pass = detail::chefer_pass_to_input(x.m, st, opt, ex.target, first, rules);
  const ConservationReport& rep = pass.report;
  w.seed = rep.seed_sum;
  const Line general = ta_line(x, opt, first, -1);
  w.steps.push_back(input_step(x, general));
  head_steps(w.steps, x, general, pass, rules, ex.target);
  for (int b = first; b <= last; ++b) {
    const Line line = ta_line(x, opt, first, b);
    const BlockIntermediates& bi = ex.blocks[size_t(b)];
    const std::string blk = "Block " + std::to_string(b) + ": ";
    const std::string pre = "blocks." + std::to_string(b) + ".";
    const std::string id = "block." + std::to_string(b) + ".";
    const WalkTensor A = tensor(idx("A", b), {x.H, x.n, x.n}, "H × n × n");
    const WalkTensor dA = tensor(idx("∇A", b), {x.H, x.n, x.n}, "H × n × n");
    const WalkTensor RA = tensor(idx("R_A", b), {x.H, x.n, x.n}, "H × n × n");

    WalkStep a;
    a.id = id + "attn";
    a.block = b;
    a.title = blk + "the attention " + idx("A", b);
    a.formula = marked(line, "attn");
    a.equation = idx("A", b) + " = softmax(Q_b·K_bᵀ/√d_h) per head (rows sum to 1), Q_b, K_b = LN1(x_b)·W_q, W_k; drawn: the mean over the " +
                 std::to_string(x.H) + " heads";
    a.reads = {tensor("LN1(x_" + std::to_string(b) + ")", {x.n, x.d}, "n × d"), tensor("W_qkv", {3 * x.d, x.d}, "3d × d")};
    a.writes = {A};
    x.draw(a, bi.attn, "E_h " + idx("A", b));
    w.steps.push_back(a);

    if (opt.weight == AttnWeight::grad) {
      WalkStep g;
      g.id = id + "grad";
      g.block = b;
      g.title = blk + "the gradient " + idx("∇A", b) + " = ∂y_t/∂" + idx("A", b);
      g.formula = marked(line, "grad");
      g.equation = "the backward pass of the class logit y_t (t = " + std::to_string(ex.target) +
                   "): how y_t changes with each attention weight; drawn: the mean over the heads";
      g.reads = {tensor("y_t", {1}, "1"), A};
      g.writes = {dA};
      x.draw(g, bi.grad, "E_h " + idx("∇A", b));
      w.steps.push_back(g);
    }

    WalkStep r;
    r.id = id + "relevance";
    r.block = b;
    r.title = blk + "the relevance " + idx("R_A", b) + " of the attention";
    r.formula = marked(line, "relevance");
    r.equation = "R from the seed down to block " + std::to_string(b) + " with Chefer et al.'s rules: the residual add " +
                 add_equation(rules.add, "x'", "f") + "; proj " + linear_equation(rules.linear) + "; then A·v: " +
                 product_equation(rules.product, "A", "v") + "; " + idx("R_A", b) +
                 " is taken right after that rule; drawn: the mean over the heads";
    r.reads = {tensor("R(x_" + std::to_string(b + 1) + ")", {x.n, x.d}, "n × d"), A,
               tensor(idx("v", b), {x.H, x.n, x.d / x.H}, "H × n × d_h")};
    r.writes = {RA};
    x.draw(r, bi.relevance, "E_h " + idx("R_A", b));
    const std::vector<std::string> layers = {pre + "add2",      pre + "mlp.fc2", pre + "mlp.act", pre + "mlp.fc1",
                                             pre + "norm2",     pre + "clone2",  pre + "add1",    pre + "attn.proj",
                                             pre + "attn.A_v"};
    r.layers = layers;
    r.layers.push_back(pre + "attn.softmax");
    const double at_out = report_row(rep, pre + "add2").relevance_out;
    const double at_a = report_row(rep, pre + "attn.softmax").relevance_out;
    r.relevance = at_a;
    r.sums = {{"Σ R at block " + std::to_string(b) + "'s output", at_out},
              {"the attention branch's share (add1)", report_row(rep, pre + "attn.proj").relevance_out},
              {"at the heads' outputs (after proj)", report_row(rep, pre + "attn.proj").relevance_in},
              {"at " + idx("A", b) + " (after the A·v rule)", at_a},
              {"at " + idx("v", b) + " (after the A·v rule)", report_row(rep, pre + "attn.A_v").relevance_in - at_a},
              {"Σ R at block " + std::to_string(b) + "'s input", rep.block_input_sums[size_t(b)]}};
    r.conservation = "The adds: " + add_conservation(rules.add) + " The linear layers: " +
                     linear_conservation(rules.linear) + " A·v: " + product_conservation(rules.product) +
                     " So Σ " + idx("R_A", b) + " is half of what reaches the attention product; relevance itself is "
                     "carried on to the block's input (its Σ above).";
    w.steps.push_back(r);

    WalkStep bar;
    bar.id = id + "bar";
    bar.block = b;
    bar.title = blk + idx("Ā", b) + " = E_h[" + weighted(opt.weight, b) + "]";
    bar.formula = marked(line, "bar");
    bar.equation = "per head the elementwise product, its positive part (·)⁺ = max(0, ·) taken before the mean over the " +
                   std::to_string(x.H) + " heads" +
                   (opt.weight == AttnWeight::none ? " (the paper's \"without gradients\" ablation)"
                    : opt.weight == AttnWeight::attn ? " (the ablation with A in place of ∇A)" : "");
    bar.reads = {RA};
    if (opt.weight == AttnWeight::grad) bar.reads.insert(bar.reads.begin(), dA);
    if (opt.weight == AttnWeight::attn) bar.reads.insert(bar.reads.begin(), A);
    bar.writes = {tensor(idx("Ā", b), {x.n, x.n}, "n × n")};
    x.draw(bar, detail::head_mean(bi.product_heads).cast<float>(), idx("Ā", b));
    w.steps.push_back(bar);

    WalkStep step;
    step.id = id + "step";
    step.block = b;
    step.title = blk + "I + " + idx("Ā", b);
    step.formula = marked(line, "step");
    step.equation = "I stands for the residual connection (each token keeps itself); no row normalisation";
    step.reads = {tensor(idx("Ā", b), {x.n, x.n}, "n × n")};
    step.writes = {tensor("I + " + idx("Ā", b), {x.n, x.n}, "n × n")};
    x.draw(step, bi.step, "I + " + idx("Ā", b));
    w.steps.push_back(step);

    WalkStep cb;
    cb.id = id + "accumulated";
    cb.block = b;
    cb.title = blk + (b == first ? idx("C", b) + " = I + " + idx("Ā", b) +
                                       (opt.block >= 0 ? " (one block only: the paper's ablation)" : " (the first block of the product)")
                                 : idx("C", b) + " = (I + " + idx("Ā", b) + ")·" + idx("C", b - 1));
    cb.formula = marked(line, "c_lhs", "c_rhs");
    cb.equation = "each later block multiplies on the left: " + idx("C", b) + "[i, j] = Σ_m (I + " + idx("Ā", b) +
                  ")[i, m]·" + (b == first ? "δ_mj" : idx("C", b - 1) + "[m, j]");
    cb.reads = {tensor("I + " + idx("Ā", b), {x.n, x.n}, "n × n")};
    if (b > first) cb.reads.push_back(tensor(idx("C", b - 1), {x.n, x.n}, "n × n"));
    cb.writes = {tensor(idx("C", b), {x.n, x.n}, "n × n")};
    x.draw(cb, bi.accumulated, idx("C", b));
    w.steps.push_back(cb);
  }
  w.steps.push_back(map_step(x, general, ex, ex.blocks[size_t(last)].accumulated, last));
}

// ---- attnlrp (Achtibat et al. 2024) ----------------------------------------------------------------

Line attnlrp_line(const Ctx& x, int b) {
  const Config& c = x.c;
  Line l = {{"input", "x → E_0"}, {"", " → … → "}, {"logit", "y_t"}, {"", ";  "}, {"seed", "R = y_t·onehot(t)"},
            {"", " → "}, {"head", "head"}};
  if (c.final_norm) l.insert(l.end(), {{"", " → "}, {"norm", "LN_f"}});
  l.insert(l.end(), {{"", b < 0 ? " → blocks " + std::to_string(x.L - 1) + "…0: [" : " → block " + std::to_string(b) + ": ["},
                     {"add2", "add2"}, {"", " → "}, {"ff", "fc2, act, fc1"}, {"", " → "}, {"ln2", "LN2"}, {"", " → "},
                     {"residual2", "+x'"}, {"", " → "}, {"add1", "add1"}, {"", " → "}, {"attention", "proj, A·v"},
                     {"", " → "}, {"scores", "softmax, q·kᵀ, W_qkv"}, {"", " → "}, {"ln1", "LN1"}, {"", " → "},
                     {"residual1", "+" + at("x", b)}, {"", "]"}});
  if (c.pre_norm) l.insert(l.end(), {{"", " → "}, {"prenorm", "LN_pre"}});
  l.insert(l.end(), {{"", " → "}, {"map", "map = Σ_d R(E_0)[patches]"}, {"", " → "}, {"pixels", "Σ_c R(x)"}});
  return l;
}

void attnlrp_walk(MethodWalk& w, const Ctx& x, ExplainState& st, const Explanation& ex) {
  const Config& c = x.c;
  const LrpRules& rules = kAttnLrpRules;
  const RelevancePass& pass = st.attnlrp;
  const ConservationReport& rep = ex.conservation;
  w.seed = rep.seed_sum;
  const Line general = attnlrp_line(x, -1);
  w.steps.push_back(input_step(x, general));
  head_steps(w.steps, x, general, pass, rules, ex.target);
  auto t_nd = [&](const std::string& name) { return tensor(name, {x.n, x.d}, "n × d"); };
  for (int b = x.L - 1; b >= 0; --b) {
    const Line line = attnlrp_line(x, b);
    const BlockTokenRelevance& tok = pass.block_tokens[size_t(b)];
    const std::string B = std::to_string(b), Bn = std::to_string(b + 1);
    const std::string blk = "Block " + B + ": ";
    const std::string pre = "blocks." + B + ".";
    auto step = [&](const std::string& key, const std::string& title) {
      WalkStep s;
      s.id = "block." + B + "." + key;
      s.block = b;
      s.title = blk + title;
      s.formula = marked(line, key);
      return s;
    };
    auto tokens = [&](WalkStep& s, const VecD& v, const std::string& where) {
      s.values = "Σ_d R per token " + where;
      s.row = v.cast<float>();
    };
    const std::string ls2 = c.layer_scale ? "γ2 ⊙ f" : "f", ls1 = c.layer_scale ? "γ1 ⊙ o" : "o";

    WalkStep add2 = step("add2", "the second residual splits R(x_" + Bn + ") between x' and the FF");
    add2.equation = "x_" + Bn + " = x' + " + ls2 + ": " + add_equation(rules.add, "x'", "f") +
                    (c.layer_scale ? "; γ2 passes R_f on unchanged" : "");
    add2.reads = {t_nd("R(x_" + Bn + ")"), t_nd("x'"), t_nd(ls2)};
    add2.writes = {t_nd("R_res(x')"), t_nd("R(f)")};
    tokens(add2, tok.ff_branch, "of the FF branch's share R(f)");
    add2.sums = {{"to the residual x'", vec_sum(tok.residual2)}, {"to the FF branch f", vec_sum(tok.ff_branch)}};
    relevance_of(add2, rep, {pre + "add2"});
    add2.conservation = add_conservation(rules.add);
    w.steps.push_back(add2);

    WalkStep ff = step("ff", "through the FF: fc2, the activation, fc1");
    ff.equation = "fc2 and fc1: " + linear_equation(rules.linear) + "; the activation passes R unchanged";
    ff.reads = {t_nd("R(f)"), tensor("W_fc2", {x.d, c.mlp_dim}, "d × mlp"), tensor("W_fc1", {c.mlp_dim, x.d}, "mlp × d")};
    ff.writes = {t_nd("R(LN2(x'))")};
    tokens(ff, tok.ff_in, "at LN2's output");
    ff.sums = {{"after fc2", report_row(rep, pre + "mlp.fc2").relevance_in},
               {"after the activation", report_row(rep, pre + "mlp.act").relevance_in}};
    relevance_of(ff, rep, {pre + "mlp.fc2", pre + "mlp.act", pre + "mlp.fc1"});
    ff.conservation = "fc2 and fc1: " + linear_conservation(rules.linear) + " The activation: conserved (identity).";
    w.steps.push_back(ff);

    WalkStep ln2 = step("ln2", "through LayerNorm 2");
    ln2.equation = layernorm_equation(rules.layernorm);
    ln2.reads = {t_nd("R(LN2(x'))"), t_nd("x'")};
    ln2.writes = {t_nd("R_ff(x')")};
    tokens(ln2, tok.ff_path, "at x' through the FF");
    relevance_of(ln2, rep, {pre + "norm2"});
    ln2.conservation = layernorm_conservation(rules.layernorm);
    w.steps.push_back(ln2);

    WalkStep r2 = step("residual2", "x' collects the residual's and the FF's shares");
    r2.equation = "R(x') = R_res(x') + R_ff(x'): x' feeds both the residual and LN2, so its two relevances add";
    r2.reads = {t_nd("R_res(x')"), t_nd("R_ff(x')")};
    r2.writes = {t_nd("R(x')")};
    tokens(r2, tok.mid, "at x'");
    r2.sums = {{"from the residual", vec_sum(tok.residual2)}, {"through the FF", vec_sum(tok.ff_path)}};
    relevance_of(r2, rep, {pre + "clone2"});
    r2.conservation = "Exact: the two shares add.";
    w.steps.push_back(r2);

    WalkStep add1 = step("add1", "the first residual splits R(x') between x_" + B + " and the attention");
    add1.equation = "x' = x_" + B + " + " + ls1 + ": " + add_equation(rules.add, "x", "o") +
                    (c.layer_scale ? "; γ1 passes R_o on unchanged" : "");
    add1.reads = {t_nd("R(x')"), t_nd("x_" + B), t_nd(ls1)};
    add1.writes = {t_nd("R_res(x_" + B + ")"), t_nd("R(o)")};
    tokens(add1, tok.attn_branch, "of the attention branch's share R(o)");
    add1.sums = {{"to the residual x_" + B, vec_sum(tok.residual1)}, {"to the attention branch o", vec_sum(tok.attn_branch)}};
    relevance_of(add1, rep, {pre + "add1"});
    add1.conservation = add_conservation(rules.add);
    w.steps.push_back(add1);

    WalkStep av = step("attention", "through proj and the product A·v: the relevance R_A_" + B);
    av.equation = "proj: " + linear_equation(rules.linear) + "; A·v per head: " + product_equation(rules.product, "A", "v") +
                  "; drawn: E_h " + idx("R_A", b);
    av.reads = {t_nd("R(o)"), tensor(idx("A", b), {x.H, x.n, x.n}, "H × n × n"), tensor(idx("v", b), {x.H, x.n, x.d / x.H}, "H × n × d_h")};
    av.writes = {tensor(idx("R_A", b), {x.H, x.n, x.n}, "H × n × n"), tensor("R(v)", {x.H, x.n, x.d / x.H}, "H × n × d_h")};
    x.draw(av, ex.blocks[size_t(b)].relevance, "E_h " + idx("R_A", b));
    const double ra = report_row(rep, pre + "attn.softmax").relevance_out;
    av.sums = {{"after proj (at the heads' outputs)", report_row(rep, pre + "attn.proj").relevance_in},
               {"at " + idx("A", b), ra},
               {"at " + idx("v", b), report_row(rep, pre + "attn.A_v").relevance_in - ra}};
    relevance_of(av, rep, {pre + "attn.proj", pre + "attn.A_v"});
    av.conservation = "proj: " + linear_conservation(rules.linear) + " A·v: " + product_conservation(rules.product);
    w.steps.push_back(av);

    WalkStep sc = step("scores", "through the softmax, q·kᵀ and W_qkv");
    sc.equation = softmax_equation(rules.softmax) + "; q·kᵀ (without the 1/√d_h factor, which passes R unchanged): " +
                  product_equation(rules.product, "q", "kᵀ") + "; W_qkv: " + linear_equation(rules.linear);
    sc.reads = {tensor(idx("R_A", b), {x.H, x.n, x.n}, "H × n × n"), tensor("R(v)", {x.H, x.n, x.d / x.H}, "H × n × d_h"),
                tensor("W_qkv", {3 * x.d, x.d}, "3d × d")};
    sc.writes = {t_nd("R(LN1(x_" + B + "))")};
    tokens(sc, tok.attn_in, "at LN1's output");
    sc.sums = {{"after the softmax rule (at the scores)", report_row(rep, pre + "attn.softmax").relevance_in},
               {"after q·kᵀ (at q and k)", report_row(rep, pre + "attn.q_kT").relevance_in},
               {"at q", vec_sum(tok.q)}, {"at k", vec_sum(tok.k)}, {"at v", vec_sum(tok.v)}};
    relevance_of(sc, rep, {pre + "attn.softmax", pre + "attn.q_kT", pre + "attn.qkv"});
    sc.conservation = "softmax: " + softmax_conservation(rules.softmax) + " q·kᵀ: " + product_conservation(rules.product) +
                      " W_qkv: " + linear_conservation(rules.linear);
    w.steps.push_back(sc);

    WalkStep ln1 = step("ln1", "through LayerNorm 1");
    ln1.equation = layernorm_equation(rules.layernorm);
    ln1.reads = {t_nd("R(LN1(x_" + B + "))"), t_nd("x_" + B)};
    ln1.writes = {t_nd("R_attn(x_" + B + ")")};
    tokens(ln1, tok.attn_path, "at x_" + B + " through the attention");
    relevance_of(ln1, rep, {pre + "norm1"});
    ln1.conservation = layernorm_conservation(rules.layernorm);
    w.steps.push_back(ln1);

    WalkStep r1 = step("residual1", "x_" + B + " collects the residual's and the attention's shares");
    r1.equation = "R(x_" + B + ") = R_res(x_" + B + ") + R_attn(x_" + B + "): x_" + B +
                  " feeds both the residual and LN1, so its two relevances add";
    r1.reads = {t_nd("R_res(x_" + B + ")"), t_nd("R_attn(x_" + B + ")")};
    r1.writes = {t_nd("R(x_" + B + ")")};
    tokens(r1, tok.input, "at the block's input x_" + B);
    r1.sums = {{"from the residual", vec_sum(tok.residual1)}, {"through the attention", vec_sum(tok.attn_path)}};
    relevance_of(r1, rep, {pre + "clone1"});
    r1.conservation = "Exact: the two shares add.";
    w.steps.push_back(r1);
  }

  if (c.pre_norm) {
    WalkStep pn;
    pn.id = "prenorm";
    pn.title = "Through the LayerNorm before block 0";
    pn.formula = marked(general, "prenorm");
    pn.equation = layernorm_equation(rules.layernorm);
    pn.reads = {t_nd("R(x_0)"), t_nd("E_0")};
    pn.writes = {t_nd("R(E_0)")};
    pn.values = "Σ_d R per token at E_0";
    pn.row = pass.e0_tokens.cast<float>();
    relevance_of(pn, rep, {"norm_pre"});
    pn.conservation = layernorm_conservation(rules.layernorm);
    w.steps.push_back(pn);
  }

  WalkStep map;
  map.id = "map";
  map.title = "The token map: Σ_d R at E_0 over the patches";
  map.formula = marked(general, "map");
  map.equation = "map[r, c] = Σ_d R(E_0)[k + r·gw + c, d]: each patch token's relevance at the input of block 0 " +
                 std::string("(position embedding included), the k = ") + std::to_string(x.k) +
                 " prefix tokens dropped, on the " + std::to_string(c.grid_h()) + " × " + std::to_string(c.grid_w()) + " grid";
  map.reads = {t_nd("R(E_0)")};
  map.writes = {tensor("map", {c.grid_h(), c.grid_w()}, "H/p × W/p")};
  map.values = "the method's token map (raw); the row: Σ_d R per token at E_0, the prefix tokens included";
  map.map = ex.token_map;
  map.row = pass.e0_tokens.cast<float>();
  map.relevance = rep.tokens_sum;
  const double on_patches = pass.e0_tokens.tail(x.P).sum();
  map.sums = {{"Σ R at E_0 (every token)", rep.tokens_sum}, {"on the patch tokens (the map)", on_patches},
              {"on the prefix tokens (dropped from the map)", rep.tokens_sum - on_patches}};
  map.conservation = "The map keeps the patch tokens' relevance; the prefix tokens' share is left out of it.";
  w.steps.push_back(map);

  WalkStep px;
  px.id = "pixels";
  px.title = "To the pixels: the position embedding, the patch embedding";
  px.formula = marked(general, "pixels");
  px.equation = "E_0 = tokens + pos_embed: " + add_equation(rules.add, "e", "pos") +
                "; the prefix tokens' shares are dropped; the patch embedding: " + linear_equation(rules.linear) +
                "; the pixel map is Σ_c R(x)";
  px.reads = {t_nd("R(E_0)"), tensor("x", {c.channels, c.image_h, c.image_w}, "C × H × W"),
              tensor("W_E", {x.d, c.channels * c.patch * c.patch}, "d × C·p·p")};
  px.writes = {tensor("R(x)", {c.channels, c.image_h, c.image_w}, "C × H × W"), tensor("pixel map", {c.image_h, c.image_w}, "H × W")};
  px.values = "the method's pixel map Σ_c R(x) (raw)";
  px.map = ex.pixel_map;
  px.sums = {{"after the position-embedding add (the tokens' and pos_embed's shares)", report_row(rep, "pos_embed.add").relevance_in},
             {"after dropping the prefix tokens' shares", report_row(rep, "drop_cls").relevance_in}};
  relevance_of(px, rep, {"pos_embed.add", "drop_cls", "patch_embed"});
  px.conservation = "The add: " + add_conservation(rules.add) + " pos_embed's share and the prefix tokens' are dropped; "
                    "the patch embedding: " + linear_conservation(rules.linear);
  w.steps.push_back(px);
}

}  // namespace

const std::vector<std::string>& walk_methods() {
  static const std::vector<std::string> names = {"transformer-attribution", "attnlrp", "rollout"};
  return names;
}

bool has_walk(const std::string& method) {
  for (const std::string& n : walk_methods())
    if (n == method) return true;
  return false;
}

MethodWalk method_walk(const Model& m, ExplainState& st, const std::string& method, const MethodOptions& opt,
                       const WalkOptions& walk) {
  const Config& c = m.config;
  if (!has_walk(method)) {
    std::string names;
    for (const std::string& n : walk_methods()) names += (names.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::bad_argument, "method '" + method + "' has no guided walk; the walks are: " + names);
  }
  if (walk.query < -1 || walk.query >= c.tokens())
    throw Error(ErrorCode::bad_argument, "walk query " + std::to_string(walk.query) + " is not a token: the model has " +
                                             std::to_string(c.tokens()) + " tokens (0…" + std::to_string(c.tokens() - 1) +
                                             "), or −1 for the method's query");
  MethodOptions with = opt;
  with.want_intermediates = true;
  const Explanation ex = explain(m, st, method, with);
  const MethodOptions resolved = resolve_defaults(*find_method(method), with);
  const Ctx x(m, walk);
  MethodWalk w;
  w.method = method;
  w.target = ex.target;
  w.query = walk.query;
  w.query_text = walk.query >= 0 ? "token " + std::to_string(walk.query) + "'s row"
                                 : "the method's query q (" + std::string(pooling_name(c.pool)) + " pooling" +
                                       (c.dist_token ? ", distilled: ½(CLS + DIST)" : "") + ")";
  if (method == "rollout") rollout_walk(w, x, st, resolved, ex);
  else if (method == "transformer-attribution") ta_walk(w, x, st, resolved, ex);
  else attnlrp_walk(w, x, st, ex);
  return w;
}

std::string walk_json(const MethodWalk& w) {
  using json = nlohmann::json;
  auto num = [](double v) { return std::isnan(v) ? json() : json(v); };
  auto floats = [](const float* p, Eigen::Index size) { return std::vector<float>(p, p + size); };
  json steps = json::array();
  for (const WalkStep& s : w.steps) {
    auto tensors = [](const std::vector<WalkTensor>& ts) {
      json a = json::array();
      for (const WalkTensor& t : ts) a.push_back({{"name", t.name}, {"shape", t.shape}, {"dims", t.dims}});
      return a;
    };
    json sums = json::array();
    for (const WalkSum& p : s.sums) sums.push_back({{"label", p.label}, {"value", num(p.value)}});
    json o = {{"id", s.id},
              {"title", s.title},
              {"block", s.block},
              {"formula", {{"before", s.formula.before}, {"mark", s.formula.mark}, {"after", s.formula.after}}},
              {"equation", s.equation},
              {"reads", tensors(s.reads)},
              {"writes", tensors(s.writes)},
              {"values", s.values},
              {"row", floats(s.row.data(), s.row.size())},
              {"relevance", num(s.relevance)},
              {"sums", sums},
              {"conservation", s.conservation},
              {"layers", s.layers}};
    if (s.matrix.size()) {
      o["matrix"] = floats(s.matrix.data(), s.matrix.size());
      o["matrix_shape"] = {s.matrix.rows(), s.matrix.cols()};
    }
    if (s.map.size()) {
      o["map"] = floats(s.map.data(), s.map.size());
      o["map_shape"] = {s.map.rows(), s.map.cols()};
    }
    steps.push_back(std::move(o));
  }
  const json out = {{"method", w.method}, {"target", w.target}, {"query", w.query}, {"query_text", w.query_text},
                    {"seed", num(w.seed)}, {"steps", steps}};
  return out.dump(1);
}

}  // namespace vitlens
