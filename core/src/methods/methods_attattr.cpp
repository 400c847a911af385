// methods_attattr.cpp — the attattr method (Hao, Dong, Wei & Xu, AAAI 2021) behind explain():
// the per-block attribution matrices (the batched pass of attattr.cpp) and the image map.
#include "methods_internal.h"
#include "vitlens/methods/attattr.h"

namespace vitlens::detail {

// Attr_l = A_l ⊙ (1/m)·Σ_k ∂F(α_k·A_l)/∂A_l, α_k = k/m, F = the target's probability; map = the
// CLS row of the rollout of rownorm(I + M_l⁺/max M_l⁺), M_l⁺ = Σ_h Attr_{l,h}⁺ (attattr.h).
void attattr(Explanation& out, const Model& m, ExplainState& st, const MethodOptions& opt) {
  // opt.steps: m, resolved by explain() from the method's option table (the paper's 20 by default)
  // st.attattr: what an earlier call (stopped, or for the same target and steps) computed
  out.attattr = attattr_blocks(m, st.trace, out.target, opt.steps, opt.threads, opt.progress, &st.attattr);
  out.token_map = attattr_token_map(out.attattr, m.config);
  add_attention_intermediates(out, st.trace, nullptr);
}

}  // namespace vitlens::detail
