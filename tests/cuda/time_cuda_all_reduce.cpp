// time-cuda-all-reduce: all_reduce of device tensors between ranks sharing
// one GPU, against the floor the bytes it must move set (issue #6, part 5).
//
//   time-cuda-all-reduce [--mib 256] [--ranks 2] [--iters 10] [--algo NAME] [--dtype float32] [--inplace]
//                        [--refill] [--breakdown]
// Out of place by default (input untouched, output overwritten, as
// nccl-tests do): between calls no rank submits other GPU work. --inplace
// runs the calls on one buffer back to back, as nccl-tests' in-place column
// does (the values grow R-fold a call: float32 and bfloat16 stay finite
// for well over a hundred calls at 2 ranks).
// --inplace --refill resets every rank's buffer before each call (a fill on
// every rank's stream, outside the timed region), so each call also pays
// for the GPU switching back from the other processes' fills.
// --breakdown: rank 0 also times, alone, the pieces a direct (CUDA IPC) call
// is made of: exporting a buffer's IPC handle, waiting for an idle stream
// through an event, and the fused kernel that reduces two buffers into two.
//
// In the same run (rank 0, before the timed ops) a device-to-device copy of
// the same size measures the copy bandwidth B, counting bytes read plus
// written. An all_reduce of N bytes per rank among R ranks on one device must
// at least read every rank's input once and write every rank's output once:
// 2 R N bytes (R = 2: every element read twice and written twice). floor =
// 2 R N / B; the ratio printed is the median time over the floor.
//
// Each timed op: barrier, then all_reduce (blocking, on a non-blocking
// stream), then that stream synchronised: the time until the result is in
// device memory. Median of --iters after 2 warm-ups; inputs are ordinary
// random-ish values, never zeros. Exits 77 without a GPU.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_kernels/cuda.hpp"
#include "transports/cuda_ipc/ipc.hpp"
#include "tests/mp/harness.hpp"
#include "tests/cuda/usable_in_child.hpp"

namespace bc = braid::cuda;

namespace {

struct Options {
  std::size_t mib = 256;
  int ranks = 2;
  int iters = 10;
  std::string algo;
  bool breakdown = false;
  bool inplace = false;
  bool refill = false;
  braid::DType dtype = braid::DType::Float32;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--mib" && has) o.mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ranks" && has) o.ranks = std::atoi(argv[++i]);
    else if (a == "--iters" && has) o.iters = std::atoi(argv[++i]);
    else if (a == "--algo" && has) o.algo = argv[++i];
    else if (a == "--breakdown") o.breakdown = true;
    else if (a == "--inplace") o.inplace = true;
    else if (a == "--refill") o.refill = true;
    else if (a == "--dtype" && has && std::string(argv[i + 1]) == "bfloat16") ++i, o.dtype = braid::DType::BFloat16;
    else if (a == "--dtype" && has && std::string(argv[i + 1]) == "float32") ++i;
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--ranks N] [--iters N] [--algo NAME] "
                   "[--dtype float32|bfloat16] [--inplace [--refill]] [--breakdown]\n", argv[0]);
      std::exit(2);
    }
  }
  if (o.mib == 0 || o.ranks < 1 || o.iters < 1) {
    std::fprintf(stderr, "--mib, --ranks and --iters must be positive\n");
    std::exit(2);
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!cuda_test::usable_in_child(true)) return 77;
  auto res = braid_test::run_ranks(o.ranks, [&o](int rank, int) {
    using Clock = std::chrono::steady_clock;
    const std::size_t bytes = o.mib << 20;
    const std::int64_t count = static_cast<std::int64_t>(bytes / braid::dtype_size(o.dtype));
    bc::set_device(0);
    bc::Stream stream;
    void* s = stream.get();
    bc::DeviceBuffer data(bytes), scratch(bytes);
    // Ordinary values: a byte pattern that depends on the rank (never zeros;
    // as floats these are finite numbers of modest size).
    bc::fill_bytes(data.data(), 0x3c + rank, bytes, s);
    bc::stream_synchronize(s);

    double copy_gbs = 0;
    if (rank == 0) {
      std::vector<double> ms;
      for (int i = 0; i < o.iters + 2; ++i) {
        bc::Event a(true), b(true);
        a.record(s);
        bc::copy(scratch.data(), data.data(), bytes, s);
        b.record(s);
        b.synchronize();
        if (i >= 2) ms.push_back(bc::Event::elapsed_ms(a, b));
      }
      copy_gbs = 2.0 * static_cast<double>(bytes) / (median(ms) * 1e-3) / 1e9;
    }

    if (rank == 0 && o.breakdown) {
      using us = std::chrono::duration<double, std::micro>;
      std::vector<double> exp_us, settle_us, fan_ms;
      bc::Event e;
      for (int i = 0; i < 50; ++i) {
        const auto a = Clock::now();
        (void)braid::cuda_ipc::export_memory(data.data());
        exp_us.push_back(us(Clock::now() - a).count());
        const auto b = Clock::now();
        e.record(s);
        e.synchronize();
        settle_us.push_back(us(Clock::now() - b).count());
      }
      void* dsts[2] = {data.data(), scratch.data()};
      const void* srcs[2] = {data.data(), scratch.data()};
      for (int i = 0; i < o.iters + 2; ++i) {
        bc::fill_bytes(data.data(), 0x3c, bytes, s);
        bc::fill_bytes(scratch.data(), 0x3d, bytes, s);
        bc::Event a(true), b(true);
        a.record(s);
        bc::reduce_fan(dsts, 2, srcs, 2, count, o.dtype, braid::ReduceOp::Sum, s);
        b.record(s);
        b.synchronize();
        if (i >= 2) fan_ms.push_back(bc::Event::elapsed_ms(a, b));
      }
      std::printf("breakdown: ipc_export %.1f us (median of 50, first %.1f), idle-stream event sync %.1f us, "
                  "fan 2->2 kernel %.3f ms = %.1f GB/s (read + written)\n",
                  median(exp_us), exp_us[0], median(settle_us), median(fan_ms),
                  4.0 * static_cast<double>(bytes) / (median(fan_ms) * 1e-3) / 1e9);
    }

    braid_test::init_env();
    braid::OpOptions op{.stream = s, .algorithm = o.algo.empty() ? nullptr : o.algo.c_str()};
    const braid::Tensor t = braid::tensor(data.data(), count, o.dtype, braid::Device::cuda(0));
    const braid::Tensor out = braid::tensor(scratch.data(), count, o.dtype, braid::Device::cuda(0));
    bc::fill_bytes(data.data(), 0x3c + rank, bytes, s);
    bc::stream_synchronize(s);
    std::vector<double> secs;
    for (int i = 0; i < o.iters + 2; ++i) {
      if (o.inplace && o.refill) {
        bc::fill_bytes(data.data(), 0x3c + rank, bytes, s);
        bc::stream_synchronize(s);
      }
      braid::barrier();
      const auto t0 = Clock::now();
      if (o.inplace) braid::all_reduce(t, braid::ReduceOp::Sum, op);
      else braid::all_reduce(t, out, braid::ReduceOp::Sum, op);
      bc::stream_synchronize(s);
      const auto t1 = Clock::now();
      if (i >= 2) secs.push_back(std::chrono::duration<double>(t1 - t0).count());

    }
    if (rank == 0) {
      const double t_med = median(secs);
      const double floor_bytes = 2.0 * o.ranks * static_cast<double>(bytes);
      const double floor_s = floor_bytes / (copy_gbs * 1e9);
      std::printf("device: %s\n", bc::device_name(0).c_str());
      std::printf("copy D2D %zu MiB: %.1f GB/s (read + written)\n", o.mib, copy_gbs);
      std::printf("all_reduce %s %zu MiB x %d ranks on one GPU, %s, algo %s: median %.3f ms over %d runs\n",
                  braid::dtype_name(o.dtype), o.mib, o.ranks,
                  o.inplace ? (o.refill ? "in place, refilled before each call" : "in place") : "out of place",
                  o.algo.empty() ? "auto" : o.algo.c_str(), t_med * 1e3, o.iters);
      std::printf("floor (%d x %zu MiB read + %d x %zu MiB written at the copy bandwidth): %.3f ms\n",
                  o.ranks, o.mib, o.ranks, o.mib, floor_s * 1e3);
      std::printf("ratio to floor: %.2f (issue #6 asks <= 1.25)\n", t_med / floor_s);
    }
  }, {.timeout_s = 500, .env = {}});
  if (!braid_test::all_ok(res)) {
    std::printf("time-cuda-all-reduce failed: %s\n", braid_test::describe(res).c_str());
    return 1;
  }
  return 0;
}
