// test_model_file.cpp — .vitl round trips, int8 error bounds, and every malformed-file case.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/model_file.h"
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
    b[8] = 2;
    expect_error(b, ErrorCode::bad_version, "version 2");
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
