"""check_reference.py — self-checks of the Python reference (not of the engine).

Each LRP rule of methods_ref.py is re-derived here in explicit element-wise form (loops over
the sums of the papers' formulas) on small random tensors and compared; the im2col / col2im
pair and the z^B rule are compared with torch's conv2d / conv_transpose2d; properties
(conservation of the Chefer rules, the halving of products) are asserted; and the ViT's
gradients are compared with central differences (make_engine_fixtures.py --check does that
on the fixture models).

Run:  /usr/bin/python3 tests/reference/check_reference.py
"""

import itertools
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import methods_ref as M  # noqa: E402
import vit_ref  # noqa: E402

torch.manual_seed(0)
D = torch.float64


def close(a, b, tol=1e-10, what=""):
    err = float((a - b).abs().max() / max(1e-30, float(b.abs().max())))
    assert err < tol, "%s: rel err %.3g" % (what, err)
    print("ok  %-42s rel err %.1e" % (what, err))


def explicit_chefer_linear(R, x, W):
    n, i_dim = x.shape
    o_dim = W.shape[0]
    out = torch.zeros_like(x)
    for r in range(n):
        for j in range(o_dim):
            z = sum((max(x[r, i], 0) * max(W[j, i], 0) + min(x[r, i], 0) * min(W[j, i], 0))
                    for i in range(i_dim))
            for i in range(i_dim):
                c = max(x[r, i], 0) * max(W[j, i], 0) + min(x[r, i], 0) * min(W[j, i], 0)
                out[r, i] += c / (z + 1e-9) * R[r, j] if z != 0 else 0.0
    return out


def explicit_separate_linear(R, x, W):
    """The older baseline rule: Z⁺_j = Σ_i x_i⁺W_ji⁺, Z⁻_j = Σ_i x_i⁻W_ji⁻, and
    R_i = Σ_j (x_i⁺W_ji⁺/Z⁺_j + x_i⁻W_ji⁻/Z⁻_j)·R_j (safe_divide: a zero Z passes nothing)."""
    n, i_dim = x.shape
    out = torch.zeros_like(x)
    for r in range(n):
        for j in range(W.shape[0]):
            pos = [max(x[r, i], 0) * max(W[j, i], 0) for i in range(i_dim)]
            neg = [min(x[r, i], 0) * min(W[j, i], 0) for i in range(i_dim)]
            zp, zn = sum(pos), sum(neg)
            for i in range(i_dim):
                if zp != 0:
                    out[r, i] += pos[i] / (zp + 1e-9) * R[r, j]
                if zn != 0:
                    out[r, i] += neg[i] / (zn + 1e-9) * R[r, j]
    return out


def explicit_eps_linear(R, x, W, b, eps):
    n, i_dim = x.shape
    out = torch.zeros_like(x)
    for r in range(n):
        for j in range(W.shape[0]):
            z = sum(x[r, i] * W[j, i] for i in range(i_dim)) + b[j]
            z = z + eps if z >= 0 else z - eps
            for i in range(i_dim):
                out[r, i] += x[r, i] * W[j, i] / z * R[r, j]
    return out


def explicit_product(R, X, Y, chefer):
    """Z_ik = Σ_j X_ij Y_jk; each term X_ij Y_jk gets R_ik·term/Z_ik, split half/half."""
    RX, RY = torch.zeros_like(X), torch.zeros_like(Y)
    for i, k in itertools.product(range(X.shape[0]), range(Y.shape[1])):
        z = sum(X[i, j] * Y[j, k] for j in range(X.shape[1]))
        if chefer:
            share = R[i, k] / (z + 1e-9) if z != 0 else 0.0
        else:
            z2 = 2 * z
            share = R[i, k] / (z2 + 1e-6 if z2 >= 0 else z2 - 1e-6) * 2
        for j in range(X.shape[1]):
            RX[i, j] += 0.5 * X[i, j] * Y[j, k] * share
            RY[j, k] += 0.5 * X[i, j] * Y[j, k] * share
    return RX, RY


def main():
    x = torch.randn(3, 5, dtype=D)
    W = torch.randn(4, 5, dtype=D)
    b = torch.randn(4, dtype=D)
    R = torch.randn(3, 4, dtype=D)

    close(M.chefer_linear(R, x, W, b), explicit_chefer_linear(R, x, W), what="chefer_linear")
    Rin = M.chefer_linear(R, x, W, b)
    close(Rin.sum(1), R.sum(1), 1e-7, "chefer_linear conserves per row")
    close(M.eps_linear(R, x, W, b), explicit_eps_linear(R, x, W, b, 1e-6), what="eps_linear")
    close(M.chefer_linear_separate(R, x, W, b), explicit_separate_linear(R, x, W),
          what="chefer_linear_separate")
    # Each sign passes all of R_j on where its Z_j ≠ 0: Σ R_in = Σ_j R_j·([Z⁺_j ≠ 0] + [Z⁻_j ≠ 0]).
    zp = x.clamp(min=0) @ W.clamp(min=0).T
    zn = x.clamp(max=0) @ W.clamp(max=0).T
    passed = (R * ((zp != 0).to(D) + (zn != 0).to(D))).sum(1)
    close(M.chefer_linear_separate(R, x, W, b).sum(1), passed, 1e-7,
          "chefer_linear_separate passes ΣR per sign")

    X, Y, Rp = torch.randn(3, 4, dtype=D), torch.randn(4, 2, dtype=D), torch.randn(3, 2, dtype=D)
    for chefer, fn in ((True, M.chefer_product), (False, M.eps_product_uniform)):
        got = fn(Rp, X, Y)
        exp = explicit_product(Rp, X, Y, chefer)
        close(got[0], exp[0], what="product X (%s)" % fn.__name__)
        close(got[1], exp[1], what="product Y (%s)" % fn.__name__)
        close(got[0].sum() + got[1].sum(), Rp.sum(), 1e-6 if chefer else 1e-4, "product conserves (%s)" % fn.__name__)

    a, bb, Ra = torch.randn(4, 6, dtype=D), torch.randn(4, 6, dtype=D), torch.randn(4, 6, dtype=D)
    A_, B_ = M.chefer_add(Ra, a, bb)
    close(A_.sum() + B_.sum(), Ra.sum(), 1e-7, "chefer_add conserves")
    raw_a, raw_b = (a * Ra / (a + bb)).sum(), (bb * Ra / (a + bb)).sum()
    close(A_.sum().abs() / B_.sum().abs(), raw_a.abs() / raw_b.abs(), 1e-5,
          "chefer_add keeps |A|:|B|")
    pa, pb = M.chefer_add_plain(Ra, a, bb)
    close(pa, a * Ra / (a + bb + 1e-9), what="chefer_add_plain R_a")
    close(pb, bb * Ra / (a + bb + 1e-9), what="chefer_add_plain R_b")
    ea, eb = M.eps_add(Ra, a, bb)
    close(ea + eb, Ra * (a + bb) / M.stabilise(a + bb), what="eps_add")

    # softmax rule in explicit form: R_in_i = s_i (R_i − p_i Σ_j R_j)
    s = torch.randn(2, 3, 5, dtype=D)
    p = torch.softmax(s, -1)
    Rs = torch.randn(2, 3, 5, dtype=D)
    exp = torch.zeros_like(s)
    for h, i, j in itertools.product(range(2), range(3), range(5)):
        exp[h, i, j] = s[h, i, j] * (Rs[h, i, j] - p[h, i, j] * Rs[h, i].sum())
    close(M.attnlrp_softmax(Rs, s, p), exp, what="attnlrp_softmax")

    # LayerNorm: epsilon rule on y = γ·rstd·(x − mean x) + β with rstd constant
    xl = torch.randn(3, 7, dtype=D)
    g, be = torch.randn(7, dtype=D), torch.randn(7, dtype=D)
    y, mu, rstd = vit_ref.layernorm(xl, g, be, 1e-6)
    Rl = torch.randn(3, 7, dtype=D)
    exp = torch.zeros_like(xl)
    for r in range(3):
        for j in range(7):
            den = y[r, j] + 1e-6 if y[r, j] >= 0 else y[r, j] - 1e-6
            for i in range(7):
                jac = g[j] * rstd[r, 0] * ((1.0 if i == j else 0.0) - 1.0 / 7)
                exp[r, i] += xl[r, i] * jac * Rl[r, j] / den
    close(M.attnlrp_layernorm(Rl, xl, y, g, be, 1e-6), exp, what="attnlrp_layernorm")

    # im2col / col2im against conv2d / conv_transpose2d, and the z^B rule
    cfg = vit_ref.Config(image_h=8, image_w=12, channels=2, patch=4, dim=3, depth=1, heads=1,
                         mlp_dim=4, classes=2)
    img = torch.randn(2, 8, 12, dtype=D)
    Wc = torch.randn(3, 2, 4, 4, dtype=D)
    P = vit_ref.im2col(img, 4)
    conv = torch.nn.functional.conv2d(img[None], Wc, stride=4)[0]        # (d, gh, gw)
    close(P @ Wc.reshape(3, -1).T, conv.reshape(3, -1).T, what="im2col vs conv2d")
    Rz = torch.randn(6, 3, dtype=D)
    L, H = img.min(), img.max()
    Wp, Wn = Wc.clamp(min=0), Wc.clamp(max=0)
    conv_ = lambda t, w: torch.nn.functional.conv2d(t[None], w, stride=4)[0]
    convT = lambda s_, w: torch.nn.functional.conv_transpose2d(s_[None], w, stride=4)[0]
    Lim, Him = torch.full_like(img, float(L)), torch.full_like(img, float(H))
    Z = conv_(img, Wc) - conv_(Lim, Wp) - conv_(Him, Wn) + 1e-9
    Sg = Rz.T.reshape(3, 2, 3) / Z
    exp = img * convT(Sg, Wc) - Lim * convT(Sg, Wp) - Him * convT(Sg, Wn)
    close(M.chefer_patch_zb(Rz, img, P, Wc.reshape(3, -1), None, cfg), exp, what="z^B rule")

    # the reference ViT against torch.nn building blocks
    cfg = vit_ref.Config(image_h=16, image_w=24, channels=3, patch=8, dim=12, depth=2, heads=3,
                         mlp_dim=20, classes=4, ln_eps=1e-6)
    params = vit_ref.random_params(cfg, 3)
    image = vit_ref.random_input(cfg, 4)
    w = vit_ref.Weights(params, cfg)
    tr = vit_ref.forward(w, cfg, image)
    emb = torch.nn.functional.conv2d(
        torch.as_tensor(image, dtype=D)[None],
        torch.as_tensor(params["patch_embed.proj.weight"], dtype=D), stride=8)[0]
    x = torch.cat([w.cls[None], emb.reshape(12, -1).T + w.patch_b], 0) + w.pos
    for bp in w.blocks:
        u = torch.nn.functional.layer_norm(x, (12,), bp["norm1_w"], bp["norm1_b"], 1e-6)
        mha = torch.nn.MultiheadAttention(12, 3, bias=True, batch_first=True).to(D)
        with torch.no_grad():
            mha.in_proj_weight.copy_(bp["qkv_w"])
            mha.in_proj_bias.copy_(bp["qkv_b"])
            mha.out_proj.weight.copy_(bp["proj_w"])
            mha.out_proj.bias.copy_(bp["proj_b"])
        x = x + mha(u[None], u[None], u[None], need_weights=False)[0][0]
        u = torch.nn.functional.layer_norm(x, (12,), bp["norm2_w"], bp["norm2_b"], 1e-6)
        x = x + torch.nn.functional.linear(
            torch.nn.functional.gelu(torch.nn.functional.linear(u, bp["fc1_w"], bp["fc1_b"])),
            bp["fc2_w"], bp["fc2_b"])
    x = torch.nn.functional.layer_norm(x, (12,), w.norm_w, w.norm_b, 1e-6)
    close(tr["logits"].detach(), (x[0] @ w.head_w.T + w.head_b).detach(),
          what="vit_ref vs torch.nn modules")
    print("all reference checks passed")


if __name__ == "__main__":
    main()
