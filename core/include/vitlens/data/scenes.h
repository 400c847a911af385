// scenes.h — Fashion-MNIST scenes: small RGB images whose ground truth says where each item is.
//
// load_fashion_mnist reads the gzipped IDX files of the Debian package dataset-fashion-mnist
// (MIT/Expat licence, Zalando SE) without zlib. make_scene composes one or two items of
// different classes over a varied background and records, per item, its class, the source
// image it came from, its visible pixel mask and its bounding box; the scene's multi-label
// target is the set of classes present.
//
// A scene is a pure function of (source split, options, seed, index): it uses its own PRNG and
// integer arithmetic only (no std:: distributions, no floating-point rendering), so any scene
// can be regenerated on its own, in parallel, and byte-identically natively and in wasm.
// This file does not train or evaluate anything; it only makes the data.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/io/image.h"

namespace vitlens {

constexpr int fashion_classes = 10;
constexpr int fashion_side = 28;  // every Fashion-MNIST image is 28×28

// "T-shirt/top", "Trouser", ..., "Ankle boot", indexed by label.
const std::array<const char*, fashion_classes>& fashion_class_names();

struct FashionMnist {
  bool train = false;            // true: train-* files (60000 images), false: t10k-* (10000)
  int count = 0;                 // N
  std::vector<uint8_t> images;   // (N, 28, 28) intensity: 0 background … 255 ink
  std::vector<uint8_t> labels;   // (N) class 0…9
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. Throws Error(io) when a file
// is missing, Error(bad_format / truncated / limit) when it is not a valid gzipped IDX file.
FashionMnist load_fashion_mnist(const std::string& dir, bool train);

// The default data directory of the Debian package.
constexpr const char* fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";

enum class Backdrop { uniform, gradient, noise, clutter };
const char* backdrop_name(Backdrop b);

struct SceneOptions {
  int size = 64;                // scene side, pixels
  int min_item = 28;            // side of a scaled item, pixels, inclusive range (28: never below the source)
  int max_item = 44;
  int two_items_permille = 500; // probability of a two-item scene, in 1/1000
  int alpha_gain_percent = 150;  // alpha = min(255, intensity × gain): solid items, faint edges
  int mask_alpha = 51;          // an item pixel is in its mask when its alpha ≥ this (of 255)
  int min_visible_permille = 600;  // every item keeps at least this share of its mask visible
  bool flip = true;             // mirror items horizontally with probability 1/2
  bool keep_background = false; // also return the backdrop drawn before any item
};

// Throws Error(bad_argument) naming the first option out of range.
void validate_scene_options(const SceneOptions& opt);

struct SceneItem {
  int cls = 0;                  // Fashion-MNIST label
  int source_index = 0;         // index of the image in its split
  bool source_train = false;    // the split it came from
  int x = 0, y = 0, side = 0;   // where the scaled 28×28 image was placed (its full square)
  bool flipped = false;
  std::array<uint8_t, 3> tint{};   // the colour it was drawn in
  std::vector<uint8_t> mask;    // (size, size) 1 where this item is visible, else 0
  int full_pixels = 0;          // pixels with alpha ≥ mask_alpha before occlusion
  int visible_pixels = 0;       // ones in mask
  int box[4] = {0, 0, 0, 0};    // x0, y0, x1, y1 of the visible mask, half-open (x1, y1 excluded)
};

struct Scene {
  uint64_t seed = 0, index = 0;
  Backdrop backdrop = Backdrop::uniform;
  Pixels pixels;                // (size, size, 3)
  Pixels background;            // (size, size, 3) the backdrop alone; empty unless keep_background
  std::vector<SceneItem> items; // in drawing order: a later item covers an earlier one
  std::array<float, fashion_classes> target{};  // (10) 1 for each class present, else 0
};

// Scene `index` of the stream `seed` over the images of src. Deterministic in its arguments.
Scene make_scene(const FashionMnist& src, const SceneOptions& opt, uint64_t seed, uint64_t index);

// The alpha (0…255) of image `source_index` bilinearly scaled to side×side, mirrored if flip:
// min(255, intensity × gain_percent / 100).
std::vector<uint8_t> item_alpha(const FashionMnist& src, int source_index, int side, bool flip,
                                int gain_percent);  // (side, side)

// Writes scenes first … first+count-1 to dir (created if needed): scene_XXXX.png,
// scene_XXXX_mask_K.png (0/255 gray, K = item index) and labels.json describing them all.
void export_scenes(const std::string& dir, const FashionMnist& src, const SceneOptions& opt,
                   uint64_t seed, uint64_t first, uint64_t count);

// v clamped to a byte.
inline uint8_t clamp_u8(int v) { return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v); }

// 8-bit scene pixels → the model's normalised input, (v/255 − mean)/std per channel. The
// scene must already have the model's size (no resampling).
Image scene_input(const Pixels& px, const Config& cfg);

}  // namespace vitlens
