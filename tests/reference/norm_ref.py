"""norm_ref.py — an independent float64 reference of the norm-based maps (Kobayashi et al.).

Written from the papers (Kobayashi, Kuribayashi, Yokoi & Inui: "Attention is Not Only a Weight",
EMNLP 2020; "Incorporating Residual and Normalization Layers into Analysis of Masked Language
Models", EMNLP 2021; "Analyzing Feed-Forward Blocks in Transformers through the Lens of Attention
Maps", ICLR 2024) and the project's METHODS.md ("Norm-based"). It shares no code with the C++
engine and deliberately takes the most literal route: every piece z_{i←j} of every stage is
materialised as a full (n, n, d) (or (n, n, mlp)) array, which is fine for the small fixture
shapes and is exactly what the engine must avoid.

Per block, with the block input tokens x_j as sources (β1 and b_V stay inside the pieces, since
they are part of the value transform of x_j; see METHODS.md):
  atb            a_{i←j}  = Σ_h A_h[i, j]·((LN1(x_j)·W_V^hᵀ + b_V^h)·W_O^hᵀ)          bias: b_O
  atb-res        x'_{i←j} = a_{i←j} + δ_ij·x_i                                          bias: b_O
  atb-res-ln     g_{i←j}  = γ2 ⊙ (x'_{i←j} − mean(x'_{i←j})) / s_i,
                 s_i = sqrt(var(x'_i) + eps) of the whole pre-LN vector x'_i
                                                   bias: γ2 ⊙ (b_O − mean(b_O)) / s_i + β2
  atb-res-ln-ff  h_{i←j}  = g_{i←j}·W1ᵀ;  h_i = LN2(x'_i)·W1ᵀ + b1 (the actual pre-activation);
                 f_{i←j}  = (h_{i←j} ⊙ GELU(h_i)/h_i)·W2ᵀ   (integrated gradients on GELU with
                 a zero baseline, closed form; GELU(h)/h → 1/2 as h → 0)
                                 bias: (hb_i ⊙ GELU(h_i)/h_i)·W2ᵀ + b2, hb_i = bias_ln_i·W1ᵀ + b1
  layer          y_{i←j}  = x'_{i←j} + f_{i←j}                    bias: b_O + bias_ff_i
so that at every stage Σ_j z_{i←j} + bias_i is exactly the actual activation (x'_i, LN2(x'_i),
mlp_out_i, the block output).

Per head (the atb stage split by head, Kobayashi et al. 2020's ‖α f(x)‖): the piece
a^h_{i←j} = A_h[i, j]·((LN1(x_j)·W_V^hᵀ + b_V^h)·W_O^hᵀ), map N_h[i, j] = ‖a^h_{i←j}‖₂, formed here as the
full (H, n, n, d) array of pieces (Σ_h a^h_{i←j} = a_{i←j} is checked).

Maps N[i, j] = ‖z_{i←j}‖₂; mixing ratio r_i = ‖Σ_{j≠i} z_{i←j}‖ / (‖Σ_{j≠i} z_{i←j}‖ + ‖z_{i←i}‖).
Token map of a stage: row 0, columns 1: of C = N̂_L·…·N̂_1 with N̂_b = N_b / rowsum(N_b); for the
`atb` stage (no residual inside the map) the identity is mixed in as in attention rollout:
N̂_b = ½·N_b / rowsum(N_b) + ½·I.
"""

import math

import numpy as np

STAGES = ("atb", "atb-res", "atb-res-ln", "atb-res-ln-ff", "layer")


def _np(t):
    """A torch tensor or array → float64 numpy array."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    return np.asarray(t, dtype=np.float64)


def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_ratio(h):
    """GELU(h)/h elementwise; the limit 1/2 where |h| is tiny."""
    out = np.full_like(h, 0.5)
    big = np.abs(h) > 1e-12
    out[big] = _gelu(h[big]) / h[big]
    return out


def block_pieces(params, cfg, b, x):
    """All pieces of block b for the block input x (n, d), float64.

    Returns (pieces, bias, actual): pieces[stage] (n, n, d) indexed [i, j], bias[stage] (n, d),
    actual[stage] (n, d) = the real activation the stage decomposes (recomputed here).
    """
    p = lambda s: np.asarray(params["blocks.%d.%s" % (b, s)], dtype=np.float64)
    d, H, dh, n, eps = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens, cfg.ln_eps
    qkv_w, qkv_b = p("attn.qkv.weight"), p("attn.qkv.bias")          # (3d, d), (3d)
    proj_w, proj_b = p("attn.proj.weight"), p("attn.proj.bias")      # (d, d), (d)
    g1, be1, g2, be2 = p("norm1.weight"), p("norm1.bias"), p("norm2.weight"), p("norm2.bias")
    w1, b1, w2, b2 = p("mlp.fc1.weight"), p("mlp.fc1.bias"), p("mlp.fc2.weight"), p("mlp.fc2.bias")

    def ln(v, gamma, beta):
        mu = v.mean(-1, keepdims=True)
        s = np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + eps)
        return (v - mu) / s * gamma + beta, s

    u, _ = ln(x, g1, be1)                                   # (n, d)
    qkv = u @ qkv_w.T + qkv_b                               # (n, 3d)
    q = qkv[:, :d].reshape(n, H, dh).transpose(1, 0, 2)     # (H, n, dh)
    k = qkv[:, d:2 * d].reshape(n, H, dh).transpose(1, 0, 2)
    v = qkv[:, 2 * d:].reshape(n, H, dh).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)            # (H, n, n)
    s = s - s.max(-1, keepdims=True)
    A = np.exp(s)
    A = A / A.sum(-1, keepdims=True)                        # (H, n, n)

    # f_h(x_j) = v_h[j]·W_O^hᵀ, W_O^h = proj_w[:, h·dh:(h+1)·dh]
    fx = np.stack([v[h] @ proj_w[:, h * dh:(h + 1) * dh].T for h in range(H)])   # (H, n, d)
    head_pieces = A[:, :, :, None] * fx[:, None, :, :]      # (H, n, n, d)  [h, i, j]
    atb = np.einsum("hij,hjd->ijd", A, fx)                  # (n, n, d)  [i, j]
    eye = np.eye(n)
    res = atb + eye[:, :, None] * x[None, :, :]             # x'_{i←j}: δ_ij·x_j = δ_ij·x_i
    x_mid = res.sum(1) + proj_b                             # (n, d)
    ln2, s2 = ln(x_mid, g2, be2)                            # s2 (n, 1)
    lnp = (res - res.mean(-1, keepdims=True)) / s2[:, None, :] * g2    # (n, n, d)
    ln_bias = (proj_b - proj_b.mean()) / s2 * g2 + be2      # (n, d)
    h_full = ln2 @ w1.T + b1                                # (n, mlp)
    ratio = gelu_ratio(h_full)                              # (n, mlp)
    h_pieces = lnp @ w1.T                                   # (n, n, mlp)
    ff = (h_pieces * ratio[:, None, :]) @ w2.T              # (n, n, d)
    hb = ln_bias @ w1.T + b1                                # (n, mlp)
    ff_bias = (hb * ratio) @ w2.T + b2                      # (n, d)
    mlp_out = _gelu(h_full) @ w2.T + b2
    layer = res + ff
    bO = np.broadcast_to(proj_b, (n, d))
    pieces = dict(zip(STAGES, (atb, res, lnp, ff, layer)))
    bias = dict(zip(STAGES, (bO, bO, ln_bias, ff_bias, bO + ff_bias)))
    actual = dict(zip(STAGES, (x_mid - x, x_mid, ln2, mlp_out, x_mid + mlp_out)))
    return pieces, bias, actual, A, head_pieces


def ig_riemann_ff(params, cfg, b, g_pieces, g_bias, steps=4000):
    """Integrated gradients of the FF block (before b2) on the pieces of one row, by a midpoint
    Riemann sum along α·(all pieces + bias), α ∈ [0, 1] — a check of the closed form.
    g_pieces (n, d), g_bias (d). Returns (n, d) and the bias share (d), without b2."""
    p = lambda s: np.asarray(params["blocks.%d.%s" % (b, s)], dtype=np.float64)
    w1, b1, w2 = p("mlp.fc1.weight"), p("mlp.fc1.bias"), p("mlp.fc2.weight")
    hp = g_pieces @ w1.T                       # (n, mlp)
    hb = g_bias @ w1.T + b1                    # (mlp), b1 rides with the bias piece
    h = hp.sum(0) + hb
    dgelu = lambda z: 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2))) + \
        z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    avg = np.zeros_like(h)
    for t in range(steps):
        avg += dgelu((t + 0.5) / steps * h)
    avg /= steps
    return (hp * avg) @ w2.T, (hb * avg) @ w2.T


def mixing_ratio(pieces):
    """pieces (n, n, d) [i, j] → r (n)."""
    n = pieces.shape[0]
    tot = pieces.sum(1)
    diag = pieces[np.arange(n), np.arange(n)]
    other = np.linalg.norm(tot - diag, axis=-1)
    own = np.linalg.norm(diag, axis=-1)
    return other / (other + own)


def rollout_token_map(maps, stage, cfg):
    """maps: list over blocks of (n, n) N_b for `stage` → (grid_h, grid_w)."""
    n = cfg.tokens
    C = np.eye(n)
    for N in maps:
        Nh = N / N.sum(1, keepdims=True)
        if stage == "atb":
            Nh = 0.5 * Nh + 0.5 * np.eye(n)
        C = Nh @ C
    return C[0, 1:].reshape(cfg.grid_h, cfg.grid_w)


def norm_based(w, params, cfg, image):
    """Everything for one input. `w` is a vit_ref.Weights (float64), used only for the forward
    pass that gives each block's input; the decomposition is recomputed here from `params`.

    Returns dict: maps (L, 5, n, n), mixing (L, 5, n), heads (L, H, n, n) the atb map per head,
    token maps per stage, identity residuals.
    """
    import vit_ref  # the float64 reference forward pass (independent of the engine)
    import torch
    with torch.no_grad():
        tr = vit_ref.forward(w, cfg, image)
    L, n = cfg.depth, cfg.tokens
    maps = np.zeros((L, len(STAGES), n, n))
    heads = np.zeros((L, cfg.heads, n, n))
    mixing = np.zeros((L, len(STAGES), n))
    worst_identity = 0.0
    worst_trace = 0.0
    for b in range(L):
        x = _np(tr["blocks"][b]["x"])
        pieces, bias, actual, A, head_pieces = block_pieces(params, cfg, b, x)
        heads[b] = np.linalg.norm(head_pieces, axis=-1)
        worst_identity = max(worst_identity, np.abs(head_pieces.sum(0) - pieces["atb"]).max() /
                             np.abs(pieces["atb"]).max())
        worst_trace = max(worst_trace, np.abs(A - _np(tr["blocks"][b]["attn"])).max())
        nxt = _np(tr["blocks"][b + 1]["x"]) if b + 1 < L else _np(tr["x_final"])
        worst_trace = max(worst_trace, np.abs(actual["layer"] - nxt).max())
        for s, st in enumerate(STAGES):
            maps[b, s] = np.linalg.norm(pieces[st], axis=-1)
            mixing[b, s] = mixing_ratio(pieces[st])
            err = np.abs(pieces[st].sum(1) + bias[st] - actual[st]).max()
            worst_identity = max(worst_identity, err / np.abs(actual[st]).max())
    tokens = {st: rollout_token_map([maps[b, s] for b in range(L)], st, cfg)
              for s, st in enumerate(STAGES)}
    return dict(maps=maps, mixing=mixing, heads=heads, tokens=tokens, worst_identity=worst_identity,
                worst_trace=worst_trace, trace=tr)


# ---- One image's feed-forward effect (the page's "The feed-forward's effect"; eval/norm_ff.h) ----

def average_ranks(v):
    """Ranks 1…m of the values of v, ties sharing the mean of their ranks (written out, not scipy)."""
    v = np.asarray(v, dtype=np.float64).ravel()
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    i = 0
    while i < len(v):
        j = i
        while j < len(v) and v[order[j]] == v[order[i]]:
            j += 1
        ranks[order[i:j]] = 0.5 * (i + 1 + j)
        i = j
    return ranks


def spearman(a, b):
    """Spearman's ρ: the Pearson correlation of the average ranks (1 when both are constant,
    0 when one is)."""
    ra, rb = average_ranks(a), average_ranks(b)
    da, db = ra - ra.mean(), rb - rb.mean()
    saa, sbb = (da * da).sum(), (db * db).sum()
    if saa == 0 and sbb == 0:
        return 1.0
    if saa == 0 or sbb == 0:
        return 0.0
    return float((da * db).sum() / math.sqrt(saa * sbb))


def context_shares(N):
    """s[i, j] = N[i, j] / Σ_{k≠i} N[i, k] for j ≠ i, s[i, i] = 0: key j's share of query i's context."""
    s = np.array(N, dtype=np.float64)
    np.fill_diagonal(s, 0.0)
    tot = s.sum(1, keepdims=True)
    return np.divide(s, tot, out=np.zeros_like(s), where=tot > 0)


def image_summary(maps, mixing, before=2, after=3):
    """Per block, one image's transition from stage `before` to `after` (default atb-res-ln →
    atb-res-ln-ff, the FF). maps (L, 5, n, n), mixing (L, 5, n) →
    shares (L, 2, n, n): context shares before, after;
    rho (L, n + 2): ρ_i of every query row over all n keys, then ρ of the flattened maps, then mean_i ρ_i;
    mixing_mean (L, 5): the mean over tokens of each stage's mixing ratio."""
    L, _, n, _ = maps.shape
    shares = np.zeros((L, 2, n, n))
    rho = np.zeros((L, n + 2))
    for b in range(L):
        A, B = maps[b, before], maps[b, after]
        shares[b, 0], shares[b, 1] = context_shares(A), context_shares(B)
        for i in range(n):
            rho[b, i] = spearman(A[i], B[i])
        rho[b, n] = spearman(A.ravel(), B.ravel())
        rho[b, n + 1] = rho[b, :n].mean()
    return shares, rho, mixing.mean(2)
