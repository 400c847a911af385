"""make_norm_fixtures.py — writes tests/fixtures/norm/<shape>/ from the float64 reference
norm_ref.py, for the engine fixture shapes (`nonsquare`, `gray`: the models and inputs of
tests/fixtures/engine/). The maps are not class-specific, so there is no target.

Files per shape:
  maps.npy           float64 (L, 5, n, n)  N_b[stage][i, j] = ‖z_{i←j}‖, stage order
                     atb, atb-res, atb-res-ln, atb-res-ln-ff, layer
  mixing.npy         float64 (L, 5, n)     mixing ratios per stage
  heads.npy          float64 (L, H, n, n)  the atb map per head, ‖A_h[i, j]·V_h'[j]‖
  token_<stage>.npy  float64 (H/p, W/p)    the rollout token map of that stage
  meta.json          stages, shape, the reference's own checks (decomposition identities,
                     agreement of its forward with vit_ref, closed-form FF vs a Riemann sum)

Run:  /usr/bin/python3 tests/reference/make_norm_fixtures.py
"""

import json
import os
import sys
import time
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_engine_fixtures  # noqa: E402
import norm_ref  # noqa: E402
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "norm")


def closed_form_vs_riemann(params, cfg, tr, b=0, row=0):
    """max |closed form − Riemann IG| / max |closed form| for one row of block b's FF pieces."""
    x = norm_ref._np(tr["blocks"][b]["x"])
    pieces, bias, _, _, _ = norm_ref.block_pieces(params, cfg, b, x)
    g = pieces["atb-res-ln"][row]
    gb = bias["atb-res-ln"][row]
    ig, ig_bias = norm_ref.ig_riemann_ff(params, cfg, b, g, gb)
    b2 = np.asarray(params["blocks.%d.mlp.fc2.bias" % b], dtype=np.float64)
    cf = pieces["atb-res-ln-ff"][row]
    scale = np.abs(cf).max()
    return max(np.abs(ig - cf).max() / scale,
               np.abs(ig_bias + b2 - bias["atb-res-ln-ff"][row]).max() / scale)


def main():
    t_all = time.time()
    for name in make_engine_fixtures.SHAPES:
        t0 = time.time()
        cfg, seed, input_seed, params, image = make_engine_fixtures.shape_model(name)
        w = vit_ref.Weights(params, cfg)
        r = norm_ref.norm_based(w, params, cfg, image)
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "maps.npy"), r["maps"])
        np.save(os.path.join(out, "mixing.npy"), r["mixing"])
        np.save(os.path.join(out, "heads.npy"), r["heads"])
        for st, tm in r["tokens"].items():
            np.save(os.path.join(out, "token_%s.npy" % st), tm)
        meta = OrderedDict([
            ("shape", name), ("weight_seed", seed), ("input_seed", input_seed),
            ("model", "tests/fixtures/engine/%s/model_timm.safetensors" % name),
            ("input", "tests/fixtures/engine/%s/input.npy" % name),
            ("stages", list(norm_ref.STAGES)),
            ("depth", cfg.depth), ("tokens", cfg.tokens),
            ("grid", [cfg.grid_h, cfg.grid_w]),
            ("check_identity_max_rel", float(r["worst_identity"])),
            ("check_forward_max_abs", float(r["worst_trace"])),
            ("check_ff_closed_form_vs_riemann_4000", float(closed_form_vs_riemann(params, cfg, r["trace"]))),
            ("seconds", round(time.time() - t0, 2)),
        ])
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2)
        print(json.dumps(meta))
    print("total %.1f s" % (time.time() - t_all))


if __name__ == "__main__":
    main()
