// methods.cpp — the method registry, option checks and dispatch, the shared per-input state, and
// the rendering-free helpers every method uses (token grid, bilinear upsampling).
#include "vitlens/methods/methods.h"

#include <cmath>

#include "methods_internal.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

struct MethodEntry {
  MethodInfo info;
  detail::MethodFn run;
};

const std::vector<MethodEntry>& entries() {
  static const std::vector<MethodEntry> table = {
      {{"raw-attention", "the last block's attention of the CLS token, mean over heads",
        "Vaswani et al. 2017 (as a baseline in Chefer et al. 2021)", opt_target, false, false, false,
        false, false},
       detail::raw_attention},
      {{"rollout", "attention rollout: the product of the blocks' row-normalised A + I",
        "Abnar & Zuidema, ACL 2020", opt_target | opt_start_layer | opt_head_fusion | opt_discard_ratio,
        false, false, false, false, false},
       detail::rollout},
      {{"attn-gradcam", "Grad-CAM on the last block's attention: head weights = mean CLS-row gradient",
        "Selvaraju et al. 2017 (as a baseline in Chefer et al. 2021)", opt_target, true, false, false,
        false, false},
       detail::attn_gradcam},
      {{"grad-rollout", "rollout of I + E_h[(∇A ⊙ A)⁺] (gradient-weighted attention, no LRP)",
        "Chefer, Gur & Wolf, ICCV 2021", opt_target, true, false, false, false, false},
       detail::grad_rollout},
      {{"transformer-attribution", "rollout of I + E_h[(∇A ⊙ R_A)⁺], R_A from LRP with Chefer's rules",
        "Chefer, Gur & Wolf, CVPR 2021", opt_target | opt_start_layer | opt_block | opt_use_grad, true,
        true, true, false, false},
       detail::transformer_attribution},
      {{"partial-lrp", "the last block's E_h[(R_A)⁺] (LRP relevance of the attention)",
        "Voita et al., ACL 2019 (as a baseline in Chefer et al. 2021)", opt_target, true, true, true,
        false, false},
       detail::partial_lrp},
      {{"lrp", "full LRP to the pixels (Chefer's rules, z^B at the patch embedding)",
        "Bach et al. 2015; Montavon et al. 2017 (as a baseline in Chefer et al. 2021)", opt_target, true,
        true, true, true, false},
       detail::lrp},
      {{"attnlrp", "AttnLRP: ε rules, softmax and bilinear-product rules, to the pixels",
        "Achtibat et al., ICML 2024", opt_target, true, true, false, true, false},
       detail::attnlrp},
      {{"attattr", "self-attention attribution: integrated gradients over each block's attention",
        "Hao, Dong, Wei & Xu, AAAI 2021", opt_target | opt_steps, true, false, false, false, true},
       detail::attattr},
      {{"norm-based", "rollout of the norms ‖z_{i←j}‖ of each block's additive decomposition",
        "Kobayashi et al., EMNLP 2020, EMNLP 2021, ICLR 2024", opt_stage, false, false, false, false, false},
       detail::norm_based},
      {{"saliency", "|∂y_t/∂x|, the maximum over channels", "Simonyan, Vedaldi & Zisserman 2014",
        opt_target, true, false, false, true, false},
       detail::saliency},
      {{"grad-x-input", "Σ_c x ⊙ ∂y_t/∂x", "Shrikumar et al. 2016", opt_target, true, false, false, true, false},
       detail::grad_x_input},
      {{"integrated-gradients", "Σ_c (x − x')·∫ ∂y_t/∂x along the straight path from the baseline x'",
        "Sundararajan, Taly & Yan, ICML 2017", opt_target | opt_steps | opt_quadrature | opt_baseline, true, false,
        false, true, true},
       detail::integrated_gradients},
      {{"smoothgrad", "the mean of another method's maps over noisy copies of the input",
        "Smilkov et al. 2017", opt_target | opt_smooth | opt_steps | opt_quadrature | opt_baseline, true, false,
        false, true, true},
       detail::smoothgrad},
  };
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

void check_options(const MethodInfo& info, const Config& c, const MethodOptions& opt) {
  if ((info.options & opt_steps) && (opt.steps < 0 || opt.steps > limits::max_method_steps))
    throw Error(ErrorCode::bad_argument, "steps " + std::to_string(opt.steps) + " is out of range: give 1 to " +
                                             std::to_string(limits::max_method_steps) + ", or 0 for the default");
  if ((info.options & opt_smooth) && (opt.samples < 0 || opt.samples > limits::max_method_steps))
    throw Error(ErrorCode::bad_argument, "samples " + std::to_string(opt.samples) + " is out of range: give 1 to " +
                                             std::to_string(limits::max_method_steps) + ", or 0 for the default");
  if ((info.options & opt_smooth) && !(std::isfinite(opt.noise) && opt.noise >= 0.0 && opt.noise <= 10.0))
    throw Error(ErrorCode::bad_argument, "noise " + std::to_string(opt.noise) +
                                             " is out of range: give σ as a fraction of the input range, 0 to 10");
  if (info.options & opt_smooth) {
    const MethodEntry* inner = find_entry(opt.inner);
    if (!inner || inner->info.name == std::string(info.name))
      throw Error(ErrorCode::bad_argument, "smoothgrad cannot wrap '" + opt.inner + "'; give another method: " +
                                               method_names());
  }
  if ((info.options & opt_baseline) && opt.baseline &&
      (opt.baseline->c != c.channels || opt.baseline->h != c.image_h || opt.baseline->w != c.image_w))
    throw Error(ErrorCode::bad_shape, "the baseline image must have the model's input shape " +
                                          std::to_string(c.channels) + "×" + std::to_string(c.image_h) + "×" +
                                          std::to_string(c.image_w));
  if (opt.threads < 1 || opt.threads > limits::max_threads)
    throw Error(ErrorCode::bad_argument, "threads " + std::to_string(opt.threads) + " is out of range: give 1 to " +
                                             std::to_string(limits::max_threads));
  const std::string blocks = "the model has " + std::to_string(c.depth) + " blocks (0…" +
                             std::to_string(c.depth - 1) + ")";
  if ((info.options & opt_start_layer) && (opt.start_layer < 0 || opt.start_layer >= c.depth))
    throw Error(ErrorCode::bad_argument,
                "start layer " + std::to_string(opt.start_layer) + " is out of range: " + blocks);
  if ((info.options & opt_block) && (opt.block < -1 || opt.block >= c.depth))
    throw Error(ErrorCode::bad_argument, "block " + std::to_string(opt.block) + " is out of range: " +
                                             blocks + ", or −1 for all blocks");
  if ((info.options & opt_discard_ratio) &&
      !(std::isfinite(opt.discard_ratio) && opt.discard_ratio >= 0.0 && opt.discard_ratio <= 1.0))
    throw Error(ErrorCode::bad_argument, "discard ratio " + std::to_string(opt.discard_ratio) +
                                             " is out of range: give a fraction from 0 to 1");
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

void ExplainState::set_input(const Model& m, const Image& x) {
  vit_forward(trace, m, x);
  clear_derived();
}

void ExplainState::clear_derived() {
  grads_target = -1;
  has_trace_d = false;
  chefer.target = -1;
  attnlrp.target = -1;
}

Explanation explain(const Model& m, const Image& x, const std::string& method, const MethodOptions& opt) {
  if (!find_entry(method))
    throw Error(ErrorCode::bad_argument, "unknown method '" + method + "'; the methods are: " + method_names());
  ExplainState st;
  st.set_input(m, x);
  return explain(m, st, method, opt);
}

Explanation explain(const Model& m, ExplainState& st, const std::string& method, const MethodOptions& opt) {
  const Config& c = m.config;
  const MethodEntry* e = find_entry(method);
  if (!e) throw Error(ErrorCode::bad_argument, "unknown method '" + method + "'; the methods are: " + method_names());
  if (st.trace.logits.size() != c.classes || st.trace.blocks.size() != size_t(c.depth))
    throw Error(ErrorCode::bad_argument, "no input to explain: run a prediction (ExplainState::set_input) first");
  check_options(e->info, c, opt);
  if (opt.target < -1 || opt.target >= c.classes)
    throw Error(ErrorCode::bad_argument, "target class " + std::to_string(opt.target) +
                                             " is out of range: the model has " + std::to_string(c.classes) +
                                             " classes (0…" + std::to_string(c.classes - 1) +
                                             "), or −1 for the predicted class");
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

namespace detail {

const Grads& target_grads(const Model& m, ExplainState& st, int target) {
  if (st.grads_target != target) {
    Vec dlogits = Vec::Zero(m.config.classes);
    dlogits[target] = 1.0f;
    vit_backward(st.grads, nullptr, m, st.trace, dlogits);
    st.grads_target = target;
  }
  return st.grads;
}

Mat grid_from_row(const Eigen::RowVectorXd& row0, const Config& c) {
  Mat g(c.grid_h(), c.grid_w());  // (H/p, W/p)
  for (int i = 0; i < c.num_patches(); ++i) g.data()[i] = float(row0[i + 1]);
  return g;
}

MatD head_mean(const std::vector<Mat>& mats) {
  MatD acc = MatD::Zero(mats[0].rows(), mats[0].cols());
  for (const Mat& a : mats) acc += a.cast<double>();
  return acc / double(mats.size());
}

void add_attention_intermediates(Explanation& out, const Trace& tr, const Grads* g) {
  for (size_t b = 0; b < out.blocks.size(); ++b) {
    out.blocks[b].attn = head_mean(tr.blocks[b].attn).cast<float>();
    if (g) out.blocks[b].grad = head_mean(g->blocks[b].attn).cast<float>();
  }
}

}  // namespace detail

}  // namespace vitlens
