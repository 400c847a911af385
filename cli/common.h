// common.h — helpers the subcommands share: loading a model and an input, timing.
#pragma once

#include <string>

#include "commands.h"
#include "vitlens/model/model.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens::cli {

// MODEL is a .vitl file, or the word "deit-tiny" / "deit-tiny:SEED" for the random-weight
// benchmark model.
Model load_model_arg(const std::string& arg);

// The model's input from IMAGE (positional) or --input x.npy (float32 C×H×W, used exactly).
Image load_input(const Args& args, const Config& cfg, const std::string& image_path);
// A normalised (C, H, W) tensor from .npy (shape checked against the model), or an image file.
Image load_npy_input(const std::string& path, const Config& cfg);
Image load_image_or_npy(const std::string& path, const Config& cfg);

// --input-size: "HxW" (pixels, multiples of the patch) or "image" (the image's aspect with about
// as many patches as the checkpoint: aspect_input_size). Returns the model resampled to that size
// (resize_input), or `m` itself without the flag. `image_path` may be empty (--input x.npy), then
// only HxW is accepted.
Model apply_input_size(const Model& m, const Args& args, const std::string& image_path);

// The model's variants in a few words: "token pooling, LayerScale, 4 registers, …" ("plain ViT:
// class token, token pooling, exact GELU" for the plain model).
std::string variant_summary(const Config& c);

double now_ms();

// Writes a command's text output to --out when given, else to stdout.
void write_output(const Args& args, const std::string& text);

// Seconds as m:ss, or h:mm:ss from an hour on (progress bars' elapsed time and ETA).
std::string clock_text(double s);

}  // namespace vitlens::cli
