// methods.h — the attribution methods: one entry point, a registry, and what they return.
//
// Every method is specified in shared METHODS.md and matched against an independent float64
// reference (tests/reference/methods_ref.py). A method returns the raw, unnormalised token map
// ((H/p)×(W/p): row 0 of an n×n matrix without column 0, reshaped row-major) and a pixel map
// (H×W): the token map upsampled bilinearly with half-pixel centres (align_corners=False) for the
// token methods, the native input-level map for lrp and attnlrp. Min-max normalisation is left
// to display code and to the metrics that ask for it.
//
// Families: attention (methods_attention.cpp: raw-attention, rollout, attn-gradcam, grad-rollout)
// and LRP (methods_lrp.cpp over the mechanism of lrp.h: transformer-attribution, partial-lrp,
// lrp, attnlrp). Registry (each method's option and output tables, options.h), dispatch and
// upsampling: methods.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vitlens/methods/options.h"
#include "vitlens/relevance/lrp.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"
#include "vitlens/model/vit.h"

namespace vitlens {

enum class HeadFusion { mean, max, min };

// integrated-gradients: where on each of the n sub-intervals of [0, 1] the gradient is taken
// (left, right, middle), or the n-point Gauss–Legendre rule on [0, 1].
enum class Quadrature { left, right, middle, gauss_legendre };

// transformer-attribution: what multiplies each head's R_{A_b} before (·)⁺ and the head mean
// (Chefer, Gur & Wolf 2021): the gradient ∇A_b (the method), nothing (the "without gradients"
// ablation of the paper's code), or the attention A_b itself (the ablation of the paper's text,
// "replace ∇A by A").
enum class AttnWeight { grad, none, attn };

// Chefer's rule set at the linear layers: LRP-α1β0 with one denominator for both signs (the
// paper's rules), or one per sign (the older rules of the paper's LRP and partial-LRP baselines,
// which do not conserve relevance). See lrp.h.
enum class CheferLinear { shared, separate };
// ... and at the adds: split a:b and renormalise (the paper's rules), or the plain z rule without
// the renormalisation (the older rules).
enum class CheferAdd { normalised, plain };

// partial-lrp and attnlrp: the activations the relevance rules read. float64: a forward pass
// recomputed in double (exact to the float64 reference, ~1e-7); float32: the float pass already
// run, cast (no second forward pass; faster, with a deviation the README reports).
enum class LrpPrecision { float64, float32 };

// norm-based: how far through a block the additive decomposition is carried (Kobayashi et al.):
// attention only, + residual, + LayerNorm 2, + feed-forward, the whole block (+ 2nd residual).
enum class NormStage { atb, atb_res, atb_res_ln, atb_res_ln_ff, layer };

// Progress of a long method: called with the fraction done (0…1) between units of work; return
// false to stop, and the method throws Error(cancelled). Called on the calling thread only, and
// never copied on another (in wasm it may hold a JS function, which belongs to its thread).
using ProgressFn = std::function<bool(double fraction)>;

// The fields every method may read. A field's initialiser is its default unless the method's option
// table (MethodInfo::options) declares another (steps, samples, threads); see options.h.
struct MethodOptions {
  int target = -1;            // class to explain; −1 = the arg-max class
  int start_layer = 0;        // rollout, transformer-attribution: first block (0-based) of the product
  HeadFusion head_fusion = HeadFusion::mean;  // rollout
  double discard_ratio = 0.0;  // rollout: fraction of the fused matrix zeroed, in [0, 1]
  int block = -1;             // transformer-attribution: one block only (−1 = the rollout over all)
  AttnWeight weight = AttnWeight::grad;  // transformer-attribution: Ā_b = E_h[(weight ⊙ R_{A_b})⁺]
  CheferLinear linear_rule = CheferLinear::shared;  // transformer-attribution, partial-lrp, lrp
  CheferAdd add_rule = CheferAdd::normalised;       // transformer-attribution, partial-lrp, lrp
  LrpPrecision precision = LrpPrecision::float64;   // partial-lrp, attnlrp
  bool want_intermediates = false;  // fill Explanation::blocks
  int steps = 0;              // attattr: m; integrated-gradients: n; 0 = the method's default (its option table)
  Quadrature quadrature = Quadrature::gauss_legendre;  // integrated-gradients
  const Image* baseline = nullptr;  // integrated-gradients: nullptr = black (0 before normalisation)
  std::string inner = "saliency";   // smoothgrad: the wrapped method
  int samples = 0;            // smoothgrad: noisy copies (0 = the default)
  double noise = 0.15;        // smoothgrad: σ as a fraction of the input's range
  uint64_t seed = 0;          // smoothgrad: the noise stream
  NormStage stage = NormStage::layer;  // norm-based: the stage whose per-block maps are rolled out
  int threads = 1;            // independent evaluations (IG steps, attattr batches) on this many threads
  ProgressFn progress;        // long methods report progress and can be cancelled (see ProgressFn)
  std::vector<std::string> given;  // the keys set_option stored (options.h): explain() rejects any
                                   // the method does not read
};

// One method of the registry: what it is, its options and its outputs (options.h), declared once.
struct MethodInfo {
  const char* name;
  const char* description;  // one line
  const char* paper;
  std::vector<OptionSpec> options;  // what the method reads, in display order; it ignores the rest
  std::vector<OutputSpec> outputs;  // the Explanation fields it fills
  bool class_specific;      // the map depends on the target class
  bool reports_relevance;   // fills Explanation::conservation (an LRP method)
  bool conserves;           // Σ relevance should stay equal to the seed (Chefer's rules, down to E0)
  bool native_pixels;       // the pixel map is computed at the input, not upsampled
  bool long_running;        // many passes (integrated gradients, smoothing), or a cost that grows as
                            // n²·d·mlp per block (norm-based: 94 s for a ViT-B/16 in chromium):
                            // reports progress and can be cancelled
  // The factor the method multiplies per block, for teaching views ("" for methods without one).
  const char* step_formula = "";
  bool featured = false;    // the method a front end opens with (one in the registry)
  // It reads of the input's forward pass only the input, the logits and ∂y_t/∂x (smoothgrad's
  // noisy copies of it can skip the last block's unread rows: ExplainState::set_input).
  bool input_gradient_only = false;
};

// Every method, in the order the CLI and the page list them.
const std::vector<MethodInfo>& method_registry();
// nullptr if there is no such method.
const MethodInfo* find_method(const std::string& name);

// Per-block views for teaching (head means, all (n, n); a field is empty when the method does not
// compute it for that block).
struct BlockIntermediates {
  Mat attn;         // E_h[A_b]
  Mat grad;         // E_h[∇A_b], ∇A_b = ∂y_t/∂A_b
  Mat relevance;    // E_h[R_{A_b}]
  std::vector<Mat> relevance_heads;  // H × (n, n): R_{A_b,h} of each head (LRP methods)
  std::vector<Mat> product_heads;    // H × (n, n): each head's term of Ā_b = E_h[(W_h ⊙ X_h)⁺] —
                                     // (∇A_b,h ⊙ A_b,h)⁺ for grad-rollout, (W_h ⊙ R_{A_b,h})⁺ for
                                     // transformer-attribution (W_h as its weight says; (R_{A_b,h})⁺
                                     // for weight none); empty for the other methods
  Mat step;         // this block's factor of the product: rownorm(fuse(A_b) + I) for rollout,
                    // I + Ā_b for grad-rollout and transformer-attribution (also for the
                    // single-block ablation, whose map row qᵀ(I + Ā_b) is Ā_b[0, 1:])
  Mat accumulated;  // the product of the steps from the first block used up to this one
};

// attattr (Hao et al. 2021), block l: Attr_l = A_l ⊙ (1/m)·Σ_k ∂F(α_k·A_l)/∂A_l.
struct AttAttrBlock {
  std::vector<Mat> attr;  // H × (n, n)
};

// norm-based (Kobayashi et al.), one block: the maps N[i, j] = ‖z_{i←j}‖₂ at each stage, and the
// mixing ratio r_i per stage (index: NormStage).
struct NormBlock {
  Mat maps[5];   // (n, n) per stage
  Vec mixing[5]; // (n) per stage
};

// Integrated gradients: Σ attr against F(x) − F(x') (Sundararajan et al. 2017, completeness).
struct Completeness {
  double attribution_sum = 0, f_input = 0, f_baseline = 0;
  double gap() const { return attribution_sum - (f_input - f_baseline); }
};

struct Explanation {
  std::string method;
  int target = -1;
  Mat token_map;  // (H/p, W/p) raw
  Mat pixel_map;  // (H, W)
  ConservationReport conservation;  // LRP methods only (see lrp.h)
  std::vector<BlockIntermediates> blocks;  // (L) when MethodOptions::want_intermediates
  std::vector<AttAttrBlock> attattr;       // (L) attattr only
  std::vector<NormBlock> norm;             // (L) norm-based only
  bool has_completeness = false;           // integrated-gradients (and smoothgrad over it)
  Completeness completeness;
};

// What attattr_blocks has computed for one (target, steps) of an input (attattr.cpp's batched
// pass, whose units each sum ∂F/∂ctx_l over some of block l's scaled copies): per block the sum of
// its first finished units, added in unit order as they finish, and the units finished out of that
// order until those before them are in. A call that finds some of them computes the rest, with
// the same result bit for bit.
struct AttAttrSums {
  int target = -1, steps = 0;
  bool complete = false;
  std::vector<Mat> blocks;  // (L) × (n, d): block l's first folded[l] units, summed in order
  std::vector<int> folded;  // (L)
  std::vector<Mat> units;   // (n, d) per unit, finished but not yet in blocks; else empty
};

// The sampled methods' running sum (integrated-gradients' quadrature points, smoothgrad's noisy
// copies), added in unit order: units [0, next) are in `sums`. `key` names the method, the target
// and the value of every option of the registry but the thread count (what the method or the one
// smoothgrad wraps reads is among them), `images` the image options by value; a call with the same
// ones goes on from unit `next`, the same result bit for bit.
struct UnitSums {
  std::string key;
  std::vector<std::vector<float>> images;
  int next = 0;
  std::vector<double> sums;
};

// What the methods share for one input, owned by the caller: the forward trace, the gradient of
// the target logit, the double-precision trace and the relevance passes, and what the long
// methods have computed so far. Each is computed on first use and reused by later calls (the
// all-methods grid runs every pass once).
//
// Heads switched off: with a head mask (ForwardOptions::head_mask, L·H entries, 0 = off) every
// method explains the masked model. An off head's attention is 0 in the forward pass, and every
// pass a method runs follows that forward: the gradients (∇A, ∂y_t/∂x), the double-precision
// trace and its relevance passes, the IG path and smoothgrad's noisy copies, attattr's scaled
// copies of each block (the blocks above run masked too), the norm-based decomposition. So the
// attention-derived methods see A_l,h = 0 for an off head: raw-attention and rollout average it
// into E_h[A] as a zero (a row of E_h[A] then sums to the share of heads on, so rollout's
// rownorm(E_h[A] + I) gives the identity, the residual, a larger share; head-fusion max ignores
// the off head, min is 0 wherever one is off), and every product with A or with its
// relevance — (∇A ⊙ A)⁺, (∇A ⊙ R_A)⁺, attn-gradcam's w_h·A_h, Attr = A ⊙ ∫∂F/∂A, ‖Σ_h A_h·v_h W_O^h‖
// — is 0 for it. Every method but raw-attention and rollout therefore gives the map of the model
// whose projection columns of the off heads (W_proj[:, h·d_h … (h+1)·d_h)) are zero (tested);
// those two read A without a weight, so for them the two models differ.
struct ExplainState {
  Trace trace;            // the float forward pass of the input (trace.head_mask: its head mask)
  int grads_target = -1;  // the class `grads` was computed for (−1: none)
  Grads grads;
  bool has_trace_d = false;
  bool trace_d_float32 = false;  // trace_d is the float pass cast (LrpPrecision::float32)
  TraceD trace_d;
  RelevancePass chefer, attnlrp;
  RelevancePass chefer_variant;  // Chefer's rules with another linear or add rule (the last asked for)
  // norm-based's blocks done so far, in block order (norm_block's maps depend on the trace alone):
  // a norm-based explanation stopped by its progress callback goes on from the first block not
  // done when asked again, and a later one (another stage, the page's feed-forward view) reads
  // them. (L) × 5 (n, n) maps once complete: 9.3 MB at n = 197, L = 12.
  std::vector<NormBlock> norm;
  // attattr's sums for the last (target, steps) asked for (attattr_blocks): a stopped attattr
  // explanation or ranking goes on from the units done, and the page's grid and heads section
  // share one computation. (L) × (n, d) and a unit or two per thread: 1.8 MB at DeiT-tiny's shape,
  // 7.3 MB at ViT-B/16's.
  AttAttrSums attattr;
  // integrated-gradients' and smoothgrad's sums for the last kSampledKept option sets asked for,
  // the most recently used last: a stopped one goes on from its next unit, and two callers with
  // different options (the page's grid and its main view) do not replace each other's (C·H·W
  // doubles each for integrated-gradients, H·W + grid for smoothgrad).
  static constexpr size_t kSampledKept = 2;
  std::vector<UnitSums> sampled;

  // Runs the forward pass of x, with the heads `head_mask` switches off (L·H values 0 or 1, flat
  // index l·H + h; empty = all on), and forgets everything derived from a previous input. With
  // gradients_only, the last block is formed only where the head reads it (ForwardOptions::
  // head_rows_only): the state then serves only the methods with MethodInfo::input_gradient_only.
  void set_input(const Model& m, const Image& x, const std::vector<float>& head_mask = {},
                 bool gradients_only = false);
  // Forgets everything derived from `trace` (call after filling `trace` yourself).
  void clear_derived();
};

// ∂y_t/∂(every activation) of the input `st` holds, for class `target` (in range): computed once
// per (input, target) and kept in st.grads, which the gradient methods and
// transformer-attribution read (so does the page's teaching view, Input.attentionGrads).
const Grads& target_grads(const Model& m, ExplainState& st, int target);

// Explains `x` with `method`. Throws Error(bad_argument) for an unknown method or an option out
// of range (check_method_options, options.h), Error(bad_shape) for a wrong input.
Explanation explain(const Model& m, const Image& x, const std::string& method,
                    const MethodOptions& opt = {});
// The same on the input whose forward pass `state` holds (see ExplainState::set_input).
Explanation explain(const Model& m, ExplainState& state, const std::string& method,
                    const MethodOptions& opt = {});

// Bilinear resize with half-pixel centres (PyTorch's align_corners=False, source coordinates
// clamped at 0): in (h, w) → (out_h, out_w).
Mat upsample_bilinear(const Mat& in, int out_h, int out_w);

}  // namespace vitlens
