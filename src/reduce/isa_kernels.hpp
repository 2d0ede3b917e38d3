// The per-ISA builds of the reduction loops. Each namespace below is compiled
// from kernels_impl.hpp in its own translation unit under its own
// `#pragma GCC target`; cpu_reduce.cpp calls the one the CPU supports.
// Callers have already validated dt/op and the pointers.
#pragma once

#include <cstdint>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

#define BRAID_REDUCE_DECLARE_ISA(ns)                                                      \
  namespace braid::reduction::ns {                                                        \
  void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,     \
               ReduceOp op);                                                              \
  void scale(void* data, std::int64_t count, DType dt, int divisor);                      \
  }

BRAID_REDUCE_DECLARE_ISA(generic)  // baseline x86-64 (SSE2)
BRAID_REDUCE_DECLARE_ISA(avx2)     // AVX2 + FMA + F16C
BRAID_REDUCE_DECLARE_ISA(avx512)   // AVX-512 F/BW/DQ/VL

#undef BRAID_REDUCE_DECLARE_ISA
