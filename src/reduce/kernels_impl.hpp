// The reduction loops, written once and compiled once per ISA. A
// kernels_<isa>.cpp includes kernels_prelude.hpp, then sets the target ISA
// (BRAID_REDUCE_TARGET_BEGIN), defines BRAID_REDUCE_ISA (the namespace to fill)
// and BRAID_REDUCE_F16_LANES (how float16 is widened: 0 scalar, 8 F16C on
// 256-bit registers, 16 AVX-512), and includes this file. No include guard:
// that is the point.
//
// Why it looks like this:
// - Loops run in blocks of a fixed kBlock elements, then a scalar tail. A
//   loop whose trip count the compiler knows is vectorized whole even at -O2
//   (GCC's "very cheap" vectorizer cost model there refuses loops that need a
//   vectorized prologue/epilogue or runtime alias checks), so meson's release
//   build gets vector code without per-file flags.
// - BRAID_REDUCE_IVDEP (`#pragma GCC ivdep`) instead of __restrict: a
//   destination may be the same buffer as a source (reduce_into is
//   reduce3(dst, dst, src)); an element-wise loop is correct then, but
//   restrict would make it UB.
// - float16 blocks are widened into float32 scratch (F16C where there is
//   one), reduced with the float32 loop, and narrowed back; both inputs are
//   widened before anything is stored, so aliasing is fine. bfloat16's
//   conversion is a few integer ops, so its loop converts, reduces and rounds
//   in one pass, which measured faster than going through scratch.
// - Everything but the two entry points has internal linkage: an instantiation
//   compiled for AVX-512 must never be the one the linker keeps for a caller
//   on another path.

namespace braid::reduction::BRAID_REDUCE_ISA {
namespace {

constexpr std::int64_t kBlock = 256;

template <class T>
using Bits = std::make_unsigned_t<T>;

// --- element operations -------------------------------------------------------
// Integer Sum/Product are done in the unsigned type: wrap-around without UB.

struct SumOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Bits<T>>(a) + static_cast<Bits<T>>(b));
    else
      return a + b;
  }
};

struct ProductOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Bits<T>>(a) * static_cast<Bits<T>>(b));
    else
      return a * b;
  }
};

// Floats: NaN in either operand propagates; ties return b (see cpu_reduce.hpp).
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a < b || a != a) ? a : b;
    else
      return a < b ? a : b;
  }
};

struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (a > b || a != a) ? a : b;
    else
      return a > b ? a : b;
  }
};

struct BAndOp {
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BOrOp {
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BXorOp {
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// --- plain dtypes ---------------------------------------------------------------

template <class T, class Op>
inline void block_op(T* dst, const T* a, const T* b, Op op) {
BRAID_REDUCE_IVDEP
  for (std::int64_t i = 0; i < kBlock; ++i) dst[i] = op(a[i], b[i]);
}

template <class T, class Op>
void apply(void* dst_v, const void* a_v, const void* b_v, std::int64_t n, Op op) {
  auto* dst = static_cast<T*>(dst_v);
  const auto* a = static_cast<const T*>(a_v);
  const auto* b = static_cast<const T*>(b_v);
  std::int64_t i = 0;
  for (; n - i >= kBlock; i += kBlock) block_op(dst + i, a + i, b + i, op);
  for (; i < n; ++i) dst[i] = op(a[i], b[i]);
}

// --- 16-bit floats: widen a block, reduce in float32, narrow ---------------------

struct F16 {
  static constexpr bool kFused = false;
  static float widen1(std::uint16_t h) { return half_to_float(h); }
  static std::uint16_t narrow1(float f) { return float_to_half(f); }

  static void widen(float* out, const std::uint16_t* in) {
#if BRAID_REDUCE_F16_LANES == 16
    // The maskz forms (all lanes on) because GCC 12's plain ones trip
    // -Wmaybe-uninitialized inside the intrinsic headers.
    for (std::int64_t i = 0; i < kBlock; i += 16)
      _mm512_storeu_ps(out + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(
                                    reinterpret_cast<const __m256i*>(in + i))));
#elif BRAID_REDUCE_F16_LANES == 8
    for (std::int64_t i = 0; i < kBlock; i += 8)
      _mm256_storeu_ps(out + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
#else
    for (std::int64_t i = 0; i < kBlock; ++i) out[i] = half_to_float(in[i]);
#endif
  }

  // Rounding is given explicitly (nearest even), not taken from MXCSR.
  static void narrow(std::uint16_t* out, const float* in) {
#if BRAID_REDUCE_F16_LANES == 16
    for (std::int64_t i = 0; i < kBlock; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in + i),
                                                _MM_FROUND_TO_NEAREST_INT));
#elif BRAID_REDUCE_F16_LANES == 8
    for (std::int64_t i = 0; i < kBlock; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
#else
    for (std::int64_t i = 0; i < kBlock; ++i) out[i] = float_to_half(in[i]);
#endif
  }
};

// bf16 <-> f32 is shifts and one select: the compiler vectorizes it on every path.
struct BF16 {
  static constexpr bool kFused = true;
  static float widen1(std::uint16_t h) { return bf16_to_float(h); }
  static std::uint16_t narrow1(float f) { return float_to_bf16(f); }
  static void widen(float* out, const std::uint16_t* in) {
    for (std::int64_t i = 0; i < kBlock; ++i) out[i] = bf16_to_float(in[i]);
  }
  static void narrow(std::uint16_t* out, const float* in) {
    for (std::int64_t i = 0; i < kBlock; ++i) out[i] = float_to_bf16(in[i]);
  }
};

template <class Conv, class Op>
void apply16(void* dst_v, const void* a_v, const void* b_v, std::int64_t n, Op op) {
  auto* dst = static_cast<std::uint16_t*>(dst_v);
  const auto* a = static_cast<const std::uint16_t*>(a_v);
  const auto* b = static_cast<const std::uint16_t*>(b_v);
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  std::int64_t i = 0;
  for (; n - i >= kBlock; i += kBlock) {
    if constexpr (Conv::kFused) {
      std::uint16_t* d = dst + i;
      const std::uint16_t* x = a + i;
      const std::uint16_t* y = b + i;
BRAID_REDUCE_IVDEP
      for (std::int64_t j = 0; j < kBlock; ++j)
        d[j] = Conv::narrow1(op(Conv::widen1(x[j]), Conv::widen1(y[j])));
    } else {
      Conv::widen(fa, a + i);
      Conv::widen(fb, b + i);
      block_op(fa, fa, fb, op);
      Conv::narrow(dst + i, fa);
    }
  }
  for (; i < n; ++i) dst[i] = Conv::narrow1(op(Conv::widen1(a[i]), Conv::widen1(b[i])));
}

// --- op dispatch -------------------------------------------------------------------
// Op/dtype combinations were validated by check_op; an invalid one is a no-op here.

template <class T>
void reduce_plain(void* dst, const void* a, const void* b, std::int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return apply<T>(dst, a, b, n, SumOp{});
    case ReduceOp::Product: return apply<T>(dst, a, b, n, ProductOp{});
    case ReduceOp::Min: return apply<T>(dst, a, b, n, MinOp{});
    case ReduceOp::Max: return apply<T>(dst, a, b, n, MaxOp{});
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::BAnd) return apply<T>(dst, a, b, n, BAndOp{});
        if (op == ReduceOp::BOr) return apply<T>(dst, a, b, n, BOrOp{});
        return apply<T>(dst, a, b, n, BXorOp{});
      }
      return;
  }
}

template <class Conv>
void reduce16(void* dst, const void* a, const void* b, std::int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return apply16<Conv>(dst, a, b, n, SumOp{});
    case ReduceOp::Product: return apply16<Conv>(dst, a, b, n, ProductOp{});
    case ReduceOp::Min: return apply16<Conv>(dst, a, b, n, MinOp{});
    case ReduceOp::Max: return apply16<Conv>(dst, a, b, n, MaxOp{});
    default: return;
  }
}

// --- Avg's division --------------------------------------------------------------

template <class T>
void scale_plain(void* data_v, std::int64_t n, int divisor) {
  auto* p = static_cast<T*>(data_v);
  const T d = static_cast<T>(divisor);
  std::int64_t i = 0;
  for (; n - i >= kBlock; i += kBlock) {
    T* q = p + i;
    for (std::int64_t j = 0; j < kBlock; ++j) q[j] = q[j] / d;
  }
  for (; i < n; ++i) p[i] = p[i] / d;
}

template <class Conv>
void scale16(void* data_v, std::int64_t n, int divisor) {
  auto* p = static_cast<std::uint16_t*>(data_v);
  const float d = static_cast<float>(divisor);
  alignas(64) float f[kBlock];
  std::int64_t i = 0;
  for (; n - i >= kBlock; i += kBlock) {
    Conv::widen(f, p + i);
    for (std::int64_t j = 0; j < kBlock; ++j) f[j] = f[j] / d;
    Conv::narrow(p + i, f);
  }
  for (; i < n; ++i) p[i] = Conv::narrow1(Conv::widen1(p[i]) / d);
}

}  // namespace

void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
             ReduceOp op) {
  switch (dt) {
    case DType::Int8: return reduce_plain<std::int8_t>(dst, a, b, count, op);
    case DType::UInt8: return reduce_plain<std::uint8_t>(dst, a, b, count, op);
    case DType::Int32: return reduce_plain<std::int32_t>(dst, a, b, count, op);
    case DType::Int64: return reduce_plain<std::int64_t>(dst, a, b, count, op);
    case DType::Float16: return reduce16<F16>(dst, a, b, count, op);
    case DType::BFloat16: return reduce16<BF16>(dst, a, b, count, op);
    case DType::Float32: return reduce_plain<float>(dst, a, b, count, op);
    case DType::Float64: return reduce_plain<double>(dst, a, b, count, op);
  }
}

void scale(void* data, std::int64_t count, DType dt, int divisor) {
  switch (dt) {
    case DType::Float16: return scale16<F16>(data, count, divisor);
    case DType::BFloat16: return scale16<BF16>(data, count, divisor);
    case DType::Float32: return scale_plain<float>(data, count, divisor);
    case DType::Float64: return scale_plain<double>(data, count, divisor);
    default: return;
  }
}

}  // namespace braid::reduction::BRAID_REDUCE_ISA
