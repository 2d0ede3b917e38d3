// braid::cuda's internals that other CUDA-built code of Braid shares (the
// CUDA IPC transport): error mapping and the driver entry points. Only for
// files compiled against cuda_runtime_api.h, where CUDA is built.
#pragma once

#include <cuda.h>  // driver types only: libcuda is never linked
#include <cuda_runtime_api.h>

#include "braid/error.hpp"

namespace braid::cuda::detail {

ErrorCode code_of(cudaError_t e);
[[noreturn]] void fail_cuda(cudaError_t e, const char* what);
void check(cudaError_t e, const char* what);

// cuMemGetAddressRange and cuPointerGetAttribute from the driver the runtime
// loaded, found once; null where the driver lacks them.
using AddressRangeFn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
AddressRangeFn address_range_fn();
using PointerAttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
PointerAttributeFn pointer_attribute_fn();

}  // namespace braid::cuda::detail
