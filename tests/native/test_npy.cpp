// test_npy.cpp — the .npy reader and writer, and whole-file io: round trips, hand-built files of
// every dtype and version, and each malformed file mapped to its ErrorCode.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/io/npy.h"

using namespace vitlens;

namespace {

// A .npy file from its parts: version bytes, the header text as given (no padding added), and
// the raw data bytes. The header length field is the true length unless `claimed_len` is set.
std::vector<uint8_t> make_npy(int major, int minor, const std::string& header,
                              const std::vector<uint8_t>& data, int64_t claimed_len = -1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), uint8_t(minor)};
  const uint64_t len = claimed_len >= 0 ? uint64_t(claimed_len) : header.size();
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(uint8_t(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }\n";
}

std::vector<uint8_t> le_bytes(uint64_t v, int n) {
  std::vector<uint8_t> out;
  for (int i = 0; i < n; ++i) out.push_back(uint8_t(v >> (8 * i)));
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out;
  for (float f : v) {
    uint32_t r;
    std::memcpy(&r, &f, 4);
    const std::vector<uint8_t> b = le_bytes(r, 4);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

ErrorCode code_of(const std::vector<uint8_t>& file) {
  try {
    parse_npy(file.data(), file.size());
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("parse_npy accepted a malformed file");
  return ErrorCode::io;
}

}  // namespace

TEST_CASE("npy: float32 round trip in memory keeps every bit", "[npy]") {
  const std::vector<float> v = {0.0f, -0.0f, 1.5f, -3.25e-7f, 1e30f,
                                std::numeric_limits<float>::infinity()};
  const std::vector<uint8_t> file = encode_npy_f32({2, 3}, v.data());

  // The header as numpy writes it: version 1.0, data aligned to 64 bytes (10 + 60 characters of
  // dict + '\n' round up to 128), ending in '\n'.
  REQUIRE(file.size() == 128 + 6 * 4);
  CHECK(std::memcmp(file.data(), "\x93NUMPY\x01\x00", 8) == 0);
  CHECK(file[8] + 256 * file[9] == 128 - 10);
  const std::string header(file.begin() + 10, file.begin() + 128);
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');

  const NpyArray a = parse_npy(file.data(), file.size());
  CHECK(a.dtype == "<f4");
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  REQUIRE(a.data.size() == v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float back = float(a.data[i]);
    CHECK(std::memcmp(&back, &v[i], 4) == 0);
  }
}

TEST_CASE("npy: float32 and float64 round trip through files", "[npy]") {
  const vitlens::test::ScratchFile f32_file("npy_f32.npy"), f64_file("npy_f64.npy");
  const std::vector<float> f = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  write_npy_f32(f32_file.path, {5}, f.data());
  const NpyArray a = read_npy(f32_file.path);
  CHECK(a.shape == std::vector<int64_t>{5});
  CHECK(a.data == std::vector<double>{1, 2, 3, 4, 5});

  const std::vector<double> d = {0.1, -1e300, 4.9e-324, std::nan("")};
  write_npy_f64(f64_file.path, {2, 1, 2}, d.data());
  const NpyArray b = read_npy(f64_file.path);
  CHECK(b.dtype == "<f8");
  CHECK(b.shape == std::vector<int64_t>{2, 1, 2});
  REQUIRE(b.data.size() == 4);
  CHECK(b.data[0] == 0.1);
  CHECK(b.data[1] == -1e300);
  CHECK(b.data[2] == 4.9e-324);
  CHECK(std::isnan(b.data[3]));
}

TEST_CASE("npy: scalars, 1-D and empty shapes", "[npy]") {
  const float one = 7.5f;
  const std::vector<uint8_t> scalar = encode_npy_f32({}, &one);
  const std::string header(scalar.begin() + 10, scalar.end() - 4);
  CHECK(header.find("'shape': (), }") != std::string::npos);
  const NpyArray s = parse_npy(scalar.data(), scalar.size());
  CHECK(s.shape.empty());
  CHECK(s.data == std::vector<double>{7.5});

  const std::vector<uint8_t> empty = encode_npy_f32({0, 3}, nullptr);
  const NpyArray e = parse_npy(empty.data(), empty.size());
  CHECK(e.shape == std::vector<int64_t>{0, 3});
  CHECK(e.data.empty());

  const std::vector<uint8_t> vec = make_npy(1, 0, dict("<f4", "(2,)"), f32_bytes({1.0f, -2.0f}));
  CHECK(parse_npy(vec.data(), vec.size()).data == std::vector<double>{1.0, -2.0});
}

TEST_CASE("npy: every dtype we read converts to the right numbers", "[npy]") {
  SECTION("<i4 and <i8, with negatives") {
    std::vector<uint8_t> d = le_bytes(uint32_t(-5), 4);
    const std::vector<uint8_t> d2 = le_bytes(2147483647u, 4);
    d.insert(d.end(), d2.begin(), d2.end());
    const std::vector<uint8_t> f = make_npy(1, 0, dict("<i4", "(2,)"), d);
    CHECK(parse_npy(f.data(), f.size()).data == std::vector<double>{-5, 2147483647});

    const std::vector<uint8_t> g =
        make_npy(1, 0, dict("<i8", "(1,)"), le_bytes(uint64_t(-(int64_t(1) << 40)), 8));
    CHECK(parse_npy(g.data(), g.size()).data == std::vector<double>{-1099511627776.0});
  }
  SECTION("one-byte types: |u1, <u1, |i1, |b1") {
    const std::vector<uint8_t> bytes = {0, 1, 200, 255};
    const std::vector<uint8_t> u = make_npy(1, 0, dict("|u1", "(2, 2)"), bytes);
    CHECK(parse_npy(u.data(), u.size()).data == std::vector<double>{0, 1, 200, 255});
    const std::vector<uint8_t> u2 = make_npy(1, 0, dict("<u1", "(4,)"), bytes);
    CHECK(parse_npy(u2.data(), u2.size()).data == std::vector<double>{0, 1, 200, 255});
    const std::vector<uint8_t> i = make_npy(1, 0, dict("|i1", "(4,)"), bytes);
    CHECK(parse_npy(i.data(), i.size()).data == std::vector<double>{0, 1, -56, -1});
    const std::vector<uint8_t> b = make_npy(1, 0, dict("|b1", "(4,)"), bytes);
    const NpyArray ab = parse_npy(b.data(), b.size());
    CHECK(ab.dtype == "|b1");
    CHECK(ab.data == std::vector<double>{0, 1, 1, 1});
  }
}

TEST_CASE("npy: header variants numpy and other writers produce", "[npy]") {
  const std::vector<uint8_t> data = f32_bytes({1.0f, 2.0f});
  SECTION("versions 2.0 and 3.0 have a 4-byte header length") {
    for (int major : {2, 3}) {
      const std::vector<uint8_t> f = make_npy(major, 0, dict("<f4", "(1, 2)"), data);
      const NpyArray a = parse_npy(f.data(), f.size());
      CHECK(a.shape == std::vector<int64_t>{1, 2});
      CHECK(a.data == std::vector<double>{1, 2});
    }
  }
  SECTION("double quotes, key order, no trailing comma, Python 2 long literals") {
    const std::string h = "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f4\"}  \n";
    const std::vector<uint8_t> f = make_npy(1, 0, h, data);
    CHECK(parse_npy(f.data(), f.size()).shape == std::vector<int64_t>{2});
  }
}

TEST_CASE("npy: each malformed file gives its ErrorCode", "[npy]") {
  const std::vector<uint8_t> data = f32_bytes({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  const std::vector<uint8_t> good = make_npy(1, 0, dict("<f4", "(2, 3)"), data);
  REQUIRE_NOTHROW(parse_npy(good.data(), good.size()));

  SECTION("empty file") { CHECK(code_of({}) == ErrorCode::truncated); }
  SECTION("bad magic") {
    std::vector<uint8_t> f = good;
    f[1] = 'X';
    CHECK(code_of(f) == ErrorCode::bad_format);
    CHECK(code_of({'P', 'K', 3, 4}) == ErrorCode::bad_format);
  }
  SECTION("bad version") {
    CHECK(code_of(make_npy(4, 0, dict("<f4", "(2, 3)"), data)) == ErrorCode::bad_version);
    CHECK(code_of(make_npy(1, 1, dict("<f4", "(2, 3)"), data)) == ErrorCode::bad_version);
    CHECK(code_of(make_npy(0, 0, dict("<f4", "(2, 3)"), data)) == ErrorCode::bad_version);
  }
  SECTION("truncated preamble and header") {
    CHECK(code_of(std::vector<uint8_t>(good.begin(), good.begin() + 9)) == ErrorCode::truncated);
    CHECK(code_of(std::vector<uint8_t>(good.begin(), good.begin() + 30)) == ErrorCode::truncated);
  }
  SECTION("header length past the end of the file") {
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(2, 3)"), {}, 60000)) == ErrorCode::truncated);
    CHECK(code_of(make_npy(2, 0, dict("<f4", "(2, 3)"), {}, 0xFFFFFFF0ll)) == ErrorCode::limit);
    CHECK(code_of(make_npy(3, 0, dict("<f4", "(2, 3)"), {}, 1 << 20)) == ErrorCode::truncated);
  }
  SECTION("truncated data") {
    std::vector<uint8_t> f = good;
    f.pop_back();
    CHECK(code_of(f) == ErrorCode::truncated);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(2, 3)"), {})) == ErrorCode::truncated);
  }
  SECTION("bytes after the data") {
    std::vector<uint8_t> f = good;
    f.push_back(0);
    CHECK(code_of(f) == ErrorCode::bad_format);
  }
  SECTION("Fortran order") {
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(2, 3)", true), data)) == ErrorCode::bad_format);
  }
  SECTION("big-endian") {
    CHECK(code_of(make_npy(1, 0, dict(">f4", "(2, 3)"), data)) == ErrorCode::bad_format);
    CHECK(code_of(make_npy(1, 0, dict(">i8", "(3,)"), data)) == ErrorCode::bad_format);
  }
  SECTION("unsupported dtypes") {
    for (const char* d : {"|O", "<c8", "<U3", "<f2", "<u4", "=f4", "f4", "", "|f4"}) {
      CHECK(code_of(make_npy(1, 0, dict(d, "(2, 3)"), data)) == ErrorCode::bad_format);
    }
    const std::string structured =
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }\n";
    CHECK(code_of(make_npy(1, 0, structured, data)) == ErrorCode::bad_format);
  }
  SECTION("absurd shapes") {
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(1099511627776,)"), data)) == ErrorCode::limit);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(100000, 100000)"), data)) == ErrorCode::limit);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(65536, 65536, 65536, 65536, 65536)"), data)) ==
          ErrorCode::limit);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(99999999999999999999999999,)"), data)) ==
          ErrorCode::limit);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), data)) ==
          ErrorCode::limit);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(-1, 3)"), data)) == ErrorCode::bad_format);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(6)"), data)) == ErrorCode::bad_format);
    CHECK(code_of(make_npy(1, 0, dict("<f4", "(2.0, 3)"), data)) == ErrorCode::bad_format);
  }
  SECTION("malformed header dicts") {
    const std::vector<std::string> headers = {
        "",
        "{}",
        "{'descr': '<f4', 'shape': (2, 3), }",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3",
        "{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "['descr', '<f4']",
    };
    for (const std::string& h : headers) {
      CAPTURE(h);
      CHECK(code_of(make_npy(1, 0, h, data)) == ErrorCode::bad_format);
    }
  }
}

TEST_CASE("npy: every prefix of a valid file is refused as truncated", "[npy]") {
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const std::vector<uint8_t> file = encode_npy_f32({3}, v.data());
  for (size_t n = 0; n < file.size(); ++n) {
    CAPTURE(n);
    const std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    CHECK(code_of(prefix) == ErrorCode::truncated);
  }
}

TEST_CASE("npy: corrupted bytes give an Error, never a crash", "[npy]") {
  const std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<uint8_t> file = encode_npy_f32({2, 2}, v.data());
  uint32_t state = 12345;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> f = file;
    const int edits = 1 + int(next() % 4);
    for (int e = 0; e < edits; ++e) f[next() % 64] = uint8_t(next());
    try {
      const NpyArray a = parse_npy(f.data(), f.size());
      int64_t count = 1;
      for (int64_t d : a.shape) count *= d;
      CHECK(int64_t(a.data.size()) == count);
    } catch (const Error&) {
    }
  }
}

TEST_CASE("npy: writing refuses shapes it cannot describe", "[npy]") {
  const float x = 0.0f;
  CHECK_THROWS_AS(encode_npy_f32({-1}, &x), Error);
  try {
    encode_npy_f32({1 << 20, 1 << 20}, &x);
    FAIL("an absurd shape was encoded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::limit);
  }
}

TEST_CASE("io: errors name the path and the reason; limits apply before reading", "[npy][io]") {
  const vitlens::test::ScratchFile missing_file("npy_does_not_exist.npy"), bytes_file("npy_bytes.bin"),
      unwritable_file("npy_no_such_dir/x.bin"), garbage_file("npy_garbage.npy");
  const std::string missing = missing_file.path;
  try {
    read_npy(missing);
    FAIL("a missing file was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()).find(missing) != std::string::npos);
    CHECK(std::string(e.what()).find("No such file or directory") != std::string::npos);
  }

  const std::string path = bytes_file.path;
  write_file(path, "0123456789");
  CHECK(read_file(path, 10) == std::vector<uint8_t>{'0', '1', '2', '3', '4', '5', '6', '7', '8',
                                                     '9'});
  try {
    read_file(path, 9);
    FAIL("the limit was not applied");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::limit);
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }

  try {
    read_file(VITLENS_BINARY_DIR, 1 << 20);
    FAIL("a directory was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
  }
  try {
    write_file(unwritable_file.path, "x");
    FAIL("a file was written into a missing directory");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
    CHECK(std::string(e.what()).find("no_such_dir") != std::string::npos);
  }

  const std::vector<uint8_t> garbage = {'n', 'o', 't', ' ', 'n', 'p', 'y'};
  const std::string bad = garbage_file.path;
  write_file(bad, garbage.data(), garbage.size());
  try {
    read_npy(bad);
    FAIL("garbage was read as .npy");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::bad_format);
    CHECK(std::string(e.what()).find(bad) != std::string::npos);
  }
}
