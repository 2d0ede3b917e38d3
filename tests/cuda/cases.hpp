// Shared by the CUDA kernel tests (test_cuda_kernels.cpp on a GPU,
// test_cuda_emulated.cpp on the host): the cases, random inputs with every
// awkward value, and a bit-for-bit comparison with braid::reduction.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "src/reduce/cpu_reduce.hpp"

namespace cuda_test {

using braid::DType;
using braid::ReduceOp;

inline const DType kAllDTypes[] = {DType::Int8,    DType::UInt8,    DType::Int32,
                                   DType::Int64,   DType::Float16,  DType::BFloat16,
                                   DType::Float32, DType::Float64};
inline const ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,
                                   ReduceOp::Max, ReduceOp::Avg,     ReduceOp::BAnd,
                                   ReduceOp::BOr, ReduceOp::BXor};
inline const std::int64_t kSmallCounts[] = {0, 1, 2, 7, 8, 15, 16, 17, 31, 33, 255, 4097};
inline const std::int64_t kLargeCounts[] = {65536 + 5, (std::int64_t{1} << 20) + 3};
inline constexpr std::int64_t kMaxCount = (std::int64_t{1} << 20) + 3;
inline constexpr std::size_t kGuard = 64;  // poisoned bytes either side of every output
inline constexpr std::size_t kSlack = 64;  // room for the misaligning offsets
inline const int kDivisors[] = {1, 2, 3, 7, 10, 1000003};

inline bool valid(DType dt, ReduceOp op) {
  const bool bitwise = op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
  return braid::dtype_is_floating(dt) ? !bitwise : op != ReduceOp::Avg;
}

// --- results ------------------------------------------------------------------------

inline int failures = 0;
inline long cases = 0;

template <class... Args>
void failf(const char* fmt, Args... args) {
  ++failures;
  if (failures <= 30) {
    std::printf("FAIL: ");
    std::printf(fmt, args...);
    std::printf("\n");
  } else if (failures == 31) {
    std::printf("(further failures not printed)\n");
  }
}

inline bool is_nan(DType dt, const unsigned char* p) {
  std::uint16_t h = 0;
  switch (dt) {
    case DType::Float16:
      std::memcpy(&h, p, 2);
      return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    case DType::BFloat16:
      std::memcpy(&h, p, 2);
      return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    case DType::Float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f != f;
    }
    case DType::Float64: {
      double f;
      std::memcpy(&f, p, 8);
      return f != f;
    }
    default: return false;
  }
}

// Bit for bit, except that any NaN matches any NaN (payloads are not promised,
// on the CPU either: tests/reduce).
inline bool same_element(DType dt, const unsigned char* got, const unsigned char* want) {
  return std::memcmp(got, want, braid::dtype_size(dt)) == 0 ||
         (is_nan(dt, got) && is_nan(dt, want));
}

inline std::string hex(const unsigned char* p, std::size_t n) {
  std::string s = "0x";
  char b[3];
  for (std::size_t i = n; i-- > 0;) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

// Every bit pattern for integers and 16-bit floats (inf, NaN, subnormals all
// occur); float32/float64 half random bits, half ordinary values. Then ties:
// every 8th element of b copies a's, every 16th pair is (+0, -0).
inline void fill_inputs(DType dt, std::int64_t n, std::vector<unsigned char>& a,
                        std::vector<unsigned char>& b, std::mt19937_64& rng) {
  const std::size_t sz = braid::dtype_size(dt);
  a.resize(n * sz);
  b.resize(n * sz);
  std::uniform_real_distribution<double> ordinary(-1000.0, 1000.0);
  for (auto* buf : {&a, &b}) {
    for (std::int64_t i = 0; i < n; ++i) {
      unsigned char* p = buf->data() + i * sz;
      const std::uint64_t bits = rng();
      if (dt == DType::Float32 && (bits & 1)) {
        const float v = static_cast<float>(ordinary(rng));
        std::memcpy(p, &v, 4);
      } else if (dt == DType::Float64 && (bits & 1)) {
        const double v = ordinary(rng);
        std::memcpy(p, &v, 8);
      } else {
        std::memcpy(p, &bits, sz);
      }
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 8 == 3) std::memcpy(&b[i * sz], &a[i * sz], sz);
    if (i % 16 == 5) {
      std::memset(&a[i * sz], 0, sz);
      std::memset(&b[i * sz], 0, sz);
      b[i * sz + sz - 1] = 0x80;  // the sign bit: -0 for floats, the minimum for ints
    }
  }
}

// --- shapes ------------------------------------------------------------------------------

enum class Alias { None, DstIsA, DstIsB, AllSame };
inline const Alias kAllAliases[] = {Alias::None, Alias::DstIsA, Alias::DstIsB, Alias::AllSame};

inline const char* alias_name(Alias a) {
  switch (a) {
    case Alias::None: return "dst,a,b distinct";
    case Alias::DstIsA: return "reduce_into (dst==a)";
    case Alias::DstIsB: return "dst==b";
    case Alias::AllSame: return "dst==a==b";
  }
  return "?";
}

struct Offsets {
  std::size_t dst, a, b;  // bytes past a 256-byte-aligned base
  const char* what;
};

// One set of offsets per access path, for an element of size sz.
inline std::vector<Offsets> offsets_for(std::size_t sz) {
  std::vector<Offsets> v = {{0, 0, 0, "aligned"},
                            {sz, sz, sz, "same offset (head+vectors+tail)"},
                            {0, sz, 3 * sz, "offsets differ (element path)"}};
  if (sz > 1) v.push_back({1, 3, 5, "not element-aligned (byte path)"});
  return v;
}

// Checks got = [guard][n elements][guard] against want (n elements): the
// guards still hold poison and every element matches. Returns false on the
// first difference, after reporting it with `label`.
inline bool check_result(const std::string& label, DType dt, std::int64_t n,
                         const std::vector<unsigned char>& got,
                         const std::vector<unsigned char>& want, int poison,
                         const unsigned char* a, const unsigned char* b) {
  const std::size_t sz = braid::dtype_size(dt);
  const std::size_t bytes = static_cast<std::size_t>(n) * sz;
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (got[i] != poison || got[kGuard + bytes + i] != poison) {
      failf("%s: guard byte %zu %s the output was written", label.c_str(), i,
            got[i] != poison ? "before" : "after");
      return false;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const unsigned char* g = got.data() + kGuard + i * sz;
    const unsigned char* w = want.data() + i * sz;
    if (!same_element(dt, g, w)) {
      failf("%s: element %" PRId64 ": a=%s b=%s gpu=%s cpu=%s", label.c_str(), i,
            hex(a + i * sz, sz).c_str(), b != nullptr ? hex(b + i * sz, sz).c_str() : "-",
            hex(g, sz).c_str(), hex(w, sz).c_str());
      return false;
    }
  }
  return true;
}

inline std::string label(DType dt, ReduceOp op, std::int64_t n, const Offsets& off, Alias alias) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s n=%" PRId64 ", %s, %s", braid::dtype_name(dt),
                braid::reduce_op_name(op), n, off.what, alias_name(alias));
  return buf;
}

// Where each operand lives, given three 256-byte-aligned regions (each with
// kGuard bytes before the data): aliased operands share the dst region.
struct Placement {
  unsigned char* dst;
  unsigned char* a;
  unsigned char* b;
};
inline Placement place(unsigned char* r0, unsigned char* r1, unsigned char* r2, const Offsets& off,
                       Alias alias) {
  Placement p;
  p.dst = r0 + kGuard + off.dst;
  p.a = alias == Alias::DstIsA || alias == Alias::AllSame ? p.dst : r1 + kGuard + off.a;
  p.b = alias == Alias::DstIsB || alias == Alias::AllSame ? p.dst : r2 + kGuard + off.b;
  return p;
}

}  // namespace cuda_test
