// Between runtime.cpp (host compiler: checks arguments, finds the device's
// multiprocessor count, turns CUDA errors into braid::Error) and reduce.cu
// (nvcc: the kernels and their launch geometry). Only those two include it.
//
// Arguments arrive validated: op defined for dt, count > 0, non-null pointers,
// divisor >= 1. The functions enqueue one kernel on stream and return the
// launch's error (cudaSuccess, or e.g. cudaErrorInvalidResourceHandle for a
// stream of another device); they never synchronise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid::cuda {
// The most sources and destinations one fan launch takes.
inline constexpr int kMaxFanPointers = 8;
// Sources folded in order (acc = src[0] op src[1] op ...), the result stored
// to every dst; 1 <= nsrc, ndst <= kMaxFanPointers. Destinations may be
// sources too (element i is read before it is written).
struct FanArgs {
  const void* src[kMaxFanPointers];
  void* dst[kMaxFanPointers];
  int nsrc;
  int ndst;
};
}  // namespace braid::cuda

namespace braid::cuda::detail {

cudaError_t launch_reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                           ReduceOp op, int multiprocessors, cudaStream_t stream);

cudaError_t launch_scale(void* data, std::int64_t count, DType dt, int divisor,
                         int multiprocessors, cudaStream_t stream);

cudaError_t launch_fan(const FanArgs& fan, std::int64_t count, DType dt, ReduceOp op,
                       int multiprocessors, cudaStream_t stream);

}  // namespace braid::cuda::detail

// The same two functions built from reduce.cu by the host compiler with every
// launch run as a loop over the thread indices (tests/cuda only; not in libbraid).
namespace braid::cuda::emulated {

cudaError_t launch_reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                           ReduceOp op, int multiprocessors, cudaStream_t stream);

cudaError_t launch_scale(void* data, std::int64_t count, DType dt, int divisor,
                         int multiprocessors, cudaStream_t stream);

cudaError_t launch_fan(const FanArgs& fan, std::int64_t count, DType dt, ReduceOp op,
                       int multiprocessors, cudaStream_t stream);

}  // namespace braid::cuda::emulated
