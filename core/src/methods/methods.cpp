// methods.cpp — the method registry with each method's option and output tables (options.h),
// dispatch, the shared per-input state, and the rendering-free helpers every method uses (token
// grid, bilinear upsampling).
#include "vitlens/methods/methods.h"

#include <cmath>

#include "vitlens/methods/norm_maps.h"

#include "methods_internal.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

// ---- the options, each written once; a method's table lists the ones it reads ----------------

// A spec whose default is the MethodOptions field's initialiser.
OptionSpec field(OptionSpec s) {
  const MethodOptions plain;
  if (s.kind == OptionKind::method) s.def_text = s.get_text(plain);
  else if (s.kind != OptionKind::image) s.def.value = s.get(plain);
  return s;
}

OptionSpec spec(const char* key, OptionKind kind) {
  OptionSpec s;
  s.key = key;
  s.kind = kind;
  return s;
}

OptionSpec integer(const char* key, OptionBound min, OptionBound max, const char* help) {
  OptionSpec s = spec(key, OptionKind::integer);
  s.min = min;
  s.max = max;
  s.help = help;
  return s;
}

constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 − 1: every integer a JS number holds

OptionSpec target() {
  OptionSpec s = integer("target", {-1}, {double(limits::max_classes - 1), OptionRef::last_class},
                         "the class to explain");
  s.min_means = "the predicted class";
  s.get = [](const MethodOptions& o) { return double(o.target); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.target = int(v.number); };
  return field(s);
}

OptionSpec threads() {
  OptionSpec s = integer("threads", {1}, {double(limits::max_threads)},
                         "independent passes run on this many threads (the result does not depend on it)");
  s.def = {double(limits::max_threads), OptionRef::thread_limit};
  s.get = [](const MethodOptions& o) { return double(o.threads); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.threads = int(v.number); };
  return s;
}

OptionSpec start_layer() {
  OptionSpec s = integer("start-layer", {0}, {double(limits::max_depth - 1), OptionRef::last_block},
                         "the first block (0-based) of the product");
  s.get = [](const MethodOptions& o) { return double(o.start_layer); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.start_layer = int(v.number); };
  return field(s);
}

OptionSpec block() {
  OptionSpec s = integer("block", {-1}, {double(limits::max_depth - 1), OptionRef::last_block},
                         "one block only, the paper's ablation");
  s.min_means = "all blocks";
  s.get = [](const MethodOptions& o) { return double(o.block); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.block = int(v.number); };
  return field(s);
}

OptionSpec head_fusion() {
  OptionSpec s = spec("head-fusion", OptionKind::choice);
  for (int i = 0; i < head_fusion_count; ++i) s.choices.push_back(head_fusion_name(i));
  s.help = "how the heads' attention is fused";
  s.get = [](const MethodOptions& o) { return double(o.head_fusion); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.head_fusion = HeadFusion(int(v.number)); };
  return field(s);
}

OptionSpec discard_ratio() {
  OptionSpec s = spec("discard-ratio", OptionKind::number);
  s.min = {0};
  s.max = {1};
  s.help = "the fraction of the fused attention zeroed, lowest first";
  s.get = [](const MethodOptions& o) { return o.discard_ratio; };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.discard_ratio = v.number; };
  return field(s);
}

OptionSpec weight() {
  OptionSpec s = spec("weight", OptionKind::choice);
  s.choices = {"grad", "none", "attn"};
  s.choice_help = {"Ā_b = E_h[(∇A_b ⊙ R_A_b)⁺], the method",
                   "Ā_b = E_h[(R_A_b)⁺], the paper's \"without gradients\" ablation as its code runs it",
                   "Ā_b = E_h[(A_b ⊙ R_A_b)⁺], the ablation as the paper's text states it (∇A replaced by A)"};
  s.aliases = {{"no-grad", "none"}};
  s.help = "what weights each head's relevance R_A_b: grad (the method), none or attn (the paper's ablations)";
  s.get = [](const MethodOptions& o) { return double(o.weight); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.weight = AttnWeight(int(v.number)); };
  return field(s);
}

OptionSpec linear_rule() {
  OptionSpec s = spec("linear-rule", OptionKind::choice);
  s.choices = {"shared", "separate"};
  s.choice_help = {"S = R/(x⁺W⁺ᵀ + x⁻W⁻ᵀ), R_in = x⁺⊙(S·W⁺) + x⁻⊙(S·W⁻): the paper's rule, conserving",
                   "R_in = x⁺⊙((R/x⁺W⁺ᵀ)·W⁺) + x⁻⊙((R/x⁻W⁻ᵀ)·W⁻): the older rule of the paper's LRP baselines, "
                   "not conserving"};
  s.help = "LRP-α1β0 at the linear layers with one denominator, or one per sign (the paper's LRP baselines)";
  s.get = [](const MethodOptions& o) { return double(o.linear_rule); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.linear_rule = CheferLinear(int(v.number)); };
  return field(s);
}

OptionSpec add_rule() {
  OptionSpec s = spec("add-rule", OptionKind::choice);
  s.choices = {"normalised", "plain"};
  s.choice_help = {"R_a = a⊙R/(a+b), R_b likewise, then both rescaled to keep ΣR: the paper's rule",
                   "R_a = a⊙R/(a+b), R_b = b⊙R/(a+b), no rescaling: the older rule of the paper's LRP baselines"};
  s.help = "the residual and position-embedding adds: normalised, or plain (the paper's LRP baselines)";
  s.get = [](const MethodOptions& o) { return double(o.add_rule); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.add_rule = CheferAdd(int(v.number)); };
  return field(s);
}

// partial-lrp and attnlrp only: with Chefer's normalised Add rule all the way down (transformer-
// attribution, lrp) the float32 activations moved the maps by up to 0.21 of their maximum natively
// and 1.7 in wasm on DeiT-tiny's random weights (README), too far for an option.
OptionSpec precision() {
  OptionSpec s = spec("precision", OptionKind::choice);
  s.choices = {"float64", "float32"};
  s.choice_help = {"the relevance rules read a forward pass recomputed in double: the float64 reference's maps "
                   "to ~1e-7",
                   "they read the float pass already run, cast: no second forward pass (faster); the maps move "
                   "by ≤ 4e-4 of their maximum in our measurements (README)"};
  s.help = "the activations the relevance rules read: recomputed in float64 (exact), or the float32 pass (faster)";
  s.get = [](const MethodOptions& o) { return double(o.precision); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.precision = LrpPrecision(int(v.number)); };
  return field(s);
}

// `steps` of a method: m for attattr, n for integrated gradients, passed on by smoothgrad.
OptionSpec steps(double def, const char* help) {
  OptionSpec s = integer("steps", {1}, {double(limits::max_method_steps)}, help);
  s.def = {def};
  s.zero_is_default = true;
  s.get = [](const MethodOptions& o) { return double(o.steps); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.steps = int(v.number); };
  return s;
}

OptionSpec quadrature() {
  OptionSpec s = spec("quadrature", OptionKind::choice);
  for (int i = 0; i < quadrature_count; ++i) s.choices.push_back(quadrature_name(i));
  s.help = "where the gradient is taken on each sub-interval, or the Gauss–Legendre rule";
  s.get = [](const MethodOptions& o) { return double(o.quadrature); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.quadrature = Quadrature(int(v.number)); };
  return field(s);
}

OptionSpec baseline() {
  OptionSpec s = spec("baseline", OptionKind::image);
  s.help = "the baseline image x' (black: 0 before normalisation)";
  s.get_image = [](const MethodOptions& o) { return o.baseline; };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.baseline = v.image; };
  return field(s);
}

OptionSpec inner() {
  OptionSpec s = spec("inner", OptionKind::method);
  s.help = "the method whose maps are averaged";
  s.get_text = [](const MethodOptions& o) { return o.inner; };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.inner = v.text; };
  return field(s);
}

OptionSpec samples() {
  OptionSpec s = integer("samples", {1}, {double(limits::max_method_steps)}, "the number of noisy copies");
  s.def = {32};
  s.zero_is_default = true;
  s.get = [](const MethodOptions& o) { return double(o.samples); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.samples = int(v.number); };
  return s;
}

OptionSpec noise() {
  OptionSpec s = spec("noise", OptionKind::number);
  s.min = {0};
  s.max = {10};
  s.help = "σ of the noise as a fraction of the input's range";
  s.get = [](const MethodOptions& o) { return o.noise; };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.noise = v.number; };
  return field(s);
}

OptionSpec seed() {
  OptionSpec s = integer("seed", {0}, {kMaxSafeInteger}, "the noise stream");
  s.get = [](const MethodOptions& o) { return double(o.seed); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.seed = uint64_t(v.number); };
  return field(s);
}

OptionSpec stage() {
  OptionSpec s = spec("stage", OptionKind::choice);
  for (int i = 0; i < norm_stage_count; ++i) {
    s.choices.push_back(norm_stage_name(NormStage(i)));
    s.choice_help.push_back(norm_stage_formula(NormStage(i)));
  }
  s.help = "how far through each block the decomposition is carried before the rollout";
  s.get = [](const MethodOptions& o) { return double(o.stage); };
  s.set = [](MethodOptions& o, const OptionValue& v) { o.stage = NormStage(int(v.number)); };
  return field(s);
}

// A method's table: the target first, its own options, the threads last.
std::vector<OptionSpec> opts(std::vector<OptionSpec> own) {
  std::vector<OptionSpec> v = {target()};
  for (OptionSpec& s : own) v.push_back(std::move(s));
  v.push_back(threads());
  return v;
}

// ---- the outputs ---------------------------------------------------------------------------

const OutputSpec token_map{OutputId::token_map, "token-map", "(H/p, W/p)", {"gridH", "gridW"}, "always",
                           "the raw, unnormalised token map, row-major"};
const OutputSpec pixel_map{OutputId::pixel_map, "pixel-map", "(H, W)", {"height", "width"}, "always",
                           "the token map upsampled (bilinear, half-pixel centres), or native at the input"};
const OutputSpec intermediates{OutputId::intermediates, "intermediates",
                               "L × {attn, grad, relevance, step, accumulated: (n, n); relevance-heads, product-heads: H × (n, n)}",
                               {"depth", "tokens", "tokens"}, "when asked for",
                               "per-block head means of what the method computes, and per head R_A and the terms of Ā (empty fields: not computed)"};
const OutputSpec conservation{OutputId::conservation, "conservation", "(layers) × {layer, relevance-out, relevance-in}",
                              {"layers"}, "always", "Σ relevance arriving at and leaving each layer, in propagation order, as far as the pass has gone"};
const OutputSpec relevance_sums{OutputId::relevance_sums, "relevance-sums", "{seed, block-inputs (L), tokens, image}",
                                {"depth"}, "always", "Σ relevance at the seed, each block's input, the tokens E0, the image"};
const OutputSpec completeness{OutputId::completeness, "completeness", "{attribution-sum, f-input, f-baseline, gap}", {},
                              "integrated-gradients, and smoothgrad over it",
                              "Σ attributions against F(x) − F(x'): completeness and its gap"};
const OutputSpec attattr_out{OutputId::attattr, "attattr", "L × H × (n, n)", {"depth", "heads", "tokens", "tokens"},
                             "always", "each block's and head's attribution matrix Attr_l,h"};
const OutputSpec norm_out{OutputId::norm, "norm", "L × {maps: stage × (n, n), mixing: stage × (n)}",
                          {"depth", "stages", "tokens", "tokens"}, "always",
                          "each block's norm map ‖z_{i←j}‖ and mixing ratios at every stage"};

std::vector<OutputSpec> outs(std::vector<OutputSpec> own) {
  std::vector<OutputSpec> v = {token_map, pixel_map};
  for (OutputSpec& s : own) v.push_back(std::move(s));
  v.push_back(intermediates);
  return v;
}

struct MethodEntry {
  MethodInfo info;
  detail::MethodFn run;
};

const std::vector<MethodEntry>& entries() {
  static const std::vector<MethodEntry> table = [] {
    const std::vector<OutputSpec> lrp_outs = outs({conservation, relevance_sums});
    return std::vector<MethodEntry>{
        {{"raw-attention", "the last block's attention of the CLS token, mean over heads",
          "Vaswani et al. 2017 (as a baseline in Chefer et al. 2021)", opts({}), outs({}), false, false, false, false,
          false},
         detail::raw_attention},
        {{"rollout", "attention rollout: the product of the blocks' row-normalised A + I", "Abnar & Zuidema, ACL 2020",
          opts({start_layer(), head_fusion(), discard_ratio()}), outs({}), false, false, false, false, false,
          "Â_b = rownorm(fuse_h(A_b) + I)"},
         detail::rollout},
        {{"attn-gradcam", "Grad-CAM on the last block's attention: head weights = mean CLS-row gradient",
          "Selvaraju et al. 2017 (as a baseline in Chefer et al. 2021)", opts({}), outs({}), true, false, false, false,
          false},
         detail::attn_gradcam},
        {{"grad-rollout", "rollout of I + E_h[(∇A ⊙ A)⁺] (gradient-weighted attention, no LRP)",
          "Chefer, Gur & Wolf, ICCV 2021", opts({}), outs({}), true, false, false, false, false,
          "Â_b = I + E_h[(∇A_b ⊙ A_b)⁺]"},
         detail::grad_rollout},
        {{"transformer-attribution", "rollout of I + E_h[(∇A ⊙ R_A)⁺], R_A from LRP with Chefer's rules",
          "Chefer, Gur & Wolf, CVPR 2021", opts({start_layer(), block(), weight(), linear_rule(), add_rule()}), lrp_outs, true, true, true, false,
          false, "Â_b = I + E_h[(∇A_b ⊙ R_A_b)⁺]", true},
         detail::transformer_attribution},
        {{"partial-lrp", "the last block's E_h[(R_A)⁺] (LRP relevance of the attention)",
          "Voita et al., ACL 2019 (as a baseline in Chefer et al. 2021)", opts({linear_rule(), add_rule(), precision()}), lrp_outs, true, true, true, false,
          false},
         detail::partial_lrp},
        {{"lrp", "full LRP to the pixels (Chefer's rules, z^B at the patch embedding)",
          "Bach et al. 2015; Montavon et al. 2017 (as a baseline in Chefer et al. 2021)",
          opts({linear_rule(), add_rule()}), lrp_outs, true, true,
          true, true, false},
         detail::lrp},
        {{"attnlrp", "AttnLRP: ε rules, softmax and bilinear-product rules, to the pixels", "Achtibat et al., ICML 2024",
          opts({precision()}), lrp_outs, true, true, false, true, false},
         detail::attnlrp},
        {{"attattr", "self-attention attribution: integrated gradients over each block's attention",
          "Hao, Dong, Wei & Xu, AAAI 2021", opts({steps(20, "m, the Riemann steps along α·A (the paper's 20)")}),
          outs({attattr_out}), true, false, false, false, true},
         detail::attattr},
        {{"norm-based", "rollout of the norms ‖z_{i←j}‖ of each block's additive decomposition",
          "Kobayashi et al., EMNLP 2020, EMNLP 2021, ICLR 2024", opts({stage()}), outs({norm_out}), false, false, false,
          false, true, "Â_b = rownorm(N_b[stage]): the block’s norm map, row-normalised"},
         detail::norm_based},
        {{"saliency", "|∂y_t/∂x|, the maximum over channels", "Simonyan, Vedaldi & Zisserman 2014", opts({}), outs({}),
          true, false, false, true, false, "", false, true},
         detail::saliency},
        {{"grad-x-input", "Σ_c x ⊙ ∂y_t/∂x", "Shrikumar et al. 2016", opts({}), outs({}), true, false, false, true, false,
          "", false, true},
         detail::grad_x_input},
        {{"integrated-gradients", "Σ_c (x − x')·∫ ∂y_t/∂x along the straight path from the baseline x'",
          "Sundararajan, Taly & Yan, ICML 2017",
          opts({steps(32, "n, the quadrature points on the path"), quadrature(), baseline()}), outs({completeness}), true,
          false, false, true, true, "", false, true},
         detail::integrated_gradients},
        {{"smoothgrad", "the mean of another method's maps over noisy copies of the input", "Smilkov et al. 2017",
          opts({inner(), samples(), noise(), seed(), steps(0, "the wrapped method's steps (0: its default)"),
                quadrature(), baseline()}),
          outs({completeness}), true, false, false, true, true},
         detail::smoothgrad},
    };
  }();
  return table;
}

const MethodEntry* find_entry(const std::string& name) {
  for (const MethodEntry& e : entries())
    if (name == e.info.name) return &e;
  return nullptr;
}

std::string method_names() {
  std::string s;
  for (const MethodEntry& e : entries()) s += (s.empty() ? "" : ", ") + std::string(e.info.name);
  return s;
}

}  // namespace

const std::vector<MethodInfo>& method_registry() {
  static const std::vector<MethodInfo> infos = [] {
    std::vector<MethodInfo> v;
    for (const MethodEntry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

const MethodInfo* find_method(const std::string& name) {
  for (const MethodInfo& info : method_registry())
    if (name == info.name) return &info;
  return nullptr;
}

void ExplainState::set_input(const Model& m, const Image& x, const std::vector<float>& head_mask,
                             bool gradients_only) {
  ForwardOptions fo;
  fo.head_mask = head_mask;
  fo.head_rows_only = gradients_only;
  vit_forward(trace, m, x, fo);
  clear_derived();
}

void ExplainState::clear_derived() {
  grads_target = -1;
  has_trace_d = false;
  chefer.target = -1;
  chefer_variant.target = -1;
  attnlrp.target = -1;
  norm.clear();
  attattr = AttAttrSums{};
  sampled.clear();
}

Explanation explain(const Model& m, const Image& x, const std::string& method, const MethodOptions& opt) {
  if (!find_entry(method))
    throw Error(ErrorCode::bad_argument, "unknown method '" + method + "'; the methods are: " + method_names());
  ExplainState st;
  st.set_input(m, x);
  return explain(m, st, method, opt);
}

Explanation explain(const Model& m, ExplainState& st, const std::string& method, const MethodOptions& given) {
  const Config& c = m.config;
  const MethodEntry* e = find_entry(method);
  if (!e) throw Error(ErrorCode::bad_argument, "unknown method '" + method + "'; the methods are: " + method_names());
  if (st.trace.logits.size() != c.classes || st.trace.blocks.size() != size_t(c.depth))
    throw Error(ErrorCode::bad_argument, "no input to explain: run a prediction (ExplainState::set_input) first");
  if (st.trace.head_rows_only && !e->info.input_gradient_only)
    throw Error(ErrorCode::bad_argument, "this input's forward pass was run for the gradient methods only; " + method +
                                             " needs a full one (ExplainState::set_input without gradients_only)");
  check_method_options(e->info, c, given);
  const MethodOptions opt = resolve_defaults(e->info, given);
  Explanation out;
  out.method = method;
  out.target = opt.target >= 0 ? opt.target : top_k(c, st.trace.logits, 1)[0].cls;
  if (opt.want_intermediates) out.blocks.resize(size_t(c.depth));
  e->run(out, m, st, opt);
  if (!e->info.native_pixels) out.pixel_map = upsample_bilinear(out.token_map, c.image_h, c.image_w);
  return out;
}

Mat upsample_bilinear(const Mat& in, int out_h, int out_w) {
  // Source coordinate of output pixel i: (i + ½)·in/out − ½, clamped at 0 (PyTorch's
  // align_corners=False); the upper neighbour is clamped to the last row / column.
  struct Tap {
    int i0, i1;
    double w1;
  };
  auto taps = [](int in_size, int out_size) {
    std::vector<Tap> t(static_cast<size_t>(out_size));
    const double scale = double(in_size) / double(out_size);
    for (int i = 0; i < out_size; ++i) {
      const double src = std::max(0.0, (i + 0.5) * scale - 0.5);
      const int i0 = std::min(int(src), in_size - 1);
      t[size_t(i)] = {i0, std::min(i0 + 1, in_size - 1), src - i0};
    }
    return t;
  };
  const std::vector<Tap> ty = taps(int(in.rows()), out_h), tx = taps(int(in.cols()), out_w);
  Mat out(out_h, out_w);  // (out_h, out_w)
  for (int y = 0; y < out_h; ++y) {
    const Tap& a = ty[size_t(y)];
    for (int x = 0; x < out_w; ++x) {
      const Tap& b = tx[size_t(x)];
      const double top = (1 - b.w1) * in(a.i0, b.i0) + b.w1 * in(a.i0, b.i1);
      const double bottom = (1 - b.w1) * in(a.i1, b.i0) + b.w1 * in(a.i1, b.i1);
      out(y, x) = float((1 - a.w1) * top + a.w1 * bottom);
    }
  }
  return out;
}

const Grads& target_grads(const Model& m, ExplainState& st, int target) {
  if (st.grads_target != target) {
    Vec dlogits = Vec::Zero(m.config.classes);
    dlogits[target] = 1.0f;
    vit_backward(st.grads, nullptr, m, st.trace, dlogits, detail::masked(st.trace));
    st.grads_target = target;
  }
  return st.grads;
}

namespace detail {

ForwardOptions masked(const Trace& tr) {
  ForwardOptions fo;
  fo.head_mask = tr.head_mask;
  fo.head_rows_only = tr.head_rows_only;
  return fo;
}

Mat grid_from_row(const Eigen::RowVectorXd& row, const Config& c) {
  Mat g(c.grid_h(), c.grid_w());  // (H/p, W/p)
  const int k = c.prefix();
  for (int i = 0; i < c.num_patches(); ++i) g.data()[i] = float(row[k + i]);
  return g;
}

Eigen::RowVectorXd query_row(const Config& c) { return query_weights(c).transpose(); }

MatD head_mean(const std::vector<Mat>& mats) {
  MatD acc = MatD::Zero(mats[0].rows(), mats[0].cols());
  for (const Mat& a : mats) acc += a.cast<double>();
  return acc / double(mats.size());
}

template <typename X>
MatD positive_head_mean(const std::vector<X>& x, const std::vector<Mat>* w, std::vector<Mat>* terms) {
  const Eigen::Index rows = x[0].rows(), cols = x[0].cols(), size = rows * cols;
  MatD mean = MatD::Zero(rows, cols);  // (n, n)
  if (terms) terms->assign(x.size(), Mat(rows, cols));
  // One loop per head over the elements, without temporaries (the Eigen expressions that formed
  // each term as a matrix took ~0.1 ms of a repeated transformer-attribution call on the shipped
  // model; docs/performance.md). The sums run in the same order: the same bits.
  for (size_t h = 0; h < x.size(); ++h) {
    const auto* xh = x[h].data();
    const float* wh = w ? (*w)[h].data() : nullptr;
    float* th = terms ? (*terms)[h].data() : nullptr;
    double* m = mean.data();
    for (Eigen::Index i = 0; i < size; ++i) {
      const double v = wh ? double(wh[i]) * double(xh[i]) : double(xh[i]);
      const double t = v > 0.0 ? v : 0.0;  // (·)⁺, NaN → 0
      m[i] += t;
      if (th) th[i] = float(t);
    }
  }
  return mean / double(x.size());
}
template MatD positive_head_mean(const std::vector<Mat>&, const std::vector<Mat>*, std::vector<Mat>*);
template MatD positive_head_mean(const std::vector<MatD>&, const std::vector<Mat>*, std::vector<Mat>*);

void add_attention_intermediates(Explanation& out, const Trace& tr, const Grads* g) {
  for (size_t b = 0; b < out.blocks.size(); ++b) {
    out.blocks[b].attn = head_mean(tr.blocks[b].attn).cast<float>();
    if (g) out.blocks[b].grad = head_mean(g->blocks[b].attn).cast<float>();
  }
}

Eigen::RowVectorXd rollout_row(const std::vector<MatD>& steps, int start, const Config& c,
                               std::vector<BlockIntermediates>* blocks) {
  Eigen::RowVectorXd row = query_row(c);  // (n)
  for (int b = int(steps.size()) - 1; b >= start; --b) row = row * steps[size_t(b)];
  if (!blocks) return row;
  // acc_b = step_b·acc_{b−1} through gemm.h: Eigen's own product of two (n, n) double matrices
  // takes 2.3× as long in wasm (node: 74 against 32 µs at n = 65, 1.8 against 0.8 ms at 197).
  MatD acc = steps[size_t(start)], next;  // (n, n)
  const int n = int(acc.rows());
  for (int b = start; b < int(steps.size()); ++b) {
    if (b > start) {
      next.resize(n, n);
      gemm_nn(next.data(), steps[size_t(b)].data(), acc.data(), n, n, n, n, n, n, 1.0, 0.0);
      acc.swap(next);
    }
    (*blocks)[size_t(b)].step = steps[size_t(b)].cast<float>();
    (*blocks)[size_t(b)].accumulated = acc.cast<float>();
  }
  return row;
}

}  // namespace detail

}  // namespace vitlens
