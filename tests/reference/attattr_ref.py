"""attattr_ref.py — float64 reference of self-attention attribution (Hao, Dong, Wei & Xu, AAAI 2021).

Written from the paper and shared METHODS.md ("attattr"); shares no code with the C++ engine.
It uses vit_ref.py's weights and layer functions and adds its own forward pass in which one
block's attention probabilities are replaced by a given tensor (all heads together), the blocks
above recomputing theirs. Everything is one image at a time, one evaluation at a time (no
batching: the definition, not a fast version).

  attattr(w, cfg, image, target, nodes, weights, output)
      Attr_l = A_l ⊙ Σ_k weights_k · ∂F(nodes_k · A_l)/∂A_l for every block l;
      left Riemann sum: nodes k/m, weights 1/m; Gauss–Legendre for the exact integral.
  F = the target's probability: softmax, or sigmoid for a multi-label model (output="sigmoid").
  head_scores, token_map, tree: the quantities built on it (see each function); gold_loss: the
  training loss on the gold labels, for the Taylor score of Michel et al. 2019 as Hao et al. use it.
"""

import math

import numpy as np
import torch

import vit_ref


def probability(logits, target, output):
    if output == "sigmoid":
        return torch.sigmoid(logits[target])
    return torch.softmax(logits, dim=0)[target]


def forward_with_attention(w, cfg, image, block=-1, attn=None):
    """Logits of one image (C, H, W); block `block`'s attention is `attn` (H, n, n) if block ≥ 0."""
    d, H, dh, n = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens
    x_img = torch.as_tensor(np.asarray(image)).to(torch.float64)
    embed = vit_ref.linear(vit_ref.im2col(x_img, cfg.patch), w.patch_w, w.patch_b)   # (P, d)
    x = torch.cat([w.cls.reshape(1, d), embed], dim=0) + w.pos                      # (n, d)
    for b, bp in enumerate(w.blocks):
        u, _, _ = vit_ref.layernorm(x, bp["norm1_w"], bp["norm1_b"], cfg.ln_eps)
        qkv = vit_ref.linear(u, bp["qkv_w"], bp["qkv_b"])                          # (n, 3d)
        heads = lambda t: t.reshape(n, H, dh).permute(1, 0, 2)                      # (H, n, dh)
        q, k, v = heads(qkv[:, :d]), heads(qkv[:, d:2 * d]), heads(qkv[:, 2 * d:])
        if b == block:
            a = attn
        else:
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)       # (H, n, n)
        ctx = (a @ v).permute(1, 0, 2).reshape(n, d)
        x = x + vit_ref.linear(ctx, bp["proj_w"], bp["proj_b"])
        u, _, _ = vit_ref.layernorm(x, bp["norm2_w"], bp["norm2_b"], cfg.ln_eps)
        x = x + vit_ref.linear(vit_ref.gelu(vit_ref.linear(u, bp["fc1_w"], bp["fc1_b"])),
                               bp["fc2_w"], bp["fc2_b"])
    f, _, _ = vit_ref.layernorm(x, w.norm_w, w.norm_b, cfg.ln_eps)
    return vit_ref.linear(f[0], w.head_w, w.head_b)


def attentions(w, cfg, image):
    """[A_l (H, n, n)] of the unmodified forward pass, detached."""
    tr = vit_ref.forward(w, cfg, image)
    return [bt["attn"].detach().clone() for bt in tr["blocks"]]


def attattr(w, cfg, image, target, nodes, weights, output):
    """(L, H, n, n) numpy float64."""
    A = attentions(w, cfg, image)
    out = []
    for l in range(cfg.depth):
        total = torch.zeros_like(A[l])
        for a, wt in zip(nodes, weights):
            scaled = (float(a) * A[l]).clone().requires_grad_(True)
            F = probability(forward_with_attention(w, cfg, image, l, scaled), target, output)
            (g,) = torch.autograd.grad(F, scaled)
            total += float(wt) * g
        out.append((A[l] * total).numpy())
    return np.stack(out)


def left_riemann(m):
    return [k / m for k in range(m)], [1.0 / m] * m


def gauss_legendre01(order):
    x, wt = np.polynomial.legendre.leggauss(order)
    return list(0.5 * (x + 1.0)), list(0.5 * wt)


def gold_loss(logits, gold, output):
    """The training loss on the gold labels: BCE summed over the classes (sigmoid, multi-hot target),
    or the mean over the gold labels of the cross-entropy -log softmax (softmax)."""
    if output == "sigmoid":
        y = torch.zeros_like(logits)
        y[list(gold)] = 1.0
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="sum")
    logp = torch.log_softmax(logits, dim=0)
    return -sum(logp[g] for g in gold) / len(gold)


def head_scores(w, cfg, image, target, attr, output, gold=None):
    """Per head (L, H): attattr signed max, attention score max_{i,j} A, attention confidence
    (mean_i max_j A), Taylor |Σ A ⊙ ∂L/∂A| of the gold-label loss, Taylor |Σ A ⊙ ∂F/∂A|."""
    gold = [target] if gold is None else gold
    tr = vit_ref.forward(w, cfg, image, attn_grad=True, input_grad=True)
    probability(tr["logits"], target, output).backward()
    trl = vit_ref.forward(w, cfg, image, attn_grad=True, input_grad=True)
    gold_loss(trl["logits"], gold, output).backward()
    s_attr = attr.reshape(cfg.depth, cfg.heads, -1).max(axis=2)
    s_max = np.zeros((cfg.depth, cfg.heads))
    s_attn = np.zeros((cfg.depth, cfg.heads))
    s_loss = np.zeros((cfg.depth, cfg.heads))
    s_taylor = np.zeros((cfg.depth, cfg.heads))
    for l, (bt, btl) in enumerate(zip(tr["blocks"], trl["blocks"])):
        A = bt["attn"].detach()
        G = bt["attn"].grad.detach()
        GL = btl["attn"].grad.detach()
        s_max[l] = A.reshape(cfg.heads, -1).max(dim=1).values.numpy()
        s_attn[l] = A.max(dim=2).values.mean(dim=1).numpy()
        s_loss[l] = (A * GL).sum(dim=(1, 2)).abs().numpy()
        s_taylor[l] = (A * G).sum(dim=(1, 2)).abs().numpy()
    return s_attr, s_max, s_attn, s_loss, s_taylor


def token_map(attr, cfg):
    """CLS row of Ŝ_{L−1}·…·Ŝ_0, Ŝ_l = rownorm(I + M⁺/max M⁺), M⁺ = Σ_h max(Attr, 0); (H/p, W/p)."""
    n = cfg.tokens
    row = np.zeros(n)
    row[0] = 1.0
    for l in reversed(range(cfg.depth)):
        mpos = np.clip(attr[l], 0.0, None).sum(axis=0)
        mx = mpos.max()
        if mx <= 0:
            continue
        s = np.eye(n) + mpos / mx
        s = s / s.sum(axis=1, keepdims=True)
        row = row @ s
    return row[1:].reshape(cfg.grid_h, cfg.grid_w)


def tree(attr, cfg, threshold):
    """The attribution tree (METHODS.md): returns (dict, margin), margin = min |M̂ − τ| over the
    entries that were compared with τ (a small margin makes the tree fragile to rounding)."""
    L, n = attr.shape[0], attr.shape[2]
    M = attr.sum(axis=1)                                   # (L, n, n)
    col = M[L - 1].sum(axis=0)
    root = 1 + int(np.argmax(col[1:]))
    nodes, edges = [root], []
    member = {root}
    margin = float("inf")
    for l in range(L - 2, -1, -1):
        mx = M[l][1:].max()
        if mx <= 0:
            continue
        norm = M[l] / mx
        parents = sorted(member)
        cands = []
        for i in parents:
            for j in range(1, n):
                if j in member:
                    continue
                margin = min(margin, abs(norm[i, j] - threshold))
                if norm[i, j] > threshold:
                    cands.append((-norm[i, j], i, j))
        cands.sort()
        for s, i, j in cands:
            if j in member:
                continue
            member.add(j)
            nodes.append(j)
            edges.append({"from": i, "to": j, "block": l, "score": -s})
    return {"root": root, "threshold": threshold, "nodes": nodes, "edges": edges}, margin


def tree_reference(attr, threshold):
    """The attribution tree with the conventions of the published code (examples/attribution_tree.py
    of github.com/YRdddream/attattr), re-written from its description for a CLS-first sequence:
    M̂_l = M_l / |max M_l[1:, :]|; the root = the query token ≥ 1 with the largest sum of the positive
    off-diagonal entries of Σ_l M_l; block L-2: root -> j for every j != root above τ; blocks L-3 … 0:
    (i ≥ 1, j ≥ 0) in index order, an edge when i is in the tree, j is not and M̂ > τ.
    Returns (dict, margin) as tree()."""
    L, n = attr.shape[0], attr.shape[2]
    M = attr.sum(axis=1)
    total = M.sum(axis=0)
    pos = np.where((total > 0) & ~np.eye(n, dtype=bool), total, 0.0)
    pos[0] = 0.0
    root = 1 + int(np.argmax(pos[1:].sum(axis=1)))
    norm = []
    for l in range(L):
        mx = abs(M[l][1:].max())
        norm.append(M[l] / mx if mx > 0 else np.zeros((n, n)))
    member, nodes, edges = {root}, [root], []
    margin = float("inf")

    def consider(i, j, l):
        nonlocal margin
        margin = min(margin, abs(norm[l][i, j] - threshold))
        if norm[l][i, j] > threshold:
            member.add(j)
            nodes.append(j)
            edges.append({"from": i, "to": j, "block": l, "score": float(norm[l][i, j])})

    for j in range(n):
        if j != root:
            consider(root, j, L - 2)
    for l in range(L - 3, -1, -1):
        for i in range(1, n):
            for j in range(n):
                if i in member and j not in member:
                    consider(i, j, l)
    return {"root": root, "threshold": threshold, "nodes": nodes, "edges": edges}, margin
