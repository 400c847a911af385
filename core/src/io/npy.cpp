// npy.cpp — reading and writing NumPy .npy arrays.
//
// The format (numpy/lib/format.py, "NEP 1"): the magic "\x93NUMPY", a major and a minor version
// byte, the header length (u16 little-endian in 1.0, u32 in 2.0 and 3.0), then a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a
// newline, then the raw C-order data. The dict is parsed here by a small strict scanner, not
// evaluated: only the three keys, each once, with string / bool / tuple-of-int values.
//
// Untrusted input: every read is bounds-checked against `size`, the element count is checked for
// overflow and against limits::max_npy_elements before anything is allocated, and the data must
// fill the rest of the file exactly. Values are assembled byte by byte, so the reader does not
// depend on the host's byte order.
#include "vitlens/io/npy.h"

#include <cstring>

#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

Error npy_error(ErrorCode code, const std::string& what) {
  return Error(code, "not a readable .npy file: " + what);
}

uint64_t load_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// An element type we read: its kind and its size in bytes.
struct DType {
  char kind;  // 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int size;   // bytes
};

DType parse_descr(const std::string& descr) {
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string type = descr.size() > 1 ? descr.substr(1) : "";
  if (descr == "O" || (!type.empty() && type[0] == 'O')) {
    throw npy_error(ErrorCode::bad_format,
                    "object dtype '" + descr + "' (pickled Python objects) is not supported; "
                    "save a numeric array");
  }
  const bool one_byte = type == "u1" || type == "i1" || type == "b1";
  if (one_byte && (order == '|' || order == '<' || order == '>')) {
    return {type[0], 1};
  }
  if (order == '>') {
    throw npy_error(ErrorCode::bad_format,
                    "big-endian dtype '" + descr + "'; re-save it little-endian with "
                    "numpy.save(path, a.astype(a.dtype.newbyteorder('<')))");
  }
  if (order == '<' && type == "f4") return {'f', 4};
  if (order == '<' && type == "f8") return {'f', 8};
  if (order == '<' && type == "i4") return {'i', 4};
  if (order == '<' && type == "i8") return {'i', 8};
  throw npy_error(ErrorCode::bad_format,
                  "unsupported dtype '" + descr + "'; vitlens reads float32, float64, int32, "
                  "int64, uint8, int8 and bool: convert with a.astype(numpy.float32)");
}

// A strict scanner for the header dict. Positions are checked against `end` before every read.
class HeaderParser {
 public:
  HeaderParser(const char* begin, const char* end) : p_(begin), end_(end) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (have_descr) fail("'descr' appears twice");
        if (peek() == '[') fail("structured dtypes (a list of fields) are not supported");
        descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) fail("'fortran_order' appears twice");
        fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) fail("'shape' appears twice");
        shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      skip_space();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' in the header");
    }
    ++p_;
    skip_space();
    if (p_ != end_) fail("unexpected text after the header dict");
    if (!have_descr || !have_fortran || !have_shape) {
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw npy_error(ErrorCode::bad_format, what);
  }
  int peek() const { return p_ < end_ ? static_cast<unsigned char>(*p_) : -1; }
  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != static_cast<unsigned char>(c)) {
      fail(std::string("expected '") + c + "' in the header");
    }
    ++p_;
  }
  std::string parse_string() {
    const int quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string in the header");
    ++p_;
    std::string s;
    while (peek() != quote) {
      if (peek() < 0) fail("unterminated string in the header");
      if (peek() == '\\') fail("escaped characters are not expected in the header");
      s += *p_++;
      if (s.size() > 64) fail("overlong string in the header");
    }
    ++p_;
    return s;
  }
  bool parse_bool() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "True", 4) == 0) {
      p_ += 4;
      return true;
    }
    if (end_ - p_ >= 5 && std::memcmp(p_, "False", 5) == 0) {
      p_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  int64_t parse_dim() {
    if (peek() < '0' || peek() > '9') fail("a shape entry is not a non-negative integer");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (*p_++ - '0');
      if (v > limits::max_npy_elements) {
        throw npy_error(ErrorCode::limit, "a dimension exceeds " +
                                              std::to_string(limits::max_npy_elements) +
                                              " elements");
      }
    }
    if (peek() == 'L') ++p_;  // Python 2 long literal, as old numpy wrote it
    return v;
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    skip_space();
    if (peek() == ')') {
      ++p_;
      return shape;
    }
    for (;;) {
      skip_space();
      shape.push_back(parse_dim());
      if (int64_t(shape.size()) > limits::max_tensor_rank) {
        throw npy_error(ErrorCode::limit, "more than " + std::to_string(limits::max_tensor_rank) +
                                              " dimensions");
      }
      skip_space();
      if (peek() == ',') {
        ++p_;
        skip_space();
        if (peek() == ')') break;
        continue;
      }
      if (peek() == ')') {
        if (shape.size() == 1) fail("a one-element shape must be written '(n,)'");
        break;
      }
      fail("expected ',' or ')' in the shape");
    }
    ++p_;
    return shape;
  }

  const char* p_;
  const char* end_;
};

// Elements of `shape`, or -1 past limits::max_npy_elements. No overflow: every factor is at most
// the limit (dims are checked on parsing) and the product is checked after each step.
int64_t element_count(const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d == 0) return 0;
    if (d > limits::max_npy_elements) return -1;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    n *= d;
    if (n > limits::max_npy_elements) return -1;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Header and data for a C-order little-endian array of `count` items of `item` bytes each;
// `store(i, out)` writes item i.
template <class Store>
std::vector<uint8_t> encode_npy(const std::vector<int64_t>& shape, const char* descr, int item,
                                Store store) {
  for (int64_t d : shape) {
    if (d < 0) throw Error(ErrorCode::bad_shape, "cannot save an array with a negative dimension");
  }
  if (int64_t(shape.size()) > limits::max_tensor_rank) {
    throw Error(ErrorCode::limit, "cannot save an array with more than " +
                                      std::to_string(limits::max_tensor_rank) + " dimensions");
  }
  const int64_t count = element_count(shape);
  if (count < 0) {
    throw Error(ErrorCode::limit, "cannot save an array of more than " +
                                      std::to_string(limits::max_npy_elements) + " elements");
  }
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Pad with spaces so that the data starts on a 64-byte boundary; the header ends in '\n'.
  const size_t preamble = 10;
  const size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';

  std::vector<uint8_t> out(total + size_t(count) * size_t(item));
  std::memcpy(out.data(), npy_magic, 6);
  out[6] = 1;
  out[7] = 0;
  out[8] = uint8_t(header.size() & 0xff);
  out[9] = uint8_t(header.size() >> 8);
  std::memcpy(out.data() + preamble, header.data(), header.size());
  uint8_t* data = out.data() + total;
  for (int64_t i = 0; i < count; ++i) store(size_t(i), data + size_t(i) * size_t(item));
  return out;
}

void store_le(uint8_t* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out[i] = uint8_t(v >> (8 * i));
}

}  // namespace

NpyArray parse_npy(const uint8_t* bytes, size_t size) {
  if (size == 0) throw npy_error(ErrorCode::truncated, "the file is empty");
  const size_t magic_seen = size < 6 ? size : 6;
  if (std::memcmp(bytes, npy_magic, magic_seen) != 0) {
    throw npy_error(ErrorCode::bad_format, "it does not start with the .npy magic \\x93NUMPY");
  }
  if (size < 8) throw npy_error(ErrorCode::truncated, "the file ends inside the preamble");
  const int major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw npy_error(ErrorCode::bad_version,
                    "format version " + std::to_string(major) + "." + std::to_string(minor) +
                        " (vitlens reads 1.0, 2.0 and 3.0); re-save it with numpy.save");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = 8 + len_bytes;
  if (size < preamble) throw npy_error(ErrorCode::truncated, "the file ends inside the preamble");
  const uint64_t header_len = load_le(bytes + 8, int(len_bytes));
  if (header_len > uint64_t(limits::max_header_bytes)) {
    throw npy_error(ErrorCode::limit, "the header announces " + std::to_string(header_len) +
                                          " bytes, more than the header limit");
  }
  if (header_len > size - preamble) {
    throw npy_error(ErrorCode::truncated, "the header announces " + std::to_string(header_len) +
                                              " bytes but the file ends before");
  }
  const char* header = reinterpret_cast<const char*>(bytes + preamble);

  NpyArray a;
  bool fortran = false;
  HeaderParser(header, header + header_len).parse(a.dtype, fortran, a.shape);
  if (fortran) {
    throw npy_error(ErrorCode::bad_format,
                    "Fortran-order (column-major) data; re-save it with "
                    "numpy.save(path, numpy.ascontiguousarray(a))");
  }
  const DType t = parse_descr(a.dtype);
  const int64_t count = element_count(a.shape);
  if (count < 0) {
    throw npy_error(ErrorCode::limit, "shape " + shape_text(a.shape) + " has more than " +
                                          std::to_string(limits::max_npy_elements) + " elements");
  }

  const size_t data_start = preamble + size_t(header_len);
  const uint64_t need = uint64_t(count) * uint64_t(t.size);
  const uint64_t have = size - data_start;
  if (have < need) {
    throw npy_error(ErrorCode::truncated, "shape " + shape_text(a.shape) + " of " + a.dtype +
                                              " needs " + std::to_string(need) +
                                              " data bytes, the file has " + std::to_string(have));
  }
  if (have > need) {
    throw npy_error(ErrorCode::bad_format, std::to_string(have - need) +
                                               " unexpected bytes after the data of shape " +
                                               shape_text(a.shape));
  }

  const uint8_t* p = bytes + data_start;
  a.data.resize(size_t(count));
  for (size_t i = 0; i < size_t(count); ++i, p += t.size) {
    const uint64_t raw = load_le(p, t.size);
    double v = 0.0;
    if (t.kind == 'f' && t.size == 4) {
      const uint32_t r32 = uint32_t(raw);
      float f;
      std::memcpy(&f, &r32, 4);
      v = f;
    } else if (t.kind == 'f') {
      std::memcpy(&v, &raw, 8);
    } else if (t.kind == 'i' && t.size == 8) {
      v = double(int64_t(raw));
    } else if (t.kind == 'i' && t.size == 4) {
      v = double(int32_t(uint32_t(raw)));
    } else if (t.kind == 'i') {
      v = double(int8_t(uint8_t(raw)));
    } else if (t.kind == 'u') {
      v = double(raw);
    } else {
      v = raw != 0 ? 1.0 : 0.0;
    }
    a.data[i] = v;
  }
  return a;
}

NpyArray read_npy(const std::string& path) {
  const int64_t max_bytes = 12 + limits::max_header_bytes + limits::max_npy_elements * 8;
  const std::vector<uint8_t> bytes = read_file(path, max_bytes);
  try {
    return parse_npy(bytes.data(), bytes.size());
  } catch (const Error& e) {
    throw Error(e.code(), "'" + path + "' is " + e.what());
  }
}

std::vector<uint8_t> encode_npy_f32(const std::vector<int64_t>& shape, const float* data) {
  return encode_npy(shape, "<f4", 4, [data](size_t i, uint8_t* out) {
    uint32_t r;
    std::memcpy(&r, &data[i], 4);
    store_le(out, r, 4);
  });
}

void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  const std::vector<uint8_t> bytes = encode_npy_f32(shape, data);
  write_file(path, bytes.data(), bytes.size());
}

void write_npy_f64(const std::string& path, const std::vector<int64_t>& shape, const double* data) {
  const std::vector<uint8_t> bytes = encode_npy(shape, "<f8", 8, [data](size_t i, uint8_t* out) {
    uint64_t r;
    std::memcpy(&r, &data[i], 8);
    store_le(out, r, 8);
  });
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace vitlens
