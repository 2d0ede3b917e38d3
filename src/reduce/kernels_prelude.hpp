// Everything kernels_impl.hpp needs, included *before* a kernel file's
// `#pragma GCC target` (BRAID_REDUCE_TARGET_BEGIN): code defined in these headers keeps the baseline
// target, so no out-of-line copy of it can carry AVX instructions into the
// rest of the program (the linker keeps just one copy of an inline function).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define BRAID_REDUCE_X86 1
#include <immintrin.h>
#else
#define BRAID_REDUCE_X86 0
#endif

#include <cstdint>
#include <type_traits>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "src/reduce/half.hpp"
#include "src/reduce/isa_kernels.hpp"

// Compile the code between BEGIN and END for the given target features (GCC's
// pragma, or clang's equivalent), and tell the vectorizer a loop carries no
// dependences (a destination is identical to or disjoint from its sources).
#define BRAID_REDUCE_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define BRAID_REDUCE_TARGET_BEGIN(features) \
  BRAID_REDUCE_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define BRAID_REDUCE_TARGET_END() BRAID_REDUCE_PRAGMA(clang attribute pop)
#define BRAID_REDUCE_IVDEP BRAID_REDUCE_PRAGMA(clang loop vectorize(assume_safety))
#else
#define BRAID_REDUCE_TARGET_BEGIN(features) \
  BRAID_REDUCE_PRAGMA(GCC push_options) BRAID_REDUCE_PRAGMA(GCC target(features))
#define BRAID_REDUCE_TARGET_END() BRAID_REDUCE_PRAGMA(GCC pop_options)
#define BRAID_REDUCE_IVDEP BRAID_REDUCE_PRAGMA(GCC ivdep)
#endif
