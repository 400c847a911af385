/* Emscripten's SSE2 header with its four float → int32 conversions vectorised. Only on the wasm
   include path.

   Emscripten 3.1.6 emulates _mm_cvt(t)ps_epi32 and _mm_cvt(t)pd_epi32 one lane at a time through
   lrint (its "TODO: optimize"), and Eigen's SSE path calls them in every exp (pldexp: the power of
   two is built from the rounded exponent): Eigen's float exp ran at 9 ns a value in node 20, 3× the
   C library's scalar expf, and made the GELU derivative 7× as slow as the GELU itself. The
   versions below keep x86's results exactly (the nearest or truncated integer; 0x80000000 where
   that does not fit in int32 or the input is NaN; the pd forms zero the upper two lanes) with
   SIMD128's rounding and saturating conversion, and a select for the out-of-range lanes. */
#pragma once

#define _mm_cvtps_epi32 vitlens_emscripten_mm_cvtps_epi32
#define _mm_cvttps_epi32 vitlens_emscripten_mm_cvttps_epi32
#define _mm_cvtpd_epi32 vitlens_emscripten_mm_cvtpd_epi32
#define _mm_cvttpd_epi32 vitlens_emscripten_mm_cvttpd_epi32
#include_next <emmintrin.h>
#undef _mm_cvtps_epi32
#undef _mm_cvttps_epi32
#undef _mm_cvtpd_epi32
#undef _mm_cvttpd_epi32

/* r: the input rounded to an integer, four floats. */
static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
vitlens_cvt_rounded_ps(v128_t r) {
  /* |r| < 2³¹ is false for NaN, ±∞ and everything out of range; −2³¹ itself converts to
     0x80000000 either way. */
  const v128_t fits = wasm_f32x4_lt(wasm_f32x4_abs(r), wasm_f32x4_splat(2147483648.0f));
  return (__m128i)wasm_v128_bitselect(wasm_i32x4_trunc_sat_f32x4(r), wasm_i32x4_splat((int)0x80000000), fits);
}

/* r: the input rounded to an integer, two doubles; lanes 2 and 3 of the result are 0. */
static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
vitlens_cvt_rounded_pd(v128_t r) {
  const v128_t fits64 = wasm_f64x2_lt(wasm_f64x2_abs(r), wasm_f64x2_splat(2147483648.0));
  /* one 32-bit mask lane per double (its low half); lanes 2 and 3 keep the conversion's zeros */
  const v128_t fits = wasm_i32x4_shuffle(fits64, wasm_i32x4_splat(-1), 0, 2, 4, 4);
  return (__m128i)wasm_v128_bitselect(wasm_i32x4_trunc_sat_f64x2_zero(r), wasm_i32x4_splat((int)0x80000000), fits);
}

static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
_mm_cvtps_epi32(__m128 a) {
  return vitlens_cvt_rounded_ps(wasm_f32x4_nearest((v128_t)a));
}

static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
_mm_cvttps_epi32(__m128 a) {
  return vitlens_cvt_rounded_ps(wasm_f32x4_trunc((v128_t)a));
}

static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
_mm_cvtpd_epi32(__m128d a) {
  return vitlens_cvt_rounded_pd(wasm_f64x2_nearest((v128_t)a));
}

static __inline__ __m128i __attribute__((__always_inline__, __nodebug__))
_mm_cvttpd_epi32(__m128d a) {
  return vitlens_cvt_rounded_pd(wasm_f64x2_trunc((v128_t)a));
}
