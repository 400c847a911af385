// npz.h — writing NumPy .npz archives: a zip file of .npy members, as numpy.savez writes them
// (stored, not compressed). numpy.load(path) reads the result; each member "NAME.npy" is the
// array `NAME`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vitlens {

struct NpzMember {
  std::string name;          // the array's name, without ".npy"; [A-Za-z0-9_], at most 200 bytes
  std::vector<uint8_t> npy;  // a whole .npy file (encode_npy_f32)
};

// The archive's bytes: every member stored (method 0) with its CRC-32, then the central
// directory. The file times are fixed (1980-01-01 00:00), so the bytes depend only on the members.
// Throws Error(bad_argument) for an empty, duplicate or ill-formed name, Error(limit) when a member
// or the archive would pass 4 GiB − 1 (this writer does not write ZIP64).
std::vector<uint8_t> encode_npz(const std::vector<NpzMember>& members);
void write_npz(const std::string& path, const std::vector<NpzMember>& members);

}  // namespace vitlens
