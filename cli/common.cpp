// common.cpp — model and input loading shared by the subcommands.
#include "common.h"

#include <chrono>
#include <cstdio>

#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"
#include "vitlens/io/io.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/npy.h"

namespace vitlens::cli {

std::string variant_summary(const Config& c) {
  std::string s = std::string(pooling_name(c.pool)) + " pooling";
  auto add = [&](bool on, const std::string& what) {
    if (on) s += ", " + what;
  };
  add(!c.class_token, "no class token");
  add(c.dist_token, "distilled (½ head + ½ head_dist)");
  add(c.registers > 0, std::to_string(c.registers) + " register tokens");
  add(c.no_embed_class, "pos_embed without prefix rows");
  add(c.pre_norm, "norm before the blocks");
  add(c.layer_scale, "LayerScale");
  add(!c.final_norm, "no final norm");
  add(c.fc_norm, "fc_norm");
  s += std::string(", ") + (c.act == Activation::gelu ? "exact GELU" : activation_name(c.act));
  add(c.pos_grid_h > 0, "pos_embed resampled from a " + std::to_string(c.pos_grid_h) + "×" + std::to_string(c.pos_grid_w) + " grid");
  return s;
}

Model load_model_arg(const std::string& arg) {
  if (arg.rfind("deit-tiny", 0) == 0) {
    uint64_t seed = 7;
    if (arg.size() > 9) {
      const std::string digits = arg.substr(10);
      if (arg[9] != ':' || digits.empty() || digits.size() > 19 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_argument, "'" + arg + "': write deit-tiny or deit-tiny:SEED with a decimal seed");
      seed = std::stoull(digits);
    }
    return random_model(deit_tiny_config(), seed);
  }
  return load_model_file(arg);
}

Image load_npy_input(const std::string& path, const Config& cfg) {
  const NpyArray a = read_npy(path);
  std::vector<int64_t> s = a.shape;
  if (s.size() == 4 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 3 || s[0] != cfg.channels || s[1] != cfg.image_h || s[2] != cfg.image_w)
    throw Error(ErrorCode::bad_shape, path + " has shape " + [&] {
      std::string r;
      for (int64_t v : a.shape) r += (r.empty() ? "" : "×") + std::to_string(v);
      return r;
    }() + " but the model needs " + std::to_string(cfg.channels) + "×" + std::to_string(cfg.image_h) + "×" +
                                          std::to_string(cfg.image_w) + " (C×H×W, normalised)");
  Image x(cfg.channels, cfg.image_h, cfg.image_w);
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = float(a.data[i]);
  return x;
}

Image load_image_or_npy(const std::string& path, const Config& cfg) {
  const bool npy = path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
  return npy ? load_npy_input(path, cfg) : preprocess(read_image_file(path), cfg);
}

Image load_input(const Args& args, const Config& cfg, const std::string& image_path) {
  if (args.has("input")) {
    if (!image_path.empty())
      throw Error(ErrorCode::bad_argument, "give either an image or --input x.npy, not both");
    return load_npy_input(args.get("input"), cfg);
  }
  if (image_path.empty()) throw Error(ErrorCode::bad_argument, "no input: give an image file or --input x.npy");
  return preprocess(read_image_file(image_path), cfg);
}

Model apply_input_size(const Model& m, const Args& args, const std::string& image_path) {
  if (!args.has("input-size")) return m;
  const std::string v = args.get("input-size");
  int h = 0, w = 0;
  if (v == "image") {
    if (image_path.empty())
      throw Error(ErrorCode::bad_argument, "--input-size image needs an image file (with --input x.npy give HxW)");
    const Pixels px = read_image_file(image_path);
    aspect_input_size(m.config, px.h, px.w, h, w);
  } else {
    const size_t x = v.find_first_of("x×");
    auto number = [&](const std::string& s) {
      if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_argument, "--input-size takes HxW in pixels (e.g. 224x320) or 'image'");
      return std::stoi(s);
    };
    if (x == std::string::npos) number("");
    h = number(v.substr(0, x));
    w = number(v.substr(v.find_first_not_of("x×", x)));
  }
  return resize_input(m, h, w);
}

void write_output(const Args& args, const std::string& text) {
  if (args.has("out"))
    write_file(args.get("out"), text);
  else
    std::fputs(text.c_str(), stdout);
}

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

std::string clock_text(double s) {
  const long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace vitlens::cli
