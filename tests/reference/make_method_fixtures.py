"""make_method_fixtures.py — writes tests/fixtures/methods/<shape>/ from the float64 reference.

For the engine fixture shapes (`nonsquare`, `gray`: same models and inputs as
tests/fixtures/engine/) and for a DeiT-tiny-shaped random model (`deit_tiny`: weight seed 7,
input seed 8; weights not stored, the engine regenerates them), for the arg-max class and the
runner-up class (second-largest logit), it writes
  <method-variant>_t<class>.npy       token maps (H/p, W/p) float64; `lrp`, `attnlrp`: (H, W)
  conservation_<method>_t<class>.json per-layer relevance sums of the LRP passes
  index.json                          every map file with its method, options and target
  meta.json                           config, seeds, targets, logits
  f32_vs_f64.json                     how much the maps move when the reference runs in float32

Run:  /usr/bin/python3 tests/reference/make_method_fixtures.py [CASE …]   (default: every case)
"""

import json
import os
import sys
import time
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_engine_fixtures  # noqa: E402
import methods_ref  # noqa: E402
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "methods")

DEIT_WEIGHT_SEED = 7
DEIT_INPUT_SEED = 8

CONSERVATION_METHODS = ("transformer-attribution", "lrp", "attnlrp")

# The older rules of Chefer 2021's "LRP" and "partial LRP" baseline rows: the linear rule with one
# denominator per sign and the plain add rule (methods_ref.chefer_rules).
BASELINE_RULES = {"linear_rule": "separate", "add_rule": "plain"}


def variants(cfg):
    """(file stem, method, options) for the small shapes."""
    last = cfg.depth - 1
    return [
        ("raw-attention", "raw-attention", {}),
        ("rollout-mean", "rollout", {"fusion": "mean"}),
        ("rollout-max", "rollout", {"fusion": "max"}),
        ("rollout-min", "rollout", {"fusion": "min"}),
        ("rollout-mean-discard0.5", "rollout", {"fusion": "mean", "discard_ratio": 0.5}),
        ("rollout-mean-start1", "rollout", {"fusion": "mean", "start_layer": 1}),
        ("attn-gradcam", "attn-gradcam", {}),
        ("grad-rollout", "grad-rollout", {}),
        ("transformer-attribution-start0", "transformer-attribution", {"start_layer": 0}),
        ("transformer-attribution-start1", "transformer-attribution", {"start_layer": 1}),
        ("transformer-attribution-nograd", "transformer-attribution", {"weight": "none"}),
        ("transformer-attribution-attn", "transformer-attribution", {"weight": "attn"}),
        ("transformer-attribution-baseline-rules", "transformer-attribution", BASELINE_RULES),
        ("transformer-attribution-block0", "transformer-attribution", {"block": 0}),
        ("transformer-attribution-block%d" % last, "transformer-attribution", {"block": last}),
        ("partial-lrp", "partial-lrp", {}),
        ("partial-lrp-baseline-rules", "partial-lrp", BASELINE_RULES),
        ("lrp", "lrp", {}),
        ("lrp-separate", "lrp", {"linear_rule": "separate"}),
        ("lrp-plain-add", "lrp", {"add_rule": "plain"}),
        ("lrp-baseline-rules", "lrp", BASELINE_RULES),
        ("attnlrp", "attnlrp", {}),
        ("attnlrp-tokens", "attnlrp-tokens", {}),
    ]


def deit_variants():
    return [
        ("rollout-mean", "rollout", {"fusion": "mean"}),
        ("grad-rollout", "grad-rollout", {}),
        ("transformer-attribution-start0", "transformer-attribution", {"start_layer": 0}),
        ("transformer-attribution-start1", "transformer-attribution", {"start_layer": 1}),
        ("lrp", "lrp", {}),
        ("attnlrp", "attnlrp", {}),
        ("attnlrp-tokens", "attnlrp-tokens", {}),
    ]


def runner_up(logits):
    return int(np.argsort(-np.asarray(logits), kind="stable")[1])


def write_case(name, cfg, params, image, var_list, meta_extra, pixel_f32=False):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    first = methods_ref.Explainer(params, cfg, image)
    logits = first.tr["logits"].detach().numpy()
    targets = [first.target, runner_up(logits)]
    index = []
    for t in targets:
        ex = first if t == first.target else methods_ref.Explainer(params, cfg, image, t)
        for stem, method, opt in var_list:
            m = ex.run(method, **opt)
            pixel = method in ("lrp", "attnlrp")
            opt = dict(opt)
            dtype = np.float32 if (pixel and pixel_f32) else np.float64
            fname = "%s_t%d.npy" % (stem, t)
            np.save(os.path.join(d, fname), m.astype(dtype))
            index.append(OrderedDict([("file", fname), ("method", method), ("options", opt),
                                      ("target", t), ("shape", list(m.shape)),
                                      ("dtype", np.dtype(dtype).name)]))
        for method in CONSERVATION_METHODS:
            with open(os.path.join(d, "conservation_%s_t%d.json" % (method, t)), "w") as f:
                json.dump(ex.conservation(method), f, indent=1)
        if any(o == BASELINE_RULES for _, _, o in var_list):
            with open(os.path.join(d, "conservation_lrp-baseline-rules_t%d.json" % t), "w") as f:
                json.dump(ex.conservation("lrp", **BASELINE_RULES), f, indent=1)
    seconds = time.time() - t0
    meta = OrderedDict([
        ("case", name),
        ("config", OrderedDict([("image_h", cfg.image_h), ("image_w", cfg.image_w),
                                ("channels", cfg.channels), ("patch", cfg.patch),
                                ("dim", cfg.dim), ("depth", cfg.depth), ("heads", cfg.heads),
                                ("mlp_dim", cfg.mlp_dim), ("classes", cfg.classes),
                                ("ln_eps", cfg.ln_eps)])),
        ("targets", OrderedDict([("argmax", targets[0]), ("runner_up", targets[1])])),
        ("logits_top5", [[int(i), float(logits[i])]
                         for i in np.argsort(-logits, kind="stable")[:5]]),
        ("reference_dtype", "float64"),
        ("reference_seconds", round(seconds, 2)),
    ])
    meta.update(meta_extra)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print("%s: targets %s, %.1f s" % (name, targets, seconds))
    return first, seconds


def cast_trace(tr, dtype):
    """A detached copy of a trace with every tensor cast to dtype."""
    out = {}
    for k, v in tr.items():
        if k == "blocks":
            out[k] = [{kk: vv.detach().to(dtype) for kk, vv in bt.items()} for bt in v]
        else:
            out[k] = v.detach().to(dtype)
    return out


def rel_diff(a, ref):
    return float(np.max(np.abs(a - ref)) / np.max(np.abs(ref)))


def pearson(a, ref):
    return float(np.corrcoef(a.ravel(), ref.ravel())[0, 1])


def measure_f32(cfg, params, image, ex64):
    """Maps with the whole reference in float32, and with a float32 forward/backward but the
    relevance pass in float64, against the all-float64 maps (max |Δ| / max |map|)."""
    t = ex64.target
    ex32 = methods_ref.Explainer(params, cfg, image, t, dtype=torch.float32)
    # float32 trace and ∇A, relevance in float64 (the weights are exact in both)
    w64 = vit_ref.Weights(params, cfg, torch.float64)
    tr32_64 = cast_trace(ex32.tr, torch.float64)
    g32_64 = [g.to(torch.float64) for g in ex32.grad_attn]
    ch = methods_ref.relevance_pass(w64, cfg, tr32_64, t, methods_ref.CHEFER, to_pixels=True)
    at = methods_ref.relevance_pass(w64, cfg, tr32_64, t, methods_ref.ATTNLRP, to_pixels=True)
    mixed = {
        "transformer-attribution-start0": methods_ref.transformer_attribution(
            cfg, g32_64, ch["R_A"], start_layer=0),
        "transformer-attribution-start1": methods_ref.transformer_attribution(
            cfg, g32_64, ch["R_A"], start_layer=1),
        "lrp": methods_ref.lrp_pixels(ch["R_image"]),
        "attnlrp": methods_ref.attnlrp_maps(cfg, at["R_image"], at["R_tokens"])[0],
        "grad-rollout": methods_ref.grad_rollout(tr32_64, cfg, g32_64),
    }
    runs = [("transformer-attribution-start0", "transformer-attribution", {"start_layer": 0}),
            ("transformer-attribution-start1", "transformer-attribution", {"start_layer": 1}),
            ("lrp", "lrp", {}), ("attnlrp", "attnlrp", {}), ("grad-rollout", "grad-rollout", {})]
    out = OrderedDict()
    for stem, method, opt in runs:
        ref = ex64.run(method, **opt)
        all32 = ex32.run(method, **opt).astype(np.float64)
        out[stem] = OrderedDict([
            ("all_float32", rel_diff(all32, ref)),
            ("float32_forward_float64_relevance", rel_diff(mixed[stem].numpy(), ref)),
            ("all_float32_pearson", pearson(all32, ref)),
        ])
    out["logits_max_abs_diff"] = float(np.max(np.abs(
        ex32.tr["logits"].detach().numpy().astype(np.float64)
        - ex64.tr["logits"].detach().numpy())))
    out["target"] = t
    out["measure"] = "max |map_f32 − map_f64| / max |map_f64|"
    return out


def main():
    """Every case, or only those named: make_method_fixtures.py nonsquare gray."""
    only = sys.argv[1:]
    t_all = time.time()
    timing = OrderedDict()
    for name in make_engine_fixtures.SHAPES:
        if only and name not in only:
            continue
        cfg, seed, input_seed, params, image = make_engine_fixtures.shape_model(name)
        ex64, timing[name] = write_case(
            name, cfg, params, image, variants(cfg),
            OrderedDict([("weight_seed", seed), ("input_seed", input_seed),
                         ("model", "tests/fixtures/engine/%s/model_timm.safetensors" % name)]))
        with open(os.path.join(OUT, name, "f32_vs_f64.json"), "w") as f:
            json.dump(measure_f32(cfg, params, image, ex64), f, indent=2)
    if only and "deit_tiny" not in only:
        return
    cfg = vit_ref.deit_tiny_config()
    params = vit_ref.random_params(cfg, DEIT_WEIGHT_SEED)
    image = vit_ref.random_input(cfg, DEIT_INPUT_SEED)
    ex64, timing["deit_tiny"] = write_case(
        "deit_tiny", cfg, params, image, deit_variants(),
        OrderedDict([("weight_seed", DEIT_WEIGHT_SEED), ("input_seed", DEIT_INPUT_SEED),
                     ("model", "random_model(deit_tiny_config(), 7); input random_input(cfg, 8)"),
                     ("pixel_maps_dtype", "float32 (lrp, attnlrp); token maps float64")]),
        pixel_f32=True)
    np.save(os.path.join(OUT, "deit_tiny", "logits.npy"),
            ex64.tr["logits"].detach().numpy().astype(np.float64))
    t0 = time.time()
    f32 = measure_f32(cfg, params, image, ex64)
    f32["seconds"] = round(time.time() - t0, 2)
    with open(os.path.join(OUT, "deit_tiny", "f32_vs_f64.json"), "w") as f:
        json.dump(f32, f, indent=2)
    print(json.dumps(f32, indent=2))
    print("total %.1f s" % (time.time() - t_all))


if __name__ == "__main__":
    main()
