// The reduction loops for AVX2 + FMA + F16C (x86-64-v3 class CPUs). Only
// called after __builtin_cpu_supports says so (cpu_reduce.cpp).
#include "src/reduce/kernels_prelude.hpp"

#if BRAID_REDUCE_X86
BRAID_REDUCE_TARGET_BEGIN("avx2,fma,f16c")
#define BRAID_REDUCE_F16_LANES 8
#else
#define BRAID_REDUCE_F16_LANES 0  // not x86: a plain copy that is never selected
#endif
#define BRAID_REDUCE_ISA avx2
#include "src/reduce/kernels_impl.hpp"
#if BRAID_REDUCE_X86
BRAID_REDUCE_TARGET_END()
#endif
