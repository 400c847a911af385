"""variants_ref.py — float64 reference of the timm / Hugging Face ViT variants and of every method on them.

Written from the shared METHODS.md ("Model variants" and the method sections) and the decisions of
tests/reference/README.md ("Variants"); it shares no code with the C++ engine and copies none from
timm or transformers (their sources were read for facts: token order, names, pooling). The LRP rule
primitives (chefer_linear, eps_linear, chefer_add, …) are the ones of methods_ref.py, unchanged.

  VConfig            the hyper-parameters and the variant flags (class / distillation / register
                     tokens, no_embed_class, pre_norm, LayerScale, final norm, fc_norm, pooling,
                     activation, q/k/v and patch biases, the checkpoint's position grid)
  random_params      deterministic float32 weights under canonical (timm-style) names, drawn from
                     one torch.Generator; round_params rounds them to F16 / BF16
  Weights, forward   the model in float64 (any dtype), recording everything the methods need
  query, readout     the query vector q over the n tokens and the map qᵀM on the patch columns
  relevance_pass     Chefer's and AttnLRP's rule sets through the variants (pooling, fc_norm,
                     LayerScale, pre_norm, the partial position-embedding Add)
  Explainer          one (image, target): every attention-, LRP-, IG- and gradient-based method
  norm_based         Kobayashi et al.'s decomposition with LayerScale and any activation
  resample_pos_embed the bicubic resampling of the patch rows of pos_embed (torch's interpolate)

Token order [CLS][DIST][REG × r][patches]; k = the prefix length; maps cover the patches only.
It is deliberately NOT a loader of real checkpoints nor a renderer: one image (C, H, W), already
normalised; raw maps, no upsampling.
"""

import math
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attattr_ref  # noqa: E402
import gradient_ref  # noqa: E402
import methods_ref as M  # noqa: E402
import norm_ref  # noqa: E402
import vit_ref  # noqa: E402

ACTIVATIONS = ("gelu", "gelu_pytorch_tanh", "gelu_new", "quick_gelu")
POOLINGS = ("token", "avg", "token+avg")


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------

@dataclass
class VConfig:
    image_h: int            # the size the model is explained at
    image_w: int
    channels: int
    patch: int
    dim: int
    depth: int
    heads: int
    mlp_dim: int
    classes: int
    ln_eps: float
    mean: list = field(default_factory=list)
    std: list = field(default_factory=list)
    # the variants (defaults: the plain timm / DeiT ViT of vit_ref.py)
    class_token: bool = True
    dist_token: bool = False      # DeiT distilled: ½(head(z_CLS) + head_dist(z_DIST))
    registers: int = 0
    no_embed_class: bool = False  # pos_embed covers only the patches
    pre_norm: bool = False        # a LayerNorm between E0 and block 1
    layer_scale: bool = False     # x' = x + γ1 ⊙ o, x_{b+1} = x' + γ2 ⊙ f
    final_norm: bool = True
    fc_norm: bool = False         # LayerNorm on the pooled vector (avg only)
    pool: str = "token"           # token | avg | token+avg
    act: str = "gelu"             # gelu | gelu_pytorch_tanh | gelu_new | quick_gelu
    qkv_bias: bool = True
    patch_bias: bool = True
    pos_grid: tuple = None        # (gh, gw) pos_embed was trained on; None = the input's grid

    def __post_init__(self):
        assert self.pool in POOLINGS and self.act in ACTIVATIONS
        assert not (self.pool == "token" and not self.class_token)
        assert not (self.dist_token and (self.pool != "token" or not self.class_token))
        assert not (self.fc_norm and self.pool != "avg")
        assert self.pool == "avg" or self.final_norm

    grid_h = property(lambda s: s.image_h // s.patch)
    grid_w = property(lambda s: s.image_w // s.patch)
    num_patches = property(lambda s: s.grid_h * s.grid_w)
    prefix = property(lambda s: int(s.class_token) + int(s.dist_token) + s.registers)
    tokens = property(lambda s: s.prefix + s.num_patches)
    head_dim = property(lambda s: s.dim // s.heads)
    patch_dim = property(lambda s: s.channels * s.patch * s.patch)
    # [CLS][DIST] rows of pos_embed (none with no_embed_class); registers never have one
    pos_prefix = property(lambda s: 0 if s.no_embed_class else int(s.class_token) + int(s.dist_token))
    head_in = property(lambda s: 2 * s.dim if s.pool == "token+avg" else s.dim)

    @property
    def ckpt_grid(self):
        return tuple(self.pos_grid) if self.pos_grid else (self.grid_h, self.grid_w)

    @property
    def resized(self):
        return self.ckpt_grid != (self.grid_h, self.grid_w)

    def pos_rows_index(self):
        """Indices (in the n tokens) of the rows that have a pos_embed row, in pos_embed's order."""
        first = list(range(self.pos_prefix))                       # CLS, DIST come first
        return first + list(range(self.prefix, self.tokens))

    def flags(self):
        return OrderedDict([
            ("class_token", self.class_token), ("dist_token", self.dist_token),
            ("registers", self.registers), ("no_embed_class", self.no_embed_class),
            ("pre_norm", self.pre_norm), ("layer_scale", self.layer_scale),
            ("final_norm", self.final_norm), ("fc_norm", self.fc_norm),
            ("pool", "distilled" if self.dist_token else self.pool), ("act", self.act),
            ("qkv_bias", self.qkv_bias), ("patch_bias", self.patch_bias),
            ("prefix", self.prefix), ("pos_prefix_rows", self.pos_prefix),
            ("resized", self.resized)])


def from_plain(cfg):
    """The VConfig of a vit_ref.Config (the plain model)."""
    return VConfig(cfg.image_h, cfg.image_w, cfg.channels, cfg.patch, cfg.dim, cfg.depth,
                   cfg.heads, cfg.mlp_dim, cfg.classes, cfg.ln_eps, list(cfg.mean), list(cfg.std))


# ---------------------------------------------------------------------------------------------
# Parameters: canonical (timm-style) names, deterministic values
# ---------------------------------------------------------------------------------------------

def param_specs(cfg, extras=()):
    """[(canonical name, shape, kind)] in generation order. kind ∈ weight (U(±√(3/fan_in))),
    ln_w (1 ± 0.2), bias (± 0.1), token (± 0.5), gamma (LayerScale, U(−0.3, 0.9)).
    extras: (name, shape, kind) of tensors the model carries but never uses (Dinov2 mask_token,
    CLIP post_layernorm)."""
    d, C, p, m = cfg.dim, cfg.channels, cfg.patch, cfg.mlp_dim
    gh, gw = cfg.ckpt_grid
    s = [("patch_embed.proj.weight", (d, C, p, p), "weight")]
    if cfg.patch_bias:
        s.append(("patch_embed.proj.bias", (d,), "bias"))
    if cfg.class_token:
        s.append(("cls_token", (1, 1, d), "token"))
    if cfg.dist_token:
        s.append(("dist_token", (1, 1, d), "token"))
    if cfg.registers:
        s.append(("reg_token", (1, cfg.registers, d), "token"))
    s.append(("pos_embed", (1, cfg.pos_prefix + gh * gw, d), "token"))
    if cfg.pre_norm:
        s += [("norm_pre.weight", (d,), "ln_w"), ("norm_pre.bias", (d,), "bias")]
    for b in range(cfg.depth):
        pre = "blocks.%d." % b
        s += [(pre + "norm1.weight", (d,), "ln_w"), (pre + "norm1.bias", (d,), "bias"),
              (pre + "attn.qkv.weight", (3 * d, d), "weight")]
        if cfg.qkv_bias:
            s.append((pre + "attn.qkv.bias", (3 * d,), "bias"))
        s += [(pre + "attn.proj.weight", (d, d), "weight"), (pre + "attn.proj.bias", (d,), "bias")]
        if cfg.layer_scale:
            s.append((pre + "ls1.gamma", (d,), "gamma"))
        s += [(pre + "norm2.weight", (d,), "ln_w"), (pre + "norm2.bias", (d,), "bias"),
              (pre + "mlp.fc1.weight", (m, d), "weight"), (pre + "mlp.fc1.bias", (m,), "bias"),
              (pre + "mlp.fc2.weight", (d, m), "weight"), (pre + "mlp.fc2.bias", (d,), "bias")]
        if cfg.layer_scale:
            s.append((pre + "ls2.gamma", (d,), "gamma"))
    if cfg.final_norm:
        s += [("norm.weight", (d,), "ln_w"), ("norm.bias", (d,), "bias")]
    if cfg.fc_norm:
        s += [("fc_norm.weight", (d,), "ln_w"), ("fc_norm.bias", (d,), "bias")]
    s += [("head.weight", (cfg.classes, cfg.head_in), "weight"), ("head.bias", (cfg.classes,), "bias")]
    if cfg.dist_token:
        s += [("head_dist.weight", (cfg.classes, d), "weight"), ("head_dist.bias", (cfg.classes,), "bias")]
    return s + list(extras)


def random_params(cfg, seed, extras=()):
    """OrderedDict canonical name → float32 array. One torch.Generator(seed); each tensor draws
    u ~ U[0, 1) in float64 (torch.rand) in spec order; value = a·(2u − 1) (+ offset), in float64,
    rounded to float32."""
    g = torch.Generator().manual_seed(seed)
    out = OrderedDict()
    for name, shape, kind in param_specs(cfg, extras):
        s = 2.0 * torch.rand(shape, generator=g, dtype=torch.float64) - 1.0
        if kind == "weight":
            v = math.sqrt(3.0 / int(np.prod(shape[1:]))) * s
        elif kind == "ln_w":
            v = 0.2 * s + 1.0
        elif kind == "bias":
            v = 0.1 * s
        elif kind == "gamma":
            v = 0.6 * s + 0.3
        else:
            v = 0.5 * s
        out[name] = v.to(torch.float32).numpy()
    return out


STORAGE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def round_params(params, storage):
    """The values a checkpoint stored as `storage` holds, back in float32 (exact)."""
    dt = STORAGE[storage]
    return OrderedDict((k, torch.as_tensor(v).to(dt).to(torch.float32).numpy()) for k, v in params.items())


def random_image(cfg, seed):
    """A random image: u ~ U[0, 1) per value (torch.Generator(seed), float64), normalised
    (u − mean_c)/std_c in float64, rounded to float32. (C, H, W)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand((cfg.channels, cfg.image_h, cfg.image_w), generator=g, dtype=torch.float64)
    mean = torch.tensor(cfg.mean, dtype=torch.float64)[:, None, None]
    std = torch.tensor(cfg.std, dtype=torch.float64)[:, None, None]
    return ((u - mean) / std).to(torch.float32).numpy()


# ---------------------------------------------------------------------------------------------
# Position embedding at another input size
# ---------------------------------------------------------------------------------------------

def resample_pos_embed(pos, cfg):
    """pos (pos_prefix + gh·gw, d) float32 at the checkpoint grid → (pos_prefix + P, d) float32 at
    the input grid: the patch rows as a (d, gh, gw) grid through torch's interpolate (bicubic,
    align_corners=False, antialias=False), evaluated in float64 and rounded once to float32 (the
    correctly rounded float32 result: torch's float32 kernel differs from it in the last bit, and
    the relevance rules amplify a last-bit change of pos_embed to ~1e-4 of a map); the prefix rows
    kept."""
    pos = np.asarray(pos, dtype=np.float32)
    if not cfg.resized:
        return pos
    k, (gh, gw), d = cfg.pos_prefix, cfg.ckpt_grid, cfg.dim
    grid = torch.as_tensor(pos[k:].astype(np.float64)).reshape(gh, gw, d).permute(2, 0, 1)[None]
    new = F.interpolate(grid, size=(cfg.grid_h, cfg.grid_w), mode="bicubic",
                        align_corners=False, antialias=False).to(torch.float32)      # (1, d, h, w)
    rows = new[0].permute(1, 2, 0).reshape(cfg.num_patches, d).numpy()
    return np.concatenate([pos[:k], rows], axis=0).astype(np.float32)


def bicubic_explicit(src, out_h, out_w, a=-0.75):
    """An explicit float64 bicubic resampler of (c, h, w) → (c, out_h, out_w) — Keys' cubic
    convolution kernel with coefficient a, half-pixel centres (align_corners=False), source
    index clamped at the borders, no antialiasing. Used only to check the resampling."""
    src = np.asarray(src, dtype=np.float64)
    c, h, w = src.shape

    def kernel(t):
        t = abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0

    def taps(n_out, n_in):
        out = []
        for o in range(n_out):
            x = (o + 0.5) * n_in / n_out - 0.5
            x0 = math.floor(x)
            out.append([(min(max(x0 + m, 0), n_in - 1), kernel(x - (x0 + m))) for m in (-1, 0, 1, 2)])
        return out

    th, tw = taps(out_h, h), taps(out_w, w)
    res = np.zeros((c, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            for yi, wy in th[i]:
                for xi, wx in tw[j]:
                    res[:, i, j] += wy * wx * src[:, yi, xi]
    return res


# ---------------------------------------------------------------------------------------------
# Forward pass
# ---------------------------------------------------------------------------------------------

def activation(name):
    if name == "gelu":
        return vit_ref.gelu
    if name in ("gelu_pytorch_tanh", "gelu_new"):
        c = math.sqrt(2.0 / math.pi)
        return lambda x: 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x ** 3)))
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    raise ValueError(name)


class Weights:
    """The parameters as torch tensors of one dtype, in working shapes; absent biases are zeros."""

    def __init__(self, params, cfg, dtype=torch.float64):
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32)).to(dtype)
        g = lambda name: t(params[name])
        opt = lambda name, n: g(name) if name in params else torch.zeros(n, dtype=dtype)
        d = cfg.dim
        self.dtype = dtype
        self.patch_w = g("patch_embed.proj.weight").reshape(d, cfg.patch_dim)     # (d, C·p·p)
        self.patch_b = opt("patch_embed.proj.bias", d)                             # (d)
        self.cls = g("cls_token").reshape(d) if cfg.class_token else None
        self.dist = g("dist_token").reshape(d) if cfg.dist_token else None
        self.reg = g("reg_token").reshape(cfg.registers, d) if cfg.registers else None
        self.pos_ckpt = np.asarray(params["pos_embed"], dtype=np.float32).reshape(-1, d)
        self.pos = t(resample_pos_embed(self.pos_ckpt, cfg))                      # (pos rows, d)
        self.norm_pre = (g("norm_pre.weight"), g("norm_pre.bias")) if cfg.pre_norm else None
        self.blocks = []
        for b in range(cfg.depth):
            bg = lambda s: g("blocks.%d.%s" % (b, s))
            self.blocks.append(dict(
                norm1_w=bg("norm1.weight"), norm1_b=bg("norm1.bias"),
                qkv_w=bg("attn.qkv.weight"), qkv_b=opt("blocks.%d.attn.qkv.bias" % b, 3 * d),
                proj_w=bg("attn.proj.weight"), proj_b=bg("attn.proj.bias"),
                ls1=bg("ls1.gamma") if cfg.layer_scale else None,
                norm2_w=bg("norm2.weight"), norm2_b=bg("norm2.bias"),
                fc1_w=bg("mlp.fc1.weight"), fc1_b=bg("mlp.fc1.bias"),
                fc2_w=bg("mlp.fc2.weight"), fc2_b=bg("mlp.fc2.bias"),
                ls2=bg("ls2.gamma") if cfg.layer_scale else None))
        self.norm = (g("norm.weight"), g("norm.bias")) if cfg.final_norm else None
        self.fc_norm = (g("fc_norm.weight"), g("fc_norm.bias")) if cfg.fc_norm else None
        self.head_w, self.head_b = g("head.weight"), g("head.bias")    # (classes, head_in)
        if cfg.dist_token:
            self.head_dist_w, self.head_dist_b = g("head_dist.weight"), g("head_dist.bias")


def forward(w, cfg, image, attn_grad=False, input_grad=False, attn_replace=None):
    """One image (C, H, W) → trace dict (tensors keep their graph).

    attn_replace: {block: (H, n, n) tensor} used instead of that block's softmax output (attattr,
    finite differences). Trace: input, patches, embed, pos_in (the Add's token operand: the
    [CLS][DIST] rows that have a pos row, then the patch embeddings), pos, pos_out, E0 (n, d),
    x0 (block 1's input: E0 or pre_norm(E0)), blocks[b] {x, ln1, qkv, q, k, v, scores, attn, ctx,
    attn_out (o), ls_attn (γ1⊙o or o), x_mid, ln2, fc1, act, mlp_out (f), ls_mlp}, x_final, z (the
    final norm's output, or x_final), mean (pooled patch mean), head_in, logits.
    """
    d, H, dh, n, k = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens, cfg.prefix
    act = activation(cfg.act)
    x_img = torch.as_tensor(np.asarray(image)).to(w.dtype)
    if input_grad:
        x_img = x_img.clone().requires_grad_(True)
    tr = {"input": x_img, "blocks": []}
    patches = vit_ref.im2col(x_img, cfg.patch)                             # (P, C·p·p)
    embed = vit_ref.linear(patches, w.patch_w, w.patch_b)                  # (P, d)
    lead = [t.reshape(1, d) for t in (w.cls, w.dist) if t is not None]     # CLS, DIST
    regs = [w.reg] if w.reg is not None else []
    if cfg.no_embed_class:
        pos_in = embed
        pos_out = pos_in + w.pos
        E0 = torch.cat(lead + regs + [pos_out], dim=0)
    else:
        pos_in = torch.cat(lead + [embed], dim=0)
        pos_out = pos_in + w.pos
        E0 = torch.cat([pos_out[:cfg.pos_prefix]] + regs + [pos_out[cfg.pos_prefix:]], dim=0)
    x = E0
    if cfg.pre_norm:
        x, _, _ = vit_ref.layernorm(E0, w.norm_pre[0], w.norm_pre[1], cfg.ln_eps)
    tr.update(patches=patches, embed=embed, pos_in=pos_in, pos=w.pos, pos_out=pos_out, E0=E0, x0=x)
    for b, bp in enumerate(w.blocks):
        bt = {"x": x}
        u, _, _ = vit_ref.layernorm(x, bp["norm1_w"], bp["norm1_b"], cfg.ln_eps)
        qkv = vit_ref.linear(u, bp["qkv_w"], bp["qkv_b"])                               # (n, 3d)
        heads = lambda t: t.reshape(n, H, dh).permute(1, 0, 2)                           # (H, n, dh)
        q, kk, v = heads(qkv[:, 0:d]), heads(qkv[:, d:2 * d]), heads(qkv[:, 2 * d:3 * d])
        scores = (q @ kk.transpose(1, 2)) / math.sqrt(dh)                                # (H, n, n)
        if attn_replace is not None and b in attn_replace:
            attn = attn_replace[b]
        else:
            attn = torch.softmax(scores, dim=-1)
        if attn_grad and attn.requires_grad:
            attn.retain_grad()
        ctx_h = attn @ v                                                                 # (H, n, dh)
        ctx = ctx_h.permute(1, 0, 2).reshape(n, d)
        attn_out = vit_ref.linear(ctx, bp["proj_w"], bp["proj_b"])                      # o (n, d)
        ls_attn = bp["ls1"] * attn_out if cfg.layer_scale else attn_out
        x_mid = x + ls_attn
        ln2, _, _ = vit_ref.layernorm(x_mid, bp["norm2_w"], bp["norm2_b"], cfg.ln_eps)
        fc1 = vit_ref.linear(ln2, bp["fc1_w"], bp["fc1_b"])                              # (n, mlp)
        a = act(fc1)
        mlp_out = vit_ref.linear(a, bp["fc2_w"], bp["fc2_b"])                            # f (n, d)
        ls_mlp = bp["ls2"] * mlp_out if cfg.layer_scale else mlp_out
        x = x_mid + ls_mlp
        bt.update(ln1=u, qkv=qkv, q=q, k=kk, v=v, scores=scores, attn=attn, ctx_h=ctx_h, ctx=ctx,
                  attn_out=attn_out, ls_attn=ls_attn, x_mid=x_mid, ln2=ln2, fc1=fc1, act=a,
                  mlp_out=mlp_out, ls_mlp=ls_mlp)
        tr["blocks"].append(bt)
    tr["x_final"] = x
    z = x
    if cfg.final_norm:
        z, _, _ = vit_ref.layernorm(x, w.norm[0], w.norm[1], cfg.ln_eps)
    tr["z"] = z
    if cfg.dist_token:
        tr["head_in"] = torch.cat([z[0], z[1]])
        tr["logits"] = 0.5 * (vit_ref.linear(z[0], w.head_w, w.head_b)
                              + vit_ref.linear(z[1], w.head_dist_w, w.head_dist_b))
    elif cfg.pool == "token":
        tr["head_in"] = z[0]
        tr["logits"] = vit_ref.linear(z[0], w.head_w, w.head_b)
    else:
        m = z[k:].mean(dim=0)                                                           # (d)
        tr["mean"] = m
        if cfg.pool == "avg":
            h = m
            if cfg.fc_norm:
                h, _, _ = vit_ref.layernorm(m, w.fc_norm[0], w.fc_norm[1], cfg.ln_eps)
        else:
            h = torch.cat([z[0], m])
        tr["head_in"] = h
        tr["logits"] = vit_ref.linear(h, w.head_w, w.head_b)
    return tr


def logits_and_grads(w, cfg, image, target=None):
    """Forward + backward of the target logit: (trace, target, ∂y_t/∂input, [∂y_t/∂A_b])."""
    tr = forward(w, cfg, image, attn_grad=True, input_grad=True)
    if target is None:
        target = int(torch.argmax(tr["logits"]).item())
    tr["logits"][target].backward()
    grads = [bt["attn"].grad.detach().clone() for bt in tr["blocks"]]
    return tr, target, tr["input"].grad.detach().clone(), grads


# ---------------------------------------------------------------------------------------------
# The query and the read-out
# ---------------------------------------------------------------------------------------------

def query(cfg, dtype=torch.float64):
    """q ∈ R^n: e_CLS (token); ½(e_CLS + e_DIST) (distilled); 1/P on each patch (avg);
    ½ e_CLS + ½/P on each patch (token+avg)."""
    q = torch.zeros(cfg.tokens, dtype=dtype)
    k, P = cfg.prefix, cfg.num_patches
    if cfg.dist_token:
        q[0] = 0.5
        q[1] = 0.5
    elif cfg.pool == "token":
        q[0] = 1.0
    elif cfg.pool == "avg":
        q[k:] = 1.0 / P
    else:
        q[0] = 0.5
        q[k:] = 0.5 / P
    return q


def readout(mat, cfg, q=None):
    """(qᵀ M) on the patch columns, as the (H/p, W/p) grid. M (n, n); or a row (n) as is."""
    row = mat if mat.dim() == 1 else (query(cfg, mat.dtype) if q is None else q) @ mat
    return row[cfg.prefix:].reshape(cfg.grid_h, cfg.grid_w)


# ---------------------------------------------------------------------------------------------
# Relevance through the variants (rules of methods_ref.py)
# ---------------------------------------------------------------------------------------------

def chefer_mean(R, X):
    """The mean over tokens as a linear layer with weights 1/P, no bias, in Chefer's rule set:
    Z = Σ_t x_t/P per feature (signed, the z rule — what Chefer's code does for average
    pooling), R_t = (x_t/P) ⊙ safe_divide(R, Z).  R (d), X (P, d) → (P, d)."""
    P = X.shape[0]
    return (X / P) * M.safe_divide(R, X.mean(dim=0))


def eps_mean(R, X):
    """The same mean in AttnLRP's rule set: the ε rule, R_t = (x_t/P) ⊙ R / stab(Z)."""
    P = X.shape[0]
    return (X / P) * (R / M.stabilise(X.mean(dim=0)))


MEAN_RULE = {"chefer": chefer_mean, "attnlrp": eps_mean}


def relevance_pass(w, cfg, tr, target, rules, to_pixels=False, tokens=None):
    """Relevance from the logits through the traced forward pass with `rules` (methods_ref.CHEFER
    or methods_ref.ATTNLRP). Returns dict: R_A (per block (H, n, n), right after the A·v rule),
    R_tokens (n, d) at E0, R_image (C, H, W) if to_pixels, log rows, block_input_sums, seed_sum.
    `tokens`, a dict if given, receives per token the Σ over features (and heads) of the relevance
    at the points the guided walk draws (make_walk_fixtures.py): "pool", "output", "e0" (n each)
    and "blocks" (per block a dict name → (n))."""
    def tsum(r):                                 # (n, …) → (n): Σ over everything but the token
        return r.reshape(r.shape[0], -1).sum(dim=1)
    with torch.no_grad():
        d, H, dh, n, k = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens, cfg.prefix
        log = M.Log()
        det = lambda t: t.detach()
        logits = det(tr["logits"])
        R = torch.zeros_like(logits)
        R[target] = 1.0 if rules.seed == "one-hot" else logits[target]
        seed_sum = M.total(R)
        mean_rule = MEAN_RULE[rules.name.split("-")[0]]                        # chefer-<linear>-<add> too
        z, h = det(tr["z"]), det(tr["head_in"])

        # head (distilled: one linear layer ½[W_head, W_dist] on concat[z_CLS, z_DIST])
        if cfg.dist_token:
            W = 0.5 * torch.cat([w.head_w, w.head_dist_w], dim=1)
            bias = 0.5 * (w.head_b + w.head_dist_b)
        else:
            W, bias = w.head_w, w.head_b
        R_h = rules.linear(R, h, W, bias)
        log("head", R, R_h)
        R_z = torch.zeros_like(z)                                               # (n, d)
        if cfg.pool == "token":
            R_z[0] = R_h[:d]
            if cfg.dist_token:
                R_z[1] = R_h[d:]
            log("pool", R_h, R_z)
        elif cfg.pool == "avg":
            R_m = R_h
            if cfg.fc_norm:
                R_m = rules.layernorm(R_h, det(tr["mean"]), h, w.fc_norm[0], w.fc_norm[1], cfg.ln_eps)
                log("fc_norm", R_h, R_m)
            R_z[k:] = mean_rule(R_m, z[k:])
            log("pool", R_m, R_z)
        else:                                                                   # token+avg
            R_z[0] = R_h[:d]
            R_z[k:] = mean_rule(R_h[d:], z[k:])
            log("pool", R_h, R_z)
        if cfg.final_norm:
            R_x = rules.layernorm(R_z, det(tr["x_final"]), z, w.norm[0], w.norm[1], cfg.ln_eps)
            log("norm", R_z, R_x)
        else:
            R_x = R_z
        if tokens is not None:
            tokens["pool"], tokens["output"] = tsum(R_z), tsum(R_x)
            tokens["blocks"] = [None] * cfg.depth

        R_A = [None] * cfg.depth
        block_sums = [None] * cfg.depth
        for b in reversed(range(cfg.depth)):
            bt = {key: det(v) for key, v in tr["blocks"][b].items()}
            bp = w.blocks[b]
            pre = "blocks.%d." % b
            # x_{b+1} = x' + γ2⊙f: the Add sees a = x', b = γ2⊙f; γ2 passes relevance to f unchanged
            R_res2, R_lsf = rules.add(R_x, bt["x_mid"], bt["ls_mlp"])
            log(pre + "add2", R_x, R_res2, R_lsf)
            R_mlp = R_lsf
            if cfg.layer_scale:
                log(pre + "ls2", R_lsf, R_mlp)
            R_act = rules.linear(R_mlp, bt["act"], bp["fc2_w"], bp["fc2_b"])
            log(pre + "mlp.fc2", R_mlp, R_act)
            R_fc1 = rules.gelu(R_act, bt["fc1"])                                # any activation
            log(pre + "mlp.act", R_act, R_fc1)
            R_ln2 = rules.linear(R_fc1, bt["ln2"], bp["fc1_w"], bp["fc1_b"])
            log(pre + "mlp.fc1", R_fc1, R_ln2)
            R_mid_f = rules.layernorm(R_ln2, bt["x_mid"], bt["ln2"], bp["norm2_w"], bp["norm2_b"],
                                      cfg.ln_eps)
            log(pre + "norm2", R_ln2, R_mid_f)
            R_mid = R_res2 + R_mid_f
            log(pre + "clone2", R_res2 + R_mid_f, R_mid)
            # x' = x + γ1⊙o
            R_res1, R_lso = rules.add(R_mid, bt["x"], bt["ls_attn"])
            log(pre + "add1", R_mid, R_res1, R_lso)
            R_o = R_lso
            if cfg.layer_scale:
                log(pre + "ls1", R_lso, R_o)
            R_ctx = rules.linear(R_o, bt["ctx"], bp["proj_w"], bp["proj_b"])
            log(pre + "attn.proj", R_o, R_ctx)
            R_ctx_h = R_ctx.reshape(n, H, dh).permute(1, 0, 2)
            R_attn, R_v = rules.product(R_ctx_h, bt["attn"], bt["v"])
            R_A[b] = R_attn
            log(pre + "attn.A_v", R_ctx_h, R_attn, R_v)
            R_scores = rules.softmax(R_attn, bt["scores"], bt["attn"])
            log(pre + "attn.softmax", R_attn, R_scores)
            R_q, R_kT = rules.product(R_scores, bt["q"], bt["k"].transpose(1, 2))
            log(pre + "attn.q_kT", R_scores, R_q, R_kT)
            to_tok = lambda r: r.permute(1, 0, 2).reshape(n, d)
            R_qkv = torch.cat([to_tok(R_q), to_tok(R_kT.transpose(1, 2)), to_tok(R_v)], dim=1)
            R_ln1 = rules.linear(R_qkv, bt["ln1"], bp["qkv_w"], bp["qkv_b"])
            log(pre + "attn.qkv", R_qkv, R_ln1)
            R_x_att = rules.layernorm(R_ln1, bt["x"], bt["ln1"], bp["norm1_w"], bp["norm1_b"],
                                      cfg.ln_eps)
            log(pre + "norm1", R_ln1, R_x_att)
            R_x_out = R_x
            R_x = R_res1 + R_x_att
            log(pre + "clone1", R_res1 + R_x_att, R_x)
            block_sums[b] = M.total(R_x)
            if tokens is not None:
                tokens["blocks"][b] = OrderedDict([
                    ("output", tsum(R_x_out)), ("residual2", tsum(R_res2)), ("ff_branch", tsum(R_lsf)),
                    ("ff_in", tsum(R_ln2)), ("ff_path", tsum(R_mid_f)), ("mid", tsum(R_mid)),
                    ("residual1", tsum(R_res1)), ("attn_branch", tsum(R_lso)), ("ctx", tsum(R_ctx)),
                    ("q", tsum(R_q.permute(1, 0, 2))), ("k", tsum(R_kT.permute(2, 0, 1))),
                    ("v", tsum(R_v.permute(1, 0, 2))), ("attn_in", tsum(R_ln1)),
                    ("attn_path", tsum(R_x_att)), ("input", tsum(R_x))])
        if cfg.pre_norm:
            R_E0 = rules.layernorm(R_x, det(tr["E0"]), det(tr["x0"]), w.norm_pre[0], w.norm_pre[1],
                                   cfg.ln_eps)
            log("norm_pre", R_x, R_E0)
        else:
            R_E0 = R_x
        if tokens is not None:
            tokens["e0"] = tsum(R_E0)

        out = {"R_A": R_A, "R_tokens": R_E0, "seed_sum": seed_sum,
               "block_input_sums": block_sums, "log": log.rows}
        if to_pixels:
            rows = cfg.pos_rows_index()
            covered = torch.zeros(n, dtype=torch.bool)
            covered[rows] = True
            if not bool(covered.all()):
                log("prefix_without_pos", R_E0[~covered])               # dropped here
            R_add = R_E0[rows]
            R_tok, R_pos = rules.add(R_add, det(tr["pos_in"]), w.pos)
            log("pos_embed.add", R_add, R_tok, R_pos)
            R_embed = R_tok[cfg.pos_prefix:]
            log("drop_prefix", R_tok, R_embed)
            R_img = rules.patch(R_embed, det(tr["input"]), det(tr["patches"]), w.patch_w, w.patch_b, cfg)
            log("patch_embed", R_embed, R_img)
            out["R_image"] = R_img
        return out


# ---------------------------------------------------------------------------------------------
# Attention- and LRP-based methods with the query
# ---------------------------------------------------------------------------------------------

def raw_attention(tr, cfg):
    return readout(M.head_mean(tr["blocks"][-1]["attn"].detach()), cfg)


def rollout(tr, cfg, fusion="mean", discard_ratio=0.0, start_layer=0):
    """Â_b = rownorm(fuse_h(A_b) [discarded] + I), C = Â_L…Â_s, map qᵀC; discard as methods_ref
    (the floor(ratio·n²) lowest entries, stable order, entry (0, 0) protected — token 0,
    whatever it is)."""
    n = cfg.tokens
    mats = []
    for bt in tr["blocks"]:
        A = bt["attn"].detach()
        Fu = {"mean": lambda: A.mean(dim=0), "max": lambda: A.max(dim=0).values,
              "min": lambda: A.min(dim=0).values}[fusion]()
        if discard_ratio > 0:
            flat = Fu.reshape(-1).clone()
            count = int(flat.numel() * discard_ratio)
            order = np.argsort(flat.cpu().numpy(), kind="stable")[:count]
            order = order[order != 0]
            flat[torch.as_tensor(order, dtype=torch.long)] = 0
            Fu = flat.reshape(n, n)
        Mx = Fu + torch.eye(n, dtype=Fu.dtype)
        mats.append(Mx / Mx.sum(dim=-1, keepdim=True))
    return readout(M.rollout_matrix(mats, start_layer), cfg)


def attn_gradcam(tr, cfg, grad_attn):
    """w_h = mean over the patch columns of (qᵀ∇A_L[h]); map = (E_h[w_h·(qᵀA_L[h])])⁺ on the
    patch columns."""
    q = query(cfg, grad_attn[-1].dtype)
    A = tr["blocks"][-1]["attn"].detach()
    qA = torch.einsum("i,hij->hj", q, A)[:, cfg.prefix:]                 # (H, P)
    qG = torch.einsum("i,hij->hj", q, grad_attn[-1])[:, cfg.prefix:]
    wts = qG.mean(dim=-1, keepdim=True)                                  # (H, 1)
    return (wts * qA).mean(dim=0).clamp(min=0).reshape(cfg.grid_h, cfg.grid_w)


def grad_rollout(tr, cfg, grad_attn):
    n = cfg.tokens
    R = torch.eye(n, dtype=grad_attn[0].dtype)
    for bt, G in zip(tr["blocks"], grad_attn):
        R = R + M.head_mean((G * bt["attn"].detach()).clamp(min=0)) @ R
    return readout(R, cfg)


def transformer_attribution(cfg, grad_attn, R_A, start_layer=0, use_grad=True, block=None, weight=None,
                            attn=None):
    """C = Π (I + Ā_b) from start_layer; `block`: qᵀ(I + Ā_b) of that block alone. `weight`
    (overrides use_grad) is what multiplies R_A_b before the head mean: "grad" ∇A_b (the method),
    "none" nothing (the paper code's "without gradients" ablation), "attn" A_b (the ablation as
    the paper's text states it; `attn`: the A_b per block)."""
    weight = weight or ("grad" if use_grad else "none")
    eye = torch.eye(cfg.tokens, dtype=R_A[0].dtype)
    factor = {"grad": grad_attn, "none": [None] * len(R_A), "attn": attn}[weight]
    bars = [M.head_mean((RA if F_ is None else F_ * RA).clamp(min=0)) for F_, RA in zip(factor, R_A)]
    if block is not None:
        return readout(eye + bars[block], cfg)
    return readout(M.rollout_matrix([eye + Ab for Ab in bars], start_layer), cfg)


def partial_lrp(cfg, R_A):
    return readout(M.head_mean(R_A[-1].clamp(min=0)), cfg)


def attnlrp_tokens(cfg, R_tokens):
    """Σ over features of the relevance at E0, the patch rows, (H/p, W/p)."""
    return readout(R_tokens.sum(dim=1), cfg)


# ---------------------------------------------------------------------------------------------
# Gradient methods (gradient_ref.py's definitions on this forward)
# ---------------------------------------------------------------------------------------------

def y_and_grad(w, cfg, image, target):
    tr = forward(w, cfg, np.asarray(image, dtype=np.float64), input_grad=True)
    y = tr["logits"][target]
    y.backward()
    return float(y.item()), tr["input"].grad.detach().numpy().copy()


def logits_of(w, cfg, image):
    with torch.no_grad():
        return forward(w, cfg, np.asarray(image, dtype=np.float64))["logits"].numpy().copy()


def saliency(w, cfg, image, target):
    return np.abs(y_and_grad(w, cfg, image, target)[1]).max(axis=0)


def grad_x_input(w, cfg, image, target):
    return (np.asarray(image, dtype=np.float64) * y_and_grad(w, cfg, image, target)[1]).sum(axis=0)


def black_baseline(cfg):
    mean = np.asarray(cfg.mean, dtype=np.float32).astype(np.float64)
    std = np.asarray(cfg.std, dtype=np.float32).astype(np.float64)
    v = ((0.0 - mean) / std).astype(np.float32)
    return np.broadcast_to(v[:, None, None], (cfg.channels, cfg.image_h, cfg.image_w)).copy()


def integrated_gradients(w, cfg, image, target, baseline, kind, steps):
    x = np.asarray(image, dtype=np.float64)
    xb = np.asarray(baseline, dtype=np.float64)
    alphas, weights = gradient_ref.quadrature(kind, steps)
    integral = np.zeros_like(x)
    for a, wk in zip(alphas, weights):
        integral += wk * y_and_grad(w, cfg, xb + a * (x - xb), target)[1]
    attr = (x - xb) * integral
    f_x, f_b = float(logits_of(w, cfg, x)[target]), float(logits_of(w, cfg, xb)[target])
    comp = OrderedDict([("attribution_sum", float(attr.sum())), ("f_input", f_x),
                        ("f_baseline", f_b), ("gap", float(attr.sum() - (f_x - f_b)))])
    return attr.sum(axis=0), comp


def smoothgrad_saliency(w, cfg, image, target, samples, noise, seed):
    x = np.asarray(image, dtype=np.float32)
    sigma = noise * (float(x.max()) - float(x.min()))
    acc = np.zeros((cfg.image_h, cfg.image_w))
    for s in range(samples):
        eps = gradient_ref.smooth_noise(seed, s, x.size, sigma).reshape(x.shape)
        acc += saliency(w, cfg, (x.astype(np.float64) + eps).astype(np.float32), target)
    return acc / samples


# ---------------------------------------------------------------------------------------------
# attattr (Hao et al. 2021) on the variants
# ---------------------------------------------------------------------------------------------

def probability(logits, target, output="softmax"):
    return torch.sigmoid(logits[target]) if output == "sigmoid" else torch.softmax(logits, 0)[target]


def attattr(w, cfg, image, target, steps=20, output="softmax"):
    """(L, H, n, n): Attr_l = A_l ⊙ Σ_{k<m} (1/m) ∂F(k/m·A_l)/∂A_l, only block l's attention
    replaced, the blocks above recomputing theirs; F = the target's probability."""
    with torch.no_grad():
        A = [bt["attn"].detach().clone() for bt in forward(w, cfg, image)["blocks"]]
    nodes, weights = attattr_ref.left_riemann(steps)
    out = []
    for l in range(cfg.depth):
        acc = torch.zeros_like(A[l])
        for a, wt in zip(nodes, weights):
            scaled = (float(a) * A[l]).clone().requires_grad_(True)
            Fv = probability(forward(w, cfg, image, attn_replace={l: scaled})["logits"], target, output)
            (g,) = torch.autograd.grad(Fv, scaled)
            acc += float(wt) * g
        out.append((A[l] * acc).numpy())
    return np.stack(out)


def attattr_head_scores(w, cfg, image, target, attr, output="softmax"):
    """(L, H) each: signed max of Attr, mean_i max_j A, |Σ A ⊙ ∂F/∂A| (unchanged definitions)."""
    tr = forward(w, cfg, image, attn_grad=True, input_grad=True)
    probability(tr["logits"], target, output).backward()
    s_attr = attr.reshape(cfg.depth, cfg.heads, -1).max(axis=2)
    s_attn = np.stack([bt["attn"].detach().max(dim=2).values.mean(dim=1).numpy() for bt in tr["blocks"]])
    s_taylor = np.stack([(bt["attn"].detach() * bt["attn"].grad).sum(dim=(1, 2)).abs().numpy()
                         for bt in tr["blocks"]])
    return s_attr, s_attn, s_taylor


def attattr_token_map(attr, cfg):
    """qᵀ Ŝ_{L−1}·…·Ŝ_0 on the patch columns, Ŝ_l = rownorm(I + M⁺/max M⁺), M⁺ = Σ_h max(Attr, 0)
    (a block with max M⁺ ≤ 0 is skipped, as attattr_ref.token_map)."""
    n = cfg.tokens
    row = query(cfg).numpy()
    for l in reversed(range(cfg.depth)):
        mpos = np.clip(attr[l], 0.0, None).sum(axis=0)
        mx = mpos.max()
        if mx <= 0:
            continue
        s = np.eye(n) + mpos / mx
        row = row @ (s / s.sum(axis=1, keepdims=True))
    return row[cfg.prefix:].reshape(cfg.grid_h, cfg.grid_w)


def attattr_tree(attr, cfg, threshold):
    """attattr_ref.tree with "CLS" generalised to every prefix token: M̂_l = M_l / max over the
    query rows i ≥ k (all columns); root = argmax_{j ≥ k} Σ_i M_{L−1}[i, j]; candidates j ≥ k;
    prefix tokens are never nodes. Returns (tree dict, margin)."""
    L, n, k = attr.shape[0], attr.shape[2], cfg.prefix
    Msum = attr.sum(axis=1)
    col = Msum[L - 1].sum(axis=0)
    root = k + int(np.argmax(col[k:]))
    nodes, edges, member = [root], [], {root}
    margin = float("inf")
    for l in range(L - 2, -1, -1):
        mx = Msum[l][k:].max()
        if mx <= 0:
            continue
        norm = Msum[l] / mx
        cands = []
        for i in sorted(member):
            for j in range(k, n):
                if j in member:
                    continue
                margin = min(margin, abs(norm[i, j] - threshold))
                if norm[i, j] > threshold:
                    cands.append((-norm[i, j], i, j))
        cands.sort()
        for s, i, j in cands:
            if j in member:
                continue
            member.add(j)
            nodes.append(j)
            edges.append({"from": i, "to": j, "block": l, "score": -s})
    return {"root": root, "threshold": threshold, "nodes": nodes, "edges": edges}, margin


# ---------------------------------------------------------------------------------------------
# Norm-based (Kobayashi et al.) with LayerScale and any activation
# ---------------------------------------------------------------------------------------------

def act_ratio(h, act_name):
    """act(h)/h element-wise, float64; ½ (act′(0) of all three activations) where |h| ≤ 1e-12
    (norm_ref.gelu_ratio's threshold)."""
    ht = torch.as_tensor(h, dtype=torch.float64)
    out = torch.full_like(ht, 0.5)
    big = ht.abs() > 1e-12
    out[big] = activation(act_name)(ht[big]) / ht[big]
    return out.numpy()


def norm_block_pieces(w, cfg, b, x):
    """Every piece z_{i←j} of block b for the block input x (n, d), float64 numpy, as norm_ref.py
    with LayerScale multiplying each piece (γ1⊙a_{i←j}, γ2⊙f_{i←j}) and act(h)/h in the FF.
    Returns (pieces, bias, actual, A)."""
    bp = {key: (v.detach().numpy().astype(np.float64) if v is not None else None)
          for key, v in w.blocks[b].items()}
    d, H, dh, n, eps = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens, cfg.ln_eps
    g1 = bp["ls1"] if cfg.layer_scale else np.ones(d)
    g2 = bp["ls2"] if cfg.layer_scale else np.ones(d)

    def ln(v, gamma, beta):
        mu = v.mean(-1, keepdims=True)
        s = np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + eps)
        return (v - mu) / s * gamma + beta, s

    u, _ = ln(x, bp["norm1_w"], bp["norm1_b"])
    qkv = u @ bp["qkv_w"].T + bp["qkv_b"]
    q = qkv[:, :d].reshape(n, H, dh).transpose(1, 0, 2)
    k = qkv[:, d:2 * d].reshape(n, H, dh).transpose(1, 0, 2)
    v = qkv[:, 2 * d:].reshape(n, H, dh).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
    s = s - s.max(-1, keepdims=True)
    A = np.exp(s)
    A = A / A.sum(-1, keepdims=True)
    proj_w, proj_b = bp["proj_w"], bp["proj_b"]
    fx = np.stack([v[h] @ proj_w[:, h * dh:(h + 1) * dh].T for h in range(H)])       # (H, n, d)
    atb = np.einsum("hij,hjd->ijd", A, fx) * g1                                         # γ1⊙a
    res = atb + np.eye(n)[:, :, None] * x[None, :, :]
    bO = g1 * proj_b
    x_mid = res.sum(1) + bO
    ln2, s2 = ln(x_mid, bp["norm2_w"], bp["norm2_b"])
    lnp = (res - res.mean(-1, keepdims=True)) / s2[:, None, :] * bp["norm2_w"]
    ln_bias = (bO - bO.mean()) / s2 * bp["norm2_w"] + bp["norm2_b"]
    h_full = ln2 @ bp["fc1_w"].T + bp["fc1_b"]
    ratio = act_ratio(h_full, cfg.act)
    ff = ((lnp @ bp["fc1_w"].T) * ratio[:, None, :]) @ bp["fc2_w"].T * g2              # γ2⊙f
    ff_bias = (((ln_bias @ bp["fc1_w"].T + bp["fc1_b"]) * ratio) @ bp["fc2_w"].T + bp["fc2_b"]) * g2
    mlp_out = activation(cfg.act)(torch.as_tensor(h_full)).numpy() @ bp["fc2_w"].T + bp["fc2_b"]
    layer = res + ff
    bOn = np.broadcast_to(bO, (n, d))
    stages = norm_ref.STAGES
    pieces = dict(zip(stages, (atb, res, lnp, ff, layer)))
    bias = dict(zip(stages, (bOn, bOn, ln_bias, ff_bias, bOn + ff_bias)))
    actual = dict(zip(stages, (x_mid - x, x_mid, ln2, g2 * mlp_out, x_mid + g2 * mlp_out)))
    return pieces, bias, actual, A


def norm_based(w, cfg, image):
    """maps (L, 5, n, n), mixing (L, 5, n), token maps per stage (qᵀ rollout, patch columns),
    and the self-checks (decomposition identity, agreement with forward)."""
    with torch.no_grad():
        tr = forward(w, cfg, image)
    L, n = cfg.depth, cfg.tokens
    maps = np.zeros((L, len(norm_ref.STAGES), n, n))
    mixing = np.zeros((L, len(norm_ref.STAGES), n))
    worst_identity = worst_trace = 0.0
    for b in range(L):
        x = tr["blocks"][b]["x"].numpy()
        pieces, bias, actual, A = norm_block_pieces(w, cfg, b, x)
        worst_trace = max(worst_trace, np.abs(A - tr["blocks"][b]["attn"].numpy()).max())
        nxt = tr["blocks"][b + 1]["x"] if b + 1 < L else tr["x_final"]
        worst_trace = max(worst_trace, np.abs(actual["layer"] - nxt.numpy()).max())
        for si, st in enumerate(norm_ref.STAGES):
            maps[b, si] = np.linalg.norm(pieces[st], axis=-1)
            mixing[b, si] = norm_ref.mixing_ratio(pieces[st])
            err = np.abs(pieces[st].sum(1) + bias[st] - actual[st]).max()
            worst_identity = max(worst_identity, err / np.abs(actual[st]).max())
    q = query(cfg).numpy()
    tokens = OrderedDict()
    for si, st in enumerate(norm_ref.STAGES):
        C = np.eye(n)
        for b in range(L):
            Nh = maps[b, si] / maps[b, si].sum(1, keepdims=True)
            if st == "atb":
                Nh = 0.5 * Nh + 0.5 * np.eye(n)
            C = Nh @ C
        tokens[st] = (q @ C)[cfg.prefix:].reshape(cfg.grid_h, cfg.grid_w)
    return dict(maps=maps, mixing=mixing, tokens=tokens, worst_identity=float(worst_identity),
                worst_trace=float(worst_trace))


# ---------------------------------------------------------------------------------------------
# One image, one target, every class-specific method
# ---------------------------------------------------------------------------------------------

class Explainer:
    def __init__(self, params, cfg, image, target=None, dtype=torch.float64):
        self.cfg, self.params, self.image = cfg, params, image
        self.w = Weights(params, cfg, dtype)
        self.tr, self.target, self.grad_input, self.grad_attn = logits_and_grads(self.w, cfg, image, target)
        self._passes = {}

    def lrp_pass(self, name, linear_rule="shared", add_rule="normalised"):
        """Chefer's pass with its linear and add rule variants (the methods' options), or AttnLRP's."""
        key = (name, linear_rule, add_rule)
        if key not in self._passes:
            rules = M.chefer_rules(linear_rule, add_rule) if name == "chefer" else M.ATTNLRP
            self._passes[key] = relevance_pass(self.w, self.cfg, self.tr, self.target, rules, to_pixels=True)
        return self._passes[key]

    def run(self, method, **opt):
        cfg, tr, G = self.cfg, self.tr, self.grad_attn
        rules = {k: opt.pop(k) for k in ("linear_rule", "add_rule") if k in opt}
        if method == "raw-attention":
            m = raw_attention(tr, cfg)
        elif method == "rollout":
            m = rollout(tr, cfg, **opt)
        elif method == "attn-gradcam":
            m = attn_gradcam(tr, cfg, G)
        elif method == "grad-rollout":
            m = grad_rollout(tr, cfg, G)
        elif method == "transformer-attribution":
            attn = [bt["attn"].detach() for bt in tr["blocks"]]
            m = transformer_attribution(cfg, G, self.lrp_pass("chefer", **rules)["R_A"], attn=attn, **opt)
        elif method == "partial-lrp":
            m = partial_lrp(cfg, self.lrp_pass("chefer", **rules)["R_A"])
        elif method == "lrp":
            m = self.lrp_pass("chefer", **rules)["R_image"].sum(dim=0)
        elif method == "attnlrp":
            m = self.lrp_pass("attnlrp")["R_image"].sum(dim=0)
        elif method == "attnlrp-tokens":
            m = attnlrp_tokens(cfg, self.lrp_pass("attnlrp")["R_tokens"])
        else:
            raise ValueError(method)
        return m.detach().cpu().numpy()

    def conservation(self, method):
        p = self.lrp_pass("attnlrp" if method == "attnlrp" else "chefer")
        rows = p["log"]
        if method in ("transformer-attribution", "partial-lrp"):
            rows = [r for r in rows if r["layer"] not in ("prefix_without_pos", "pos_embed.add",
                                                          "drop_prefix", "patch_embed")]
        out = OrderedDict([("method", method), ("target", self.target),
                           ("seed", "target logit value" if method == "attnlrp" else "one-hot (1.0)"),
                           ("seed_sum", p["seed_sum"]), ("block_input_sums", p["block_input_sums"]),
                           ("tokens_sum", M.total(p["R_tokens"])), ("layers", rows)])
        if method in ("lrp", "attnlrp"):
            out["image_sum"] = M.total(p["R_image"])
        return out
