// The reduction loops for AVX-512 (F, BW for 8-bit lanes, DQ for 64-bit
// multiplies, VL), with 512-bit vectors preferred. Only called after
// __builtin_cpu_supports says so (cpu_reduce.cpp).
#include "src/reduce/kernels_prelude.hpp"

#if BRAID_REDUCE_X86
#if defined(__clang__)
BRAID_REDUCE_TARGET_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
#else
// GCC's generic tuning may otherwise stay at 256-bit vectors.
BRAID_REDUCE_TARGET_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,prefer-vector-width=512")
#endif
#define BRAID_REDUCE_F16_LANES 16
#else
#define BRAID_REDUCE_F16_LANES 0  // not x86: a plain copy that is never selected
#endif
#define BRAID_REDUCE_ISA avx512
#include "src/reduce/kernels_impl.hpp"
#if BRAID_REDUCE_X86
BRAID_REDUCE_TARGET_END()
#endif
