"""methods_ref.py — independent float64 references of the attention- and LRP-based methods.

Implements, exactly as specified in the shared METHODS.md (written from the papers, no code
copied):
  raw-attention, rollout (Abnar & Zuidema 2020), attn-gradcam and transformer-attribution
  (Chefer, Gur & Wolf, CVPR 2021), grad-rollout (Chefer, Gur & Wolf, ICCV 2021),
  partial-lrp (Voita et al. 2019, as Chefer's baseline), lrp (full LRP to the pixels,
  Chefer's baseline with the z^B rule of Montavon et al. 2017) and attnlrp (Achtibat et al.,
  ICML 2024).

The relevance pass is explicit: one small function per rule, grouped into two rule sets
(`CHEFER` and `ATTNLRP`) applied by one propagation routine (`relevance_pass`) that walks the
recorded forward trace backwards and logs the relevance sum at every layer (the conservation
report). Only ∇A (∂y_t/∂A_b) comes from autograd. Every tensor keeps the dtype of the weights,
so the same code runs in float64 (the reference) or float32 (to measure conditioning).

Token maps are (H/p, W/p) = row 0 of an n×n matrix without column 0, reshaped row-major.
It is deliberately NOT a renderer: no upsampling, no min-max normalisation.
"""

import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vit_ref  # noqa: E402

CHEFER_STABILISER = 1e-9   # safe_divide of Chefer's code
ZB_STABILISER = 1e-9       # added to Z in the z^B rule (plain division there)
ATTNLRP_EPS = 1e-6         # AttnLRP epsilon, sign-aware, for every epsilon rule


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------

def token_map(mat, cfg):
    """Row 0 of an (n, n) matrix without column 0, as the (H/p, W/p) grid."""
    return mat[0, 1:].reshape(cfg.grid_h, cfg.grid_w)


def safe_divide(a, b):
    """Chefer's safe_divide: a / (b + 1e-9) where b ≠ 0, exactly 0 where b = 0 (not sign-aware).
    (The original also nudges a denominator that lands exactly on 0, i.e. b = −1e-9.)"""
    den = b + CHEFER_STABILISER
    den = torch.where(den == 0, den + CHEFER_STABILISER, den)
    return torch.where(b != 0, a / den, torch.zeros_like(a / den))


def stabilise(z, eps=ATTNLRP_EPS):
    """Sign-aware epsilon stabiliser: z + ε·sign(z), with sign(0) = +1."""
    return torch.where(z >= 0, z + eps, z - eps)


def total(r):
    return float(r.sum().item())


# ---------------------------------------------------------------------------------------------
# Rules of Chefer et al. 2021 (transformer-attribution, partial-lrp, lrp)
# ---------------------------------------------------------------------------------------------

def chefer_linear(R, x, W, b):
    """LRP-αβ, α=1 β=0, one shared denominator, bias ignored (Bach et al. 2015; Chefer 2021):
    Z = x⁺W⁺ᵀ + x⁻W⁻ᵀ, S = R/Z, R_in = x⁺⊙(S W⁺) + x⁻⊙(S W⁻).  R (.., out), x (.., in)."""
    Wp, Wn = W.clamp(min=0), W.clamp(max=0)
    xp, xn = x.clamp(min=0), x.clamp(max=0)
    Z = xp @ Wp.T + xn @ Wn.T
    S = safe_divide(R, Z)
    return xp * (S @ Wp) + xn * (S @ Wn)


def chefer_add(R, a, b):
    """Normalised Add (Chefer 2021, Sec. 3): Ra = a⊙R/(a+b), Rb = b⊙R/(a+b), then both rescaled
    so that |ΣRa| : |ΣRb| is kept and ΣRa + ΣRb = ΣR (sums over the whole tensor)."""
    S = safe_divide(R, a + b)
    Ra, Rb = a * S, b * S
    A, B, T = Ra.sum(), Rb.sum(), R.sum()
    a_fact = safe_divide(A.abs(), A.abs() + B.abs()) * T
    b_fact = safe_divide(B.abs(), A.abs() + B.abs()) * T
    return Ra * safe_divide(a_fact, A), Rb * safe_divide(b_fact, B)


def chefer_linear_separate(R, x, W, b):
    """The older LRP-α1β0 rule of Chefer 2021's "LRP" / "partial LRP" baseline rows (the paper's
    code's first rule set; METHODS.md), one denominator per sign, bias ignored:
    Z⁺ = x⁺W⁺ᵀ, Z⁻ = x⁻W⁻ᵀ, R_in = x⁺⊙((R/Z⁺) W⁺) + x⁻⊙((R/Z⁻) W⁻).
    Each sign passes all of R wherever its Z ≠ 0: not conserving (up to 2ΣR)."""
    Wp, Wn = W.clamp(min=0), W.clamp(max=0)
    xp, xn = x.clamp(min=0), x.clamp(max=0)
    return xp * (safe_divide(R, xp @ Wp.T) @ Wp) + xn * (safe_divide(R, xn @ Wn.T) @ Wn)


def chefer_add_plain(R, a, b):
    """The plain z rule on a sum (the older rules of the baseline rows): Ra = a⊙R/(a+b),
    Rb = b⊙R/(a+b), without the renormalisation of chefer_add."""
    S = safe_divide(R, a + b)
    return a * S, b * S


def chefer_product(R, X, Y):
    """Two-operand product Z = X·Y (batched matmul): R_X = X⊙(S Yᵀ), R_Y = Y⊙(Xᵀ S), S = R/Z;
    each operand receives the full ΣR, so both are halved (Chefer 2021, Eq. 9-10)."""
    Z = X @ Y
    S = safe_divide(R, Z)
    RX = X * (S @ Y.transpose(-1, -2))
    RY = Y * (X.transpose(-1, -2) @ S)
    return RX / 2, RY / 2


def identity_rule(R, *unused):
    """GELU, softmax, LayerNorm, dropout in Chefer's rule set: relevance passes unchanged."""
    return R


def chefer_layernorm(R, x, y, gamma, beta, eps):
    return R


def chefer_softmax(R, scores, probs):
    return R


def chefer_patch_zb(R, image, patches, W, b, cfg):
    """z^B rule at the patch embedding (Montavon et al. 2017), L/H = min/max of the normalised
    image (one scalar each), any channel count; bias ignored, plain division by Z + 1e-9:
    Z = xW − L·ΣW⁺ − H·ΣW⁻ + 1e-9, R = x⊙(S W) − L⊙(S W⁺) − H⊙(S W⁻).  R (P, d) → (C, H, W)."""
    L, H = image.min(), image.max()
    Wp, Wn = W.clamp(min=0), W.clamp(max=0)
    lo = torch.full_like(patches, 1.0) * L
    hi = torch.full_like(patches, 1.0) * H
    Z = patches @ W.T - lo @ Wp.T - hi @ Wn.T + ZB_STABILISER
    S = R / Z
    Rp = patches * (S @ W) - lo * (S @ Wp) - hi * (S @ Wn)          # (P, C·p·p)
    return vit_ref.col2im(Rp, cfg.channels, cfg.image_h, cfg.image_w, cfg.patch)


# ---------------------------------------------------------------------------------------------
# Rules of AttnLRP (Achtibat et al. 2024)
# ---------------------------------------------------------------------------------------------

def eps_linear(R, x, W, b):
    """Epsilon rule with the bias in the denominator (Bach 2015, AttnLRP Eq. 8):
    z = xWᵀ + b, R_in = x ⊙ ((R / stab(z)) W)."""
    z = x @ W.T + b
    return x * ((R / stabilise(z)) @ W)


def eps_add(R, a, b):
    """Epsilon rule on a sum of two tensors: R_a = a⊙R/stab(a+b), R_b = b⊙R/stab(a+b)."""
    S = R / stabilise(a + b)
    return a * S, b * S


def eps_product_uniform(R, X, Y):
    """Bilinear matmul (AttnLRP Prop. 3.3): epsilon rule on the sum, uniform split of each term:
    S = R / stab(2Z), R_X = X⊙(S Yᵀ), R_Y = Y⊙(Xᵀ S)."""
    Z = X @ Y
    S = R / stabilise(2.0 * Z)
    return X * (S @ Y.transpose(-1, -2)), Y * (X.transpose(-1, -2) @ S)


def attnlrp_softmax(R, scores, probs):
    """Softmax (AttnLRP Prop. 3.1, Taylor at the input with bias): R_in = s⊙(R − p·ΣR), per row."""
    return scores * (R - probs * R.sum(dim=-1, keepdim=True))


def attnlrp_layernorm(R, x, y, gamma, beta, eps):
    """LayerNorm: 1/std and γ constant, epsilon rule through the mean-centring with the output
    (β included) in the denominator: g = γ·rstd ⊙ R/stab(y), R_in = x ⊙ (g − mean(g))."""
    mu = x.mean(dim=-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((x - mu) ** 2).mean(dim=-1, keepdim=True) + eps)
    g = gamma * rstd * (R / stabilise(y))
    return x * (g - g.mean(dim=-1, keepdim=True))


def attnlrp_patch(R, image, patches, W, b, cfg):
    """Patch embedding as a Linear with the epsilon rule (bias in the denominator)."""
    Rp = eps_linear(R, patches, W, b)                                  # (P, C·p·p)
    return vit_ref.col2im(Rp, cfg.channels, cfg.image_h, cfg.image_w, cfg.patch)


class RuleSet:
    def __init__(self, name, seed, linear, add, product, softmax, layernorm, gelu, patch):
        self.name, self.seed = name, seed
        self.linear, self.add, self.product = linear, add, product
        self.softmax, self.layernorm, self.gelu, self.patch = softmax, layernorm, gelu, patch


CHEFER = RuleSet("chefer", "one-hot", chefer_linear, chefer_add, chefer_product,
                 chefer_softmax, chefer_layernorm, identity_rule, chefer_patch_zb)


def chefer_rules(linear_rule="shared", add_rule="normalised"):
    """Chefer's rule set with the linear rule `shared` (chefer_linear) or `separate`
    (chefer_linear_separate) and the add rule `normalised` (chefer_add) or `plain`."""
    if (linear_rule, add_rule) == ("shared", "normalised"):
        return CHEFER
    linear = {"shared": chefer_linear, "separate": chefer_linear_separate}[linear_rule]
    add = {"normalised": chefer_add, "plain": chefer_add_plain}[add_rule]
    return RuleSet("chefer-%s-%s" % (linear_rule, add_rule), "one-hot", linear, add,
                   chefer_product, chefer_softmax, chefer_layernorm, identity_rule, chefer_patch_zb)


ATTNLRP = RuleSet("attnlrp", "logit", eps_linear, eps_add, eps_product_uniform,
                  attnlrp_softmax, attnlrp_layernorm, identity_rule, attnlrp_patch)


# ---------------------------------------------------------------------------------------------
# The propagation
# ---------------------------------------------------------------------------------------------

class Log:
    """The conservation report: per layer, Σ relevance arriving from above and leaving below."""

    def __init__(self):
        self.rows = []

    def __call__(self, layer, r_out, *r_in):
        self.rows.append({"layer": layer, "relevance_out": total(r_out),
                          "relevance_in": sum(total(r) for r in r_in)})


def relevance_pass(w, cfg, tr, target, rules, to_pixels=False):
    """Propagates relevance from the logits through the traced forward pass.

    Returns dict: R_A (list of (H, n, n) per block, taken right after the A·v product rule),
    R_tokens (n, d) at E0, R_image (C, H, W) if to_pixels, log rows, block_input_sums.
    """
    with torch.no_grad():
        d, H, dh, n = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens
        log = Log()
        logits = tr["logits"].detach()
        R = torch.zeros_like(logits)
        R[target] = 1.0 if rules.seed == "one-hot" else logits[target]
        seed_sum = total(R)

        pooled = tr["pooled"].detach()
        R_pooled = rules.linear(R, pooled, w.head_w, w.head_b)                 # (d)
        log("head", R, R_pooled)
        R_lnf = torch.zeros_like(tr["ln_f"].detach())                          # (n, d)
        R_lnf[0] = R_pooled                                                    # CLS pooling
        log("pool", R_pooled, R_lnf)
        R_x = rules.layernorm(R_lnf, tr["x_final"].detach(), tr["ln_f"].detach(),
                              w.norm_w, w.norm_b, cfg.ln_eps)
        log("norm", R_lnf, R_x)

        R_A = [None] * cfg.depth
        block_sums = [None] * cfg.depth
        for b in reversed(range(cfg.depth)):
            bt = {k: v.detach() for k, v in tr["blocks"][b].items()}
            bp = w.blocks[b]
            pre = "blocks.%d." % b
            # x_{b+1} = x' + f
            R_res2, R_mlp = rules.add(R_x, bt["x_mid"], bt["mlp_out"])
            log(pre + "add2", R_x, R_res2, R_mlp)
            R_act = rules.linear(R_mlp, bt["act"], bp["fc2_w"], bp["fc2_b"])
            log(pre + "mlp.fc2", R_mlp, R_act)
            R_fc1 = rules.gelu(R_act, bt["fc1"])
            log(pre + "mlp.act", R_act, R_fc1)
            R_ln2 = rules.linear(R_fc1, bt["ln2"], bp["fc1_w"], bp["fc1_b"])
            log(pre + "mlp.fc1", R_fc1, R_ln2)
            R_mid_f = rules.layernorm(R_ln2, bt["x_mid"], bt["ln2"], bp["norm2_w"],
                                      bp["norm2_b"], cfg.ln_eps)
            log(pre + "norm2", R_ln2, R_mid_f)
            R_mid = R_res2 + R_mid_f                                           # clone = sum
            log(pre + "clone2", R_res2 + R_mid_f, R_mid)
            # x' = x_b + o
            R_res1, R_o = rules.add(R_mid, bt["x"], bt["attn_out"])
            log(pre + "add1", R_mid, R_res1, R_o)
            R_ctx = rules.linear(R_o, bt["ctx"], bp["proj_w"], bp["proj_b"])   # (n, d)
            log(pre + "attn.proj", R_o, R_ctx)
            R_ctx_h = R_ctx.reshape(n, H, dh).permute(1, 0, 2)                 # (H, n, d_h)
            R_attn, R_v = rules.product(R_ctx_h, bt["attn"], bt["v"])          # A·v
            R_A[b] = R_attn
            log(pre + "attn.A_v", R_ctx_h, R_attn, R_v)
            R_scores = rules.softmax(R_attn, bt["scores"], bt["attn"])
            log(pre + "attn.softmax", R_attn, R_scores)
            # scores = (q·kᵀ)/√d_h: the constant factor passes relevance unchanged
            R_q, R_kT = rules.product(R_scores, bt["q"], bt["k"].transpose(1, 2))
            log(pre + "attn.q_kT", R_scores, R_q, R_kT)
            R_k = R_kT.transpose(1, 2)
            heads_to_tokens = lambda r: r.permute(1, 0, 2).reshape(n, d)
            R_qkv = torch.cat([heads_to_tokens(R_q), heads_to_tokens(R_k),
                               heads_to_tokens(R_v)], dim=1)                   # (n, 3d)
            R_ln1 = rules.linear(R_qkv, bt["ln1"], bp["qkv_w"], bp["qkv_b"])
            log(pre + "attn.qkv", R_qkv, R_ln1)
            R_x_att = rules.layernorm(R_ln1, bt["x"], bt["ln1"], bp["norm1_w"],
                                      bp["norm1_b"], cfg.ln_eps)
            log(pre + "norm1", R_ln1, R_x_att)
            R_x = R_res1 + R_x_att                                             # clone = sum
            log(pre + "clone1", R_res1 + R_x_att, R_x)
            block_sums[b] = total(R_x)

        out = {"R_A": R_A, "R_tokens": R_x, "seed_sum": seed_sum,
               "block_input_sums": block_sums, "log": log.rows}
        if to_pixels:
            # E0 = [cls; embed] + pos_embed
            R_tok, R_pos = rules.add(R_x, tr["tokens_nopos"].detach(), w.pos)
            log("pos_embed.add", R_x, R_tok, R_pos)
            R_embed = R_tok[1:]                                                # drop CLS
            log("drop_cls", R_tok, R_embed)
            image = tr["input"].detach()
            R_img = rules.patch(R_embed, image, tr["patches"].detach(), w.patch_w, w.patch_b,
                                cfg)
            log("patch_embed", R_embed, R_img)
            out["R_image"] = R_img
        return out


# ---------------------------------------------------------------------------------------------
# Methods
# ---------------------------------------------------------------------------------------------

def head_mean(t):
    return t.mean(dim=0)


def rollout_matrix(mats, start_layer):
    """C = M_L · … · M_s (each later block multiplies on the left)."""
    C = mats[start_layer]
    for M in mats[start_layer + 1:]:
        C = M @ C
    return C


def raw_attention(tr, cfg):
    """E_h[A_L][0, 1:]."""
    return token_map(head_mean(tr["blocks"][-1]["attn"].detach()), cfg)


def rollout(tr, cfg, fusion="mean", discard_ratio=0.0, start_layer=0):
    """Attention rollout (Abnar & Zuidema 2020): Â_b = rownorm(fuse_h(A_b) + I)."""
    mats = []
    n = cfg.tokens
    for bt in tr["blocks"]:
        A = bt["attn"].detach()
        if fusion == "mean":
            F = A.mean(dim=0)
        elif fusion == "max":
            F = A.max(dim=0).values
        elif fusion == "min":
            F = A.min(dim=0).values
        else:
            raise ValueError(fusion)
        if discard_ratio > 0:
            # the floor(ratio·n²) lowest entries (ties: lower flat index first), except (0, 0)
            flat = F.reshape(-1).clone()
            count = int(flat.numel() * discard_ratio)
            order = np.argsort(flat.cpu().numpy(), kind="stable")[:count]
            order = order[order != 0]
            flat[torch.as_tensor(order, dtype=torch.long)] = 0
            F = flat.reshape(n, n)
        M = F + torch.eye(n, dtype=F.dtype)
        mats.append(M / M.sum(dim=-1, keepdim=True))
    return token_map(rollout_matrix(mats, start_layer), cfg)


def attn_gradcam(tr, cfg, grad_attn):
    """Chefer's GradCAM baseline on the last block: w_h = mean_{j≥1} ∇A_L[h,0,j],
    map = (E_h[w_h · A_L[h,0,1:]])⁺."""
    A = tr["blocks"][-1]["attn"].detach()
    G = grad_attn[-1]
    wts = G[:, 0, 1:].mean(dim=-1, keepdim=True)                        # (H, 1)
    m = (wts * A[:, 0, 1:]).mean(dim=0).clamp(min=0)
    return m.reshape(cfg.grid_h, cfg.grid_w)


def grad_rollout(tr, cfg, grad_attn):
    """Chefer et al. ICCV 2021: R = I; R ← R + E_h[(∇A_b ⊙ A_b)⁺]·R in forward order."""
    n = cfg.tokens
    R = torch.eye(n, dtype=grad_attn[0].dtype)
    for bt, G in zip(tr["blocks"], grad_attn):
        Abar = head_mean((G * bt["attn"].detach()).clamp(min=0))
        R = R + Abar @ R
    return token_map(R, cfg)


def transformer_attribution(cfg, grad_attn, R_A, start_layer=0, use_grad=True, block=None,
                            weight=None, attn=None):
    """Chefer, Gur & Wolf 2021: Ā_b = E_h[(∇A_b ⊙ R_{A_b})⁺], C = Π (I + Ā_b) from start_layer,
    no row normalisation; `block` = one block only (the map is then Ā_b[0, 1:]).
    `weight` (overrides use_grad): "grad" the method, "none" E_h[(R_{A_b})⁺] (the "without
    gradients" ablation as the paper's code runs it), "attn" E_h[(A_b ⊙ R_{A_b})⁺] (the ablation
    as the paper's text states it: ∇A replaced by A; `attn` = the (H, n, n) A_b per block)."""
    if weight is None:
        weight = "grad" if use_grad else "none"
    n = cfg.tokens
    eye = torch.eye(n, dtype=R_A[0].dtype)
    bars = []
    for b, RA in enumerate(R_A):
        cam = {"grad": lambda: grad_attn[b] * RA, "none": lambda: RA,
               "attn": lambda: attn[b] * RA}[weight]()
        bars.append(head_mean(cam.clamp(min=0)))
    if block is not None:
        return token_map(bars[block] + eye, cfg)
    return token_map(rollout_matrix([eye + Ab for Ab in bars], start_layer), cfg)


def partial_lrp(cfg, R_A):
    """Voita et al. 2019 as Chefer's baseline: E_h[(R_{A_L})⁺][0, 1:]."""
    return token_map(head_mean(R_A[-1].clamp(min=0)), cfg)


def lrp_pixels(R_image):
    """Full LRP: the input relevance summed over channels → (H, W)."""
    return R_image.sum(dim=0)


def attnlrp_maps(cfg, R_image, R_tokens):
    """AttnLRP outputs: the pixel map Σ_c (x ⊙ modified gradient) = Σ_c R_x, (H, W), and the
    token map Σ_d R_{E0}[1:], (H/p, W/p) — the relevance of each patch token at the input of
    the first block (position embedding included), CLS dropped."""
    return R_image.sum(dim=0), R_tokens[1:].sum(dim=1).reshape(cfg.grid_h, cfg.grid_w)


# ---------------------------------------------------------------------------------------------
# One image, every method
# ---------------------------------------------------------------------------------------------

class Explainer:
    """Runs the forward/backward once per (image, target) and exposes every method."""

    def __init__(self, params, cfg, image, target=None, dtype=torch.float64, head_mask=None):
        """head_mask: None, or (depth, heads) 0 / 1 — the heads switched off (vit_ref.forward);
        every method then explains the masked model."""
        self.cfg = cfg
        self.w = vit_ref.Weights(params, cfg, dtype)
        self.tr, self.target, self.grad_input, self.grad_attn = \
            vit_ref.logits_and_grads(self.w, cfg, image, target, head_mask)
        self._chefer = {}
        self._attnlrp = None

    def chefer_pass(self, linear_rule="shared", add_rule="normalised"):
        key = (linear_rule, add_rule)
        if key not in self._chefer:
            self._chefer[key] = relevance_pass(self.w, self.cfg, self.tr, self.target,
                                               chefer_rules(linear_rule, add_rule), to_pixels=True)
        return self._chefer[key]

    @property
    def chefer(self):
        return self.chefer_pass()

    @property
    def attnlrp(self):
        if self._attnlrp is None:
            self._attnlrp = relevance_pass(self.w, self.cfg, self.tr, self.target, ATTNLRP,
                                           to_pixels=True)
        return self._attnlrp

    def run(self, method, **opt):
        """`opt`: the method's options; linear_rule / add_rule pick Chefer's rule variant."""
        cfg = self.cfg
        rules = {k: opt.pop(k) for k in ("linear_rule", "add_rule") if k in opt}
        chefer = self.chefer_pass(**rules) if method in (
            "transformer-attribution", "partial-lrp", "lrp") else None
        if method == "raw-attention":
            m = raw_attention(self.tr, cfg)
        elif method == "rollout":
            m = rollout(self.tr, cfg, **opt)
        elif method == "attn-gradcam":
            m = attn_gradcam(self.tr, cfg, self.grad_attn)
        elif method == "grad-rollout":
            m = grad_rollout(self.tr, cfg, self.grad_attn)
        elif method == "transformer-attribution":
            attn = [bt["attn"].detach() for bt in self.tr["blocks"]]
            m = transformer_attribution(cfg, self.grad_attn, chefer["R_A"], attn=attn, **opt)
        elif method == "partial-lrp":
            m = partial_lrp(cfg, chefer["R_A"])
        elif method == "lrp":
            m = lrp_pixels(chefer["R_image"])
        elif method == "attnlrp":
            m = attnlrp_maps(cfg, self.attnlrp["R_image"], self.attnlrp["R_tokens"])[0]
        elif method == "attnlrp-tokens":
            m = attnlrp_maps(cfg, self.attnlrp["R_image"], self.attnlrp["R_tokens"])[1]
        else:
            raise ValueError(method)
        return m.detach().cpu().numpy()

    def conservation(self, method, linear_rule="shared", add_rule="normalised"):
        """The per-layer relevance sums of an LRP method's pass (a JSON-able dict)."""
        p = self.attnlrp if method == "attnlrp" else self.chefer_pass(linear_rule, add_rule)
        rows = p["log"]
        if method in ("transformer-attribution", "partial-lrp"):
            rows = [r for r in rows if r["layer"] not in ("pos_embed.add", "drop_cls",
                                                          "patch_embed")]
        out = {"method": method, "target": self.target,
               "seed": "one-hot (1.0)" if method != "attnlrp" else "target logit value",
               "seed_sum": p["seed_sum"],
               "block_input_sums": p["block_input_sums"],
               "tokens_sum": total(p["R_tokens"]),
               "layers": rows}
        if method in ("lrp", "attnlrp"):
            out["image_sum"] = total(p["R_image"])
        return out
