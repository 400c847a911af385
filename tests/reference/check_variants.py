"""check_variants.py — self-checks of the variants reference (variants_ref.py) and of the fixtures
make_variant_fixtures.py writes (not of the engine).

  1. forward: for every case, the logits recomputed by a second, independent implementation that
     reads model.safetensors and config.json back from disk under the family's own names (timm,
     HF DeiT, HF Dinov2 / Dinov2-with-registers, HF CLIP) and follows that library's module
     structure with torch.nn building blocks (conv2d, MultiheadAttention, layer_norm, gelu);
  2. gradients: ∂y_t/∂input and ∂y_t/∂A_b (the stored grad_attn) by central differences;
  3. conservation: Chefer's α1β0 rules with the one-hot seed, per layer, down to E0 and the image;
  4. resampling: an explicit bicubic (Keys, a = −0.75, half-pixel, clamped) against torch's
     interpolate, float32 and float64, and the antialias=True difference METHODS.md mentions;
  5. the plain model: variants_ref with the plain config against the existing method, norm,
     attattr and gradient fixtures;
  6. rules in explicit form: the mean rules, the distilled head as one linear layer, LayerScale
     with γ = 1 against no LayerScale, the FF closed form against a Riemann IG sum for the three
     activations;
  7. files: safetensors round trip and dtypes, no NaN anywhere, config keys.

Run:  /usr/bin/python3 tests/reference/check_variants.py       (after make_variant_fixtures.py)
"""

import glob
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_engine_fixtures  # noqa: E402
import make_variant_fixtures as MV  # noqa: E402
import methods_ref as M  # noqa: E402
import variants_ref as V  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
FIX = os.path.join(ROOT, "fixtures")
D = torch.float64
REPORT = {}


def ok(what, value, limit):
    assert value <= limit, "%s: %.3g > %.3g" % (what, value, limit)
    print("ok  %-58s %.2e  (≤ %.0e)" % (what, value, limit))
    REPORT[what] = value


# ---------------------------------------------------------------------------------------------
# 1. An independent forward from the named checkpoint
# ---------------------------------------------------------------------------------------------

def act_fn(name):
    return {"gelu": F.gelu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
            "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
            "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}[name]


def mha(x, wq, bq, wk, bk, wv, bv, wo, bo, heads):
    """torch.nn.MultiheadAttention with the given projections (zero biases where absent)."""
    d = x.shape[-1]
    m = torch.nn.MultiheadAttention(d, heads, bias=True, batch_first=True).to(D)
    z = torch.zeros(d, dtype=D)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([wq, wk, wv]))
        m.in_proj_bias.copy_(torch.cat([bq if bq is not None else z, bk if bk is not None else z,
                                        bv if bv is not None else z]))
        m.out_proj.weight.copy_(wo)
        m.out_proj.bias.copy_(bo)
        return m(x[None], x[None], x[None], need_weights=False)[0][0]


def resample(patch_rows, old, new):
    """(gh·gw, d) → (new_h·new_w, d), the HF / METHODS.md way (bicubic, no antialias), computed in
    float64 from the float32 values and rounded once to float32 (the model's precision)."""
    d = patch_rows.shape[-1]
    g = patch_rows.to(torch.float32).to(torch.float64).reshape(1, old[0], old[1], d).permute(0, 3, 1, 2)
    g = F.interpolate(g, size=new, mode="bicubic", align_corners=False).to(torch.float32)
    return g.permute(0, 2, 3, 1).reshape(-1, d).to(D)


def independent_logits(case_dir):
    cfgj = json.load(open(os.path.join(case_dir, "config.json")))
    meta = json.load(open(os.path.join(case_dir, "meta.json")))
    sd = {k: torch.as_tensor(v[0]).to(D) for k, v in MV.read_safetensors(os.path.join(case_dir, "model.safetensors")).items()}
    img = torch.as_tensor(np.load(os.path.join(case_dir, "input.npy"))).to(D)[None]
    naming = meta["naming"]
    vc = cfgj.get("vision_config", cfgj)
    p, eps, heads, act = vc["patch_size"], vc["layer_norm_eps"], vc["num_attention_heads"], act_fn(vc["hidden_act"])
    size = vc["image_size"]
    ck = (size, size) if isinstance(size, int) else tuple(size)
    old = (ck[0] // p, ck[1] // p)
    new = (img.shape[2] // p, img.shape[3] // p)
    ln = lambda x, pre: F.layer_norm(x, x.shape[-1:], sd[pre + ".weight"], sd[pre + ".bias"], eps)
    lin = lambda x, pre: F.linear(x, sd[pre + ".weight"], sd.get(pre + ".bias"))
    get = sd.get

    def patches(wname, bname):
        return F.conv2d(img, sd[wname], get(bname), stride=p).flatten(2).transpose(1, 2)[0]   # (P, d)

    if naming == "timm":
        x = patches("patch_embed.proj.weight", "patch_embed.proj.bias")
        lead = [sd[k].reshape(1, -1) for k in ("cls_token", "dist_token") if k in sd]
        regs = [sd["reg_token"][0]] if "reg_token" in sd else []
        pos = sd["pos_embed"][0]
        npre = pos.shape[0] - old[0] * old[1]
        if old != new:
            pos = torch.cat([pos[:npre], resample(pos[npre:], old, new)])
        if cfgj["no_embed_class"]:
            x = torch.cat(lead + regs + [x + pos])
        else:
            assert not regs
            x = torch.cat(lead + [x]) + pos
        if "norm_pre.weight" in sd:
            x = ln(x, "norm_pre")
        for b in range(vc["num_hidden_layers"]):
            pre = "blocks.%d." % b
            d = x.shape[-1]
            W, B = sd[pre + "attn.qkv.weight"], get(pre + "attn.qkv.bias")
            Bs = [None] * 3 if B is None else [B[:d], B[d:2 * d], B[2 * d:]]
            o = mha(ln(x, pre + "norm1"), W[:d], Bs[0], W[d:2 * d], Bs[1], W[2 * d:], Bs[2],
                    sd[pre + "attn.proj.weight"], sd[pre + "attn.proj.bias"], heads)
            x = x + (o * sd[pre + "ls1.gamma"] if pre + "ls1.gamma" in sd else o)
            f = lin(act(lin(ln(x, pre + "norm2"), pre + "mlp.fc1")), pre + "mlp.fc2")
            x = x + (f * sd[pre + "ls2.gamma"] if pre + "ls2.gamma" in sd else f)
        if "norm.weight" in sd:
            x = ln(x, "norm")
        if "dist_token" in sd:
            return ((lin(x[0], "head") + lin(x[1], "head_dist")) / 2).numpy()
        npfx = len(lead) + (sd["reg_token"].shape[1] if regs else 0)
        pooled = x[0] if cfgj["global_pool"] == "token" else x[npfx:].mean(0)
        if "fc_norm.weight" in sd:
            pooled = ln(pooled, "fc_norm")
        return lin(pooled, "head").numpy()

    def hf_layers(x, fmt, names, ls=None):
        for b in range(vc["num_hidden_layers"]):
            pre = fmt % b
            q, k, v, o_, n1, n2, f1, f2 = [pre + names[s] for s in ("q", "k", "v", "o", "n1", "n2", "f1", "f2")]
            o = mha(ln(x, n1), sd[q + ".weight"], get(q + ".bias"), sd[k + ".weight"], get(k + ".bias"),
                    sd[v + ".weight"], get(v + ".bias"), sd[o_ + ".weight"], sd[o_ + ".bias"], heads)
            x = x + (o * sd[pre + ls[0]] if ls else o)
            f = lin(act(lin(ln(x, n2), f1)), f2)
            x = x + (f * sd[pre + ls[1]] if ls else f)
        return x

    vit_names = {"q": "attention.attention.query", "k": "attention.attention.key",
                 "v": "attention.attention.value", "o": "attention.output.dense",
                 "n1": "layernorm_before", "n2": "layernorm_after", "f1": "intermediate.dense",
                 "f2": "output.dense"}
    if naming == "hf_deit":
        e = "deit.embeddings."
        x = patches(e + "patch_embeddings.projection.weight", e + "patch_embeddings.projection.bias")
        x = torch.cat([sd[e + "cls_token"][0], sd[e + "distillation_token"][0], x]) + sd[e + "position_embeddings"][0]
        x = ln(hf_layers(x, "deit.encoder.layer.%d.", vit_names), "deit.layernorm")
        return ((lin(x[0], "cls_classifier") + lin(x[1], "distillation_classifier")) / 2).numpy()
    if naming in ("hf_dinov2", "hf_dinov2_reg"):
        P = "dinov2." if naming == "hf_dinov2" else "dinov2_with_registers."
        e = P + "embeddings."
        x = patches(e + "patch_embeddings.projection.weight", e + "patch_embeddings.projection.bias")
        x = torch.cat([sd[e + "cls_token"][0], x]) + sd[e + "position_embeddings"][0]
        r = cfgj.get("num_register_tokens", 0)
        if r:
            x = torch.cat([x[:1], sd[e + "register_tokens"][0], x[1:]])
        names = {"q": "attention.attention.query", "k": "attention.attention.key",
                 "v": "attention.attention.value", "o": "attention.output.dense",
                 "n1": "norm1", "n2": "norm2", "f1": "mlp.fc1", "f2": "mlp.fc2"}
        x = hf_layers(x, P + "encoder.layer.%d.", names, ("layer_scale1.lambda1", "layer_scale2.lambda1"))
        x = ln(x, P + "layernorm")
        return lin(torch.cat([x[0], x[1 + r:].mean(0)]), "classifier").numpy()
    if naming == "hf_clip":
        e = "vision_model.embeddings."
        x = patches(e + "patch_embedding.weight", None)
        x = torch.cat([sd[e + "class_embedding"][None], x]) + sd[e + "position_embedding.weight"]
        x = ln(x, "vision_model.pre_layrnorm")
        names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
                 "o": "self_attn.out_proj", "n1": "layer_norm1", "n2": "layer_norm2",
                 "f1": "mlp.fc1", "f2": "mlp.fc2"}
        x = hf_layers(x, "vision_model.encoder.layers.%d.", names)
        return lin(x[1:].mean(0), "classifier").numpy()
    raise ValueError(naming)


# ---------------------------------------------------------------------------------------------
# helpers: the reference model of a case, from the generator's definitions
# ---------------------------------------------------------------------------------------------

def case_model(c):
    params = V.round_params(V.random_params(c["cfg"], c["seed"], c["extras"]), c["storage"])
    image = V.random_image(c["cfg"], c["seed"] + MV.INPUT_SEED_OFFSET)
    return params, image


def check_forward_and_files():
    worst_logits = worst_roundtrip = 0.0
    for c in MV.CASES:
        d = os.path.join(FIX, "variants", c["name"])
        params, image = case_model(c)
        assert np.array_equal(np.load(os.path.join(d, "input.npy")), image)
        ref = np.load(os.path.join(d, "logits.npy"))
        err = float(np.abs(independent_logits(d) - ref).max() / np.abs(ref).max())
        print("    %-15s independent forward vs logits.npy: rel %.1e" % (c["name"], err))
        worst_logits = max(worst_logits, err)
        back = MV.read_safetensors(os.path.join(d, "model.safetensors"))
        ck = MV.to_checkpoint(params, c["cfg"], c["naming"])
        assert set(back) == set(ck), c["name"]
        for k, (a, dt) in back.items():
            assert dt == c["storage"]
            worst_roundtrip = max(worst_roundtrip, float(np.abs(a - ck[k]).max()))
        for f in glob.glob(os.path.join(d, "*.npy")):
            assert np.all(np.isfinite(np.load(f))), f
        cj = json.load(open(os.path.join(d, "config.json")))
        vc = cj.get("vision_config", cj)
        for key in ("image_size", "patch_size", "num_channels", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "layer_norm_eps", "hidden_act"):
            assert key in vc, (c["name"], key)
        for key in ("id2label", "image_mean", "image_std"):
            assert key in cj, (c["name"], key)
        if c["naming"] == "timm":
            for key in ("global_pool", "class_token", "no_embed_class", "reg_tokens", "fc_norm", "pre_norm",
                        "qkv_bias", "intermediate_size"):
                assert key in cj, (c["name"], key)
    ok("1. independent forward (named files) vs logits, max rel", worst_logits, 1e-12)
    ok("7. safetensors round trip (F32/F16/BF16), max abs", worst_roundtrip, 0.0)


# ---------------------------------------------------------------------------------------------
# 2. central differences
# ---------------------------------------------------------------------------------------------

def check_gradients():
    rng = np.random.default_rng(0)
    h = 1e-6
    worst_in = worst_attn = worst_rerun = 0.0
    for c in MV.CASES:
        cfg = c["cfg"]
        d = os.path.join(FIX, "variants", c["name"])
        params, image = case_model(c)
        w = V.Weights(params, cfg)
        tr, t, g_in, g_attn = V.logits_and_grads(w, cfg, image)
        stored = np.load(os.path.join(d, "grad_attn_t%d.npy" % t))
        # The files were written on another machine: float64 sums round differently with the
        # BLAS build and its threads, so "the same" is to float64 rounding, not bit for bit.
        again = np.stack([g.numpy() for g in g_attn])
        worst_rerun = max(worst_rerun, float(np.abs(stored - again).max() / np.abs(again).max()))
        img = image.astype(np.float64)
        for _ in range(8):
            idx = tuple(int(rng.integers(0, s)) for s in img.shape)
            vals = []
            for s in (h, -h):
                x = img.copy()
                x[idx] += s
                vals.append(V.logits_of(w, cfg, x)[t])
            fd = (vals[0] - vals[1]) / (2 * h)
            worst_in = max(worst_in, abs(fd - g_in[idx].item()) / max(1e-3, abs(fd)))
        with torch.no_grad():
            A = [bt["attn"].detach().clone() for bt in V.forward(w, cfg, image)["blocks"]]
        for b in range(cfg.depth):
            for _ in range(4):
                idx = (int(rng.integers(0, cfg.heads)), int(rng.integers(0, cfg.tokens)),
                       int(rng.integers(0, cfg.tokens)))
                vals = []
                for s in (h, -h):
                    Ab = A[b].clone()
                    Ab[idx] += s
                    with torch.no_grad():
                        vals.append(V.forward(w, cfg, image, attn_replace={b: Ab})["logits"][t].item())
                fd = (vals[0] - vals[1]) / (2 * h)
                worst_attn = max(worst_attn, abs(fd - stored[b][idx]) / max(1e-3, abs(fd)))
    ok("2. grad_attn files vs recomputed here, max rel", worst_rerun, 1e-12)
    ok("2. ∂y/∂input vs central differences, max rel (9 cases)", worst_in, 1e-6)
    ok("2. ∂y/∂A_b (grad_attn files) vs central differences, max rel", worst_attn, 1e-6)


# ---------------------------------------------------------------------------------------------
# 3. conservation of Chefer's rules
# ---------------------------------------------------------------------------------------------

def check_conservation():
    """Re-runs the Chefer pass with a linear rule that also records the relevance it drops where
    Z = x⁺W⁺ᵀ + x⁻W⁻ᵀ is exactly 0 (every input term of that unit has the other sign than its
    weight: α1β0 then passes nothing on, by definition); every layer must conserve up to that drop
    and the 1e-9 stabilisers. Also checks the stored conservation_lrp files are this pass's."""
    worst_layer = worst_rerun = 0.0
    summary = {}
    for c in MV.CASES:
        d = os.path.join(FIX, "variants", c["name"])
        params, image = case_model(c)
        cfg = c["cfg"]
        for f in sorted(glob.glob(os.path.join(d, "conservation_lrp_t*.json"))):
            stored = json.load(open(f))
            drops = []

            def linear(R, x, W, b):
                Z = x.clamp(min=0) @ W.clamp(min=0).T + x.clamp(max=0) @ W.clamp(max=0).T
                drops.append(float(R[Z == 0].sum()))
                return M.chefer_linear(R, x, W, b)

            rules = M.RuleSet("chefer", "one-hot", linear, M.chefer_add, M.chefer_product,
                              M.chefer_softmax, M.chefer_layernorm, M.identity_rule, M.chefer_patch_zb)
            ex = V.Explainer(params, cfg, image, stored["target"])
            p = V.relevance_pass(ex.w, cfg, ex.tr, ex.target, rules, to_pixels=True)
            assert [r["layer"] for r in p["log"]] == [r["layer"] for r in stored["layers"]]
            # To float64 rounding (the files were written with another BLAS build), not bit for bit.
            worst_rerun = max(worst_rerun, max(abs(a["relevance_in"] - b["relevance_in"])
                                               for a, b in zip(p["log"], stored["layers"])))
            lin = iter(drops)
            dropped = 0.0
            for row in p["log"]:
                if row["layer"] in ("prefix_without_pos", "drop_prefix", "patch_embed"):
                    continue
                drop = next(lin) if row["layer"].split(".")[-1] in ("head", "fc1", "fc2", "proj", "qkv") else 0.0
                dropped += drop
                worst_layer = max(worst_layer, abs(row["relevance_in"] - row["relevance_out"] + drop))
            summary["%s t%d" % (c["name"], stored["target"])] = (p["block_input_sums"], M.total(p["R_tokens"]),
                                                                  M.total(p["R_image"]), dropped)
    for k, (blocks, tok, img, dropped) in summary.items():
        print("    %-20s block inputs %s  E0 %.12f  image %+.4f  Z=0 drop %.2e"
              % (k, " ".join("%.12f" % s for s in blocks), tok, img, dropped))
    REPORT["conservation_summary"] = summary
    ok("3. conservation_lrp files vs this pass, max |Δ Σ R_in|", worst_rerun, 1e-12)
    ok("3. Chefer rules: max |Σ_in − Σ_out + Z=0 drop| per layer to E0", worst_layer, 1e-7)
    worst = max(abs(tok - 1.0 + dr) for _, tok, _, dr in summary.values())
    ok("3. Chefer rules: max |Σ_E0 − (1 − Z=0 drops)|", worst, 1e-7)


# ---------------------------------------------------------------------------------------------
# 4. resampling
# ---------------------------------------------------------------------------------------------

def check_resampling():
    rng = np.random.default_rng(1)
    worst32 = worst64 = 0.0
    for old, new in [((3, 4), (5, 3)), ((3, 3), (7, 5)), ((6, 5), (2, 3)), ((4, 4), (4, 4)), ((2, 7), (9, 4))]:
        src = rng.uniform(-1, 1, (6,) + old).astype(np.float32)
        ex = V.bicubic_explicit(src, *new)
        t64 = F.interpolate(torch.as_tensor(src, dtype=D)[None], size=new, mode="bicubic",
                            align_corners=False, antialias=False)[0].numpy()
        t32 = F.interpolate(torch.as_tensor(src)[None], size=new, mode="bicubic",
                            align_corners=False, antialias=False)[0].numpy()
        worst64 = max(worst64, float(np.abs(ex - t64).max()))
        worst32 = max(worst32, float(np.abs(ex - t32).max()))
    c = [c for c in MV.CASES if c["name"] == "resized"][0]
    params, _ = case_model(c)
    cfg = c["cfg"]
    pos = np.asarray(params["pos_embed"], np.float32).reshape(-1, cfg.dim)
    stored = np.load(os.path.join(FIX, "variants", "resized", "pos_embed_resampled.npy"))
    grid = pos[1:].reshape(3, 4, cfg.dim).transpose(2, 0, 1)
    ex = V.bicubic_explicit(grid, 5, 3).transpose(1, 2, 0).reshape(15, cfg.dim)
    assert np.array_equal(stored[0], pos[0])
    err_fix = float(np.abs(stored[1:] - ex).max())
    aa = F.interpolate(torch.as_tensor(grid)[None], size=(5, 3), mode="bicubic", align_corners=False,
                       antialias=True)[0].numpy().transpose(1, 2, 0).reshape(15, cfg.dim)
    REPORT["antialias_true_vs_false_max_abs"] = float(np.abs(aa - stored[1:]).max())
    ok("4. explicit bicubic vs torch interpolate float64, max abs", worst64, 1e-14)
    ok("4. explicit bicubic vs torch interpolate float32, max abs", worst32, 1e-6)
    ok("4. resized fixture pos_embed vs explicit bicubic, max abs", err_fix, 1e-6)
    print("    antialias=True would move the resized pos rows by up to %.3f (max |pos| %.3f)"
          % (REPORT["antialias_true_vs_false_max_abs"], float(np.abs(pos).max())))


# ---------------------------------------------------------------------------------------------
# 5. the plain model against the existing fixtures
# ---------------------------------------------------------------------------------------------

def check_plain():
    worst = {"methods": 0.0, "norm": 0.0, "attattr": 0.0, "gradient": 0.0, "conservation": 0.0}
    bitwise = True
    for name in ("nonsquare", "gray"):
        cfg0, seed, iseed, params, image = make_engine_fixtures.shape_model(name)
        cfg = V.from_plain(cfg0)
        md = os.path.join(FIX, "methods", name)
        exs = {}
        for e in json.load(open(os.path.join(md, "index.json"))):
            t = e["target"]
            if t not in exs:
                exs[t] = V.Explainer(params, cfg, image, t)
            m = exs[t].run(e["method"], **e["options"])
            ref = np.load(os.path.join(md, e["file"]))
            bitwise &= bool(np.array_equal(m, ref))
            worst["methods"] = max(worst["methods"], float(np.abs(m - ref).max() / np.abs(ref).max()))
        for t, ex in exs.items():
            for method in ("transformer-attribution", "lrp", "attnlrp"):
                ref = json.load(open(os.path.join(md, "conservation_%s_t%d.json" % (method, t))))
                got = ex.conservation(method)
                rows_ref = {r["layer"]: r for r in ref["layers"]}
                for r in got["layers"]:
                    key = "drop_cls" if r["layer"] == "drop_prefix" else r["layer"]
                    for f in ("relevance_in", "relevance_out"):
                        worst["conservation"] = max(worst["conservation"], abs(r[f] - rows_ref[key][f]))
        w = V.Weights(params, cfg)
        nd = os.path.join(FIX, "norm", name)
        nb = V.norm_based(w, cfg, image)
        worst["norm"] = max(worst["norm"], float(np.abs(nb["maps"] - np.load(os.path.join(nd, "maps.npy"))).max()),
                            float(np.abs(nb["mixing"] - np.load(os.path.join(nd, "mixing.npy"))).max()),
                            *[float(np.abs(nb["tokens"][st] - np.load(os.path.join(nd, "token_%s.npy" % st))).max())
                              for st in nb["tokens"]])
        ad = os.path.join(FIX, "attattr", name + "_softmax")
        am = json.load(open(os.path.join(ad, "meta.json")))
        attr = V.attattr(w, cfg, image, am["target"], 20)
        ref = np.load(os.path.join(ad, "attattr_m20.npy"))
        worst["attattr"] = max(worst["attattr"], float(np.abs(attr - ref).max() / np.abs(ref).max()),
                               float(np.abs(V.attattr_token_map(attr, cfg) - np.load(os.path.join(ad, "token_map.npy"))).max()))
        tree, _ = V.attattr_tree(attr, cfg, 0.4)
        tref = json.load(open(os.path.join(ad, "tree.json")))
        assert tree["root"] == tref["root"] and tree["nodes"] == tref["nodes"], name
        gd = os.path.join(FIX, "gradient", name)
        gm = json.load(open(os.path.join(gd, "meta.json")))
        t = gm["target"]
        for e in json.load(open(os.path.join(gd, "index.json"))):
            if e["method"] == "saliency":
                m = V.saliency(w, cfg, image, t)
            elif e["method"] == "grad-x-input":
                m = V.grad_x_input(w, cfg, image, t)
            elif e["method"] == "integrated-gradients" and e["options"]["baseline"] == "black":
                m, _ = V.integrated_gradients(w, cfg, image, t, V.black_baseline(cfg),
                                              e["options"]["quadrature"], e["options"]["steps"])
            elif e["variant"] == "smoothgrad-saliency":
                o = e["options"]
                m = V.smoothgrad_saliency(w, cfg, image, t, o["samples"], o["noise"], o["seed"])
            else:
                continue
            ref = np.load(os.path.join(gd, e["file"]))
            worst["gradient"] = max(worst["gradient"], float(np.abs(m - ref).max() / np.abs(ref).max()))
    REPORT["plain_methods_bitwise"] = bitwise
    print("    plain model, every method map bitwise equal to tests/fixtures/methods: %s" % bitwise)
    ok("5. plain model vs fixtures/methods maps, max rel", worst["methods"], 1e-12)
    ok("5. plain model vs fixtures/methods conservation sums, max abs", worst["conservation"], 1e-12)
    ok("5. plain model vs fixtures/norm (maps, mixing, tokens), max abs", worst["norm"], 1e-12)
    ok("5. plain model vs fixtures/attattr (m20, token map), max rel", worst["attattr"], 1e-12)
    ok("5. plain model vs fixtures/gradient (sal, gxi, IG, sg), max rel", worst["gradient"], 1e-12)


# ---------------------------------------------------------------------------------------------
# 6. rules in explicit form, and properties
# ---------------------------------------------------------------------------------------------

def check_rules():
    torch.manual_seed(0)
    X, R = torch.randn(6, 5, dtype=D), torch.randn(5, dtype=D)
    exp_c, exp_e = torch.zeros_like(X), torch.zeros_like(X)
    for j in range(5):
        z = sum(X[t, j] / 6 for t in range(6))
        for t in range(6):
            exp_c[t, j] = X[t, j] / 6 * R[j] / (z + 1e-9)
            exp_e[t, j] = X[t, j] / 6 * R[j] / (z + 1e-6 if z >= 0 else z - 1e-6)
    err = max(float((V.chefer_mean(R, X) - exp_c).abs().max() / exp_c.abs().max()),
              float((V.eps_mean(R, X) - exp_e).abs().max() / exp_e.abs().max()))
    ok("6. mean rules vs explicit loops, max rel", err, 1e-14)

    # the distilled head as one linear layer reproduces the averaged logits
    c = [c for c in MV.CASES if c["name"] == "distilled_timm"][0]
    params, image = case_model(c)
    w = V.Weights(params, c["cfg"])
    with torch.no_grad():
        tr = V.forward(w, c["cfg"], image)
    Wc = 0.5 * torch.cat([w.head_w, w.head_dist_w], dim=1)
    err = float((tr["head_in"] @ Wc.T + 0.5 * (w.head_b + w.head_dist_b) - tr["logits"]).abs().max())
    ok("6. distilled head as ½[W_head, W_dist] on concat, max abs", err, 1e-14)

    # LayerScale with γ = 1 must give the maps of the model without LayerScale
    c = [c for c in MV.CASES if c["name"] == "deit3"][0]
    params, image = case_model(c)
    cfg_ls = c["cfg"]
    ones = dict(params)
    for k in ones:
        if k.endswith(".gamma"):
            ones[k] = np.ones_like(ones[k])
    plain = {k: v for k, v in params.items() if not k.endswith(".gamma")}
    cfg_plain = V.VConfig(**{**cfg_ls.__dict__, "layer_scale": False})
    worst = 0.0
    a, b = V.Explainer(ones, cfg_ls, image), V.Explainer(plain, cfg_plain, image)
    for method in ("transformer-attribution", "lrp", "attnlrp", "attnlrp-tokens", "grad-rollout"):
        worst = max(worst, float(np.abs(a.run(method) - b.run(method)).max()))
    nb1, nb2 = V.norm_based(a.w, cfg_ls, image), V.norm_based(b.w, cfg_plain, image)
    worst = max(worst, float(np.abs(nb1["maps"] - nb2["maps"]).max()))
    ok("6. LayerScale γ = 1 vs no LayerScale (LRP, norm maps), max abs", worst, 0.0)

    # the FF closed form (act(h)/h) against a Riemann IG sum, every activation
    worst = 0.0
    for act in ("gelu", "gelu_pytorch_tanh", "quick_gelu"):
        h = torch.linspace(-4, 4, 41, dtype=D)
        pieces = torch.randn(3, 41, dtype=D)
        pieces = pieces / pieces.sum(0) * h          # Σ pieces = h
        x = torch.linspace(0, 1, 40001, dtype=D)[:, None] * h
        x.requires_grad_(True)
        V.activation(act)(x).sum().backward()
        g = x.grad
        avg = ((g[:-1] + g[1:]) / 2).mean(0)         # ∫₀¹ act′(αh) dα, trapezoid
        closed = pieces * torch.as_tensor(V.act_ratio(h.numpy(), act))
        worst = max(worst, float((pieces * avg - closed).abs().max()))
    ok("6. FF closed form act(h)/h vs Riemann IG (3 activations)", worst, 1e-8)

    worst = 0.0
    for c in MV.CASES:
        m = json.load(open(os.path.join(FIX, "variants", c["name"], "meta.json")))
        worst = max(worst, m["norm_check_identity_max_rel"], m["norm_check_forward_max_abs"])
    ok("6. norm decomposition identity and forward agreement (all cases)", worst, 1e-12)


def main():
    check_forward_and_files()
    check_gradients()
    check_conservation()
    check_resampling()
    check_plain()
    check_rules()
    print("all variant reference checks passed")


if __name__ == "__main__":
    main()
