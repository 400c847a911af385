// test_variant_reference.cpp — every method on every variant of the timm / Hugging Face families
// against the independent float64 reference (tests/reference/variants_ref.py, fixtures in
// tests/fixtures/variants/<case>/): each case's checkpoint is imported by its own names (timm,
// DeiT with teacher, Dinov2, Dinov2 with registers, CLIP; F32, F16, BF16), explained at the
// fixture's input size (the `resized` case through resize_input), and every map of index.json is
// compared to within 1e-4 of the map's largest magnitude; the AttAttr tensors, trees and the
// LRP conservation sums too.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "json_fixture.h"
#include "vitlens/io/io.h"
#include "vitlens/io/npy.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/methods/attattr.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/vit.h"

using namespace vitlens;
using vitlens::test::read_json;
using vitlens::test::source_path;

namespace {

const char* const kCases[] = {"deit3",   "distilled_timm", "distilled_hf", "reg_gap", "avg_fcnorm_cls",
                              "dinov2",  "dinov2_reg",     "clip",         "resized"};

struct Case {
  std::string dir;
  nlohmann::json meta, index;
  Model model;
  Image input;
};

Case load_case(const std::string& name) {
  Case c;
  c.dir = source_path("tests/fixtures/variants/" + name + "/");
  c.meta = read_json(c.dir + "meta.json");
  c.index = read_json(c.dir + "index.json");
  const std::vector<uint8_t> cfg = read_file(c.dir + "config.json", 1 << 20);
  const std::vector<uint8_t> bytes = read_file(c.dir + "model.safetensors", 1 << 26);
  c.model = import_checkpoint(bytes.data(), bytes.size(), std::string(cfg.begin(), cfg.end()), nullptr);
  if (c.meta.contains("explained_image_size")) {
    const auto s = c.meta["explained_image_size"];
    c.model = resize_input(c.model, s[0].get<int>(), s[1].get<int>());
  }
  const NpyArray x = read_npy(c.dir + "input.npy");
  c.input = Image(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) c.input.data[i] = float(x.data[i]);
  return c;
}

// max |a − ref| / max |ref|
template <typename A>
double rel_error(const A& a, const std::vector<double>& ref) {
  REQUIRE(size_t(a.size()) == ref.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a.data()[i]) - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return worst / std::max(scale, 1e-300);
}

}  // namespace

TEST_CASE("variant reference: the imported checkpoints give the reference's logits", "[variants][reference]") {
  for (const char* name : kCases) {
    INFO(name);
    const Case c = load_case(name);
    Trace tr;
    vit_forward(tr, c.model, c.input);
    const NpyArray ref = read_npy(c.dir + "logits.npy");
    CHECK(rel_error(tr.logits, ref.data) < 1e-5);
  }
}

TEST_CASE("variant reference: every method on every variant within 1e-4 of the float64 reference", "[variants][reference]") {
  for (const char* name : kCases) {
    const Case c = load_case(name);
    ExplainState st;
    st.set_input(c.model, c.input);
    for (const nlohmann::json& e : c.index) {
      const std::string method = e["method"], output = e["output"];
      std::string spec = method;
      for (auto it = e["options"].begin(); it != e["options"].end(); ++it)
        if (!(it.key() == "baseline" && it.value() == "black"))  // the default; an image otherwise
          spec += ":" + it.key() + "=" + it.value().get<std::string>();
      INFO(name << " / " << spec << " / target " << e["target"].get<int>() << " / " << output);
      MethodOptions opt;
      parse_method_spec(spec, opt, &c.model.config);
      opt.target = e["target"].get<int>();
      const Explanation ex = explain(c.model, st, method, opt);
      const NpyArray ref = read_npy(c.dir + e["file"].get<std::string>());
      if (output == "token-map") {
        CHECK(rel_error(ex.token_map, ref.data) < 1e-4);
      } else if (output == "pixel-map") {
        CHECK(rel_error(ex.pixel_map, ref.data) < 1e-4);
      } else if (output == "attattr") {
        std::vector<float> ours;
        for (const AttAttrBlock& b : ex.attattr)
          for (const Mat& a : b.attr) ours.insert(ours.end(), a.data(), a.data() + a.size());
        CHECK(rel_error(ours, ref.data) < 1e-4);
      }
      if (e.contains("completeness")) {
        REQUIRE(ex.has_completeness);
        CHECK(ex.completeness.gap() == Approx(e["completeness"]["gap"].get<double>()).margin(1e-4));
      }
    }
  }
}

TEST_CASE("variant reference: the attribution tree and the LRP conservation sums", "[variants][reference]") {
  for (const char* name : kCases) {
    const Case c = load_case(name);
    ExplainState st;
    st.set_input(c.model, c.input);
    for (const nlohmann::json& e : c.index) {
      if (e["output"] != "attattr") continue;
      const int t = e["target"];
      INFO(name << " / target " << t);
      const nlohmann::json ref = read_json(c.dir + "attattr_t" + std::to_string(t) + ".json");
      MethodOptions opt;
      parse_method_spec("attattr:steps=" + std::to_string(ref["steps"].get<int>()), opt, &c.model.config);
      opt.target = t;
      const Explanation ex = explain(c.model, st, "attattr", opt);
      const AttrTree tree = attattr_tree(ex.attattr, ref["tree"]["threshold"], c.model.config.prefix());
      CHECK(tree.root == ref["tree"]["root"].get<int>());
      CHECK(tree.nodes == ref["tree"]["nodes"].get<std::vector<int>>());
      CHECK(tree.edges.size() == ref["tree"]["edges"].size());
    }
    for (const char* method : {"lrp", "attnlrp"}) {
      for (const nlohmann::json& e : c.index) {
        if (e["method"] != method || e["output"] != "pixel-map") continue;
        const int t = e["target"];
        INFO(name << " / " << method << " / target " << t);
        const nlohmann::json ref = read_json(c.dir + "conservation_" + method + "_t" + std::to_string(t) + ".json");
        MethodOptions opt;
        opt.target = t;
        const Explanation ex = explain(c.model, st, method, opt);
        const ConservationReport& r = ex.conservation;
        const double scale = std::max(1.0, std::fabs(ref["seed_sum"].get<double>()));
        CHECK(std::fabs(r.seed_sum - ref["seed_sum"].get<double>()) < 1e-6 * scale);
        const std::vector<double> blocks = ref["block_input_sums"];
        REQUIRE(blocks.size() == r.block_input_sums.size());
        for (size_t b = 0; b < blocks.size(); ++b) CHECK(std::fabs(r.block_input_sums[b] - blocks[b]) < 1e-5 * scale);
        CHECK(std::fabs(r.image_sum - ref["image_sum"].get<double>()) < 1e-5 * scale);
        // The layers both passes name, but the position-embedding add: the reference books the
        // prefix rows outside the add on a line of their own, we on the add's line.
        for (const LayerRelevance& l : r.layers)
          for (const nlohmann::json& rl : ref["layers"])
            if (rl["layer"] == l.layer && l.layer != "pos_embed.add") {
              INFO(l.layer);
              CHECK(std::fabs(l.relevance_in - rl["relevance_in"].get<double>()) < 1e-5 * scale);
            }
      }
    }
  }
}
