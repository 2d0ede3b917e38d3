// Scalar, bit-exact conversions between float32 and the two 16-bit floats.
//
// float16 is IEEE binary16; bfloat16 is the top half of a binary32. Rounding
// to 16 bits is round-to-nearest-even, overflow goes to infinity, subnormals
// are kept (no flush to zero). A NaN stays a NaN of the same sign with its
// top payload bits, and comes out quiet -- the same bits x86's F16C
// instructions produce, so the scalar and the vector reduction paths agree bit
// for bit (tests/reduce checks this against the hardware where it exists).
//
// These are plain inline functions with no target attributes, so the
// per-ISA kernels can inline them into their own loops.
#pragma once

#include <bit>
#include <cstdint>

namespace braid::reduction {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    // Inf, or NaN quieted as vcvtph2ps does.
    bits = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half (mant * 2^-24) is a normal float: shift the leading one
    // up to the implicit-bit position and lower the exponent to match.
    const int shift = std::countl_zero(mant) - 21;  // brings bit 10 to the top
    const std::uint32_t e = static_cast<std::uint32_t>(127 - 14 - shift);
    bits = sign | (e << 23) | (((mant << shift) & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: quiet it, keep the top 9 payload bits (as vcvtps2ph)
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u)  // >= 65520, the tie above the largest half (65504): inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // >= 2^-14: a normal half
    // Rebias, then round the 13 dropped bits to nearest even; a carry out of
    // the mantissa correctly bumps the exponent.
    std::uint32_t v = ax - ((127u - 15u) << 23);
    v += 0x0fffu + ((v >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  if (ax <= 0x33000000u)  // <= 2^-25, half the smallest subnormal: ties to even zero
    return sign;
  // Subnormal half: mantissa = round(value * 2^24), with the implicit one made
  // explicit. The exponent here is 102..112, so the shift is 14..24.
  const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const std::uint32_t s = 126u - (ax >> 23);
  std::uint32_t r = m >> s;
  const std::uint32_t rem = m & ((1u << s) - 1u);
  const std::uint32_t halfway = 1u << (s - 1u);
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into 0x400: fine
  return static_cast<std::uint16_t>(sign | r);
}

inline float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// Round to nearest even by adding 0x7fff plus the lowest kept bit (a carry
// into the exponent is right, up to infinity). A NaN is truncated instead, with
// the quiet bit set so a payload only in the low bits cannot turn into inf.
// Written with masks rather than branches or selects so that loops of it
// vectorize into a few integer ops.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  // A signed compare (both sides are < 2^31): AVX2 has no unsigned one.
  const std::uint32_t nan_mask =
      0u - static_cast<std::uint32_t>(static_cast<std::int32_t>(x & 0x7fffffffu) > 0x7f800000);
  const std::uint32_t bias = (0x7fffu + ((x >> 16) & 1u)) & ~nan_mask;
  return static_cast<std::uint16_t>(((x + bias) >> 16) | (0x40u & nan_mask));
}

}  // namespace braid::reduction
