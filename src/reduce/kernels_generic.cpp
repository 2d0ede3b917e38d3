// The reduction loops for baseline x86-64 (SSE2): runs on any x86-64 CPU.
// float16 conversion is scalar here (no F16C guaranteed).
#include "src/reduce/kernels_prelude.hpp"

#define BRAID_REDUCE_ISA generic
#define BRAID_REDUCE_F16_LANES 0
#include "src/reduce/kernels_impl.hpp"
