// model.cpp — parameter allocation, the named parameter list, and reproducible random models.
#include "vitlens/model/model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <new>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

// Every parameter tensor of a config, in file order: a plain config lists exactly the tensors it
// listed before the variants existed (so its random weights and files are unchanged); a variant's
// tensors appear only when the config has it. `bind` receives (name, shape, quantisable, field);
// field is null when only the shapes are wanted.
template <typename F>
void for_each_param(Params* p, const Config& c, F&& bind) {
  const int d = c.dim, m = c.mlp_dim;
  bind("patch_embed.proj.weight", std::vector<int>{d, c.channels, c.patch, c.patch}, true,
       p ? &p->patch_w : nullptr, nullptr);
  bind("patch_embed.proj.bias", std::vector<int>{d}, false, nullptr, p ? &p->patch_b : nullptr);
  if (c.class_token) bind("cls_token", std::vector<int>{1, 1, d}, false, nullptr, p ? &p->cls_token : nullptr);
  if (c.dist_token) bind("dist_token", std::vector<int>{1, 1, d}, false, nullptr, p ? &p->dist_token : nullptr);
  if (c.registers > 0)
    bind("reg_token", std::vector<int>{1, c.registers, d}, false, p ? &p->reg_tokens : nullptr, nullptr);
  bind("pos_embed", std::vector<int>{1, c.pos_rows(), d}, false, p ? &p->pos_embed : nullptr, nullptr);
  if (c.pre_norm) {
    bind("norm_pre.weight", std::vector<int>{d}, false, nullptr, p ? &p->pre_norm_w : nullptr);
    bind("norm_pre.bias", std::vector<int>{d}, false, nullptr, p ? &p->pre_norm_b : nullptr);
  }
  for (int i = 0; i < c.depth; ++i) {
    BlockParams* b = p ? &p->blocks[size_t(i)] : nullptr;
    const std::string pre = "blocks." + std::to_string(i) + ".";
    bind(pre + "norm1.weight", std::vector<int>{d}, false, nullptr, b ? &b->norm1_w : nullptr);
    bind(pre + "norm1.bias", std::vector<int>{d}, false, nullptr, b ? &b->norm1_b : nullptr);
    bind(pre + "attn.qkv.weight", std::vector<int>{3 * d, d}, true, b ? &b->qkv_w : nullptr, nullptr);
    bind(pre + "attn.qkv.bias", std::vector<int>{3 * d}, false, nullptr, b ? &b->qkv_b : nullptr);
    bind(pre + "attn.proj.weight", std::vector<int>{d, d}, true, b ? &b->proj_w : nullptr, nullptr);
    bind(pre + "attn.proj.bias", std::vector<int>{d}, false, nullptr, b ? &b->proj_b : nullptr);
    bind(pre + "norm2.weight", std::vector<int>{d}, false, nullptr, b ? &b->norm2_w : nullptr);
    bind(pre + "norm2.bias", std::vector<int>{d}, false, nullptr, b ? &b->norm2_b : nullptr);
    bind(pre + "mlp.fc1.weight", std::vector<int>{m, d}, true, b ? &b->fc1_w : nullptr, nullptr);
    bind(pre + "mlp.fc1.bias", std::vector<int>{m}, false, nullptr, b ? &b->fc1_b : nullptr);
    bind(pre + "mlp.fc2.weight", std::vector<int>{d, m}, true, b ? &b->fc2_w : nullptr, nullptr);
    bind(pre + "mlp.fc2.bias", std::vector<int>{d}, false, nullptr, b ? &b->fc2_b : nullptr);
    if (c.layer_scale) {
      bind(pre + "ls1.gamma", std::vector<int>{d}, false, nullptr, b ? &b->ls1 : nullptr);
      bind(pre + "ls2.gamma", std::vector<int>{d}, false, nullptr, b ? &b->ls2 : nullptr);
    }
  }
  if (c.final_norm) {
    bind("norm.weight", std::vector<int>{d}, false, nullptr, p ? &p->norm_w : nullptr);
    bind("norm.bias", std::vector<int>{d}, false, nullptr, p ? &p->norm_b : nullptr);
  }
  if (c.fc_norm) {
    bind("fc_norm.weight", std::vector<int>{d}, false, nullptr, p ? &p->fc_norm_w : nullptr);
    bind("fc_norm.bias", std::vector<int>{d}, false, nullptr, p ? &p->fc_norm_b : nullptr);
  }
  bind("head.weight", std::vector<int>{c.classes, c.head_in()}, true, p ? &p->head_w : nullptr, nullptr);
  bind("head.bias", std::vector<int>{c.classes}, false, nullptr, p ? &p->head_b : nullptr);
  if (c.dist_token) {
    bind("head_dist.weight", std::vector<int>{c.classes, d}, true, p ? &p->head_dist_w : nullptr, nullptr);
    bind("head_dist.bias", std::vector<int>{c.classes}, false, nullptr, p ? &p->head_dist_b : nullptr);
  }
}

int64_t shape_size(const std::vector<int>& shape) {
  int64_t n = 1;
  for (int s : shape) n *= s;
  return n;
}

}  // namespace

Params params_alloc(const Config& c) {
  Params p;
  try {
    p.blocks.resize(size_t(c.depth));
    for_each_param(&p, c, [](const std::string&, const std::vector<int>& shape, bool, Mat* m, Vec* v) {
      if (m) m->resize(shape.size() == 3 ? shape[1] : shape[0],
                       shape.size() == 3 ? shape[2] : Eigen::Index(shape_size(shape) / shape[0]));
      if (v) v->resize(Eigen::Index(shape_size(shape)));
    });
  } catch (const std::bad_alloc&) {
    // The one large allocation of loading a model: say how large (the wasm bindings add the limit).
    const int64_t n = param_count(c);
    throw Error(ErrorCode::out_of_memory,
                "the model needs about " + std::to_string((n * 4 + (1 << 20) - 1) >> 20) + " MB for its weights (" +
                    std::to_string(n) + " parameters as float32)",
                double(n) * 4);
  }
  return p;
}

Params params_zeros(const Config& c) {
  Params p = params_alloc(c);
  for (const ParamRef& r : param_list(p, c)) std::fill(r.data, r.data + r.size, 0.0f);
  return p;
}

std::vector<ParamRef> param_list(Params& p, const Config& c) {
  std::vector<ParamRef> out;
  for_each_param(&p, c, [&](const std::string& name, const std::vector<int>& shape, bool quantisable,
                            Mat* m, Vec* v) {
    float* data = m ? m->data() : v->data();
    const size_t size = m ? size_t(m->size()) : size_t(v->size());
    assert(int64_t(size) == shape_size(shape));
    out.push_back(ParamRef{name, data, shape, size, quantisable});
  });
  return out;
}

std::vector<ParamSpec> param_specs(const Config& c) {
  std::vector<ParamSpec> out;
  for_each_param(nullptr, c, [&](const std::string& name, const std::vector<int>& shape, bool quantisable, Mat*, Vec*) {
    out.push_back(ParamSpec{name, shape, size_t(shape_size(shape)), quantisable});
  });
  return out;
}

int64_t param_count(const Config& c) {
  int64_t n = 0;
  for_each_param(nullptr, c, [&](const std::string&, const std::vector<int>& shape, bool, Mat*, Vec*) {
    n += shape_size(shape);
  });
  return n;
}

std::vector<PoolPart> pool_parts(const Config& c) {
  switch (c.pool) {
    case Pooling::token:
      if (c.dist_token) return {PoolPart{0}, PoolPart{1}};
      return {PoolPart{0}};
    case Pooling::avg: return {PoolPart{-1}};
    case Pooling::token_avg: return {PoolPart{0}, PoolPart{-1}};
  }
  return {};
}

int head_rows(const Config& c) {
  int rows = 0;
  for (const PoolPart& part : pool_parts(c)) {
    if (part.token < 0) return c.tokens();
    rows = std::max(rows, part.token + 1);
  }
  return rows;
}

VecD query_weights(const Config& c) {
  const std::vector<PoolPart> parts = pool_parts(c);
  VecD q = VecD::Zero(c.tokens());
  const double share = 1.0 / double(parts.size());
  for (const PoolPart& part : parts) {
    if (part.token >= 0) q[part.token] += share;
    else q.tail(c.num_patches()).array() += share / double(c.num_patches());
  }
  return q;
}

namespace {

// u in [0, 1) with 24 bits: exact in float32.
double uniform01(uint64_t seed, uint64_t k, uint64_t i) {
  const uint64_t z = splitmix64(seed * 0x100000001B3ull + (k << 32) + i);
  return double(z >> 40) * (1.0 / 16777216.0);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void pack_weights(Model& m) {
  Params& p = m.params;
  size_t values = size_t(p.patch_w.size());
  for (const BlockParams& b : p.blocks)
    values += size_t(b.qkv_w.size() + b.proj_w.size() + b.fc1_w.size() + b.fc2_w.size());
  const bool forward = values <= kPackedWeightsCap, all = 4 * values <= kPackedWeightsCap;
  auto pack = [](const Mat& w, WeightProduct product, bool wanted) {
    return wanted ? pack_weight(w.data(), int(w.rows()), int(w.cols()), product) : nullptr;
  };
  auto pack_all = [&](WeightPacks& packs, const Mat& w) {
    packs.times_wt = pack(w, WeightProduct::times_wt, forward);
    packs.times_abs_wt = pack(w, WeightProduct::times_abs_wt, all);
    packs.times_w = pack(w, WeightProduct::times_w, all);
    packs.times_abs_w = pack(w, WeightProduct::times_abs_w, all);
  };
  // The patch embedding's relevance rules form their own weights (patch_embed.cpp): its forward
  // pass and the input gradient's dy·W only.
  p.patch_packs = WeightPacks();
  p.patch_packs.times_wt = pack(p.patch_w, WeightProduct::times_wt, forward);
  p.patch_packs.times_w = pack(p.patch_w, WeightProduct::times_w, all);
  for (BlockParams& b : p.blocks) {
    pack_all(b.qkv_packs, b.qkv_w);
    pack_all(b.proj_packs, b.proj_w);
    pack_all(b.fc1_packs, b.fc1_w);
    pack_all(b.fc2_packs, b.fc2_w);
  }
}

Model random_model(const Config& cfg, uint64_t seed) {
  Model m;
  m.config = cfg;
  fill_config_defaults(m.config);
  m.params = params_zeros(m.config);
  m.provenance = "random weights, seed " + std::to_string(seed);
  std::vector<ParamRef> refs = param_list(m.params, m.config);
  for (size_t k = 0; k < refs.size(); ++k) {
    const ParamRef& r = refs[k];
    const bool is_norm = r.name.find("norm") != std::string::npos;
    double a = 0.1, offset = 0.0;
    if (r.quantisable) {
      size_t fan_in = 1;
      for (size_t j = 1; j < r.shape.size(); ++j) fan_in *= size_t(r.shape[j]);
      a = std::sqrt(3.0 / double(fan_in));
    } else if (is_norm && ends_with(r.name, ".weight")) {
      a = 0.2;
      offset = 1.0;
    } else if (r.name == "cls_token" || r.name == "pos_embed" || r.name == "dist_token" ||
               r.name == "reg_token" || ends_with(r.name, ".gamma")) {
      a = 0.5;
    }
    for (size_t i = 0; i < r.size; ++i)
      r.data[i] = float(offset + a * (2.0 * uniform01(seed, k, i) - 1.0));
  }
  return m;
}

Image random_input(const Config& cfg, uint64_t seed) {
  Image x(cfg.channels, cfg.image_h, cfg.image_w);
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = float(2.0 * uniform01(seed, 0xFFFF, i) - 1.0);
  return x;
}

namespace {

// torch's cubic convolution kernel with A = −0.75: the weights of the 4 taps at offsets −1…2
// for a fractional position t ∈ [0, 1).
void cubic_weights(double t, double w[4]) {
  const double A = -0.75;
  auto near = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };          // |x| ≤ 1
  auto far = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };      // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// Resamples a (rows_in, cols_in) grid of d-vectors (row-major, one token per row of `src`) to
// (rows_out, cols_out): half-pixel centres (align_corners = False), source index
// (o + ½)·in/out − ½, taps clamped at the borders, no antialiasing. Accumulated in double and
// rounded once, so that the result does not depend on the platform's float contraction (the
// relevance rules amplify a last-bit difference in pos_embed through the position-embedding add).
Mat resample_grid(const Mat& src, int rows_in, int cols_in, int rows_out, int cols_out) {
  const Eigen::Index d = src.cols();
  const MatD s = src.cast<double>();
  MatD tmp = MatD::Zero(Eigen::Index(rows_in) * cols_out, d);  // columns first
  MatD out = MatD::Zero(Eigen::Index(rows_out) * cols_out, d);
  auto taps_of = [](int in, int o_idx, int out_n, int taps[4], double w[4]) {
    const double real = double(in) / double(out_n) * (double(o_idx) + 0.5) - 0.5;
    const double fl = std::floor(real);
    cubic_weights(real - fl, w);
    for (int k = 0; k < 4; ++k) taps[k] = std::min(std::max(int(fl) - 1 + k, 0), in - 1);
  };
  int taps[4];
  double w[4];
  for (int ox = 0; ox < cols_out; ++ox) {
    taps_of(cols_in, ox, cols_out, taps, w);
    for (int y = 0; y < rows_in; ++y)
      for (int k = 0; k < 4; ++k)
        tmp.row(Eigen::Index(y) * cols_out + ox) += w[k] * s.row(Eigen::Index(y) * cols_in + taps[k]);
  }
  for (int oy = 0; oy < rows_out; ++oy) {
    taps_of(rows_in, oy, rows_out, taps, w);
    for (int x = 0; x < cols_out; ++x)
      for (int k = 0; k < 4; ++k)
        out.row(Eigen::Index(oy) * cols_out + x) += w[k] * tmp.row(Eigen::Index(taps[k]) * cols_out + x);
  }
  return out.cast<float>();
}

}  // namespace

void aspect_input_size(const Config& c, int img_h, int img_w, int& h, int& w) {
  if (img_h < 1 || img_w < 1) throw Error(ErrorCode::bad_argument, "the image has no pixels");
  const int gh0 = c.pos_grid_h ? c.pos_grid_h : c.grid_h(), gw0 = c.pos_grid_w ? c.pos_grid_w : c.grid_w();
  const double patches = double(gh0) * double(gw0), aspect = double(img_h) / double(img_w);
  const int gh = std::max(1, int(std::lround(std::sqrt(patches * aspect))));
  const int gw = std::max(1, int(std::lround(patches / double(gh))));
  h = gh * c.patch;
  w = gw * c.patch;
}

Model resize_input(const Model& m, int h, int w) {
  const Config& c = m.config;
  if (c.pos_grid_h && (c.pos_grid_h != c.grid_h() || c.pos_grid_w != c.grid_w()))
    throw Error(ErrorCode::bad_argument,
                "this model was already resampled to another input size: resize the original");
  Model out;
  out.config = c;
  out.config.image_h = h;
  out.config.image_w = w;
  out.config.pos_grid_h = c.grid_h();
  out.config.pos_grid_w = c.grid_w();
  validate_config(out.config);
  if (param_count(out.config) > limits::max_params)
    throw Error(ErrorCode::limit, "the model at " + std::to_string(h) + "×" + std::to_string(w) +
                                      " is too large");
  out.params = m.params;
  out.provenance = m.provenance;
  out.stored_int8 = m.stored_int8;
  const int k = c.pos_prefix();
  Mat pos(out.config.pos_rows(), c.dim);
  pos.topRows(k) = m.params.pos_embed.topRows(k);
  pos.bottomRows(out.config.num_patches()) =
      resample_grid(m.params.pos_embed.bottomRows(c.num_patches()), c.grid_h(), c.grid_w(),
                    out.config.grid_h(), out.config.grid_w());
  out.params.pos_embed = std::move(pos);
  return out;
}

}  // namespace vitlens
