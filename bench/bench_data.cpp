#include "bench_data.hpp"

#include <algorithm>

namespace bench {

Pattern::Pattern(braid::DType dt, braid::ReduceOp op, int nranks, bool reduction)
    : op_(op), nranks_(nranks < 1 ? 1 : nranks), reduction_(reduction), unsigned_(dt == braid::DType::UInt8) {
  // Keep n x amplitude within int8 (and far inside the 256 that bfloat16 holds
  // exactly): 5 up to 12 ranks, then smaller, never below 1.
  amp_ = std::clamp<std::int64_t>(60 / nranks_, 1, 5);
}

double avg_tolerance(braid::DType dt) {
  switch (dt) {
    case braid::DType::Float16: return 2.0 / 1024;   // 2 ulp of a 10-bit mantissa
    case braid::DType::BFloat16: return 2.0 / 128;   // 2 ulp of a 7-bit mantissa
    case braid::DType::Float32: return 1e-6;
    case braid::DType::Float64: return 1e-12;
    default: return 0;
  }
}

}  // namespace bench
