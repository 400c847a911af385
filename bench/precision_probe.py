"""precision_probe.py — which steps of the forward pass do Chefer et al.'s relevance rules need in
double precision? (issue 15's lever "less double precision").

The engine's LRP methods read a forward pass recomputed in float64 (docs/methods.md, "Precision").
This probe runs the float64 reference (tests/reference: vit_ref, methods_ref) on random DeiT-tiny
weights with one class of forward steps computed in float32 instead — its inputs rounded to float32,
the step in float32, its output widened again — and every other step, and the relevance pass, in
float64. It prints how far the transformer-attribution and lrp maps move from the all-float64 maps
(max |Δ| / max |map|). A step could leave double precision only if that stayed under the 1e-4
that issue 15 asks of the maps on every model.

usage: /usr/bin/python3 bench/precision_probe.py [SEED ...]   (default: seeds 1 to 5; ~5 s each)
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import methods_ref  # noqa: E402
import vit_ref  # noqa: E402

STEPS = ["linear", "q_kT", "softmax", "A_v", "layernorm", "gelu", "add"]


def forward(w, cfg, image, in_float32):
    """vit_ref.forward's trace (without autograd), the steps named in `in_float32` in float32."""
    def step(name, fn, *args):
        if name not in in_float32:
            return fn(*args)
        return fn(*[a.float() if torch.is_tensor(a) else a for a in args]).double()

    d, H, dh, n = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens
    ln = lambda x, g, b: vit_ref.layernorm(x, g, b, cfg.ln_eps)[0]
    heads = lambda t: t.reshape(n, H, dh).permute(1, 0, 2)
    x_img = torch.as_tensor(np.asarray(image)).double()
    patches = vit_ref.im2col(x_img, cfg.patch)
    embed = step("linear", vit_ref.linear, patches, w.patch_w, w.patch_b)
    tok0 = torch.cat([w.cls.reshape(1, d), embed], dim=0)
    x = step("add", torch.add, tok0, w.pos)
    tr = {"input": x_img, "patches": patches, "embed": embed, "tokens_nopos": tok0, "tokens": x,
          "blocks": []}
    for bp in w.blocks:
        bt = {"x": x}
        u = step("layernorm", ln, x, bp["norm1_w"], bp["norm1_b"])
        qkv = step("linear", vit_ref.linear, u, bp["qkv_w"], bp["qkv_b"])
        q, k, v = heads(qkv[:, :d]), heads(qkv[:, d:2 * d]), heads(qkv[:, 2 * d:])
        scores = step("q_kT", lambda a, b: (a @ b.transpose(1, 2)) / math.sqrt(dh), q, k)
        attn = step("softmax", lambda s: torch.softmax(s, dim=-1), scores)
        ctx_h = step("A_v", torch.matmul, attn, v)
        ctx = ctx_h.permute(1, 0, 2).reshape(n, d)
        attn_out = step("linear", vit_ref.linear, ctx, bp["proj_w"], bp["proj_b"])
        x_mid = step("add", torch.add, x, attn_out)
        ln2 = step("layernorm", ln, x_mid, bp["norm2_w"], bp["norm2_b"])
        fc1 = step("linear", vit_ref.linear, ln2, bp["fc1_w"], bp["fc1_b"])
        act = step("gelu", vit_ref.gelu, fc1)
        mlp_out = step("linear", vit_ref.linear, act, bp["fc2_w"], bp["fc2_b"])
        x = step("add", torch.add, x_mid, mlp_out)
        bt.update(ln1=u, qkv=qkv, q=q, k=k, v=v, scores=scores, attn=attn, ctx_h=ctx_h, ctx=ctx,
                  attn_out=attn_out, x_mid=x_mid, ln2=ln2, fc1=fc1, act=act, mlp_out=mlp_out)
        tr["blocks"].append(bt)
    tr["x_final"] = x
    tr["ln_f"] = step("layernorm", ln, x, w.norm_w, w.norm_b)
    tr["pooled"] = tr["ln_f"][0]
    tr["logits"] = step("linear", vit_ref.linear, tr["pooled"], w.head_w, w.head_b)
    return tr


def main():
    seeds = [int(s) for s in sys.argv[1:]] or [1, 2, 3, 4, 5]
    cfg = vit_ref.deit_tiny_config()
    variants = [[s] for s in STEPS] + [STEPS]
    worst = {tuple(v): [0.0, 0.0] for v in variants}
    print("max |Δ| / max |map| from the all-float64 maps (transformer-attribution, lrp)")
    print("%-6s %s" % ("seed", "  ".join("%-17s" % ("+".join(v) if len(v) == 1 else "all") for v in variants)))
    for seed in seeds:
        w = vit_ref.Weights(vit_ref.random_params(cfg, seed), cfg, torch.float64)
        image = vit_ref.random_input(cfg, seed + 100)
        _, target, _, grad_attn = vit_ref.logits_and_grads(w, cfg, image)  # ∇A stays float64

        def maps(in_float32):
            tr = forward(w, cfg, image, set(in_float32))
            p = methods_ref.relevance_pass(w, cfg, tr, target, methods_ref.chefer_rules(), to_pixels=True)
            return (methods_ref.transformer_attribution(cfg, grad_attn, p["R_A"]).numpy(),
                    methods_ref.lrp_pixels(p["R_image"]).numpy())

        ref = maps([])
        cells = []
        for v in variants:
            got = maps(v)
            dev = [float(np.abs(g - r).max() / np.abs(r).max()) for g, r in zip(got, ref)]
            worst[tuple(v)] = [max(a, b) for a, b in zip(worst[tuple(v)], dev)]
            cells.append("%.1e %.1e" % tuple(dev))
        print("%-6d %s" % (seed, "  ".join("%-17s" % c for c in cells)), flush=True)
    print("%-6s %s" % ("worst", "  ".join("%-17s" % ("%.1e %.1e" % tuple(worst[tuple(v)])) for v in variants)))


if __name__ == "__main__":
    main()
