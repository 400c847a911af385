"""make_heads_fixtures.py — writes tests/fixtures/heads/<shape>/ from the float64 reference: heads
switched off by hand (vit_ref.forward's head_mask: a head's attention × 0 after the softmax, the
projection bias kept).

For the engine fixture shapes (`nonsquare`: 3 blocks × 4 heads; `gray`: 2 × 3; same models and
inputs as tests/fixtures/engine/), with the heads OFF below switched off:
  logits.npy                 float64 (classes) of the masked model
  <method>.npy               float64 maps of the masked model for its arg-max class (methods_ref:
                             token maps (H/p, W/p); lrp, attnlrp, saliency, grad-x-input: (H, W))
  curve.json                 the pruning curve of the unmasked image for ORDER (every head):
                             target (the unmasked arg-max), and per k = 0…L·H the target's softmax
                             probability, its logit and the top-1 class with the first k heads off
  meta.json                  the heads off, the order, the masked target, the map index

Run:  /usr/bin/python3 tests/reference/make_heads_fixtures.py      (< 2 s)
"""

import json
import os
import sys
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_engine_fixtures  # noqa: E402
import methods_ref  # noqa: E402
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "heads")

# The heads switched off ("B.H"), and the pruning order of the curve (flat l·H + h): a fixed
# shuffle, so that blocks are visited out of order.
OFF = {"nonsquare": ["0.1", "1.0", "1.1", "1.2", "1.3", "2.2"], "gray": ["0.0", "1.2"]}
ORDER = {"nonsquare": [5, 11, 0, 7, 2, 9, 4, 10, 1, 6, 3, 8], "gray": [4, 0, 5, 2, 1, 3]}

MAPS = [
    ("raw-attention", "raw-attention", {}),
    ("rollout", "rollout", {"fusion": "mean"}),
    ("attn-gradcam", "attn-gradcam", {}),
    ("grad-rollout", "grad-rollout", {}),
    ("transformer-attribution", "transformer-attribution", {"start_layer": 0}),
    ("partial-lrp", "partial-lrp", {}),
    ("lrp", "lrp", {}),
    ("attnlrp", "attnlrp", {}),
]


def mask_of(cfg, off):
    m = np.ones((cfg.depth, cfg.heads))
    for name in off:
        b, h = (int(v) for v in name.split("."))
        m[b, h] = 0.0
    return m


def probs(logits):
    return torch.softmax(logits, dim=-1)


def write_case(name):
    cfg, seed, input_seed, params, image = make_engine_fixtures.shape_model(name)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    mask = mask_of(cfg, OFF[name])
    ex = methods_ref.Explainer(params, cfg, image, head_mask=mask)
    np.save(os.path.join(d, "logits.npy"), ex.tr["logits"].detach().numpy().astype(np.float64))
    index = []
    for stem, method, opt in MAPS:
        m = ex.run(method, **opt)
        np.save(os.path.join(d, stem + ".npy"), m.astype(np.float64))
        index.append(OrderedDict([("file", stem + ".npy"), ("method", method), ("shape", list(m.shape))]))
    g = ex.grad_input.numpy()  # (C, H, W) ∂y_t/∂x of the masked model
    x = np.asarray(image, dtype=np.float64)
    for stem, m in (("saliency", np.abs(g).max(axis=0)), ("grad-x-input", (x * g).sum(axis=0))):
        np.save(os.path.join(d, stem + ".npy"), m)
        index.append(OrderedDict([("file", stem + ".npy"), ("method", stem), ("shape", list(m.shape))]))

    # The pruning curve: the unmasked arg-max followed as the heads of ORDER go off one by one.
    w = vit_ref.Weights(params, cfg, torch.float64)
    order = ORDER[name]
    assert sorted(order) == list(range(cfg.depth * cfg.heads))
    curve = OrderedDict([("order", order), ("prob", []), ("logit", []), ("top", [])])
    m = np.ones(cfg.depth * cfg.heads)
    with torch.no_grad():
        for k in range(len(order) + 1):
            if k > 0:
                m[order[k - 1]] = 0.0
            z = vit_ref.forward(w, cfg, image, head_mask=m.reshape(cfg.depth, cfg.heads))["logits"]
            if k == 0:
                curve["target"] = int(torch.argmax(z).item())
            t = curve["target"]
            curve["prob"].append(float(probs(z)[t].item()))
            curve["logit"].append(float(z[t].item()))
            curve["top"].append(int(torch.argmax(z).item()))
    with open(os.path.join(d, "curve.json"), "w") as f:
        json.dump(curve, f, indent=1)
    meta = OrderedDict([
        ("case", name), ("weight_seed", seed), ("input_seed", input_seed),
        ("model", "tests/fixtures/engine/%s/model_timm.safetensors" % name),
        ("off", OFF[name]), ("target", ex.target), ("maps", index),
        ("reference_dtype", "float64"),
    ])
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("%s: heads off %s, masked target %d, curve target %d, top-1 %s" %
          (name, ",".join(OFF[name]), ex.target, curve["target"], curve["top"]))


def main():
    for name in ("nonsquare", "gray"):
        write_case(name)


if __name__ == "__main__":
    main()
