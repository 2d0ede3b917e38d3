// Test data for -c 1: every input element is a small integer that depends on
// (rank, index), every rank computes the expected output itself, and sums,
// products, minima and maxima of those integers are exact in every dtype, so
// an output is right or wrong with no tolerance (avg alone gets one).
//
// The 16-bit float codecs here are the bench's own, deliberately not the
// library's (src/reduce/half.hpp): a shared bug would otherwise check itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace bench {

// --- element codecs -----------------------------------------------------------

// IEEE-style small float with `M` mantissa bits and exponent bias `B`
// (half: 10, 15, 5 exponent bits; bfloat16: 7, 127, 8), round to nearest even.
template <int M, int B, int E>
struct SmallFloat {
  static std::uint16_t encode(double v) {
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const std::uint16_t inf = static_cast<std::uint16_t>(((1u << E) - 1u) << M);
    if (std::isnan(v)) return static_cast<std::uint16_t>(inf | (1u << (M - 1)));
    double a = std::fabs(v);
    if (a == 0) return sign;
    if (std::isinf(a)) return sign | inf;
    int e = std::ilogb(a);
    if (e < 1 - B) {  // subnormal: units of 2^(1-B-M)
      const double m = std::nearbyint(std::ldexp(a, M - (1 - B)));
      return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(m));  // m may reach 2^M: smallest normal
    }
    double m = std::nearbyint(std::ldexp(a, M - e));  // in [2^M, 2^(M+1)]
    if (m >= std::ldexp(1.0, M + 1)) {
      m /= 2;
      ++e;
    }
    if (e > B) return sign | inf;
    const auto frac = static_cast<std::uint32_t>(m) - (1u << M);
    return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(e + B) << M) | frac);
  }
  static double decode(std::uint16_t h) {
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const unsigned exp = (h >> M) & ((1u << E) - 1u);
    const unsigned frac = h & ((1u << M) - 1u);
    if (exp == (1u << E) - 1u) return frac ? NAN : sign * INFINITY;
    if (exp == 0) return sign * std::ldexp(frac, 1 - B - M);
    return sign * std::ldexp(frac + (1u << M), static_cast<int>(exp) - B - M);
  }
};
using HalfCodec = SmallFloat<10, 15, 5>;
using BF16Codec = SmallFloat<7, 127, 8>;

// to_double / from_int for every storage type. Integers wrap on conversion,
// which is what a wrapping sum or product in that type gives too.
template <class T> struct Codec {
  static double to_double(T v) { return static_cast<double>(v); }
  static T from_int(std::int64_t v) { return static_cast<T>(v); }
  static bool equal(T a, T b) { return a == b; }  // floats: -0 == +0, NaN never equal
};
template <> struct Codec<braid::Half> {
  static double to_double(braid::Half v) { return HalfCodec::decode(v.bits); }
  static braid::Half from_int(std::int64_t v) { return {HalfCodec::encode(static_cast<double>(v))}; }
  static bool equal(braid::Half a, braid::Half b) { return to_double(a) == to_double(b); }
};
template <> struct Codec<braid::BFloat16> {
  static double to_double(braid::BFloat16 v) { return BF16Codec::decode(v.bits); }
  static braid::BFloat16 from_int(std::int64_t v) { return {BF16Codec::encode(static_cast<double>(v))}; }
  static bool equal(braid::BFloat16 a, braid::BFloat16 b) { return to_double(a) == to_double(b); }
};

// Calls f(T{}) with the storage type of `dt`.
template <class F>
decltype(auto) with_type(braid::DType dt, F&& f) {
  using braid::DType;
  switch (dt) {
    case DType::Int8: return f(std::int8_t{});
    case DType::UInt8: return f(std::uint8_t{});
    case DType::Int32: return f(std::int32_t{});
    case DType::Int64: return f(std::int64_t{});
    case DType::Float16: return f(braid::Half{});
    case DType::BFloat16: return f(braid::BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return f(float{});
}

// --- the values -----------------------------------------------------------------

// Which integer each rank puts at each index.
class Pattern {
 public:
  // reduction: the values are combined with `op` over `nranks` ranks; else they
  // are only moved, and are made more varied so a misplaced block shows.
  Pattern(braid::DType dt, braid::ReduceOp op, int nranks, bool reduction);

  std::int64_t value(int rank, std::int64_t i) const {
    if (!reduction_) {
      const std::int64_t v = (i * 7 + rank * 13) % 101;  // |v| <= 100 fits int8 and is exact in bf16
      return unsigned_ ? v : v - 50;
    }
    if (op_ == braid::ReduceOp::Product) {
      // One rank per element contributes 2, the rest +-1: the product is +-2,
      // exact everywhere, and a wrong operand still changes it.
      const std::int64_t mag = ((i + rank) % nranks_ == 0) ? 2 : 1;
      const bool neg = !unsigned_ && (i * 3 + rank * 5) % 7 == 0;
      return neg ? -mag : mag;
    }
    const std::int64_t v = (i * 7 + rank * 13) % (2 * amp_ + 1);
    return unsigned_ ? v : v - amp_;
  }

  // The reduction over ranks of value(r, i), in exact integers (for Avg the
  // sum; the checker divides).
  std::int64_t reduced(std::int64_t i) const {
    std::int64_t acc = value(0, i);
    for (int r = 1; r < nranks_; ++r) {
      const std::int64_t v = value(r, i);
      switch (op_) {
        case braid::ReduceOp::Product: acc *= v; break;
        case braid::ReduceOp::Min: acc = v < acc ? v : acc; break;
        case braid::ReduceOp::Max: acc = v > acc ? v : acc; break;
        default: acc += v; break;
      }
    }
    return acc;
  }

  braid::ReduceOp op() const { return op_; }
  int nranks() const { return nranks_; }

 private:
  braid::ReduceOp op_;
  int nranks_;
  bool reduction_;
  bool unsigned_;
  std::int64_t amp_;  // values lie in [-amp, amp] (or [0, 2 amp] unsigned)
};

// Fills count elements of `buf` with value(j) for j in [0, count).
template <class F>
void fill(void* buf, std::int64_t count, braid::DType dt, F&& value) {
  with_type(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(buf);
    for (std::int64_t j = 0; j < count; ++j) p[j] = Codec<T>::from_int(value(j));
  });
}

// The byte every output buffer holds before a checked run: as int8/uint8 it is
// 123, outside what the patterns produce for n <= 61 ranks; as a wider float or
// integer it is a large value no pattern makes.
inline constexpr unsigned char kSentinel = 0x7B;
inline void poison(void* buf, std::size_t bytes) { std::memset(buf, kSentinel, bytes); }

// The tolerance of an Avg result, relative to max(1, |expected|): two
// roundings in the dtype (the sum is exact; the division and the store).
double avg_tolerance(braid::DType dt);

// Counts elements j of `buf` that differ from expected(j) (an exact integer;
// with avg = true, expected(j) / nranks within the dtype's tolerance).
template <class F>
std::int64_t count_wrong(const void* buf, std::int64_t count, braid::DType dt, bool avg, int nranks,
                         F&& expected) {
  return with_type(dt, [&](auto tag) -> std::int64_t {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(buf);
    std::int64_t wrong = 0;
    if (avg) {
      const double tol = avg_tolerance(dt);
      for (std::int64_t j = 0; j < count; ++j) {
        const double want = static_cast<double>(expected(j)) / nranks;
        const double got = Codec<T>::to_double(p[j]);
        const double scale = std::fabs(want) > 1 ? std::fabs(want) : 1.0;
        if (!(std::fabs(got - want) <= tol * scale)) ++wrong;  // NaN counts as wrong
      }
    } else {
      for (std::int64_t j = 0; j < count; ++j)
        if (!Codec<T>::equal(p[j], Codec<T>::from_int(expected(j)))) ++wrong;
    }
    return wrong;
  });
}

}  // namespace bench
