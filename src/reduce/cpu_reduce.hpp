// Element-wise reduction kernels on host memory, for every DType and ReduceOp.
//
// Semantics (the same on every code path, bit for bit):
// - Integers: Sum and Product wrap around (two's complement); Min, Max and the
//   bitwise ops are the usual ones. Avg is not defined for integers.
// - float32/float64: one IEEE operation per element. Avg accumulates as Sum;
//   the caller divides once at the end with scale_avg. Bitwise ops are not
//   defined for floating dtypes.
// - float16/bfloat16: each operand is widened to float32, the operation is
//   done in float32 and the result rounded back to nearest even (as NCCL does).
// - Min/Max on floats: a NaN in either operand gives NaN (it propagates, it is
//   not ignored). Otherwise ties, including -0.0 vs +0.0, return the second
//   operand (src in reduce_into, b in reduce3).
//
// Pointers need no alignment. A destination must be either identical to or
// disjoint from each source; partial overlap is not supported.
//
// The work is done by one of several builds of the same loops (plain x86-64,
// AVX2+F16C, AVX-512), picked once at run time from what the CPU supports, so
// the library needs no -march flag and runs on any x86-64.
//
// The namespace is braid::reduction, not braid::reduce: braid::reduce is the
// collective in braid/ops.hpp, and a namespace cannot share its name.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "src/reduce/half.hpp"

namespace braid::reduction {

// Throws Error(InvalidArgument) when op is not defined for dt: a bitwise op on
// a floating dtype, or Avg on an integer dtype (or an out-of-range enum value).
void check_op(DType dt, ReduceOp op);

// dst[i] = dst[i] op src[i] for i in [0, count). Avg accumulates as Sum.
void reduce_into(void* dst, const void* src, std::int64_t count, DType dt, ReduceOp op);

// dst[i] = a[i] op b[i]; dst may be a or b (or both may be the same buffer).
void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt, ReduceOp op);

// data[i] /= divisor, Avg's final step. Floating dtypes only, divisor >= 1.
void scale_avg(void* data, std::int64_t count, DType dt, int divisor);

// memcpy(dst, src, bytes) with stores that bypass the cache (stream_copy.cpp):
// for large final writes nothing reads back soon. dst and src must not overlap.
void copy_streaming(void* dst, const void* src, std::size_t bytes);

// --- code path selection (exposed for tests, benchmarks and logs) -------------

enum class Isa { Generic, Avx2, Avx512 };

const char* isa_name(Isa isa);
bool isa_supported(Isa isa);  // can this CPU run that path?
Isa active_isa();             // the path the functions above use

// Same as reduce3 / scale_avg, on a given path; throws Error(NotSupported) if
// this CPU cannot run it.
void reduce3_on(Isa isa, void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                ReduceOp op);
void scale_avg_on(Isa isa, void* data, std::int64_t count, DType dt, int divisor);
// copy_streaming with the stores of a given path (Generic: SSE2; the others:
// AVX2); throws Error(NotSupported) if this CPU cannot run it.
void copy_streaming_on(Isa isa, void* dst, const void* src, std::size_t bytes);

}  // namespace braid::reduction
