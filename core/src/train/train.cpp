// train.cpp — the trainer: data and augmentation, sharded BCE gradients, AdamW with warm-up and
// cosine, checkpoints and the training loop. See train.h for the determinism contract.
#include "vitlens/train/train.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "vitlens/tensor/error.h"
#include "vitlens/io/model_file.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/eval/scene_eval.h"

namespace vitlens {

namespace {

using json = nlohmann::json;

constexpr uint64_t kInitSalt = 0x7E1717A11CE5ull;     // initial weights
constexpr uint64_t kAugmentSalt = 0xA06E3E17A5A5ull;  // augmentation draws
constexpr double kPi = 3.14159265358979323846;
constexpr char kStateMagic[8] = {'V', 'L', 'T', 'R', 'A', 'I', 'N', '1'};

// Counter-based draws: value k of stream `key`.
uint64_t draw(uint64_t key, uint64_t k) { return splitmix64(key + k * 0x9E3779B97F4A7C15ull); }
int draw_below(uint64_t key, uint64_t k, int n) { return int(draw(key, k) % uint64_t(n)); }
int draw_range(uint64_t key, uint64_t k, int lo, int hi) { return lo + draw_below(key, k, hi - lo + 1); }


// Threads one gradient evaluation really uses: never more than its shards (see the header).
int effective_threads(int threads) { return std::max(1, std::min(usable_threads(threads), train_shards)); }

// dst += src, tensor by tensor (both with the shapes of params_zeros(c)).
void add_params(Params& dst, Params& src, const Config& c) {
  std::vector<ParamRef> d = param_list(dst, c), s = param_list(src, c);
  for (size_t k = 0; k < d.size(); ++k)
    for (size_t i = 0; i < d[k].size; ++i) d[k].data[i] += s[k].data[i];
}

void zero_params(Params& p, const Config& c) {
  for (const ParamRef& r : param_list(p, c)) std::fill(r.data, r.data + r.size, 0.0f);
}

// Gradient workspace reused across steps: one accumulator per shard.
struct GradWorkspace {
  std::vector<Params> shard;  // (train_shards) each with the shapes of params_zeros
  std::vector<BatchStats> stats;  // (train_shards)
};

// bce_gradient with a caller-owned workspace.
BatchStats bce_gradient_ws(Params& grad, GradWorkspace& ws, const Model& m, int batch, const SampleFn& sample,
                           int threads) {
  const Config& c = m.config;
  if (batch < 1) throw Error(ErrorCode::bad_argument, "the batch needs at least one scene");
  const int shards = std::min(train_shards, batch);
  if (int(ws.shard.size()) != shards) ws.shard.assign(size_t(shards), params_zeros(c));
  ws.stats.assign(size_t(shards), BatchStats{});
  threads = std::min(effective_threads(threads), shards);
  const float inv_batch = 1.0f / float(batch);

  run_workers(threads, [&](int t) {
    Trace tr;
    Grads g;
    Image x;         // (3, H, W) normalised scene
    Vec y, dlogits;  // (classes) target, ∂loss/∂logits
    for (int s = t; s < shards; s += threads) {
      Params& acc = ws.shard[size_t(s)];
      BatchStats& st = ws.stats[size_t(s)];
      zero_params(acc, c);
      const int lo = int(int64_t(batch) * s / shards), hi = int(int64_t(batch) * (s + 1) / shards);
      for (int i = lo; i < hi; ++i) {
        sample(i, x, y);
        vit_forward(tr, m, x);
        const Vec& z = tr.logits;  // (classes)
        dlogits.resize(z.size());
        bool exact = true;
        for (Eigen::Index k = 0; k < z.size(); ++k) {
          // BCE(σ(z), y) = max(z, 0) − z·y + log(1 + e^−|z|);  ∂/∂z = σ(z) − y
          const double zk = z[k], yk = y[k];
          st.loss_sum += std::max(zk, 0.0) - zk * yk + std::log1p(std::exp(-std::fabs(zk)));
          const float p = 1.0f / (1.0f + std::exp(-z[k]));
          dlogits[k] = (p - y[k]) * inv_batch;
          exact = exact && ((p > 0.5f) == (y[k] > 0.5f));
        }
        st.exact += exact ? 1 : 0;
        st.count += 1;
        vit_backward(g, &acc, m, tr, dlogits);
      }
    }
  });

  BatchStats total;
  grad = ws.shard[0];
  for (int s = 1; s < shards; ++s) add_params(grad, ws.shard[size_t(s)], c);
  for (const BatchStats& st : ws.stats) {
    total.loss_sum += st.loss_sum;
    total.exact += st.exact;
    total.count += st.count;
  }
  return total;
}

// FNV-1a 64 over bytes: the checkpoint state's checksum.
uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

// The options a resumed run must share with its checkpoint (threads, logging, evaluation and
// checkpoint intervals, stop_at and out_dir may change; steps and decay are checked through
// the learning rates of the steps taken, in load_checkpoint).
json options_fingerprint(const TrainOptions& o) {
  const Config& c = o.model;
  const Augment& a = o.augment;
  const SceneOptions& s = o.scenes;
  return json{
      {"model", {c.image_h, c.image_w, c.channels, c.patch, c.dim, c.depth, c.heads, c.mlp_dim, double(c.ln_eps)}},
      {"batch", o.batch},
      {"lr", double(o.lr)},
      {"min_lr_ratio", double(o.min_lr_ratio)},
      {"warmup", o.warmup},
      {"grad_clip", double(o.grad_clip)},
      {"adamw", {double(o.adamw.beta1), double(o.adamw.beta2), double(o.adamw.eps), double(o.adamw.weight_decay)}},
      {"augment", {a.flip, a.shift, a.brightness, a.contrast_percent, a.channel_gain_percent, a.channel_shuffle}},
      {"scenes", {s.size, s.min_item, s.max_item, s.two_items_permille, s.alpha_gain_percent, s.mask_alpha,
                  s.min_visible_permille, s.flip}},
      {"seed", o.seed},
      {"norm_samples", o.norm_samples},
      {"shards", train_shards},
  };
}

void write_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(ErrorCode::io, "cannot write " + tmp + ": check that the directory is writable");
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!f) throw Error(ErrorCode::io, "writing " + tmp + " failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::io, "cannot rename " + tmp + " to " + path + ": " + ec.message());
}

void check_train_options(const TrainOptions& o) {
  validate_scene_options(o.scenes);
  const Config& c = o.model;
  if (c.image_h != o.scenes.size || c.image_w != o.scenes.size || c.channels != 3)
    throw Error(ErrorCode::bad_argument, "the model input must be 3 × " + std::to_string(o.scenes.size) + " × " +
                                             std::to_string(o.scenes.size) + " (the scene size)");
  if (o.steps < 1) throw Error(ErrorCode::bad_argument, "training needs at least one step");
  if (o.batch < 1 || o.batch > 4096) throw Error(ErrorCode::bad_argument, "--batch must be in 1…4096");
  if (!(o.lr > 0.0f) || !std::isfinite(o.lr)) throw Error(ErrorCode::bad_argument, "--lr must be positive");
  if (o.warmup < 0) throw Error(ErrorCode::bad_argument, "--warmup must be ≥ 0");
  if (o.decay < 0) throw Error(ErrorCode::bad_argument, "--decay must be ≥ 0");
  if (!(o.adamw.weight_decay >= 0.0f)) throw Error(ErrorCode::bad_argument, "--wd must be ≥ 0");
  if (o.norm_samples < 1) throw Error(ErrorCode::bad_argument, "the normalisation needs at least one scene");
  if (o.augment.shift < 0 || o.augment.shift > o.scenes.size / 4 || o.augment.brightness < 0 ||
      o.augment.brightness > 128 || o.augment.contrast_percent < 0 || o.augment.contrast_percent > 90 ||
      o.augment.channel_gain_percent < 0 || o.augment.channel_gain_percent > 90)
    throw Error(ErrorCode::bad_argument, "augmentation settings out of range");
}

}  // namespace

bool decays_weight(const std::string& name) {
  const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
  return weight && name.find("norm") == std::string::npos;
}

float lr_at(const TrainOptions& o, int64_t t) {
  if (t < o.warmup) return o.lr * float(t + 1) / float(o.warmup);
  const int64_t start = o.decay > 0 ? std::max<int64_t>(o.warmup, o.steps - o.decay) : o.warmup;
  if (t < start) return o.lr;
  const int64_t span = std::max<int64_t>(1, o.steps - start - 1);
  const double progress = std::min(1.0, double(t - start) / double(span));
  const double lo = double(o.lr) * double(o.min_lr_ratio);
  return float(lo + 0.5 * (double(o.lr) - lo) * (1.0 + std::cos(kPi * progress)));
}

Model train_init_model(const TrainOptions& o, const std::vector<float>& mean, const std::vector<float>& std) {
  Model m;
  m.config = o.model;
  Config& c = m.config;
  c.classes = fashion_classes;
  c.output = OutputKind::sigmoid;
  c.mean = mean;
  c.std = std;
  c.class_names.clear();
  for (const char* name : fashion_class_names()) c.class_names.push_back(name);
  validate_config(c);
  m.params = params_zeros(c);
  m.provenance = "vitlens train, seed " + std::to_string(o.seed);
  const std::vector<ParamRef> refs = param_list(m.params, c);
  const uint64_t key = splitmix64(o.seed ^ kInitSalt);
  const double a = 0.02 * std::sqrt(3.0);  // uniform with std 0.02, as timm's trunc_normal(0.02)
  for (size_t k = 0; k < refs.size(); ++k) {
    const ParamRef& r = refs[k];
    const bool norm = r.name.find("norm") != std::string::npos;
    const bool bias = r.name.size() > 5 && r.name.compare(r.name.size() - 5, 5, ".bias") == 0;
    for (size_t i = 0; i < r.size; ++i) {
      float v;
      if (norm) {
        v = bias ? 0.0f : 1.0f;
      } else if (r.name == "head.bias") {
        v = -std::log(9.0f);
      } else if (bias) {
        v = 0.0f;
      } else {
        const double u = double(draw(key, (uint64_t(k) << 40) + i) >> 40) * (1.0 / 16777216.0);
        v = float(a * (2.0 * u - 1.0));
      }
      r.data[i] = v;
    }
  }
  return m;
}

void scene_channel_stats(std::vector<float>& mean, std::vector<float>& std, const FashionMnist& src,
                         const SceneOptions& opt, uint64_t seed, int n) {
  std::array<int64_t, 3> sum{}, sum2{};
  int64_t count = 0;
  for (int i = 0; i < n; ++i) {
    const Scene sc = make_scene(src, opt, seed, uint64_t(i));
    const std::vector<uint8_t>& d = sc.pixels.data;  // (size, size, 3)
    for (size_t p = 0; p < d.size(); p += 3)
      for (int ch = 0; ch < 3; ++ch) {
        sum[size_t(ch)] += d[p + size_t(ch)];
        sum2[size_t(ch)] += int64_t(d[p + size_t(ch)]) * d[p + size_t(ch)];
      }
    count += int64_t(d.size() / 3);
  }
  mean.assign(3, 0.0f);
  std.assign(3, 0.0f);
  for (size_t ch = 0; ch < 3; ++ch) {
    const double mu = double(sum[ch]) / double(count);
    const double var = double(sum2[ch]) / double(count) - mu * mu;
    mean[ch] = float(mu / 255.0);
    std[ch] = float(std::sqrt(std::max(var, 1.0)) / 255.0);
  }
}

void augment_pixels(Pixels& px, const Augment& aug, uint64_t seed, uint64_t index) {
  assert(px.channels == 3);
  const uint64_t key = splitmix64(splitmix64(seed ^ kAugmentSalt) + index);
  const int w = px.w, h = px.h;
  const bool flip = aug.flip && draw_below(key, 0, 2) == 1;
  const int dx = aug.shift ? draw_range(key, 1, -aug.shift, aug.shift) : 0;
  const int dy = aug.shift ? draw_range(key, 2, -aug.shift, aug.shift) : 0;
  const int bright = aug.brightness ? draw_range(key, 3, -aug.brightness, aug.brightness) : 0;
  const int contrast = 100 + (aug.contrast_percent ? draw_range(key, 4, -aug.contrast_percent, aug.contrast_percent) : 0);
  std::array<int, 3> gain{};  // percent per output channel
  for (int ch = 0; ch < 3; ++ch)
    gain[size_t(ch)] = 100 + (aug.channel_gain_percent
                                  ? draw_range(key, 5 + uint64_t(ch), -aug.channel_gain_percent, aug.channel_gain_percent)
                                  : 0);
  static constexpr int kPerms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const int* perm = kPerms[0];
  if (aug.channel_shuffle && draw_below(key, 8, 2) == 1) perm = kPerms[1 + draw_below(key, 9, 5)];

  const std::vector<uint8_t> src = px.data;  // (h, w, 3)
  for (int y = 0; y < h; ++y) {
    const int sy = std::min(h - 1, std::max(0, y - dy));
    for (int x = 0; x < w; ++x) {
      int sx = std::min(w - 1, std::max(0, x - dx));
      if (flip) sx = w - 1 - sx;
      const uint8_t* in = &src[(size_t(sy) * size_t(w) + size_t(sx)) * 3];
      uint8_t* out = &px.data[(size_t(y) * size_t(w) + size_t(x)) * 3];
      for (int ch = 0; ch < 3; ++ch) {
        const int v = in[perm[ch]];
        const int c = (v - 128) * contrast / 100 + 128 + bright;
        out[ch] = clamp_u8(c * gain[size_t(ch)] / 100);
      }
    }
  }
}

BatchStats bce_gradient(Params& grad, const Model& m, int batch, const SampleFn& sample, int threads) {
  GradWorkspace ws;
  return bce_gradient_ws(grad, ws, m, batch, sample, threads);
}

void adamw_step(Params& p, Params& m, Params& v, Params& g, const Config& cfg, const AdamW& hp, float lr,
                int64_t t) {
  assert(t >= 1);
  const std::vector<ParamRef> P = param_list(p, cfg), M = param_list(m, cfg), V = param_list(v, cfg),
                              G = param_list(g, cfg);
  const float b1 = hp.beta1, b2 = hp.beta2;
  const float bc1 = float(1.0 - std::pow(double(b1), double(t)));
  const float bc2 = float(1.0 - std::pow(double(b2), double(t)));
  const float decay = 1.0f - lr * hp.weight_decay;
  for (size_t k = 0; k < P.size(); ++k) {
    const bool decays = decays_weight(P[k].name);
    float *pp = P[k].data, *mm = M[k].data, *vv = V[k].data;
    const float* gg = G[k].data;
    for (size_t i = 0; i < P[k].size; ++i) {
      mm[i] = b1 * mm[i] + (1.0f - b1) * gg[i];
      vv[i] = b2 * vv[i] + (1.0f - b2) * gg[i] * gg[i];
      const float mhat = mm[i] / bc1, vhat = vv[i] / bc2;
      if (decays) pp[i] *= decay;
      pp[i] -= lr * mhat / (std::sqrt(vhat) + hp.eps);
    }
  }
}

double clip_grad_norm(Params& g, const Config& cfg, float max_norm) {
  const std::vector<ParamRef> G = param_list(g, cfg);
  double sq = 0.0;
  for (const ParamRef& r : G)
    for (size_t i = 0; i < r.size; ++i) sq += double(r.data[i]) * double(r.data[i]);
  const double norm = std::sqrt(sq);
  if (max_norm > 0.0f && norm > double(max_norm)) {
    const float scale = float(double(max_norm) / (norm + 1e-6));
    for (const ParamRef& r : G)
      for (size_t i = 0; i < r.size; ++i) r.data[i] *= scale;
  }
  return norm;
}

void save_checkpoint(const std::string& out_dir, const TrainState& s, const TrainOptions& opt) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error(ErrorCode::io, "cannot create " + out_dir + ": " + ec.message());
  Params m = s.m, v = s.v;
  Config cfg = s.model.config;
  const std::vector<ParamRef> M = param_list(m, cfg), V = param_list(v, cfg);
  size_t floats = 0;
  for (const ParamRef& r : M) floats += r.size;
  const std::string header = json{{"step", s.step},
                                   {"steps", opt.steps},
                                   {"decay", opt.decay},
                                   {"floats", floats},
                                   {"options", options_fingerprint(opt)}}
                                 .dump();

  // magic (8) | header length u64 | header JSON | m floats | v floats | FNV-1a 64 of all before
  std::vector<uint8_t> out(kStateMagic, kStateMagic + 8);
  const uint64_t hl = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(hl >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const std::vector<ParamRef>* set : {&M, &V})
    for (const ParamRef& r : *set) {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(r.data);
      out.insert(out.end(), b, b + r.size * 4);  // little-endian hosts only (x86, wasm)
    }
  const uint64_t sum = fnv1a64(out.data(), out.size());
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(sum >> (8 * i)));
  write_atomically(out_dir + "/checkpoint.vitl", save_model(s.model, Storage::f32));
  write_atomically(out_dir + "/checkpoint.state", out);
}

TrainState load_checkpoint(const std::string& out_dir, const TrainOptions& opt) {
  TrainState s;
  s.model = load_model_file(out_dir + "/checkpoint.vitl");
  std::ifstream f(out_dir + "/checkpoint.state", std::ios::binary);
  if (!f) throw Error(ErrorCode::io, "cannot open " + out_dir + "/checkpoint.state");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string name = out_dir + "/checkpoint.state";
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kStateMagic, 8) != 0)
    throw Error(ErrorCode::bad_format, name + " is not a vitlens training state");
  uint64_t sum = 0, hl = 0;
  for (int i = 0; i < 8; ++i) sum |= uint64_t(bytes[bytes.size() - 8 + size_t(i)]) << (8 * i);
  if (fnv1a64(bytes.data(), bytes.size() - 8) != sum)
    throw Error(ErrorCode::bad_value, name + " is damaged (checksum): start again without --resume");
  for (int i = 0; i < 8; ++i) hl |= uint64_t(bytes[8 + size_t(i)]) << (8 * i);
  if (hl > bytes.size() - 24) throw Error(ErrorCode::truncated, name + " is truncated");
  json h;
  try {
    h = json::parse(bytes.begin() + 16, bytes.begin() + 16 + std::ptrdiff_t(hl));
  } catch (const json::exception&) {
    throw Error(ErrorCode::bad_format, name + ": the header is not JSON");
  }
  if (h.value("options", json()) != json::parse(options_fingerprint(opt).dump()))
    throw Error(ErrorCode::bad_argument, "the options differ from the checkpoint's in " + out_dir +
                                             ": resume with the same architecture, data, schedule and "
                                             "optimiser settings, or use a new --out");
  s.step = h.value("step", int64_t(-1));
  TrainOptions before = opt;
  before.steps = h.value("steps", int64_t(0));
  before.decay = h.value("decay", int64_t(0));
  for (int64_t t = 0; t < s.step; ++t)
    if (lr_at(before, t) != lr_at(opt, t))
      throw Error(ErrorCode::bad_argument, "--steps / --decay change the learning rate of step " + std::to_string(t) +
                                               ", which the checkpoint in " + out_dir +
                                               " has already taken: keep them, or use a new --out");
  Config cfg = s.model.config;
  s.m = params_zeros(cfg);
  s.v = params_zeros(cfg);
  const std::vector<ParamRef> M = param_list(s.m, cfg), V = param_list(s.v, cfg);
  size_t floats = 0;
  for (const ParamRef& r : M) floats += r.size;
  if (h.value("floats", size_t(0)) != floats || bytes.size() != 24 + hl + floats * 8 || s.step < 0)
    throw Error(ErrorCode::bad_format, name + " does not match " + out_dir + "/checkpoint.vitl");
  size_t at = 16 + size_t(hl);
  for (const std::vector<ParamRef>* set : {&M, &V})
    for (const ParamRef& r : *set) {
      std::memcpy(r.data, bytes.data() + at, r.size * 4);
      at += r.size * 4;
    }
  return s;
}

TrainState train(const TrainOptions& opt, const FashionMnist& train_split, const FashionMnist* val_split,
                 const TrainCallback& on_progress) {
  check_train_options(opt);
  if (!train_split.train) throw Error(ErrorCode::bad_argument, "training needs the train split");
  if (val_split && val_split->train) throw Error(ErrorCode::bad_argument, "validation needs the test split");
  TrainState s;
  const bool have_ckpt = !opt.out_dir.empty() && std::filesystem::exists(opt.out_dir + "/checkpoint.state");
  if (opt.resume && have_ckpt) {
    s = load_checkpoint(opt.out_dir, opt);
  } else {
    std::vector<float> mean, std;
    scene_channel_stats(mean, std, train_split, opt.scenes, opt.seed, opt.norm_samples);
    s.model = train_init_model(opt, mean, std);
    s.m = params_zeros(s.model.config);
    s.v = params_zeros(s.model.config);
  }
  const Config& cfg = s.model.config;
  const int64_t end = opt.stop_at >= 0 ? std::min(opt.stop_at, opt.steps) : opt.steps;

  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  auto t_report = t_start;
  const int64_t first_step = s.step;
  int64_t report_from = s.step;
  BatchStats window;
  GradWorkspace ws;
  Params grad = params_zeros(cfg);
  float lr = 0.0f;

  while (s.step < end) {
    const int64_t t = s.step;
    const SampleFn sample = [&](int i, Image& x, Vec& y) {
      const uint64_t index = uint64_t(t) * uint64_t(opt.batch) + uint64_t(i);
      Scene sc = make_scene(train_split, opt.scenes, opt.seed, index);
      augment_pixels(sc.pixels, opt.augment, opt.seed, index);
      x = scene_input(sc.pixels, cfg);
      y.resize(fashion_classes);
      for (int k = 0; k < fashion_classes; ++k) y[k] = sc.target[size_t(k)];
    };
    const BatchStats st = bce_gradient_ws(grad, ws, s.model, opt.batch, sample, opt.threads);
    clip_grad_norm(grad, cfg, opt.grad_clip);
    lr = lr_at(opt, t);
    adamw_step(s.model.params, s.m, s.v, grad, cfg, opt.adamw, lr, t + 1);
    s.step = t + 1;
    window.loss_sum += st.loss_sum;
    window.exact += st.exact;
    window.count += st.count;

    const bool last = s.step == end;
    const bool log_due = last || (opt.log_every > 0 && s.step % opt.log_every == 0);
    const bool eval_due = val_split && opt.eval_every > 0 && (s.step % opt.eval_every == 0 || last);
    const bool ckpt_due = !opt.out_dir.empty() && (last || (opt.checkpoint_every > 0 && s.step % opt.checkpoint_every == 0));
    if (ckpt_due) save_checkpoint(opt.out_dir, s, opt);
    if (!(log_due || eval_due) || !on_progress) continue;

    const auto now = clock::now();
    TrainProgress p;
    p.step = s.step;
    p.steps = opt.steps;
    p.loss = window.count ? window.loss_sum / window.count : 0.0;
    p.exact_acc = window.count ? double(window.exact) / window.count : 0.0;
    p.lr = lr;
    const double window_s = std::chrono::duration<double>(now - t_report).count();
    p.scenes_per_s = window_s > 0 ? double(s.step - report_from) * opt.batch / window_s : 0.0;
    p.elapsed_s = std::chrono::duration<double>(now - t_start).count();
    const double per_step = p.elapsed_s / double(std::max<int64_t>(1, s.step - first_step));
    p.eta_s = per_step * double(end - s.step);
    p.checkpointed = ckpt_due;
    if (eval_due) {
      SceneOptions eval_opt = opt.scenes;
      const SceneEvalReport r = evaluate_scenes(s.model, *val_split, eval_opt, opt.eval_seed, opt.eval_scenes, opt.threads);
      p.has_eval = true;
      p.val_map = r.map;
      p.val_exact = r.exact_acc;
      p.val_single_top1 = r.single_top1;
    }
    on_progress(p);
    window = BatchStats{};
    report_from = s.step;
    t_report = clock::now();
  }
  return s;
}

}  // namespace vitlens
