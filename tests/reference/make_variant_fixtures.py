"""make_variant_fixtures.py — writes tests/fixtures/variants/<case>/ from the float64 reference
variants_ref.py: one small random model per ViT variant of METHODS.md ("Model variants"), as the
checkpoint people have (timm or Hugging Face names, F32 / F16 / BF16) with its config.json, a
random input, and every method's maps for the arg-max and the runner-up class.

Per case:
  model.safetensors            the checkpoint (names and dtype: see CASES and meta.json)
  config.json                  what the importer reads (HF keys; timm keys for timm-named cases)
  input.npy                    (C, H, W) float32, normalised (at the explained size)
  logits.npy                   (classes) float64
  attn.npy                     (L, H, n, n) float64, the post-softmax attention of every block
  grad_attn_t<c>.npy           (L, H, n, n) float64, ∂ logit_c / ∂ A_b, c = the arg-max class
  <method-variant>_t<c>.npy    the maps (see index.json: file, method, options, target, output,
                               shape, dtype; options as `vitlens explain` takes them)
  attattr_t<c>.npy, .json      (L, H, n, n) Attr (m = 20); the tree (τ 0.4) and the head scores
  norm_maps.npy, norm_mixing.npy, norm-based-<stage>.npy   (not class-specific)
  conservation_<method>_t<c>.json   the per-layer relevance sums (transformer-attribution, lrp, attnlrp)
  pos_embed_resampled.npy      (`resized` only) float32 (pos rows at the explained grid, d)
  meta.json                    config, variant flags, naming, dtype, seeds, targets, self-checks

Run:  /usr/bin/python3 tests/reference/make_variant_fixtures.py [case ...]
"""

import json
import os
import struct
import sys
import time
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import variants_ref as V  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
OUT = os.path.join(ROOT, "fixtures", "variants")

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
INPUT_SEED_OFFSET = 1000      # input seed = weight seed + 1000
ATTATTR_STEPS = 20
TREE_THRESHOLD = 0.4
IG = OrderedDict([("steps", 8), ("quadrature", "gauss-legendre"), ("baseline", "black")])
SMOOTH = OrderedDict([("inner", "saliency"), ("samples", 4), ("noise", 0.15), ("seed", 1234)])


def case(name, naming, storage, seed, cfg, about, extras=(), explain=None):
    return OrderedDict([("name", name), ("naming", naming), ("storage", storage), ("seed", seed),
                        ("cfg", cfg), ("about", about), ("extras", list(extras)),
                        ("explain", explain)])


def C3(**kw):
    base = dict(channels=3, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    base.update(kw)
    return V.VConfig(**base)


CASES = [
    case("deit3", "timm", "F32", 201,
         C3(image_h=12, image_w=16, patch=4, dim=24, depth=2, heads=3, mlp_dim=48, classes=5,
            ln_eps=1e-6, layer_scale=True, no_embed_class=True),
         "timm deit3_*: LayerScale (γ with negative entries), no_embed_class with a class token, token pooling"),
    case("distilled_timm", "timm", "F16", 202,
         C3(image_h=16, image_w=12, patch=4, dim=32, depth=2, heads=4, mlp_dim=64, classes=4,
            ln_eps=1e-6, dist_token=True),
         "timm deit_*_distilled_*: cls_token, dist_token, pos_embed with 2 prefix rows, head, head_dist"),
    case("distilled_hf", "hf_deit", "F32", 203,
         C3(image_h=12, image_w=16, patch=4, dim=16, depth=3, heads=2, mlp_dim=32, classes=6,
            ln_eps=1e-12, dist_token=True),
         "Hugging Face DeiTForImageClassificationWithTeacher, non-square input"),
    case("reg_gap", "timm", "F32", 204,
         V.VConfig(image_h=16, image_w=12, channels=1, patch=4, dim=16, depth=2, heads=2, mlp_dim=32,
                   classes=3, ln_eps=1e-6, mean=[0.5], std=[0.5], class_token=False, registers=4,
                   no_embed_class=True, layer_scale=True, final_norm=False, fc_norm=True, pool="avg"),
         "timm vit_*_reg4_gap_*: no class token, 4 registers, no_embed_class, avg + fc_norm, no final "
         "norm, LayerScale (inferred from the tensors), gray input"),
    case("avg_fcnorm_cls", "timm", "F32", 205,
         C3(image_h=12, image_w=12, patch=4, dim=16, depth=3, heads=2, mlp_dim=32, classes=4,
            ln_eps=1e-6, final_norm=False, fc_norm=True, pool="avg", act="gelu_pytorch_tanh",
            qkv_bias=False, patch_bias=False, pre_norm=True),
         "timm, class token, avg + fc_norm (no final norm), gelu_tanh, qkv_bias false, pre_norm "
         "(norm_pre; timm then builds the patch embedding without bias)"),
    case("dinov2", "hf_dinov2", "F32", 206,
         C3(image_h=15, image_w=15, patch=5, dim=24, depth=2, heads=3, mlp_dim=48, classes=5,
            ln_eps=1e-6, layer_scale=True, pool="token+avg"),
         "Hugging Face Dinov2ForImageClassification: token+avg, LayerScale, mask_token unused",
         extras=[("mask_token", (1, 24), "token")]),
    case("dinov2_reg", "hf_dinov2_reg", "BF16", 207,
         C3(image_h=12, image_w=12, patch=4, dim=16, depth=2, heads=2, mlp_dim=64, classes=3,
            ln_eps=1e-6, layer_scale=True, pool="token+avg", registers=2),
         "Hugging Face Dinov2WithRegistersForImageClassification: 2 registers, token+avg, LayerScale",
         extras=[("mask_token", (1, 16), "token")]),
    case("clip", "hf_clip", "F32", 208,
         V.VConfig(image_h=18, image_w=18, channels=3, patch=6, dim=16, depth=2, heads=2, mlp_dim=64,
                   classes=4, ln_eps=1e-5, mean=CLIP_MEAN, std=CLIP_STD, pre_norm=True,
                   patch_bias=False, final_norm=False, pool="avg", act="quick_gelu"),
         "Hugging Face CLIPForImageClassification: class_embedding, no patch bias, pre_layrnorm, "
         "quick_gelu, mean of the patch tokens of the last hidden state (post_layernorm unused)",
         extras=[("post_layernorm.weight", (16,), "ln_w"), ("post_layernorm.bias", (16,), "bias")]),
    case("resized", "timm", "F32", 209,
         C3(image_h=20, image_w=12, patch=4, dim=16, depth=2, heads=2, mlp_dim=32, classes=5,
            ln_eps=1e-6, pos_grid=(3, 4)),
         "plain timm ViT (class token, pos_embed with its CLS row), checkpoint 12×16 (grid 3×4), "
         "explained at 20×12 (grid 5×3): pos_embed's patch rows resampled bicubic",
         explain=(20, 12)),
]


# ---------------------------------------------------------------------------------------------
# Checkpoint names
# ---------------------------------------------------------------------------------------------

def block_map_hf_vit(prefix):
    """canonical block suffix → HF ViT/DeiT suffix (qkv handled separately)."""
    return OrderedDict([("norm1", prefix + "layernorm_before"), ("attn.proj", prefix + "attention.output.dense"),
                        ("norm2", prefix + "layernorm_after"), ("mlp.fc1", prefix + "intermediate.dense"),
                        ("mlp.fc2", prefix + "output.dense")])


def to_checkpoint(params, cfg, naming):
    """canonical params → OrderedDict of checkpoint name → float32 array, in that family's names
    and shapes. The q/k/v of HF checkpoints are the three thirds of attn.qkv."""
    d = cfg.dim
    if naming == "timm":
        return OrderedDict(params)
    out = OrderedDict()

    def put(name, key, reshape=None):
        if key in params:
            out[name] = params[key] if reshape is None else params[key].reshape(reshape)

    def blocks(layer_fmt, qkv_names, names, ls_names=None):
        for b in range(cfg.depth):
            src = "blocks.%d." % b
            dst = layer_fmt % b
            for part, (wn, bn) in zip(range(3), qkv_names):
                out[dst + wn] = params[src + "attn.qkv.weight"][part * d:(part + 1) * d]
                if cfg.qkv_bias:
                    out[dst + bn] = params[src + "attn.qkv.bias"][part * d:(part + 1) * d]
            for canon, name in names.items():
                out[dst + name + ".weight"] = params[src + canon + ".weight"]
                out[dst + name + ".bias"] = params[src + canon + ".bias"]
            if cfg.layer_scale:
                out[dst + ls_names[0]] = params[src + "ls1.gamma"]
                out[dst + ls_names[1]] = params[src + "ls2.gamma"]

    if naming == "hf_deit":
        e = "deit.embeddings."
        put(e + "cls_token", "cls_token")
        put(e + "distillation_token", "dist_token")
        put(e + "position_embeddings", "pos_embed")
        put(e + "patch_embeddings.projection.weight", "patch_embed.proj.weight")
        put(e + "patch_embeddings.projection.bias", "patch_embed.proj.bias")
        qkv = [("attention.attention.%s.weight" % p, "attention.attention.%s.bias" % p)
               for p in ("query", "key", "value")]
        blocks("deit.encoder.layer.%d.", qkv, block_map_hf_vit(""))
        put("deit.layernorm.weight", "norm.weight")
        put("deit.layernorm.bias", "norm.bias")
        put("cls_classifier.weight", "head.weight")
        put("cls_classifier.bias", "head.bias")
        put("distillation_classifier.weight", "head_dist.weight")
        put("distillation_classifier.bias", "head_dist.bias")
    elif naming in ("hf_dinov2", "hf_dinov2_reg"):
        p = "dinov2." if naming == "hf_dinov2" else "dinov2_with_registers."
        e = p + "embeddings."
        put(e + "cls_token", "cls_token")
        put(e + "mask_token", "mask_token")
        put(e + "register_tokens", "reg_token")
        put(e + "position_embeddings", "pos_embed")
        put(e + "patch_embeddings.projection.weight", "patch_embed.proj.weight")
        put(e + "patch_embeddings.projection.bias", "patch_embed.proj.bias")
        qkv = [("attention.attention.%s.weight" % q, "attention.attention.%s.bias" % q)
               for q in ("query", "key", "value")]
        names = OrderedDict([("norm1", "norm1"), ("attn.proj", "attention.output.dense"),
                             ("norm2", "norm2"), ("mlp.fc1", "mlp.fc1"), ("mlp.fc2", "mlp.fc2")])
        blocks(p + "encoder.layer.%d.", qkv, names, ("layer_scale1.lambda1", "layer_scale2.lambda1"))
        put(p + "layernorm.weight", "norm.weight")
        put(p + "layernorm.bias", "norm.bias")
        put("classifier.weight", "head.weight")
        put("classifier.bias", "head.bias")
    elif naming == "hf_clip":
        e = "vision_model.embeddings."
        put(e + "class_embedding", "cls_token", (d,))
        put(e + "patch_embedding.weight", "patch_embed.proj.weight")
        put(e + "position_embedding.weight", "pos_embed", (-1, d))
        put("vision_model.pre_layrnorm.weight", "norm_pre.weight")
        put("vision_model.pre_layrnorm.bias", "norm_pre.bias")
        qkv = [("self_attn.%s_proj.weight" % q, "self_attn.%s_proj.bias" % q) for q in ("q", "k", "v")]
        names = OrderedDict([("norm1", "layer_norm1"), ("attn.proj", "self_attn.out_proj"),
                             ("norm2", "layer_norm2"), ("mlp.fc1", "mlp.fc1"), ("mlp.fc2", "mlp.fc2")])
        blocks("vision_model.encoder.layers.%d.", qkv, names)
        put("vision_model.post_layernorm.weight", "post_layernorm.weight")
        put("vision_model.post_layernorm.bias", "post_layernorm.bias")
        put("classifier.weight", "head.weight")
        put("classifier.bias", "head.bias")
    else:
        raise ValueError(naming)
    used = sum(a.size for a in out.values())
    assert used == sum(a.size for a in params.values()), (naming, "a canonical tensor was not mapped")
    return out


def write_safetensors(path, tensors, storage, metadata=None):
    """tensors: name → float32 array holding values exact in `storage` (F32 / F16 / BF16).
    Names sorted (as the safetensors library writes them); 8-byte LE header length, JSON, data."""
    header, blobs, offset = OrderedDict(), [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        if storage == "F32":
            raw = a.tobytes()
        elif storage == "F16":
            h = a.astype("<f2")
            assert np.array_equal(h.astype(np.float32), a)
            raw = h.tobytes()
        elif storage == "BF16":
            bits = a.view("<u4")
            assert not np.any(bits & 0xFFFF), "not a bfloat16 value"
            raw = (bits >> 16).astype("<u2").tobytes()
        else:
            raise ValueError(storage)
        header[name] = {"dtype": storage, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
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
    """name → (float32 array, dtype string); F32, F16 and BF16."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = data[b:e]
        if info["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif info["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(info["dtype"])
        out[name] = (a.reshape(info["shape"]), info["dtype"])
    return out


# ---------------------------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------------------------

def labels(cfg):
    id2label = OrderedDict((str(i), "name%d" % i) for i in range(cfg.classes))
    return id2label, OrderedDict(("name%d" % i, i) for i in range(cfg.classes))


def ckpt_size(cfg):
    gh, gw = cfg.ckpt_grid
    h, w = gh * cfg.patch, gw * cfg.patch
    return h if h == w else [h, w]


def config_json(c):
    cfg, naming = c["cfg"], c["naming"]
    id2label, label2id = labels(cfg)
    dtype_name = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[c["storage"]]
    core = OrderedDict([
        ("image_size", ckpt_size(cfg)), ("patch_size", cfg.patch), ("num_channels", cfg.channels),
        ("hidden_size", cfg.dim), ("num_hidden_layers", cfg.depth),
        ("num_attention_heads", cfg.heads), ("intermediate_size", cfg.mlp_dim),
        ("layer_norm_eps", cfg.ln_eps), ("hidden_act", cfg.act), ("qkv_bias", cfg.qkv_bias)])
    tail = OrderedDict([("id2label", id2label), ("label2id", label2id),
                        ("image_mean", list(cfg.mean)), ("image_std", list(cfg.std))])
    if naming == "timm":
        out = OrderedDict([("architecture", "vit_fixture_" + c["name"])])   # timm's own key
        out.update(core)
        out.update([("global_pool", cfg.pool), ("class_token", cfg.class_token),
                    ("no_embed_class", cfg.no_embed_class), ("reg_tokens", cfg.registers),
                    ("fc_norm", cfg.fc_norm), ("pre_norm", cfg.pre_norm)])
        if cfg.layer_scale and c["name"] == "deit3":
            out["layerscale_value"] = 1e-6   # timm's init_values; γ itself is in the tensors
        out.update(tail)
        return out
    if naming == "hf_deit":
        out = OrderedDict([("architectures", ["DeiTForImageClassificationWithTeacher"]),
                           ("model_type", "deit")])
        out.update(core)
        out.update([("hidden_dropout_prob", 0.0), ("attention_probs_dropout_prob", 0.0),
                    ("encoder_stride", cfg.patch), ("torch_dtype", dtype_name)])
        out.update(tail)
        return out
    if naming in ("hf_dinov2", "hf_dinov2_reg"):
        reg = naming == "hf_dinov2_reg"
        assert cfg.mlp_dim % cfg.dim == 0
        out = OrderedDict([
            ("architectures", ["Dinov2WithRegistersForImageClassification" if reg
                               else "Dinov2ForImageClassification"]),
            ("model_type", "dinov2_with_registers" if reg else "dinov2")])
        for key in core:
            if key != "intermediate_size":      # Dinov2 configs carry mlp_ratio instead
                out[key] = core[key]
        out.update([("mlp_ratio", cfg.mlp_dim // cfg.dim), ("layerscale_value", 1.0),
                    ("use_swiglu_ffn", False), ("drop_path_rate", 0.0),
                    ("hidden_dropout_prob", 0.0), ("attention_probs_dropout_prob", 0.0)])
        if reg:
            out["num_register_tokens"] = cfg.registers
        out["torch_dtype"] = dtype_name
        out.update(tail)
        return out
    if naming == "hf_clip":
        vision = OrderedDict([("model_type", "clip_vision_model")])
        for key in core:
            if key != "qkv_bias":               # CLIP has no such key: its q/k/v have biases
                vision[key] = core[key]
        vision.update([("attention_dropout", 0.0), ("projection_dim", cfg.dim)])
        out = OrderedDict([("architectures", ["CLIPForImageClassification"]), ("model_type", "clip"),
                           ("projection_dim", cfg.dim), ("torch_dtype", dtype_name),
                           ("vision_config", vision)])
        out.update(tail)
        return out
    raise ValueError(naming)


# ---------------------------------------------------------------------------------------------
# The methods, as `vitlens explain` names them
# ---------------------------------------------------------------------------------------------

def class_specific(cfg):
    """(stem, engine method, engine options (strings), reference method, reference options, output)."""
    last = cfg.depth - 1
    tok = "token-map"
    return [
        ("raw-attention", "raw-attention", {}, "raw-attention", {}, tok),
        ("rollout-mean", "rollout", {"head-fusion": "mean"}, "rollout", {"fusion": "mean"}, tok),
        ("rollout-max", "rollout", {"head-fusion": "max"}, "rollout", {"fusion": "max"}, tok),
        ("rollout-min", "rollout", {"head-fusion": "min"}, "rollout", {"fusion": "min"}, tok),
        ("rollout-mean-discard0.5", "rollout", {"head-fusion": "mean", "discard-ratio": "0.5"},
         "rollout", {"fusion": "mean", "discard_ratio": 0.5}, tok),
        ("rollout-mean-start1", "rollout", {"head-fusion": "mean", "start-layer": "1"},
         "rollout", {"fusion": "mean", "start_layer": 1}, tok),
        ("attn-gradcam", "attn-gradcam", {}, "attn-gradcam", {}, tok),
        ("grad-rollout", "grad-rollout", {}, "grad-rollout", {}, tok),
        ("transformer-attribution-start0", "transformer-attribution", {"start-layer": "0"},
         "transformer-attribution", {"start_layer": 0}, tok),
        ("transformer-attribution-start1", "transformer-attribution", {"start-layer": "1"},
         "transformer-attribution", {"start_layer": 1}, tok),
        ("transformer-attribution-nograd", "transformer-attribution", {"weight": "none"},
         "transformer-attribution", {"use_grad": False}, tok),
        ("transformer-attribution-block0", "transformer-attribution", {"block": "0"},
         "transformer-attribution", {"block": 0}, tok),
        ("transformer-attribution-block%d" % last, "transformer-attribution", {"block": str(last)},
         "transformer-attribution", {"block": last}, tok),
        ("partial-lrp", "partial-lrp", {}, "partial-lrp", {}, tok),
        ("lrp", "lrp", {}, "lrp", {}, "pixel-map"),
        ("attnlrp", "attnlrp", {}, "attnlrp", {}, "pixel-map"),
        ("attnlrp-tokens", "attnlrp", {}, "attnlrp-tokens", {}, tok),
    ]


def entry(fname, method, options, target, arr, output, **extra):
    e = OrderedDict([("file", fname), ("method", method),
                     ("options", OrderedDict((k, str(v)) for k, v in options.items())),
                     ("target", target), ("output", output), ("shape", list(arr.shape)),
                     ("dtype", np.dtype(arr.dtype).name)])
    e.update(extra)
    return e


def runner_up(logits):
    return int(np.argsort(-np.asarray(logits), kind="stable")[1])


def rel(a, ref):
    return float(np.max(np.abs(a - ref)) / max(1e-300, np.max(np.abs(ref))))


def f32_sensitivity(params, cfg, image, ex64):
    """max |map_f32 − map_f64| / max |map_f64| with the whole reference in float32."""
    t = ex64.target
    ex32 = V.Explainer(params, cfg, image, t, dtype=torch.float32)
    out = OrderedDict()
    for stem, method, opt in [("transformer-attribution-start0", "transformer-attribution", {}),
                              ("lrp", "lrp", {}), ("attnlrp", "attnlrp", {}),
                              ("grad-rollout", "grad-rollout", {}), ("rollout-mean", "rollout", {})]:
        out[stem] = rel(ex32.run(method, **opt).astype(np.float64), ex64.run(method, **opt))
    out["logits_max_abs_diff"] = float(np.max(np.abs(ex32.tr["logits"].detach().numpy().astype(np.float64)
                                                      - ex64.tr["logits"].detach().numpy())))
    out["target"] = t
    return out


def write_case(c):
    t0 = time.time()
    name, cfg, storage = c["name"], c["cfg"], c["storage"]
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    params = V.round_params(V.random_params(cfg, c["seed"], c["extras"]), storage)
    input_seed = c["seed"] + INPUT_SEED_OFFSET
    image = V.random_image(cfg, input_seed)
    ckpt = to_checkpoint(params, cfg, c["naming"])
    write_safetensors(os.path.join(d, "model.safetensors"), ckpt, storage, {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config_json(c), f, indent=2)
    np.save(os.path.join(d, "input.npy"), image)

    first = V.Explainer(params, cfg, image)
    logits = first.tr["logits"].detach().numpy().astype(np.float64)
    targets = [first.target, runner_up(logits)]
    np.save(os.path.join(d, "logits.npy"), logits)
    np.save(os.path.join(d, "attn.npy"), np.stack([bt["attn"].detach().numpy() for bt in first.tr["blocks"]]))
    np.save(os.path.join(d, "grad_attn_t%d.npy" % first.target), np.stack([g.numpy() for g in first.grad_attn]))
    if cfg.resized:
        np.save(os.path.join(d, "pos_embed_resampled.npy"), V.resample_pos_embed(first.w.pos_ckpt, cfg))

    index = []

    def save(fname, arr, *e_args, **e_kw):
        np.save(os.path.join(d, fname), arr)
        index.append(entry(fname, *e_args[:3], arr, *e_args[3:], **e_kw))

    w = first.w
    trees = OrderedDict()
    for t in targets:
        ex = first if t == first.target else V.Explainer(params, cfg, image, t)
        for stem, method, options, ref_method, ref_opt, output in class_specific(cfg):
            save("%s_t%d.npy" % (stem, t), ex.run(ref_method, **ref_opt).astype(np.float64),
                 method, options, t, output)
        for method in ("lrp", "attnlrp"):      # transformer-attribution's: lrp's rows down to E0
            with open(os.path.join(d, "conservation_%s_t%d.json" % (method, t)), "w") as f:
                json.dump(ex.conservation(method), f)
        attr = V.attattr(w, cfg, image, t, ATTATTR_STEPS)
        steps = {"steps": ATTATTR_STEPS}
        save("attattr-tokens_t%d.npy" % t, V.attattr_token_map(attr, cfg), "attattr", steps, t, "token-map")
        if t == targets[0]:
            save("attattr_t%d.npy" % t, attr, "attattr", steps, t, "attattr")
        tree, margin = V.attattr_tree(attr, cfg, TREE_THRESHOLD)
        tree["margin"] = margin
        s_attr, s_attn, s_taylor = V.attattr_head_scores(w, cfg, image, t, attr)
        trees[t] = tree
        with open(os.path.join(d, "attattr_t%d.json" % t), "w") as f:
            json.dump(OrderedDict([("target", t), ("steps", ATTATTR_STEPS), ("tree", tree),
                                   ("heads_attattr", s_attr.tolist()), ("heads_attention", s_attn.tolist()),
                                   ("heads_taylor", s_taylor.tolist()),
                                   ("heads_note", "(L, H) for this one image: signed max of Attr, "
                                                  "mean_i max_j A, |Σ A ⊙ ∂F/∂A|")]), f, indent=1)
        save("saliency_t%d.npy" % t, V.saliency(w, cfg, image, t), "saliency", {}, t, "pixel-map")
        save("grad-x-input_t%d.npy" % t, V.grad_x_input(w, cfg, image, t), "grad-x-input", {}, t, "pixel-map")
        px, comp = V.integrated_gradients(w, cfg, image, t, V.black_baseline(cfg), IG["quadrature"], IG["steps"])
        save("integrated-gradients_t%d.npy" % t, px, "integrated-gradients", IG, t, "pixel-map",
             completeness=comp)
        px = V.smoothgrad_saliency(w, cfg, image, t, SMOOTH["samples"], SMOOTH["noise"], SMOOTH["seed"])
        save("smoothgrad_t%d.npy" % t, px, "smoothgrad", SMOOTH, t, "pixel-map")

    nb = V.norm_based(w, cfg, image)
    np.save(os.path.join(d, "norm_maps.npy"), nb["maps"])
    np.save(os.path.join(d, "norm_mixing.npy"), nb["mixing"])
    for st, tm in nb["tokens"].items():
        save("norm-based-%s.npy" % st, tm, "norm-based", {"stage": st}, targets[0], "token-map",
             class_specific=False)
    sens = f32_sensitivity(params, cfg, image, first)

    meta = OrderedDict([
        ("case", name), ("about", c["about"]),
        ("naming", c["naming"]), ("checkpoint_dtype", storage),
        ("checkpoint_tensors", OrderedDict((k, list(v.shape)) for k, v in sorted(ckpt.items()))),
        ("unused_tensors", [e[0] for e in c["extras"]]),
        ("variant_flags", cfg.flags()),
        ("config", OrderedDict([("image_h", cfg.image_h), ("image_w", cfg.image_w),
                                ("channels", cfg.channels), ("patch", cfg.patch), ("dim", cfg.dim),
                                ("depth", cfg.depth), ("heads", cfg.heads), ("mlp_dim", cfg.mlp_dim),
                                ("classes", cfg.classes), ("ln_eps", cfg.ln_eps),
                                ("tokens", cfg.tokens), ("grid", [cfg.grid_h, cfg.grid_w]),
                                ("mean", cfg.mean), ("std", cfg.std)])),
        ("checkpoint_image_size", [cfg.ckpt_grid[0] * cfg.patch, cfg.ckpt_grid[1] * cfg.patch]),
        ("checkpoint_grid", list(cfg.ckpt_grid)),
        ("explained_image_size", [cfg.image_h, cfg.image_w]),
        ("explained_grid", [cfg.grid_h, cfg.grid_w]),
        ("query", V.query(cfg).tolist()),
        ("weight_seed", c["seed"]), ("input_seed", input_seed),
        ("generator", "torch.Generator().manual_seed(seed), torch.rand float64 per tensor in "
                      "variants_ref.param_specs order; rounded to float32, then to the checkpoint dtype"),
        ("targets", OrderedDict([("argmax", targets[0]), ("runner_up", targets[1])])),
        ("logits", logits.tolist()),
        ("attattr_tree_margin", OrderedDict((str(t), trees[t]["margin"]) for t in targets)),
        ("norm_check_identity_max_rel", nb["worst_identity"]),
        ("norm_check_forward_max_abs", nb["worst_trace"]),
        ("f32_vs_f64", sens),
        ("reference_dtype", "float64 (weights and input rounded to the checkpoint dtype / float32 first)"),
    ])
    if cfg.resized:
        meta["resampling"] = ("pos_embed patch rows (d, 3, 4) → (d, 5, 3): torch interpolate bicubic, "
                              "align_corners=False, antialias=False, in float64 rounded once to float32; CLS row kept")
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(d, "index.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e) for e in index) + "\n]\n")
    size = sum(os.path.getsize(os.path.join(d, fn)) for fn in os.listdir(d))
    print("%-15s targets %s, %3d files, %6.1f KB, %.1f s" % (name, targets, len(os.listdir(d)),
                                                             size / 1024, time.time() - t0))
    return size


def main():
    only = set(sys.argv[1:])
    t0 = time.time()
    total = 0
    for c in CASES:
        if not only or c["name"] in only:
            total += write_case(c)
    print("total %.1f KB, %.1f s" % (total / 1024, time.time() - t0))


if __name__ == "__main__":
    main()
