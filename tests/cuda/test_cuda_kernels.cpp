// CUDA reduction kernels (cuda_kernels/) on the GPU against braid::reduction,
// the CPU kernels, bit for bit: every op x dtype, counts from 0 to 2^20 + 3,
// the three access paths (16-byte vectors with a head and tail, element-wise
// for sources at different offsets within 16 bytes, byte-wise for pointers not
// aligned to their element), and the aliasings the API allows (reduce_into,
// dst == b, dst == a == b); Avg's scale_avg for every floating dtype. Each
// output region, with 64 guard bytes on either side, is poisoned on the device
// before each run; the guards must come back untouched. A NaN result matches
// any NaN, as in tests/reduce (payloads are not promised).
//
// Each case runs on one non-blocking stream (poison, uploads, kernel, download)
// with one synchronisation at the end: stream order is what makes it right.
//
// Without a usable GPU it prints "no CUDA device: <reason>" and exits 77,
// which meson counts as a skipped test.
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "braid/error.hpp"
#include "tests/cuda/cases.hpp"
#include "cuda_kernels/cuda.hpp"
#include "src/reduce/cpu_reduce.hpp"

using namespace cuda_test;
namespace bc = braid::cuda;
namespace rd = braid::reduction;

namespace {

struct Device {
  bc::Stream stream;
  std::vector<bc::DeviceBuffer> buf;  // three regions: dst, a, b (cudaMalloc: 256-aligned)
  std::size_t region_bytes;
  explicit Device(std::size_t max_bytes) : region_bytes(max_bytes + 2 * kGuard + kSlack) {
    for (int i = 0; i < 3; ++i) buf.emplace_back(region_bytes);
  }
  unsigned char* region(int i) const { return static_cast<unsigned char*>(buf[i].data()); }
};

void run_case(Device& dev, DType dt, ReduceOp op, std::int64_t n, const Offsets& off, Alias alias,
              std::mt19937_64& rng, bool default_stream = false) {
  ++cases;
  const std::size_t bytes = static_cast<std::size_t>(n) * braid::dtype_size(dt);
  void* stream = default_stream ? nullptr : dev.stream.get();
  std::vector<unsigned char> a, b;
  fill_inputs(dt, n, a, b, rng);
  if (alias == Alias::AllSame) b = a;
  const Placement p = place(dev.region(0), dev.region(1), dev.region(2), off, alias);

  const int poison = (cases & 1) ? 0xa5 : 0x5a;
  bc::fill_bytes(dev.region(0), poison, dev.region_bytes, stream);
  bc::copy(p.a, a.data(), bytes, stream);
  if (p.b != p.a) bc::copy(p.b, b.data(), bytes, stream);
  if (alias == Alias::DstIsA)
    bc::reduce_into(p.dst, p.b, n, dt, op, stream);
  else
    bc::reduce3(p.dst, p.a, p.b, n, dt, op, stream);
  std::vector<unsigned char> got(bytes + 2 * kGuard);
  bc::copy(got.data(), p.dst - kGuard, got.size(), stream);
  bc::stream_synchronize(stream);

  std::vector<unsigned char> want(bytes);
  rd::reduce3(want.data(), a.data(), b.data(), n, dt, op);
  check_result(label(dt, op, n, off, alias) + (default_stream ? ", default stream" : ""), dt, n,
               got, want, poison, a.data(), b.data());
}

void run_scale_case(Device& dev, DType dt, int divisor, std::int64_t n, std::size_t offset,
                    std::mt19937_64& rng) {
  ++cases;
  const std::size_t bytes = static_cast<std::size_t>(n) * braid::dtype_size(dt);
  void* stream = dev.stream.get();
  std::vector<unsigned char> a, unused;
  fill_inputs(dt, n, a, unused, rng);
  unsigned char* d = dev.region(0) + kGuard + offset;
  const int poison = (cases & 1) ? 0xa5 : 0x5a;
  bc::fill_bytes(dev.region(0), poison, dev.region_bytes, stream);
  bc::copy(d, a.data(), bytes, stream);
  bc::scale_avg(d, n, dt, divisor, stream);
  std::vector<unsigned char> got(bytes + 2 * kGuard);
  bc::copy(got.data(), d - kGuard, got.size(), stream);
  bc::stream_synchronize(stream);

  std::vector<unsigned char> want = a;
  rd::scale_avg(want.data(), n, dt, divisor);
  char what[128];
  std::snprintf(what, sizeof what, "scale_avg %s /%d n=%lld offset %zu", braid::dtype_name(dt),
                divisor, static_cast<long long>(n), offset);
  check_result(what, dt, n, got, want, poison, a.data(), nullptr);
}

void expect_error(const char* what, braid::ErrorCode code, const std::function<void()>& fn) {
  ++cases;
  try {
    fn();
    failf("%s: no error thrown", what);
  } catch (const braid::Error& e) {
    if (e.code() != code) failf("%s: wrong error code; message: %s", what, e.what());
  }
}

}  // namespace

int main() {
  if (!bc::available()) {
    std::printf("no CUDA device: %s\n", bc::unavailable_reason().c_str());
    return 77;
  }
  const int device = bc::current_device();
  std::printf("CUDA devices: %d; device %d: %s, %d multiprocessors\n", bc::device_count(), device,
              bc::device_name(device).c_str(), bc::multiprocessor_count(device));
  std::printf("CPU reference path: %s\n", rd::isa_name(rd::active_isa()));

  Device dev(static_cast<std::size_t>(kMaxCount) * 8);
  std::mt19937_64 rng(20251117);

  for (DType dt : kAllDTypes) {
    const int failures_before = failures;
    const long cases_before = cases;
    const std::size_t sz = braid::dtype_size(dt);
    for (ReduceOp op : kAllOps) {
      if (!valid(dt, op)) continue;
      for (const Offsets& off : offsets_for(sz)) {
        for (Alias alias : kAllAliases) {
          for (std::int64_t n : kSmallCounts) run_case(dev, dt, op, n, off, alias, rng);
          if (alias == Alias::None || alias == Alias::DstIsA)
            for (std::int64_t n : kLargeCounts) run_case(dev, dt, op, n, off, alias, rng);
        }
      }
      run_case(dev, dt, op, 4097, offsets_for(sz)[1], Alias::None, rng, /*default_stream=*/true);
    }
    if (braid::dtype_is_floating(dt)) {
      for (int divisor : kDivisors) {
        for (std::size_t offset : {std::size_t{0}, sz, std::size_t{1}}) {
          for (std::int64_t n : kSmallCounts) run_scale_case(dev, dt, divisor, n, offset, rng);
          for (std::int64_t n : kLargeCounts) run_scale_case(dev, dt, divisor, n, offset, rng);
        }
      }
    }
    std::printf("%-9s %5ld cases, %s\n", braid::dtype_name(dt), cases - cases_before,
                failures == failures_before ? "all match the CPU" : "MISMATCHES");
  }

  // Stream order and events: an event recorded after a kernel completes with it.
  {
    ++cases;
    bc::Event done;
    const std::int64_t n = kMaxCount;
    std::vector<float> x(n, 1.5f), y(n, 2.25f), out(n, 0.0f);
    void* s = dev.stream.get();
    bc::copy(dev.region(1), x.data(), n * 4, s);
    bc::copy(dev.region(2), y.data(), n * 4, s);
    bc::reduce3(dev.region(0), dev.region(1), dev.region(2), n, DType::Float32, ReduceOp::Sum, s);
    done.record(s);
    done.synchronize();
    if (!done.query()) failf("event not complete after synchronize()");
    bc::copy(out.data(), dev.region(0), n * 4, s);
    bc::stream_synchronize(s);
    for (std::int64_t i = 0; i < n; ++i)
      if (out[i] != 3.75f) {
        failf("event test: element %lld is %g, expected 3.75", static_cast<long long>(i), out[i]);
        break;
      }
  }

  // Argument errors: the CPU kernels' rules and codes.
  using braid::ErrorCode;
  void* p = dev.region(0);
  expect_error("bitwise op on float32", ErrorCode::InvalidArgument,
               [&] { bc::reduce3(p, p, p, 4, DType::Float32, ReduceOp::BXor, nullptr); });
  expect_error("Avg on int32", ErrorCode::InvalidArgument,
               [&] { bc::reduce_into(p, p, 4, DType::Int32, ReduceOp::Avg, nullptr); });
  expect_error("negative count", ErrorCode::InvalidArgument,
               [&] { bc::reduce3(p, p, p, -1, DType::Float32, ReduceOp::Sum, nullptr); });
  expect_error("null source", ErrorCode::InvalidArgument,
               [&] { bc::reduce3(p, nullptr, p, 4, DType::Float32, ReduceOp::Sum, nullptr); });
  expect_error("scale_avg on int64", ErrorCode::InvalidArgument,
               [&] { bc::scale_avg(p, 4, DType::Int64, 2, nullptr); });
  expect_error("scale_avg by 0", ErrorCode::InvalidArgument,
               [&] { bc::scale_avg(p, 4, DType::Float32, 0, nullptr); });
  expect_error("set_device out of range", ErrorCode::InvalidArgument,
               [&] { bc::set_device(bc::device_count()); });
  bc::reduce3(nullptr, nullptr, nullptr, 0, DType::Float32, ReduceOp::Sum, nullptr);  // no-op
  if (!bc::is_device_pointer(p)) failf("is_device_pointer(cudaMalloc'd) is false");
  int host_value = 0;
  if (bc::is_device_pointer(&host_value)) failf("is_device_pointer(stack) is true");

  std::printf("cuda kernels: %ld cases, %d failures\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
