// scenes.cpp — reading Fashion-MNIST and composing it into RGB scenes with per-item masks.
//
// The .gz files are read without zlib: the gzip member header (RFC 1952) is parsed here and the
// raw deflate stream is inflated by stb_image's zlib decoder (its implementation is compiled in
// io/stb_impl.cpp); the CRC-32 and length in the gzip trailer are checked.
//
// Scenes are rendered with integer arithmetic only and a PRNG of our own (xoshiro256**, seeded
// by splitmix64 from seed and index), so a scene's bytes do not depend on the compiler, the C++
// library, FMA contraction or the platform. The recipe (all numbers) is in make_scene.
#include "vitlens/data/scenes.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

constexpr int64_t max_gz_bytes = 64ll << 20;   // the train images are 26 MB compressed
constexpr int64_t max_idx_bytes = 64ll << 20;  // and 47 MB inflated
constexpr int max_idx_count = 1'000'000;

// ---------------------------------------------------------------------------------------------
// gzip

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Inflates the first member of a gzip file. `name` is only used in messages.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& gz, const std::string& name) {
  const size_t n = gz.size();
  auto need = [&](size_t pos, size_t len, const char* what) {
    if (pos + len > n)
      throw Error(ErrorCode::truncated, name + ": gzip file ends inside its " + what);
  };
  need(0, 10, "header");
  if (gz[0] != 0x1f || gz[1] != 0x8b)
    throw Error(ErrorCode::bad_format, name + ": not a gzip file (bad magic bytes)");
  if (gz[2] != 8)
    throw Error(ErrorCode::bad_format, name + ": gzip compression method is not deflate");
  const uint8_t flags = gz[3];
  enum : uint8_t { FHCRC = 2, FEXTRA = 4, FNAME = 8, FCOMMENT = 16, FRESERVED = 0xE0 };
  if (flags & FRESERVED) throw Error(ErrorCode::bad_format, name + ": reserved gzip flags are set");
  size_t pos = 10;
  if (flags & FEXTRA) {
    need(pos, 2, "extra field");
    const size_t xlen = size_t(gz[pos]) | size_t(gz[pos + 1]) << 8;
    need(pos + 2, xlen, "extra field");
    pos += 2 + xlen;
  }
  for (uint8_t zero_terminated : {FNAME, FCOMMENT}) {
    if (!(flags & zero_terminated)) continue;
    while (pos < n && gz[pos] != 0) pos++;
    need(pos, 1, zero_terminated == FNAME ? "file name" : "comment");
    pos++;
  }
  if (flags & FHCRC) {
    need(pos, 2, "header CRC");
    if ((crc32(gz.data(), pos) & 0xFFFF) != (uint32_t(gz[pos]) | uint32_t(gz[pos + 1]) << 8))
      throw Error(ErrorCode::bad_format, name + ": gzip header CRC does not match");
    pos += 2;
  }
  need(pos, 8, "deflate stream and trailer");
  const uint32_t crc_expected = le32(&gz[n - 8]);
  const uint32_t isize = le32(&gz[n - 4]);  // inflated length mod 2^32
  if (int64_t(isize) > max_idx_bytes)
    throw Error(ErrorCode::limit, name + ": inflated size " + std::to_string(isize) +
                                      " bytes is beyond the limit for a Fashion-MNIST file");
  // The 8-byte trailer is handed to the decoder too: stb_image's Huffman decoder refuses to decode
  // a symbol once fewer than 16 bits remain at the end of its input (it expects PNG's Adler-32
  // after the stream), so a stream cut exactly at its end fails on its last code. The decoder
  // stops at the final block and never reads the trailer as data.
  const size_t deflate_len = n - pos;
  if (deflate_len > size_t(INT_MAX))
    throw Error(ErrorCode::limit, name + ": compressed stream too large");
  // The buffer decoder refuses to write past isize bytes, so a hostile stream cannot make us
  // allocate more than the trailer announces (the malloc variant would grow without bound).
  std::vector<uint8_t> out(std::max<uint32_t>(isize, 1));
  const int got = stbi_zlib_decode_noheader_buffer(reinterpret_cast<char*>(out.data()), int(isize),
                                                   reinterpret_cast<const char*>(gz.data() + pos),
                                                   int(deflate_len));
  if (got < 0)
    throw Error(ErrorCode::bad_format, name + ": the deflate stream is corrupt (or longer than "
                                              "the length in the gzip trailer)");
  if (uint32_t(got) != isize)
    throw Error(ErrorCode::truncated, name + ": inflated " + std::to_string(got) +
                                          " bytes, the gzip trailer announces " + std::to_string(isize));
  out.resize(isize);
  if (crc32(out.data(), out.size()) != crc_expected)
    throw Error(ErrorCode::bad_format, name + ": CRC-32 of the inflated data does not match the gzip trailer");
  return out;
}

std::vector<uint8_t> read_gz(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw Error(ErrorCode::io, "Fashion-MNIST file not found: " + path +
                                   " (install the Debian package dataset-fashion-mnist, or point "
                                   "to the directory holding its *-ubyte.gz files)");
  return gunzip(read_file(path, max_gz_bytes), path);
}

// ---------------------------------------------------------------------------------------------
// PRNG: xoshiro256** (Blackman & Vigna 2018), state filled by splitmix64.

// The generator's step: splitmix64 (model.h) of the state, which then advances by its constant.
uint64_t splitmix64_next(uint64_t& x) {
  const uint64_t z = splitmix64(x);
  x += 0x9E3779B97F4A7C15ull;
  return z;
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

class Rng {
 public:
  Rng(uint64_t seed, uint64_t index) {
    uint64_t x = seed;
    uint64_t h = splitmix64_next(x);
    x = h ^ index;
    h = splitmix64_next(x);
    x = h;
    for (uint64_t& w : s_) w = splitmix64_next(x);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n) by the multiply-shift map of the top 32 bits (bias < n / 2^32).
  int below(int n) { return int(((next() >> 32) * uint64_t(n)) >> 32); }
  // Uniform in [lo, hi], inclusive.
  int range(int lo, int hi) { return lo + below(hi - lo + 1); }

 private:
  uint64_t s_[4];
};

// ---------------------------------------------------------------------------------------------
// Drawing on a (size, size, 3) canvas

using Rgb = std::array<uint8_t, 3>;

Rgb random_colour(Rng& rng) {
  return {uint8_t(rng.below(256)), uint8_t(rng.below(256)), uint8_t(rng.below(256))};
}


// Over-operator with 8-bit alpha: (p·(255 − a) + c·a) / 255, rounded.
void blend(uint8_t* p, const Rgb& c, int a) {
  for (int k = 0; k < 3; k++) p[k] = uint8_t((p[k] * (255 - a) + c[k] * a + 127) / 255);
}

// ITU-R BT.601 luma × 1000 (0…255000): lightness contrast is what makes a silhouette readable.
int luma1000(const uint8_t* p) { return 299 * p[0] + 587 * p[1] + 114 * p[2]; }

void fill_uniform(Pixels& img, Rng& rng) {
  const Rgb c = random_colour(rng);
  for (size_t i = 0; i < img.data.size(); i += 3)
    for (int k = 0; k < 3; k++) img.data[i + k] = c[k];
}

// A linear ramp between two random colours along a random direction (dx, dy) ∈ [-8, 8]².
void fill_gradient(Pixels& img, Rng& rng) {
  const Rgb c0 = random_colour(rng), c1 = random_colour(rng);
  int dx = 0, dy = 0;
  while (dx == 0 && dy == 0) {
    dx = rng.range(-8, 8);
    dy = rng.range(-8, 8);
  }
  const int m = img.w - 1;
  const int pmin = std::min(0, dx * m) + std::min(0, dy * m);
  const int span = std::max(1, std::abs(dx) * m + std::abs(dy) * m);
  for (int y = 0; y < img.h; y++)
    for (int x = 0; x < img.w; x++) {
      const int t = (dx * x + dy * y - pmin) * 256 / span;  // 0…256
      uint8_t* p = &img.data[(size_t(y) * img.w + x) * 3];
      for (int k = 0; k < 3; k++) p[k] = uint8_t(c0[k] + (c1[k] - c0[k]) * t / 256);
    }
}

// A base colour, plus a coarse grid (2…5 cells a side) of per-channel offsets in [-60, 60]
// interpolated bilinearly, plus per-pixel per-channel noise in [-24, 24].
void fill_noise(Pixels& img, Rng& rng) {
  const Rgb base = random_colour(rng);
  const int cells = rng.range(2, 5);
  const int nodes = cells + 1;
  std::vector<int> off(size_t(nodes) * nodes * 3);  // (nodes, nodes, 3)
  for (int& o : off) o = rng.range(-60, 60);
  const int m = std::max(1, img.w - 1);
  for (int y = 0; y < img.h; y++) {
    const int v = y * cells * 256 / m;
    const int gy = std::min(v / 256, cells - 1), fy = v - gy * 256;
    for (int x = 0; x < img.w; x++) {
      const int u = x * cells * 256 / m;
      const int gx = std::min(u / 256, cells - 1), fx = u - gx * 256;
      uint8_t* p = &img.data[(size_t(y) * img.w + x) * 3];
      for (int k = 0; k < 3; k++) {
        auto node = [&](int iy, int ix) { return off[(size_t(iy) * nodes + ix) * 3 + k]; };
        const int smooth = ((256 - fx) * (256 - fy) * node(gy, gx) + fx * (256 - fy) * node(gy, gx + 1) +
                            (256 - fx) * fy * node(gy + 1, gx) + fx * fy * node(gy + 1, gx + 1)) /
                           65536;
        p[k] = clamp_u8(base[k] + smooth + rng.range(-24, 24));
      }
    }
  }
}

// A uniform or gradient base, then 4…9 opaque-ish shapes that are not items: filled rectangles
// (sides 3…14), ellipses (radii 2…7) and strokes (length 8…30, 1 or 3 px wide), colours random,
// alpha 160…255.
void fill_clutter(Pixels& img, Rng& rng) {
  if (rng.below(2)) fill_gradient(img, rng);
  else fill_uniform(img, rng);
  const int n = img.w;
  const int shapes = rng.range(4, 9);
  for (int s = 0; s < shapes; s++) {
    const int kind = rng.below(3);
    const Rgb c = random_colour(rng);
    const int a = rng.range(160, 255);
    if (kind == 0) {
      const int w = rng.range(3, 14), h = rng.range(3, 14);
      const int x0 = rng.range(-2, n - w + 2), y0 = rng.range(-2, n - h + 2);
      for (int y = std::max(0, y0); y < std::min(n, y0 + h); y++)
        for (int x = std::max(0, x0); x < std::min(n, x0 + w); x++) blend(&img.data[(size_t(y) * n + x) * 3], c, a);
    } else if (kind == 1) {
      const int cx = rng.below(n), cy = rng.below(n), rx = rng.range(2, 7), ry = rng.range(2, 7);
      for (int y = std::max(0, cy - ry); y <= std::min(n - 1, cy + ry); y++)
        for (int x = std::max(0, cx - rx); x <= std::min(n - 1, cx + rx); x++) {
          const int dx = x - cx, dy = y - cy;
          if (dx * dx * ry * ry + dy * dy * rx * rx <= rx * rx * ry * ry) blend(&img.data[(size_t(y) * n + x) * 3], c, a);
        }
    } else {
      const int ax = rng.below(n), ay = rng.below(n);
      int vx = 0, vy = 0;
      while (vx * vx + vy * vy < 64 || vx * vx + vy * vy > 900) {
        vx = rng.range(-30, 30);
        vy = rng.range(-30, 30);
      }
      const int half = rng.below(2);  // half-width beyond the centre pixel: 1 or 3 px strokes
      const int64_t len2 = vx * vx + vy * vy;
      for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
          const int px = x - ax, py = y - ay;
          const int64_t t = int64_t(px) * vx + int64_t(py) * vy;
          int64_t d2x4;  // 4·d²·len2, d the distance to the segment (cross² = d²·len2 beside it)
          if (t <= 0) d2x4 = 4 * (int64_t(px) * px + int64_t(py) * py) * len2;
          else if (t >= len2) d2x4 = 4 * (int64_t(px - vx) * (px - vx) + int64_t(py - vy) * (py - vy)) * len2;
          else {
            const int64_t cross = int64_t(px) * vy - int64_t(py) * vx;
            d2x4 = 4 * cross * cross;
          }
          // distance ≤ half + 0.5  ⇔  4·d² ≤ (2·half + 1)²
          if (d2x4 <= int64_t(2 * half + 1) * (2 * half + 1) * len2) blend(&img.data[(size_t(y) * n + x) * 3], c, a);
        }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST

const std::array<const char*, fashion_classes>& fashion_class_names() {
  static const std::array<const char*, fashion_classes> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

FashionMnist load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  const std::vector<uint8_t> images = read_gz(images_path);
  const std::vector<uint8_t> labels = read_gz(labels_path);

  if (images.size() < 16 || be32(&images[0]) != 0x803)
    throw Error(ErrorCode::bad_format, images_path + ": not an IDX image file (magic 0x00000803 expected)");
  if (labels.size() < 8 || be32(&labels[0]) != 0x801)
    throw Error(ErrorCode::bad_format, labels_path + ": not an IDX label file (magic 0x00000801 expected)");
  const uint32_t n_images = be32(&images[4]), rows = be32(&images[8]), cols = be32(&images[12]);
  const uint32_t n_labels = be32(&labels[4]);
  if (rows != fashion_side || cols != fashion_side)
    throw Error(ErrorCode::bad_shape, images_path + ": images are " + std::to_string(rows) + "×" +
                                          std::to_string(cols) + ", Fashion-MNIST's are 28×28");
  if (n_images == 0 || n_images > uint32_t(max_idx_count))
    throw Error(ErrorCode::limit, images_path + ": image count " + std::to_string(n_images) + " out of range");
  if (n_images != n_labels)
    throw Error(ErrorCode::bad_format, "Fashion-MNIST: " + std::to_string(n_images) + " images but " +
                                           std::to_string(n_labels) + " labels in " + prefix + "-*");
  const size_t pixels = size_t(n_images) * fashion_side * fashion_side;
  if (images.size() != 16 + pixels)
    throw Error(images.size() < 16 + pixels ? ErrorCode::truncated : ErrorCode::bad_format,
                images_path + ": " + std::to_string(images.size()) + " bytes, the header announces " +
                    std::to_string(16 + pixels));
  if (labels.size() != 8 + size_t(n_labels))
    throw Error(labels.size() < 8 + size_t(n_labels) ? ErrorCode::truncated : ErrorCode::bad_format,
                labels_path + ": " + std::to_string(labels.size()) + " bytes, the header announces " +
                    std::to_string(8 + size_t(n_labels)));

  FashionMnist ds;
  ds.train = train;
  ds.count = int(n_images);
  ds.images.assign(images.begin() + 16, images.end());
  ds.labels.assign(labels.begin() + 8, labels.end());
  for (size_t i = 0; i < ds.labels.size(); i++)
    if (ds.labels[i] >= fashion_classes)
      throw Error(ErrorCode::bad_value, labels_path + ": label " + std::to_string(ds.labels[i]) + " at index " +
                                            std::to_string(i) + " is not a class 0…9");
  return ds;
}

// ---------------------------------------------------------------------------------------------
// Scenes

const char* backdrop_name(Backdrop b) {
  switch (b) {
    case Backdrop::uniform: return "uniform";
    case Backdrop::gradient: return "gradient";
    case Backdrop::noise: return "noise";
    case Backdrop::clutter: return "clutter";
  }
  return "unknown";
}

void validate_scene_options(const SceneOptions& opt) {
  auto bad = [](const std::string& what) { throw Error(ErrorCode::bad_argument, "scene options: " + what); };
  if (opt.size < 16 || opt.size > limits::max_image_side)
    bad("size " + std::to_string(opt.size) + " must be in 16…" + std::to_string(limits::max_image_side));
  if (opt.min_item < 8 || opt.min_item > opt.max_item)
    bad("item sizes " + std::to_string(opt.min_item) + "…" + std::to_string(opt.max_item) +
        " must satisfy 8 ≤ min ≤ max");
  if (opt.max_item > opt.size) bad("the largest item (" + std::to_string(opt.max_item) + ") must fit in the scene");
  if (2 * opt.min_item > opt.size)
    bad("two of the smallest items (" + std::to_string(opt.min_item) + ") must fit side by side in the scene");
  if (opt.two_items_permille < 0 || opt.two_items_permille > 1000) bad("two_items_permille must be in 0…1000");
  if (opt.alpha_gain_percent < 50 || opt.alpha_gain_percent > 1000) bad("alpha_gain_percent must be in 50…1000");
  if (opt.mask_alpha < 1 || opt.mask_alpha > 255) bad("mask_alpha must be in 1…255");
  if (opt.min_visible_permille < 0 || opt.min_visible_permille > 1000) bad("min_visible_permille must be in 0…1000");
}

std::vector<uint8_t> item_alpha(const FashionMnist& src, int source_index, int side, bool flip, int gain_percent) {
  if (source_index < 0 || source_index >= src.count || side < 1 || side > limits::max_image_side ||
      src.images.size() != size_t(src.count) * fashion_side * fashion_side)
    throw Error(ErrorCode::bad_argument, "item_alpha: image " + std::to_string(source_index) + " at side " +
                                             std::to_string(side) + " is out of range");
  const int s = fashion_side;
  const uint8_t* img = &src.images[size_t(source_index) * s * s];  // (28, 28)
  // Half-pixel centres: source coordinate u = (x + ½)·28/side − ½, in 1/256 px, clamped to the
  // edge (equal to bilinear with replicated borders).
  std::vector<int> i0(side), i1(side), f(side);  // (side) lower tap, upper tap, weight of upper in 1/256
  for (int x = 0; x < side; x++) {
    const int u = std::max(0, (2 * x + 1) * s * 128 / side - 128);
    i0[x] = std::min(u / 256, s - 1);
    i1[x] = std::min(i0[x] + 1, s - 1);
    f[x] = u - (u / 256) * 256;
  }
  std::vector<uint8_t> out(size_t(side) * side);  // (side, side)
  for (int y = 0; y < side; y++)
    for (int x = 0; x < side; x++) {
      int c0 = i0[x], c1 = i1[x];
      if (flip) {
        c0 = s - 1 - c0;
        c1 = s - 1 - c1;
      }
      const int fx = f[x], fy = f[y];
      const int v = (256 - fx) * (256 - fy) * img[i0[y] * s + c0] + fx * (256 - fy) * img[i0[y] * s + c1] +
                    (256 - fx) * fy * img[i1[y] * s + c0] + fx * fy * img[i1[y] * s + c1];
      out[size_t(y) * side + x] = uint8_t(std::min(255, ((v + 32768) >> 16) * gain_percent / 100));
    }
  return out;
}

namespace {

struct Placement {
  int source_index = 0;
  bool flip = false;
  int x = 0, y = 0, side = 0;
  std::vector<uint8_t> alpha;  // (side, side)
};

// Full masks (alpha ≥ threshold) in scene coordinates, and each item's visible count once the
// later items cover it.
void coverage(const std::vector<Placement>& items, int size, int threshold,
              std::vector<std::vector<uint8_t>>& full, std::vector<int>& full_count,
              std::vector<int>& visible_count) {
  const size_t m = items.size();
  full.assign(m, std::vector<uint8_t>(size_t(size) * size, 0));  // (items, size, size)
  full_count.assign(m, 0);
  visible_count.assign(m, 0);
  for (size_t k = 0; k < m; k++) {
    const Placement& it = items[k];
    for (int y = 0; y < it.side; y++)
      for (int x = 0; x < it.side; x++)
        if (it.alpha[size_t(y) * it.side + x] >= threshold) {
          full[k][size_t(it.y + y) * size + it.x + x] = 1;
          full_count[k]++;
        }
  }
  for (size_t k = 0; k < m; k++)
    for (size_t p = 0; p < full[k].size(); p++) {
      if (!full[k][p]) continue;
      bool covered = false;
      for (size_t j = k + 1; j < m; j++) covered = covered || full[j][p];
      if (!covered) visible_count[k]++;
    }
}

}  // namespace

// The recipe:
//  1. backdrop, each with probability 1/4: uniform colour; linear gradient; coloured noise;
//     clutter (see the fill_* functions above for their numbers);
//  2. two items with probability two_items_permille (default 1/2), else one; item images are
//     drawn uniformly from the split, the second redrawn until its class differs from the first;
//     each mirrored with probability 1/2 (opt.flip);
//  3. each item scaled bilinearly to a side uniform in min_item…max_item (28…44) and placed
//     uniformly fully inside the scene; with two items the sides and positions are redrawn
//     (up to 100 times) until every item keeps ≥ min_visible_permille (60 %) of its mask
//     visible; if that never happens they are put side by side without overlap;
//  4. each item's tint: the first of 16 random colours whose luma differs by ≥ 80 (of 255) from
//     the canvas under 90 % of the item's mask pixels, else the one with the largest such
//     10th-percentile luma difference;
//  5. alpha = min(255, scaled intensity × alpha_gain_percent / 100) (150: solid bodies, faint
//     edges); items are over-blended in drawing order;
//  6. mask = alpha ≥ mask_alpha (51 = 20 %) and not under a later item's mask.
Scene make_scene(const FashionMnist& src, const SceneOptions& opt, uint64_t seed, uint64_t index) {
  validate_scene_options(opt);
  if (src.count <= 0 || src.images.size() != size_t(src.count) * fashion_side * fashion_side ||
      src.labels.size() != size_t(src.count))
    throw Error(ErrorCode::bad_argument, "make_scene: the Fashion-MNIST split is empty or inconsistent");
  const int n = opt.size;
  Rng rng(seed, index);

  Scene sc;
  sc.seed = seed;
  sc.index = index;
  sc.pixels.w = sc.pixels.h = n;
  sc.pixels.channels = 3;
  sc.pixels.data.assign(size_t(n) * n * 3, 0);  // (size, size, 3)
  sc.backdrop = Backdrop(rng.below(4));
  switch (sc.backdrop) {
    case Backdrop::uniform: fill_uniform(sc.pixels, rng); break;
    case Backdrop::gradient: fill_gradient(sc.pixels, rng); break;
    case Backdrop::noise: fill_noise(sc.pixels, rng); break;
    case Backdrop::clutter: fill_clutter(sc.pixels, rng); break;
  }
  if (opt.keep_background) sc.background = sc.pixels;

  const int count = rng.below(1000) < opt.two_items_permille ? 2 : 1;
  std::vector<Placement> items(count);
  items[0].source_index = rng.below(src.count);
  if (count == 2) {
    const int first_class = src.labels[items[0].source_index];
    int tries = 0;
    do {
      if (++tries > 10000)
        throw Error(ErrorCode::bad_argument, "make_scene: the split holds a single class, two-item scenes need two");
      items[1].source_index = rng.below(src.count);
    } while (src.labels[items[1].source_index] == first_class);
  }
  for (Placement& it : items) it.flip = opt.flip && rng.below(2) == 1;

  std::vector<std::vector<uint8_t>> full;
  std::vector<int> full_count, visible_count;
  auto fits = [&]() {
    coverage(items, n, opt.mask_alpha, full, full_count, visible_count);
    for (int k = 0; k < count; k++)
      if (int64_t(visible_count[k]) * 1000 < int64_t(opt.min_visible_permille) * full_count[k]) return false;
    return true;
  };
  bool placed = false;
  for (int attempt = 0; attempt < 100 && !placed; attempt++) {
    for (Placement& it : items) {
      it.side = rng.range(opt.min_item, opt.max_item);
      it.x = rng.range(0, n - it.side);
      it.y = rng.range(0, n - it.side);
      it.alpha = item_alpha(src, it.source_index, it.side, it.flip, opt.alpha_gain_percent);
    }
    placed = fits();
  }
  if (!placed) {
    for (int k = 0; k < count; k++) {
      Placement& it = items[k];
      it.side = std::min(opt.max_item, n / 2);
      it.x = k == 0 ? 0 : n - it.side;
      it.y = rng.range(0, n - it.side);
      it.alpha = item_alpha(src, it.source_index, it.side, it.flip, opt.alpha_gain_percent);
    }
    placed = fits();
    assert(placed);
  }

  for (int k = 0; k < count; k++) {
    const Placement& it = items[k];
    std::vector<int> under;  // (full_count[k]) luma × 1000 of the canvas under the item's mask
    for (size_t p = 0; p < full[k].size(); p++)
      if (full[k][p]) under.push_back(luma1000(&sc.pixels.data[p * 3]));
    Rgb tint{};
    int best = -1;
    std::vector<int> diff(under.size());  // (full_count[k]) |Δluma| × 1000
    for (int c = 0; c < 16; c++) {
      const Rgb cand = random_colour(rng);
      const int y = luma1000(cand.data());
      for (size_t i = 0; i < under.size(); i++) diff[i] = std::abs(under[i] - y);
      int score = INT_MAX;
      if (!diff.empty()) {
        std::nth_element(diff.begin(), diff.begin() + diff.size() / 10, diff.end());
        score = diff[diff.size() / 10];
      }
      if (score > best) {
        best = score;
        tint = cand;
      }
      if (score >= 80 * 1000) break;
    }
    for (int y = 0; y < it.side; y++)
      for (int x = 0; x < it.side; x++) {
        const int a = it.alpha[size_t(y) * it.side + x];
        if (a > 0) blend(&sc.pixels.data[(size_t(it.y + y) * n + it.x + x) * 3], tint, a);
      }

    SceneItem out;
    out.cls = src.labels[it.source_index];
    out.source_index = it.source_index;
    out.source_train = src.train;
    out.x = it.x;
    out.y = it.y;
    out.side = it.side;
    out.flipped = it.flip;
    out.tint = tint;
    out.full_pixels = full_count[k];
    sc.items.push_back(std::move(out));
  }

  for (int k = 0; k < count; k++) {
    SceneItem& it = sc.items[k];
    it.mask.assign(size_t(n) * n, 0);  // (size, size)
    int x0 = n, y0 = n, x1 = 0, y1 = 0;
    for (int y = 0; y < n; y++)
      for (int x = 0; x < n; x++) {
        const size_t p = size_t(y) * n + x;
        bool visible = full[k][p] != 0;
        for (int j = k + 1; j < count && visible; j++) visible = !full[j][p];
        if (!visible) continue;
        it.mask[p] = 1;
        it.visible_pixels++;
        x0 = std::min(x0, x);
        y0 = std::min(y0, y);
        x1 = std::max(x1, x + 1);
        y1 = std::max(y1, y + 1);
      }
    if (it.visible_pixels > 0) {
      it.box[0] = x0;
      it.box[1] = y0;
      it.box[2] = x1;
      it.box[3] = y1;
    }
    sc.target[it.cls] = 1.0f;
  }
  return sc;
}

void export_scenes(const std::string& dir, const FashionMnist& src, const SceneOptions& opt, uint64_t seed,
                   uint64_t first, uint64_t count) {
  validate_scene_options(opt);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::io, "cannot create the directory " + dir + ": " + ec.message());

  const auto& names = fashion_class_names();
  nlohmann::json scenes = nlohmann::json::array();
  for (uint64_t j = 0; j < count; j++) {
    const uint64_t i = first + j;
    const Scene sc = make_scene(src, opt, seed, i);
    char stem[40];
    std::snprintf(stem, sizeof stem, "scene_%04llu", static_cast<unsigned long long>(i));
    const std::string image_file = std::string(stem) + ".png";
    write_png(dir + "/" + image_file, sc.pixels);

    nlohmann::json items = nlohmann::json::array();
    for (size_t k = 0; k < sc.items.size(); k++) {
      const SceneItem& it = sc.items[k];
      Pixels mask;
      mask.w = mask.h = opt.size;
      mask.channels = 1;
      mask.data.resize(it.mask.size());  // (size, size)
      for (size_t p = 0; p < it.mask.size(); p++) mask.data[p] = it.mask[p] ? 255 : 0;
      const std::string mask_file = std::string(stem) + "_mask_" + std::to_string(k) + ".png";
      write_png(dir + "/" + mask_file, mask);
      items.push_back({{"class", it.cls},
                       {"class_name", names[it.cls]},
                       {"mask", mask_file},
                       {"box", {it.box[0], it.box[1], it.box[2], it.box[3]}},
                       {"visible_pixels", it.visible_pixels},
                       {"full_pixels", it.full_pixels},
                       {"source_split", it.source_train ? "train" : "test"},
                       {"source_index", it.source_index},
                       {"placed", {it.x, it.y, it.side}},
                       {"flipped", it.flipped},
                       {"tint", {it.tint[0], it.tint[1], it.tint[2]}}});
    }
    const std::vector<int> target(sc.target.begin(), sc.target.end());  // (10) 0/1
    scenes.push_back({{"index", i},
                      {"image", image_file},
                      {"backdrop", backdrop_name(sc.backdrop)},
                      {"target", target},
                      {"items", items}});
  }

  nlohmann::json doc = {
      {"dataset", "Fashion-MNIST (Zalando SE, MIT licence), Debian package dataset-fashion-mnist"},
      {"split", src.train ? "train" : "test"},
      {"seed", seed},
      {"first", first},
      {"count", count},
      {"size", opt.size},
      {"options",
       {{"min_item", opt.min_item},
        {"max_item", opt.max_item},
        {"two_items_permille", opt.two_items_permille},
        {"alpha_gain_percent", opt.alpha_gain_percent},
        {"mask_alpha", opt.mask_alpha},
        {"min_visible_permille", opt.min_visible_permille},
        {"flip", opt.flip}}},
      {"class_names", std::vector<std::string>(names.begin(), names.end())},
      {"box_format", "[x0, y0, x1, y1] in pixels of the visible mask; x1 and y1 excluded"},
      {"placed_format", "[x, y, side] of the scaled 28x28 image's square"},
      {"scenes", scenes}};
  write_file(dir + "/labels.json", doc.dump(1) + "\n");
}

Image scene_input(const Pixels& px, const Config& cfg) {
  if (px.channels != 3 || px.w != cfg.image_w || px.h != cfg.image_h || cfg.channels != 3)
    throw Error(ErrorCode::bad_shape, "a scene must be RGB at the model's input size");
  Image x(3, px.h, px.w);
  const size_t hw = size_t(px.h) * size_t(px.w);
  for (int ch = 0; ch < 3; ++ch) {
    const float mean = cfg.mean[size_t(ch)], sd = cfg.std[size_t(ch)];
    float* plane = &x.data[size_t(ch) * hw];  // (h, w)
    for (size_t i = 0; i < hw; ++i) plane[i] = (float(px.data[i * 3 + size_t(ch)]) / 255.0f - mean) / sd;
  }
  return x;
}


}  // namespace vitlens
