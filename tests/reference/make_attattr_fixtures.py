"""make_attattr_fixtures.py — writes tests/fixtures/attattr/<shape>_<output>/ from attattr_ref.py.

For the engine fixture shapes `nonsquare` and `gray` (same weights and input as
tests/fixtures/engine/<shape>/), each with F = softmax and F = sigmoid probability of the arg-max
class, it writes
  attattr_m20.npy      (L, H, n, n) float64, left Riemann sum, m = 20
  attattr_exact.npy    (L, H, n, n) float64, the integral by 40-point Gauss–Legendre
  token_map.npy        (H/p, W/p) float64, the image map from attattr_m20
  heads_attattr.npy    (L, H) Σ over the head set of max_{i,j} Attr (m = 20)
  heads_attention_max.npy (L, H) Σ of max_{i,j} A (Hao et al.'s attention score)
  heads_attention.npy  (L, H) Σ of mean_i max_j A
  heads_taylor_loss.npy (L, H) Σ of |Σ A ⊙ ∂L/∂A|, L the loss on each image's gold labels
  heads_taylor.npy     (L, H) Σ of |Σ A ⊙ ∂F/∂A|
  tree.json            the attribution tree of attattr_m20 at τ = 0.4, and its margin
  tree_reference.json  the same with the published code's conventions (tree_reference)
  meta.json            target, m, the head set (input seeds, targets), left-sum errors against
                       the exact integral for several m
The head set is the engine fixture input plus random_input(cfg, seed) for HEAD_SEEDS, each
under its own arg-max class t; the gold labels (for the loss) are [t], [(t+1) mod C] and
[t, (t+2) mod C] for the three images, so that the loss is not always the predicted class's.

Run:  /usr/bin/python3 tests/reference/make_attattr_fixtures.py      (~1 min)
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attattr_ref  # noqa: E402
import make_engine_fixtures  # noqa: E402
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "attattr")
STEPS = 20
EXACT_ORDER = 40
HEAD_SEEDS = [501, 502]
CONVERGENCE_STEPS = [20, 80, 320]
THRESHOLD = 0.4


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def write(shape, output):
    cfg, wseed, iseed, params, image = make_engine_fixtures.shape_model(shape)
    w = vit_ref.Weights(params, cfg)
    d = os.path.join(OUT, "%s_%s" % (shape, output))
    os.makedirs(d, exist_ok=True)
    logits = attattr_ref.forward_with_attention(w, cfg, image).numpy()
    target = int(np.argmax(logits))

    attr = attattr_ref.attattr(w, cfg, image, target, *attattr_ref.left_riemann(STEPS), output)
    exact = attattr_ref.attattr(w, cfg, image, target, *attattr_ref.gauss_legendre01(EXACT_ORDER), output)
    exact_hi = attattr_ref.attattr(w, cfg, image, target, *attattr_ref.gauss_legendre01(EXACT_ORDER + 8), output)
    errors = {}
    for m in CONVERGENCE_STEPS:
        a = attr if m == STEPS else attattr_ref.attattr(w, cfg, image, target, *attattr_ref.left_riemann(m), output)
        errors[str(m)] = rel(a, exact)
    np.save(os.path.join(d, "attattr_m20.npy"), attr)
    np.save(os.path.join(d, "attattr_exact.npy"), exact)
    np.save(os.path.join(d, "token_map.npy"), attattr_ref.token_map(attr, cfg))

    names = ("attattr", "attention_max", "attention", "taylor_loss", "taylor")
    sums = [np.zeros((cfg.depth, cfg.heads)) for _ in names]
    head_set = []
    C = len(logits)
    for k, seed in enumerate([None] + HEAD_SEEDS):
        img = image if seed is None else vit_ref.random_input(cfg, seed)
        t = int(np.argmax(attattr_ref.forward_with_attention(w, cfg, img).numpy()))
        gold = [[t], [(t + 1) % C], [t, (t + 2) % C]][k]
        a = attr if seed is None else attattr_ref.attattr(w, cfg, img, t, *attattr_ref.left_riemann(STEPS), output)
        for acc, s in zip(sums, attattr_ref.head_scores(w, cfg, img, t, a, output, gold)):
            acc += s
        head_set.append({"input_seed": iseed if seed is None else seed, "target": t, "gold": gold})
    for name, s in zip(names, sums):
        np.save(os.path.join(d, "heads_%s.npy" % name), s)

    tree, margin = attattr_ref.tree(attr, cfg, THRESHOLD)
    tree["margin"] = margin
    with open(os.path.join(d, "tree.json"), "w") as f:
        json.dump(tree, f, indent=1)
    tree_ref, margin_ref = attattr_ref.tree_reference(attr, THRESHOLD)
    tree_ref["margin"] = margin_ref
    with open(os.path.join(d, "tree_reference.json"), "w") as f:
        json.dump(tree_ref, f, indent=1)
    meta = {"shape": shape, "output": output, "weight_seed": wseed, "input_seed": iseed,
            "target": target, "logits": logits.tolist(), "steps": STEPS,
            "exact": "Gauss-Legendre, %d points on [0, 1]" % EXACT_ORDER,
            "exact_self_check": rel(exact, exact_hi),
            "left_sum_rel_error": errors, "head_set": head_set, "threshold": THRESHOLD,
            "rel": "max |a - b| / max |b| over the whole array"}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote %s: target %d, GL self-check %.1e, left-sum errors %s, tree %d nodes (margin %.3g)"
          % (d, target, meta["exact_self_check"], errors, len(tree["nodes"]), margin))


def main():
    torch.set_grad_enabled(True)
    for shape in ("nonsquare", "gray"):
        for output in ("softmax", "sigmoid"):
            write(shape, output)


if __name__ == "__main__":
    main()
