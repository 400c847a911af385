"""make_norm_fixtures.py — writes tests/fixtures/norm/<shape>/ from the float64 reference
norm_ref.py, for the engine fixture shapes (`nonsquare`, `gray`: the models and inputs of
tests/fixtures/engine/). The maps are not class-specific, so there is no target.

Files per shape:
  maps.npy           float64 (L, 5, n, n)  N_b[stage][i, j] = ‖z_{i←j}‖, stage order
                     atb, atb-res, atb-res-ln, atb-res-ln-ff, layer
  mixing.npy         float64 (L, 5, n)     mixing ratios per stage
  heads.npy          float64 (L, H, n, n)  the atb map per head, ‖A_h[i, j]·V_h'[j]‖
  token_<stage>.npy  float64 (H/p, W/p)    the rollout token map of that stage
  ff_shares.npy      float64 (L, 2, n, n)  the FF's effect on this input (norm_ref.image_summary):
                     context shares s[i, j] = N[i, j] / Σ_{k≠i} N[i, k] of atb-res-ln, atb-res-ln-ff
  ff_rho.npy         float64 (L, n + 2)    Spearman ρ of each query row (atb-res-ln vs atb-res-ln-ff),
                     then of the flattened maps, then the mean over rows
  ff_mixing_mean.npy float64 (L, 5)        the mean over tokens of each stage's mixing ratio
  meta.json          stages, shape, the reference's own checks (decomposition identities,
                     agreement of its forward with vit_ref, closed-form FF vs a Riemann sum)

Run:  /usr/bin/python3 tests/reference/make_norm_fixtures.py
      /usr/bin/python3 tests/reference/make_norm_fixtures.py --ff-only   (only the ff_* files, from
      the stored maps.npy and mixing.npy)
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


def write_ff(out, maps, mixing):
    """The ff_* files of one shape from its reference maps and mixing ratios."""
    shares, rho, mixing_mean = norm_ref.image_summary(maps, mixing)
    np.save(os.path.join(out, "ff_shares.npy"), shares)
    np.save(os.path.join(out, "ff_rho.npy"), rho)
    np.save(os.path.join(out, "ff_mixing_mean.npy"), mixing_mean)
    try:  # the hand-written Spearman against scipy's, when scipy is there (not needed otherwise)
        from scipy.stats import spearmanr
        n = maps.shape[2]
        worst = max(abs(spearmanr(maps[b, 2, i], maps[b, 3, i])[0] - rho[b, i])
                    for b in range(maps.shape[0]) for i in range(n))
        print("%s: ρ per row vs scipy.stats.spearmanr: max |Δ| %.1e" % (os.path.basename(out), worst))
    except ImportError:
        pass


def main():
    t_all = time.time()
    if "--ff-only" in sys.argv[1:]:
        for name in make_engine_fixtures.SHAPES:
            out = os.path.join(OUT, name)
            write_ff(out, np.load(os.path.join(out, "maps.npy")), np.load(os.path.join(out, "mixing.npy")))
        return
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
        write_ff(out, r["maps"], r["mixing"])
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
