// model.h — a loaded ViT: its config and its parameters.
//
// Field names follow the timm checkpoint keys they come from (blocks.N.attn.qkv.weight →
// BlockParams::qkv_w). A Model is immutable once built and can be shared between threads and
// calls; everything a call computes lives in a Trace owned by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vitlens/model/config.h"
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

struct BlockParams {
  Vec norm1_w, norm1_b;  // (d)          blocks.N.norm1.{weight,bias}
  Mat qkv_w;             // (3d, d)      blocks.N.attn.qkv.weight, rows: q | k | v
  Vec qkv_b;             // (3d)
  Mat proj_w;            // (d, d)       blocks.N.attn.proj.weight
  Vec proj_b;            // (d)
  Vec norm2_w, norm2_b;  // (d)
  Mat fc1_w;             // (mlp, d)     blocks.N.mlp.fc1.weight
  Vec fc1_b;             // (mlp)
  Mat fc2_w;             // (d, mlp)     blocks.N.mlp.fc2.weight
  Vec fc2_b;             // (d)
  Vec ls1, ls2;          // (d)          blocks.N.ls1.gamma, ls2.gamma; empty without LayerScale
  // qkv_w, proj_w, fc1_w, fc2_w packed for their products by pack_weights (wasm), else null
  WeightPacks qkv_packs, proj_packs, fc1_packs, fc2_packs;
};

// Tensors a variant does not have are empty (Config says which are present).
struct Params {
  Mat patch_w;    // (d, C·p·p)  patch_embed.proj.weight, flattened (C, p, p)
  Vec patch_b;    // (d)         zeros when the checkpoint has no patch bias
  Vec cls_token;  // (d)         cls_token
  Vec dist_token; // (d)         dist_token (distilled)
  Mat reg_tokens; // (r, d)      reg_token
  Mat pos_embed;  // (pos_rows, d) pos_embed: [CLS][DIST] rows unless no_embed_class, then patches
  Vec pre_norm_w, pre_norm_b;       // (d) norm_pre.{weight,bias}
  std::vector<BlockParams> blocks;  // (L)
  Vec norm_w, norm_b;  // (d)    norm.{weight,bias} (final_norm)
  Vec fc_norm_w, fc_norm_b;  // (d) fc_norm.{weight,bias}
  Mat head_w;     // (classes, head_in) head.weight
  Vec head_b;     // (classes)
  Mat head_dist_w;  // (classes, d) head_dist.weight (distilled)
  Vec head_dist_b;  // (classes)
  WeightPacks patch_packs;  // patch_w packed for x·Wᵀ and dy·W by pack_weights (wasm), else null
};

// One parameter tensor seen through its checkpoint name. `quantisable` marks the linear and
// patch-embedding weights, stored int8 per output channel in int8 model files.
struct ParamRef {
  std::string name;          // timm key, e.g. "blocks.3.mlp.fc1.weight"
  float* data;
  std::vector<int> shape;    // checkpoint shape, e.g. {mlp, d}; patch weight {d, C, p, p}
  size_t size;
  bool quantisable;
};

// One parameter tensor as the config implies it, before anything is allocated: the readers check
// a file against these (names, shapes) before they allocate the parameters.
struct ParamSpec {
  std::string name;
  std::vector<int> shape;
  size_t size;
  bool quantisable;
};

// Every parameter tensor of a config, in file order (the order and names of param_list).
std::vector<ParamSpec> param_specs(const Config& cfg);

// Allocates every tensor with the shapes the config implies, zero-filled. Throws
// Error(out_of_memory) with the bytes needed when the allocation fails.
Params params_zeros(const Config& cfg);
// The same without filling: for loaders that overwrite every tensor (zero-filling a ViT-B's
// 330 MB is seconds in a wasm engine's first, unoptimised tier).
Params params_alloc(const Config& cfg);

// Every parameter tensor, in file order. The pointers stay valid while `p` is not resized.
std::vector<ParamRef> param_list(Params& p, const Config& cfg);

int64_t param_count(const Config& cfg);

struct Model {
  Config config;
  Params params;
  std::string provenance;  // free text: where the weights came from
  bool stored_int8 = false;  // weights were dequantised from int8 on load
};

// Packs the patch embedding's and the blocks' linear weights for the products that read them
// (gemm.h, PackedWeight): the forward pass's x·Wᵀ when the weights are at most kPackedWeightsCap
// values in all (one more copy of them: DeiT-tiny 22 MB, ViT-S/16 85 MB; ViT-B/16's 340 MB are not
// copied; a forward pass 3–12 % faster in wasm), and the backward pass's dy·W and the relevance
// rules' |x|·|W|ᵀ, S·W and S·|W| too when all four copies fit under it (DeiT-tiny 88 MB; in wasm
// transformer-attribution and lrp 2–3 % faster on one thread and 3–6 % on two, attnlrp 1–2 %,
// docs/performance.md 2026-11-29).
// Natively a no-op (nothing to pack: Eigen). Call once the params are final (the wasm bindings do,
// on the Model they then hold const): a packed weight is used only while it was packed from the
// same buffer, but an edit in place after packing is not seen.
constexpr size_t kPackedWeightsCap = size_t(32) << 20;
void pack_weights(Model& m);

// The head's input is the concatenation of these parts, each a weighted sum of the final-norm
// tokens: one token (token pooling: CLS, and DIST for distilled models) or the mean of the patch
// tokens (avg). Distilled models have two parts, each read by its own head (head, head_dist).
struct PoolPart {
  int token = -1;  // the token read; -1: the mean of the P patch tokens
};
std::vector<PoolPart> pool_parts(const Config& cfg);
// How many leading tokens of the last block's output the head reads: 1 + the last pooled token
// (1 for CLS, 2 with DIST), or all n when a part is the patch mean. Passes that only need the
// output's gradient form just these rows of the last block (BlockOptionsT::rows).
int head_rows(const Config& cfg);

// The query of the methods (METHODS.md "Method conventions"): the n token weights whose
// combination of rows of an n×n matrix becomes the map — the mean of the pool parts' weights
// (the CLS row; ½(CLS + DIST); the mean of the patch rows; ½(CLS + the patch mean)).
VecD query_weights(const Config& cfg);

// Random weights from a counter-based generator that a test reference reproduces exactly
// (tests/reference/vit_ref.py): element i of the k-th tensor of param_list gets
//   z = splitmix64(seed·0x100000001B3 + (k << 32) + i)   (mod 2^64)
//   u = (z >> 40) · 2^-24                                  (uniform in [0, 1), exact in f32)
//   value = a·(2u − 1) (+ 1 for LayerNorm weights), where a is
//   √(3/fan_in) for quantisable weights and the head (fan_in = product of dims after the first),
//   0.2 for LayerNorm weights, 0.1 for biases (LayerNorm biases included), 0.5 for cls/pos.
// LayerScale γ, register / distillation tokens get a = 0.5 like cls/pos (γ offset by 0: a small
// positive and negative scale). Tensors of a variant are in param_list only when present, so
// a plain config draws exactly what it drew before the variants existed.
// Used for the benchmark shape and tests.
Model random_model(const Config& cfg, uint64_t seed);

// splitmix64, the mixing function above. Inline: smoothgrad and the ROAD noise call it twice per
// input element, and in a pthreads wasm build with JS-emulated exceptions (core/CMakeLists.txt)
// an out-of-line call from a scope with destructors goes through a JS trampoline (6 % of
// smoothgrad there).
inline uint64_t splitmix64(uint64_t x) noexcept {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A random normalised input with the same generator (tensor index k = 0xFFFF, a = 1).
Image random_input(const Config& cfg, uint64_t seed);

// The model at another input size h × w (multiples of the patch): pos_embed's patch rows, as a
// (d, gh, gw) grid, resampled bicubically (A = −0.75, half-pixel centres, clamped borders, no
// antialiasing: torch's interpolate(mode='bicubic', align_corners=False)) in float; the prefix
// rows kept. The original grid is recorded in config.pos_grid_*; resizing again starts from it
// only if the model still holds it (resample from the checkpoint, not from a resampled copy).
Model resize_input(const Model& m, int h, int w);

// The input size (h, w) for an image of img_h × img_w pixels explained "at its own aspect": the
// grid with the image's aspect ratio and about as many patches as the checkpoint's grid (the same
// cost per explanation), each side at least one patch. The model's own size for a square image
// and a square checkpoint.
void aspect_input_size(const Config& c, int img_h, int img_w, int& h, int& w);

}  // namespace vitlens
