// image.cpp — decoding images (stb_image), resizing, normalising for a model, writing PNGs.
//
// Decoding: PNG, JPEG and BMP through Debian's stb_image 2.27, from memory only. The header is
// read first (stbi_info_from_memory) so that the pixel limit is enforced before any pixel buffer
// is allocated, and JPEG input is screened for a known memory-safety bug of that stb_image
// version (see "Guarding stb_image 2.27" below).
//
// Resizing: separable, antialiased bilinear as PIL's Image.resize(BILINEAR): a triangle filter of
// radius 1 input pixel, widened to radius `scale` when shrinking by `scale`, sampled at pixel
// centres ((i + 0.5) * scale), taps outside the image dropped and the remaining weights
// normalised per output pixel. Values stay floats (0…255) between the two passes.
#include "vitlens/io/image.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "vitlens/tensor/error.h"
#include "vitlens/io/io.h"
#include "vitlens/tensor/limits.h"

// Guarding stb_image 2.27 (Debian libstb-dev 0.0~git20220908.8b5f1f3).
//
// The bug (nothings/stb issue #1289, fixed upstream in 2.28 by PR #1297): a JPEG DHT segment
// gives 16 code counts, one per code length, and stb sums them without a bound. In
// stbi__process_marker (case 0xC4) and stbi__build_huffman the sum n indexes the fixed arrays
// of stbi__huffman (size[257], code[256], values[256]): with n > 256 they are written past their
// ends, over the neighbouring tables and the component state that follow them inside the
// decoder, and stbi__jpeg_huff_decode then turns the corrupted delta[] into symbol ids far
// outside values[] (an out-of-bounds read). A libFuzzer + ASan/UBSan run on this header finds it
// within seconds (UBSan: "index 257 out of bounds for type 'stbi_uc[257]'" at the DHT loop, ASan:
// global-buffer-overflow in stbi__jpeg_huff_decode). The bug sits in marker parsing shared by
// baseline and progressive JPEG, and stbi_info_from_memory reaches it too (it parses every
// marker before the frame header), so restricting JPEG to baseline would not help, and neither
// would padding the input: stb's memory reader is bounds-checked and returns 0 past the end.
//
// Guard 1, jpeg_guard below: before stb sees a buffer that it would try as JPEG (the first byte
// is 0xFF; PNG and BMP cannot start so), every DHT segment stb could parse is checked and the
// image is refused if a table it would build declares more than 256 codes. With at most 256
// codes and stb's own check that the code lengths fit (its "bad code lengths" error), every
// symbol id stays inside the tables, which is the bound 2.28 added. "Every DHT stb could parse"
// is over-approximated: the APPn/COM segments that open the file are skipped exactly as stb
// skips them (their payloads, EXIF and ICC data, may hold any bytes), and from the first other
// marker on, every byte pair FF C4 is treated as a possible DHT marker and its tables are walked
// as stb's DHT loop would walk them. stb can only read a DHT where the bytes FF C4 stand side by
// side (fill bytes FF may precede, and stuffed FF 00 pairs cannot form one), so none escapes.
// The walk is linear in the file size (dynamic programming from the end, below).
//
// Guard 2: stb allocates its decoder state with malloc and never clears its Huffman tables, so a
// scan that uses a table no DHT defined decodes with whatever the heap held (the same
// out-of-bounds symbol ids). STBI_MALLOC is calloc here: an undefined table is all zeros, which
// decodes every code to symbol 0 through the in-bounds fast path.
//
// Guard 3, an allocation budget: stb asks for memory on the strength of numbers it has not yet
// checked against the data. Its zlib inflater doubles its output buffer while a corrupt stream
// keeps producing symbols (a 195-byte 64 × 64 PNG made it request 2 GiB before it noticed the
// stream had ended: fuzz/regressions/image/oom-zlib-2gib.png), and its PNG reader grows the IDAT
// buffer to a chunk's declared length before reading the chunk. Natively such memory is never
// touched, but in wasm the heap grows to it and stays grown. So every stb allocation goes through
// stb_alloc (stb_impl.cpp), which refuses (stb then fails with "outofmem") any single request
// larger than the decode in progress can need: stb::Budget (stb_budget.h) sets that bound around
// each stb call from the file's size and the image's declared size (see decode_image). Outside a
// Budget the bound is 0 and nothing is allocated, so no stb call escapes it.
//
// Guard 4: stb's JPEG arithmetic overflows int on corrupt coefficients; its implementation is
// compiled with -fwrapv, which makes that overflow defined (stb_impl.cpp says why that is safe).
//
// Guard 5: its JPEG bit reader can over-read past a marker and then shift by 32 or more; one line
// added to a build-tree copy of the header makes that refill defined (stb_impl.cpp).
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include "stb_budget.h"

namespace vitlens {

namespace {

// ---------------------------------------------------------------------------------------------
// JPEG screening for stb_image 2.27 (guard 1 above).

bool is_app_or_com(uint8_t m) { return (m >= 0xE0 && m <= 0xEF) || m == 0xFE; }

void jpeg_guard(const uint8_t* b, size_t n) {
  if (n == 0 || b[0] != 0xFF) return;  // stb tries JPEG only on a leading 0xFF (SOI marker)
  auto byte = [b, n](size_t p) -> uint32_t { return p < n ? b[p] : 0; };  // as stb: 0 past the end

  // SOI, after any fill bytes, then the leading APPn / COM segments as stb skips them.
  size_t pos = 0;
  while (pos < n && b[pos] == 0xFF) ++pos;
  if (pos >= n || b[pos] != 0xD8) return;  // stb: "no SOI", not decoded as JPEG
  ++pos;
  for (;;) {
    if (pos >= n || b[pos] != 0xFF) break;
    size_t m = pos;
    while (m < n && b[m] == 0xFF) ++m;
    if (m + 2 >= n || !is_app_or_com(b[m])) break;
    const size_t length = size_t(b[m + 1]) << 8 | b[m + 2];  // counts itself, not the marker
    if (length < 2) break;
    pos = m + 1 + length;
  }
  const size_t start = pos;
  if (start >= n) return;

  // dist(p): bytes a DHT table walk starting at p consumes before it reaches a table whose
  // counts sum past 256 (0 if p is one), or `far` if it never does: a walk stops at a table
  // class/id stb rejects (class > 1 or id > 3). A table is 1 class/id byte, 16 counts, then
  // `sum` symbols, so the next one starts at p + 17 + sum <= p + 273 while the sum is legal;
  // a ring of 512 entries holds every dist() still needed while p runs down.
  const uint32_t far = 1u << 17;  // more than any DHT length (16 bits)
  std::vector<uint32_t> dist(512, far);
  auto dist_at = [&](size_t p) { return p >= n ? far : dist[p & 511]; };
  uint32_t window = 0;  // sum of byte(p + 1 .. p + 16): the 16 counts of a table at p
  for (size_t p = n; p-- > start;) {
    window += byte(p + 1);
    window -= byte(p + 17);
    const uint8_t q = b[p];
    uint32_t d = far;
    if ((q >> 4) <= 1 && (q & 15) <= 3) {
      d = window > 256 ? 0 : std::min(far, 17 + window + dist_at(p + 17 + window));
    }
    dist[p & 511] = d;
    if (q == 0xFF && byte(p + 1) == 0xC4) {
      // stb: L = length - 2; while (L > 0) { read a table; L -= 17 + sum; }
      const int64_t payload = int64_t(byte(p + 2) << 8 | byte(p + 3)) - 2;
      if (int64_t(dist_at(p + 4)) < payload) {
        throw Error(ErrorCode::bad_image,
                    "corrupt JPEG: a Huffman table (DHT) declares more than 256 codes, which the "
                    "bundled stb_image decoder cannot read safely; re-save the image (e.g. as "
                    "PNG) and try again");
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The size a header announces, read before stb_image sees the file: stb refuses an empty image,
// or one of more than 2^30 bytes of pixels, with the reason of the last format it tried
// ("unknown image type"), so the size is checked here first to say what is wrong.

uint32_t be16(const uint8_t* p) { return uint32_t(p[0]) << 8 | p[1]; }
uint32_t be32(const uint8_t* p) { return be16(p) << 16 | be16(p + 2); }
uint32_t le16(const uint8_t* p) { return uint32_t(p[1]) << 8 | p[0]; }
uint32_t le32(const uint8_t* p) { return le16(p + 2) << 16 | le16(p); }

// The width and height of a PNG (IHDR), BMP (info header) or JPEG (frame header) file; false when
// the bytes do not start like one of them or end before the size.
bool header_size(const uint8_t* b, size_t n, int64_t& w, int64_t& h) {
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (n >= 24 && std::memcmp(b, png, 8) == 0 && std::memcmp(b + 12, "IHDR", 4) == 0) {
    w = be32(b + 16);
    h = be32(b + 20);
    return true;
  }
  if (n >= 26 && b[0] == 'B' && b[1] == 'M') {
    const uint32_t info = le32(b + 14);  // the info header's size: 12 (OS/2, 16-bit sizes) or >= 40
    if (info == 12) {
      w = le16(b + 18);
      h = le16(b + 20);
      return true;
    }
    if (info < 40) return false;
    w = int32_t(le32(b + 18));
    h = std::abs(int64_t(int32_t(le32(b + 22))));  // negative: rows stored top-down
    return true;
  }
  if (n >= 4 && b[0] == 0xFF && b[1] == 0xD8) {
    // Marker segments after SOI until a frame header SOFn (C0…CF except DHT C4, JPG C8, DAC CC):
    // FF (fill FFs), the marker, a big-endian length counting itself, the payload.
    size_t p = 2;
    for (;;) {
      if (p >= n || b[p] != 0xFF) return false;
      while (p < n && b[p] == 0xFF) ++p;
      if (p + 2 >= n) return false;
      const uint8_t m = b[p];
      if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) {  // markers without a length
        ++p;
        continue;
      }
      if (m == 0xD9 || m == 0xDA) return false;  // the end, or scan data, before any frame header
      const size_t length = be16(b + p + 1);
      if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
        if (length < 7 || p + 8 > n) return false;  // precision, then height and width
        h = be16(b + p + 4);
        w = be16(b + p + 6);
        return true;
      }
      if (length < 2) return false;
      p += 1 + length;
    }
  }
  return false;
}


std::string stb_reason() {
  const char* r = stbi_failure_reason();
  return r ? r : "unknown reason";
}

// ---------------------------------------------------------------------------------------------
// Resampling.

// The taps of one axis: output i reads inputs first[i] … first[i] + count[i] - 1 with the
// weights weight[offset[i] …], which sum to 1.
struct AxisTaps {
  std::vector<int> first, count;
  std::vector<size_t> offset;
  std::vector<double> weight;
  size_t total() const { return weight.size(); }
};

AxisTaps axis_taps(int in, int out) {
  AxisTaps t;
  t.first.resize(size_t(out));
  t.count.resize(size_t(out));
  t.offset.resize(size_t(out));
  const double scale = double(in) / double(out);
  const double widen = std::max(scale, 1.0);  // radius of the triangle, in input pixels
  for (int i = 0; i < out; ++i) {
    const double centre = (i + 0.5) * scale;
    int lo = std::max(0, int(std::floor(centre - widen + 0.5)));
    int hi = std::min(in, int(std::floor(centre + widen + 0.5)));
    auto tri = [&](int x) { return std::max(0.0, 1.0 - std::fabs(x + 0.5 - centre) / widen); };
    while (lo < hi - 1 && tri(lo) == 0.0) ++lo;
    while (hi - 1 > lo && tri(hi - 1) == 0.0) --hi;
    double sum = 0.0;
    for (int x = lo; x < hi; ++x) sum += tri(x);
    t.first[size_t(i)] = lo;
    t.count[size_t(i)] = hi - lo;
    t.offset[size_t(i)] = t.weight.size();
    for (int x = lo; x < hi; ++x) t.weight.push_back(tri(x) / sum);
  }
  return t;
}

// Resizes one plane read through src(y, x) (a float 0…255) to out (oh, ow). The pass that
// makes less work goes first: a long thin image must be shrunk along its long side first.
template <class Source>
void resize_plane(const Source& src, int w, int h, const AxisTaps& tx, const AxisTaps& ty,
                  float* out) {
  const int ow = int(tx.first.size()), oh = int(ty.first.size());
  const double cost_h_first = double(h) * double(tx.total()) + double(ty.total()) * ow;
  const double cost_v_first = double(ty.total()) * w + double(oh) * double(tx.total());
  if (cost_h_first <= cost_v_first) {
    std::vector<float> tmp(size_t(h) * size_t(ow));  // (h, ow)
    for (int y = 0; y < h; ++y) {
      for (int i = 0; i < ow; ++i) {
        const double* wt = &tx.weight[tx.offset[size_t(i)]];
        const int x0 = tx.first[size_t(i)];
        double acc = 0.0;
        for (int k = 0; k < tx.count[size_t(i)]; ++k) acc += wt[k] * src(y, x0 + k);
        tmp[size_t(y) * ow + i] = float(acc);
      }
    }
    std::vector<double> acc(static_cast<size_t>(ow));  // (ow)
    for (int j = 0; j < oh; ++j) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const double* wt = &ty.weight[ty.offset[size_t(j)]];
      for (int k = 0; k < ty.count[size_t(j)]; ++k) {
        const float* row = &tmp[size_t(ty.first[size_t(j)] + k) * ow];
        for (int i = 0; i < ow; ++i) acc[size_t(i)] += wt[k] * row[i];
      }
      for (int i = 0; i < ow; ++i) out[size_t(j) * ow + i] = float(acc[size_t(i)]);
    }
  } else {
    std::vector<double> row(static_cast<size_t>(w));  // (w): one output row filtered vertically
    for (int j = 0; j < oh; ++j) {
      std::fill(row.begin(), row.end(), 0.0);
      const double* wt = &ty.weight[ty.offset[size_t(j)]];
      for (int k = 0; k < ty.count[size_t(j)]; ++k) {
        const int y = ty.first[size_t(j)] + k;
        for (int x = 0; x < w; ++x) row[size_t(x)] += wt[k] * src(y, x);
      }
      for (int i = 0; i < ow; ++i) {
        const double* wx = &tx.weight[tx.offset[size_t(i)]];
        const int x0 = tx.first[size_t(i)];
        double acc = 0.0;
        for (int k = 0; k < tx.count[size_t(i)]; ++k) acc += wx[k] * row[size_t(x0 + k)];
        out[size_t(j) * ow + i] = float(acc);
      }
    }
  }
}

void check_pixels(const Pixels& px) {
  if (px.w < 1 || px.h < 1 || px.channels < 1 || px.channels > limits::max_channels) {
    throw Error(ErrorCode::bad_shape, "an image of " + std::to_string(px.w) + "x" +
                                          std::to_string(px.h) + " pixels with " +
                                          std::to_string(px.channels) +
                                          " channels cannot be used");
  }
  if (int64_t(px.w) * px.h > limits::max_decoded_pixels) {
    throw Error(ErrorCode::limit, "an image of " + std::to_string(px.w) + "x" +
                                      std::to_string(px.h) + " pixels is larger than " +
                                      std::to_string(limits::max_decoded_pixels) +
                                      " pixels; shrink it first");
  }
  if (px.data.size() != size_t(px.w) * size_t(px.h) * size_t(px.channels)) {
    throw Error(ErrorCode::bad_shape, "pixel buffer of " + std::to_string(px.data.size()) +
                                          " bytes does not match " + std::to_string(px.w) + "x" +
                                          std::to_string(px.h) + "x" +
                                          std::to_string(px.channels));
  }
}

void check_output_size(int w, int h) {
  if (w < 1 || h < 1) {
    throw Error(ErrorCode::bad_argument, "cannot resize to " + std::to_string(w) + "x" +
                                             std::to_string(h) + " pixels");
  }
  if (w > limits::max_image_side || h > limits::max_image_side) {
    throw Error(ErrorCode::limit, "cannot resize to " + std::to_string(w) + "x" +
                                      std::to_string(h) + " pixels: a side is larger than " +
                                      std::to_string(limits::max_image_side));
  }
}

void check_normalisation(const Config& cfg) {
  if (cfg.channels < 1 || cfg.channels > limits::max_channels) {
    throw Error(ErrorCode::bad_config, "channels: " + std::to_string(cfg.channels) +
                                           " is not a usable channel count");
  }
  if (int(cfg.mean.size()) != cfg.channels || int(cfg.std.size()) != cfg.channels) {
    throw Error(ErrorCode::bad_config, "mean and std need one value per channel (" +
                                           std::to_string(cfg.channels) + ")");
  }
  for (int c = 0; c < cfg.channels; ++c) {
    if (!std::isfinite(cfg.mean[size_t(c)]) || !std::isfinite(cfg.std[size_t(c)]) ||
        cfg.std[size_t(c)] == 0.0f) {
      throw Error(ErrorCode::bad_config, "mean/std of channel " + std::to_string(c) +
                                             " must be finite with std non-zero");
    }
  }
}

// One model input channel read from 8-bit pixels: alpha composited over white, then converted
// to the model's channel count.
struct ModelChannel {
  enum class Kind { raw, gray, rgb, luma };
  const Pixels* px;
  Kind kind;
  int channel;     // raw: the channel read; rgb: 0, 1 or 2
  bool has_alpha;  // the last channel of px is alpha (2 or 4 channels)

  float composite(const uint8_t* p, int c) const {
    if (!has_alpha) return p[c];
    const float a = p[px->channels - 1] * (1.0f / 255.0f);
    return p[c] * a + 255.0f * (1.0f - a);
  }
  float operator()(int y, int x) const {
    const uint8_t* p = &px->data[(size_t(y) * size_t(px->w) + size_t(x)) * size_t(px->channels)];
    switch (kind) {
      case Kind::raw: return p[channel];
      case Kind::gray: return composite(p, 0);
      case Kind::rgb: return composite(p, channel);
      case Kind::luma:  // ITU-R BT.601 luma
        return 0.299f * composite(p, 0) + 0.587f * composite(p, 1) + 0.114f * composite(p, 2);
    }
    return 0.0f;
  }
};

ModelChannel model_channel(const Pixels& px, int model_channels, int c) {
  using Kind = ModelChannel::Kind;
  const bool gray = px.channels == 1 || px.channels == 2;
  const bool rgb = px.channels == 3 || px.channels == 4;
  const bool alpha = px.channels == 2 || px.channels == 4;
  if (model_channels == 3 && rgb) return {&px, Kind::rgb, c, alpha};
  if (model_channels == 3 && gray) return {&px, Kind::gray, 0, alpha};
  if (model_channels == 1 && gray) return {&px, Kind::gray, 0, alpha};
  if (model_channels == 1 && rgb) return {&px, Kind::luma, 0, alpha};
  if (px.channels == model_channels) return {&px, Kind::raw, c, false};
  throw Error(ErrorCode::bad_shape,
              "the model takes " + std::to_string(model_channels) + "-channel input and an image " +
                  "with " + std::to_string(px.channels) + " channels cannot be converted to it; " +
                  "give it an image with exactly " + std::to_string(model_channels) + " channels");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Decoding.

Pixels decode_image(const uint8_t* bytes, size_t size, int64_t max_pixels) {
  max_pixels = std::min(max_pixels, limits::max_decoded_pixels);
  if (size == 0) throw Error(ErrorCode::bad_image, "the image is empty (0 bytes)");
  if (int64_t(size) > limits::max_image_file_bytes) {
    throw Error(ErrorCode::limit, "an image file of " + std::to_string(size >> 20) +
                                      " MiB is larger than the " +
                                      std::to_string(limits::max_image_file_bytes >> 20) +
                                      " MiB limit");
  }
  jpeg_guard(bytes, size);

  int64_t hw = 0, hh = 0;
  if (header_size(bytes, size, hw, hh)) {
    if (hw < 1 || hh < 1) {
      throw Error(ErrorCode::bad_image, "the image has no pixels (" + std::to_string(hw) + "x" +
                                            std::to_string(hh) + ")");
    }
    const int64_t most = max_pixels;
    if (hw > most || hh > most || hw * hh > most) {  // each side first: 2^32 × 2^32 overflows
      throw Error(ErrorCode::limit, "an image of " + std::to_string(hw) + "x" + std::to_string(hh) +
                                        " pixels is larger than " +
                                        std::to_string(max_pixels) +
                                        " pixels; shrink it first");
    }
  }

  // Guard 3's bounds. Reading the header needs the decoder's own state (a JPEG decoder is about
  // 20 kB) and the file's bytes; decoding needs, per allocation, at most: the IDAT data gathered
  // by doubling (under 2 × the file), the inflated PNG rows (8 bytes a pixel for 16-bit RGBA,
  // plus a filter byte per row: stb sizes this buffer exactly and only a corrupt stream grows
  // it), the output and its conversions (up to 8 bytes a pixel), or a JPEG component's
  // coefficients (2 bytes a pixel of the image padded to whole 32 × 32 MCUs). 32 bytes a padded
  // pixel covers each with room to spare.
  const size_t base_budget = (size_t(1) << 20) + 2 * size;
  int w = 0, h = 0, comp = 0;
  int info_ok = 0;
  {
    stb::Budget budget(base_budget);
    info_ok = stbi_info_from_memory(bytes, int(size), &w, &h, &comp);
  }
  if (!info_ok) {
    throw Error(ErrorCode::bad_image, "not a PNG, JPEG or BMP image, or a corrupt one (" +
                                          stb_reason() + ")");
  }
  if (w < 1 || h < 1) {
    throw Error(ErrorCode::bad_image, "the image has no pixels (" + std::to_string(w) + "x" +
                                          std::to_string(h) + ")");
  }
  if (int64_t(w) * h > max_pixels) {
    throw Error(ErrorCode::limit, "an image of " + std::to_string(w) + "x" + std::to_string(h) +
                                      " pixels is larger than " +
                                      std::to_string(max_pixels) +
                                      " pixels; shrink it first");
  }

  int dw = 0, dh = 0, dc = 0;
  stbi_uc* data = nullptr;
  {
    stb::Budget budget(base_budget + 32 * (size_t(w) + 32) * (size_t(h) + 32));
    data = stbi_load_from_memory(bytes, int(size), &dw, &dh, &dc, 0);
  }
  if (!data) {
    if (std::strcmp(stb_reason().c_str(), "outofmem") == 0) {
      throw Error(ErrorCode::bad_image,
                  "corrupt image: decoding it would need more memory than a " + std::to_string(w) +
                      "x" + std::to_string(h) + " image can (a damaged compressed stream or chunk)");
    }
    throw Error(ErrorCode::bad_image, "corrupt image: " + stb_reason());
  }
  if (dw != w || dh != h || dc < 1 || dc > 4) {
    stbi_image_free(data);
    throw Error(ErrorCode::bad_image, "corrupt image: its header and its pixels disagree");
  }
  Pixels px;
  px.w = w;
  px.h = h;
  const size_t n = size_t(w) * size_t(h);
  if (dc == 2) {  // gray + alpha becomes RGBA: Pixels holds 1, 3 or 4 channels
    px.channels = 4;
    px.data.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      px.data[4 * i + 0] = px.data[4 * i + 1] = px.data[4 * i + 2] = data[2 * i];
      px.data[4 * i + 3] = data[2 * i + 1];
    }
  } else {
    px.channels = dc;
    px.data.assign(data, data + n * size_t(dc));
  }
  stbi_image_free(data);
  return px;
}

Pixels read_image_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, limits::max_image_file_bytes);
  try {
    return decode_image(bytes.data(), bytes.size());
  } catch (const Error& e) {
    throw Error(e.code(), "'" + path + "': " + e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Resizing and normalisation.

Image resize_pixels(const Pixels& px, int w, int h) {
  check_pixels(px);
  check_output_size(w, h);
  const AxisTaps tx = axis_taps(px.w, w), ty = axis_taps(px.h, h);
  Image out(px.channels, h, w);
  for (int c = 0; c < px.channels; ++c) {
    const ModelChannel src{&px, ModelChannel::Kind::raw, c, false};
    resize_plane(src, px.w, px.h, tx, ty, &out.data[size_t(c) * size_t(h) * size_t(w)]);
  }
  return out;
}

Image preprocess(const Pixels& px, const Config& cfg) {
  check_pixels(px);
  check_normalisation(cfg);
  check_output_size(cfg.image_w, cfg.image_h);
  const int w = cfg.image_w, h = cfg.image_h;
  const AxisTaps tx = axis_taps(px.w, w), ty = axis_taps(px.h, h);
  Image out(cfg.channels, h, w);
  for (int c = 0; c < cfg.channels; ++c) {
    float* plane = &out.data[size_t(c) * size_t(h) * size_t(w)];
    resize_plane(model_channel(px, cfg.channels, c), px.w, px.h, tx, ty, plane);
    const float mean = cfg.mean[size_t(c)], sd = cfg.std[size_t(c)];
    for (size_t i = 0; i < size_t(h) * size_t(w); ++i) plane[i] = (plane[i] / 255.0f - mean) / sd;
  }
  return out;
}

Pixels denormalise(const Image& x, const Config& cfg) {
  check_normalisation(cfg);
  if (x.c != cfg.channels || x.h < 1 || x.w < 1 ||
      x.data.size() != size_t(x.c) * size_t(x.h) * size_t(x.w)) {
    throw Error(ErrorCode::bad_shape, "an image tensor of " + std::to_string(x.c) + "x" +
                                          std::to_string(x.h) + "x" + std::to_string(x.w) +
                                          " does not fit the model's " +
                                          std::to_string(cfg.channels) + " channels");
  }
  // RGB out: a 3-channel model as it is, others by their first three channels, or by their
  // first channel repeated when they have fewer.
  Pixels px;
  px.w = x.w;
  px.h = x.h;
  px.channels = 3;
  px.data.resize(size_t(x.w) * size_t(x.h) * 3);
  const size_t plane = size_t(x.w) * size_t(x.h);
  for (int o = 0; o < 3; ++o) {
    const int c = x.c >= 3 ? o : 0;
    const float mean = cfg.mean[size_t(c)], sd = cfg.std[size_t(c)];
    const float* src = &x.data[size_t(c) * plane];
    for (size_t i = 0; i < plane; ++i) {
      float v = (src[i] * sd + mean) * 255.0f;
      v = std::isnan(v) ? 0.0f : std::min(255.0f, std::max(0.0f, v));
      px.data[i * 3 + size_t(o)] = uint8_t(std::lround(v));
    }
  }
  return px;
}

// ---------------------------------------------------------------------------------------------
// PNG output.

std::vector<uint8_t> encode_png(const Pixels& px) {
  check_pixels(px);
  if (px.channels > 4) {
    throw Error(ErrorCode::bad_shape, "a PNG holds 1 to 4 channels, not " +
                                          std::to_string(px.channels));
  }
  std::vector<uint8_t> out;
  auto append = [](void* context, void* data, int size) {
    auto* dst = static_cast<std::vector<uint8_t>*>(context);
    const auto* p = static_cast<const uint8_t*>(data);
    dst->insert(dst->end(), p, p + size);
  };
  if (!stbi_write_png_to_func(append, &out, px.w, px.h, px.channels, px.data.data(),
                              px.w * px.channels)) {
    throw Error(ErrorCode::io, "could not encode a " + std::to_string(px.w) + "x" +
                                   std::to_string(px.h) + " PNG (out of memory?)");
  }
  return out;
}

void write_png(const std::string& path, const Pixels& px) {
  const std::vector<uint8_t> bytes = encode_png(px);
  write_file(path, bytes.data(), bytes.size());
}

}  // namespace vitlens
