// The code generator's prelude: math, float16/bfloat16 conversions and dropout's keep hash, written for the
// compute type T, which a source typedefs before this text (featgraph/backends/cpu/codegen.py: PRELUDE).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#if defined(__SSE4_1__)
#include <immintrin.h>
#endif
// exp that g++ vectorises (std::exp stays a scalar libm call without -ffast-math): Cephes' expf, a
// degree-6 polynomial on r = x - n ln2, scaled by 2^n as two powers of two (so 2^128 and subnormal
// results come out right); within 2 ulp of the exact value, 0 below -104, inf above 88.73, NaN kept.
// double keeps std::exp.
static inline float fg_pow2(int32_t k) {  // 2^k for -126 <= k <= 127
  const int32_t bits = (k + 127) << 23; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline float fg_exp(float x) {
  const float xc = std::min(std::max(x, -104.0f), 89.0f);
  const float n = std::nearbyint(xc * 1.44269504088896341f);
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f; p = p * r + 8.3334519073e-3f; p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f; p = p * r + 5.0000001201e-1f;
  const int32_t k = (int32_t)n, half = k / 2;
  const float v = (p * r * r + r + 1.0f) * fg_pow2(half) * fg_pow2(k - half);
  return x != x ? x : x < -104.0f ? 0.0f : x > 88.72284f ? std::numeric_limits<float>::infinity() : v;
}
static inline double fg_exp(double x) { return std::exp(x); }
// integer // and % as Python rounds them (C++ truncates toward zero); with a divisor and dividend known
// to be positive g++ folds them to plain / and %
static inline int64_t fg_floormod(int64_t a, int64_t b) {
  const int64_t r = a % b; return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static inline int64_t fg_floordiv(int64_t a, int64_t b) { return (a - fg_floormod(a, b)) / b; }
static inline T fg_sigmoid(T x) { return T(1) / (T(1) + fg_exp(-x)); }
// where(c, a, b) with both sides evaluated, as on the GPU: a load inside a C++ conditional is a masked
// load to g++, which does not vectorise the loop around it (an MLP's weight gradient, for one)
static inline T fg_select(T c, T a, T b) { return c != T(0) ? a : b; }
// float16/bfloat16 data is read and written as its 16 bits (uint16_t) and converted in registers with
// integer arithmetic and selects, which g++ vectorises (it leaves _Float16 conversions scalar without
// AVX-512 FP16). Both round to nearest even and keep NaN a (quiet) NaN, as torch's conversions do.
static inline float fg_bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint32_t fg_float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline T fg_from_bf16(uint16_t b) { return T(fg_bits_float((uint32_t)b << 16)); }
static inline uint16_t fg_to_bf16(T xin) {
  const uint32_t u = fg_float_bits((float)xin);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return (uint16_t)((nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// half -> float: the magnitude's bits moved into float position and scaled by 2^112 (exact for normals and
// subnormals alike), inf/NaN given the float's all-ones exponent
static inline T fg_from_half(uint16_t h) {
  const uint32_t bits = ((uint32_t)h & 0x7fffu) << 13;
  const uint32_t scaled = fg_float_bits(fg_bits_float(bits) * 5.192296858534828e33f);
  const uint32_t mag = bits >= 0x0f800000u ? bits | 0x7f800000u : scaled;
  return T(fg_bits_float(mag | (((uint32_t)h & 0x8000u) << 16)));
}
// float -> half: overflow to inf, subnormals rounded by a float addition, normals by integer rounding
static inline uint16_t fg_to_half(T xin) {
  const uint32_t u = fg_float_bits((float)xin), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  const uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
  const uint32_t sub = fg_float_bits(fg_bits_float(a) + fg_bits_float(126u << 23)) - (126u << 23);
  const uint32_t normal = (a + (((uint32_t)(15 - 127)) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  return (uint16_t)(sign | (a >= (143u << 23) ? big : a < (113u << 23) ? sub : normal));
}
static inline T fg_half(T x) { return fg_from_half(fg_to_half(x)); }
static inline T fg_bf16(T x) { return fg_from_bf16(fg_to_bf16(x)); }
// n (< 16) bfloat16 values widened into a buffer of T (a short row that a vectorised loop reads): eight,
// then four at a time by one zero-extending load and a shift where T is float, so the buffer is written in
// the 32- and 16-byte pieces the loop's loads take whole (g++'s own widening of four writes two 8-byte
// halves, and each read of the buffer waits for them, as a 32-byte read of four 16-byte pieces does)
static inline void fg_widen_bf16(const uint16_t* __restrict__ src, T* __restrict__ dst, int64_t n) {
  int64_t k = 0;
  if constexpr (std::is_same<T, float>::value) {  // (the casts below are no-ops there; a double T skips them)
#if defined(__AVX2__)
    for (; k + 8 <= n; k += 8) {
      const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(src + k)));
      _mm256_storeu_ps(reinterpret_cast<float*>(dst + k), _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
#endif
#if defined(__SSE4_1__)
    for (; k + 4 <= n; k += 4) {
      const __m128i wide = _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i*)(src + k)));
      _mm_storeu_ps(reinterpret_cast<float*>(dst + k), _mm_castsi128_ps(_mm_slli_epi32(wide, 16)));
    }
#endif
  }
  for (; k < n; ++k) dst[k] = fg_from_bf16(src[k]);
}
// sum_k a[k] b[k] over n bfloat16 elements, each product exact in float and summed in T. With AVX-512 BF16
// (and float sums) vdpbf16ps adds 32 products per instruction into 16 float partials, the last 2..31
// elements through a masked load that reads nothing past n; it reads subnormal inputs as zero and
// flushes subnormal results, as the instruction does. Without it, one product at a time.
static inline T fg_dot_bf16(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b, int64_t n) {
  T total = T(0);
  int64_t k = 0;
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  if constexpr (std::is_same<T, float>::value) {
    __m512 partial = _mm512_setzero_ps();
    for (; k + 32 <= n; k += 32)
      partial = _mm512_dpbf16_ps(partial, (__m512bh)_mm512_loadu_si512(a + k), (__m512bh)_mm512_loadu_si512(b + k));
    if (k < n) {
      const __mmask32 rest = (__mmask32)((1u << (n - k)) - 1u);
      partial = _mm512_dpbf16_ps(partial, (__m512bh)_mm512_maskz_loadu_epi16(rest, a + k),
                                 (__m512bh)_mm512_maskz_loadu_epi16(rest, b + k));
      k = n;
    }
    total = _mm512_reduce_add_ps(partial);
  }
#endif
  for (; k < n; ++k) total += fg_from_bf16(a[k]) * fg_from_bf16(b[k]);
  return total;
}
// dropout's keep test: splitmix64's finaliser over (seed, element index); keep when its top 24 bits clear
// round(p * 2^24). A pure function of its arguments, so the backward pass recomputes the forward's mask.
static inline bool fg_keep(uint64_t seed, int64_t i, uint64_t threshold) {
  uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return ((z ^ (z >> 31)) >> 40) >= threshold;
}
