// test_norm_ff.cpp — the .npz writer (read back by an independent zip reader written here, with
// its own bitwise CRC-32), the norm-stages export (array names, shapes, order), and the analyses of
// Kobayashi et al. 2024 (eval/norm_ff.h) against hand-worked values on tiny inputs: patch regions
// on a 2×2-patch toy, the pair types, Spearman per row, ρ of monotone stage maps, and the
// geometric-mean amplification per pair type and per distance.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "vitlens/eval/norm_ff.h"
#include "vitlens/io/npy.h"
#include "vitlens/io/npz.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

namespace {

uint32_t rd16(const std::vector<uint8_t>& b, size_t p) { return uint32_t(b.at(p)) | uint32_t(b.at(p + 1)) << 8; }
uint32_t rd32(const std::vector<uint8_t>& b, size_t p) { return rd16(b, p) | rd16(b, p + 2) << 16; }

// CRC-32 bit by bit (reflected 0xEDB88320), independent of io.cpp's table.
uint32_t crc_bitwise(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

struct ZipMember {
  std::string name;
  std::vector<uint8_t> data;
};

// A minimal reader of stored zips: walks the central directory from the end record, and checks
// every local header against it (method 0, sizes, CRC, name).
std::vector<ZipMember> read_stored_zip(const std::vector<uint8_t>& z) {
  REQUIRE(z.size() >= 22);
  const size_t end = z.size() - 22;
  REQUIRE(rd32(z, end) == 0x06054b50u);
  const uint32_t count = rd16(z, end + 10), dir_size = rd32(z, end + 12), dir_off = rd32(z, end + 16);
  REQUIRE(rd16(z, end + 8) == count);
  REQUIRE(size_t(dir_off) + dir_size == end);
  std::vector<ZipMember> out;
  size_t p = dir_off;
  for (uint32_t k = 0; k < count; ++k) {
    REQUIRE(rd32(z, p) == 0x02014b50u);
    CHECK(rd16(z, p + 10) == 0);  // stored
    const uint32_t crc = rd32(z, p + 16), csize = rd32(z, p + 20), usize = rd32(z, p + 24);
    const uint32_t name_len = rd16(z, p + 28), extra = rd16(z, p + 30), comment = rd16(z, p + 32);
    const uint32_t local = rd32(z, p + 42);
    CHECK(csize == usize);
    const std::string name(z.begin() + long(p + 46), z.begin() + long(p + 46 + name_len));
    REQUIRE(rd32(z, local) == 0x04034b50u);
    CHECK(rd16(z, local + 8) == 0);
    CHECK(rd32(z, local + 14) == crc);
    CHECK(rd32(z, local + 18) == csize);
    const uint32_t lname = rd16(z, local + 26), lextra = rd16(z, local + 28);
    CHECK(std::string(z.begin() + long(local + 30), z.begin() + long(local + 30 + lname)) == name);
    const size_t data = local + 30 + lname + lextra;
    REQUIRE(data + csize <= dir_off);
    ZipMember m{name, std::vector<uint8_t>(z.begin() + long(data), z.begin() + long(data + csize))};
    CHECK(crc_bitwise(m.data.data(), m.data.size()) == crc);
    out.push_back(std::move(m));
    p += 46 + name_len + extra + comment;
  }
  CHECK(p == end);
  return out;
}

NpyArray member_array(const std::vector<ZipMember>& ms, const std::string& name) {
  for (const ZipMember& m : ms)
    if (m.name == name + ".npy") return parse_npy(m.data.data(), m.data.size());
  FAIL("no member " << name);
  return {};
}

// A config of grid_h × grid_w patches of 2×2 pixels, a class token, `depth` blocks.
Config toy_config(int gh, int gw, int depth = 1) {
  Config c;
  c.patch = 2;
  c.image_h = 2 * gh;
  c.image_w = 2 * gw;
  c.depth = depth;
  return c;
}

NormBlock constant_block(int n, float v) {
  NormBlock b;
  for (int s = 0; s < norm_stage_count; ++s) {
    b.maps[s] = Mat::Constant(n, n, v);
    b.mixing[s] = Vec::Constant(n, 0.5f);
  }
  return b;
}

}  // namespace

TEST_CASE("npz: a stored zip an independent reader opens, with .npy members", "[npz]") {
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const float b[1] = {-7.5f};
  const std::vector<uint8_t> z = encode_npz({{"first", encode_npy_f32({2, 3}, a)}, {"b_2", encode_npy_f32({1}, b)}});
  const std::vector<ZipMember> ms = read_stored_zip(z);
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].name == "first.npy");
  CHECK(ms[1].name == "b_2.npy");
  const NpyArray x = member_array(ms, "first");
  CHECK(x.shape == std::vector<int64_t>{2, 3});
  CHECK(x.data == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(member_array(ms, "b_2").data == std::vector<double>{-7.5});
  // the bytes depend only on the members (fixed file times)
  CHECK(encode_npz({{"first", encode_npy_f32({2, 3}, a)}, {"b_2", encode_npy_f32({1}, b)}}) == z);
  // an empty archive is just the end record
  CHECK(encode_npz({}).size() == 22);
  CHECK_THROWS_AS(encode_npz({{"x", {}}, {"x", {}}}), Error);
  CHECK_THROWS_AS(encode_npz({{"a.b", {}}}), Error);
  CHECK_THROWS_AS(encode_npz({{"", {}}}), Error);
}

TEST_CASE("norm stages .npz: array names, shapes and order", "[npz][norm]") {
  const int L = 2, n = 3, H = 2;
  std::vector<NormBlock> blocks(L);
  std::vector<std::vector<Mat>> heads(L, std::vector<Mat>(H));
  for (int b = 0; b < L; ++b) {
    for (int s = 0; s < 5; ++s) {
      blocks[size_t(b)].maps[s].resize(n, n);
      for (int i = 0; i < n * n; ++i) blocks[size_t(b)].maps[s].data()[i] = float(1000 * b + 100 * s + i);
      blocks[size_t(b)].mixing[s] = Vec::Constant(n, float(10 * b + s));
    }
    for (int h = 0; h < H; ++h) heads[size_t(b)][size_t(h)] = Mat::Constant(n, n, float(10 * b + h));
  }
  const std::vector<ZipMember> ms = read_stored_zip(encode_norm_stages_npz(blocks, heads));
  REQUIRE(ms.size() == 7);
  const char* names[5] = {"atb", "atb_res", "atb_res_ln", "atb_res_ln_ff", "layer"};
  for (int s = 0; s < 5; ++s) {
    CHECK(norm_stage_array_name(NormStage(s)) == names[s]);
    const NpyArray a = member_array(ms, names[s]);
    CHECK(a.dtype == "<f4");
    REQUIRE(a.shape == std::vector<int64_t>{L, n, n});
    CHECK(a.data[0] == 100 * s);                      // [0, 0, 0]
    CHECK(a.data[size_t(n * n + 5)] == 1000 + 100 * s + 5);  // [1, 1, 2]
  }
  const NpyArray mix = member_array(ms, "mixing_ratio");
  REQUIRE(mix.shape == std::vector<int64_t>{L, 5, n});
  CHECK(mix.data[size_t((1 * 5 + 3) * n + 2)] == 13);  // block 1, stage atb-res-ln-ff
  const NpyArray hd = member_array(ms, "atb_heads");
  REQUIRE(hd.shape == std::vector<int64_t>{L, H, n, n});
  CHECK(hd.data[size_t(((1 * H + 1) * n + 2) * n + 0)] == 11);
  // without heads: no atb_heads member
  CHECK(read_stored_zip(encode_norm_stages_npz(blocks, {})).size() == 6);
  // shapes that disagree
  std::vector<NormBlock> bad = blocks;
  bad[1].maps[2].resize(2, 2);
  CHECK_THROWS_AS(encode_norm_stages_npz(bad, {}), Error);
  CHECK_THROWS_AS(encode_norm_stages_npz(blocks, {heads[0]}), Error);
  CHECK_THROWS_AS(encode_norm_stages_npz({}, {}), Error);
}

// 4×4 pixels, 2×2 patches of 2×2 pixels (row-major: p0 (0,0), p1 (0,1), p2 (1,0), p3 (1,1)).
// Mask 0 covers p0 whole and one pixel of p1; mask 1 covers three pixels of p3.
//   p0: 4/4 of mask 0 > 1/2            → item 0
//   p1: 1/4 covered, > 0.1, not > 1/2  → mixed
//   p2: nothing                        → background
//   p3: 3/4 of mask 1                  → item 1
TEST_CASE("patch regions and pair types on a 2×2-patch toy", "[norm_ff]") {
  std::vector<std::vector<uint8_t>> masks(2, std::vector<uint8_t>(16, 0));
  for (int y : {0, 1})
    for (int x : {0, 1}) masks[0][size_t(y * 4 + x)] = 1;
  masks[0][2] = 1;                    // (0, 2): p1
  masks[1][2 * 4 + 2] = 1;            // (2, 2), (2, 3), (3, 3): p3
  masks[1][2 * 4 + 3] = 1;
  masks[1][3 * 4 + 3] = 1;
  CHECK(patch_regions(masks, 4, 4, 2) == std::vector<int>{0, region_mixed, region_background, 1});
  RegionOptions loose;
  loose.background_share = 0.25;  // one pixel of four is now at most the background share
  CHECK(patch_regions(masks, 4, 4, 2, loose) == std::vector<int>{0, region_background, region_background, 1});
  RegionOptions strict;
  strict.item_share = 0.75;  // 3/4 is not more than 3/4
  CHECK(patch_regions(masks, 4, 4, 2, strict) == std::vector<int>{0, region_mixed, region_background, region_mixed});
  CHECK(patch_regions({}, 4, 4, 2) == std::vector<int>(4, region_background));
  CHECK_THROWS_AS(patch_regions(masks, 4, 4, 3), Error);
  CHECK_THROWS_AS(patch_regions(masks, 4, 6, 2), Error);

  CHECK(pair_type(0, 0) == int(PairType::same_item));
  CHECK(pair_type(2, 2) == int(PairType::same_item));
  CHECK(pair_type(0, 1) == int(PairType::other_item));
  CHECK(pair_type(1, region_background) == int(PairType::item_background));
  CHECK(pair_type(region_background, 0) == int(PairType::item_background));
  CHECK(pair_type(region_background, region_background) == int(PairType::background_background));
  CHECK(pair_type(region_mixed, 0) == -1);
  CHECK(pair_type(region_background, region_mixed) == -1);
}

TEST_CASE("Spearman per row, by hand", "[norm_ff]") {
  Mat a(2, 3), b(2, 3);
  a << 1, 2, 3, 3, 2, 1;
  b << 1, 3, 2, 1, 2, 3;
  // row 0: ranks (1, 2, 3) vs (1, 3, 2): Σd² = 2, ρ = 1 − 6·2/(3·8) = 0.5; row 1: reversed, ρ = −1
  CHECK(spearman_rows(a, b) == Approx(-0.25).margin(1e-12));
  CHECK(spearman_rows(a, a) == Approx(1.0).margin(1e-12));
  CHECK_THROWS_AS(spearman_rows(a, Mat(3, 2)), Error);
}

TEST_CASE("norm_ff: ρ of monotone stage maps, mixing means", "[norm_ff]") {
  const Config c = toy_config(2, 2);
  const int n = c.tokens();  // 5
  REQUIRE(n == 5);
  Mat m(n, n);
  for (int i = 0; i < n * n; ++i) m.data()[i] = float(i + 1);  // all distinct
  NormBlock nb;
  nb.maps[0] = m;                                             // atb
  nb.maps[1] = m.cwiseProduct(m);                            // atb-res: increasing in m
  nb.maps[2] = (50.0f - m.array()).matrix();                 // atb-res-ln: decreasing
  nb.maps[3] = 2.0f * nb.maps[2];                            // atb-res-ln-ff: increasing in ln
  nb.maps[4] = (m.array() + 7.0f).matrix();                  // layer: increasing in m
  for (int s = 0; s < 5; ++s) nb.mixing[s] = Vec::LinSpaced(n, 0.0f, float(s) / 10.0f);  // mean s/20
  NormFfStats st = norm_ff_start(c);
  norm_ff_add(st, {nb}, c, {});
  norm_ff_add(st, {nb}, c, {});
  CHECK(st.images == 2);
  // transitions: atb→res +1, res→ln −1, ln→ff +1, ff→layer −1, ln→layer −1, res→layer +1
  const double expect[6] = {1, -1, 1, -1, -1, 1};
  for (int t = 0; t < norm_ff_transition_count; ++t) {
    INFO("transition " << t);
    CHECK(st.mean_rho_flat(0, t) == Approx(expect[t]).margin(1e-12));
    CHECK(st.mean_rho_row(0, t) == Approx(expect[t]).margin(1e-12));
  }
  for (int s = 0; s < 5; ++s) CHECK(st.mean_mixing(0, s) == Approx(s / 20.0).margin(1e-7));
  // no regions: no pair-type statistics, but distances
  for (int k = 0; k < pair_type_count; ++k) CHECK(st.pairs_type(0, norm_ff_ff, k) == 0);
  CHECK(std::isnan(st.amp_type(0, norm_ff_ff, 0)));
  CHECK_THROWS_AS(norm_ff_add(st, {nb, nb}, c, {}), Error);
  CHECK_THROWS_AS(norm_ff_add(st, {nb}, c, {0, 0}), Error);
}

// The 2×2 toy with regions p0, p1: item 0; p2, p3: background (tokens: CLS, then p0…p3). Before the
// FF (atb-res-ln) every off-diagonal entry is 1: each query's context shares are 1/4. After it
// (atb-res-ln-ff) the same, except N[p0, p1] = N[p1, p0] = 2: in rows p0 and p1 the shares become
// 2/5 for the other item patch and 1/5 for the rest. Ratios after / before:
//   same item       p0→p1, p1→p0                           1.6, 1.6            geometric mean 1.6
//   item–background p0→p2, p0→p3, p1→p2, p1→p3 (0.8 each); p2→p0, p2→p1, p3→p0, p3→p1 (1 each)
//                                                                             geometric mean √0.8
//   background      p2→p3, p3→p2                           1, 1                1
//   all 12 pairs are at Chebyshev distance 1: (1.6²·0.8⁴)^(1/12)
//   patch → CLS     p0, p1: 1/5 over 1/4 = 0.8; p2, p3: 1      geometric mean √0.8 over 4 pairs
TEST_CASE("norm_ff: amplification per pair type and distance, by hand", "[norm_ff]") {
  const Config c = toy_config(2, 2);
  NormBlock nb = constant_block(5, 1.0f);
  for (int s = 0; s < 5; ++s) nb.maps[s].diagonal().setConstant(10.0f);  // left out of the shares
  nb.maps[int(NormStage::atb_res_ln_ff)](1, 2) = 2.0f;
  nb.maps[int(NormStage::atb_res_ln_ff)](2, 1) = 2.0f;
  NormFfStats st = norm_ff_start(c);
  REQUIRE(st.max_distance == 1);
  norm_ff_add(st, {nb}, c, {0, 0, region_background, region_background});
  const int ff = norm_ff_ff;
  CHECK(st.amp_type(0, ff, int(PairType::same_item)) == Approx(1.6).epsilon(1e-12));
  CHECK(st.amp_type(0, ff, int(PairType::item_background)) == Approx(std::sqrt(0.8)).epsilon(1e-12));
  CHECK(st.amp_type(0, ff, int(PairType::background_background)) == Approx(1.0).epsilon(1e-12));
  CHECK(std::isnan(st.amp_type(0, ff, int(PairType::other_item))));
  CHECK(st.pairs_type(0, ff, int(PairType::same_item)) == 2);
  CHECK(st.pairs_type(0, ff, int(PairType::item_background)) == 8);
  CHECK(st.pairs_type(0, ff, int(PairType::background_background)) == 2);
  CHECK(st.amp_dist(0, ff, 1) == Approx(std::pow(1.6 * 1.6 * 0.8 * 0.8 * 0.8 * 0.8, 1.0 / 12)).epsilon(1e-12));
  CHECK(st.amp_prefix(0, ff) == Approx(std::sqrt(0.8)).epsilon(1e-12));
  CHECK(st.n_prefix[size_t(ff)] == 4);
  // the FF-free transitions see no change; atb-res-ln-ff → layer undoes it (layer is all ones)
  CHECK(st.amp_type(0, 0, int(PairType::same_item)) == Approx(1.0).epsilon(1e-12));
  CHECK(st.amp_type(0, 3, int(PairType::same_item)) == Approx(1 / 1.6).epsilon(1e-12));
  CHECK(st.amp_type(0, norm_ff_res2, int(PairType::same_item)) == Approx(1.0).epsilon(1e-12));
  CHECK(st.item_patches == 2);
  CHECK(st.background_patches == 2);
  CHECK(st.skipped == 0);
  // a zero entry is skipped, not a −∞ log
  NormBlock z = nb;
  z.maps[int(NormStage::atb_res_ln_ff)](1, 3) = 0.0f;
  NormFfStats sz = norm_ff_start(c);
  norm_ff_add(sz, {z}, c, {0, 0, region_background, region_background});
  CHECK(sz.skipped == 2);  // once in each transition that has atb-res-ln-ff at an end
  CHECK(std::isfinite(sz.amp_dist(0, ff, 1)));
}

// 1×3 patches (tokens CLS, p0, p1, p2). Before: all ones (shares 1/3). After: N[p0, p2] = 2, so row
// p0's shares are CLS 1/4, p1 1/4, p2 1/2. Distance 1 pairs: p0→p1 (0.75), p1→p0, p1→p2, p2→p1 (1):
// 0.75^(1/4); distance 2: p0→p2 (1.5), p2→p0 (1): √1.5.
TEST_CASE("norm_ff: amplification by Chebyshev distance, by hand", "[norm_ff]") {
  const Config c = toy_config(1, 3);
  NormBlock nb = constant_block(4, 1.0f);
  nb.maps[int(NormStage::atb_res_ln_ff)](1, 3) = 2.0f;
  NormFfStats st = norm_ff_start(c);
  REQUIRE(st.max_distance == 2);
  norm_ff_add(st, {nb}, c, {});
  CHECK(st.amp_dist(0, norm_ff_ff, 1) == Approx(std::pow(0.75, 0.25)).epsilon(1e-12));
  CHECK(st.amp_dist(0, norm_ff_ff, 2) == Approx(std::sqrt(1.5)).epsilon(1e-12));
  // the reports carry the figures
  const std::string md = norm_ff_markdown(st, "toy", "cmd");
  CHECK(md.find("| 0 | 0.931 | 1.225 |") != std::string::npos);  // 0.75^¼ = 0.9306, √1.5 = 1.2247
  CHECK(norm_ff_csv(st).find("0,amp_distance,atb-res-ln → atb-res-ln-ff,2,1.22474487") != std::string::npos);
  CHECK(norm_ff_svgs(st).size() == 4);
}

// One block of three tokens, the FF's transition (atb-res-ln → atb-res-ln-ff):
//   before = | 5 1 3 |    after = | 7 3 1 |
//            | 2 6 2 |            | 4 8 0 |
//            | 1 1 4 |            | 2 1 9 |
// Shares (diagonal left out): before rows (0, 1/4, 3/4), (1/2, 0, 1/2), (1/2, 1/2, 0); after rows
// (0, 3/4, 1/4), (1, 0, 0), (2/3, 1/3, 0).
// ρ per row: row 0 ranks (3, 1, 2) vs (3, 2, 1): 1 − 6·2/(3·8) = 0.5; row 1 ranks (1.5, 3, 1.5) vs
// (2, 3, 1): centred (−½, 1, −½)·(0, 1, −1) = 1.5 over √(1.5·2), = √3/2; row 2 (1.5, 1.5, 3) vs
// (2, 1, 3): likewise √3/2. Mean over rows (0.5 + √3)/3.
// ρ of the flattened maps: ranks (8, 2, 6, 4.5, 9, 4.5, 2, 2, 7) vs (7, 5, 2.5, 6, 8, 1, 4, 2.5, 9),
// centred products 35.5, squares 57.5 and 59.5: 35.5/√(57.5·59.5).
// Mixing ratios of stage s: (0.1·s, 0.2, 0.3), mean (0.1·s + 0.5)/3.
TEST_CASE("norm_image_summary: shares, ρ and mixing means of one image, by hand", "[norm_ff]") {
  NormBlock nb = constant_block(3, 1.0f);
  nb.maps[int(NormStage::atb_res_ln)] << 5, 1, 3, 2, 6, 2, 1, 1, 4;
  nb.maps[int(NormStage::atb_res_ln_ff)] << 7, 3, 1, 4, 8, 0, 2, 1, 9;
  for (int s = 0; s < 5; ++s) nb.mixing[s] << 0.1f * float(s), 0.2f, 0.3f;
  const std::vector<NormImageBlock> out = norm_image_summary({nb, nb});
  REQUIRE(out.size() == 2);
  const NormImageBlock& o = out[1];
  Mat sb(3, 3), sa(3, 3);
  sb << 0, 0.25f, 0.75f, 0.5f, 0, 0.5f, 0.5f, 0.5f, 0;
  sa << 0, 0.75f, 0.25f, 1, 0, 0, 2.0f / 3, 1.0f / 3, 0;
  CHECK((o.share_before - sb).cwiseAbs().maxCoeff() <= 1e-7f);
  CHECK((o.share_after - sa).cwiseAbs().maxCoeff() <= 1e-7f);
  REQUIRE(o.rho_query.size() == 3);
  CHECK(o.rho_query[0] == Approx(0.5).margin(1e-12));
  CHECK(o.rho_query[1] == Approx(std::sqrt(3.0) / 2).margin(1e-12));
  CHECK(o.rho_query[2] == Approx(std::sqrt(3.0) / 2).margin(1e-12));
  CHECK(o.rho_rows == Approx((0.5 + std::sqrt(3.0)) / 3).margin(1e-12));
  CHECK(o.rho_flat == Approx(35.5 / std::sqrt(57.5 * 59.5)).margin(1e-12));
  for (int s = 0; s < 5; ++s) CHECK(o.mixing_mean[s] == Approx((0.1 * s + 0.5) / 3).margin(1e-7));
  // the same as analyze-ff's terms for this image
  NormFfStats st = norm_ff_start(toy_config(1, 2));
  norm_ff_add(st, {nb}, toy_config(1, 2), {});
  CHECK(st.mean_rho_flat(0, norm_ff_ff) == Approx(o.rho_flat).margin(1e-12));
  CHECK(st.mean_rho_row(0, norm_ff_ff) == Approx(o.rho_rows).margin(1e-12));
  // another transition reads other maps: atb (all ones) → layer (all ones) is one tie, ρ = 1
  const NormImageBlock other = norm_image_summary({nb}, {NormStage::atb, NormStage::layer})[0];
  CHECK(other.rho_flat == 1.0);
  CHECK(other.share_before(0, 1) == 0.5f);
  // shapes that do not fit
  CHECK_THROWS_AS(norm_image_summary({}), Error);
  NormBlock bad = nb;
  bad.maps[int(NormStage::atb_res_ln_ff)].resize(2, 2);
  CHECK_THROWS_AS(norm_image_summary({nb, bad}), Error);
  bad = nb;
  bad.mixing[4].resize(2);
  CHECK_THROWS_AS(norm_image_summary({bad}), Error);
  CHECK_THROWS_AS(norm_image_summary({constant_block(4, 1.0f), nb}), Error);
}
