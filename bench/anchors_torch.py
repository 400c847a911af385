"""anchors_torch.py — the PyTorch side of bench/anchors.mjs (Debian's torch 1.13, /usr/bin/python3).

It provides the anchors vitlens is measured against, on the DeiT-tiny shape with the random weights
of `vitlens bench deit-tiny` (seed 7: tests/reference/vit_ref.py's generator is bit-exact with the
engine's):
  * `prepare DIR` writes DIR/input.npy (a normalised input) and DIR/model.onnx (the same model,
    exported with torch.onnx.export and checked with onnx.checker);
  * `serve DIR` answers JSON requests on stdin, one per line, so that the node driver can alternate
    PyTorch with the other contestants without restarting Python:
        {"run": "forward" | "ta-faithful" | "ta-lean", "n": N}  → {"ms": [N timings]}
        {"map": "ta-faithful" | "ta-lean" | "ta-faithful-f64" | "ta-f64"}
                                                         → {"map": [196 values], "target": t}
    Every workload runs on one thread (torch.set_num_threads(1)).

The workloads:
  * forward: a float32 timm-layout ViT (nn.Module, the one exported to ONNX) under no_grad.
  * ta-faithful: transformer-attribution (Chefer, Gur & Wolf, CVPR 2021) executed step by step as
    the original code (github hila-chefer/Transformer-Explainability, baselines/ViT/ViT_LRP.py,
    modules/layers_ours.py, ViT_explanation_generator.py) executes it, in float32: a forward pass
    whose layers keep a detached copy of their input that requires grad (the original's forward
    hooks), hooks saving A and ∇A, the one-hot backward through the model's parameters, then
    relprop through every layer, where each rule recomputes its forward and takes its quotient's
    gradient with torch.autograd.grad, and the linear rule with alpha = 1, beta = 0 still computes
    both its activator and its inhibitor terms; then the rollout of E_h[(∇A ⊙ R_A)⁺]. Written from
    reading that code for its steps, not copied. One deliberate difference: the final LayerNorm
    uses the model's eps (1e-6), not the original's 1e-5 (a known quirk, METHODS.md; no effect on
    the time).
  * ta-lean: the same rules with nothing the method does not need (no inhibitor terms, no autograd
    inside the rules): tests/reference/methods_ref.py's relevance pass run in float32.
It is deliberately NOT an explanation library: one image, one target, the timing and the map.
"""

import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import methods_ref  # noqa: E402
import vit_ref  # noqa: E402

WEIGHT_SEED = 7      # `vitlens bench deit-tiny` = deit-tiny:7 (cli/common.cpp)
INPUT_SEED = 107


def model_params():
    cfg = vit_ref.deit_tiny_config()
    return cfg, vit_ref.random_params(cfg, WEIGHT_SEED)


# ---------------------------------------------------------------------------------------------
# The plain model: PyTorch's forward anchor and the graph exported to ONNX
# ---------------------------------------------------------------------------------------------

class PlainViT(torch.nn.Module):
    """timm VisionTransformer layout (pre-LN, CLS token, exact GELU), batch 1, float32."""

    def __init__(self, cfg, params):
        super().__init__()
        self.cfg = cfg
        for name, a in params.items():
            self.register_buffer(name.replace(".", "__"), torch.from_numpy(np.array(a)))

    def p(self, name):
        return getattr(self, name.replace(".", "__"))

    def forward(self, image):                                      # (1, C, H, W)
        cfg, d, H = self.cfg, self.cfg.dim, self.cfg.heads
        dh = d // H
        x = F.conv2d(image, self.p("patch_embed.proj.weight"), self.p("patch_embed.proj.bias"),
                     stride=cfg.patch)                             # (1, d, gh, gw)
        x = x.flatten(2).transpose(1, 2)                           # (1, P, d)
        x = torch.cat([self.p("cls_token"), x], dim=1) + self.p("pos_embed")   # (1, n, d)
        n = x.shape[1]
        for b in range(cfg.depth):
            g = lambda s: self.p("blocks.%d.%s" % (b, s))
            u = F.layer_norm(x, (d,), g("norm1.weight"), g("norm1.bias"), cfg.ln_eps)
            qkv = F.linear(u, g("attn.qkv.weight"), g("attn.qkv.bias"))         # (1, n, 3d)
            q, k, v = qkv.reshape(1, n, 3, H, dh).permute(2, 0, 3, 1, 4).unbind(0)   # (1, H, n, dh)
            a = torch.softmax((q @ k.transpose(-1, -2)) * (dh ** -0.5), dim=-1)
            o = (a @ v).transpose(1, 2).reshape(1, n, d)
            x = x + F.linear(o, g("attn.proj.weight"), g("attn.proj.bias"))
            w = F.layer_norm(x, (d,), g("norm2.weight"), g("norm2.bias"), cfg.ln_eps)
            f = F.gelu(F.linear(w, g("mlp.fc1.weight"), g("mlp.fc1.bias")))
            x = x + F.linear(f, g("mlp.fc2.weight"), g("mlp.fc2.bias"))
        x = F.layer_norm(x, (d,), self.p("norm.weight"), self.p("norm.bias"), cfg.ln_eps)
        return F.linear(x[:, 0], self.p("head.weight"), self.p("head.bias"))  # (1, classes)


def prepare(out_dir):
    import onnx
    cfg, params = model_params()
    x = vit_ref.random_input(cfg, INPUT_SEED)                        # (C, H, W) float32
    np.save(os.path.join(out_dir, "input.npy"), x)
    model = PlainViT(cfg, params).eval()
    image = torch.from_numpy(x)[None]
    path = os.path.join(out_dir, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (image,), path, input_names=["image"], output_names=["logits"],
                          opset_version=17, do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    print(json.dumps({"onnx": path, "opset": 17, "torch": torch.__version__,
                      "onnx_version": onnx.__version__}))


# ---------------------------------------------------------------------------------------------
# transformer-attribution as the original code executes it (float32)
# ---------------------------------------------------------------------------------------------

def safe_div(a, b):
    """The original's quotient, in its steps: its two clamps add up to b + 1e-9, nudged again
    where that is exactly 0; the result is 0 where b is exactly 0."""
    den = b.clamp(min=1e-9) + b.clamp(max=1e-9)
    den = den + den.eq(0).type(den.type()) * 1e-9
    return a / den * b.ne(0).type(b.type())


def hooked(t):
    """What the original's forward hook keeps of a layer's input: a detached copy requiring grad."""
    t = t.detach()
    t.requires_grad = True
    return t


class Layer:
    """One layer of the original's model: the input its forward hook saved (`X`), and relprop."""

    def __call__(self, *xs):
        self.X = [hooked(x) for x in xs] if len(xs) > 1 else hooked(xs[0])
        return self.forward(*xs)

    def relprop(self, R):            # GELU, Softmax, LayerNorm, Dropout: relevance passes unchanged
        return R


class LinearL(Layer):
    def __init__(self, W, b):
        self.W, self.b = W, b

    def forward(self, x):
        return F.linear(x, self.W, self.b)

    def relprop(self, R):
        # LRP-αβ with alpha = 1, beta = 0: both terms are computed, the inhibitor weighted by 0.
        alpha, beta = 1.0, 0.0
        Wp, Wn = self.W.clamp(min=0), self.W.clamp(max=0)
        xp, xn = self.X.clamp(min=0), self.X.clamp(max=0)

        def term(w1, w2):
            z1, z2 = F.linear(xp, w1), F.linear(xn, w2)
            s1, s2 = safe_div(R, z1 + z2), safe_div(R, z1 + z2)
            c1 = xp * torch.autograd.grad(z1, xp, s1)[0]
            c2 = xn * torch.autograd.grad(z2, xn, s2)[0]
            return c1 + c2

        return alpha * term(Wp, Wn) - beta * term(Wn, Wp)


class QuotientRule(Layer):
    """The original's generic rule: recompute Z from X, S = R/Z, C = ∂Z/∂X·S by autograd, X ⊙ C."""

    def relprop(self, R):
        xs = self.X if isinstance(self.X, list) else [self.X]
        Z = self.forward(*xs)
        S = safe_div(R, Z)
        C = torch.autograd.grad(Z, xs, S, retain_graph=True)
        out = [x * c for x, c in zip(xs, C)]
        return out if len(out) > 1 else out[0]


class EinsumL(QuotientRule):
    def __init__(self, equation):
        self.equation = equation

    def forward(self, a, b):
        return torch.einsum(self.equation, a, b)


class AddL(QuotientRule):
    def forward(self, a, b):
        return a + b

    def relprop(self, R):
        ra, rb = super().relprop(R)
        sa, sb = ra.sum(), rb.sum()
        fa = safe_div(sa.abs(), sa.abs() + sb.abs()) * R.sum()
        fb = safe_div(sb.abs(), sa.abs() + sb.abs()) * R.sum()
        return ra * safe_div(fa, ra.sum()), rb * safe_div(fb, rb.sum())


class CloneL(Layer):
    def forward(self, x):
        return x, x

    def relprop(self, Rs):
        S = [safe_div(r, self.X) for r in Rs]
        C = torch.autograd.grad([self.X, self.X], self.X, S, retain_graph=True)[0]
        return self.X * C


class SelectL(QuotientRule):
    def forward(self, x):
        return torch.index_select(x, 1, torch.tensor(0))


class PassL(Layer):
    def __init__(self, fn):
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class FaithfulTA:
    """The original's ViT_LRP model and LRP.generate_LRP(method="transformer_attribution")."""

    def __init__(self, cfg, params, dtype=torch.float32):
        self.cfg, self.dtype = cfg, dtype
        P = lambda a: torch.nn.Parameter(torch.from_numpy(np.array(a)).to(dtype))
        self.params = {k: P(v) for k, v in params.items()}
        p = lambda k: self.params[k]
        d = cfg.dim
        self.blocks = []
        for b in range(cfg.depth):
            g = lambda s: p("blocks.%d.%s" % (b, s))
            ln = lambda wk, bk: PassL(lambda x, w=g(wk), bb=g(bk): F.layer_norm(x, (d,), w, bb, cfg.ln_eps))
            self.blocks.append(dict(
                clone1=CloneL(), norm1=ln("norm1.weight", "norm1.bias"),
                qkv=LinearL(g("attn.qkv.weight"), g("attn.qkv.bias")),
                matmul1=EinsumL("bhid,bhjd->bhij"), softmax=PassL(lambda x: torch.softmax(x, -1)),
                attn_drop=PassL(lambda x: x), matmul2=EinsumL("bhij,bhjd->bhid"),
                proj=LinearL(g("attn.proj.weight"), g("attn.proj.bias")), proj_drop=PassL(lambda x: x),
                add1=AddL(), clone2=CloneL(), norm2=ln("norm2.weight", "norm2.bias"),
                fc1=LinearL(g("mlp.fc1.weight"), g("mlp.fc1.bias")), act=PassL(F.gelu),
                drop1=PassL(lambda x: x), fc2=LinearL(g("mlp.fc2.weight"), g("mlp.fc2.bias")),
                drop2=PassL(lambda x: x), add2=AddL()))
        self.patch = PassL(lambda x: F.conv2d(x, p("patch_embed.proj.weight"),
                                              p("patch_embed.proj.bias"), stride=cfg.patch))
        self.pos_add = AddL()
        self.norm = PassL(lambda x: F.layer_norm(x, (d,), p("norm.weight"), p("norm.bias"), cfg.ln_eps))
        self.pool = SelectL()
        self.head = LinearL(p("head.weight"), p("head.bias"))

    def forward(self, image):
        cfg, H = self.cfg, self.cfg.heads
        x = self.patch(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.params["cls_token"], x], dim=1)
        x = self.pos_add(x, self.params["pos_embed"])
        x.register_hook(lambda g: setattr(self, "inp_grad", g))
        for blk in self.blocks:
            x1, x2 = blk["clone1"](x)
            u = blk["norm1"](x2)
            qkv = blk["qkv"](u)
            n = qkv.shape[1]
            q, k, v = qkv.reshape(1, n, 3, H, -1).permute(2, 0, 3, 1, 4)   # 'b n (qkv h d) -> qkv b h n d'
            blk["v"] = v
            dots = blk["matmul1"](q, k) * (cfg.head_dim ** -0.5)
            attn = blk["attn_drop"](blk["softmax"](dots))
            blk["attn"] = attn
            attn.register_hook(lambda g, blk=blk: blk.__setitem__("attn_grad", g))
            o = blk["matmul2"](attn, v)
            o = blk["proj_drop"](blk["proj"](o.transpose(1, 2).reshape(1, n, -1)))
            x = blk["add1"](x1, o)
            x1, x2 = blk["clone2"](x)
            f = blk["drop2"](blk["fc2"](blk["drop1"](blk["act"](blk["fc1"](blk["norm2"](x2))))))
            x = blk["add2"](x1, f)
        x = self.norm(x)
        return self.head(self.pool(x).squeeze(1))

    def relprop_block(self, blk, R):
        H = self.cfg.heads
        r_res, r_mlp = blk["add2"].relprop(R)
        for name in ("drop2", "fc2", "act", "drop1", "fc1", "norm2"):
            r_mlp = blk[name].relprop(r_mlp)
        R = blk["clone2"].relprop((r_res, r_mlp))
        r_res, r_att = blk["add1"].relprop(R)
        r_att = blk["proj"].relprop(blk["proj_drop"].relprop(r_att))
        n = r_att.shape[1]
        r_att = r_att.reshape(1, n, H, -1).transpose(1, 2)                  # 'b n (h d) -> b h n d'
        r_a, r_v = blk["matmul2"].relprop(r_att)
        r_a /= 2
        r_v /= 2
        blk["attn_cam"] = r_a
        r_a = blk["softmax"].relprop(blk["attn_drop"].relprop(r_a))
        r_q, r_k = blk["matmul1"].relprop(r_a)
        r_q /= 2
        r_k /= 2
        r_qkv = torch.stack([r_q, r_k, r_v]).permute(1, 3, 0, 2, 4).reshape(1, n, -1)
        r_att = blk["norm1"].relprop(blk["qkv"].relprop(r_qkv))
        return blk["clone1"].relprop((r_res, r_att))

    def explain(self, image):
        out = self.forward(image)
        index = int(np.argmax(out.data.numpy(), axis=-1)[0])
        one_hot = np.zeros((1, out.shape[-1]), dtype=np.float32 if self.dtype == torch.float32 else np.float64)
        one_hot[0, index] = 1
        seed = torch.from_numpy(one_hot).requires_grad_(True)
        for prm in self.params.values():                                   # model.zero_grad()
            prm.grad = None
        torch.sum(seed * out).backward(retain_graph=True)
        R = self.head.relprop(torch.tensor(one_hot))
        R = self.norm.relprop(self.pool.relprop(R.unsqueeze(1)))
        for blk in reversed(self.blocks):
            R = self.relprop_block(blk, R)
        n = self.cfg.tokens
        cams = []
        for blk in self.blocks:
            c = blk["attn_grad"][0].reshape(-1, n, n) * blk["attn_cam"][0].reshape(-1, n, n)
            cams.append(c.clamp(min=0).mean(dim=0).unsqueeze(0))
        eye = torch.eye(n, dtype=self.dtype).expand(1, n, n)
        mats = [c + eye for c in cams]
        joint = mats[0]
        for m in mats[1:]:
            joint = m.bmm(joint)
        return joint[:, 0, 1:], index


# ---------------------------------------------------------------------------------------------
# The lean float32 version: the same rules, only what the method needs
# ---------------------------------------------------------------------------------------------

def lean_ta(w, cfg, x):
    tr, target, _, grads = vit_ref.logits_and_grads(w, cfg, x)
    rel = methods_ref.relevance_pass(w, cfg, tr, target, methods_ref.CHEFER, to_pixels=False)
    return methods_ref.transformer_attribution(cfg, grads, rel["R_A"]), target


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------

def serve(in_dir):
    torch.set_num_threads(1)
    cfg, params = model_params()
    x = np.load(os.path.join(in_dir, "input.npy"))
    image = torch.from_numpy(x)[None]
    plain = PlainViT(cfg, params).eval()
    faithful = FaithfulTA(cfg, params)
    w32 = vit_ref.Weights(params, cfg, torch.float32)

    def fwd():
        with torch.no_grad():
            return plain(image)

    # The maps, for the agreement check: the timed float32 versions, and in float64 the faithful
    # transcription (to check it) and methods_ref's rules (the reference).
    maps = {"ta-faithful": lambda: faithful.explain(image),
            "ta-lean": lambda: lean_ta(w32, cfg, x),
            "ta-faithful-f64": lambda: FaithfulTA(cfg, params, torch.float64).explain(image.double()),
            "ta-f64": lambda: lean_ta(vit_ref.Weights(params, cfg, torch.float64), cfg, x)}
    work = {"forward": fwd, "ta-faithful": maps["ta-faithful"], "ta-lean": maps["ta-lean"]}
    for fn in work.values():                  # warm up: allocator, OpenBLAS buffers
        for _ in range(2):
            fn()
    print(json.dumps({"ready": True, "threads": torch.get_num_threads(),
                      "logits": [float(v) for v in fwd()[0]]}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if "run" in req:
            fn, ms = work[req["run"]], []
            for _ in range(int(req.get("n", 1))):
                t0 = time.perf_counter()
                fn()
                ms.append((time.perf_counter() - t0) * 1e3)
            out = {"ms": ms}
        else:
            m, t = maps[req["map"]]()
            out = {"map": [float(v) for v in m.detach().reshape(-1)], "target": t}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "serve"):
        sys.exit("usage: anchors_torch.py prepare|serve DIR")
    (prepare if sys.argv[1] == "prepare" else serve)(sys.argv[2])
