// io.cpp — whole-file reading and writing with vitlens errors.
//
// Every failure names the path and the operating system's reason (strerror), so that the user
// can fix it. A regular file is measured before it is read, so an oversized file is refused
// (Error limit) before any of it is allocated; pipes and devices are read in chunks and refused
// as soon as they pass the limit.
#include "vitlens/io/io.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

std::string os_reason(int err) { return std::strerror(err); }

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (int64_t(1) << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

Error too_large(const std::string& path, int64_t max_bytes) {
  return Error(ErrorCode::limit, "'" + path + "' is larger than " + size_text(max_bytes) +
                                     ", the most vitlens reads for this kind of file");
}

// Closes the file on every path out of read_file / write_file.
struct FileCloser {
  std::FILE* f;
  ~FileCloser() {
    if (f) std::fclose(f);
  }
};

}  // namespace

std::vector<uint8_t> read_file(const std::string& path, int64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    throw Error(ErrorCode::io, "cannot open '" + path + "' for reading: " + os_reason(err));
  }
  FileCloser closer{f};
  auto read_failed = [&path](int err) {
    return Error(ErrorCode::io, "cannot read '" + path + "': " + os_reason(err));
  };

  struct stat st;
  if (fstat(fileno(f), &st) != 0) throw read_failed(errno);
  if (S_ISDIR(st.st_mode)) throw read_failed(EISDIR);
  std::vector<uint8_t> bytes;
  if (S_ISREG(st.st_mode)) {
    if (int64_t(st.st_size) > max_bytes) throw too_large(path, max_bytes);
    bytes.resize(size_t(st.st_size));
    const size_t n = std::fread(bytes.data(), 1, bytes.size(), f);
    if (n < bytes.size() && std::ferror(f)) throw read_failed(errno);
    bytes.resize(n);
  }
  // Whatever the size told (nothing for a pipe or device; a file may also have grown) is read
  // in chunks, refused as soon as it passes the limit.
  std::vector<uint8_t> chunk(size_t(1) << 16);
  for (;;) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), f);
    if (int64_t(bytes.size()) + int64_t(n) > max_bytes) throw too_large(path, max_bytes);
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
    if (n < chunk.size()) {
      if (std::ferror(f)) throw read_failed(errno);
      break;
    }
  }
  return bytes;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    const int err = errno;
    throw Error(ErrorCode::io, "cannot open '" + path + "' for writing: " + os_reason(err));
  }
  FileCloser closer{f};
  if (size > 0 && std::fwrite(data, 1, size, f) != size) {
    const int err = errno;
    throw Error(ErrorCode::io, "cannot write '" + path + "': " + os_reason(err));
  }
  closer.f = nullptr;
  if (std::fclose(f) != 0) {
    const int err = errno;
    throw Error(ErrorCode::io, "cannot finish writing '" + path + "': " + os_reason(err));
  }
}

void write_file(const std::string& path, const std::string& text) {
  write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

uint32_t crc32(const uint8_t* data, size_t size) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

}  // namespace vitlens
