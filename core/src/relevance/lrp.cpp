// lrp.cpp — the LRP mechanism: the two rule sets, the double-precision forward pass they read,
// and the one propagation routine that applies a rule set layer by layer (see lrp.h).
//
// The order of the layers and the names in the conservation report follow the independent
// reference (tests/reference/methods_ref.py, relevance_pass), so that the report can be compared
// line by line.
#include "vitlens/relevance/lrp.h"

#include <cassert>
#include <cmath>

#include "vitlens/layers/layers.h"
#include "vitlens/model/vit.h"

namespace vitlens {

const LrpRules kCheferRules = {"chefer",          SeedRule::one_hot,    LinearRule::alpha1beta0,
                               AddRule::normalised, ProductRule::halved, SoftmaxRule::identity,
                               LayerNormRule::identity, PatchRule::z_b};

const LrpRules kAttnLrpRules = {"attnlrp",        SeedRule::logit,      LinearRule::epsilon,
                                AddRule::epsilon, ProductRule::epsilon_half, SoftmaxRule::attnlrp,
                                LayerNormRule::epsilon_centring, PatchRule::epsilon};

LrpRules chefer_rules(LinearRule linear, AddRule add) {
  LrpRules r = kCheferRules;
  r.linear = linear;
  r.add = add;
  return r;
}

bool same_rules(const LrpRules& a, const LrpRules& b) {
  return a.seed == b.seed && a.linear == b.linear && a.add == b.add && a.product == b.product &&
         a.softmax == b.softmax && a.layernorm == b.layernorm && a.patch == b.patch;
}

namespace {

// A matrix (vector) formed for its first r rows only, extended to n rows with zeros.
void zero_rows_below(MatD& x, Eigen::Index n) {
  const Eigen::Index r = x.rows();
  x.conservativeResize(n, x.cols());
  x.bottomRows(n - r).setZero();
}

void zero_rows_below(VecD& x, Eigen::Index n) {
  const Eigen::Index r = x.size();
  x.conservativeResize(n);
  x.tail(n - r).setZero();
}

// The last block and the final norm formed for the head's rows (BlockOptionsT::rows), as full
// n-row matrices whose other rows are zero: the relevance rules then run unchanged. No relevance
// reaches those rows (it enters at the pooled tokens), and every rule gives a zero row zero
// relevance with no 0/0 (safe_divide(0, 0) = 0, 0/stabilise(0) = 0).
void zero_rows_below(BlockTraceD& b, TraceD& t, Eigen::Index n) {
  for (MatD* x : {&b.ctx, &b.attn_out, &b.x_mid, &b.ln2, &b.fc1, &b.act, &b.mlp_out, &t.x_final, &t.ln_f})
    zero_rows_below(*x, n);
  for (MatD& a : b.attn) zero_rows_below(a, n);
  for (VecD* v : {&b.ln2_mean, &b.ln2_rstd, &t.lnf_mean, &t.lnf_rstd}) zero_rows_below(*v, n);
  b.x_rows.resize(0, b.x.cols());
}

}  // namespace

void lrp_forward(TraceD& t, const Model& m, const Image& x, const std::vector<float>& head_mask,
                 bool all_rows) {
  const Config& c = m.config;
  const Params& p = m.params;
  assert(head_mask.empty() || head_mask.size() == size_t(c.depth) * size_t(c.heads));
  const double eps = double(c.ln_eps);
  Mat patches;  // (P, C·p·p) float: the image values, exact in double
  im2col(patches, x, c.patch);
  t.patches = patches.cast<double>();
  linear_forward(t.embed, t.patches, p.patch_w, p.patch_b);
  tokens_forward<double>(t.tokens, &t.tokens_nopos, t.embed, p, c);
  t.pos = p.pos_embed.cast<double>();

  t.blocks.resize(size_t(c.depth));
  if (c.pre_norm)
    layernorm_forward(t.blocks[0].x, t.pre_mean, t.pre_rstd, t.tokens, p.pre_norm_w, p.pre_norm_b, eps);
  else
    t.blocks[0].x = t.tokens;
  BlockScratchD bs;
  const int rows = all_rows ? c.tokens() : head_rows(c);  // of the last block, from the attention on
  for (int b = 0; b < c.depth; ++b) {
    MatD& out = (b + 1 < c.depth) ? t.blocks[size_t(b) + 1].x : t.x_final;
    BlockOptionsT<double> o;
    if (!head_mask.empty()) o.head_mask = head_mask.data() + size_t(b) * size_t(c.heads);
    if (b == c.depth - 1) o.rows = rows;
    block_forward(out, t.blocks[size_t(b)], bs, p.blocks[size_t(b)], c, 1, BlockRecord::relevance, o);
  }
  if (c.final_norm)
    layernorm_forward(t.ln_f, t.lnf_mean, t.lnf_rstd, t.x_final, p.norm_w, p.norm_b, eps);
  else
    t.ln_f = t.x_final;
  if (rows < c.tokens()) zero_rows_below(t.blocks.back(), t, c.tokens());
  pool_forward(t.pooled, t.ln_f, c);
  if (c.fc_norm)
    layernorm_forward(t.head_x, t.fc_mean, t.fc_rstd, t.pooled, p.fc_norm_w, p.fc_norm_b, eps);
  else
    t.head_x = t.pooled;
  const HeadLinear head(p, c);
  t.logits = head.w().cast<double>() * Eigen::Map<const VecD>(t.head_x.data(), t.head_x.size()) +
             head.b().cast<double>();
}

void lrp_trace_from_float(TraceD& t, const Model& m, const Trace& tr) {
  const Config& c = m.config;
  assert(tr.blocks.size() == size_t(c.depth) && !tr.head_rows_only);
  t.patches = tr.patches.cast<double>();
  t.embed = tr.embed.cast<double>();
  tokens_forward<double>(t.tokens, &t.tokens_nopos, t.embed, m.params, c);  // the float adds, in double
  t.tokens = tr.tokens.cast<double>();                                      // E0 as the pass formed it
  t.pos = m.params.pos_embed.cast<double>();
  t.pre_mean = tr.pre_mean.cast<double>();
  t.pre_rstd = tr.pre_rstd.cast<double>();
  t.blocks.resize(size_t(c.depth));
  for (int b = 0; b < c.depth; ++b) {
    const BlockTrace& f = tr.blocks[size_t(b)];
    BlockTraceD& d = t.blocks[size_t(b)];
    d.x = f.x.cast<double>();
    d.ln1 = f.ln1.cast<double>();
    d.ln1_mean = f.ln1_mean.cast<double>();
    d.ln1_rstd = f.ln1_rstd.cast<double>();
    d.qkv = f.qkv.cast<double>();
    d.attn.resize(f.attn.size());
    for (size_t h = 0; h < f.attn.size(); ++h) d.attn[h] = f.attn[h].cast<double>();
    d.ctx = f.ctx.cast<double>();
    d.attn_out = f.attn_out.cast<double>();
    d.x_mid = f.x_mid.cast<double>();
    d.ln2 = f.ln2.cast<double>();
    d.ln2_mean = f.ln2_mean.cast<double>();
    d.ln2_rstd = f.ln2_rstd.cast<double>();
    d.fc1 = f.fc1.cast<double>();
    d.act = f.act.cast<double>();
    d.mlp_out = f.mlp_out.cast<double>();
  }
  t.x_final = tr.x_final.cast<double>();
  t.ln_f = tr.ln_f.cast<double>();
  t.lnf_mean = tr.lnf_mean.cast<double>();
  t.lnf_rstd = tr.lnf_rstd.cast<double>();
  t.pooled = tr.pooled.cast<double>();
  t.head_x = tr.head_x.cast<double>();
  t.fc_mean = tr.fc_mean.cast<double>();
  t.fc_rstd = tr.fc_rstd.cast<double>();
  t.logits = tr.logits.cast<double>();
}

namespace {

void log_layer(ConservationReport& rep, const std::string& layer, double out, double in) {
  rep.layers.push_back({layer, out, in});
}

// The element loops of the per-block bookkeeping (the sums the conservation report and the token
// views record, the residual adds) are functions of their own, never inlined: V8 optimises a
// wasm function once it has run long enough in baseline code, counting the loops inlined into it,
// and with them inlined the 25 KB propagate_block was the page's longest optimising compile at
// start-up (137 ms of a background core on a 2-core machine, while the first explanation ran), for
// bookkeeping that takes ~1 % of an explanation. Out of line, only these small loops are optimised.
[[gnu::noinline]] double total(const MatD& r) { return r.sum(); }

// Σ over the columns of r per row: (n, ·) → (n), a token's share of the relevance.
[[gnu::noinline]] VecD token_sums(const MatD& r) { return r.rowwise().sum(); }

// Σ over columns first … first + count − 1 of r per row.
[[gnu::noinline]] VecD column_sums(const MatD& r, Eigen::Index first, Eigen::Index count) {
  return r.middleCols(first, count).rowwise().sum();
}

// a += b
[[gnu::noinline]] void add_into(MatD& a, const MatD& b) { a += b; }

// out = a + b
[[gnu::noinline]] void sum_of(MatD& out, const MatD& a, const MatD& b) { out = a + b; }

// From the seed at the logits to the relevance at the last block's output: the head (one linear
// layer on the pool parts), fc_norm, the pooling, the final norm.
void propagate_head(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int n = c.tokens(), d = c.dim, P = c.num_patches();
  ConservationReport& rep = pass.report;
  LrpScratch& s = pass.scratch;
  MatD seed = MatD::Zero(1, c.classes);  // (1, classes)
  seed(0, pass.target) = rules.seed == SeedRule::one_hot ? 1.0 : t.logits[pass.target];
  rep.seed_sum = seed.sum();
  const Eigen::Index k = t.head_x.rows();
  const MatD head_in = Eigen::Map<const MatD>(t.head_x.data(), 1, k * d);  // (1, k·d)
  const MatD logits = t.logits.transpose();                                 // (1, classes)
  const HeadLinear head(p, c);
  MatD r_head;                                                              // (1, k·d)
  linear_relevance(r_head, seed, head_in, logits, head.w(), head.b(), rules.linear, s);
  log_layer(rep, "head", seed.sum(), r_head.sum());
  MatD r_pooled = Eigen::Map<const MatD>(r_head.data(), k, d);              // (k, d)
  if (c.fc_norm) {
    MatD r_in;
    layernorm_relevance(r_in, r_pooled, t.pooled, t.head_x, t.fc_rstd, p.fc_norm_w, rules.layernorm);
    log_layer(rep, "fc_norm", r_pooled.sum(), r_in.sum());
    r_pooled = std::move(r_in);
  }
  MatD r_lnf = MatD::Zero(n, d);  // (n, d)
  const std::vector<PoolPart> parts = pool_parts(c);
  for (size_t j = 0; j < parts.size(); ++j) {
    if (parts[j].token >= 0) {  // a token part: all its relevance to that token
      r_lnf.row(parts[j].token) += r_pooled.row(Eigen::Index(j));
      continue;
    }
    // The mean of the patch tokens: per feature a sum of z_t/P with a signed denominator,
    // R_t = (z_t/P)·R/Z, Z = Σ_t z_t/P — safe_divide for Chefer's rules (his code's rule for
    // average pooling; α1β0 would keep only the positive z and lose every feature that is
    // negative on all patches), the ε stabiliser for AttnLRP.
    for (Eigen::Index f = 0; f < d; ++f) {
      const double z = t.pooled(Eigen::Index(j), f), r = r_pooled(Eigen::Index(j), f);
      const double sf = rules.linear == LinearRule::epsilon ? r / stabilise(z) : safe_divide(r, z);
      r_lnf.col(f).tail(P) += t.ln_f.col(f).tail(P) * (sf / double(P));
    }
  }
  log_layer(rep, "pool", r_pooled.sum(), r_lnf.sum());
  pass.pool_tokens = token_sums(r_lnf);
  if (c.final_norm) {
    layernorm_relevance(pass.r, r_lnf, t.x_final, t.ln_f, t.lnf_rstd, p.norm_w, rules.layernorm);
    log_layer(rep, "norm", r_lnf.sum(), pass.r.sum());
  } else {
    pass.r = std::move(r_lnf);
  }
  pass.output_tokens = token_sums(pass.r);
}

// γ ⊙ branch per row (formed in buf), or the branch itself, not copied, without LayerScale.
[[gnu::noinline]] const MatD& scaled(MatD& buf, const MatD& branch, const Vec& gamma) {
  if (gamma.size() == 0) return branch;
  buf = (branch.array().rowwise() * gamma.transpose().array().cast<double>()).matrix();
  return buf;
}

std::string layer_prefix(int b) { return "blocks." + std::to_string(b) + "."; }

// Block b's upper half: pass.r at the block's output → R_A of its heads, pass.r_qkv (at q, k,
// v) and pass.r_res1 (add1's share to the residual x_b).
void propagate_block_upper(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules,
                           int b) {
  const BlockTraceD& bt = t.blocks[size_t(b)];
  const BlockParams& w = m.params.blocks[size_t(b)];
  ConservationReport& rep = pass.report;
  LrpScratch& s = pass.scratch;
  const std::string pre = layer_prefix(b);
  BlockTokenRelevance& tok = pass.block_tokens[size_t(b)];
  const Eigen::Index d = pass.r.cols();
  tok.output = token_sums(pass.r);
  MatD r_res, r_branch, r_tmp, r_tmp2;  // (n, d) or (n, mlp)
  MatD branch_scaled;                   // (n, d) γ ⊙ branch, LayerScale only
  // Each relevance is summed once, when it is formed: the report's layers share their ends.
  const double sum_out = total(pass.r);
  // x_{b+1} = x' + γ2 ⊙ f; LayerScale passes the branch's relevance to f unchanged
  add_relevance(r_res, r_branch, pass.r, bt.x_mid, scaled(branch_scaled, bt.mlp_out, w.ls2), rules.add);
  const double sum_res2 = total(r_res), sum_ff = total(r_branch);
  log_layer(rep, pre + "add2", sum_out, sum_res2 + sum_ff);
  tok.residual2 = token_sums(r_res);
  tok.ff_branch = token_sums(r_branch);
  linear_relevance(r_tmp, r_branch, bt.act, bt.mlp_out, w.fc2_w, w.fc2_b, rules.linear, s, &w.fc2_packs);
  const double sum_act = total(r_tmp);
  log_layer(rep, pre + "mlp.fc2", sum_ff, sum_act);
  log_layer(rep, pre + "mlp.act", sum_act, sum_act);  // GELU: identity
  linear_relevance(r_tmp2, r_tmp, bt.ln2, bt.fc1, w.fc1_w, w.fc1_b, rules.linear, s, &w.fc1_packs);
  const double sum_ln2 = total(r_tmp2);
  log_layer(rep, pre + "mlp.fc1", sum_act, sum_ln2);
  tok.ff_in = token_sums(r_tmp2);
  layernorm_relevance(r_tmp, r_tmp2, bt.x_mid, bt.ln2, bt.ln2_rstd, w.norm2_w, rules.layernorm);
  log_layer(rep, pre + "norm2", sum_ln2, total(r_tmp));
  tok.ff_path = token_sums(r_tmp);
  add_into(r_res, r_tmp);  // x' feeds both the residual and LN2: the branch relevances add
  const double sum_mid = total(r_res);
  log_layer(rep, pre + "clone2", sum_mid, sum_mid);
  tok.mid = token_sums(r_res);
  // x' = x_b + γ1 ⊙ o
  add_relevance(pass.r_res1, r_branch, r_res, bt.x, scaled(branch_scaled, bt.attn_out, w.ls1), rules.add);
  const double sum_attn_branch = total(r_branch);
  log_layer(rep, pre + "add1", sum_mid, total(pass.r_res1) + sum_attn_branch);
  tok.residual1 = token_sums(pass.r_res1);
  tok.attn_branch = token_sums(r_branch);
  MatD& r_ctx = r_tmp;  // (n, d)
  linear_relevance(r_ctx, r_branch, bt.ctx, bt.attn_out, w.proj_w, w.proj_b, rules.linear, s, &w.proj_packs);
  const double sum_ctx = total(r_ctx);
  log_layer(rep, pre + "attn.proj", sum_attn_branch, sum_ctx);
  tok.ctx = token_sums(r_ctx);
  const AttentionRelevanceSums a =
      attention_relevance(pass.r_qkv, pass.r_attn[size_t(b)], r_ctx, bt.qkv, bt.attn, bt.ctx,
                          int(bt.attn.size()), rules.product, rules.softmax, s);
  log_layer(rep, pre + "attn.A_v", sum_ctx, a.attn + a.v);
  log_layer(rep, pre + "attn.softmax", a.attn, a.scores);
  log_layer(rep, pre + "attn.q_kT", a.scores, a.q + a.k);
  tok.q = column_sums(pass.r_qkv, 0, d);  // r_qkv = [R_q | R_k | R_v], heads inside each
  tok.k = column_sums(pass.r_qkv, d, d);
  tok.v = column_sums(pass.r_qkv, 2 * d, d);
}

// Block b's lower half: pass.r_qkv and pass.r_res1 → pass.r at the block's input, through the qkv
// layer, LN1 and the clone of x_b.
void propagate_block_lower(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules,
                           int b) {
  const BlockTraceD& bt = t.blocks[size_t(b)];
  const BlockParams& w = m.params.blocks[size_t(b)];
  ConservationReport& rep = pass.report;
  const std::string pre = layer_prefix(b);
  BlockTokenRelevance& tok = pass.block_tokens[size_t(b)];
  MatD r_ln1, r_path;  // (n, d)
  linear_relevance(r_ln1, pass.r_qkv, bt.ln1, bt.qkv, w.qkv_w, w.qkv_b, rules.linear, pass.scratch, &w.qkv_packs);
  const double sum_ln1 = total(r_ln1);
  log_layer(rep, pre + "attn.qkv", total(pass.r_qkv), sum_ln1);
  tok.attn_in = token_sums(r_ln1);
  layernorm_relevance(r_path, r_ln1, bt.x, bt.ln1, bt.ln1_rstd, w.norm1_w, rules.layernorm);
  log_layer(rep, pre + "norm1", sum_ln1, total(r_path));
  tok.attn_path = token_sums(r_path);
  sum_of(pass.r, pass.r_res1, r_path);  // x_b feeds both the residual and LN1
  const double sum_in = total(pass.r);
  log_layer(rep, pre + "clone1", sum_in, sum_in);
  tok.input = token_sums(pass.r);
  rep.block_input_sums[size_t(b)] = sum_in;
}

// From block 0's input through norm_pre, the position-embedding add (over the rows that have a
// pos_embed row) and the patch embedding to the pixels; the prefix tokens' shares are dropped.
void propagate_embedding(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int P = c.num_patches(), kpos = c.pos_prefix();
  ConservationReport& rep = pass.report;
  MatD& r_e0 = pass.r_tokens;  // (n, d) at E0
  r_e0 = pass.r;
  if (c.pre_norm) {
    layernorm_relevance(r_e0, pass.r, t.tokens, t.blocks[0].x, t.pre_rstd, p.pre_norm_w, rules.layernorm);
    log_layer(rep, "norm_pre", pass.r.sum(), r_e0.sum());
  }
  pass.e0_tokens = token_sums(r_e0);
  MatD r_added(c.pos_rows(), c.dim);  // the rows of E0 the add produced, in pos_embed's order
  r_added.topRows(kpos) = r_e0.topRows(kpos);
  r_added.bottomRows(P) = r_e0.bottomRows(P);
  MatD r_tok, r_pos;  // (pos_rows, d)
  add_relevance(r_tok, r_pos, r_added, t.tokens_nopos, t.pos, rules.add);
  log_layer(rep, "pos_embed.add", r_e0.sum(), r_tok.sum() + r_pos.sum() + (r_e0.sum() - r_added.sum()));
  const MatD r_embed = r_tok.bottomRows(P);  // (P, d) the prefix tokens' shares dropped
  log_layer(rep, "drop_cls", r_tok.sum() + (r_e0.sum() - r_added.sum()), r_embed.sum());
  patch_embed_relevance(pass.pixel_map, r_embed, t.patches, t.embed, p.patch_w, p.patch_b,
                        rules.patch, c.channels, c.image_h, c.image_w, c.patch, pass.scratch);
  rep.image_sum = pass.pixel_map.sum();
  log_layer(rep, "patch_embed", r_embed.sum(), rep.image_sum);
  pass.at_pixels = true;
}

}  // namespace

void lrp_propagate(RelevancePass& pass, const Model& m, const TraceD& t, const LrpRules& rules,
                   int target, int down_to_block, LrpDepth depth) {
  const Config& c = m.config;
  assert(target >= 0 && target < c.classes);
  assert(down_to_block >= 0 && down_to_block < c.depth);
  assert(depth != LrpDepth::pixels || down_to_block == 0);
  if (pass.target != target || !same_rules(pass.rules, rules)) {
    pass.target = target;
    pass.rules = rules;
    pass.next_block = c.depth - 1;
    pass.at_pixels = false;
    pass.r_attn.assign(size_t(c.depth), {});
    pass.block_tokens.assign(size_t(c.depth), {});
    pass.e0_tokens.resize(0);
    pass.pixel_map.resize(0, 0);
    pass.report = ConservationReport();
    pass.report.block_input_sums.assign(size_t(c.depth), std::numeric_limits<double>::quiet_NaN());
    propagate_head(pass, m, t, rules);
  }
  // Block by block, each in two halves, so that a pass that stopped at an R_A (transformer-
  // attribution, partial-lrp) resumes where it stopped, with the same report as one run through.
  // A block's upper half is done once its R_A is formed (r_attn is reset with the pass).
  for (; pass.next_block >= down_to_block; --pass.next_block) {
    const int b = pass.next_block;
    if (pass.r_attn[size_t(b)].empty()) propagate_block_upper(pass, m, t, rules, b);
    if (b == down_to_block && depth == LrpDepth::attention) return;
    propagate_block_lower(pass, m, t, rules, b);
  }
  if (pass.next_block < 0) pass.report.tokens_sum = pass.r.sum();
  if (depth == LrpDepth::pixels && !pass.at_pixels) propagate_embedding(pass, m, t, rules);
}

}  // namespace vitlens
