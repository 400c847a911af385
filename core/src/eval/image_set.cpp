// image_set.cpp — the user's labelled images for the benchmark: the folder layout, labels.csv,
// the masks beside them, and the loader that turns a file into an EvalSample (image_set.h).
#include "vitlens/eval/image_set.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "vitlens/io/io.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorCode::bad_argument, msg); }

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_image_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || name[0] == '.') return false;
  const std::string ext = lower(name.substr(dot + 1));
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "bmp";
}

// "T-shirt/top, Trouser, …" (the first few), for messages.
std::string some_class_names(const Config& c) {
  std::string s;
  const int shown = std::min(c.classes, 8);
  for (int k = 0; k < shown; ++k) s += (k ? ", " : "") + c.class_names[size_t(k)];
  if (shown < c.classes) s += ", …";
  return s;
}

void sort_and_check(ImageSet& set, const std::string& where) {
  std::sort(set.images.begin(), set.images.end(),
            [](const LabelledImage& a, const LabelledImage& b) { return a.file < b.file; });
  if (set.images.empty()) fail("no image in " + where);
}

// One CSV line split into fields; "…" quotes a field ("" is a quote inside it). false: an
// unterminated quote.
bool split_csv(const std::string& line, std::vector<std::string>& fields) {
  fields.assign(1, "");
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        fields.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return !quoted;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

int class_of(const std::string& text, const Config& c) {
  for (int k = 0; k < c.classes && size_t(k) < c.class_names.size(); ++k)
    if (c.class_names[size_t(k)] == text) return k;
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int k = std::stoi(text);
  return k < c.classes ? k : -1;
}

ImageSet list_image_folders(const std::string& root, const Config& c) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw Error(ErrorCode::io, root + " is not a folder (--images DIR)");
  ImageSet set;
  set.root = root;
  set.source = "folders";
  for (const fs::directory_entry& d : fs::directory_iterator(root)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name[0] == '.' || !d.is_directory()) continue;
    const int cls = class_of(name, c);
    if (cls < 0)
      fail("the folder " + (fs::path(root) / name).string() + " names no class of the model: name class folders "
           "by class name (" + some_class_names(c) + ") or index 0 … " + std::to_string(c.classes - 1) +
           ", or give --labels labels.csv");
    for (const fs::directory_entry& f : fs::directory_iterator(d.path())) {
      const std::string file = f.path().filename().string();
      if (!is_image_name(file) || f.is_directory()) continue;
      set.images.push_back({name + "/" + file, cls});
    }
  }
  sort_and_check(set, root + " (expected " + root + "/<class>/*.png|jpg|jpeg|bmp, the class by name or index)");
  return set;
}

ImageSet read_image_labels(const std::string& root, const std::string& csv_path, const Config& c) {
  const std::vector<uint8_t> bytes = read_file(csv_path, int64_t(1) << 31);
  const std::string text(bytes.begin(), bytes.end());
  ImageSet set;
  set.root = root;
  set.source = "labels";
  size_t start = 0;
  int line_no = 0;
  std::vector<std::string> fields;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    const std::string where = csv_path + " line " + std::to_string(line_no) + ": ";
    if (!split_csv(line, fields) || fields.size() != 2)
      throw Error(ErrorCode::bad_format, where + "expected file,class (quote a field that holds a comma)");
    const std::string file = trim(fields[0]), cls_text = trim(fields[1]);
    if (set.images.empty() && line_no == 1 && lower(file) == "file" && lower(cls_text) == "class") continue;
    if (file.empty()) throw Error(ErrorCode::bad_format, where + "the file is empty");
    const int cls = class_of(cls_text, c);
    if (cls < 0)
      fail(where + "'" + cls_text + "' is no class of the model: give a class name (" + some_class_names(c) +
           ") or an index 0 … " + std::to_string(c.classes - 1));
    set.images.push_back({file, cls});
  }
  sort_and_check(set, csv_path);
  for (size_t i = 1; i < set.images.size(); ++i)
    if (set.images[i].file == set.images[i - 1].file) fail(csv_path + " lists " + set.images[i].file + " twice");
  return set;
}

std::string mask_path(const ImageSet& set, const LabelledImage& im) {
  fs::path rel(im.file);
  rel.replace_extension(".png");
  return (fs::path(set.masks_root) / rel).string();
}

void attach_masks(ImageSet& set, const std::string& masks_root) {
  std::error_code ec;
  if (!fs::is_directory(masks_root, ec)) throw Error(ErrorCode::io, masks_root + " is not a folder (--masks MDIR)");
  set.masks_root = masks_root;
  for (const LabelledImage& im : set.images) {
    const std::string p = mask_path(set, im);
    if (!fs::is_regular_file(p, ec)) {
      set.masks_root.clear();
      fail("no mask " + p + " for the image " + im.file + ": --masks needs one PNG per image (same relative "
           "path, extension .png, non-zero = object)");
    }
  }
}

std::string image_set_digest(const ImageSet& set) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  auto add = [&](const std::string& s) {
    for (char ch : s) h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  };
  for (const LabelledImage& im : set.images) add(im.file + "\t" + std::to_string(im.cls) + "\n");
  add(set.masks_root.empty() ? "no masks\n" : "masks\n");
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

std::vector<uint8_t> resize_mask_nearest(const Pixels& px, int w, int h) {
  if (px.w < 1 || px.h < 1 || px.channels < 1 || px.channels > 4 ||
      px.data.size() != size_t(px.w) * size_t(px.h) * size_t(px.channels) || w < 1 || h < 1)
    throw Error(ErrorCode::bad_shape, "a mask must be a decoded image and the output size positive");
  // Colour channels: gray (1), gray + alpha (2: the first), RGB (3), RGBA (4: the first three).
  const int colour = px.channels <= 2 ? 1 : 3;
  std::vector<uint8_t> out(size_t(w) * size_t(h));  // (h, w)
  for (int y = 0; y < h; ++y) {
    // ⌊(y + ½)·H/h⌋ in integers: (2y + 1)·H / 2h.
    const int sy = int((int64_t(2 * y + 1) * px.h) / (2 * int64_t(h)));
    for (int x = 0; x < w; ++x) {
      const int sx = int((int64_t(2 * x + 1) * px.w) / (2 * int64_t(w)));
      const uint8_t* p = &px.data[(size_t(sy) * size_t(px.w) + size_t(sx)) * size_t(px.channels)];
      uint8_t on = 0;
      for (int ch = 0; ch < colour; ++ch) on |= p[ch] != 0;
      out[size_t(y) * size_t(w) + size_t(x)] = on;
    }
  }
  return out;
}

EvalData image_data(const ImageSet& set) {
  auto shared = std::make_shared<const ImageSet>(set);
  EvalData d;
  d.kind = "images";
  d.size = int(std::min<size_t>(set.images.size(), size_t(INT32_MAX)));
  d.masks = !set.masks_root.empty();
  d.load = [shared](int i, const Config& c) {
    const ImageSet& s = *shared;
    const LabelledImage& im = s.images[size_t(i)];
    EvalSample out;
    Pixels px;
    try {
      px = read_image_file((fs::path(s.root) / im.file).string());
      out.x = preprocess(px, c);
    } catch (const Error& e) {
      return EvalSample{Image(), {}, im.file + ": " + e.what()};
    }
    EvalItem item;
    item.cls = im.cls;
    if (!s.masks_root.empty()) {
      const std::string mp = mask_path(s, im);
      try {
        const Pixels mask = read_image_file(mp);
        if (mask.w != px.w || mask.h != px.h)
          return EvalSample{Image(), {}, im.file + ": the mask " + mp + " is " + std::to_string(mask.w) + "×" +
                                             std::to_string(mask.h) + ", the image " + std::to_string(px.w) + "×" +
                                             std::to_string(px.h)};
        item.mask = resize_mask_nearest(mask, c.image_w, c.image_h);
      } catch (const Error& e) {
        return EvalSample{Image(), {}, im.file + ": its mask " + mp + ": " + e.what()};
      }
    }
    out.items.push_back(std::move(item));
    return out;
  };
  d.check = [shared](const Config& c, const char* what) {
    for (const LabelledImage& im : shared->images)
      if (im.cls >= c.classes)
        fail(std::string(what) + " has " + std::to_string(c.classes) + " classes, but " + im.file + " is labelled " +
             std::to_string(im.cls));
  };
  return d;
}

}  // namespace vitlens
