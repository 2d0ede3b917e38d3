// Validation and run-time choice of code path for the CPU reduction kernels.
// The loops themselves live in kernels_impl.hpp, built once per ISA.
#include "src/reduce/cpu_reduce.hpp"

#include "src/common/errors.hpp"
#include "src/reduce/isa_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define BRAID_REDUCE_X86 1
#include <cpuid.h>
#else
#define BRAID_REDUCE_X86 0
#endif

namespace braid::reduction {
namespace {

enum class Kind { Integer, Floating };

Kind dtype_kind(DType dt) {
  switch (dt) {
    case DType::Int8:
    case DType::UInt8:
    case DType::Int32:
    case DType::Int64: return Kind::Integer;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64: return Kind::Floating;
  }
  fail(ErrorCode::InvalidArgument, "unknown dtype value {}: expected one of int8, uint8, int32, "
       "int64, float16, bfloat16, float32, float64", static_cast<int>(dt));
}

void check_count(std::int64_t count, bool null_pointer, const char* what) {
  if (count < 0)
    fail(ErrorCode::InvalidArgument, "{}: count {} is negative: expected an element count >= 0",
         what, count);
  if (count > 0 && null_pointer)
    fail(ErrorCode::InvalidArgument, "{}: null buffer with count {}: expected valid memory",
         what, count);
}

void check_divisor(DType dt, int divisor) {
  if (dtype_kind(dt) != Kind::Floating)
    fail(ErrorCode::InvalidArgument, "scale_avg on {}: averaging needs a floating dtype "
         "(float16, bfloat16, float32, float64)", dtype_name(dt));
  if (divisor < 1)
    fail(ErrorCode::InvalidArgument, "scale_avg: divisor {} is not positive: expected the "
         "number of contributions (>= 1)", divisor);
}

#if BRAID_REDUCE_X86
// F16C straight from CPUID (leaf 1, ECX bit 29): not every compiler's
// __builtin_cpu_supports knows the name. Its registers are the AVX ones, whose
// OS support the avx2 check below already covers.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

Isa detect_isa() {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    cpu_has_f16c();
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return Isa::Avx512;
  return avx2 ? Isa::Avx2 : Isa::Generic;
}
#else
Isa detect_isa() { return Isa::Generic; }  // not x86: only the portable loops
#endif

// Paths are ordered: a CPU that runs one runs every lower one.
Isa best_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

void require(Isa isa) {
  if (!isa_supported(isa))
    fail(ErrorCode::NotSupported, "reduction path {} needs CPU features this machine lacks "
         "(best available: {})", isa_name(isa), isa_name(best_isa()));
}

void run_reduce3(Isa isa, void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                 ReduceOp op) {
  switch (isa) {
    case Isa::Avx512: return avx512::reduce3(dst, a, b, count, dt, op);
    case Isa::Avx2: return avx2::reduce3(dst, a, b, count, dt, op);
    case Isa::Generic: return generic::reduce3(dst, a, b, count, dt, op);
  }
}

void run_scale(Isa isa, void* data, std::int64_t count, DType dt, int divisor) {
  switch (isa) {
    case Isa::Avx512: return avx512::scale(data, count, dt, divisor);
    case Isa::Avx2: return avx2::scale(data, count, dt, divisor);
    case Isa::Generic: return generic::scale(data, count, dt, divisor);
  }
}

}  // namespace

void check_op(DType dt, ReduceOp op) {
  const Kind kind = dtype_kind(dt);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Product:
    case ReduceOp::Min:
    case ReduceOp::Max: return;
    case ReduceOp::Avg:
      if (kind == Kind::Integer)
        fail(ErrorCode::InvalidArgument, "{} is not defined for {}: averaging needs a floating "
             "dtype (float16, bfloat16, float32, float64); use Sum and divide yourself",
             reduce_op_name(op), dtype_name(dt));
      return;
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if (kind == Kind::Floating)
        fail(ErrorCode::InvalidArgument, "{} is not defined for {}: bitwise ops need an integer "
             "dtype (int8, uint8, int32, int64)", reduce_op_name(op), dtype_name(dt));
      return;
  }
  fail(ErrorCode::InvalidArgument, "unknown reduce op value {}: expected one of Sum, Product, "
       "Min, Max, Avg, BAnd, BOr, BXor", static_cast<int>(op));
}

void reduce_into(void* dst, const void* src, std::int64_t count, DType dt, ReduceOp op) {
  reduce3_on(best_isa(), dst, dst, src, count, dt, op);
}

void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
             ReduceOp op) {
  reduce3_on(best_isa(), dst, a, b, count, dt, op);
}

void scale_avg(void* data, std::int64_t count, DType dt, int divisor) {
  scale_avg_on(best_isa(), data, count, dt, divisor);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic x86-64";
    case Isa::Avx2: return "avx2+f16c";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

Isa active_isa() { return best_isa(); }

void reduce3_on(Isa isa, void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                ReduceOp op) {
  check_op(dt, op);
  check_count(count, dst == nullptr || a == nullptr || b == nullptr, "reduce");
  require(isa);
  if (count > 0) run_reduce3(isa, dst, a, b, count, dt, op);
}

void scale_avg_on(Isa isa, void* data, std::int64_t count, DType dt, int divisor) {
  check_divisor(dt, divisor);
  check_count(count, data == nullptr, "scale_avg");
  require(isa);
  if (count > 0) run_scale(isa, data, count, dt, divisor);
}

}  // namespace braid::reduction
