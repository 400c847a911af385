// stb_impl.cpp — the implementations of Debian's stb_image 2.27 (PNG, JPEG, BMP from memory)
// and stb_image_write, in a file of their own so that they alone are compiled with -fwrapv
// (core/CMakeLists.txt). The guards around them are in image.cpp.
//
// Why -fwrapv: stb_image 2.27 does its JPEG arithmetic in int on values a corrupt file controls.
// The DC predictor is a running sum of per-block differences with no bound, and a progressive
// scan then shifts it left by the file's successive-approximation bit (up to 13), so a
// 83-byte progressive JPEG overflows int in stbi__jpeg_decode_block_prog_dc (UBSan, found by
// fuzz_image; fuzz/regressions/image/int-overflow-prog-dc.jpg). Upstream 2.28 refuses such
// files with explicit range checks; Debian's 2.27 has none. Signed overflow is undefined
// behaviour, and an optimiser may assume it never happens. With -fwrapv it is defined as two's
// complement wrap-around: a corrupt file then decodes to wrong pixels (as it would in any
// decoder) with every index and length untouched, since none derive from those sums.
//
// One line added to stb_image.h (core/CMakeLists.txt writes the copy into the build tree from
// Debian's header; configuring fails if the header changes): its JPEG bit reader keeps up to 32
// bits in code_buffer with code_bits of them valid, and the bits below the valid ones are always
// zero. When a refill meets a marker it stops early, and 2.27's fast AC path (and get_bit,
// get_bits, extend_receive) then take more bits than are valid: code_bits goes negative, the
// bits taken were those zeros, and code_buffer is 0. The next refill shifts a byte left by
// 24 − code_bits, 32 or more for code_bits ≤ −8: undefined behaviour (UBSan "shift exponent 32",
// found by fuzz_image; fuzz/regressions/image/shift-negative-code-bits.jpg). Upstream 2.28 refuses
// the file at the fast AC path. The added line counts the over-read bits as consumed
// (code_bits = 0 when negative), which is the state the reader is in: an empty buffer, so the
// refill is defined and the corrupt file decodes to whatever its bits say.
#include "stb_budget.h"

#include <cstdlib>

// The bound, per thread, kept in this file only (a thread_local shared across files is reached
// through a wrapper function that GCC's sanitizer build got wrong: a null address).
static thread_local size_t alloc_limit = 0;

void vitlens::stb::set_alloc_limit(size_t bytes) { alloc_limit = bytes; }

static void* stb_alloc(size_t size) { return size <= alloc_limit ? std::calloc(1, size) : nullptr; }
static void* stb_realloc(void* p, size_t size) { return size <= alloc_limit ? std::realloc(p, size) : nullptr; }

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_MALLOC(sz) stb_alloc(sz)
#define STBI_REALLOC(p, newsz) stb_realloc((p), (newsz))
#define STBI_FREE(p) std::free(p)
#include <stb_patched/stb_image.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>
