// image.h — decoding, resizing and normalising images for a model, and writing PNGs.
//
// Decoding goes through stb_image for PNG, JPEG and BMP only, with size limits checked on the
// header before any pixel is decoded. Resizing is separable bilinear with antialiasing (a
// triangle filter widened by the scale factor when shrinking, as PIL's BILINEAR), with
// half-pixel centres. Alpha is composited over white.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/model/config.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

// 8-bit pixels, interleaved, `channels` per pixel (1 gray, 3 RGB, 4 RGBA).
struct Pixels {
  int w = 0, h = 0, channels = 0;
  std::vector<uint8_t> data;  // (h, w, channels)
};

// Decodes a PNG, JPEG or BMP from memory. Throws Error(bad_image / limit); `max_pixels` (width ×
// height, at most limits::max_decoded_pixels) is the limit (the fuzz target lowers it).
Pixels decode_image(const uint8_t* bytes, size_t size, int64_t max_pixels = limits::max_decoded_pixels);
Pixels read_image_file(const std::string& path);

// Resizes with the antialiased bilinear filter to (w, h); works per channel on 0…255 floats.
// Returns (channels, h, w) floats in 0…255.
Image resize_pixels(const Pixels& px, int w, int h);

// The model's input: composite alpha over white, convert to the model's channel count
// (RGB→gray by ITU-R 601 luma; gray→RGB by repeating), resize to the model's size,
// then (v/255 − mean)/std per channel.
Image preprocess(const Pixels& px, const Config& cfg);

// Undo the normalisation into 0…255 RGB pixels (for overlays). Gray models give gray RGB.
Pixels denormalise(const Image& x, const Config& cfg);

// Writes an 8-bit PNG (channels 1, 3 or 4). Throws Error(io).
void write_png(const std::string& path, const Pixels& px);
// Encodes to PNG bytes in memory.
std::vector<uint8_t> encode_png(const Pixels& px);

}  // namespace vitlens
