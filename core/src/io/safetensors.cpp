// safetensors.cpp — parsing safetensors files (the importer that maps their names onto a ViT is
// import.cpp).
//
// The parser checks every offset against the bytes present and the header against the limits.
#include "vitlens/io/safetensors.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(ErrorCode code, const std::string& msg) {
  throw Error(code, "safetensors: " + msg);
}

enum class DType { f32, f16, bf16, f64, other };

DType dtype_of(const std::string& dtype) {
  if (dtype == "F32") return DType::f32;
  if (dtype == "F16") return DType::f16;
  if (dtype == "BF16") return DType::bf16;
  if (dtype == "F64") return DType::f64;
  return DType::other;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::other: return 0;
  }
  return 0;
}
size_t dtype_size(const std::string& dtype) { return dtype_size(dtype_of(dtype)); }

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);              // subnormal or zero
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400), exp - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

SafeTensors parse_unchecked(const ByteReader& read, uint64_t size) {
  if (size < 8) fail(ErrorCode::truncated, "the file is shorter than its 8-byte header length");
  uint8_t length[8];
  read(0, 8, length);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(length[i]) << (8 * i);
  if (n > uint64_t(limits::max_header_bytes))
    fail(ErrorCode::limit, "header length " + std::to_string(n) + " exceeds the limit (is this a safetensors file?)");
  if (n > size - 8) fail(ErrorCode::truncated, "the file ends inside its JSON header");
  std::vector<uint8_t> header(static_cast<size_t>(n));
  if (n) read(8, size_t(n), header.data());
  // The JSON parser keeps the last of two equal keys: a tensor named twice is refused here rather
  // than one of its two entries silently dropped.
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json h = json::parse(header.begin(), header.end(), note_keys, false);
  if (h.is_discarded() || !h.is_object()) fail(ErrorCode::bad_format, "the header is not a JSON object");
  if (!duplicate.empty()) fail(ErrorCode::unknown_tensor, "tensor '" + duplicate + "' appears twice in the header");
  if (h.size() > size_t(limits::max_tensors)) fail(ErrorCode::limit, "too many tensors");
  SafeTensors st;
  st.read = read;
  st.data_offset = 8 + n;
  st.data_size = size - 8 - n;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) st.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const json& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' lacks dtype, shape or data_offsets");
    SafeTensor x;
    x.dtype = t["dtype"].is_string() ? t["dtype"].get<std::string>() : "";
    if (!t["shape"].is_array() || t["shape"].size() > size_t(limits::max_tensor_rank))
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' has an invalid shape");
    uint64_t count = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned()) fail(ErrorCode::bad_shape, "tensor '" + it.key() + "' has a negative dimension");
      const uint64_t v = d.get<uint64_t>();
      if (v > uint64_t(limits::max_params)) fail(ErrorCode::limit, "tensor '" + it.key() + "' is too large");
      count *= v;
      if (count > uint64_t(limits::max_params)) fail(ErrorCode::limit, "tensor '" + it.key() + "' is too large");
      x.shape.push_back(int64_t(v));
    }
    const json& off = t["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(ErrorCode::bad_format, "tensor '" + it.key() + "' has invalid data_offsets");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > st.data_size || e > uint64_t(SIZE_MAX))
      fail(ErrorCode::truncated, "tensor '" + it.key() + "' lies outside the file (truncated download?)");
    const size_t es = dtype_size(x.dtype);
    if (es && e - b != count * es)
      fail(ErrorCode::bad_shape, "tensor '" + it.key() + "' holds " + std::to_string(e - b) + " bytes, its shape " +
                                     shape_str(x.shape) + " needs " + std::to_string(count * es));
    x.begin = size_t(b);
    x.end = size_t(e);
    st.tensors[it.key()] = x;
  }
  // No two tensors may share bytes: otherwise a small file could describe a model of any size.
  std::vector<std::pair<size_t, const std::string*>> starts;  // (begin, name) of non-empty tensors
  for (const auto& [name, x] : st.tensors)
    if (x.end > x.begin) starts.emplace_back(x.begin, &name);
  std::sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : *a.second < *b.second;
  });
  for (size_t i = 1; i < starts.size(); ++i) {
    const SafeTensor& prev = st.tensors.at(*starts[i - 1].second);
    if (prev.end > starts[i].first)
      fail(ErrorCode::bad_format, "tensors '" + *starts[i - 1].second + "' and '" + *starts[i].second +
                                      "' overlap in the data section (each tensor must have bytes of its own)");
  }
  return st;
}

}  // namespace

SafeTensors parse_safetensors(const ByteReader& read, uint64_t size) {
  try {
    return parse_unchecked(read, size);
  } catch (const json::exception& e) {
    fail(ErrorCode::bad_format, std::string("malformed header: ") + e.what());
  }
}

SafeTensors parse_safetensors(const uint8_t* bytes, size_t size) {
  return parse_safetensors([bytes](uint64_t offset, size_t n, uint8_t* out) { std::memcpy(out, bytes + offset, n); },
                           uint64_t(size));
}

size_t SafeTensors::float_count(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error(ErrorCode::missing_tensor, "checkpoint: tensor '" + name + "' is missing");
  const SafeTensor& t = it->second;
  const size_t es = dtype_size(t.dtype);
  if (!es)
    throw Error(ErrorCode::bad_format, "checkpoint: tensor '" + name + "' has dtype '" + t.dtype +
                                           "'; only F32, F16, BF16 and F64 can be imported");
  return (t.end - t.begin) / es;
}

std::vector<float> SafeTensors::floats(const std::string& name) const {
  std::vector<float> out(float_count(name));
  read_floats(name, out.data(), out.size());
  return out;
}

void SafeTensors::read_floats(const std::string& name, float* out, size_t n) const {
  const size_t count = float_count(name);  // Error for a missing tensor or another dtype
  assert(n == count);
  (void)count;
  const SafeTensor& t = tensors.at(name);
  const DType type = dtype_of(t.dtype);
  // F32 is read straight into `out`; the other dtypes through a small buffer, one chunk at a time
  // (one loop per dtype: the dtype is read once, not per element). Then one finiteness pass.
  const uint64_t at = data_offset + t.begin;
  if (type == DType::f32) {
    if (n) read(at, n * 4, reinterpret_cast<uint8_t*>(out));  // little-endian hosts only (x86, wasm)
  } else {
    const size_t es = dtype_size(type), chunk = size_t(1) << 14;  // elements per read
    std::vector<uint8_t> buf(std::min(n, chunk) * es);
    for (size_t first = 0; first < n; first += chunk) {
      const size_t m = std::min(chunk, n - first);
      read(at + first * es, m * es, buf.data());
      const uint8_t* p = buf.data();
      float* o = out + first;
      switch (type) {
        case DType::f64:
          for (size_t i = 0; i < m; ++i) {
            double v;
            std::memcpy(&v, p + i * 8, 8);
            o[i] = float(v);
          }
          break;
        case DType::f16:
          for (size_t i = 0; i < m; ++i) o[i] = half_to_float(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
          break;
        case DType::bf16:
          for (size_t i = 0; i < m; ++i) {
            const uint32_t bits = uint32_t(p[2 * i] | p[2 * i + 1] << 8) << 16;
            std::memcpy(&o[i], &bits, 4);
          }
          break;
        case DType::f32:
        case DType::other: break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(out[i])) throw Error(ErrorCode::bad_value, "checkpoint: tensor '" + name + "' contains NaN or Inf");
}

}  // namespace vitlens
