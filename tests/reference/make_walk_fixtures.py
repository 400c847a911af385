"""make_walk_fixtures.py — the per-token relevance the guided walk draws (issue 17 item 4), from
the independent float64 reference.

The guided walk of an LRP method (core/include/vitlens/methods/walk.h) draws, at each step, how
much of the relevance each token holds: the Σ over the features (and heads) of R at the tensor
the step writes — after the head and the pooling, after the final norm, and inside every block
after each rule (add2's two shares, fc2·act·fc1, LN2, the residual join, add1's two shares,
proj, the A·v / softmax / q·kᵀ rules at q, k and v, W_qkv, LN1, the residual join), and at E0.
These numbers are new (the conservation report has only their totals), so they are checked here:
variants_ref.relevance_pass, which reproduces methods_ref's fixtures bit for bit on the plain
models, fills them when asked (its `tokens` argument), in float64.

Cases: the plain engine-fixture models `nonsquare` and `gray` (tests/fixtures/engine/), and the
variant cases `distilled_hf` (CLS + DIST, non-square), `reg_gap` (4 registers, no CLS, avg pooling
+ fc_norm, no final norm, LayerScale, gray) and `avg_fcnorm_cls` (avg pooling + fc_norm, pre_norm)
of tests/fixtures/variants/ — the models and inputs of those fixtures, regenerated here the way
their generators make them. Both rule sets (Chefer et al. 2021's, AttnLRP's), the arg-max class.

Writes tests/fixtures/walk/<case>_<rules>.json:
  {case, rules, target, tokens (n), prefix, names (the per-block points, in the order above),
   pool (n), output (n), e0 (n), blocks: L × len(names) × n}
Run from the repository root with Debian's python (~2 s):
    /usr/bin/python3 tests/reference/make_walk_fixtures.py
"""

import json
import os
import sys
from collections import OrderedDict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_engine_fixtures  # noqa: E402
import make_variant_fixtures as MV  # noqa: E402
import methods_ref as M  # noqa: E402
import variants_ref as V  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "fixtures", "walk")
PLAIN = ("nonsquare", "gray")
VARIANTS = ("distilled_hf", "reg_gap", "avg_fcnorm_cls")
NAMES = ("output", "residual2", "ff_branch", "ff_in", "ff_path", "mid", "residual1", "attn_branch",
         "ctx", "q", "k", "v", "attn_in", "attn_path", "input")


def models():
    """(name, cfg, params, image) of every case, as their own fixture generators make them."""
    for name in PLAIN:
        cfg0, _, _, params, image = make_engine_fixtures.shape_model(name)
        yield name, V.from_plain(cfg0), params, image
    for c in MV.CASES:
        if c["name"] in VARIANTS:
            params = V.round_params(V.random_params(c["cfg"], c["seed"], c["extras"]), c["storage"])
            image = V.random_image(c["cfg"], c["seed"] + MV.INPUT_SEED_OFFSET)
            yield c["name"], c["cfg"], params, image


def plain(t):
    return [float(v) for v in t.detach().numpy().tolist()]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, cfg, params, image in models():
        w = V.Weights(params, cfg, torch.float64)
        tr, target, _, _ = V.logits_and_grads(w, cfg, image, None)
        for rules in (M.CHEFER, M.ATTNLRP):
            tokens = {}
            p = V.relevance_pass(w, cfg, tr, target, rules, to_pixels=True, tokens=tokens)
            out = OrderedDict([
                ("case", name), ("rules", rules.name), ("target", target), ("tokens", cfg.tokens),
                ("prefix", cfg.prefix), ("names", list(NAMES)),
                ("seed_sum", p["seed_sum"]), ("block_input_sums", p["block_input_sums"]),
                ("pool", plain(tokens["pool"])), ("output", plain(tokens["output"])),
                ("e0", plain(tokens["e0"])),
                ("blocks", [[plain(blk[k]) for k in NAMES] for blk in tokens["blocks"]]),
            ])
            path = os.path.join(OUT, "%s_%s.json" % (name, rules.name))
            with open(path, "w") as f:
                json.dump(out, f)
            print("%-15s %-8s target %d, n %d: %s (%.1f KB)" % (name, rules.name, target, cfg.tokens,
                                                                 os.path.relpath(path), os.path.getsize(path) / 1024))


if __name__ == "__main__":
    main()
