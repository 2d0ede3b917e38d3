// CPU reduction kernels: every dtype x op x code path against a scalar
// reference written here, plus the float16/bfloat16 conversions bit by bit.
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define TEST_X86 1
#else
#define TEST_X86 0
#endif

#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "src/reduce/cpu_reduce.hpp"

using braid::DType;
using braid::ErrorCode;
using braid::ReduceOp;
namespace rd = braid::reduction;

namespace {

const std::vector<DType> kAllDTypes = {DType::Int8,    DType::UInt8,    DType::Int32,
                                       DType::Int64,   DType::Float16,  DType::BFloat16,
                                       DType::Float32, DType::Float64};
const std::vector<ReduceOp> kAllOps = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,
                                       ReduceOp::Max, ReduceOp::Avg,     ReduceOp::BAnd,
                                       ReduceOp::BOr, ReduceOp::BXor};
const std::vector<std::int64_t> kCounts = {0, 1, 7, 31, 1000, 4097};

bool is_float(DType dt) {
  return dt == DType::Float16 || dt == DType::BFloat16 || dt == DType::Float32 ||
         dt == DType::Float64;
}
bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
}
bool valid(DType dt, ReduceOp op) {
  return is_float(dt) ? !is_bitwise(op) : op != ReduceOp::Avg;
}
std::size_t size_of(DType dt) {
  switch (dt) {
    case DType::Int8:
    case DType::UInt8: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    default: return 8;
  }
}

std::vector<rd::Isa> supported_isas() {
  std::vector<rd::Isa> out;
  for (auto isa : {rd::Isa::Generic, rd::Isa::Avx2, rd::Isa::Avx512})
    if (rd::isa_supported(isa)) out.push_back(isa);
  return out;
}

// --- the reference, one element at a time ------------------------------------------

// Integers: exact in 128 bits, then truncated (C++20 conversion is modular).
template <class T>
T ref_int(ReduceOp op, T a, T b) {
  const __int128 x = a, y = b;
  switch (op) {
    case ReduceOp::Sum: return static_cast<T>(x + y);
    case ReduceOp::Product: return static_cast<T>(x * y);
    case ReduceOp::Min: return x <= y ? a : b;
    case ReduceOp::Max: return x >= y ? a : b;
    case ReduceOp::BAnd: return static_cast<T>(x & y);
    case ReduceOp::BOr: return static_cast<T>(x | y);
    case ReduceOp::BXor: return static_cast<T>(x ^ y);
    default: FAIL("invalid op for an integer"); return 0;
  }
}

// Floats: one IEEE op; Min/Max propagate NaN and return b on ties (documented).
template <class F>
F ref_float(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Product: return a * b;
    case ReduceOp::Min:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
      return a < b ? a : b;
    case ReduceOp::Max:
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
      return a > b ? a : b;
    default: FAIL("invalid op for a float"); return 0;
  }
}

// Compares one element of dt at got/want; NaN matches any NaN (payloads are not promised).
bool same_element(DType dt, const void* got, const void* want) {
  switch (dt) {
    case DType::Float16: {
      std::uint16_t g, w;
      std::memcpy(&g, got, 2);
      std::memcpy(&w, want, 2);
      return g == w || (std::isnan(rd::half_to_float(g)) && std::isnan(rd::half_to_float(w)));
    }
    case DType::BFloat16: {
      std::uint16_t g, w;
      std::memcpy(&g, got, 2);
      std::memcpy(&w, want, 2);
      return g == w || (std::isnan(rd::bf16_to_float(g)) && std::isnan(rd::bf16_to_float(w)));
    }
    case DType::Float32: {
      float g, w;
      std::memcpy(&g, got, 4);
      std::memcpy(&w, want, 4);
      return std::memcmp(got, want, 4) == 0 || (std::isnan(g) && std::isnan(w));
    }
    case DType::Float64: {
      double g, w;
      std::memcpy(&g, got, 8);
      std::memcpy(&w, want, 8);
      return std::memcmp(got, want, 8) == 0 || (std::isnan(g) && std::isnan(w));
    }
    default: return std::memcmp(got, want, size_of(dt)) == 0;
  }
}

template <class T>
void ref_typed(ReduceOp op, void* out, const void* a, const void* b) {
  T x, y, r;
  std::memcpy(&x, a, sizeof(T));
  std::memcpy(&y, b, sizeof(T));
  if constexpr (std::is_integral_v<T>)
    r = ref_int(op, x, y);
  else
    r = ref_float(op, x, y);
  std::memcpy(out, &r, sizeof(T));
}

// float16/bfloat16: widen, one float32 op, round back (the conversions are
// checked on their own below).
void ref_element(DType dt, ReduceOp op, void* out, const void* a, const void* b) {
  switch (dt) {
    case DType::Int8: return ref_typed<std::int8_t>(op, out, a, b);
    case DType::UInt8: return ref_typed<std::uint8_t>(op, out, a, b);
    case DType::Int32: return ref_typed<std::int32_t>(op, out, a, b);
    case DType::Int64: return ref_typed<std::int64_t>(op, out, a, b);
    case DType::Float32: return ref_typed<float>(op, out, a, b);
    case DType::Float64: return ref_typed<double>(op, out, a, b);
    case DType::Float16:
    case DType::BFloat16: {
      const bool h = dt == DType::Float16;
      std::uint16_t x, y;
      std::memcpy(&x, a, 2);
      std::memcpy(&y, b, 2);
      const float fx = h ? rd::half_to_float(x) : rd::bf16_to_float(x);
      const float fy = h ? rd::half_to_float(y) : rd::bf16_to_float(y);
      const float fr = ref_float(op, fx, fy);
      const std::uint16_t r = h ? rd::float_to_half(fr) : rd::float_to_bf16(fr);
      std::memcpy(out, &r, 2);
      return;
    }
  }
}

// --- buffers: one element of guard on each side, data misaligned by one element -----

struct Buffer {
  DType dt;
  std::int64_t count;
  std::vector<unsigned char> bytes;  // [guard][count elements][guard]

  Buffer(DType d, std::int64_t n) : dt(d), count(n), bytes((n + 2) * size_of(d)) {}
  void* data() { return bytes.data() + size_of(dt); }
  void* at(std::int64_t i) { return static_cast<unsigned char*>(data()) + i * size_of(dt); }
};

// Random contents: every bit pattern for integers and 16-bit floats (so wrap,
// inf, NaN and subnormals all occur); for float32/64 half random bit patterns,
// half ordinary values so that sums are not all dominated by one huge operand.
void fill_random(Buffer& buf, std::mt19937_64& rng) {
  const std::size_t sz = size_of(buf.dt);
  std::uniform_real_distribution<double> ordinary(-1000.0, 1000.0);
  for (std::int64_t i = -1; i <= buf.count; ++i) {
    unsigned char* p = static_cast<unsigned char*>(buf.at(i));
    const std::uint64_t bits = rng();
    if (buf.dt == DType::Float32 && (bits & 1)) {
      const float v = static_cast<float>(ordinary(rng));
      std::memcpy(p, &v, 4);
    } else if (buf.dt == DType::Float64 && (bits & 1)) {
      const double v = ordinary(rng);
      std::memcpy(p, &v, 8);
    } else {
      std::memcpy(p, &bits, sz);
    }
  }
}

// Index of the first element of got that differs from want (guards included,
// -1 and count), or INT64_MIN if none does.
std::int64_t first_mismatch(Buffer& got, Buffer& want) {
  for (std::int64_t i = -1; i <= got.count; ++i)
    if (!same_element(got.dt, got.at(i), want.at(i))) return i;
  return std::numeric_limits<std::int64_t>::min();
}
constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();

Buffer reference(Buffer& a, Buffer& b, Buffer& dst_before, ReduceOp op) {
  Buffer want = dst_before;  // keeps dst's guards
  for (std::int64_t i = 0; i < a.count; ++i) ref_element(a.dt, op, want.at(i), a.at(i), b.at(i));
  return want;
}

void require_code(const std::function<void()>& fn, ErrorCode code,
                  const std::vector<std::string>& needles) {
  try {
    fn();
    FAIL("expected braid::Error");
  } catch (const braid::Error& e) {
    INFO("message: " << e.what());
    CHECK(e.code() == code);
    for (const auto& s : needles) CHECK(std::string(e.what()).find(s) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("reduce3 and reduce_into match the reference for every dtype, op and path") {
  std::mt19937_64 rng(20240601);
  for (rd::Isa isa : supported_isas()) {
    for (DType dt : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (!valid(dt, op)) continue;
        for (std::int64_t n : kCounts) {
          INFO("path " << rd::isa_name(isa) << ", dtype " << braid::dtype_name(dt) << ", op "
                       << braid::reduce_op_name(op) << ", count " << n);
          Buffer a(dt, n), b(dt, n), dst(dt, n);
          fill_random(a, rng);
          fill_random(b, rng);
          fill_random(dst, rng);
          Buffer want = reference(a, b, dst, op);

          rd::reduce3_on(isa, dst.data(), a.data(), b.data(), n, dt, op);
          CHECK(first_mismatch(dst, want) == kNone);

          // reduce_into is reduce3 with dst as the first operand.
          Buffer acc = a;
          Buffer want_into = reference(a, b, acc, op);
          rd::reduce3_on(isa, acc.data(), acc.data(), b.data(), n, dt, op);
          CHECK(first_mismatch(acc, want_into) == kNone);
        }
      }
    }
  }
}

TEST_CASE("the public entry points use the detected path and agree with the reference") {
  INFO("active path: " << rd::isa_name(rd::active_isa()));
  CHECK(rd::isa_supported(rd::active_isa()));
  CHECK(rd::isa_supported(rd::Isa::Generic));
  std::mt19937_64 rng(7);
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      if (!valid(dt, op)) continue;
      INFO("dtype " << braid::dtype_name(dt) << ", op " << braid::reduce_op_name(op));
      const std::int64_t n = 1000;
      Buffer a(dt, n), b(dt, n), dst(dt, n);
      fill_random(a, rng);
      fill_random(b, rng);
      fill_random(dst, rng);
      Buffer want3 = reference(a, b, dst, op);
      rd::reduce3(dst.data(), a.data(), b.data(), n, dt, op);
      CHECK(first_mismatch(dst, want3) == kNone);

      Buffer want_into = reference(a, b, a, op);
      rd::reduce_into(a.data(), b.data(), n, dt, op);
      CHECK(first_mismatch(a, want_into) == kNone);
    }
  }
}

TEST_CASE("reduce3 with dst aliasing a, b, or both") {
  std::mt19937_64 rng(99);
  for (rd::Isa isa : supported_isas()) {
    for (DType dt : kAllDTypes) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::BXor}) {
        if (!valid(dt, op)) continue;
        INFO("path " << rd::isa_name(isa) << ", dtype " << braid::dtype_name(dt) << ", op "
                     << braid::reduce_op_name(op));
        const std::int64_t n = 4097;
        Buffer a(dt, n), b(dt, n);
        fill_random(a, rng);
        fill_random(b, rng);

        Buffer x = a, y = b;  // dst is b: operand order must stay (a, b)
        Buffer want_b = reference(a, b, b, op);
        rd::reduce3_on(isa, y.data(), x.data(), y.data(), n, dt, op);
        CHECK(first_mismatch(y, want_b) == kNone);

        Buffer z = a;  // dst, a and b all one buffer
        Buffer want_self = reference(a, a, a, op);
        rd::reduce3_on(isa, z.data(), z.data(), z.data(), n, dt, op);
        CHECK(first_mismatch(z, want_self) == kNone);
      }
    }
  }
}

TEST_CASE("Avg accumulates as Sum and scale_avg divides once") {
  std::mt19937_64 rng(5);
  for (rd::Isa isa : supported_isas()) {
    for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
      for (std::int64_t n : kCounts) {
        for (int divisor : {1, 3, 7}) {
          INFO("path " << rd::isa_name(isa) << ", dtype " << braid::dtype_name(dt)
                       << ", count " << n << ", divisor " << divisor);
          Buffer data(dt, n);
          fill_random(data, rng);
          Buffer want = data;
          for (std::int64_t i = 0; i < n; ++i) {
            void* p = want.at(i);
            if (dt == DType::Float32) {
              float v;
              std::memcpy(&v, p, 4);
              v = v / static_cast<float>(divisor);
              std::memcpy(p, &v, 4);
            } else if (dt == DType::Float64) {
              double v;
              std::memcpy(&v, p, 8);
              v = v / divisor;
              std::memcpy(p, &v, 8);
            } else {
              const bool h = dt == DType::Float16;
              std::uint16_t v;
              std::memcpy(&v, p, 2);
              const float f = (h ? rd::half_to_float(v) : rd::bf16_to_float(v)) / divisor;
              v = h ? rd::float_to_half(f) : rd::float_to_bf16(f);
              std::memcpy(p, &v, 2);
            }
          }
          rd::scale_avg_on(isa, data.data(), n, dt, divisor);
          CHECK(first_mismatch(data, want) == kNone);
        }
      }
    }
  }

  // End to end: three contributions averaged.
  std::vector<float> acc = {1.0f, -2.0f, 10.0f}, x = {2.0f, 4.0f, 20.0f}, y = {6.0f, 7.0f, 0.0f};
  rd::reduce_into(acc.data(), x.data(), 3, DType::Float32, ReduceOp::Avg);
  rd::reduce_into(acc.data(), y.data(), 3, DType::Float32, ReduceOp::Avg);
  rd::scale_avg(acc.data(), 3, DType::Float32, 3);
  CHECK(acc[0] == (1.0f + 2.0f + 6.0f) / 3.0f);
  CHECK(acc[1] == (-2.0f + 4.0f + 7.0f) / 3.0f);
  CHECK(acc[2] == (10.0f + 20.0f + 0.0f) / 3.0f);
}

TEST_CASE("integer Sum and Product wrap around") {
  for (rd::Isa isa : supported_isas()) {
    INFO("path " << rd::isa_name(isa));
    auto run = [&](auto a, auto b, ReduceOp op) {
      using T = decltype(a);
      std::vector<T> va(300, a), vb(300, b), out(300);  // long enough for the vector blocks
      rd::reduce3_on(isa, out.data(), va.data(), vb.data(), 300, braid::dtype_of<T>::value, op);
      for (T v : out)
        if (v != out[0]) FAIL("elements differ");
      return out[299];
    };
    using L8 = std::numeric_limits<std::int8_t>;
    using L32 = std::numeric_limits<std::int32_t>;
    using L64 = std::numeric_limits<std::int64_t>;
    CHECK(run(L8::max(), std::int8_t{1}, ReduceOp::Sum) == L8::min());
    CHECK(run(L8::min(), std::int8_t{-1}, ReduceOp::Product) == L8::min());
    CHECK(run(std::uint8_t{255}, std::uint8_t{1}, ReduceOp::Sum) == 0);
    CHECK(run(std::uint8_t{200}, std::uint8_t{2}, ReduceOp::Product) == 400 - 256);
    CHECK(run(L32::max(), std::int32_t{1}, ReduceOp::Sum) == L32::min());
    CHECK(run(std::int32_t{65536}, std::int32_t{65536}, ReduceOp::Product) == 0);
    CHECK(run(L64::max(), std::int64_t{1}, ReduceOp::Sum) == L64::min());
    CHECK(run(L64::min(), std::int64_t{-1}, ReduceOp::Sum) == L64::max());
    CHECK(run(L64::max(), std::int64_t{2}, ReduceOp::Product) == -2);
  }
}

TEST_CASE("float Min/Max propagate NaN and return the second operand on ties") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (rd::Isa isa : supported_isas()) {
    INFO("path " << rd::isa_name(isa));
    // 300 elements so the vector blocks run, not only the scalar tail.
    std::vector<float> a(300), b(300), out(300);
    for (int i = 0; i < 300; ++i) {
      a[i] = i % 3 == 0 ? nan : static_cast<float>(i % 5);
      b[i] = i % 3 == 1 ? nan : (i % 2 ? 0.0f : -0.0f);
      if (i % 3 == 2) a[i] = i % 2 ? -0.0f : 0.0f;  // a tie between zeros
    }
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      rd::reduce3_on(isa, out.data(), a.data(), b.data(), 300, DType::Float32, op);
      for (int i = 0; i < 300; ++i) {
        INFO("op " << braid::reduce_op_name(op) << ", element " << i);
        if (i % 3 != 2) {
          CHECK(std::isnan(out[i]));
        } else {
          CHECK(std::signbit(out[i]) == std::signbit(b[i]));
          CHECK(out[i] == 0.0f);
        }
      }
    }
    // The 16-bit floats follow the float32 rule.
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      const bool h = dt == DType::Float16;
      const std::uint16_t one = h ? rd::float_to_half(1.0f) : rd::float_to_bf16(1.0f);
      const std::uint16_t qnan = h ? 0x7e00 : 0x7fc0;
      std::vector<std::uint16_t> x(300, one), y(300, qnan), r(300);
      rd::reduce3_on(isa, r.data(), x.data(), y.data(), 300, dt, ReduceOp::Max);
      for (std::uint16_t v : r)
        CHECK(std::isnan(h ? rd::half_to_float(v) : rd::bf16_to_float(v)));
    }
  }
}

TEST_CASE("invalid op/dtype combinations and arguments throw InvalidArgument") {
  float f = 0;
  std::int32_t i = 0;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      if (valid(dt, op)) {
        CHECK_NOTHROW(rd::check_op(dt, op));
        continue;
      }
      INFO("dtype " << braid::dtype_name(dt) << ", op " << braid::reduce_op_name(op));
      const std::string expect = is_float(dt) ? "integer dtype" : "floating dtype";
      const std::vector<std::string> needles = {braid::reduce_op_name(op), braid::dtype_name(dt),
                                                expect};
      require_code([&] { rd::check_op(dt, op); }, ErrorCode::InvalidArgument, needles);
      void* p = is_float(dt) ? static_cast<void*>(&f) : static_cast<void*>(&i);
      require_code([&] { rd::reduce_into(p, p, 1, dt, op); }, ErrorCode::InvalidArgument,
                   needles);
      require_code([&] { rd::reduce3(p, p, p, 1, dt, op); }, ErrorCode::InvalidArgument,
                   needles);
    }
  }
  require_code([&] { rd::scale_avg(&i, 1, DType::Int32, 2); }, ErrorCode::InvalidArgument,
               {"int32", "floating"});
  require_code([&] { rd::scale_avg(&f, 1, DType::Float32, 0); }, ErrorCode::InvalidArgument,
               {"divisor 0"});
  require_code([&] { rd::reduce_into(&f, &f, -1, DType::Float32, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"negative"});
  require_code([&] { rd::reduce_into(nullptr, &f, 1, DType::Float32, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"null"});
  require_code([&] { rd::check_op(static_cast<DType>(42), ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"42"});
  require_code([&] { rd::check_op(DType::Int32, static_cast<ReduceOp>(42)); },
               ErrorCode::InvalidArgument, {"42"});
  // Zero elements need no memory.
  CHECK_NOTHROW(rd::reduce_into(nullptr, nullptr, 0, DType::Float32, ReduceOp::Sum));
}

// --- conversions ---------------------------------------------------------------------

namespace {

// binary16 decoded by arithmetic, independently of the library's bit twiddling.
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}
double bf16_value(std::uint16_t b) {
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  const double mag = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
  return (b & 0x8000) ? -mag : mag;
}
bool half_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

// For each pair of neighbouring finite positive 16-bit values lo, lo+1 (and
// their negatives): the float exactly between them rounds to the even one, and
// the floats just off the midpoint round to the nearer one.
template <class Widen, class Narrow>
void check_rounding(std::uint16_t max_finite, Widen widen_exact, Narrow narrow) {
  for (std::uint32_t lo = 0; lo < max_finite; ++lo) {
    const std::uint16_t l = static_cast<std::uint16_t>(lo), u = static_cast<std::uint16_t>(lo + 1);
    const double mid_d = (widen_exact(l) + widen_exact(u)) / 2;
    const float mid = static_cast<float>(mid_d);
    REQUIRE(static_cast<double>(mid) == mid_d);  // midpoints are floats
    const std::uint16_t even = (l & 1) ? u : l;
    for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
      const float s = sign ? -1.0f : 1.0f;
      INFO("between " << lo << " and " << lo + 1 << ", sign " << sign);
      if (narrow(s * mid) != (even | sign)) FAIL_CHECK("tie not to even");
      if (narrow(s * std::nextafter(mid, std::numeric_limits<float>::infinity())) != (u | sign)) FAIL_CHECK("above tie");
      if (narrow(s * std::nextafter(mid, 0.0f)) != (l | sign)) FAIL_CHECK("below tie");
    }
  }
}

#if TEST_X86
__attribute__((target("f16c"))) std::uint32_t hw_half_to_float_bits(std::uint16_t h) {
  const float f = _cvtsh_ss(h);
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
__attribute__((target("f16c"))) std::uint16_t hw_float_to_half(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
#endif

std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float bits_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

TEST_CASE("float16 conversions: every bit pattern") {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = rd::half_to_float(h);
    INFO("half bits " << i);
    if (half_is_nan(h)) {
      if (!std::isnan(f)) FAIL_CHECK("NaN widened to a number");
      const std::uint16_t back = rd::float_to_half(f);
      if (!half_is_nan(back) || (back & 0x8000) != (h & 0x8000)) FAIL_CHECK("NaN lost");
      continue;
    }
    if ((h & 0x7fff) == 0x7c00) {
      if (!std::isinf(f) || std::signbit(f) != bool(h & 0x8000)) FAIL_CHECK("inf");
    } else if (static_cast<double>(f) != half_value(h) || std::signbit(f) != bool(h & 0x8000)) {
      FAIL_CHECK("wrong value");
    }
    if (rd::float_to_half(f) != h) FAIL_CHECK("round trip changed the bits");
  }
  check_rounding(0x7bff, half_value, rd::float_to_half);
  // Past the largest half (65504): the tie at 65520 goes to infinity.
  CHECK(rd::float_to_half(65520.0f) == 0x7c00);
  CHECK(rd::float_to_half(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(rd::float_to_half(-1e10f) == 0xfc00);
  // Below the smallest subnormal (2^-24): half of it ties to zero, above rounds up.
  CHECK(rd::float_to_half(std::ldexp(1.0f, -25)) == 0);
  CHECK(rd::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 1);
  CHECK(rd::float_to_half(1e-30f) == 0);
  CHECK(rd::float_to_half(-1e-30f) == 0x8000);
}

TEST_CASE("bfloat16 conversions: every bit pattern") {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const float f = rd::bf16_to_float(b);
    INFO("bf16 bits " << i);
    if (bf16_is_nan(b)) {
      if (!std::isnan(f)) FAIL_CHECK("NaN widened to a number");
      const std::uint16_t back = rd::float_to_bf16(f);
      if (!bf16_is_nan(back) || (back & 0x8000) != (b & 0x8000)) FAIL_CHECK("NaN lost");
      continue;
    }
    if ((b & 0x7fff) == 0x7f80) {
      if (!std::isinf(f) || std::signbit(f) != bool(b & 0x8000)) FAIL_CHECK("inf");
    } else if (static_cast<double>(f) != bf16_value(b) || std::signbit(f) != bool(b & 0x8000)) {
      FAIL_CHECK("wrong value");
    }
    if (rd::float_to_bf16(f) != b) FAIL_CHECK("round trip changed the bits");
  }
  check_rounding(0x7f7f, bf16_value, rd::float_to_bf16);
  CHECK(rd::float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  // A NaN whose payload lives only in the low 16 bits must not become infinity.
  CHECK(bf16_is_nan(rd::float_to_bf16(bits_float(0x7f800001u))));
  CHECK(bf16_is_nan(rd::float_to_bf16(bits_float(0xff800001u))));
}

#if TEST_X86
TEST_CASE("scalar float16 conversion matches the F16C instructions bit for bit") {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_F16C)) {
    WARN("no F16C on this CPU; skipped");
    return;
  }
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    if (float_bits(rd::half_to_float(h)) != hw_half_to_float_bits(h)) {
      INFO("half bits " << i);
      FAIL_CHECK("widening differs from vcvtph2ps");
    }
  }
  // Every float with one of a few mantissa tails, across all exponents and
  // signs (ties, near-ties, NaN payloads, subnormals), plus random floats.
  std::vector<std::uint32_t> inputs;
  for (std::uint32_t top = 0; top < (1u << 9); ++top)   // sign + exponent
    for (std::uint32_t mid = 0; mid < (1u << 10); mid += 37)  // upper mantissa
      for (std::uint32_t tail : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu, 0x3fffu})
        inputs.push_back((top << 23) | (mid << 13) | tail);
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) inputs.push_back(rng());
  for (std::uint32_t x : inputs) {
    const float f = bits_float(x);
    if (rd::float_to_half(f) != hw_float_to_half(f)) {
      INFO("float bits " << x);
      FAIL_CHECK("narrowing differs from vcvtps2ph");
    }
  }
}
#endif  // TEST_X86

TEST_CASE("copy_streaming copies every byte at every alignment, and nothing more, on every path") {
  const std::vector<std::size_t> sizes{0, 1, 63, 64, 65, 127, 128, 4096 + 17, (1u << 20) + 3};
  std::vector<unsigned char> src((1u << 20) + 200), dst((1u << 20) + 300);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  using braid::reduction::Isa;
  int paths = 0;
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
    if (!braid::reduction::isa_supported(isa)) continue;
    ++paths;
    for (std::size_t bytes : sizes)
      for (std::size_t doff : {0, 1, 8, 33, 63})
        for (std::size_t soff : {0, 5, 64}) {
          std::fill(dst.begin(), dst.end(), 0xEE);
          braid::reduction::copy_streaming_on(isa, dst.data() + 64 + doff, src.data() + soff, bytes);
          INFO("bytes " << bytes << ", dst offset " << doff << ", src offset " << soff << ", path "
                        << braid::reduction::isa_name(isa));
          REQUIRE(std::memcmp(dst.data() + 64 + doff, src.data() + soff, bytes) == 0);
          const auto untouched = [](unsigned char b) { return b == 0xEE; };
          REQUIRE(std::all_of(dst.begin(), dst.begin() + static_cast<std::ptrdiff_t>(64 + doff), untouched));
          REQUIRE(std::all_of(dst.begin() + static_cast<std::ptrdiff_t>(64 + doff + bytes), dst.end(), untouched));
        }
  }
  CHECK(paths >= 1);  // the SSE2 body (Generic) runs on every x86-64
}
