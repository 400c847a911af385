// npz.cpp — writing NumPy .npz archives (see npz.h).
//
// The zip layout (PKWARE APPNOTE.TXT 6.3, sections 4.3.7, 4.3.12, 4.3.16), all little-endian:
//   per member   local file header  "PK\3\4", version needed 20, flags 0, method 0 (stored),
//                                    time 0, date 0x0021 (1980-01-01), CRC-32, sizes, name length,
//                                    extra length 0, the name; then the member's bytes
//   then         central directory  "PK\1\2" per member: the same fields plus version made by 20,
//                                    comment/disk/attribute fields 0 and the local header's offset
//   and          end of directory   "PK\5\6": entry counts, directory size and offset
// Stored members need no compressor, and numpy.load reads them like any other.
#include "vitlens/io/npz.h"

#include <set>

#include "vitlens/io/io.h"
#include "vitlens/tensor/error.h"

namespace vitlens {

namespace {

void put16(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(uint8_t(v & 0xFF));
  out.push_back(uint8_t((v >> 8) & 0xFF));
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
  put16(out, v & 0xFFFF);
  put16(out, v >> 16);
}

constexpr uint64_t zip32_max = 0xFFFFFFFFull;  // beyond it a zip needs ZIP64 records

void check_name(const std::string& name, std::set<std::string>& seen) {
  if (name.empty() || name.size() > 200)
    throw Error(ErrorCode::bad_argument, "npz: an array name must have 1 to 200 characters");
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      throw Error(ErrorCode::bad_argument, "npz: array name '" + name + "' may hold only letters, digits and '_'");
  if (!seen.insert(name).second) throw Error(ErrorCode::bad_argument, "npz: array name '" + name + "' appears twice");
}

}  // namespace

std::vector<uint8_t> encode_npz(const std::vector<NpzMember>& members) {
  std::set<std::string> seen;
  uint64_t total = 22;  // the end-of-directory record
  for (const NpzMember& m : members) {
    check_name(m.name, seen);
    if (m.npy.size() > zip32_max)
      throw Error(ErrorCode::limit, "npz: array '" + m.name + "' is over 4 GiB, which needs ZIP64 (not written)");
    total += 30 + 46 + 2 * (m.name.size() + 4) + m.npy.size();
  }
  if (total > zip32_max || members.size() > 0xFFFF)
    throw Error(ErrorCode::limit, "npz: the archive would be over 4 GiB or 65535 members, which needs ZIP64 (not written)");

  std::vector<uint8_t> out, dir;
  out.reserve(size_t(total));
  for (const NpzMember& m : members) {
    const std::string file = m.name + ".npy";
    const uint32_t crc = crc32(m.npy.data(), m.npy.size()), size = uint32_t(m.npy.size()),
                   offset = uint32_t(out.size());
    // local file header (4.3.7)
    put32(out, 0x04034b50);
    put16(out, 20);      // version needed to extract: 2.0
    put16(out, 0);       // general purpose flags
    put16(out, 0);       // method: stored
    put16(out, 0);       // time 00:00:00
    put16(out, 0x0021);  // date 1980-01-01
    put32(out, crc);
    put32(out, size);    // compressed size
    put32(out, size);    // uncompressed size
    put16(out, uint32_t(file.size()));
    put16(out, 0);       // extra field length
    out.insert(out.end(), file.begin(), file.end());
    out.insert(out.end(), m.npy.begin(), m.npy.end());
    // central directory header (4.3.12)
    put32(dir, 0x02014b50);
    put16(dir, 20);      // version made by: 2.0, MS-DOS attributes
    put16(dir, 20);
    put16(dir, 0);
    put16(dir, 0);
    put16(dir, 0);
    put16(dir, 0x0021);
    put32(dir, crc);
    put32(dir, size);
    put32(dir, size);
    put16(dir, uint32_t(file.size()));
    put16(dir, 0);       // extra field length
    put16(dir, 0);       // comment length
    put16(dir, 0);       // disk number start
    put16(dir, 0);       // internal attributes
    put32(dir, 0);       // external attributes
    put32(dir, offset);  // where the local header starts
    dir.insert(dir.end(), file.begin(), file.end());
  }
  const uint32_t dir_offset = uint32_t(out.size()), dir_size = uint32_t(dir.size());
  out.insert(out.end(), dir.begin(), dir.end());
  // end of central directory record (4.3.16)
  put32(out, 0x06054b50);
  put16(out, 0);  // this disk
  put16(out, 0);  // disk with the directory
  put16(out, uint32_t(members.size()));
  put16(out, uint32_t(members.size()));
  put32(out, dir_size);
  put32(out, dir_offset);
  put16(out, 0);  // comment length
  return out;
}

void write_npz(const std::string& path, const std::vector<NpzMember>& members) {
  const std::vector<uint8_t> bytes = encode_npz(members);
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace vitlens
