"""vit_ref.py — an independent PyTorch reference of a timm/DeiT-layout Vision Transformer.

Written from the ViT / DeiT papers and the engine's specification (shared METHODS.md,
core/include/vitlens/model/model.h); it shares no code with the C++ engine. It provides
  * the configuration of a model (`Config`),
  * the deterministic counter-based weight generator of model.h (`random_params`,
    `random_input`), bit-exact with the engine's float32 values,
  * a forward pass that records everything the attribution methods need (`forward`),
    computed in float64 by default,
  * writers for safetensors (timm and Hugging Face names) and the HF-style config.json.

It is deliberately NOT a training or inference library: no batching, no dropout, no
pretrained-weight loading; one image at a time, (C, H, W), already normalised.
"""

import json
import math
import struct
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

MASK64 = (1 << 64) - 1
FNV_PRIME = 0x100000001B3       # seed multiplier of the generator (model.h)
INPUT_TENSOR_INDEX = 0xFFFF     # tensor index k used by random_input


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------

@dataclass
class Config:
    image_h: int = 224
    image_w: int = 224
    channels: int = 3
    patch: int = 16
    dim: int = 192
    depth: int = 12
    heads: int = 3
    mlp_dim: int = 768
    classes: int = 1000
    ln_eps: float = 1e-6
    mean: list = field(default_factory=list)   # (channels) used only by preprocessing
    std: list = field(default_factory=list)

    @property
    def grid_h(self):
        return self.image_h // self.patch

    @property
    def grid_w(self):
        return self.image_w // self.patch

    @property
    def num_patches(self):
        return self.grid_h * self.grid_w

    @property
    def tokens(self):
        return 1 + self.num_patches

    @property
    def head_dim(self):
        return self.dim // self.heads

    @property
    def patch_dim(self):
        return self.channels * self.patch * self.patch


def deit_tiny_config():
    return Config(224, 224, 3, 16, 192, 12, 3, 768, 1000, 1e-6)


# ---------------------------------------------------------------------------------------------
# The counter-based generator (model.h):
#   z = splitmix64(seed·0x100000001B3 + (k << 32) + i) mod 2^64,  u = (z >> 40)·2^-24,
#   value = a·(2u − 1) (+1 for LayerNorm weights), computed in float64, stored as float32.
# splitmix64 is Vigna's: the state is advanced by the golden-ratio increment, then mixed.
# ---------------------------------------------------------------------------------------------

def splitmix64(x):
    """Scalar splitmix64 on Python ints (exact uint64 wraparound)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64_np(x):
    """Vectorised splitmix64 on a numpy uint64 array (numpy uint64 arrays wrap mod 2^64)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform01(seed, k, count):
    """u_i for i = 0…count−1 of tensor k, float64, exactly representable in float32."""
    base = (seed * FNV_PRIME + (k << 32)) & MASK64
    with np.errstate(over="ignore"):
        x = np.uint64(base) + np.arange(count, dtype=np.uint64)
    z = splitmix64_np(x)
    return (z >> np.uint64(40)).astype(np.float64) * (2.0 ** -24)


def param_specs(cfg):
    """[(timm key, timm shape, kind)] in file order; kind ∈ {weight, ln_w, bias, token}."""
    d, C, p, n, m = cfg.dim, cfg.channels, cfg.patch, cfg.tokens, cfg.mlp_dim
    specs = [("patch_embed.proj.weight", (d, C, p, p), "weight"),
             ("patch_embed.proj.bias", (d,), "bias"),
             ("cls_token", (1, 1, d), "token"),
             ("pos_embed", (1, n, d), "token")]
    for b in range(cfg.depth):
        pre = "blocks.%d." % b
        specs += [(pre + "norm1.weight", (d,), "ln_w"),
                  (pre + "norm1.bias", (d,), "bias"),
                  (pre + "attn.qkv.weight", (3 * d, d), "weight"),
                  (pre + "attn.qkv.bias", (3 * d,), "bias"),
                  (pre + "attn.proj.weight", (d, d), "weight"),
                  (pre + "attn.proj.bias", (d,), "bias"),
                  (pre + "norm2.weight", (d,), "ln_w"),
                  (pre + "norm2.bias", (d,), "bias"),
                  (pre + "mlp.fc1.weight", (m, d), "weight"),
                  (pre + "mlp.fc1.bias", (m,), "bias"),
                  (pre + "mlp.fc2.weight", (d, m), "weight"),
                  (pre + "mlp.fc2.bias", (d,), "bias")]
    specs += [("norm.weight", (d,), "ln_w"),
              ("norm.bias", (d,), "bias"),
              ("head.weight", (cfg.classes, d), "weight"),
              ("head.bias", (cfg.classes,), "bias")]
    return specs


def random_params(cfg, seed):
    """OrderedDict timm key → float32 array in the timm shape (bit-exact with the engine)."""
    out = OrderedDict()
    for k, (name, shape, kind) in enumerate(param_specs(cfg)):
        count = int(np.prod(shape))
        s = 2.0 * uniform01(seed, k, count) - 1.0          # exact in float64
        if kind == "weight":
            fan_in = int(np.prod(shape[1:]))
            v = math.sqrt(3.0 / fan_in) * s
        elif kind == "ln_w":
            v = 0.2 * s + 1.0
        elif kind == "bias":
            v = 0.1 * s
        else:
            v = 0.5 * s
        out[name] = v.astype(np.float32).reshape(shape)
    return out


def random_input(cfg, seed):
    """A normalised (C, H, W) float32 input: tensor index 0xFFFF, a = 1."""
    count = cfg.channels * cfg.image_h * cfg.image_w
    v = 2.0 * uniform01(seed, INPUT_TENSOR_INDEX, count) - 1.0
    return v.astype(np.float32).reshape(cfg.channels, cfg.image_h, cfg.image_w)


# ---------------------------------------------------------------------------------------------
# Forward pass
# ---------------------------------------------------------------------------------------------

class Weights:
    """The parameters as torch tensors of one dtype, in the engine's working shapes."""

    def __init__(self, params, cfg, dtype=torch.float64):
        t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32)).to(dtype)
        d = cfg.dim
        self.patch_w = t(params["patch_embed.proj.weight"]).reshape(d, cfg.patch_dim)  # (d, C·p·p)
        self.patch_b = t(params["patch_embed.proj.bias"])                               # (d)
        self.cls = t(params["cls_token"]).reshape(d)                                    # (d)
        self.pos = t(params["pos_embed"]).reshape(cfg.tokens, d)                        # (n, d)
        self.blocks = []
        for b in range(cfg.depth):
            g = lambda s: t(params["blocks.%d.%s" % (b, s)])
            self.blocks.append(dict(
                norm1_w=g("norm1.weight"), norm1_b=g("norm1.bias"),
                qkv_w=g("attn.qkv.weight"), qkv_b=g("attn.qkv.bias"),      # (3d, d), (3d)
                proj_w=g("attn.proj.weight"), proj_b=g("attn.proj.bias"),  # (d, d), (d)
                norm2_w=g("norm2.weight"), norm2_b=g("norm2.bias"),
                fc1_w=g("mlp.fc1.weight"), fc1_b=g("mlp.fc1.bias"),        # (mlp, d), (mlp)
                fc2_w=g("mlp.fc2.weight"), fc2_b=g("mlp.fc2.bias")))       # (d, mlp), (d)
        self.norm_w = t(params["norm.weight"])
        self.norm_b = t(params["norm.bias"])
        self.head_w = t(params["head.weight"])   # (classes, d)
        self.head_b = t(params["head.bias"])     # (classes)
        self.dtype = dtype


def im2col(x, p):
    """(C, H, W) → (P, C·p·p): patches row-major over the grid, each flattened (C, p, p)."""
    C, H, W = x.shape
    gh, gw = H // p, W // p
    return x.reshape(C, gh, p, gw, p).permute(1, 3, 0, 2, 4).reshape(gh * gw, C * p * p)


def col2im(patches, C, H, W, p):
    """The adjoint (and inverse) of im2col."""
    gh, gw = H // p, W // p
    return patches.reshape(gh, gw, C, p, p).permute(2, 0, 3, 1, 4).reshape(C, H, W)


def layernorm(x, w, b, eps):
    """Per row: (x − μ)/√(var + eps) ⊙ γ + β, biased variance. Returns (y, μ, rstd)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(var + eps)
    return (x - mu) * rstd * w + b, mu, rstd


def gelu(x):
    """Exact GELU x·Φ(x)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def linear(x, W, b):
    return x @ W.T + b


def forward(w, cfg, image, attn_grad=False, input_grad=False, head_mask=None):
    """One image (C, H, W) → trace dict. Tensors keep their autograd graph.

    trace["blocks"][b] holds x, ln1, qkv, q, k, v (H, n, d_h), scores (H, n, n, pre-softmax,
    already divided by √d_h), attn (H, n, n), ctx, attn_out, x_mid, ln2, fc1, act, mlp_out.
    With attn_grad, each attn tensor retains its gradient after a backward pass.
    head_mask: None, or (depth, heads) values 0 / 1: a head at 0 is switched off, its attention
    multiplied by 0 after the softmax (the projection bias stays); attn is then the masked A, and
    its gradient the gradient at that A (the engine's ForwardOptions::head_mask).
    """
    d, H, dh, n = cfg.dim, cfg.heads, cfg.head_dim, cfg.tokens
    x_img = torch.as_tensor(np.asarray(image)).to(w.dtype)
    if input_grad:
        x_img = x_img.clone().requires_grad_(True)
    tr = {"input": x_img}
    patches = im2col(x_img, cfg.patch)                       # (P, C·p·p)
    embed = linear(patches, w.patch_w, w.patch_b)            # (P, d)
    tok0 = torch.cat([w.cls.reshape(1, d), embed], dim=0)    # (n, d)
    tokens = tok0 + w.pos                                    # (n, d)
    tr.update(patches=patches, embed=embed, tokens_nopos=tok0, tokens=tokens, blocks=[])
    x = tokens
    mask = None if head_mask is None else torch.as_tensor(np.asarray(head_mask, dtype=np.float64)).to(w.dtype)
    for b, bp in enumerate(w.blocks):
        bt = {"x": x}
        u, _, _ = layernorm(x, bp["norm1_w"], bp["norm1_b"], cfg.ln_eps)
        qkv = linear(u, bp["qkv_w"], bp["qkv_b"])                              # (n, 3d)
        q = qkv[:, 0:d].reshape(n, H, dh).permute(1, 0, 2)                     # (H, n, d_h)
        k = qkv[:, d:2 * d].reshape(n, H, dh).permute(1, 0, 2)
        v = qkv[:, 2 * d:3 * d].reshape(n, H, dh).permute(1, 0, 2)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(dh)                       # (H, n, n)
        attn = torch.softmax(scores, dim=-1)                                   # (H, n, n)
        if mask is not None:
            attn = attn * mask.reshape(-1, H)[b].reshape(H, 1, 1)              # heads off: A × 0
        if attn_grad:
            attn.retain_grad()
        ctx_h = attn @ v                                                       # (H, n, d_h)
        ctx = ctx_h.permute(1, 0, 2).reshape(n, d)                             # (n, d)
        attn_out = linear(ctx, bp["proj_w"], bp["proj_b"])                     # (n, d)
        x_mid = x + attn_out
        ln2, _, _ = layernorm(x_mid, bp["norm2_w"], bp["norm2_b"], cfg.ln_eps)
        fc1 = linear(ln2, bp["fc1_w"], bp["fc1_b"])                            # (n, mlp)
        act = gelu(fc1)
        mlp_out = linear(act, bp["fc2_w"], bp["fc2_b"])                        # (n, d)
        x = x_mid + mlp_out
        bt.update(ln1=u, qkv=qkv, q=q, k=k, v=v, scores=scores, attn=attn, ctx_h=ctx_h,
                  ctx=ctx, attn_out=attn_out, x_mid=x_mid, ln2=ln2, fc1=fc1, act=act,
                  mlp_out=mlp_out)
        tr["blocks"].append(bt)
    tr["x_final"] = x
    ln_f, _, _ = layernorm(x, w.norm_w, w.norm_b, cfg.ln_eps)
    tr["ln_f"] = ln_f
    tr["pooled"] = ln_f[0]
    tr["logits"] = linear(ln_f[0], w.head_w, w.head_b)                         # (classes)
    return tr


def logits_and_grads(w, cfg, image, target=None, head_mask=None):
    """Forward + backward of the target logit. Returns (trace, target, grad_input, [∇A_b])."""
    tr = forward(w, cfg, image, attn_grad=True, input_grad=True, head_mask=head_mask)
    logits = tr["logits"]
    if target is None:
        target = int(torch.argmax(logits).item())
    logits[target].backward()
    grad_attn = [bt["attn"].grad.detach().clone() for bt in tr["blocks"]]
    return tr, target, tr["input"].grad.detach().clone(), grad_attn


# ---------------------------------------------------------------------------------------------
# Files: safetensors, Hugging Face names, config.json
# ---------------------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    """tensors: OrderedDict name → float32 array. 8-byte LE header length, JSON, data."""
    header = OrderedDict()
    blobs = []
    offset = 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        nbytes = a.nbytes
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + nbytes]}
        blobs.append(a.tobytes())
        offset += nbytes
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """The inverse of write_safetensors (F32 only); used to check the files written."""
    with open(path, "rb") as f:
        raw = f.read()
    hlen = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    data = raw[8 + hlen:]
    out = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
    return out


def to_hf(params, cfg):
    """timm keys → Hugging Face ViTForImageClassification keys (qkv split into q, k, v)."""
    d = cfg.dim
    hf = OrderedDict()
    hf["vit.embeddings.cls_token"] = params["cls_token"]
    hf["vit.embeddings.position_embeddings"] = params["pos_embed"]
    hf["vit.embeddings.patch_embeddings.projection.weight"] = params["patch_embed.proj.weight"]
    hf["vit.embeddings.patch_embeddings.projection.bias"] = params["patch_embed.proj.bias"]
    for b in range(cfg.depth):
        t = "blocks.%d." % b
        h = "vit.encoder.layer.%d." % b
        hf[h + "layernorm_before.weight"] = params[t + "norm1.weight"]
        hf[h + "layernorm_before.bias"] = params[t + "norm1.bias"]
        for j, part in enumerate(("query", "key", "value")):
            hf[h + "attention.attention.%s.weight" % part] = \
                params[t + "attn.qkv.weight"][j * d:(j + 1) * d]
            hf[h + "attention.attention.%s.bias" % part] = \
                params[t + "attn.qkv.bias"][j * d:(j + 1) * d]
        hf[h + "attention.output.dense.weight"] = params[t + "attn.proj.weight"]
        hf[h + "attention.output.dense.bias"] = params[t + "attn.proj.bias"]
        hf[h + "layernorm_after.weight"] = params[t + "norm2.weight"]
        hf[h + "layernorm_after.bias"] = params[t + "norm2.bias"]
        hf[h + "intermediate.dense.weight"] = params[t + "mlp.fc1.weight"]
        hf[h + "intermediate.dense.bias"] = params[t + "mlp.fc1.bias"]
        hf[h + "output.dense.weight"] = params[t + "mlp.fc2.weight"]
        hf[h + "output.dense.bias"] = params[t + "mlp.fc2.bias"]
    hf["vit.layernorm.weight"] = params["norm.weight"]
    hf["vit.layernorm.bias"] = params["norm.bias"]
    hf["classifier.weight"] = params["head.weight"]
    hf["classifier.bias"] = params["head.bias"]
    return hf


def hf_config(cfg):
    """An HF-style config.json dict (image_size is [H, W] when non-square)."""
    size = cfg.image_h if cfg.image_h == cfg.image_w else [cfg.image_h, cfg.image_w]
    return OrderedDict([
        ("architectures", ["ViTForImageClassification"]),
        ("model_type", "vit"),
        ("image_size", size),
        ("patch_size", cfg.patch),
        ("num_channels", cfg.channels),
        ("hidden_size", cfg.dim),
        ("num_hidden_layers", cfg.depth),
        ("num_attention_heads", cfg.heads),
        ("intermediate_size", cfg.mlp_dim),
        ("layer_norm_eps", cfg.ln_eps),
        ("hidden_act", "gelu"),
        ("qkv_bias", True),
        ("hidden_dropout_prob", 0.0),
        ("attention_probs_dropout_prob", 0.0),
        ("id2label", OrderedDict((str(i), "name%d" % i) for i in range(cfg.classes))),
        ("label2id", OrderedDict(("name%d" % i, i) for i in range(cfg.classes))),
        ("image_mean", list(cfg.mean)),
        ("image_std", list(cfg.std)),
    ])
