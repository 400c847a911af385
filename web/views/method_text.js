// method_text.js — the page's own words about particular methods, in ONE place: which method it
// opens with and the formulas "Inside the model" writes beside each method's factor and each
// norm-based stage. Options, defaults, ranges, stage names and per-method flags come from the
// engine's method table (methods()); nothing else in web/ names a method.

// The method the page opens with: the first of these the engine has, else its first method.
export const PREFERRED_METHODS = ['transformer-attribution', 'rollout'];

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
