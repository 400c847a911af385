// test_model_file.cpp — .vitl round trips, int8 error bounds, and every malformed-file case.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/io/model_file.h"
#include "vitlens/io/npy.h"
#include "vitlens/model/vit.h"

using namespace vitlens;

namespace {

Config tiny_config() {
  Config c;
  c.image_h = 16;
  c.image_w = 8;
  c.channels = 3;
  c.patch = 4;
  c.dim = 12;
  c.depth = 2;
  c.heads = 3;
  c.mlp_dim = 20;
  c.classes = 3;
  c.class_names = {"cat", "dog", "bird"};
  fill_config_defaults(c);
  return c;
}

uint64_t get_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(b[at + size_t(i)]) << (8 * i);
  return v;
}

// Rewrites the JSON header of a saved file (keeping the data section and checksum as they are).
std::vector<uint8_t> with_header(const std::vector<uint8_t>& file, const std::function<void(nlohmann::json&)>& edit) {
  const uint64_t len = get_u64(file, 16);
  nlohmann::json h = nlohmann::json::parse(file.begin() + 24, file.begin() + 24 + long(len));
  edit(h);
  std::string text = h.dump();
  const size_t old_start = (24 + len + 15) / 16 * 16;
  std::vector<uint8_t> out(file.begin(), file.begin() + 16);
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  while (out.size() % 16) out.push_back(0);
  out.insert(out.end(), file.begin() + long(old_start), file.end());
  return out;
}

void expect_error(const std::vector<uint8_t>& bytes, ErrorCode code, const std::string& text) {
  try {
    load_model(bytes.data(), bytes.size());
    FAIL("loaded a malformed file");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(error_code_name(e.code()) == std::string(error_code_name(code)));
    CHECK_THAT(e.what(), Catch::Contains(text));
  }
}

}  // namespace

TEST_CASE("f32 model files round-trip exactly", "[model_file]") {
  Model m = random_model(tiny_config(), 1);
  m.provenance = "unit test ✓";
  m.config.output = OutputKind::sigmoid;
  const std::vector<uint8_t> bytes = save_model(m, Storage::f32);
  const Model back = load_model(bytes.data(), bytes.size());
  CHECK(back.provenance == m.provenance);
  CHECK(back.config.class_names == m.config.class_names);
  CHECK(back.config.output == OutputKind::sigmoid);
  CHECK(back.config.ln_eps == m.config.ln_eps);
  CHECK(back.config.mean == m.config.mean);
  CHECK_FALSE(back.stored_int8);
  Model a = m, b = back;
  auto ra = param_list(a.params, a.config), rb = param_list(b.params, b.config);
  for (size_t k = 0; k < ra.size(); ++k) CHECK(std::memcmp(ra[k].data, rb[k].data, ra[k].size * 4) == 0);
}

TEST_CASE("int8 model files: per-channel error bound on weights and a small logit change", "[model_file]") {
  Config c = tiny_config();
  c.dim = 48;
  c.heads = 4;
  c.mlp_dim = 96;
  const Model m = random_model(c, 2);
  const std::vector<uint8_t> bytes = save_model(m, Storage::int8);
  CHECK(bytes.size() < save_model(m, Storage::f32).size() / 2);
  Model back = load_model(bytes.data(), bytes.size());
  CHECK(back.stored_int8);
  Model orig = m;
  auto ro = param_list(orig.params, orig.config), rb = param_list(back.params, back.config);
  for (size_t k = 0; k < ro.size(); ++k) {
    INFO(ro[k].name);
    const size_t rows = size_t(ro[k].shape[0]), cols = ro[k].size / rows;
    for (size_t r = 0; r < rows; ++r) {
      float mx = 0.0f;
      for (size_t i = 0; i < cols; ++i) mx = std::max(mx, std::fabs(ro[k].data[r * cols + i]));
      const float bound = ro[k].quantisable ? 0.5f * mx / 127.0f * 1.0001f + 1e-12f : 0.0f;
      for (size_t i = 0; i < cols; ++i) REQUIRE(std::fabs(ro[k].data[r * cols + i] - rb[k].data[r * cols + i]) <= bound);
    }
  }
  // quantised_copy is what loading an int8 file gives.
  Model q = quantised_copy(m);
  auto rq = param_list(q.params, q.config);
  for (size_t k = 0; k < rq.size(); ++k) CHECK(std::memcmp(rq[k].data, rb[k].data, rq[k].size * 4) == 0);
  const Image x = random_input(c, 3);
  Trace t1, t2;
  vit_forward(t1, m, x);
  vit_forward(t2, back, x);
  const float err = (t1.logits - t2.logits).cwiseAbs().maxCoeff(), scale = t1.logits.cwiseAbs().maxCoeff();
  CHECK(err / scale < 0.03f);
}

TEST_CASE("malformed model files give specific errors", "[model_file]") {
  const Model m = random_model(tiny_config(), 4);
  const std::vector<uint8_t> good = save_model(m, Storage::f32);
  const std::vector<uint8_t> good8 = save_model(m, Storage::int8);
  REQUIRE_NOTHROW(load_model(good.data(), good.size()));

  SECTION("empty and tiny files") {
    expect_error({}, ErrorCode::truncated, "too short");
    expect_error(std::vector<uint8_t>(good.begin(), good.begin() + 10), ErrorCode::truncated, "too short");
  }
  SECTION("wrong magic and version") {
    auto b = good;
    b[0] = 'X';
    expect_error(b, ErrorCode::bad_format, "wrong magic");
    b = good;
    b[8] = 3;
    expect_error(b, ErrorCode::bad_version, "format version 3 is not supported");
    b[8] = 0;
    expect_error(b, ErrorCode::bad_version, "format version 0 is not supported");
  }
  SECTION("truncated at every section") {
    const uint64_t len = get_u64(good, 16);
    for (size_t cut : {size_t(20), size_t(24 + len / 2), size_t(24 + len), good.size() / 2, good.size() - 5, good.size() - 1}) {
      INFO("cut at " << cut);
      auto b = std::vector<uint8_t>(good.begin(), good.begin() + long(cut));
      expect_error(b, ErrorCode::truncated, "");
    }
  }
  SECTION("header length past the end or absurd") {
    auto b = good;
    b[16 + 5] = 0x7F;  // header length ≈ 2^46
    expect_error(b, ErrorCode::limit, "exceeds the limit");
    b = good;
    b[16] = 0xFF;
    b[17] = 0xFF;
    b[18] = 0x0F;  // ~1 MB: below the limit, past the end
    expect_error(b, ErrorCode::truncated, "header");
  }
  SECTION("header that is not JSON or lacks fields") {
    auto b = good;
    b[24] = '[';
    expect_error(b, ErrorCode::bad_format, "");
    expect_error(with_header(good, [](nlohmann::json& h) { h.erase("tensors"); }), ErrorCode::bad_format, "lacks");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"] = 5; }), ErrorCode::bad_format, "list");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][0]["dtype"] = 7; }), ErrorCode::bad_format, "");
  }
  SECTION("zero, negative, absurd and inconsistent dimensions") {
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["dim"] = 0; }), ErrorCode::bad_config, "width");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["depth"] = -3; }), ErrorCode::bad_config, "depth");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["dim"] = int64_t(1) << 40; }), ErrorCode::limit, "width");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["image_h"] = 17; }), ErrorCode::bad_config, "multiple of the patch");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["heads"] = 5; }), ErrorCode::bad_config, "heads");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["dim"] = "12"; }), ErrorCode::bad_config, "integer");
    expect_error(with_header(good, [](nlohmann::json& h) { h["config"]["ln_eps"] = -1; }), ErrorCode::bad_config, "eps");
    expect_error(with_header(good, [](nlohmann::json& h) { h["class_names"].push_back("extra"); }), ErrorCode::bad_config, "class names");
    expect_error(with_header(good, [](nlohmann::json& h) {
                   h["config"]["dim"] = 4096;
                   h["config"]["heads"] = 4;
                   h["config"]["mlp_dim"] = 16384;
                   h["config"]["depth"] = 64;
                 }),
                 ErrorCode::limit, "parameters");
  }
  SECTION("tensor table problems") {
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][1]["shape"] = {13}; }), ErrorCode::bad_shape, "patch_embed.proj.bias");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"].erase(3); }), ErrorCode::missing_tensor, "pos_embed");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"].push_back(h["tensors"][0]); }), ErrorCode::unknown_tensor, "twice");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][0]["name"] = "blocks.9.mlp.fc1.weight"; }), ErrorCode::unknown_tensor, "blocks.9");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][0]["dtype"] = "f16"; }), ErrorCode::bad_format, "dtype");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][2]["offset"] = uint64_t(1) << 62; }), ErrorCode::truncated, "outside");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][2]["bytes"] = 8; }), ErrorCode::bad_shape, "cls_token");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][2]["offset"] = 2; }), ErrorCode::truncated, "outside");
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][0]["shape"] = {-12, 3, 4, 4}; }), ErrorCode::bad_shape, "negative");
    expect_error(with_header(good, [](nlohmann::json& h) { h["data_bytes"] = uint64_t(1) << 60; }), ErrorCode::truncated, "truncated");
    // Two tensors sharing bytes (a small file describing more data than it holds).
    expect_error(with_header(good, [](nlohmann::json& h) { h["tensors"][1]["offset"] = h["tensors"][0]["offset"]; }),
                 ErrorCode::bad_format, "'patch_embed.proj.weight' and 'patch_embed.proj.bias' overlap");
    // A config of ~300 M parameters (1.2 GB) over this file's few kilobytes: refused by the first
    // tensor's shape, before the parameters are allocated.
    expect_error(with_header(good, [](nlohmann::json& h) {
                   h["config"]["dim"] = 1024;
                   h["config"]["heads"] = 16;
                   h["config"]["mlp_dim"] = 4096;
                   h["config"]["depth"] = 24;
                 }),
                 ErrorCode::bad_shape, "'patch_embed.proj.weight' has shape [12, 3, 4, 4] but the config implies [1024, 3, 4, 4]");
    expect_error(with_header(good8, [](nlohmann::json& h) {
                   for (auto& t : h["tensors"])
                     if (t["name"] == "head.weight.scale") t["name"] = "head.weight.scales";
                 }),
                 ErrorCode::unknown_tensor, "head.weight.scales");
  }
  SECTION("NaN weights and corrupted data") {
    // Write a NaN into the cls token of a valid model, then re-save so the checksum is right.
    Model bad = m;
    bad.params.cls_token[0] = std::nanf("");
    const auto b = save_model(bad, Storage::f32);
    expect_error(b, ErrorCode::bad_value, "cls_token");
    auto c = good;
    c[c.size() - 40] ^= 0x55;
    expect_error(c, ErrorCode::bad_value, "checksum");
  }
}

namespace {

// One config per variant of METHODS.md ("Model variants"), on the tiny shape.
std::vector<std::pair<std::string, Config>> variant_configs() {
  std::vector<std::pair<std::string, Config>> out;
  auto add = [&](const std::string& name, const std::function<void(Config&)>& edit) {
    Config c = tiny_config();
    edit(c);
    out.emplace_back(name, c);
  };
  add("plain", [](Config&) {});
  add("deit3", [](Config& c) {
    c.layer_scale = true;
    c.no_embed_class = true;
  });
  add("distilled", [](Config& c) { c.dist_token = true; });
  add("reg gap", [](Config& c) {
    c.class_token = false;
    c.registers = 3;
    c.no_embed_class = true;
    c.layer_scale = true;
    c.final_norm = false;
    c.fc_norm = true;
    c.pool = Pooling::avg;
  });
  add("avg fc_norm pre_norm tanh", [](Config& c) {
    c.pool = Pooling::avg;
    c.final_norm = false;
    c.fc_norm = true;
    c.pre_norm = true;
    c.act = Activation::gelu_tanh;
  });
  add("dinov2 registers", [](Config& c) {
    c.registers = 2;
    c.layer_scale = true;
    c.pool = Pooling::token_avg;
  });
  add("clip", [](Config& c) {
    c.pre_norm = true;
    c.pool = Pooling::avg;
    c.final_norm = false;
    c.act = Activation::quick_gelu;
  });
  return out;
}

void check_same_config(const Config& a, const Config& b) {
  CHECK(a.image_h == b.image_h);
  CHECK(a.image_w == b.image_w);
  CHECK(a.dim == b.dim);
  CHECK(a.class_token == b.class_token);
  CHECK(a.dist_token == b.dist_token);
  CHECK(a.registers == b.registers);
  CHECK(a.no_embed_class == b.no_embed_class);
  CHECK(a.pre_norm == b.pre_norm);
  CHECK(a.layer_scale == b.layer_scale);
  CHECK(a.final_norm == b.final_norm);
  CHECK(a.fc_norm == b.fc_norm);
  CHECK(a.pool == b.pool);
  CHECK(a.act == b.act);
  CHECK(a.pos_grid_h == b.pos_grid_h);
  CHECK(a.pos_grid_w == b.pos_grid_w);
  CHECK(a.class_names == b.class_names);
}

nlohmann::json header_of(const std::vector<uint8_t>& file) {
  const uint64_t len = get_u64(file, 16);
  return nlohmann::json::parse(file.begin() + 24, file.begin() + 24 + long(len));
}

}  // namespace

TEST_CASE("version 2 files round-trip every variant, f32 and int8", "[model_file]") {
  auto variants = variant_configs();
  // A model resampled to another input size keeps its checkpoint grid (pos_grid_h/w).
  variants.emplace_back("resized", random_model(tiny_config(), 0).config);
  for (const auto& [name, cfg] : variants) {
    INFO(name);
    Model m = random_model(cfg, 21);
    if (name == "resized") m = resize_input(m, 12, 16);
    for (Storage storage : {Storage::f32, Storage::int8}) {
      const std::vector<uint8_t> bytes = save_model(m, storage);
      CHECK(bytes[8] == 2);
      const nlohmann::json h = header_of(bytes);
      for (const char* field : {"class_token", "dist_token", "registers", "no_embed_class", "pre_norm", "layer_scale",
                                "final_norm", "fc_norm", "pool", "act", "pos_grid_h", "pos_grid_w"})
        CHECK(h["config"].contains(field));  // every variant field, written explicitly
      Model back = load_model(bytes.data(), bytes.size());
      check_same_config(back.config, m.config);
      const Model want = storage == Storage::int8 ? quantised_copy(m) : m;
      Model w = want;
      const std::vector<ParamRef> ra = param_list(back.params, back.config), rb = param_list(w.params, w.config);
      REQUIRE(ra.size() == rb.size());
      std::set<std::string> i8;
      for (const auto& t : h["tensors"])
        if (t["dtype"] == "i8") i8.insert(t["name"].get<std::string>());
      for (size_t k = 0; k < ra.size(); ++k) {
        INFO(ra[k].name);
        CHECK(ra[k].name == rb[k].name);
        CHECK(std::memcmp(ra[k].data, rb[k].data, ra[k].size * 4) == 0);
        // int8 stores exactly the quantisable tensors of param_list as i8.
        CHECK(i8.count(ra[k].name) == size_t(storage == Storage::int8 && ra[k].quantisable));
      }
      CHECK(i8.size() == (storage == Storage::int8 ? size_t(std::count_if(ra.begin(), ra.end(), [](const ParamRef& r) { return r.quantisable; })) : 0));
      const Image x = random_input(back.config, 5);
      Trace t1, t2;
      vit_forward(t1, back, x);
      vit_forward(t2, want, x);
      CHECK((t1.logits - t2.logits).cwiseAbs().maxCoeff() == 0.0f);
    }
  }
}

TEST_CASE("version 1 files (written before the variants) load as the plain model with the same predictions", "[model_file]") {
  const NpyArray x = read_npy(test::source_path("tests/fixtures/engine/nonsquare/input.npy"));
  Image img(int(x.shape[0]), int(x.shape[1]), int(x.shape[2]));
  for (size_t i = 0; i < x.data.size(); ++i) img.data[i] = float(x.data[i]);
  for (const char* storage : {"f32", "int8"}) {
    INFO(storage);
    const std::string base = test::source_path(std::string("tests/fixtures/model_file/v1_nonsquare_") + storage);
    const std::vector<uint8_t> bytes = read_file(base + ".vitl", 1 << 26);
    REQUIRE(bytes[8] == 1);
    const Model m = load_model(bytes.data(), bytes.size());
    CHECK(m.stored_int8 == (std::string(storage) == "int8"));
    const Config& c = m.config;
    CHECK(c.class_token);
    CHECK_FALSE(c.dist_token);
    CHECK(c.registers == 0);
    CHECK_FALSE(c.no_embed_class);
    CHECK_FALSE(c.pre_norm);
    CHECK_FALSE(c.layer_scale);
    CHECK(c.final_norm);
    CHECK_FALSE(c.fc_norm);
    CHECK(c.pool == Pooling::token);
    CHECK(c.act == Activation::gelu);
    CHECK(c.pos_grid_h == 0);
    Trace tr;
    vit_forward(tr, m, img);
    const std::vector<Prediction> top = top_k(c, tr.logits, 5);
    std::ifstream f(base + "_predict.json");
    REQUIRE(f.good());
    const nlohmann::json want = nlohmann::json::parse(f);
    REQUIRE(want.size() == 5);
    for (size_t k = 0; k < 5; ++k) {
      CHECK(top[k].cls == want[k]["class"].get<int>());
      CHECK(std::fabs(double(top[k].logit) - want[k]["logit"].get<double>()) <= 1e-6);
    }
  }
}

TEST_CASE("version 2 headers: unknown fields, unknown values and fields that contradict the tensors", "[model_file]") {
  Config c = tiny_config();
  c.registers = 2;
  c.layer_scale = true;
  const Model m = random_model(c, 8);
  const std::vector<uint8_t> good = save_model(m, Storage::f32);
  REQUIRE_NOTHROW(load_model(good.data(), good.size()));
  using J = nlohmann::json;
  expect_error(with_header(good, [](J& h) { h["comment"] = "hi"; }), ErrorCode::bad_format, "unknown header field 'comment'");
  expect_error(with_header(good, [](J& h) { h["config"]["rope_theta"] = 100; }), ErrorCode::bad_config, "unknown config field 'rope_theta'");
  expect_error(with_header(good, [](J& h) { h["config"]["pool"] = "foo"; }), ErrorCode::bad_config,
               "config field 'pool' is \"foo\"; it must be one of 'token', 'avg', 'token+avg'");
  expect_error(with_header(good, [](J& h) { h["config"]["act"] = "relu"; }), ErrorCode::bad_config,
               "config field 'act' is \"relu\"; it must be one of 'gelu', 'gelu_pytorch_tanh', 'quick_gelu'");
  expect_error(with_header(good, [](J& h) { h["config"]["layer_scale"] = 1; }), ErrorCode::bad_config, "'layer_scale' must be true or false");
  expect_error(with_header(good, [](J& h) { h["config"].erase("final_norm"); }), ErrorCode::bad_config, "config field 'final_norm' is missing");
  expect_error(with_header(good, [](J& h) { h["config"]["registers"] = 3; }), ErrorCode::bad_shape,
               "'reg_token' has shape [1, 2, 12] but the config implies [1, 3, 12] (config: registers 3)");
  expect_error(with_header(good, [](J& h) { h["config"]["layer_scale"] = false; }), ErrorCode::unknown_tensor,
               "(config: layer_scale false)");
  expect_error(with_header(good, [](J& h) { h["config"]["dist_token"] = true; }), ErrorCode::bad_shape, "'pos_embed'");
  expect_error(with_header(good, [](J& h) { h["config"]["fc_norm"] = true; }), ErrorCode::bad_config, "fc_norm is implemented for 'avg' pooling only");
  expect_error(with_header(good, [](J& h) { h["config"]["registers"] = int64_t(1) << 31; }), ErrorCode::limit, "register tokens = 1073741824");
  expect_error(with_header(good, [](J& h) { h["config"]["pos_grid_h"] = 4; }), ErrorCode::bad_config, "position grid");
  // A version 1 header knows none of the variant fields: one there is refused, not ignored.
  std::vector<uint8_t> v1 = with_header(save_model(random_model(tiny_config(), 9), Storage::f32), [](J& h) {
    for (const char* f : {"class_token", "dist_token", "registers", "no_embed_class", "pre_norm", "layer_scale", "final_norm",
                          "fc_norm", "pool", "act", "pos_grid_h", "pos_grid_w"})
      h["config"].erase(f);
  });
  v1[8] = 1;
  REQUIRE_NOTHROW(load_model(v1.data(), v1.size()));
  expect_error(with_header(v1, [](J& h) { h["config"]["class_token"] = false; }), ErrorCode::bad_config,
               "unknown config field 'class_token' (not part of format version 1)");
}
