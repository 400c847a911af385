// scene_set.h — a directory of images with their labels, as `vitlens heads` and `vitlens attack`
// read it: DIR/labels.json as written by `vitlens scenes` ({"scenes": [{"image", "items":
// [{"class", "mask"}]}]}; the masks are only named, not read), or, without it, every
// .png/.jpg/.jpeg/.npy file of DIR in name order, unlabelled. (`vitlens eval --images` reads
// ImageNet-style folders and labels.csv instead: core/include/vitlens/eval/image_set.h.)
#pragma once

#include <string>
#include <vector>

#include "vitlens/model/config.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens::cli {

struct SceneSet {
  std::vector<std::string> names;
  std::vector<Image> images;
  std::vector<std::vector<int>> labels;  // empty per image when unknown
  std::vector<std::vector<std::string>> masks;  // per image, per label: the item's mask file ("" if none)
  bool labelled = false;
};

// Throws Error(bad_format) for a labels.json that is not a scenes file, Error(bad_argument) when
// DIR holds no image or a label is not a class of the model.
SceneSet load_scene_set(const std::string& dir, const Config& cfg);

}  // namespace vitlens::cli
