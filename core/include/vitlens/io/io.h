// io.h — whole-file reading and writing with the engine's errors and limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vitlens {

// Reads a whole file; throws Error(io) if it cannot, Error(limit) past max_bytes.
std::vector<uint8_t> read_file(const std::string& path, int64_t max_bytes);
void write_file(const std::string& path, const uint8_t* data, size_t size);
void write_file(const std::string& path, const std::string& text);

// CRC-32 of ISO 3309 / RFC 1952 (reflected polynomial 0xEDB88320): the model file's checksum and
// gzip's.
uint32_t crc32(const uint8_t* data, size_t size);

}  // namespace vitlens
