// test_image.cpp — decoding, the stb_image JPEG guard, antialiased bilinear resizing against
// explicit weights worked out by hand and against Pillow (fixtures from
// tests/reference/make_image_fixtures.py), and the model's normalisation and its inverse.
#include <catch2/catch.hpp>

#include <stb/stb_image_write.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "vitlens/model/config.h"
#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/image.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/io/npy.h"

using namespace vitlens;

namespace {

Pixels make_pixels(int w, int h, int channels, uint32_t seed) {
  Pixels px;
  px.w = w;
  px.h = h;
  px.channels = channels;
  px.data.resize(size_t(w) * h * channels);
  for (uint8_t& v : px.data) {
    seed = seed * 1664525u + 1013904223u;
    v = uint8_t(seed >> 24);
  }
  return px;
}

Pixels constant_pixels(int w, int h, int channels, uint8_t value) {
  Pixels px;
  px.w = w;
  px.h = h;
  px.channels = channels;
  px.data.assign(size_t(w) * h * channels, value);
  return px;
}

ErrorCode decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_image(bytes.data(), bytes.size());
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("decode_image accepted bad input");
  return ErrorCode::io;
}

std::string fixture(const std::string& name) {
  return std::string(VITLENS_SOURCE_DIR) + "/tests/fixtures/image/" + name;
}

// A BMP made by stb_image_write (whose implementation the core already links).
std::vector<uint8_t> encode_bmp(const Pixels& px) {
  std::vector<uint8_t> out;
  auto append = [](void* context, void* data, int size) {
    auto* dst = static_cast<std::vector<uint8_t>*>(context);
    dst->insert(dst->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  REQUIRE(stbi_write_bmp_to_func(append, &out, px.w, px.h, px.channels, px.data.data()));
  return out;
}

// `bytes` with a marker segment (FF marker, length, payload) inserted after the SOI marker.
std::vector<uint8_t> with_segment(std::vector<uint8_t> jpeg, uint8_t marker,
                                  const std::vector<uint8_t>& payload) {
  const size_t length = payload.size() + 2;
  std::vector<uint8_t> seg = {0xFF, marker, uint8_t(length >> 8), uint8_t(length & 0xFF)};
  seg.insert(seg.end(), payload.begin(), payload.end());
  jpeg.insert(jpeg.begin() + 2, seg.begin(), seg.end());
  return jpeg;
}

// A DHT payload: one table (class/id byte, 16 counts) with `count` symbols of length 16.
std::vector<uint8_t> dht_payload(uint8_t class_id, int count_15, int count_16) {
  std::vector<uint8_t> p = {class_id};
  for (int i = 0; i < 14; ++i) p.push_back(0);
  p.push_back(uint8_t(count_15));
  p.push_back(uint8_t(count_16));
  for (int i = 0; i < count_15 + count_16; ++i) p.push_back(uint8_t(i));
  return p;
}

Config small_config(int w, int h, int channels) {
  Config cfg;
  cfg.image_w = w;
  cfg.image_h = h;
  cfg.channels = channels;
  cfg.mean.assign(size_t(channels), 0.5f);
  cfg.std.assign(size_t(channels), 0.5f);
  return cfg;
}

// The triangle-filter weight of input pixel x for output pixel i, before normalisation,
// written out from the definition (PIL BILINEAR): centre (i + 0.5) * scale, radius max(scale, 1).
double tri_weight(int i, int x, double scale) {
  const double radius = std::max(scale, 1.0);
  const double centre = (i + 0.5) * scale;
  return std::max(0.0, 1.0 - std::fabs(x + 0.5 - centre) / radius);
}

}  // namespace

TEST_CASE("image: PNG encode then decode is exact for 1, 3 and 4 channels", "[image]") {
  for (int c : {1, 3, 4}) {
    CAPTURE(c);
    const Pixels px = make_pixels(7, 5, c, 42u + uint32_t(c));
    const std::vector<uint8_t> png = encode_png(px);
    REQUIRE(png.size() > 8);
    CHECK(png[0] == 0x89);
    CHECK(png[1] == 'P');
    const Pixels back = decode_image(png.data(), png.size());
    CHECK(back.w == 7);
    CHECK(back.h == 5);
    CHECK(back.channels == c);
    CHECK(back.data == px.data);
  }
}

TEST_CASE("image: PNG through a file, BMP, and gray+alpha expanded to RGBA", "[image]") {
  const Pixels px = make_pixels(4, 3, 3, 7u);
  const vitlens::test::ScratchFile file("image_rgb.png");
  write_png(file.path, px);
  CHECK(read_image_file(file.path).data == px.data);

  const std::vector<uint8_t> bmp = encode_bmp(px);
  const Pixels from_bmp = decode_image(bmp.data(), bmp.size());
  CHECK(from_bmp.channels == 3);
  CHECK(from_bmp.data == px.data);

  const Pixels la = make_pixels(3, 2, 2, 9u);
  const std::vector<uint8_t> png = encode_png(la);
  const Pixels rgba = decode_image(png.data(), png.size());
  REQUIRE(rgba.channels == 4);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(rgba.data[4 * i + 0] == la.data[2 * i]);
    CHECK(rgba.data[4 * i + 1] == la.data[2 * i]);
    CHECK(rgba.data[4 * i + 2] == la.data[2 * i]);
    CHECK(rgba.data[4 * i + 3] == la.data[2 * i + 1]);
  }
}

TEST_CASE("image: non-images, empty and broken buffers give bad_image", "[image]") {
  CHECK(decode_error({}) == ErrorCode::bad_image);
  const std::string text = "this is not an image, just some text";
  CHECK(decode_error(std::vector<uint8_t>(text.begin(), text.end())) == ErrorCode::bad_image);
  CHECK(decode_error({0xFF}) == ErrorCode::bad_image);
  CHECK(decode_error({0xFF, 0xD8}) == ErrorCode::bad_image);

  const std::vector<uint8_t> png = encode_png(make_pixels(16, 16, 3, 1u));
  CHECK(decode_error(std::vector<uint8_t>(png.begin(), png.begin() + 40)) == ErrorCode::bad_image);

  std::vector<uint8_t> zero_width = png;
  zero_width[16] = zero_width[17] = zero_width[18] = zero_width[19] = 0;  // IHDR width
  CHECK(decode_error(zero_width) == ErrorCode::bad_image);
}

TEST_CASE("image: the pixel limit is enforced from the header", "[image]") {
  std::vector<uint8_t> png = encode_png(make_pixels(2, 2, 1, 3u));
  // IHDR width and height (big-endian at bytes 16 and 20): 10000 × 10000 = 1e8 pixels.
  for (size_t at : {size_t(16), size_t(20)}) {
    png[at + 0] = 0;
    png[at + 1] = 0;
    png[at + 2] = 0x27;
    png[at + 3] = 0x10;
  }
  CHECK(decode_error(png) == ErrorCode::limit);
}

TEST_CASE("image: a caller's lower pixel limit (the fuzz target's) refuses from the header", "[image]") {
  const std::vector<uint8_t> png = encode_png(make_pixels(40, 30, 3, 5u));  // 1200 pixels
  CHECK(decode_image(png.data(), png.size(), 1200).w == 40);
  try {
    decode_image(png.data(), png.size(), 1199);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::limit);
    CHECK(std::string(e.what()).find("larger than 1199 pixels") != std::string::npos);
  }
  // Never above the engine's own limit.
  CHECK(decode_image(png.data(), png.size(), int64_t(1) << 40).h == 30);
}

TEST_CASE("image: JPEG decodes, and the stb_image 2.27 DHT guard", "[image]") {
  const std::vector<uint8_t> jpeg = read_file(fixture("flat_baseline.jpg"), 1 << 20);
  REQUIRE(jpeg.size() > 2);
  REQUIRE(jpeg[0] == 0xFF);
  REQUIRE(jpeg[1] == 0xD8);

  auto check_colour = [](const Pixels& got) {
    REQUIRE(got.w == 16);
    REQUIRE(got.h == 16);
    REQUIRE(got.channels == 3);
    for (size_t i = 0; i < got.data.size(); i += 3) {
      CHECK(std::abs(int(got.data[i]) - 200) <= 4);
      CHECK(std::abs(int(got.data[i + 1]) - 100) <= 4);
      CHECK(std::abs(int(got.data[i + 2]) - 50) <= 4);
    }
  };
  check_colour(decode_image(jpeg.data(), jpeg.size()));
  check_colour(read_image_file(fixture("flat_progressive.jpg")));

  const Pixels ramp = read_image_file(fixture("ramp_gray_progressive.jpg"));
  REQUIRE(ramp.w == 24);
  REQUIRE(ramp.h == 8);
  REQUIRE(ramp.channels == 1);
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 24; ++x) CHECK(std::abs(int(ramp.data[size_t(y) * 24 + x]) - 10 * x) <= 4);
  }

  SECTION("a table with more than 256 codes is refused before stb parses it") {
    // 0 + ... + 255 codes of length 15 + 255 of length 16: 510 codes for arrays of 256.
    const std::vector<uint8_t> bad = with_segment(jpeg, 0xC4, dht_payload(0x00, 255, 255));
    try {
      decode_image(bad.data(), bad.size());
      FAIL("an oversized Huffman table reached stb_image");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_image);
      CHECK(std::string(e.what()).find("Huffman") != std::string::npos);
    }
    // The same table as the second one of a DHT segment, behind a legal first table.
    std::vector<uint8_t> two = dht_payload(0x01, 0, 2);
    const std::vector<uint8_t> second = dht_payload(0x11, 255, 2);
    two.insert(two.end(), second.begin(), second.end());
    CHECK(decode_error(with_segment(jpeg, 0xC4, two)) == ErrorCode::bad_image);
  }
  SECTION("a legal extra table with exactly 256 codes still decodes") {
    // Table class 1 id 3 is not used by the image. 1 code of length 15 and 255 of length 16:
    // 256 codes, and 2/65536 + 255/65536 of the code space.
    std::vector<uint8_t> table = {0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 255};
    for (int i = 0; i < 256; ++i) table.push_back(uint8_t(i));
    const std::vector<uint8_t> ok = with_segment(jpeg, 0xC4, table);
    check_colour(decode_image(ok.data(), ok.size()));
  }
  SECTION("DHT-like bytes inside an opening APP segment are not mistaken for a table") {
    std::vector<uint8_t> exif = {'E', 'x', 'i', 'f', 0, 0, 0xFF, 0xC4, 0x01, 0x20, 0x00};
    for (int i = 0; i < 16; ++i) exif.push_back(0xFF);
    const std::vector<uint8_t> with_app = with_segment(jpeg, 0xE1, exif);
    check_colour(decode_image(with_app.data(), with_app.size()));
  }
  SECTION("truncated JPEG data is an error or a partial image, never a crash") {
    for (size_t n = 0; n < jpeg.size(); n += 7) {
      const std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + n);
      try {
        const Pixels got = decode_image(cut.data(), cut.size());
        CHECK(got.data.size() == size_t(got.w) * got.h * got.channels);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::bad_image);
      }
    }
  }
}

TEST_CASE("image: stb's allocations are bounded by what the declared image can need", "[image]") {
  auto refused_for_memory = [](const std::vector<uint8_t>& bytes) {
    try {
      decode_image(bytes.data(), bytes.size());
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_image);
      return std::string(e.what()).find("more memory than a") != std::string::npos;
    }
    return false;
  };
  SECTION("the fuzz finding: a corrupt zlib stream that made the inflater ask for 2 GiB") {
    // Without the budget stb allocates the 2 GiB and later fails with "outofdata".
    const std::vector<uint8_t> png = read_file(
        std::string(VITLENS_SOURCE_DIR) + "/fuzz/regressions/image/oom-zlib-2gib.png", 1 << 20);
    CHECK(refused_for_memory(png));
  }
  SECTION("an IDAT chunk declaring 1 GiB in a 16 x 16 PNG") {
    std::vector<uint8_t> png = encode_png(make_pixels(16, 16, 3, 7u));
    // The first chunk after the signature (8) and IHDR (4 + 4 + 13 + 4) bytes: stb_image_write
    // writes IDAT next. Its length is the big-endian word at offset 33.
    REQUIRE(std::string(png.begin() + 37, png.begin() + 41) == "IDAT");
    png[33] = 0x40;
    png[34] = png[35] = png[36] = 0;
    CHECK(refused_for_memory(png));
  }
  SECTION("the images whose buffers stb sizes largest for their pixels still decode") {
    // 16-bit RGBA, interlaced: 8 bytes a pixel inflated; stb returns the high bytes.
    const Pixels rgba = read_image_file(fixture("rgba16_interlaced.png"));
    REQUIRE(rgba.w == 7);
    REQUIRE(rgba.h == 5);
    REQUIRE(rgba.channels == 4);
    for (int y = 0; y < 5; ++y) {
      for (int x = 0; x < 7; ++x) {
        for (int c = 0; c < 4; ++c) {
          const int sample = (4111 * (1 + c) + 997 * x + 3301 * y) % 65536;
          CHECK(int(rgba.data[(size_t(y) * 7 + x) * 4 + c]) == sample >> 8);
        }
      }
    }
    // One-pixel-wide 4:2:0 progressive JPEGs: whole 16 x 16 MCUs around every pixel.
    for (const char* name : {"thin_h2v2_progressive.jpg", "wide_h2v2_progressive.jpg"}) {
      const Pixels flat = read_image_file(fixture(name));
      CHECK(int64_t(flat.w) * flat.h == 300);
      REQUIRE(flat.channels == 3);
      for (size_t i = 0; i < flat.data.size(); i += 3) {
        CHECK(std::abs(int(flat.data[i]) - 200) <= 6);
        CHECK(std::abs(int(flat.data[i + 1]) - 100) <= 6);
        CHECK(std::abs(int(flat.data[i + 2]) - 50) <= 6);
      }
    }
  }
}

TEST_CASE("image: a progressive JPEG whose DC sums overflow int decodes, defined", "[image]") {
  // The fuzz finding: 83 bytes, one grey component, 15640 x 24, a DC scan with successive
  // approximation 12 whose running DC sum times 2^12 overflows int inside stb_image. The
  // sanitizer build (scripts/test.sh, build-asan) aborted here until stb's implementation was
  // compiled with -fwrapv (core/src/io/stb_impl.cpp); now the overflow wraps, every time alike.
  const std::vector<uint8_t> jpeg = read_file(
      std::string(VITLENS_SOURCE_DIR) + "/fuzz/regressions/image/int-overflow-prog-dc.jpg", 1 << 20);
  const Pixels a = decode_image(jpeg.data(), jpeg.size());
  CHECK(a.w == 15640);
  CHECK(a.h == 24);
  CHECK(a.channels == 1);
  const Pixels b = decode_image(jpeg.data(), jpeg.size());
  CHECK(a.data == b.data);
}

TEST_CASE("image: a JPEG that over-reads stb's bit buffer is refused, defined", "[image]") {
  // The fuzz finding: 185 bytes, a progressive 24 x 264 grey JPEG whose AC scan meets a marker in
  // the middle of a code; stb_image 2.27's fast AC path then takes 8 bits more than its buffer
  // holds, and the next refill shifted by 32 (UBSan; build-asan aborted here before the line
  // core/CMakeLists.txt adds to stb, stb_impl.cpp). Now the file is read to its end and refused
  // for what follows (an unknown marker), the same way every time.
  const std::vector<uint8_t> jpeg = read_file(
      std::string(VITLENS_SOURCE_DIR) + "/fuzz/regressions/image/shift-negative-code-bits.jpg", 1 << 20);
  for (int i = 0; i < 2; ++i) {
    try {
      decode_image(jpeg.data(), jpeg.size());
      FAIL("decoded");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::bad_image);
      CHECK(std::string(e.what()).find("unknown marker") != std::string::npos);
    }
  }
}

TEST_CASE("image: resize keeps a constant image constant", "[image]") {
  const Pixels px = constant_pixels(37, 23, 3, 200);
  for (auto [w, h] : {std::pair<int, int>{224, 224}, {5, 3}, {37, 23}, {1, 1}, {100, 7}}) {
    const Image out = resize_pixels(px, w, h);
    REQUIRE(out.c == 3);
    REQUIRE(out.w == w);
    REQUIRE(out.h == h);
    for (float v : out.data) CHECK(v == Approx(200.0f).margin(1e-3));
  }
}

TEST_CASE("image: identity resize is exact", "[image]") {
  const Pixels px = make_pixels(13, 7, 4, 5u);
  const Image out = resize_pixels(px, 13, 7);
  for (int c = 0; c < 4; ++c) {
    for (int y = 0; y < 7; ++y) {
      for (int x = 0; x < 13; ++x) {
        CHECK(out.at(c, y, x) == float(px.data[(size_t(y) * 13 + x) * 4 + c]));
      }
    }
  }
}

TEST_CASE("image: resize matches Pillow's BILINEAR on float data", "[image]") {
  const Pixels src = read_image_file(fixture("resize_src.png"));
  REQUIRE(src.w == 23);
  REQUIRE(src.h == 17);
  for (auto [w, h] : {std::pair<int, int>{64, 48}, {7, 5}, {16, 31}, {23, 17}}) {
    CAPTURE(w, h);
    const NpyArray ref = read_npy(fixture("resize_" + std::to_string(w) + "x" +
                                          std::to_string(h) + ".npy"));
    REQUIRE(ref.shape == std::vector<int64_t>{3, h, w});
    const Image out = resize_pixels(src, w, h);
    double worst = 0.0;
    for (size_t i = 0; i < out.data.size(); ++i) {
      worst = std::max(worst, std::fabs(double(out.data[i]) - ref.data[i]));
    }
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("image: halving a checkerboard averages it with the widened triangle", "[image]") {
  // 8×6 one-pixel checkerboard, 255 where x + y is odd. Halving: scale 2, radius 2, output i
  // centred on input 2i + 1, taps 2i-1 … 2i+2 with weights 1/4, 3/4, 3/4, 1/4 (normalised by 2).
  // Inside, half the weight falls on each parity in each axis: 255 · (1/2 · 1/2 + 1/2 · 1/2),
  // i.e. 127.5.
  // At the left/top edge the tap 2i-1 = -1 is dropped: weights 3/4, 3/4, 1/4 over pixels 0, 1, 2
  // normalise to 3/7, 3/7, 1/7, so even pixels carry 4/7 and odd ones 3/7; in the corner
  // P(x + y odd) = 2 · 4/7 · 3/7 = 24/49, i.e. 124.898; on an edge it is still 1/2.
  Pixels px = constant_pixels(8, 6, 1, 0);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 8; ++x) px.data[size_t(y) * 8 + x] = (x + y) % 2 ? 255 : 0;
  }
  const Image out = resize_pixels(px, 4, 3);
  CHECK(out.at(0, 1, 1) == Approx(127.5).margin(1e-4));
  CHECK(out.at(0, 1, 2) == Approx(127.5).margin(1e-4));
  CHECK(out.at(0, 0, 0) == Approx(255.0 * 24.0 / 49.0).margin(1e-4));
  CHECK(out.at(0, 1, 0) == Approx(127.5).margin(1e-4));

  // Every output against the explicit 2-D sum of tri_weight(x) · tri_weight(y) · value.
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 4; ++i) {
      double num = 0.0, den = 0.0;
      for (int y = 0; y < 6; ++y) {
        for (int x = 0; x < 8; ++x) {
          const double wgt = tri_weight(i, x, 2.0) * tri_weight(j, y, 2.0);
          num += wgt * px.data[size_t(y) * 8 + x];
          den += wgt;
        }
      }
      CHECK(out.at(0, j, i) == Approx(num / den).margin(1e-4));
    }
  }
}

TEST_CASE("image: enlarging interpolates linearly between pixel centres", "[image]") {
  // 2×1 → 4×1: scale 1/2, radius 1; centres at 0.25, 0.75, 1.25, 1.75 input pixels.
  // Output 1 (centre 0.75): weights 1 - 0.25 = 0.75 on pixel 0 and 1 - 0.75 = 0.25 on pixel 1.
  // Output 0 (centre 0.25): pixel 0 has weight 0.75 and pixel -1 is outside, so it is pixel 0.
  Pixels px = constant_pixels(2, 1, 1, 0);
  px.data = {0, 100};
  const Image out = resize_pixels(px, 4, 1);
  CHECK(out.at(0, 0, 0) == Approx(0.0).margin(1e-5));
  CHECK(out.at(0, 0, 1) == Approx(25.0).margin(1e-5));
  CHECK(out.at(0, 0, 2) == Approx(75.0).margin(1e-5));
  CHECK(out.at(0, 0, 3) == Approx(100.0).margin(1e-5));
}

TEST_CASE("image: 1x1, 1x1000 and 1000x1 images resize to a model size", "[image]") {
  const Pixels dot = constant_pixels(1, 1, 3, 77);
  const Image big = resize_pixels(dot, 224, 224);
  for (float v : big.data) CHECK(v == Approx(77.0f).margin(1e-4));

  // A vertical ramp v(y) = y · 255 / 999, 1 pixel wide. The filter is symmetric and its weights
  // are normalised, so wherever the window lies inside the image it returns the ramp's value at
  // the output centre: y = (j + 0.5) · 1000 / 224 - 0.5.
  Pixels tall = constant_pixels(1, 1000, 1, 0);
  Pixels wide = constant_pixels(1000, 1, 1, 0);
  std::vector<double> ramp(1000);
  for (int y = 0; y < 1000; ++y) ramp[size_t(y)] = y * 255.0 / 999.0;
  for (int y = 0; y < 1000; ++y) {
    tall.data[size_t(y)] = uint8_t(std::lround(ramp[size_t(y)]));
    wide.data[size_t(y)] = tall.data[size_t(y)];
  }
  const Image t = resize_pixels(tall, 224, 224);
  const Image w = resize_pixels(wide, 224, 224);
  for (int j = 2; j < 222; ++j) {
    const double centre = (j + 0.5) * 1000.0 / 224.0 - 0.5;
    const double expect = centre * 255.0 / 999.0;
    CHECK(t.at(0, j, 0) == Approx(expect).margin(0.5));  // 0.5: the ramp was rounded to bytes
    CHECK(t.at(0, j, 223) == t.at(0, j, 0));
    CHECK(w.at(0, 0, j) == Approx(expect).margin(0.5));
    CHECK(w.at(0, 223, j) == w.at(0, 0, j));
  }
}

TEST_CASE("image: resize refuses impossible sizes", "[image]") {
  const Pixels px = constant_pixels(4, 4, 1, 0);
  CHECK_THROWS_AS(resize_pixels(px, 0, 4), Error);
  CHECK_THROWS_AS(resize_pixels(px, 4, int(limits::max_image_side) + 1), Error);
  Pixels broken = px;
  broken.data.pop_back();
  CHECK_THROWS_AS(resize_pixels(broken, 2, 2), Error);
}

TEST_CASE("image: preprocess composites alpha, converts channels, normalises", "[image]") {
  // 3×1 RGBA: opaque (255, 0, 100), fully transparent black, black at alpha 51 (a = 0.2).
  Pixels px;
  px.w = 3;
  px.h = 1;
  px.channels = 4;
  px.data = {255, 0, 100, 255, 0, 0, 0, 0, 0, 0, 0, 51};
  Config cfg = small_config(3, 1, 3);
  cfg.mean = {0.5f, 0.4f, 0.3f};
  cfg.std = {0.5f, 0.25f, 0.2f};
  const Image x = preprocess(px, cfg);
  REQUIRE(x.c == 3);
  REQUIRE(x.h == 1);
  REQUIRE(x.w == 3);
  // Pixel 0: (1 - 0.5)/0.5 = 1; (0 - 0.4)/0.25 = -1.6; (100/255 - 0.3)/0.2 = 0.460784.
  CHECK(x.at(0, 0, 0) == Approx(1.0f).margin(1e-5));
  CHECK(x.at(1, 0, 0) == Approx(-1.6f).margin(1e-5));
  CHECK(x.at(2, 0, 0) == Approx(0.460784f).margin(1e-5));
  // Pixel 1, transparent, is white: (1 - 0.5)/0.5 = 1; (1 - 0.4)/0.25 = 2.4; (1 - 0.3)/0.2 = 3.5.
  CHECK(x.at(0, 0, 1) == Approx(1.0f).margin(1e-5));
  CHECK(x.at(1, 0, 1) == Approx(2.4f).margin(1e-5));
  CHECK(x.at(2, 0, 1) == Approx(3.5f).margin(1e-5));
  // Pixel 2: 0 · 0.2 + 255 · 0.8 = 204 → 0.8: (0.8 - 0.5)/0.5 = 0.6; (0.8 - 0.4)/0.25 = 1.6.
  CHECK(x.at(0, 0, 2) == Approx(0.6f).margin(1e-5));
  CHECK(x.at(1, 0, 2) == Approx(1.6f).margin(1e-5));

  // A gray model takes BT.601 luma: (0.299 · 255 + 0.587 · 0 + 0.114 · 100) / 255 = 0.343706,
  // normalised (0.343706 - 0.5)/0.5 = -0.312588.
  const Image g = preprocess(px, small_config(3, 1, 1));
  REQUIRE(g.c == 1);
  CHECK(g.at(0, 0, 0) == Approx(-0.312588f).margin(1e-5));
  CHECK(g.at(0, 0, 1) == Approx(1.0f).margin(1e-5));

  // A gray image for an RGB model repeats the gray value: 51/255 = 0.2 → (0.2 - 0.5)/0.5 = -0.6.
  const Pixels gray = constant_pixels(2, 2, 1, 51);
  const Image rgb = preprocess(gray, small_config(2, 2, 3));
  REQUIRE(rgb.c == 3);
  for (float v : rgb.data) CHECK(v == Approx(-0.6f).margin(1e-5));

  // Resizing happens before normalisation: a constant 4×4 image at 4×4 → 2×2 keeps its value.
  const Image small = preprocess(constant_pixels(4, 4, 3, 255), small_config(2, 2, 3));
  CHECK(small.w == 2);
  for (float v : small.data) CHECK(v == Approx(1.0f).margin(1e-5));
}

TEST_CASE("image: preprocess refuses channel counts it cannot convert", "[image]") {
  const Pixels rgb = constant_pixels(2, 2, 3, 0);
  try {
    preprocess(rgb, small_config(2, 2, 2));
    FAIL("an RGB image was fed to a 2-channel model");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_shape);
  }
  const Pixels two = constant_pixels(2, 2, 2, 51);
  const Image x = preprocess(two, small_config(2, 2, 2));  // exactly 2 channels: taken as they are
  for (float v : x.data) CHECK(v == Approx(-0.6f).margin(1e-5));

  Config bad = small_config(2, 2, 3);
  bad.mean.pop_back();
  try {
    preprocess(rgb, bad);
    FAIL("a config with 2 means for 3 channels was used");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_config);
  }
}

TEST_CASE("image: denormalise inverts preprocess when no resize is needed", "[image]") {
  Config cfg = small_config(6, 5, 3);
  cfg.mean = {0.485f, 0.456f, 0.406f};
  cfg.std = {0.229f, 0.224f, 0.225f};
  const Pixels px = make_pixels(6, 5, 3, 11u);
  const Pixels back = denormalise(preprocess(px, cfg), cfg);
  CHECK(back.w == 6);
  CHECK(back.h == 5);
  CHECK(back.channels == 3);
  CHECK(back.data == px.data);

  const Config gray_cfg = small_config(6, 5, 1);
  const Pixels gray = make_pixels(6, 5, 1, 13u);
  const Pixels gray_back = denormalise(preprocess(gray, gray_cfg), gray_cfg);
  REQUIRE(gray_back.channels == 3);
  for (size_t i = 0; i < gray.data.size(); ++i) {
    CHECK(gray_back.data[3 * i] == gray.data[i]);
    CHECK(gray_back.data[3 * i + 1] == gray.data[i]);
    CHECK(gray_back.data[3 * i + 2] == gray.data[i]);
  }

  // Out-of-range values clamp to 0 … 255.
  Image x(3, 1, 2);
  x.data = {-100.0f, 100.0f, -100.0f, 100.0f, -100.0f, 100.0f};
  const Pixels clamped = denormalise(x, small_config(2, 1, 3));
  CHECK(clamped.data == std::vector<uint8_t>{0, 0, 0, 255, 255, 255});
}
