// method_text.js — the method knowledge the page still writes itself, in ONE place.
//
// TO BE REPLACED by the engine's method table (issue 13, item 2): once methods() reports each
// method's option specs (key, jsKey, flag, kind, choices, min, max, default, help) and outputs,
// the option controls, defaults, stage names and per-method flags below come from it and this
// file shrinks to the page's own wording (or goes). Nothing else in web/ may name a method, an
// option default or a norm stage: add such knowledge here, not in a view.

// The norm-based method's stages, in core's order (core: norm_stage_name).
export const NORM_STAGES = ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer'];

// The option controls, by jsKey (methods() lists the jsKeys each method takes). `kind` says which
// control the page draws: 'block' (a block index of the loaded model), 'block-or-all' (-1 = all),
// 'choice', 'bool', 'int' (a number box, clamped to [min, max]), 'slider' (`live`: explain while
// dragging, else on release), 'baseline' (a constant image; `fill` in [0, 1] pixel space, the
// default is the engine's and is not sent) and 'method' (another method's name, among `choices`).
// `help` is the label; a function of the method info where the text depends on the method.
export const OPTION_SPECS = {
  startLayer: { kind: 'block', default: 0, help: 'start block' },
  headFusion: { kind: 'choice', choices: ['mean', 'max', 'min'], default: 'mean', help: 'head fusion' },
  block: { kind: 'block-or-all', default: -1, help: 'blocks' },
  discardRatio: { kind: 'slider', min: 0, max: 0.95, step: 0.05, default: 0, live: true, help: 'discard ratio' },
  useGrad: { kind: 'bool', default: true, help: 'weight by gradients (∇A ⊙ R_A)' },
  steps: { kind: 'int', min: 0, max: 1024, default: 0, help: (m) => `steps (0 = default, ${m.name === 'attattr' ? 20 : 32})` },
  quadrature: { kind: 'choice', choices: ['gauss-legendre', 'left', 'right', 'middle'], default: 'gauss-legendre', help: 'quadrature' },
  baseline: {
    kind: 'baseline', choices: ['black', 'grey', 'white'], labels: ['black (0, default)', 'grey (0.5)', 'white (1)'],
    fill: { black: 0, grey: 0.5, white: 1 }, default: 'black', help: 'baseline',
  },
  stage: { kind: 'choice', choices: NORM_STAGES, default: 'layer', help: 'stage rolled out' },
  inner: { kind: 'method', choices: ['saliency', 'grad-x-input', 'integrated-gradients'], default: 'saliency', help: 'inner method' },
  samples: { kind: 'int', min: 0, max: 512, default: 0, help: 'samples (0 = default)' },
  noise: { kind: 'slider', min: 0, max: 0.5, step: 0.05, default: 0.15, live: false, help: 'noise σ (of the input range)' },
  seed: { kind: 'int', min: 0, max: 2 ** 31, default: 0, help: 'noise seed' },
};

// The method the page opens with: the first of these the engine has, else its first method.
export const PREFERRED_METHODS = ['transformer-attribution', 'rollout'];

// Methods whose maps use ∂y_t/∂A: the per-head gradients are fetched for them.
export const USES_GRADS = new Set(['attn-gradcam', 'grad-rollout', 'transformer-attribution']);

// Methods whose factor is E_h[(∇A ⊙ R_A)⁺]: the teaching view shows that product per head.
export const GRAD_TIMES_RELEVANCE = new Set(['transformer-attribution']);

// The per-head products "Inside the model" shows, and the method that averages each over heads.
export const HEAD_PRODUCT_TEXT = {
  gradxa: 'what grad-rollout averages over heads: E_h[(∇A_b ⊙ A_b)⁺]',
  gradxr: 'what transformer-attribution averages over heads: Ā_b = E_h[(∇A_b ⊙ R_A_b)⁺]',
};

// The factor each rollout-like method multiplies per block ("Inside the model").
export const STEP_FORMULA = {
  rollout: 'Â_b = rownorm(fuse_h(A_b) + I)',
  'grad-rollout': 'Â_b = I + E_h[(∇A_b ⊙ A_b)⁺]',
  'transformer-attribution': 'Â_b = I + E_h[(∇A_b ⊙ R_A_b)⁺]',
  'norm-based': 'Â_b = rownorm(N_b[stage]): the block’s norm map, row-normalised',
};

// The formula beside each norm-based stage (Kobayashi et al. 2020, 2021, 2024); N[i, j] = ‖z_(i←j)‖₂.
export const NORM_FORMULA = {
  atb: 'a_(i←j) = Σ_h A_h,ij · ((LN₁(x_j)·W_V^h + b_V^h)·W_O^h)',
  'atb-res': 'x′_(i←j) = a_(i←j) + δ_ij · x_i',
  'atb-res-ln': 'g_(i←j) = γ₂ ⊙ (x′_(i←j) − mean(x′_(i←j))) / std(x′_i)',
  'atb-res-ln-ff': 'f_(i←j) = (h_(i←j) ⊙ GELU(h_i)/h_i)·W₂,  h_(i←j) = g_(i←j)·W₁',
  layer: 'y_(i←j) = x′_(i←j) + f_(i←j)',
};
