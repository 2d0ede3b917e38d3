// cuda-reduce-bench: the CUDA reduction kernels (cuda_kernels/) against a
// device-to-device cudaMemcpy of the same size, in the same run.
//
//   cuda-reduce-bench [--mib N] [--iters N] [--all]
//
// Each buffer is N MiB (default 256, far past the L2), filled with random
// ordinary values (never zeros). Every row is the median of --iters runs
// (default 20), each timed with CUDA events after 3 warm-up runs. Bandwidth
// counts bytes read plus bytes written: a copy moves 2N, reduce3 (dst = a op
// b) and reduce_into (dst op= src) move 3N, scale_avg 2N. "vs copy" is the
// row's GB/s over the copy's: 1.00 means the kernel streams memory as fast as
// the copy engine path does.
//
// Rows: float32 and bfloat16 by default (--all adds float16, float64, int32,
// int8); for each, the 16-byte vector path (aligned), the same with every
// pointer one element in (head + vectors + tail), and the element path
// (sources at different offsets within 16 bytes), which plans should avoid.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "cuda_kernels/cuda.hpp"
#include "src/reduce/half.hpp"

using braid::DType;
using braid::ReduceOp;
namespace bc = braid::cuda;

namespace {

struct Options {
  std::size_t mib = 256;
  int iters = 20;
  bool all = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      o.mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--iters" && i + 1 < argc) {
      o.iters = std::atoi(argv[++i]);
    } else if (a == "--all") {
      o.all = true;
    } else {
      std::fprintf(stderr, "usage: %s [--mib N] [--iters N] [--all]\n", argv[0]);
      std::exit(2);
    }
  }
  if (o.mib == 0 || o.iters < 1) {
    std::fprintf(stderr, "--mib and --iters must be positive\n");
    std::exit(2);
  }
  return o;
}

// Median milliseconds of fn over iters runs on stream, after 3 warm-ups;
// prepare (untimed) runs before each.
double median_ms(const std::function<void()>& fn, void* stream, int iters,
                 const std::function<void()>& prepare = {}) {
  for (int i = 0; i < 3; ++i) {
    if (prepare) prepare();
    fn();
  }
  bc::stream_synchronize(stream);
  std::vector<double> ms;
  bc::Event start(true), stop(true);
  for (int i = 0; i < iters; ++i) {
    if (prepare) prepare();
    start.record(stream);
    fn();
    stop.record(stream);
    stop.synchronize();
    ms.push_back(bc::Event::elapsed_ms(start, stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Random ordinary values of dt, generated on the host in one 16 MiB block and
// tiled over the device buffer.
void fill_random(void* dev, std::size_t bytes, DType dt, std::mt19937_64& rng, void* stream) {
  const std::size_t block = std::min<std::size_t>(bytes, 16u << 20);
  std::vector<unsigned char> host(block);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const std::size_t sz = braid::dtype_size(dt);
  for (std::size_t i = 0; i + sz <= block; i += sz) {
    const float f = uni(rng);
    switch (dt) {
      case DType::Float32: std::memcpy(&host[i], &f, 4); break;
      case DType::Float64: {
        const double d = f;
        std::memcpy(&host[i], &d, 8);
        break;
      }
      case DType::Float16: {
        const std::uint16_t h = braid::reduction::float_to_half(f);
        std::memcpy(&host[i], &h, 2);
        break;
      }
      case DType::BFloat16: {
        const std::uint16_t h = braid::reduction::float_to_bf16(f);
        std::memcpy(&host[i], &h, 2);
        break;
      }
      default: {
        const std::uint64_t r = rng();
        std::memcpy(&host[i], &r, sz);
      }
    }
  }
  auto* p = static_cast<unsigned char*>(dev);
  for (std::size_t off = 0; off < bytes; off += block)
    bc::copy(p + off, host.data(), std::min(block, bytes - off), stream);
  bc::stream_synchronize(stream);  // host is freed on return
}

void row(const char* what, DType dt, double bytes_moved, double ms, double copy_gbs) {
  const double gbs = bytes_moved / (ms * 1e-3) / 1e9;
  std::printf("%-34s %-9s %10.3f %9.1f %8.2f\n", what, braid::dtype_name(dt), ms, gbs,
              copy_gbs > 0 ? gbs / copy_gbs : 1.0);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!bc::available()) {
    std::printf("no CUDA device: %s\n", bc::unavailable_reason().c_str());
    return 77;
  }
  try {
    const int device = bc::current_device();
    std::printf("device %d: %s, %d multiprocessors; buffers %zu MiB, median of %d runs\n",
                device, bc::device_name(device).c_str(), bc::multiprocessor_count(device), o.mib,
                o.iters);
    const std::size_t bytes = o.mib << 20;
    bc::Stream stream;
    void* s = stream.get();
    // 16 spare bytes so the offset rows stay inside the allocations.
    bc::DeviceBuffer a(bytes + 16), b(bytes + 16), dst(bytes + 16);
    std::mt19937_64 rng(7);

    std::printf("%-34s %-9s %10s %9s %8s\n", "kernel", "dtype", "ms", "GB/s", "vs copy");
    const double copy_ms = median_ms([&] { bc::copy(dst.data(), a.data(), bytes, s); }, s, o.iters);
    const double copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
    row("cudaMemcpyAsync D2D", DType::UInt8, 2.0 * bytes, copy_ms, copy_gbs);

    std::vector<DType> dtypes = {DType::Float32, DType::BFloat16};
    if (o.all)
      for (DType dt : {DType::Float16, DType::Float64, DType::Int32, DType::Int8})
        dtypes.push_back(dt);
    for (DType dt : dtypes) {
      const std::size_t sz = braid::dtype_size(dt);
      const std::int64_t n = static_cast<std::int64_t>(bytes / sz);
      fill_random(a.data(), bytes, dt, rng, s);
      fill_random(b.data(), bytes, dt, rng, s);
      fill_random(dst.data(), bytes, dt, rng, s);
      auto* pa = static_cast<unsigned char*>(a.data());
      auto* pb = static_cast<unsigned char*>(b.data());
      auto* pd = static_cast<unsigned char*>(dst.data());
      const bool floating = braid::dtype_is_floating(dt);
      const ReduceOp op = ReduceOp::Sum;

      row("reduce3 sum (16-byte vectors)", dt, 3.0 * bytes,
          median_ms([&] { bc::reduce3(pd, pa, pb, n, dt, op, s); }, s, o.iters), copy_gbs);
      row("reduce_into sum (16-byte vectors)", dt, 3.0 * bytes,
          median_ms([&] { bc::reduce_into(pd, pa, n, dt, op, s); }, s, o.iters), copy_gbs);
      if (sz < 16)
        row("reduce3 sum (+1 element: head/tail)", dt, 3.0 * (bytes - sz),
            median_ms([&] { bc::reduce3(pd + sz, pa + sz, pb + sz, n - 1, dt, op, s); }, s,
                      o.iters),
            copy_gbs);
      if (sz < 16)
        row("reduce3 sum (element path)", dt, 3.0 * (bytes - sz),
            median_ms([&] { bc::reduce3(pd, pa + sz, pb, n - 1, dt, op, s); }, s, o.iters),
            copy_gbs);
      if (dt == DType::BFloat16 || dt == DType::Float32)
        row("reduce3 max (16-byte vectors)", dt, 3.0 * bytes,
            median_ms([&] { bc::reduce3(pd, pa, pb, n, dt, ReduceOp::Max, s); }, s, o.iters),
            copy_gbs);
      // dst is refilled (untimed) before each run, so repeated division never
      // walks the values down into subnormals.
      if (floating)
        row("scale_avg /3 (16-byte vectors)", dt, 2.0 * bytes,
            median_ms([&] { bc::scale_avg(pd, n, dt, 3, s); }, s, o.iters,
                      [&] { bc::copy(pd, pa, bytes, s); }),
            copy_gbs);
    }
    stream.synchronize();
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "cuda-reduce-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
