// image_set.h — the user's labelled images for the faithfulness benchmark (`vitlens eval MODEL
// --images DIR [--labels labels.csv] [--masks MDIR]`): listing them, their classes and masks, and
// the EvalData that loads them (eval.h).
//
// Layouts:
// - folders (ImageNet style): DIR/<class>/<file>.{png,jpg,jpeg,bmp} (extension in any case), one
//   level deep; <class> is a class name of the model (Config::class_names, exact) or a class
//   index 0 … classes−1. Other files and hidden entries (".…") are ignored; a folder that names
//   no class is an error.
// - labels.csv: one `file,class` row per image, `file` relative to DIR (any depth, '/'
//   separated), class by name or index; fields may be double-quoted (class names with commas:
//   "tench, Tinca tinca"); blank lines are skipped; the first line may be the header `file,class`.
//   A file listed twice is an error; a listed file that does not exist is a skipped sample.
// - masks: MDIR/<the image's relative path with the extension replaced by .png>; a pixel is
//   object when any of its colour channels is non-zero (alpha ignored). Every image needs one
//   (an error names the first missing). A mask of another size than its image skips the sample.
//
// Order: samples sorted by relative path (byte order), so that sample i is the same file on
// every machine and shard. Loading: the image through read_image_file and preprocess (resized
// to the model's input with the antialiased bilinear filter, converted to its channels); the
// mask resized to the same H × W with nearest neighbour (resize_mask_nearest). An image that
// cannot be decoded skips its sample with the reason, so that one bad file does not end a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/eval/eval.h"
#include "vitlens/io/image.h"
#include "vitlens/model/config.h"

namespace vitlens {

struct LabelledImage {
  std::string file;  // relative to ImageSet::root, '/' separated
  int cls = -1;
};

struct ImageSet {
  std::string root;        // DIR
  std::string masks_root;  // MDIR, or empty
  std::string source;      // "folders" or "labels"
  std::vector<LabelledImage> images;  // sorted by file
};

// The class `text` names for a model: a class name (exact), else a decimal index below
// c.classes; −1 if neither.
int class_of(const std::string& text, const Config& c);

// DIR/<class>/*.{png,jpg,jpeg,bmp}. Throws Error(io) if DIR is not a folder, Error(bad_argument)
// for a folder that names no class of the model or when no image is found.
ImageSet list_image_folders(const std::string& root, const Config& c);
// The rows of labels.csv over DIR. Throws Error(io) if it cannot be read, Error(bad_format) for
// a malformed row, Error(bad_argument) for an unknown class, a repeated file or no row.
ImageSet read_image_labels(const std::string& root, const std::string& csv_path, const Config& c);
// Sets masks_root after checking that every image has its mask; Error(bad_argument) names the
// first missing one.
void attach_masks(ImageSet& set, const std::string& masks_root);
// The mask path of an image of the set: MDIR/<file without its extension>.png.
std::string mask_path(const ImageSet& set, const LabelledImage& im);

// FNV-1a (64 bit, hex) of the set's "file\tclass\n" lines and whether it has masks: identifies
// the data a results folder belongs to (names and labels, not the pixels).
std::string image_set_digest(const ImageSet& set);

// The 0/1 object mask of `px` (any colour channel non-zero) resized to (w, h) by nearest
// neighbour: output pixel (x, y) takes source pixel (⌊(x + ½)·W/w⌋, ⌊(y + ½)·H/h⌋), i.e. the
// source pixel whose area holds the output pixel's centre. Returns (h·w) row-major.
std::vector<uint8_t> resize_mask_nearest(const Pixels& px, int w, int h);

// The samples of `set` (a copy is kept).
EvalData image_data(const ImageSet& set);

}  // namespace vitlens
