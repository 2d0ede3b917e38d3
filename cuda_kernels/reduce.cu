// Element-wise reduction kernels on device memory, every ReduceOp x DType, and
// Avg's division. The semantics are braid::reduction's (src/reduce/
// cpu_reduce.hpp), bit for bit on every result that is not a NaN:
// - integers wrap around (Sum and Product are done in the unsigned type);
// - float32/float64: one IEEE operation per element, round to nearest even,
//   subnormals kept (nvcc's defaults: no -ftz, IEEE division, and a single
//   operation leaves nothing to contract into an FMA; never build this file
//   with --use_fast_math);
// - float16/bfloat16: both operands widened to float32 (exact), one float32
//   operation, rounded back to nearest even by the hardware conversion
//   (cvt.rn, which keeps subnormals and overflows to infinity as IEEE says);
// - Min/Max on floats are the CPU's expressions, `(a < b || a != a) ? a : b`:
//   a NaN in either operand gives NaN, ties (-0.0 vs +0.0 too) give b.
// A NaN result is a NaN, but its payload and sign are not promised (as on the
// CPU): the GPU's arithmetic returns its canonical NaN where x86 returns the
// quieted operand, and matching x86 would cost selects on every element for
// bits nobody is promised.
//
// Shape (see README.md for the why):
// - Vector path, when dst and the sources sit at the same offset within 16
//   bytes: a scalar head up to the first 16-byte boundary, then 16-byte loads
//   and stores (uint4: ld/st.global.v4.u32 in the PTX), kUnroll independent vectors per
//   operand in flight per thread, then a scalar tail. Head and tail are done
//   by the first threads of the same launch: one launch whatever the count.
// - Element path, when the offsets differ: one element per access (still
//   coalesced across the warp), unrolled the same way.
// - Byte path, for pointers not aligned to their element (legal on the CPU,
//   a misaligned-address fault on the GPU with element loads).
// - Grid: as many 256-thread blocks as the work needs, at most kBlocksPerSm
//   per multiprocessor (the count is read off the device by runtime.cpp and
//   cached); a grid-stride loop covers the rest, so a 256 MiB buffer is a few
//   dozen sweeps of one resident grid rather than a million short blocks.
//   __launch_bounds__(256, 4) caps registers at 64 so that 4 blocks fit; with
//   nvcc 13.0 for sm_90 no kernel spills or has a stack frame (-Xptxas -v).
//
// Why one file of ~750 lines: nvcc compiles it apart from the rest, and the
// kernels, their instantiation over every ReduceOp x DType and their launch
// code are one template family; splitting it would mean instantiating the
// same templates in several .cu files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_kernels/launch.hpp"

// Everything but the two __global__ kernels is host+device code, so that
// tests/cuda/emulated_kernels.cpp can compile this file with the host compiler
// (BRAID_CUDA_HOST_EMULATION) and run each launch as a loop over the same
// thread indices: the index arithmetic, lane packing and element functions are
// then checked against the CPU kernels on a machine with no GPU. The default
// build instantiates only the device side of them.
#define BRAID_HD __host__ __device__ __forceinline__
// Unrolling hints for the device pass only (the host compiler would warn).
#if defined(__CUDA_ARCH__)
#define BRAID_UNROLL _Pragma("unroll")
#define BRAID_NO_UNROLL _Pragma("unroll 1")
#else
#define BRAID_UNROLL
#define BRAID_NO_UNROLL
#endif
#if defined(BRAID_CUDA_HOST_EMULATION)
#define BRAID_CUDA_NS emulated
#else
#define BRAID_CUDA_NS detail
#endif

namespace braid::cuda::BRAID_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;  // 1024 threads per SM with 8 x 16 B loads each in flight
constexpr int kUnroll = 4;       // 16-byte vectors per operand per thread per iteration
constexpr int kUnrollElem = 8;   // elements per operand per thread per iteration (element path)
constexpr int kVecBytes = 16;
constexpr int kMaxFan = kMaxFanPointers;  // launch.hpp

template <class T>
using Bits = std::make_unsigned_t<T>;

// --- element operations: the same expressions as src/reduce/kernels_impl.hpp ----

struct SumOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Bits<T>>(a) + static_cast<Bits<T>>(b));
    else
      return a + b;
  }
};

struct ProductOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Bits<T>>(a) * static_cast<Bits<T>>(b));
    else
      return a * b;
  }
};

struct MinOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a < b || a != a) ? a : b;
    else
      return a < b ? a : b;
  }
};

struct MaxOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a > b || a != a) ? a : b;
    else
      return a > b ? a : b;
  }
};

struct BAndOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BOrOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BXorOp {
  template <class T>
  BRAID_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// --- 16-bit floats: storage is uint16_t, arithmetic is float32 ------------------
// A 16-byte vector holds four 32-bit words of two values each; the paired
// conversions (HADD2.F32 / F2FP.*.PACK_AB on sm_90) do two values per
// instruction. Paired and single conversions round identically.

struct HalfCodec {
  BRAID_HD static float widen(std::uint16_t h) {
    return __half2float(__ushort_as_half(h));
  }
  BRAID_HD static std::uint16_t narrow(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
  BRAID_HD static float2 widen2(std::uint32_t w) {
    __half2_raw r;
    r.x = static_cast<unsigned short>(w);        // the lower address: element 2i
    r.y = static_cast<unsigned short>(w >> 16);  // element 2i + 1
    return __half22float2(__half2(r));
  }
  BRAID_HD static std::uint32_t narrow2(float lo, float hi) {
    const __half2_raw r = static_cast<__half2_raw>(__floats2half2_rn(lo, hi));
    return static_cast<std::uint32_t>(r.x) | (static_cast<std::uint32_t>(r.y) << 16);
  }
};

struct BF16Codec {
  BRAID_HD static float widen(std::uint16_t h) {
    return __bfloat162float(__ushort_as_bfloat16(h));
  }
  BRAID_HD static std::uint16_t narrow(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
  BRAID_HD static float2 widen2(std::uint32_t w) {
    __nv_bfloat162_raw r;
    r.x = static_cast<unsigned short>(w);
    r.y = static_cast<unsigned short>(w >> 16);
    return __bfloat1622float2(__nv_bfloat162(r));
  }
  BRAID_HD static std::uint32_t narrow2(float lo, float hi) {
    const __nv_bfloat162_raw r = static_cast<__nv_bfloat162_raw>(__floats2bfloat162_rn(lo, hi));
    return static_cast<std::uint32_t>(r.x) | (static_cast<std::uint32_t>(r.y) << 16);
  }
};

// --- functors the kernels run: elem() on one value, vec() on 16 bytes ---------
// Binary ones take (a, b); unary ones (Avg's division) take one operand.

template <class S>
union Lanes {
  uint4 raw;
  S lane[kVecBytes / sizeof(S)];
};

template <class S, class Op>
struct PlainBinary {
  using Storage = S;
  static constexpr int kArity = 2;
  Op op;
  BRAID_HD S elem(S a, S b) const { return op(a, b); }
  BRAID_HD uint4 vec(uint4 a, uint4 b) const {
    Lanes<S> x, y, r;
    x.raw = a;
    y.raw = b;
BRAID_UNROLL
    for (int i = 0; i < static_cast<int>(kVecBytes / sizeof(S)); ++i)
      r.lane[i] = op(x.lane[i], y.lane[i]);
    return r.raw;
  }
};

template <class Codec, class Op>
struct Half16Binary {
  using Storage = std::uint16_t;
  static constexpr int kArity = 2;
  Op op;
  BRAID_HD std::uint16_t elem(std::uint16_t a, std::uint16_t b) const {
    return Codec::narrow(op(Codec::widen(a), Codec::widen(b)));
  }
  BRAID_HD std::uint32_t pair(std::uint32_t a, std::uint32_t b) const {
    const float2 x = Codec::widen2(a);
    const float2 y = Codec::widen2(b);
    return Codec::narrow2(op(x.x, y.x), op(x.y, y.y));
  }
  BRAID_HD uint4 vec(uint4 a, uint4 b) const {
    return make_uint4(pair(a.x, b.x), pair(a.y, b.y), pair(a.z, b.z), pair(a.w, b.w));
  }
};

// data / divisor with the divisor converted once, as the CPU does: to T for
// float32/float64, to float for the 16-bit floats. IEEE division (div.rn).
template <class S>
struct PlainScale {
  using Storage = S;
  static constexpr int kArity = 1;
  S divisor;
  BRAID_HD S elem(S a) const { return a / divisor; }
  BRAID_HD uint4 vec(uint4 a) const {
    Lanes<S> x, r;
    x.raw = a;
BRAID_UNROLL
    for (int i = 0; i < static_cast<int>(kVecBytes / sizeof(S)); ++i)
      r.lane[i] = x.lane[i] / divisor;
    return r.raw;
  }
};

template <class Codec>
struct Half16Scale {
  using Storage = std::uint16_t;
  static constexpr int kArity = 1;
  float divisor;
  BRAID_HD std::uint16_t elem(std::uint16_t a) const {
    return Codec::narrow(Codec::widen(a) / divisor);
  }
  BRAID_HD std::uint32_t pair(std::uint32_t a) const {
    const float2 x = Codec::widen2(a);
    return Codec::narrow2(x.x / divisor, x.y / divisor);
  }
  BRAID_HD uint4 vec(uint4 a) const {
    return make_uint4(pair(a.x), pair(a.y), pair(a.z), pair(a.w));
  }
};

// --- loads and stores for the element and byte paths ------------------------------

// The byte path assembles each element from single-byte accesses with
// shifts; volatile, so the compiler cannot merge them into one access of the
// element's width (which the element type lets it assume aligned). Stores
// take their bytes from a 32-bit register: with nvcc 13.0 for sm_90, byte
// stores straight from the 16-bit register that the float16/bfloat16
// conversion produced wrote a wrong low byte on the H100 (the PTX was right;
// the high byte, shifted into a register of its own, was right too).
template <std::size_t N>
struct UIntOf;
template <> struct UIntOf<1> { using type = std::uint8_t; };
template <> struct UIntOf<2> { using type = std::uint16_t; };
template <> struct UIntOf<4> { using type = std::uint32_t; };
template <> struct UIntOf<8> { using type = std::uint64_t; };

template <class S, bool kBytewise>
BRAID_HD S load(const S* p) {
  if constexpr (kBytewise) {
    using U = typename UIntOf<sizeof(S)>::type;
    const auto* b = reinterpret_cast<const volatile unsigned char*>(p);
    U u = 0;
BRAID_UNROLL
    for (int k = 0; k < static_cast<int>(sizeof(S)); ++k) u = static_cast<U>(u | (static_cast<U>(b[k]) << (8 * k)));
    S s;
    std::memcpy(&s, &u, sizeof(S));
    return s;
  } else {
    return *p;
  }
}

template <class S, bool kBytewise>
BRAID_HD void store(S* p, S s) {
  if constexpr (kBytewise) {
    using U = typename UIntOf<sizeof(S)>::type;
    U u;
    std::memcpy(&u, &s, sizeof(S));
    using W = std::conditional_t<(sizeof(U) < 4), std::uint32_t, U>;
    W w = u;
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(W) == 4) asm volatile("" : "+r"(w));  // keep it a full 32-bit register
#endif
    auto* b = reinterpret_cast<volatile unsigned char*>(p);
BRAID_UNROLL
    for (int k = 0; k < static_cast<int>(sizeof(S)); ++k) b[k] = static_cast<unsigned char>(w >> (8 * k));
  } else {
    *p = s;
  }
}

template <class F, bool kBytewise = false>
BRAID_HD void apply_elem(F f, typename F::Storage* dst,
                                           const typename F::Storage* a,
                                           const typename F::Storage* b, std::int64_t i) {
  using S = typename F::Storage;
  if constexpr (F::kArity == 2)
    store<S, kBytewise>(dst + i, f.elem(load<S, kBytewise>(a + i), load<S, kBytewise>(b + i)));
  else
    store<S, kBytewise>(dst + i, f.elem(load<S, kBytewise>(a + i)));
}

// --- kernel bodies: what one thread (tid of stride) does -------------------------

// Elements [0, head) and [head + nvec * kPer, count) one at a time (fewer than
// kPer each), the nvec 16-byte vectors in between at full width. For arity 1,
// a is the data (== dst) and b is unused.
template <class F>
BRAID_HD void vector_body(F f, typename F::Storage* dst, const typename F::Storage* a,
                          const typename F::Storage* b, std::int64_t head, std::int64_t nvec,
                          std::int64_t count, std::int64_t tid, std::int64_t stride) {
  using S = typename F::Storage;
  constexpr std::int64_t kPer = kVecBytes / sizeof(S);
  const std::int64_t tail = head + nvec * kPer;
  if (tid < head) apply_elem(f, dst, a, b, tid);
  if (tid < count - tail) apply_elem(f, dst, a, b, tail + tid);

  uint4* vd = reinterpret_cast<uint4*>(dst + head);
  const uint4* va = reinterpret_cast<const uint4*>(a + head);
  const uint4* vb = reinterpret_cast<const uint4*>(b + head);
  std::int64_t v = tid;
  // All loads of an iteration are issued before its first store: the stores
  // may alias the loads (reduce_into), so the compiler keeps program order.
  for (; v + (kUnroll - 1) * stride < nvec; v += kUnroll * stride) {
    uint4 x[kUnroll], y[kUnroll];
BRAID_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = va[v + u * stride];
      if constexpr (F::kArity == 2) y[u] = vb[v + u * stride];
    }
BRAID_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      if constexpr (F::kArity == 2)
        vd[v + u * stride] = f.vec(x[u], y[u]);
      else
        vd[v + u * stride] = f.vec(x[u]);
    }
  }
BRAID_NO_UNROLL
  for (; v < nvec; v += stride) {
    if constexpr (F::kArity == 2)
      vd[v] = f.vec(va[v], vb[v]);
    else
      vd[v] = f.vec(va[v]);
  }
}

// One element per access. kBytewise: pointers not aligned to their element.
template <class F, bool kBytewise>
BRAID_HD void element_body(F f, typename F::Storage* dst, const typename F::Storage* a,
                           const typename F::Storage* b, std::int64_t count, std::int64_t tid,
                           std::int64_t stride) {
  using S = typename F::Storage;
  std::int64_t i = tid;
  for (; i + (kUnrollElem - 1) * stride < count; i += kUnrollElem * stride) {
    S x[kUnrollElem], y[kUnrollElem];
BRAID_UNROLL
    for (int u = 0; u < kUnrollElem; ++u) {
      x[u] = load<S, kBytewise>(a + i + u * stride);
      if constexpr (F::kArity == 2) y[u] = load<S, kBytewise>(b + i + u * stride);
    }
BRAID_UNROLL
    for (int u = 0; u < kUnrollElem; ++u) {
      if constexpr (F::kArity == 2)
        store<S, kBytewise>(dst + i + u * stride, f.elem(x[u], y[u]));
      else
        store<S, kBytewise>(dst + i + u * stride, f.elem(x[u]));
    }
  }
BRAID_NO_UNROLL
  for (; i < count; i += stride) apply_elem<F, kBytewise>(f, dst, a, b, i);
}

// --- kernels, or their emulation -----------------------------------------------------

#if !defined(BRAID_CUDA_HOST_EMULATION)
template <class F>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    vector_kernel(F f, typename F::Storage* dst, const typename F::Storage* a,
                  const typename F::Storage* b, std::int64_t head, std::int64_t nvec,
                  std::int64_t count) {
  vector_body(f, dst, a, b, head, nvec, count,
              static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
              static_cast<std::int64_t>(gridDim.x) * blockDim.x);
}

template <class F, bool kBytewise>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    element_kernel(F f, typename F::Storage* dst, const typename F::Storage* a,
                   const typename F::Storage* b, std::int64_t count) {
  element_body<F, kBytewise>(f, dst, a, b, count,
                             static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                             static_cast<std::int64_t>(gridDim.x) * blockDim.x);
}
#endif

template <class F>
void start_vector(unsigned blocks, cudaStream_t stream, F f, typename F::Storage* dst,
                  const typename F::Storage* a, const typename F::Storage* b, std::int64_t head,
                  std::int64_t nvec, std::int64_t count) {
#if defined(BRAID_CUDA_HOST_EMULATION)
  (void)stream;
  // Threads one after another: each element belongs to exactly one thread, so
  // any order gives what the GPU's interleaving gives.
  const std::int64_t threads = static_cast<std::int64_t>(blocks) * kThreads;
  for (std::int64_t t = 0; t < threads; ++t)
    vector_body(f, dst, a, b, head, nvec, count, t, threads);
#else
  vector_kernel<F><<<blocks, kThreads, 0, stream>>>(f, dst, a, b, head, nvec, count);
#endif
}

template <class F, bool kBytewise>
void start_element(unsigned blocks, cudaStream_t stream, F f, typename F::Storage* dst,
                   const typename F::Storage* a, const typename F::Storage* b,
                   std::int64_t count) {
#if defined(BRAID_CUDA_HOST_EMULATION)
  (void)stream;
  const std::int64_t threads = static_cast<std::int64_t>(blocks) * kThreads;
  for (std::int64_t t = 0; t < threads; ++t)
    element_body<F, kBytewise>(f, dst, a, b, count, t, threads);
#else
  element_kernel<F, kBytewise><<<blocks, kThreads, 0, stream>>>(f, dst, a, b, count);
#endif
}

// --- fan: k sources folded in order, the result stored to m destinations ---------
// What a one-sided device plan's "reduce these ranks' blocks, then write the
// result into every rank's output" becomes: one pass that reads each source
// once and writes each destination once (CUDA IPC pointers are ordinary
// device pointers here). With k = 2, m = 1 it is reduce3; k = 1 is a copy to
// m places. Sources fold left to right (acc = s0; acc = acc op s1; ...), one
// rounding per step, so the result is the CPU's reduction in the same order.

template <class S>
struct FanPtrs {
  const S* src[kMaxFan];
  S* dst[kMaxFan];
  int nsrc;
  int ndst;
};

template <class F>
BRAID_HD typename F::Storage fan_elem(F f, const FanPtrs<typename F::Storage>& p, std::int64_t i) {
  using S = typename F::Storage;
  S acc = p.src[0][i];
BRAID_NO_UNROLL
  for (int k = 1; k < p.nsrc; ++k) acc = f.elem(acc, p.src[k][i]);
  return acc;
}

// Elements [0, head) and the tail one at a time, vectors in between; every
// load of an iteration before its stores (a destination may be a source).
template <class F>
BRAID_HD void fan_vector_body(F f, const FanPtrs<typename F::Storage>& p, std::int64_t head,
                              std::int64_t nvec, std::int64_t count, std::int64_t tid,
                              std::int64_t stride) {
  using S = typename F::Storage;
  constexpr std::int64_t kPer = kVecBytes / sizeof(S);
  const std::int64_t tail = head + nvec * kPer;
  const auto scalar = [&](std::int64_t i) {
    const S v = fan_elem(f, p, i);
    for (int d = 0; d < p.ndst; ++d) p.dst[d][i] = v;
  };
  if (tid < head) scalar(tid);
  if (tid < count - tail) scalar(tail + tid);
  const auto vsrc = [&](int k) { return reinterpret_cast<const uint4*>(p.src[k] + head); };
  const auto vdst = [&](int d) { return reinterpret_cast<uint4*>(p.dst[d] + head); };
  std::int64_t v = tid;
  for (; v + (kUnroll - 1) * stride < nvec; v += kUnroll * stride) {
    uint4 acc[kUnroll];
    const uint4* s0 = vsrc(0);
BRAID_UNROLL
    for (int u = 0; u < kUnroll; ++u) acc[u] = s0[v + u * stride];
BRAID_NO_UNROLL
    for (int k = 1; k < p.nsrc; ++k) {
      const uint4* sk = vsrc(k);
      uint4 y[kUnroll];
BRAID_UNROLL
      for (int u = 0; u < kUnroll; ++u) y[u] = sk[v + u * stride];
BRAID_UNROLL
      for (int u = 0; u < kUnroll; ++u) acc[u] = f.vec(acc[u], y[u]);
    }
BRAID_NO_UNROLL
    for (int d = 0; d < p.ndst; ++d) {
      uint4* dd = vdst(d);
BRAID_UNROLL
      for (int u = 0; u < kUnroll; ++u) dd[v + u * stride] = acc[u];
    }
  }
BRAID_NO_UNROLL
  for (; v < nvec; v += stride) {
    uint4 acc = vsrc(0)[v];
    for (int k = 1; k < p.nsrc; ++k) acc = f.vec(acc, vsrc(k)[v]);
    for (int d = 0; d < p.ndst; ++d) vdst(d)[v] = acc;
  }
}

// Pointers at different offsets within 16 bytes (or not element-aligned).
template <class F, bool kBytewise>
BRAID_HD void fan_element_body(F f, const FanPtrs<typename F::Storage>& p, std::int64_t count,
                               std::int64_t tid, std::int64_t stride) {
  using S = typename F::Storage;
  for (std::int64_t i = tid; i < count; i += stride) {
    S acc = load<S, kBytewise>(p.src[0] + i);
    for (int k = 1; k < p.nsrc; ++k) acc = f.elem(acc, load<S, kBytewise>(p.src[k] + i));
    for (int d = 0; d < p.ndst; ++d) store<S, kBytewise>(p.dst[d] + i, acc);
  }
}

#if !defined(BRAID_CUDA_HOST_EMULATION)
template <class F>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fan_vector_kernel(F f, FanPtrs<typename F::Storage> p, std::int64_t head, std::int64_t nvec,
                      std::int64_t count) {
  fan_vector_body(f, p, head, nvec, count,
                  static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                  static_cast<std::int64_t>(gridDim.x) * blockDim.x);
}

template <class F, bool kBytewise>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fan_element_kernel(F f, FanPtrs<typename F::Storage> p, std::int64_t count) {
  fan_element_body<F, kBytewise>(f, p, count,
                                 static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                 static_cast<std::int64_t>(gridDim.x) * blockDim.x);
}
#endif

// --- launch geometry ------------------------------------------------------------------

unsigned grid_for(std::int64_t items_per_thread_pass, int multiprocessors) {
  const std::int64_t cap = static_cast<std::int64_t>(multiprocessors > 0 ? multiprocessors : 1) *
                           kBlocksPerSm;
  std::int64_t want = (items_per_thread_pass + kThreads - 1) / kThreads;
  if (want < 1) want = 1;
  return static_cast<unsigned>(want < cap ? want : cap);
}

// b is ignored (may be anything) for unary functors.
template <class F>
cudaError_t launch(F f, void* dst_v, const void* a_v, const void* b_v, std::int64_t count,
                   int multiprocessors, cudaStream_t stream) {
  using S = typename F::Storage;
  constexpr std::int64_t kPer = kVecBytes / sizeof(S);
  auto* dst = static_cast<S*>(dst_v);
  const auto* a = static_cast<const S*>(a_v);
  const auto* b = F::kArity == 2 ? static_cast<const S*>(b_v) : a;

  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  const std::uintptr_t offset = d % kVecBytes;
  if (offset % sizeof(S) == 0 && x % kVecBytes == offset && y % kVecBytes == offset) {
    std::int64_t head = static_cast<std::int64_t>((kVecBytes - offset) % kVecBytes / sizeof(S));
    if (head > count) head = count;
    const std::int64_t nvec = (count - head) / kPer;
    // Threads for one unrolled pass over the vectors; head and tail (< kPer
    // elements each) need fewer than one block, and there is always one.
    start_vector(grid_for((nvec + kUnroll - 1) / kUnroll, multiprocessors), stream, f, dst, a, b,
                 head, nvec, count);
  } else {
    const unsigned blocks = grid_for((count + kUnrollElem - 1) / kUnrollElem, multiprocessors);
    if ((d | x | y) % alignof(S) == 0)
      start_element<F, false>(blocks, stream, f, dst, a, b, count);
    else
      start_element<F, true>(blocks, stream, f, dst, a, b, count);
  }
#if defined(BRAID_CUDA_HOST_EMULATION)
  return cudaSuccess;
#else
  return cudaGetLastError();
#endif
}

// The fan's geometry: the vector path when every pointer sits at the same
// offset within 16 bytes (and element-aligned), else elements, else bytes.
template <class F>
cudaError_t launch_fan_with(F f, const FanArgs& g, std::int64_t count, int multiprocessors,
                       cudaStream_t stream) {
  using S = typename F::Storage;
  constexpr std::int64_t kPer = kVecBytes / sizeof(S);
  FanPtrs<S> p{};
  p.nsrc = g.nsrc;
  p.ndst = g.ndst;
  std::uintptr_t any = 0;
  bool same_offset = true;
  const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(g.dst[0]) % kVecBytes;
  for (int k = 0; k < g.nsrc; ++k) {
    p.src[k] = static_cast<const S*>(g.src[k]);
    any |= reinterpret_cast<std::uintptr_t>(g.src[k]);
    same_offset = same_offset && reinterpret_cast<std::uintptr_t>(g.src[k]) % kVecBytes == offset;
  }
  for (int d = 0; d < g.ndst; ++d) {
    p.dst[d] = static_cast<S*>(g.dst[d]);
    any |= reinterpret_cast<std::uintptr_t>(g.dst[d]);
    same_offset = same_offset && reinterpret_cast<std::uintptr_t>(g.dst[d]) % kVecBytes == offset;
  }
  const bool aligned = any % alignof(S) == 0;
#if defined(BRAID_CUDA_HOST_EMULATION)
  (void)stream;
#endif
  if (aligned && same_offset) {
    std::int64_t head = static_cast<std::int64_t>((kVecBytes - offset) % kVecBytes / sizeof(S));
    if (head > count) head = count;
    const std::int64_t nvec = (count - head) / kPer;
    const unsigned blocks = grid_for((nvec + kUnroll - 1) / kUnroll, multiprocessors);
#if defined(BRAID_CUDA_HOST_EMULATION)
    const std::int64_t threads = static_cast<std::int64_t>(blocks) * kThreads;
    for (std::int64_t t = 0; t < threads; ++t) fan_vector_body(f, p, head, nvec, count, t, threads);
#else
    fan_vector_kernel<F><<<blocks, kThreads, 0, stream>>>(f, p, head, nvec, count);
#endif
  } else {
    const unsigned blocks = grid_for(count, multiprocessors);
#if defined(BRAID_CUDA_HOST_EMULATION)
    const std::int64_t threads = static_cast<std::int64_t>(blocks) * kThreads;
    for (std::int64_t t = 0; t < threads; ++t) {
      if (aligned) fan_element_body<F, false>(f, p, count, t, threads);
      else fan_element_body<F, true>(f, p, count, t, threads);
    }
#else
    if (aligned) fan_element_kernel<F, false><<<blocks, kThreads, 0, stream>>>(f, p, count);
    else fan_element_kernel<F, true><<<blocks, kThreads, 0, stream>>>(f, p, count);
#endif
  }
#if defined(BRAID_CUDA_HOST_EMULATION)
  return cudaSuccess;
#else
  return cudaGetLastError();
#endif
}

// --- dispatch ---------------------------------------------------------------------------

struct Args {
  void* dst;
  const void* a;
  const void* b;
  std::int64_t count;
  int multiprocessors;
  cudaStream_t stream;
  const FanArgs* fan = nullptr;  // set: a fan launch (dst, a, b unused)
};

template <class F>
cudaError_t run(F f, const Args& g) {
  if constexpr (F::kArity == 2)  // fans reduce; Avg's division is never one
    if (g.fan) return launch_fan_with(f, *g.fan, g.count, g.multiprocessors, g.stream);
  return launch(f, g.dst, g.a, g.b, g.count, g.multiprocessors, g.stream);
}

template <class S>
cudaError_t reduce_plain(ReduceOp op, const Args& g) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return run(PlainBinary<S, SumOp>{}, g);
    case ReduceOp::Product: return run(PlainBinary<S, ProductOp>{}, g);
    case ReduceOp::Min: return run(PlainBinary<S, MinOp>{}, g);
    case ReduceOp::Max: return run(PlainBinary<S, MaxOp>{}, g);
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if constexpr (std::is_integral_v<S>) {
        if (op == ReduceOp::BAnd) return run(PlainBinary<S, BAndOp>{}, g);
        if (op == ReduceOp::BOr) return run(PlainBinary<S, BOrOp>{}, g);
        return run(PlainBinary<S, BXorOp>{}, g);
      }
      break;
  }
  return cudaErrorInvalidValue;  // runtime.cpp validated the op: unreachable
}

template <class Codec>
cudaError_t reduce16(ReduceOp op, const Args& g) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return run(Half16Binary<Codec, SumOp>{}, g);
    case ReduceOp::Product: return run(Half16Binary<Codec, ProductOp>{}, g);
    case ReduceOp::Min: return run(Half16Binary<Codec, MinOp>{}, g);
    case ReduceOp::Max: return run(Half16Binary<Codec, MaxOp>{}, g);
    default: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

namespace {
cudaError_t dispatch(const Args& g, DType dt, ReduceOp op) {
  switch (dt) {
    case DType::Int8: return reduce_plain<std::int8_t>(op, g);
    case DType::UInt8: return reduce_plain<std::uint8_t>(op, g);
    case DType::Int32: return reduce_plain<std::int32_t>(op, g);
    case DType::Int64: return reduce_plain<std::int64_t>(op, g);
    case DType::Float16: return reduce16<HalfCodec>(op, g);
    case DType::BFloat16: return reduce16<BF16Codec>(op, g);
    case DType::Float32: return reduce_plain<float>(op, g);
    case DType::Float64: return reduce_plain<double>(op, g);
  }
  return cudaErrorInvalidValue;
}
}  // namespace

cudaError_t launch_reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
                           ReduceOp op, int multiprocessors, cudaStream_t stream) {
  return dispatch(Args{dst, a, b, count, multiprocessors, stream}, dt, op);
}

cudaError_t launch_fan(const FanArgs& fan, std::int64_t count, DType dt, ReduceOp op,
                       int multiprocessors, cudaStream_t stream) {
  return dispatch(Args{nullptr, nullptr, nullptr, count, multiprocessors, stream, &fan}, dt, op);
}

cudaError_t launch_scale(void* data, std::int64_t count, DType dt, int divisor,
                         int multiprocessors, cudaStream_t stream) {
  const Args g{data, data, nullptr, count, multiprocessors, stream};
  switch (dt) {
    case DType::Float16: return run(Half16Scale<HalfCodec>{static_cast<float>(divisor)}, g);
    case DType::BFloat16: return run(Half16Scale<BF16Codec>{static_cast<float>(divisor)}, g);
    case DType::Float32: return run(PlainScale<float>{static_cast<float>(divisor)}, g);
    case DType::Float64: return run(PlainScale<double>{static_cast<double>(divisor)}, g);
    default: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace braid::cuda::BRAID_CUDA_NS
