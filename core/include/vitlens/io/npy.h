// npy.h — reading and writing NumPy .npy arrays (format versions 1.0–3.0, little-endian).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vitlens {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, converted from '<f4', '<f8', '<i4', '<i8', '|u1',
                             // '|i1', '|b1'
  std::string dtype;         // the descr as stored, e.g. "<f4"
};

// Throws Error(bad_format / truncated / limit) on anything malformed, Fortran order, or
// big-endian data.
NpyArray parse_npy(const uint8_t* bytes, size_t size);
NpyArray read_npy(const std::string& path);

// Writes float32 ('<f4') or float64 ('<f8') C-order arrays.
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
void write_npy_f64(const std::string& path, const std::vector<int64_t>& shape, const double* data);
std::vector<uint8_t> encode_npy_f32(const std::vector<int64_t>& shape, const float* data);

}  // namespace vitlens
