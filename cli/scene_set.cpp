// scene_set.cpp — reads a labelled (or unlabelled) image directory (scene_set.h).
#include "scene_set.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

SceneSet load_scene_set(const std::string& dir, const Config& cfg) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  SceneSet s;
  const fs::path labels = fs::path(dir) / "labels.json";
  if (fs::exists(labels)) {
    const std::vector<uint8_t> bytes = read_file(labels.string(), 1 << 24);
    const json j = json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (j.is_discarded() || !j.contains("scenes") || !j["scenes"].is_array())
      throw Error(ErrorCode::bad_format, labels.string() + " is not a scenes labels.json (no \"scenes\")");
    try {
      for (const json& sc : j["scenes"]) {
        s.names.push_back(sc.at("image").get<std::string>());
        std::vector<int> ls;
        std::vector<std::string> ms;
        for (const json& item : sc.at("items")) {
          ls.push_back(item.at("class").get<int>());
          ms.push_back(item.contains("mask") ? (fs::path(dir) / item["mask"].get<std::string>()).string() : "");
        }
        s.masks.push_back(ms);
        for (int l : ls)
          if (l < 0 || l >= cfg.classes)
            throw Error(ErrorCode::bad_argument, labels.string() + ": class " + std::to_string(l) +
                                                     " is not a class of the model (0…" + std::to_string(cfg.classes - 1) + ")");
        s.labels.push_back(ls);
      }
    } catch (const json::exception& e) {
      throw Error(ErrorCode::bad_format, labels.string() + ": every scene needs \"image\" and \"items\":[{\"class\"}] (" +
                                             e.what() + ")");
    }
    s.labelled = true;
  } else {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".npy") files.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    s.names = files;
    s.labels.assign(files.size(), {});
    s.masks.assign(files.size(), {});
  }
  if (s.names.empty()) throw Error(ErrorCode::bad_argument, "no images in " + dir);
  for (const std::string& n : s.names) s.images.push_back(load_image_or_npy((fs::path(dir) / n).string(), cfg));
  return s;
}

}  // namespace vitlens::cli
