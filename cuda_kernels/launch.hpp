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

namespace braid::cuda::detail {

cudaError_t launch_reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                           ReduceOp op, int multiprocessors, cudaStream_t stream);

cudaError_t launch_scale(void* data, std::int64_t count, DType dt, int divisor,
                         int multiprocessors, cudaStream_t stream);

}  // namespace braid::cuda::detail

// The same two functions built from reduce.cu by the host compiler with every
// launch run as a loop over the thread indices (tests/cuda only; not in libbraid).
namespace braid::cuda::emulated {

cudaError_t launch_reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                           ReduceOp op, int multiprocessors, cudaStream_t stream);

cudaError_t launch_scale(void* data, std::int64_t count, DType dt, int divisor,
                         int multiprocessors, cudaStream_t stream);

}  // namespace braid::cuda::emulated
