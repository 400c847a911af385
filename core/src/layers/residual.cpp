// residual.cpp — the relevance rules of an elementwise sum of two tensors: the two residual adds
// of every block and the position-embedding add. (The forward pass is a plain sum and the
// backward pass a copy of the gradient to both operands, inline in vit.cpp.)
#include <cmath>

#include "vitlens/layers/layers.h"

namespace vitlens {

void add_relevance(MatD& r_a, MatD& r_b, const MatD& r, const MatD& a, const MatD& b, AddRule rule) {
  r_a.resize(a.rows(), a.cols());
  r_b.resize(a.rows(), a.cols());
  if (rule == AddRule::epsilon) {
    // ε rule on out = a + b (AttnLRP): R_a = a ⊙ R/stab(a + b), R_b = b ⊙ R/stab(a + b)
    for (Eigen::Index i = 0; i < a.size(); ++i) {
      const double q = r.data()[i] / stabilise(a.data()[i] + b.data()[i]);
      r_a.data()[i] = a.data()[i] * q;
      r_b.data()[i] = b.data()[i] * q;
    }
    return;
  }
  // Chefer et al. 2021: R_a = a ⊙ R/(a+b), R_b = b ⊙ R/(a+b) (safe_divide); the plain z rule
  // stops here (the older rules of the paper's LRP baselines, the "Add" of the original code's
  // first rule set); the normalised rule goes on: with
  // A = ΣR_a, B = ΣR_b, T = ΣR over the whole tensor: R_a ← R_a·(|A|/(|A|+|B|)·T)/A, R_b likewise,
  // so that ΣR_a + ΣR_b = T and the share of each operand is |A| : |B|.
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double q = safe_divide(r.data()[i], a.data()[i] + b.data()[i]);
    r_a.data()[i] = a.data()[i] * q;
    r_b.data()[i] = b.data()[i] * q;
  }
  if (rule == AddRule::plain) return;
  const double A = r_a.sum(), B = r_b.sum(), T = r.sum();
  const double a_fact = safe_divide(std::fabs(A), std::fabs(A) + std::fabs(B)) * T;
  const double b_fact = safe_divide(std::fabs(B), std::fabs(A) + std::fabs(B)) * T;
  r_a *= safe_divide(a_fact, A);
  r_b *= safe_divide(b_fact, B);
}

}  // namespace vitlens
