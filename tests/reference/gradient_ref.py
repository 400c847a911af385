"""gradient_ref.py — float64 reference for the input-gradient methods.

Written from METHODS.md and the papers (Simonyan et al. 2014; Shrikumar et al. 2016;
Sundararajan, Taly & Yan 2017; Smilkov et al. 2017), independent of the C++ engine:

  y_t          the target's logit; x the normalised (C, H, W) input; ∇ by torch autograd
               through vit_ref.forward in float64.
  saliency     max_c |∂y_t/∂x_c|                                        (H, W)
  grad-x-input Σ_c x_c ∂y_t/∂x_c                                        (H, W)
  IG           attr = (x − x') ⊙ Σ_k w_k ∇y_t(x' + α_k (x − x')),  map Σ_c attr;
               left α_k = k/n, right (k+1)/n, middle (k+½)/n, weights 1/n;
               gauss-legendre: numpy's n-point rule on [−1, 1] mapped to [0, 1];
               completeness: Σ attr, y_t(x), y_t(x').
  smoothgrad   mean over s of the wrapped method's maps at x + ε_s (the noisy copy rounded to
               float32, as every engine input is); ε_{s,i} = σ·√(−2 ln u1)·cos(2π u2),
               u1, u2 = ((splitmix64(seed + c (+1)) >> 11) + ½)·2⁻⁵³, c = 2(s·N + i),
               σ = noise·(max x − min x).
  token map    the pixel map summed over each p×p patch, (H/p, W/p).
"""

import math

import numpy as np
import torch

import vit_ref

MASK64 = (1 << 64) - 1


def y_and_grad(w, cfg, image, target):
    """(y_t, ∂y_t/∂x as float64 (C, H, W)) at one image, float64 throughout."""
    tr = vit_ref.forward(w, cfg, np.asarray(image, dtype=np.float64), input_grad=True)
    y = tr["logits"][target]
    y.backward()
    return float(y.item()), tr["input"].grad.detach().numpy().copy()


def logits(w, cfg, image):
    with torch.no_grad():
        return vit_ref.forward(w, cfg, np.asarray(image, dtype=np.float64))["logits"].numpy().copy()


def patch_sums(pixels, p):
    H, W = pixels.shape
    return pixels.reshape(H // p, p, W // p, p).sum(axis=(1, 3))


def saliency(w, cfg, image, target):
    _, g = y_and_grad(w, cfg, image, target)
    return np.abs(g).max(axis=0)


def grad_x_input(w, cfg, image, target):
    _, g = y_and_grad(w, cfg, image, target)
    return (np.asarray(image, dtype=np.float64) * g).sum(axis=0)


def gauss_legendre_01(n):
    x, wt = np.polynomial.legendre.leggauss(n)  # ascending nodes on [−1, 1]
    return (x + 1.0) / 2.0, wt / 2.0


def quadrature(kind, n):
    k = np.arange(n, dtype=np.float64)
    if kind == "left":
        return k / n, np.full(n, 1.0 / n)
    if kind == "right":
        return (k + 1.0) / n, np.full(n, 1.0 / n)
    if kind == "middle":
        return (k + 0.5) / n, np.full(n, 1.0 / n)
    if kind == "gauss-legendre":
        return gauss_legendre_01(n)
    raise ValueError(kind)


def black_baseline(cfg):
    """0 before normalisation: (0 − mean_c)/std_c per channel, with the float32 mean/std."""
    mean = np.asarray(cfg.mean, dtype=np.float32).astype(np.float64)
    std = np.asarray(cfg.std, dtype=np.float32).astype(np.float64)
    v = ((0.0 - mean) / std).astype(np.float32)
    return np.broadcast_to(v[:, None, None], (cfg.channels, cfg.image_h, cfg.image_w)).copy()


def integrated_gradients(w, cfg, image, target, baseline, kind, n):
    """(pixel map (H, W), completeness dict)."""
    x = np.asarray(image, dtype=np.float64)
    xb = np.asarray(baseline, dtype=np.float64)
    alphas, weights = quadrature(kind, n)
    integral = np.zeros_like(x)
    for a, wk in zip(alphas, weights):
        _, g = y_and_grad(w, cfg, xb + a * (x - xb), target)
        integral += wk * g
    attr = (x - xb) * integral
    f_x = float(logits(w, cfg, x)[target])
    f_b = float(logits(w, cfg, xb)[target])
    comp = {"attribution_sum": float(attr.sum()), "f_input": f_x, "f_baseline": f_b,
            "gap": float(attr.sum() - (f_x - f_b))}
    return attr.sum(axis=0), comp


def splitmix64_array(x):
    """splitmix64 on a numpy uint64 array (wraps mod 2^64)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def smooth_noise(seed, s, count, sigma):
    """ε for sample s (0-based), elements 0…count−1 (flat CHW), float64."""
    i = np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        c = np.uint64((seed + 2 * s * count) & MASK64) + np.uint64(2) * i
        z1 = splitmix64_array(c)
        z2 = splitmix64_array(c + np.uint64(1))
    u1 = ((z1 >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    u2 = ((z2 >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    return sigma * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


def smoothgrad(w, cfg, image, target, inner, samples, noise, seed):
    """inner(noisy image) → (pixel map, completeness dict or None). Returns the means."""
    x = np.asarray(image, dtype=np.float32)
    sigma = noise * (float(x.max()) - float(x.min()))
    acc = np.zeros((cfg.image_h, cfg.image_w))
    comp = None
    for s in range(samples):
        eps = smooth_noise(seed, s, x.size, sigma).reshape(x.shape)
        noisy = (x.astype(np.float64) + eps).astype(np.float32)
        px, c = inner(noisy)
        acc += px
        if c is not None:
            comp = {k: 0.0 for k in c} if comp is None else comp
            for k in c:
                comp[k] += c[k]
    if comp is not None:
        comp = {k: v / samples for k, v in comp.items()}
    return acc / samples, comp
