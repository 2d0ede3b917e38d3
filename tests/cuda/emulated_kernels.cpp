// cuda_kernels/reduce.cu built by the host compiler, its launches run as loops
// over the thread indices (braid::cuda::emulated; see test_cuda_emulated.cpp).
#define BRAID_CUDA_HOST_EMULATION 1
#include "cuda_kernels/reduce.cu"
