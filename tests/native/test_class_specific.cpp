// test_class_specific.cpp — class specificity on two-item scenes with the shipped model
// (issue 4): explaining one item's class puts most of the positive relevance on that item for
// the class-specific methods, while rollout gives the same map whatever class is asked for.
//
// The scenes are held-out test scenes (t10k items only, stream seed 5150, scenes 0…119, of which
// 53 have two items) with exact per-item masks. For each two-item scene and each of its two
// classes t, share_t = Σ_{mask t} map⁺ / (Σ_{mask t} map⁺ + Σ_{mask other} map⁺) on the pixel
// map. Measured with the shipped model (int8, 81 % single-item top-1): transformer-attribution
// mean share 0.65 with 73 % of the 106 explanations above ½; grad-rollout 0.62 and 75 % (the
// previous model, 74 %: 0.60 / 66 % and 0.60 / 70 %). The
// thresholds below leave room for a retrained model without letting a class-blind map pass
// (a class-blind map has mean share exactly ½ over the two classes of a scene).
#include <catch2/catch.hpp>

#include <filesystem>

#include "helpers.h"
#include "vitlens/io/image.h"
#include "vitlens/methods/methods.h"
#include "vitlens/io/model_file.h"
#include "vitlens/data/scenes.h"

using namespace vitlens;
namespace fs = std::filesystem;

namespace {

struct Shares {
  double mean = 0;        // mean share over all explanations
  double above_half = 0;  // fraction of explanations with share > ½
};

// Σ of the map's positive part inside a mask (size×size, 1 = inside).
double positive_mass(const Mat& map, const std::vector<uint8_t>& mask) {
  double s = 0;
  for (Eigen::Index i = 0; i < map.size(); ++i)
    if (mask[size_t(i)]) s += std::max(0.0f, map.data()[i]);
  return s;
}

}  // namespace

TEST_CASE("class-specific methods put the explained class's relevance on its own item", "[methods][classspec]") {
  const std::string model_path = test::source_path("models/vitlens-scenes.vitl");
  if (!fs::exists(model_path) ||
      !fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz")) {
    WARN("the shipped model or dataset-fashion-mnist is absent: skipped");
    return;
  }
  const Model m = load_model_file(model_path);
  const FashionMnist test_split = load_fashion_mnist(fashion_mnist_default_dir, false);
  SceneOptions so;
  so.size = m.config.image_h;

  const char* methods[] = {"transformer-attribution", "grad-rollout"};
  std::vector<double> shares[2];
  int two_item = 0;
  for (uint64_t i = 0; i < 120; ++i) {
    const Scene sc = make_scene(test_split, so, 5150, i);
    if (sc.items.size() != 2) continue;
    ++two_item;
    ExplainState st;
    st.set_input(m, preprocess(sc.pixels, m.config));
    Mat rollout_maps[2];
    for (int k = 0; k < 2; ++k) {
      MethodOptions opt;
      opt.target = sc.items[size_t(k)].cls;
      for (int j = 0; j < 2; ++j) {
        const Mat map = explain(m, st, methods[j], opt).pixel_map;
        const double own = positive_mass(map, sc.items[size_t(k)].mask);
        const double other = positive_mass(map, sc.items[size_t(1 - k)].mask);
        shares[j].push_back(own + other > 0 ? own / (own + other) : 0.5);
      }
      rollout_maps[k] = explain(m, st, "rollout", opt).pixel_map;
    }
    // rollout is not class-specific: the same map, bit for bit, for both classes.
    CHECK((rollout_maps[0].array() == rollout_maps[1].array()).all());
  }
  REQUIRE(two_item == 53);

  for (int j = 0; j < 2; ++j) {
    Shares s;
    for (double v : shares[j]) {
      s.mean += v / double(shares[j].size());
      s.above_half += (v > 0.5 ? 1.0 : 0.0) / double(shares[j].size());
    }
    INFO(methods[j] << ": mean share on the explained item " << s.mean << ", share > ½ in " << s.above_half * 100
                    << " % of " << shares[j].size() << " explanations");
    CHECK(s.mean > 0.55);
    CHECK(s.above_half > 0.6);
  }
}
