"""make_engine_fixtures.py — writes tests/fixtures/engine/<shape>/ from the reference ViT.

For each small shape: the random-weight model as timm and Hugging Face safetensors, an HF-style
config.json, a random input, and the float64 reference outputs (logits, ∂y_t/∂input, every
block's attention probabilities and ∂y_t/∂A_b). `--check` also verifies the reference's own
gradients against central differences and the safetensors round trip.

Run:  /usr/bin/python3 tests/reference/make_engine_fixtures.py [--check]
"""

import argparse
import json
import os
import sys
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "engine")

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]

# name → (Config, weight seed); the input seed is weight seed + 100.
SHAPES = OrderedDict([
    ("nonsquare", (vit_ref.Config(image_h=24, image_w=40, channels=3, patch=8, dim=32, depth=3,
                                  heads=4, mlp_dim=64, classes=5, ln_eps=1e-6,
                                  mean=IMAGENET_MEAN, std=IMAGENET_STD), 11)),
    ("gray", (vit_ref.Config(image_h=32, image_w=32, channels=1, patch=8, dim=48, depth=2,
                             heads=3, mlp_dim=96, classes=7, ln_eps=1e-5,
                             mean=[0.5], std=[0.5]), 12)),
])


def shape_model(name):
    """(cfg, weight seed, input seed, params (timm, float32), image (C, H, W) float32)."""
    cfg, seed = SHAPES[name]
    params = vit_ref.random_params(cfg, seed)
    image = vit_ref.random_input(cfg, seed + 100)
    return cfg, seed, seed + 100, params, image


def gradient_check(cfg, w, image, target, grad_input, grad_attn):
    """Central differences of the float64 reference against its autograd gradients."""
    rng = np.random.default_rng(0)
    img = image.astype(np.float64)
    h = 1e-6
    worst = 0.0
    for _ in range(8):
        idx = tuple(int(rng.integers(0, s)) for s in img.shape)
        plus, minus = img.copy(), img.copy()
        plus[idx] += h
        minus[idx] -= h
        with torch.no_grad():
            fp = vit_ref.forward(w, cfg, plus)["logits"][target].item()
            fm = vit_ref.forward(w, cfg, minus)["logits"][target].item()
        fd = (fp - fm) / (2 * h)
        worst = max(worst, abs(fd - grad_input[idx].item()) / max(1e-3, abs(fd)))
    # ∂y/∂A via perturbing A in a recomputation of the blocks above it.
    for b in range(cfg.depth):
        for _ in range(3):
            hh = int(rng.integers(0, cfg.heads))
            i = int(rng.integers(0, cfg.tokens))
            j = int(rng.integers(0, cfg.tokens))
            vals = []
            for s in (+h, -h):
                vals.append(forward_with_attn_delta(w, cfg, img, b, (hh, i, j), s)[target].item())
            fd = (vals[0] - vals[1]) / (2 * h)
            g = grad_attn[b][hh, i, j].item()
            worst = max(worst, abs(fd - g) / max(1e-3, abs(fd)))
    return worst


def forward_with_attn_delta(w, cfg, img, block, idx, delta):
    """Logits with A_block[idx] += delta (the softmax output only, the rest recomputed)."""
    orig = torch.softmax

    state = {"b": -1}

    def patched(x, dim):
        y = orig(x, dim=dim)
        state["b"] += 1
        if state["b"] == block:
            y = y.clone()
            y[idx] += delta
        return y

    torch.softmax = patched
    try:
        with torch.no_grad():
            return vit_ref.forward(w, cfg, img)["logits"]
    finally:
        torch.softmax = orig


def write_shape(name, check):
    cfg, seed, input_seed, params, image = shape_model(name)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    meta_st = {"format": "pt", "generator": "vitlens random_model", "seed": str(seed)}
    vit_ref.write_safetensors(os.path.join(d, "model_timm.safetensors"), params, meta_st)
    vit_ref.write_safetensors(os.path.join(d, "model_hf.safetensors"),
                              vit_ref.to_hf(params, cfg), meta_st)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(vit_ref.hf_config(cfg), f, indent=2)

    w = vit_ref.Weights(params, cfg, torch.float64)
    tr, target, grad_input, grad_attn = vit_ref.logits_and_grads(w, cfg, image)
    np.save(os.path.join(d, "input.npy"), image.astype(np.float32))
    np.save(os.path.join(d, "logits.npy"), tr["logits"].detach().numpy().astype(np.float64))
    np.save(os.path.join(d, "grad_input.npy"), grad_input.numpy().astype(np.float64))
    for b, bt in enumerate(tr["blocks"]):
        np.save(os.path.join(d, "attn_b%d.npy" % b), bt["attn"].detach().numpy())
        np.save(os.path.join(d, "grad_attn_b%d.npy" % b), grad_attn[b].numpy())

    meta = OrderedDict([
        ("shape", name),
        ("image_h", cfg.image_h), ("image_w", cfg.image_w), ("channels", cfg.channels),
        ("patch", cfg.patch), ("dim", cfg.dim), ("depth", cfg.depth), ("heads", cfg.heads),
        ("mlp_dim", cfg.mlp_dim), ("classes", cfg.classes), ("ln_eps", cfg.ln_eps),
        ("tokens", cfg.tokens), ("grid_h", cfg.grid_h), ("grid_w", cfg.grid_w),
        ("mean", cfg.mean), ("std", cfg.std),
        ("weight_seed", seed), ("input_seed", input_seed),
        ("target", target),
        ("logits", [float(v) for v in tr["logits"].detach().numpy()]),
        ("param_count", int(sum(a.size for a in params.values()))),
        ("dtype_of_reference", "float64 (weights and input rounded to float32 first)"),
        ("splitmix64_check", OrderedDict((str(x), "0x%016X" % vit_ref.splitmix64(x))
                                         for x in (0, 1, 0x100000001B3 * seed))),
        ("first_values", OrderedDict([
            ("patch_embed.proj.weight[:4]",
             [float(v) for v in params["patch_embed.proj.weight"].reshape(-1)[:4]]),
            ("blocks.0.norm1.weight[:4]",
             [float(v) for v in params["blocks.0.norm1.weight"].reshape(-1)[:4]]),
            ("input[:4]", [float(v) for v in image.reshape(-1)[:4]]),
        ])),
        ("files", OrderedDict([
            ("input.npy", "(C, H, W) float32, normalised, random_input(cfg, input_seed)"),
            ("logits.npy", "(classes) float64"),
            ("grad_input.npy", "(C, H, W) float64, d logit_target / d input"),
            ("attn_bK.npy", "(heads, n, n) float64 post-softmax attention of block K"),
            ("grad_attn_bK.npy", "(heads, n, n) float64, d logit_target / d attn_bK"),
        ])),
    ])
    if check:
        worst = gradient_check(cfg, w, image, target, grad_input, grad_attn)
        back = vit_ref.read_safetensors(os.path.join(d, "model_timm.safetensors"))
        assert all(np.array_equal(back[k], params[k]) for k in params)
        back_hf = vit_ref.read_safetensors(os.path.join(d, "model_hf.safetensors"))
        assert len(back_hf) == len(params) + 4 * cfg.depth
        print("%s: target %d, finite-difference max rel err %.2e" % (name, target, worst))
        assert worst < 1e-5, worst
        meta["finite_difference_max_rel_err"] = worst
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    return target


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="finite-difference self-check")
    args = ap.parse_args()
    for name in SHAPES:
        t = write_shape(name, args.check)
        print("wrote %s (target %d)" % (os.path.join(OUT, name), t))
    open(os.path.join(OUT, "READY"), "w").close()


if __name__ == "__main__":
    main()
