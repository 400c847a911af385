// test_reference.cpp — the engine against the independent PyTorch reference
// (tests/reference/make_engine_fixtures.py): both checkpoint namings imported, the random-weight
// generator reproduced, logits, attention and gradients matched.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/safetensors.h"
#include "vitlens/model/vit.h"

using namespace vitlens;
using vitlens::test::rel_max_error;
using vitlens::test::source_path;

namespace {

struct Fixture {
  std::string dir;
  nlohmann::json meta;
  std::string config_json;
};

Fixture fixture(const std::string& shape) {
  Fixture f;
  f.dir = source_path("tests/fixtures/engine/" + shape + "/");
  std::ifstream meta(f.dir + "meta.json");
  REQUIRE(meta.good());
  f.meta = nlohmann::json::parse(meta);
  const std::vector<uint8_t> cfg = read_file(f.dir + "config.json", 1 << 20);
  f.config_json.assign(cfg.begin(), cfg.end());
  return f;
}

Model import_fixture(const Fixture& f, const std::string& file, Naming* naming) {
  const std::vector<uint8_t> bytes = read_file(f.dir + file, 1 << 26);
  return import_checkpoint(bytes.data(), bytes.size(), f.config_json, naming);
}

Image load_image(const std::string& path) {
  const NpyArray a = read_npy(path);
  REQUIRE(a.shape.size() == 3);
  Image x(int(a.shape[0]), int(a.shape[1]), int(a.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = float(a.data[i]);
  return x;
}

}  // namespace

TEST_CASE("splitmix64 matches the reference's values", "[reference]") {
  const Fixture f = fixture("nonsquare");
  for (auto it = f.meta["splitmix64_check"].begin(); it != f.meta["splitmix64_check"].end(); ++it) {
    const uint64_t want = std::stoull(it.value().get<std::string>(), nullptr, 16);
    CHECK(splitmix64(std::stoull(it.key())) == want);
  }
}

TEST_CASE("imported checkpoints match the reference forward and backward passes", "[reference]") {
  for (const char* shape : {"nonsquare", "gray"}) {
    const Fixture f = fixture(shape);
    INFO("shape " << shape);
    Naming timm_naming, hf_naming;
    const Model timm = import_fixture(f, "model_timm.safetensors", &timm_naming);
    const Model hf = import_fixture(f, "model_hf.safetensors", &hf_naming);
    CHECK(timm_naming == Naming::timm);
    CHECK(hf_naming == Naming::huggingface);
    CHECK(timm.config.class_names[1] == "name1");
    CHECK(timm.config.image_h == f.meta["image_h"].get<int>());
    CHECK(timm.config.image_w == f.meta["image_w"].get<int>());
    CHECK(timm.config.ln_eps == f.meta["ln_eps"].get<float>());

    // Both namings and our own generator give bit-identical parameters.
    Model gen = random_model(timm.config, f.meta["weight_seed"].get<uint64_t>());
    Model hf_copy = hf;
    std::vector<ParamRef> a = param_list(gen.params, gen.config), b = param_list(const_cast<Model&>(timm).params, timm.config),
                          c = param_list(hf_copy.params, hf_copy.config);
    for (size_t k = 0; k < a.size(); ++k) {
      INFO(a[k].name);
      CHECK(std::equal(a[k].data, a[k].data + a[k].size, b[k].data));
      CHECK(std::equal(a[k].data, a[k].data + a[k].size, c[k].data));
    }

    const Image x = load_image(f.dir + "input.npy");
    const Image gen_x = random_input(timm.config, f.meta["input_seed"].get<uint64_t>());
    CHECK(gen_x.data == x.data);
    Trace tr;
    vit_forward(tr, timm, x);
    const NpyArray logits = read_npy(f.dir + "logits.npy");
    CHECK(rel_max_error(tr.logits.data(), logits.data) < 1e-5);

    const int t = f.meta["target"].get<int>();
    Vec dl = Vec::Zero(timm.config.classes);
    dl[t] = 1.0f;
    Grads g;
    vit_backward(g, nullptr, timm, tr, dl);
    CHECK(rel_max_error(g.input.data.data(), read_npy(f.dir + "grad_input.npy").data) < 1e-4);
    for (int blk = 0; blk < timm.config.depth; ++blk) {
      const NpyArray A = read_npy(f.dir + "attn_b" + std::to_string(blk) + ".npy");
      const NpyArray dA = read_npy(f.dir + "grad_attn_b" + std::to_string(blk) + ".npy");
      const int n = timm.config.tokens();
      REQUIRE(A.data.size() == size_t(timm.config.heads * n * n));
      std::vector<float> ours, ours_grad;
      for (int h = 0; h < timm.config.heads; ++h) {
        const Mat& a_h = tr.blocks[size_t(blk)].attn[size_t(h)];
        const Mat& g_h = g.blocks[size_t(blk)].attn[size_t(h)];
        ours.insert(ours.end(), a_h.data(), a_h.data() + a_h.size());
        ours_grad.insert(ours_grad.end(), g_h.data(), g_h.data() + g_h.size());
      }
      CHECK(rel_max_error(ours.data(), A.data) < 1e-5);
      CHECK(rel_max_error(ours_grad.data(), dA.data) < 1e-4);
    }
  }
}

TEST_CASE("import names the tensor that is missing, extra or mis-shaped", "[reference][import]") {
  const Fixture f = fixture("nonsquare");
  std::vector<uint8_t> bytes = read_file(f.dir + "model_timm.safetensors", 1 << 26);
  auto expect = [&](const std::string& cfg, ErrorCode code, const std::string& text) {
    try {
      import_checkpoint(bytes.data(), bytes.size(), cfg, nullptr);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == code);
      CHECK_THAT(e.what(), Catch::Contains(text));
    }
  };
  // A config whose depth is larger: the checkpoint lacks block 3.
  nlohmann::json cfg = nlohmann::json::parse(f.config_json);
  cfg["num_hidden_layers"] = 4;
  expect(cfg.dump(), ErrorCode::missing_tensor, "blocks.3.norm1.weight");
  cfg["num_hidden_layers"] = 2;  // the checkpoint has a block too many
  expect(cfg.dump(), ErrorCode::unknown_tensor, "blocks.2.");
  cfg = nlohmann::json::parse(f.config_json);
  cfg["intermediate_size"] = 48;
  expect(cfg.dump(), ErrorCode::bad_shape, "blocks.0.mlp.fc1.weight");
  cfg = nlohmann::json::parse(f.config_json);
  cfg["hidden_act"] = "relu";
  expect(cfg.dump(), ErrorCode::bad_config, "hidden_act");
  expect("{not json", ErrorCode::bad_format, "config.json");
  cfg = nlohmann::json::parse(f.config_json);
  cfg["num_attention_heads"] = 5;
  expect(cfg.dump(), ErrorCode::bad_config, "multiple of the number of heads");
  // Truncated checkpoint.
  bytes.resize(bytes.size() / 2);
  expect(f.config_json, ErrorCode::truncated, "outside the file");
}
