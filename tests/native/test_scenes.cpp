// test_scenes.cpp — Fashion-MNIST loading (gzip, IDX) and the scene generator's guarantees:
// determinism, masks that match what was drawn, train/test separation, distinct classes,
// visibility of every item, labels that match the items, and the exported files.
// Skipped (with a warning) when the Debian package dataset-fashion-mnist is not installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/data/scenes.h"

using namespace vitlens;
namespace fs = std::filesystem;

namespace {

bool have_dataset() {
  if (fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz")) return true;
  WARN("dataset-fashion-mnist is not installed (" << fashion_mnist_default_dir << "): skipped");
  return false;
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  REQUIRE(f);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Bit-at-a-time CRC-32 (RFC 1952 §8), independent of the table-driven one in scenes.cpp.
uint32_t crc32_bitwise(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// FNV-1a 64 over bytes, to pin a scene stream's exact output.
uint64_t fnv1a(uint64_t h, const std::vector<uint8_t>& bytes) {
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001B3ull;
  return h;
}

// A temporary directory, removed when the test leaves its scope.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name) : path(fs::temp_directory_path() / ("vitlens_test_scenes_" + name + "_" + test::process_tag())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

// Copies the test split into a scratch directory, whose files a test may then spoil.
std::string copy_test_split(const ScratchDir& dir) {
  for (const char* f : {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(fs::path(fashion_mnist_default_dir) / f, dir.path / f);
  return dir.str();
}

ErrorCode load_error(const std::string& dir, std::string* message = nullptr) {
  try {
    load_fashion_mnist(dir, false);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  FAIL("load_fashion_mnist accepted a spoilt file in " << dir);
  return ErrorCode::io;
}

// Item k's mask recomputed from its source image: alpha ≥ threshold in its square, minus the
// same for every later item.
std::vector<uint8_t> expected_mask(const FashionMnist& src, const Scene& sc, size_t k, const SceneOptions& opt) {
  const int n = opt.size;
  auto full = [&](size_t j) {
    const SceneItem& it = sc.items[j];
    std::vector<uint8_t> m(size_t(n) * n, 0);  // (size, size)
    const std::vector<uint8_t> a = item_alpha(src, it.source_index, it.side, it.flipped, opt.alpha_gain_percent);
    for (int y = 0; y < it.side; y++)
      for (int x = 0; x < it.side; x++)
        if (a[size_t(y) * it.side + x] >= opt.mask_alpha) m[size_t(it.y + y) * n + it.x + x] = 1;
    return m;
  };
  std::vector<uint8_t> m = full(k);
  for (size_t j = k + 1; j < sc.items.size(); j++) {
    const std::vector<uint8_t> later = full(j);
    for (size_t p = 0; p < m.size(); p++) m[p] = m[p] && !later[p];
  }
  return m;
}

}  // namespace

TEST_CASE("Fashion-MNIST test split loads with its labels", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  CHECK_FALSE(te.train);
  REQUIRE(te.count == 10000);
  REQUIRE(te.images.size() == size_t(10000) * 28 * 28);
  std::vector<int> per_class(fashion_classes, 0);
  for (uint8_t l : te.labels) per_class[l]++;
  for (int c = 0; c < fashion_classes; c++) CHECK(per_class[c] == 1000);  // the test split is balanced
  CHECK(std::string(fashion_class_names()[0]) == "T-shirt/top");
  CHECK(std::string(fashion_class_names()[9]) == "Ankle boot");
}

TEST_CASE("gzip header flags, truncation and corruption", "[scenes]") {
  if (!have_dataset()) return;
  const std::string labels_name = "t10k-labels-idx1-ubyte.gz";
  const std::vector<uint8_t> gz = slurp(std::string(fashion_mnist_default_dir) + "/" + labels_name);
  REQUIRE(gz.size() > 18);
  const FashionMnist reference = load_fashion_mnist(fashion_mnist_default_dir, false);

  SECTION("a missing directory says which package to install") {
    std::string msg;
    CHECK(load_error("/nonexistent/vitlens-fashion", &msg) == ErrorCode::io);
    CHECK(msg.find("dataset-fashion-mnist") != std::string::npos);
  }
  SECTION("FEXTRA, FNAME, FCOMMENT and FHCRC are skipped") {
    const ScratchDir scratch("flags");
    const std::string dir = copy_test_split(scratch);
    std::vector<uint8_t> h(gz.begin(), gz.begin() + 10);
    h[3] = 2 | 4 | 8 | 16;
    const uint8_t extra[] = {5, 0, 'a', 'b', 'c', 'd', 'e'};  // XLEN = 5, then 5 bytes
    h.insert(h.end(), std::begin(extra), std::end(extra));
    for (char c : std::string("labels.idx")) h.push_back(uint8_t(c));
    h.push_back(0);
    for (char c : std::string("a comment")) h.push_back(uint8_t(c));
    h.push_back(0);
    const uint32_t hcrc = crc32_bitwise(h.data(), h.size()) & 0xFFFF;
    h.push_back(uint8_t(hcrc & 0xFF));
    h.push_back(uint8_t(hcrc >> 8));
    h.insert(h.end(), gz.begin() + 10, gz.end());
    spit(dir + "/" + labels_name, h);
    const FashionMnist te = load_fashion_mnist(dir, false);
    CHECK(te.labels == reference.labels);

    h[h.size() - gz.size() + 10 - 2] ^= 1;  // spoil the header CRC
    spit(dir + "/" + labels_name, h);
    CHECK(load_error(dir) == ErrorCode::bad_format);
  }
  SECTION("a truncated file is refused") {
    const ScratchDir scratch("truncated");
    const std::string dir = copy_test_split(scratch);
    spit(dir + "/" + labels_name, std::vector<uint8_t>(gz.begin(), gz.begin() + gz.size() / 2));
    // The trailer is then read from the middle of the stream: a wrong length, beyond the limit,
    // or a stream that ends early.
    const ErrorCode code = load_error(dir);
    CHECK((code == ErrorCode::bad_format || code == ErrorCode::truncated || code == ErrorCode::limit));
    spit(dir + "/" + labels_name, std::vector<uint8_t>(gz.begin(), gz.begin() + 12));
    CHECK(load_error(dir) == ErrorCode::truncated);
  }
  SECTION("a flipped bit in the deflate stream is caught (by the decoder or the CRC)") {
    const ScratchDir scratch("corrupt");
    const std::string dir = copy_test_split(scratch);
    std::vector<uint8_t> bad = gz;
    bad[bad.size() / 2] ^= 0x10;
    spit(dir + "/" + labels_name, bad);
    const ErrorCode code = load_error(dir);
    CHECK((code == ErrorCode::bad_format || code == ErrorCode::truncated));
  }
  SECTION("not gzip, and gzip of something that is not IDX") {
    const ScratchDir scratch("magic");
    const std::string dir = copy_test_split(scratch);
    std::vector<uint8_t> bad = gz;
    bad[1] = 0x8c;
    spit(dir + "/" + labels_name, bad);
    CHECK(load_error(dir) == ErrorCode::bad_format);
    // The images file where the labels file should be: valid gzip, wrong IDX magic.
    fs::copy_file(dir + "/t10k-images-idx3-ubyte.gz", dir + "/" + labels_name, fs::copy_options::overwrite_existing);
    std::string msg;
    CHECK(load_error(dir, &msg) == ErrorCode::bad_format);
    CHECK(msg.find("0x00000801") != std::string::npos);
  }
}

TEST_CASE("a scene is a function of (seed, index) alone", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  const SceneOptions opt;
  for (uint64_t i = 0; i < 20; i++) {
    const Scene a = make_scene(te, opt, 42, i);
    const Scene b = make_scene(te, opt, 42, i);
    REQUIRE(a.pixels.w == 64);
    REQUIRE(a.pixels.h == 64);
    REQUIRE(a.pixels.channels == 3);
    REQUIRE(a.pixels.data.size() == size_t(64) * 64 * 3);
    CHECK(a.pixels.data == b.pixels.data);
    REQUIRE(a.items.size() == b.items.size());
    for (size_t k = 0; k < a.items.size(); k++) {
      CHECK(a.items[k].mask == b.items[k].mask);
      CHECK(a.items[k].source_index == b.items[k].source_index);
    }
    CHECK(make_scene(te, opt, 42, i + 1).pixels.data != a.pixels.data);
    CHECK(make_scene(te, opt, 43, i).pixels.data != a.pixels.data);
  }
  // Generating out of order gives the same scene as generating in order.
  CHECK(make_scene(te, opt, 42, 7).pixels.data == make_scene(te, opt, 42, 7).pixels.data);

  // The exact bytes of the first 32 scenes of seed 1, pinned so that the wasm build (and any
  // other compiler) must reproduce them. Changing the recipe changes this number on purpose.
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint64_t i = 0; i < 32; i++) {
    const Scene s = make_scene(te, opt, 1, i);
    h = fnv1a(h, s.pixels.data);
    for (const SceneItem& it : s.items) h = fnv1a(h, it.mask);
  }
  CHECK(h == 0x00de1a2afb75533aull);
}

TEST_CASE("masks cover exactly the visible item pixels that were drawn", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  SceneOptions opt;
  opt.keep_background = true;
  const int n = opt.size;
  int64_t mask_pixels = 0, mask_changed = 0, mask_contrasted = 0, overlapping = 0, outside_changed = 0;
  for (uint64_t i = 0; i < 300; i++) {
    const Scene sc = make_scene(te, opt, 9, i);
    REQUIRE(sc.background.data.size() == sc.pixels.data.size());
    std::vector<uint8_t> in_square(size_t(n) * n, 0);  // (size, size)
    for (size_t k = 0; k < sc.items.size(); k++) {
      const SceneItem& it = sc.items[k];
      REQUIRE(it.x >= 0);
      REQUIRE(it.y >= 0);
      REQUIRE(it.x + it.side <= n);
      REQUIRE(it.y + it.side <= n);
      CHECK(it.side >= opt.min_item);
      CHECK(it.side <= opt.max_item);
      for (int y = it.y; y < it.y + it.side; y++)
        for (int x = it.x; x < it.x + it.side; x++) in_square[size_t(y) * n + x] = 1;

      REQUIRE(it.mask == expected_mask(te, sc, k, opt));
      int count = 0, x0 = n, y0 = n, x1 = 0, y1 = 0;
      for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
          const size_t p = size_t(y) * n + x;
          if (!it.mask[p]) continue;
          count++;
          x0 = std::min(x0, x);
          y0 = std::min(y0, y);
          x1 = std::max(x1, x + 1);
          y1 = std::max(y1, y + 1);
          int d = 0;
          for (int c = 0; c < 3; c++) d = std::max(d, std::abs(sc.pixels.data[p * 3 + c] - sc.background.data[p * 3 + c]));
          mask_pixels++;
          if (d >= 10) mask_changed++;
          if (d >= 30) mask_contrasted++;
          for (size_t j = 0; j < sc.items.size(); j++)
            if (j != k && sc.items[j].mask[p]) overlapping++;
        }
      CHECK(count == it.visible_pixels);
      REQUIRE(count > 0);
      CHECK(it.box[0] == x0);
      CHECK(it.box[1] == y0);
      CHECK(it.box[2] == x1);
      CHECK(it.box[3] == y1);
    }
    for (size_t p = 0; p < in_square.size(); p++)
      if (!in_square[p])
        for (int c = 0; c < 3; c++) outside_changed += sc.pixels.data[p * 3 + c] != sc.background.data[p * 3 + c];
  }
  CHECK(overlapping == 0);      // masks are disjoint
  CHECK(outside_changed == 0);  // nothing was drawn outside the items' squares
  // Where a mask is 1 the item changed the backdrop visibly: by ≥ 10 of 255 in some channel
  // (measured: all of them), mostly by ≥ 30 (measured: 98.9 %).
  INFO(mask_changed << " / " << mask_contrasted << " of " << mask_pixels
                    << " mask pixels differ from the backdrop by >= 10 / >= 30");
  CHECK(double(mask_changed) >= 0.99 * double(mask_pixels));
  CHECK(double(mask_contrasted) >= 0.95 * double(mask_pixels));
}

TEST_CASE("train scenes use train images only, test scenes t10k images only", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist tr = load_fashion_mnist(fashion_mnist_default_dir, true);
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  REQUIRE(tr.train);
  REQUIRE(tr.count == 60000);
  const SceneOptions opt;
  for (const FashionMnist* split : {&tr, &te}) {
    const FashionMnist& other = split == &tr ? te : tr;
    int matched_other = 0, items = 0;
    std::set<int> sources;
    for (uint64_t i = 0; i < 200; i++) {
      const Scene sc = make_scene(*split, opt, 5, i);
      for (size_t k = 0; k < sc.items.size(); k++) {
        const SceneItem& it = sc.items[k];
        items++;
        sources.insert(it.source_index);
        REQUIRE(it.source_train == split->train);
        REQUIRE(it.source_index >= 0);
        REQUIRE(it.source_index < split->count);
        CHECK(it.cls == split->labels[size_t(it.source_index)]);
        // The drawn mask is that of this split's image, not of the other split's at the same index.
        CHECK(it.mask == expected_mask(*split, sc, k, opt));
        bool in_other = true;
        for (const SceneItem& any : sc.items) in_other = in_other && any.source_index < other.count;
        if (in_other && it.mask == expected_mask(other, sc, k, opt)) matched_other++;
      }
    }
    CHECK(matched_other == 0);
    CHECK(sources.size() > size_t(items) * 9 / 10);  // images are drawn across the whole split
  }
}

TEST_CASE("items: distinct classes, ≥ 60 % visible, labels match, varied backdrops", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  const SceneOptions opt;
  int two = 0;
  std::vector<int> backdrops(4, 0), classes(fashion_classes, 0);
  const int scenes = 1000;
  for (uint64_t i = 0; i < uint64_t(scenes); i++) {
    const Scene sc = make_scene(te, opt, 77, i);
    REQUIRE((sc.items.size() == 1 || sc.items.size() == 2));
    backdrops[int(sc.backdrop)]++;
    if (sc.items.size() == 2) {
      two++;
      CHECK(sc.items[0].cls != sc.items[1].cls);
    }
    std::array<float, fashion_classes> target{};
    for (const SceneItem& it : sc.items) {
      target[it.cls] = 1.0f;
      classes[it.cls]++;
      CHECK(it.full_pixels > 0);
      CHECK(int64_t(it.visible_pixels) * 1000 >= int64_t(opt.min_visible_permille) * it.full_pixels);
    }
    CHECK(sc.target == target);
  }
  CHECK(two > scenes * 43 / 100);
  CHECK(two < scenes * 57 / 100);
  for (int b = 0; b < 4; b++) CHECK(backdrops[b] > scenes / 6);
  for (int c = 0; c < fashion_classes; c++) CHECK(classes[c] > scenes / 20);
}

TEST_CASE("scene options out of range are refused", "[scenes]") {
  SceneOptions opt;
  CHECK_NOTHROW(validate_scene_options(opt));
  auto refused = [](SceneOptions o) {
    try {
      validate_scene_options(o);
    } catch (const Error& e) {
      return e.code() == ErrorCode::bad_argument;
    }
    return false;
  };
  opt.size = 40;  // two 22-px items cannot sit side by side
  CHECK(refused(opt));
  opt = SceneOptions();
  opt.max_item = 80;
  CHECK(refused(opt));
  opt = SceneOptions();
  opt.min_item = 30;
  opt.max_item = 25;
  CHECK(refused(opt));
  opt = SceneOptions();
  opt.two_items_permille = 1001;
  CHECK(refused(opt));
  opt = SceneOptions();
  opt.mask_alpha = 0;
  CHECK(refused(opt));
}

TEST_CASE("export_scenes writes images, masks and labels.json that match make_scene", "[scenes]") {
  if (!have_dataset()) return;
  const FashionMnist te = load_fashion_mnist(fashion_mnist_default_dir, false);
  const SceneOptions opt;
  const ScratchDir scratch("export");
  const fs::path& dir = scratch.path;
  export_scenes(dir.string(), te, opt, 3, 10, 6);
  const nlohmann::json doc = nlohmann::json::parse(slurp((dir / "labels.json").string()));
  CHECK(doc["split"] == "test");
  CHECK(doc["seed"] == 3);
  REQUIRE(doc["class_names"].size() == 10);
  REQUIRE(doc["scenes"].size() == 6);
  for (size_t s = 0; s < 6; s++) {
    const nlohmann::json& js = doc["scenes"][s];
    const Scene sc = make_scene(te, opt, 3, 10 + s);
    char stem[32];
    std::snprintf(stem, sizeof stem, "scene_%04d", int(10 + s));
    CHECK(js["index"] == 10 + s);
    CHECK(js["image"] == std::string(stem) + ".png");
    CHECK(fs::file_size(dir / js["image"].get<std::string>()) > 100);
    REQUIRE(js["items"].size() == sc.items.size());
    for (size_t k = 0; k < sc.items.size(); k++) {
      const nlohmann::json& ji = js["items"][k];
      const SceneItem& it = sc.items[k];
      CHECK(ji["class"] == it.cls);
      CHECK(ji["class_name"] == fashion_class_names()[it.cls]);
      CHECK(ji["box"] == nlohmann::json({it.box[0], it.box[1], it.box[2], it.box[3]}));
      CHECK(ji["source_index"] == it.source_index);
      CHECK(ji["mask"] == std::string(stem) + "_mask_" + std::to_string(k) + ".png");
      CHECK(fs::exists(dir / ji["mask"].get<std::string>()));
    }
    for (int c = 0; c < fashion_classes; c++) CHECK(js["target"][c] == int(sc.target[c]));
  }
}
