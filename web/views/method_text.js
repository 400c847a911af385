// method_text.js — the page's own words for the per-head products that "Inside the model" draws.
// Which method opens the page, each method's per-block factor and each norm-based stage's
// formula come from the engine's method table (methods(): featured, stepFormula, the stage
// option's choiceHelp); nothing in web/ names a method.

export const HEAD_PRODUCT_TEXT = {
  gradxa: '(∇A_b,h ⊙ A_b,h)⁺: each head’s gradient-weighted attention (its head mean is grad-rollout’s Ā_b)',
  gradxr: '(∇A_b,h ⊙ R_A_b,h)⁺: each head’s gradient-weighted relevance (its head mean is Ā_b)',
};
