// The CUDA kernels' code (cuda_kernels/reduce.cu) compiled by the host
// compiler, each launch run as a loop over the same thread indices the GPU
// would use (emulated_kernels.cpp), against braid::reduction bit for bit: every
// op x dtype, every access path and aliasing, with grids of several sizes.
//
// What this proves without a GPU: the split into head, 16-byte vectors and
// tail, the unrolled grid-stride loops and their remainders, the lane packing
// of 16-bit floats, the element functions and the alignment dispatch; that
// every output element is written exactly once and nothing outside it is.
// What it cannot: the GPU's own instructions (its IEEE arithmetic and cvt.rn
// conversions are taken from cuda_fp16.h's host versions here) and launches:
// test_cuda_kernels does those on a GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "tests/cuda/cases.hpp"
#include "cuda_kernels/launch.hpp"
#include "src/reduce/cpu_reduce.hpp"

using namespace cuda_test;
namespace em = braid::cuda::emulated;
namespace rd = braid::reduction;

namespace {

// Host regions aligned to 256 bytes like cudaMalloc's.
struct Regions {
  std::size_t region_bytes;
  std::vector<std::unique_ptr<unsigned char, decltype(&std::free)>> mem;
  explicit Regions(std::size_t max_bytes) : region_bytes(max_bytes + 2 * kGuard + kSlack) {
    const std::size_t rounded = (region_bytes + 255) / 256 * 256;
    for (int i = 0; i < 3; ++i)
      mem.emplace_back(static_cast<unsigned char*>(std::aligned_alloc(256, rounded)), &std::free);
  }
  unsigned char* region(int i) const { return mem[i].get(); }
};

// Multiprocessor counts to size grids from: 1 (4 blocks: long grid-stride
// loops), 3 (an odd grid), 132 (an H100: most threads idle at small counts).
const int kMultiprocessors[] = {1, 3, 132};

void run_case(Regions& r, DType dt, ReduceOp op, std::int64_t n, const Offsets& off, Alias alias,
              int sms, std::mt19937_64& rng) {
  ++cases;
  const std::size_t bytes = static_cast<std::size_t>(n) * braid::dtype_size(dt);
  std::vector<unsigned char> a, b;
  fill_inputs(dt, n, a, b, rng);
  if (alias == Alias::AllSame) b = a;
  const Placement p = place(r.region(0), r.region(1), r.region(2), off, alias);
  const int poison = (cases & 1) ? 0xa5 : 0x5a;
  std::memset(r.region(0), poison, r.region_bytes);
  if (bytes > 0) std::memcpy(p.a, a.data(), bytes);
  if (p.b != p.a && bytes > 0) std::memcpy(p.b, b.data(), bytes);
  if (n > 0) {
    const cudaError_t e = alias == Alias::DstIsA
                              ? em::launch_reduce3(p.dst, p.dst, p.b, n, dt, op, sms, nullptr)
                              : em::launch_reduce3(p.dst, p.a, p.b, n, dt, op, sms, nullptr);
    if (e != cudaSuccess) failf("%s: launch returned %d", label(dt, op, n, off, alias).c_str(), e);
  }
  std::vector<unsigned char> got(p.dst - kGuard, p.dst + bytes + kGuard);
  std::vector<unsigned char> want(bytes);
  rd::reduce3(want.data(), a.data(), b.data(), n, dt, op);
  char grid[32];
  std::snprintf(grid, sizeof grid, ", %d SMs", sms);
  check_result(label(dt, op, n, off, alias) + grid, dt, n, got, want, poison, a.data(), b.data());
}

void run_scale_case(Regions& r, DType dt, int divisor, std::int64_t n, std::size_t offset, int sms,
                    std::mt19937_64& rng) {
  ++cases;
  const std::size_t bytes = static_cast<std::size_t>(n) * braid::dtype_size(dt);
  std::vector<unsigned char> a, unused;
  fill_inputs(dt, n, a, unused, rng);
  unsigned char* d = r.region(0) + kGuard + offset;
  const int poison = (cases & 1) ? 0xa5 : 0x5a;
  std::memset(r.region(0), poison, r.region_bytes);
  if (bytes > 0) std::memcpy(d, a.data(), bytes);
  if (n > 0 && em::launch_scale(d, n, dt, divisor, sms, nullptr) != cudaSuccess)
    failf("scale launch failed");
  std::vector<unsigned char> got(d - kGuard, d + bytes + kGuard);
  std::vector<unsigned char> want = a;
  rd::scale_avg(want.data(), n, dt, divisor);
  char what[128];
  std::snprintf(what, sizeof what, "scale_avg %s /%d n=%lld offset %zu, %d SMs",
                braid::dtype_name(dt), divisor, static_cast<long long>(n), offset, sms);
  check_result(what, dt, n, got, want, poison, a.data(), nullptr);
}

// The fan (cuda::reduce_fan): k sources folded in order into m destinations,
// one of which may be the first source (in place), against the CPU folding
// the same sources in the same order. `shift` misaligns the sources from the
// destinations (element path) or by one byte (byte path).
void run_fan_case(DType dt, ReduceOp op, std::int64_t n, int nsrc, int ndst, bool in_place,
                  std::size_t shift, int sms, std::mt19937_64& rng) {
  ++cases;
  const std::size_t sz = braid::dtype_size(dt);
  const std::size_t bytes = static_cast<std::size_t>(n) * sz;
  const std::size_t stride = (bytes + 2 * kGuard + kSlack + 255) / 256 * 256;
  std::unique_ptr<unsigned char, decltype(&std::free)> mem(
      static_cast<unsigned char*>(std::aligned_alloc(256, stride * 16)), &std::free);
  const int poison = (cases & 1) ? 0xa5 : 0x5a;
  std::memset(mem.get(), poison, stride * 16);
  std::vector<std::vector<unsigned char>> in(static_cast<std::size_t>(nsrc));
  for (int k = 0; k < nsrc; k += 2) {
    std::vector<unsigned char> unused;
    fill_inputs(dt, n, in[static_cast<std::size_t>(k)], k + 1 < nsrc ? in[static_cast<std::size_t>(k) + 1] : unused, rng);
  }
  braid::cuda::FanArgs fan{};
  fan.nsrc = nsrc;
  fan.ndst = ndst;
  for (int d = 0; d < ndst; ++d) fan.dst[d] = mem.get() + static_cast<std::size_t>(d) * stride + kGuard;
  for (int k = 0; k < nsrc; ++k) {
    auto* at = in_place && k == 0 ? static_cast<unsigned char*>(fan.dst[0])
                                  : mem.get() + static_cast<std::size_t>(8 + k) * stride + kGuard + shift;
    if (bytes) std::memcpy(at, in[static_cast<std::size_t>(k)].data(), bytes);
    fan.src[k] = at;
  }
  std::vector<unsigned char> want = in[0];
  for (int k = 1; k < nsrc; ++k) rd::reduce_into(want.data(), in[static_cast<std::size_t>(k)].data(), n, dt, op);
  if (n > 0 && em::launch_fan(fan, n, dt, op, sms, nullptr) != cudaSuccess) failf("fan launch failed");
  char what[160];
  std::snprintf(what, sizeof what, "fan %s %s n=%lld %d->%d%s shift %zu, %d SMs", braid::dtype_name(dt),
                braid::reduce_op_name(op), static_cast<long long>(n), nsrc, ndst, in_place ? " in place" : "",
                shift, sms);
  for (int d = 0; d < ndst; ++d) {
    auto* out = static_cast<unsigned char*>(fan.dst[d]);
    std::vector<unsigned char> got(out - kGuard, out + bytes + kGuard);
    check_result(what, dt, n, got, want, poison, in[0].data(), nsrc > 1 ? in[1].data() : in[0].data());
  }
}

}  // namespace

int main() {
  std::printf("emulated CUDA kernels vs CPU path %s\n", rd::isa_name(rd::active_isa()));
  Regions r(static_cast<std::size_t>(kMaxCount) * 8);
  std::mt19937_64 rng(20251117);
  for (DType dt : kAllDTypes) {
    const int failures_before = failures;
    const long cases_before = cases;
    const std::size_t sz = braid::dtype_size(dt);
    for (ReduceOp op : kAllOps) {
      if (!valid(dt, op)) continue;
      for (const Offsets& off : offsets_for(sz)) {
        for (Alias alias : kAllAliases) {
          for (int sms : kMultiprocessors)
            for (std::int64_t n : kSmallCounts) run_case(r, dt, op, n, off, alias, sms, rng);
          // Large counts: 65541 on every path with the two aliasings that
          // differ in memory traffic and the smallest grid (long grid-stride
          // loops); 2^20 + 3 with the H100's grid, distinct buffers, and the
          // paths with a tail (kept few: emulation runs on one core).
          if (alias == Alias::None || alias == Alias::DstIsA)
            run_case(r, dt, op, kLargeCounts[0], off, alias, 1, rng);
          if (alias == Alias::None && off.dst != 0)
            run_case(r, dt, op, kLargeCounts[1], off, alias, 132, rng);
        }
      }
    }
    if (braid::dtype_is_floating(dt)) {
      for (int divisor : kDivisors)
        for (std::size_t offset : {std::size_t{0}, sz, std::size_t{1}}) {
          for (int sms : kMultiprocessors)
            for (std::int64_t n : kSmallCounts) run_scale_case(r, dt, divisor, n, offset, sms, rng);
          run_scale_case(r, dt, divisor, kLargeCounts[0], offset, 3, rng);
        }
    }
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
      for (auto [nsrc, ndst] : {std::pair{1, 3}, std::pair{2, 1}, std::pair{2, 2}, std::pair{5, 4}, std::pair{8, 8}})
        for (std::size_t shift : {std::size_t{0}, sz, std::size_t{1}})
          for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{17}, std::int64_t{4097}})
            for (int sms : {1, 132}) {
              if (shift == 1 && sz == 1) continue;  // bytes are never misaligned
              run_fan_case(dt, op, n, nsrc, ndst, false, shift, sms, rng);
              if (shift == 0) run_fan_case(dt, op, n, nsrc, ndst, true, shift, sms, rng);
            }
    std::printf("%-9s %5ld cases, %s\n", braid::dtype_name(dt), cases - cases_before,
                failures == failures_before ? "all match the CPU" : "MISMATCHES");
  }
  std::printf("emulated cuda kernels: %ld cases, %d failures\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
