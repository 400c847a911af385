// exp.h — e^x for x ≤ 0 in float and double, in a form SIMD compilers vectorise: the softmax
// (after subtracting the row maximum) and the GELU derivative's e^(−x²/2) use it. Inline so that
// the loops calling it vectorise; exp_shifted, the softmax's loop, is written in SIMD128 in wasm.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace vitlens {

// e^x for x ≤ 0 (a softmax argument after subtracting the row maximum), within 1 ulp for every
// float in [−87, 0] (checked exhaustively against double once; every 97th float in
// tests/native/test_exp.cpp). In wasm it takes 1.8 ns a value against 3.2 for Eigen's vectorised
// exp (with core/wasm_shims/emmintrin.h; 9 without): it uses only operations that clang
// (SIMD128) and GCC (AVX) vectorise and needs no range reduction for positive x: x = n·ln2 + r,
// n rounded by adding 1.5·2²³, ln2 split in two (Cody–Waite); e^r ≈ 1 + r + r²·P(r) on
// |r| ≤ ln2/2 with the degree-5 P of Cephes' expf; 2ⁿ written into the exponent bits.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;  // keeps 2ⁿ normal: e⁻⁸⁷ ≈ 1.6e-38 stands in for smaller values
  constexpr float kShift = 12582912.0f;  // 1.5·2²³: t's low mantissa bits hold round(x·log₂e)
  const float t = x * 1.44269504f + kShift;
  const float n = t - kShift;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 = 0.693359375 − 2.12…e-4
  float poly = 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const float er = poly * r * r + r + 1.0f;
  uint32_t t_bits, shift_bits;  // unsigned: a NaN's bits shift out without overflow (NaN · 2ⁿ is NaN)
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&shift_bits, &kShift, sizeof kShift);
  const uint32_t scale_bits = (t_bits - shift_bits + 127) << 23;  // 2ⁿ
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return er * scale;
}

// e^x for x ≤ 0 in double, within 1.1 ulp (tests/native/test_exp.cpp, against long double), in the
// form of the float exp_nonpositive above (Eigen's double exp runs at ~8 ns per value in wasm;
// this one vectorises): x = n·ln2 + r, n rounded by adding 1.5·2⁵², ln2 split in two (Cody–Waite,
// fdlibm's constants: n·ln2_hi is exact); e^r by its Taylor series to r¹³ on |r| ≤ ln2/2
// (truncation < 5e-18); 2ⁿ written into the exponent bits. The series' tail P(r) = Σ_k r^k/(k+2)!
// is evaluated in Estrin's form (pairs, then r², r⁴, r⁸): a chain of 5 dependent steps instead of
// Horner's 12, which V8's SIMD code does not hide (wasm, 17 k values: 7.6–10.3 → 6.1 ns a value).
inline double exp_nonpositive(double x) {
  x = x < -708.0 ? -708.0 : x;  // keeps 2ⁿ normal: e⁻⁷⁰⁸ ≈ 3e-308 stands in for smaller values
  constexpr double kShift = 6755399441055744.0;  // 1.5·2⁵²: t's low mantissa bits hold round(x·log₂e)
  const double t = x * 1.4426950408889634 + kShift;
  const double n = t - kShift;
  const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double p01 = 1.0 / 2 + r * (1.0 / 6), p23 = 1.0 / 24 + r * (1.0 / 120);  // 1/2! … 1/13!
  const double p45 = 1.0 / 720 + r * (1.0 / 5040), p67 = 1.0 / 40320 + r * (1.0 / 362880);
  const double p89 = 1.0 / 3628800 + r * (1.0 / 39916800), p1011 = 1.0 / 479001600 + r * (1.0 / 6227020800.0);
  const double poly = (p01 + p23 * r2) + (p45 + p67 * r2) * r4 + (p89 + p1011 * r2) * r8;
  const double er = poly * r2 + r + 1.0;
  uint64_t t_bits, shift_bits;  // unsigned: a NaN's bits shift out without overflow (NaN · 2ⁿ is NaN)
  std::memcpy(&t_bits, &t, sizeof t);
  std::memcpy(&shift_bits, &kShift, sizeof kShift);
  const uint64_t scale_bits = (t_bits - shift_bits + 1023) << 52;  // 2ⁿ
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return er * scale;
}

#if defined(__wasm_simd128__)
// exp_nonpositive of four floats / two doubles: the same operations in the same order, hence the
// same bits, except that the clamp is one pmax (x < lo ? lo : x, NaN kept). Compiled from the
// scalar form, clang-14 makes that clamp f32x4.max / f64x2.max, whose NaN and signed-zero rules
// V8 lowers to eight x64 instructions at the head of the longest dependency chain; with pmax
// the softmax's exponentials took 0.74× the time in float and 0.76× in double (node 20, Zen 3,
// 197 × 197 and 260 × 65 values).
inline v128_t exp_nonpositive_f32x4(v128_t x) {
  x = wasm_f32x4_pmax(x, wasm_f32x4_splat(-87.0f));
  const v128_t shift = wasm_f32x4_splat(12582912.0f);
  const v128_t t = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504f)), shift);
  const v128_t n = wasm_f32x4_sub(t, shift);
  const v128_t r = wasm_f32x4_add(wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f))),
                                  wasm_f32x4_mul(n, wasm_f32x4_splat(2.12194440e-4f)));
  v128_t poly = wasm_f32x4_splat(1.9875691500e-4f);
  poly = wasm_f32x4_add(wasm_f32x4_mul(poly, r), wasm_f32x4_splat(1.3981999507e-3f));
  poly = wasm_f32x4_add(wasm_f32x4_mul(poly, r), wasm_f32x4_splat(8.3334519073e-3f));
  poly = wasm_f32x4_add(wasm_f32x4_mul(poly, r), wasm_f32x4_splat(4.1665795894e-2f));
  poly = wasm_f32x4_add(wasm_f32x4_mul(poly, r), wasm_f32x4_splat(1.6666665459e-1f));
  poly = wasm_f32x4_add(wasm_f32x4_mul(poly, r), wasm_f32x4_splat(5.0000001201e-1f));
  const v128_t er = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(poly, r), r), r), wasm_f32x4_splat(1.0f));
  const v128_t scale = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_sub(t, shift), wasm_i32x4_splat(127)), 23);  // 2ⁿ
  return wasm_f32x4_mul(er, scale);
}

inline v128_t exp_nonpositive_f64x2(v128_t x) {
  x = wasm_f64x2_pmax(x, wasm_f64x2_splat(-708.0));
  const v128_t shift = wasm_f64x2_splat(6755399441055744.0);
  const v128_t t = wasm_f64x2_add(wasm_f64x2_mul(x, wasm_f64x2_splat(1.4426950408889634)), shift);
  const v128_t n = wasm_f64x2_sub(t, shift);
  const v128_t r = wasm_f64x2_sub(wasm_f64x2_sub(x, wasm_f64x2_mul(n, wasm_f64x2_splat(6.93147180369123816490e-01))),
                                  wasm_f64x2_mul(n, wasm_f64x2_splat(1.90821492927058770002e-10)));
  const v128_t r2 = wasm_f64x2_mul(r, r), r4 = wasm_f64x2_mul(r2, r2), r8 = wasm_f64x2_mul(r4, r4);
  const auto pair = [&r](double a, double b) { return wasm_f64x2_add(wasm_f64x2_splat(a), wasm_f64x2_mul(r, wasm_f64x2_splat(b))); };
  const v128_t p01 = pair(1.0 / 2, 1.0 / 6), p23 = pair(1.0 / 24, 1.0 / 120);
  const v128_t p45 = pair(1.0 / 720, 1.0 / 5040), p67 = pair(1.0 / 40320, 1.0 / 362880);
  const v128_t p89 = pair(1.0 / 3628800, 1.0 / 39916800), p1011 = pair(1.0 / 479001600, 1.0 / 6227020800.0);
  const v128_t poly =
      wasm_f64x2_add(wasm_f64x2_add(wasm_f64x2_add(p01, wasm_f64x2_mul(p23, r2)),
                                    wasm_f64x2_mul(wasm_f64x2_add(p45, wasm_f64x2_mul(p67, r2)), r4)),
                     wasm_f64x2_mul(wasm_f64x2_add(p89, wasm_f64x2_mul(p1011, r2)), r8));
  const v128_t er = wasm_f64x2_add(wasm_f64x2_add(wasm_f64x2_mul(poly, r2), r), wasm_f64x2_splat(1.0));
  const v128_t scale = wasm_i64x2_shl(wasm_i64x2_add(wasm_i64x2_sub(t, shift), wasm_i64x2_splat(1023)), 52);  // 2ⁿ
  return wasm_f64x2_mul(er, scale);
}
#endif

// out[j] = e^(in[j] − c) for j < n, c ≥ every in[j] (a softmax row's numerators; out may be in):
// exactly exp_nonpositive(in[j] − c), T float or double, four or two lanes at a time in wasm.
template <typename T>
inline void exp_shifted(T* out, const T* in, T c, int n) {
  int j = 0;
#if defined(__wasm_simd128__)
  constexpr bool f32 = sizeof(T) == sizeof(float);
  const v128_t vc = f32 ? wasm_f32x4_splat(float(c)) : wasm_f64x2_splat(double(c));
  for (; j + int(16 / sizeof(T)) <= n; j += int(16 / sizeof(T))) {
    const v128_t x = wasm_v128_load(in + j);
    wasm_v128_store(out + j, f32 ? exp_nonpositive_f32x4(wasm_f32x4_sub(x, vc)) : exp_nonpositive_f64x2(wasm_f64x2_sub(x, vc)));
  }
#endif
  for (; j < n; ++j) out[j] = exp_nonpositive(in[j] - c);
}

}  // namespace vitlens
