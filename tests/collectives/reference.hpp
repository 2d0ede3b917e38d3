// Reference values for collective tests: every rank can compute every rank's
// input, so each rank checks its own output without trusting Braid.
//
// Inputs are small integers (exact in every dtype, bfloat16 included, after
// summing or multiplying over 8 ranks), so float results are checked exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <braid/braid.hpp>

#include "src/reduce/half.hpp"

namespace braid_test {

inline double get(braid::DType dt, const void* base, std::int64_t i) {
  using braid::DType;
  switch (dt) {
    case DType::Int8: return static_cast<const std::int8_t*>(base)[i];
    case DType::UInt8: return static_cast<const std::uint8_t*>(base)[i];
    case DType::Int32: return static_cast<const std::int32_t*>(base)[i];
    case DType::Int64: return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
    case DType::Float16: return braid::reduction::half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::BFloat16: return braid::reduction::bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::Float32: return static_cast<const float*>(base)[i];
    case DType::Float64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

// Stores v, wrapping integers modulo 2^bits like the kernels do.
inline void put(braid::DType dt, void* base, std::int64_t i, double v) {
  using braid::DType;
  const auto w = static_cast<std::int64_t>(v);
  switch (dt) {
    case DType::Int8: static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(w)); break;
    case DType::UInt8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(w); break;
    case DType::Int32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(w)); break;
    case DType::Int64: static_cast<std::int64_t*>(base)[i] = w; break;
    case DType::Float16: static_cast<std::uint16_t*>(base)[i] = braid::reduction::float_to_half(static_cast<float>(v)); break;
    case DType::BFloat16: static_cast<std::uint16_t*>(base)[i] = braid::reduction::float_to_bf16(static_cast<float>(v)); break;
    case DType::Float32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::Float64: static_cast<double*>(base)[i] = v; break;
  }
}

// Rank r's input element i under op (products stay within +-2^8).
inline double input_value(int r, std::int64_t i, braid::ReduceOp op, int salt) {
  const auto k = static_cast<std::int64_t>(r) * 7 + i * 3 + salt;
  if (op == braid::ReduceOp::Product) {
    const int m = static_cast<int>(k % 5);
    return m == 0 ? 2.0 : (m == 1 ? -1.0 : 1.0);
  }
  if (op == braid::ReduceOp::BAnd || op == braid::ReduceOp::BOr || op == braid::ReduceOp::BXor)
    return static_cast<double>((k * 2654435761LL) & 0x7f);
  return static_cast<double>(k % 17 - 8);
}

// Reduction of rank inputs for element i, then stored and read back through
// dt, so the expected value is exactly what the dtype can hold.
inline double reduce_ref(braid::DType dt, braid::ReduceOp op, const std::vector<int>& ranks, std::int64_t i, int salt) {
  using braid::ReduceOp;
  double acc = input_value(ranks[0], i, op, salt);
  std::int64_t bits = static_cast<std::int64_t>(acc);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    const double v = input_value(ranks[k], i, op, salt);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Product: acc *= v; break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      case ReduceOp::BAnd: bits &= static_cast<std::int64_t>(v); break;
      case ReduceOp::BOr: bits |= static_cast<std::int64_t>(v); break;
      case ReduceOp::BXor: bits ^= static_cast<std::int64_t>(v); break;
    }
  }
  if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) acc = static_cast<double>(bits);
  if (op == ReduceOp::Avg) acc /= static_cast<double>(ranks.size());
  unsigned char tmp[8];
  put(dt, tmp, 0, acc);
  return get(dt, tmp, 0);
}

inline bool op_valid(braid::DType dt, braid::ReduceOp op) {
  const bool fl = braid::dtype_is_floating(dt);
  const bool bitwise = op == braid::ReduceOp::BAnd || op == braid::ReduceOp::BOr || op == braid::ReduceOp::BXor;
  return fl ? !bitwise : op != braid::ReduceOp::Avg;
}

}  // namespace braid_test
