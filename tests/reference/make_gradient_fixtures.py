"""make_gradient_fixtures.py — writes tests/fixtures/gradient/ from the float64 reference
(gradient_ref.py) for the engine fixture shapes (`nonsquare`, `gray`: the models and inputs of
tests/fixtures/engine/), target = the arg-max class of the input:

  <shape>/<variant>.npy      (H, W) float64 pixel maps (token maps are their patch sums)
  <shape>/baseline.npy       the image baseline of the `-image` IG variants, float32 (C, H, W)
  <shape>/index.json         every variant: method, options, file, completeness numbers
  <shape>/meta.json          target, logits, seeds, the first noise values (to debug the stream)
  gauss_legendre.json        numpy's Gauss–Legendre nodes and weights on [0, 1] for a few n

Run:  /usr/bin/python3 tests/reference/make_gradient_fixtures.py
"""

import json
import os
import sys
import time
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradient_ref  # noqa: E402
import make_engine_fixtures  # noqa: E402
import vit_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "gradient")

IG_STEPS = 8
QUADRATURES = ("left", "right", "middle", "gauss-legendre")
BASELINE_SEED_OFFSET = 200   # image baseline = random_input(cfg, weight seed + 200) · 0.5
SMOOTH = OrderedDict([("samples", 4), ("noise", 0.15), ("seed", 1234)])
SMOOTH_IG = OrderedDict([("samples", 2), ("noise", 0.1), ("seed", 99), ("steps", 4), ("quadrature", "middle")])
GL_SIZES = (1, 2, 3, 4, 5, 8, 16, 32, 64)


def write_shape(name):
    cfg, seed, input_seed, params, image = make_engine_fixtures.shape_model(name)
    w = vit_ref.Weights(params, cfg)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    lg = gradient_ref.logits(w, cfg, image)
    target = int(np.argmax(lg))
    image_baseline = (0.5 * vit_ref.random_input(cfg, seed + BASELINE_SEED_OFFSET)).astype(np.float32)
    np.save(os.path.join(d, "baseline.npy"), image_baseline)
    baselines = OrderedDict([("black", gradient_ref.black_baseline(cfg)), ("image", image_baseline)])

    index = []

    def save(variant, method, options, pixels, comp=None):
        fname = variant + ".npy"
        np.save(os.path.join(d, fname), pixels.astype(np.float64))
        e = OrderedDict([("variant", variant), ("method", method), ("options", options), ("file", fname),
                         ("shape", list(pixels.shape))])
        if comp is not None:
            e["completeness"] = OrderedDict((k, comp[k]) for k in ("attribution_sum", "f_input", "f_baseline", "gap"))
        index.append(e)

    save("saliency", "saliency", {}, gradient_ref.saliency(w, cfg, image, target))
    save("grad-x-input", "grad-x-input", {}, gradient_ref.grad_x_input(w, cfg, image, target))
    for bname, base in baselines.items():
        for q in QUADRATURES:
            px, comp = gradient_ref.integrated_gradients(w, cfg, image, target, base, q, IG_STEPS)
            save("ig-%s-%s" % (q, bname), "integrated-gradients",
                 OrderedDict([("steps", IG_STEPS), ("quadrature", q), ("baseline", bname)]), px, comp)

    px, _ = gradient_ref.smoothgrad(w, cfg, image, target,
                                    lambda z: (gradient_ref.saliency(w, cfg, z, target), None),
                                    SMOOTH["samples"], SMOOTH["noise"], SMOOTH["seed"])
    save("smoothgrad-saliency", "smoothgrad", OrderedDict([("inner", "saliency")] + list(SMOOTH.items())), px)

    black = baselines["black"]
    px, comp = gradient_ref.smoothgrad(
        w, cfg, image, target,
        lambda z: gradient_ref.integrated_gradients(w, cfg, z, target, black, SMOOTH_IG["quadrature"],
                                                    SMOOTH_IG["steps"]),
        SMOOTH_IG["samples"], SMOOTH_IG["noise"], SMOOTH_IG["seed"])
    save("smoothgrad-ig", "smoothgrad",
         OrderedDict([("inner", "integrated-gradients"), ("baseline", "black")] + list(SMOOTH_IG.items())), px, comp)

    x = np.asarray(image, dtype=np.float32)
    sigma = SMOOTH["noise"] * (float(x.max()) - float(x.min()))
    meta = OrderedDict([
        ("shape", name),
        ("model", "tests/fixtures/engine/%s/model_timm.safetensors" % name),
        ("input", "tests/fixtures/engine/%s/input.npy" % name),
        ("target", target),
        ("logits", [float(v) for v in lg]),
        ("baseline_image", "0.5 · random_input(cfg, %d)" % (seed + BASELINE_SEED_OFFSET)),
        ("black_baseline", [float(v) for v in black[:, 0, 0]]),
        ("smooth_sigma", sigma),
        ("noise_sample1_first8", [float(v) for v in
                                  gradient_ref.smooth_noise(SMOOTH["seed"], 1, x.size, sigma)[:8]]),
        ("reference_dtype", "float64"),
    ])
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return target


def main():
    t0 = time.time()
    os.makedirs(OUT, exist_ok=True)
    for name in make_engine_fixtures.SHAPES:
        t = write_shape(name)
        print("%s: target %d" % (name, t))
    gl = OrderedDict()
    for n in GL_SIZES:
        nodes, weights = gradient_ref.gauss_legendre_01(n)
        gl[str(n)] = OrderedDict([("nodes", [float(v) for v in nodes]), ("weights", [float(v) for v in weights])])
    with open(os.path.join(OUT, "gauss_legendre.json"), "w") as f:
        json.dump(OrderedDict([("source", "numpy.polynomial.legendre.leggauss(n), mapped to [0, 1]"),
                               ("rules", gl)]), f, indent=1)
    print("total %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
