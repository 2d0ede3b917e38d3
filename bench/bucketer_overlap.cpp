// bucketer-overlap: does braid::Bucketer hide gradient communication behind
// the backward pass? A synthetic backward pass produces T gradient tensors,
// last first, each after a fixed amount of CPU work (a busy loop of a fixed
// number of iterations, the same on every rank); the step is timed four ways:
//
//   compute   the backward pass alone (no communication): the floor
//   comm      one all_reduce_coalesced of all gradients, no compute
//   end       the backward pass, then one all_reduce_coalesced at the end
//   bucketer  the backward pass with Bucketer::mark_ready after each tensor,
//             then Bucketer::wait()
//   late      the backward pass, then every mark_ready and wait(): the same
//             buckets and algorithms as `bucketer`, without the overlap
//             (on one host the Bucketer's mem_alloc buffers may get another
//             all_reduce algorithm than `end`'s packed buffer)
//
// Perfect overlap makes `bucketer` as fast as `compute` (when communication
// is shorter than compute); none makes it `end`. hidden = (end - bucketer)
// / comm is the share of the communication time hidden, and late - bucketer
// the time the overlap alone saved. Every step's time
// is the slowest rank's; the table shows the median, min and max over the
// iterations, modes interleaved so that a noisy neighbour hits them alike.
//
// usage: braidrun -n N bucketer-overlap [--tensors T] [--elems E]
//        [--compute-us U | --work N | --sleep-us U] [--bucket-kib K] [--iters I]
//        [--warmup W] [--backend B]
// --compute-us is turned into iterations by timing the loop at start (on
// a busy machine that varies from run to run); --work N fixes them.
// --sleep-us U sleeps instead of spinning: compute that leaves the CPU
// free, as when an accelerator runs the backward pass, so communication
// can use the CPU meanwhile.
#include <braid/braid.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int tensors = 32;
  std::int64_t elems = 1 << 16;  // floats per tensor: 256 KiB
  double compute_us = 500;       // work before each tensor is ready
  std::int64_t work = 0;         // > 0: spin() iterations per tensor, instead of calibrating
  double sleep_us = 0;           // > 0: sleep this long per tensor instead of spinning
  std::size_t bucket_kib = 2048;
  int iters = 20;
  int warmup = 3;
  std::string backend = "auto";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tensors") o.tensors = std::stoi(next());
    else if (a == "--elems") o.elems = std::stoll(next());
    else if (a == "--compute-us") o.compute_us = std::stod(next());
    else if (a == "--work") o.work = std::stoll(next());
    else if (a == "--sleep-us") o.sleep_us = std::stod(next());
    else if (a == "--bucket-kib") o.bucket_kib = std::stoull(next());
    else if (a == "--iters") o.iters = std::stoi(next());
    else if (a == "--warmup") o.warmup = std::stoi(next());
    else if (a == "--backend") o.backend = next();
    else {
      std::fprintf(stderr,
                   "usage: %s [--tensors T] [--elems E] [--compute-us U | --work N | --sleep-us U] [--bucket-kib K] [--iters I] "
                   "[--warmup W] [--backend B]\n",
                   argv[0]);
      std::exit(a == "-h" || a == "--help" ? 0 : 2);
    }
  }
  return o;
}

// The busy loop: a dependent chain the compiler cannot shorten.
volatile double g_sink;
void spin(std::int64_t iterations) {
  double x = 1.0;
  for (std::int64_t i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

// Iterations of spin() per microsecond on this core, measured alone.
double calibrate() {
  const std::int64_t n = 2'000'000;
  double best = 0;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = Clock::now();
    spin(n);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n) / us);
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Calibrated before init, alone; every rank then uses the smallest rate
  // seen, so each does the same number of iterations.
  double rate = o.work > 0 || o.sleep_us > 0 ? 0 : calibrate();
  braid::init_process_group({.backend = o.backend});
  const int rank = braid::get_rank(), world = braid::get_world_size();
  braid::all_reduce(braid::tensor(&rate, 1), braid::ReduceOp::Min);
  const auto work = o.work > 0 ? o.work : static_cast<std::int64_t>(rate * o.compute_us);

  std::vector<std::vector<float>> grads(static_cast<std::size_t>(o.tensors),
                                        std::vector<float>(static_cast<std::size_t>(o.elems)));
  std::vector<braid::Tensor> views;
  for (auto& g : grads) views.push_back(braid::tensor(g));
  braid::Bucketer bucketer(views, {.bucket_bytes = o.bucket_kib << 10, .op = braid::ReduceOp::Avg});

  // The backward pass: tensor T-1 first; `ready(i)` right after tensor i is.
  auto backward = [&](auto&& ready) {
    for (int i = o.tensors - 1; i >= 0; --i) {
      if (o.sleep_us > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(o.sleep_us));
      else spin(work);
      std::fill(grads[static_cast<std::size_t>(i)].begin(), grads[static_cast<std::size_t>(i)].end(),
                static_cast<float>(rank + 1));
      ready(static_cast<std::size_t>(i));
    }
  };
  const float want = static_cast<float>(world + 1) / 2;  // the average of rank + 1
  auto check = [&](const char* mode) {
    for (const auto& g : grads)
      if (g.front() != want || g.back() != want) {
        std::fprintf(stderr, "rank %d: %s: wrong result %g, expected %g\n", rank, mode, g.front(), want);
        std::exit(1);
      }
  };

  const char* modes[] = {"compute", "comm", "end", "bucketer", "late"};
  constexpr int kModes = 5;
  std::vector<double> times[kModes];
  std::vector<double> waits;  // bucketer: time in wait(), after the backward pass
  double wait_ms = 0;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    for (int m = 0; m < kModes; ++m) {
      if (m == 1)  // comm: the gradients as a backward pass leaves them, filled untimed
        for (auto& g : grads) std::fill(g.begin(), g.end(), static_cast<float>(rank + 1));
      braid::barrier();
      const auto t0 = Clock::now();
      switch (m) {
        case 0: backward([](std::size_t) {}); break;
        case 1: braid::all_reduce_coalesced(views, braid::ReduceOp::Avg); break;
        case 2:
          backward([](std::size_t) {});
          braid::all_reduce_coalesced(views, braid::ReduceOp::Avg);
          break;
        case 3: {
          backward([&](std::size_t i) { bucketer.mark_ready(i); });
          const auto w0 = Clock::now();
          bucketer.wait();
          wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - w0).count();
          break;
        }
        case 4:
          backward([](std::size_t) {});
          for (std::size_t i = grads.size(); i-- > 0;) bucketer.mark_ready(i);
          bucketer.wait();
          break;
      }
      // Every mode ends when every rank is done (ranks that share CPUs may
      // otherwise take turns, and each rank's own time would hide that).
      braid::barrier();
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      braid::all_reduce(braid::tensor(&ms, 1), braid::ReduceOp::Max);
      if (m > 0) check(modes[m]);
      if (m == 3) braid::all_reduce(braid::tensor(&wait_ms, 1), braid::ReduceOp::Max);
      if (it >= o.warmup) times[m].push_back(ms);
      if (it >= o.warmup && m == 3) waits.push_back(wait_ms);
    }
  }

  if (rank == 0) {
    const double mb = static_cast<double>(o.tensors) * static_cast<double>(o.elems) * 4 / (1 << 20);
    std::printf("# bucketer-overlap: %d ranks, backend %s, %d tensors x %lld floats (%.1f MiB), "
                "compute per tensor: %lld iterations%s, buckets of %zu KiB (%zu buckets), "
                "%d iterations after %d warm-up\n",
                world, braid::get_backend().c_str(), o.tensors, static_cast<long long>(o.elems), mb,
                static_cast<long long>(o.sleep_us > 0 ? 0 : work),
                o.sleep_us > 0 ? (" (a " + std::to_string(static_cast<int>(o.sleep_us)) + " us sleep instead)").c_str()
                : o.work > 0 ? " (--work)"
                             : (" (calibrated to " + std::to_string(static_cast<int>(o.compute_us)) + " us)").c_str(),
                o.bucket_kib, bucketer.buckets().size(), o.iters, o.warmup);
    std::printf("# %-9s %10s %10s %10s   (ms per step, slowest rank)\n", "mode", "median", "min", "max");
    double med[kModes];
    for (int m = 0; m < kModes; ++m) {
      med[m] = median(times[m]);
      std::printf("  %-9s %10.2f %10.2f %10.2f\n", modes[m], med[m],
                  *std::min_element(times[m].begin(), times[m].end()),
                  *std::max_element(times[m].begin(), times[m].end()));
    }
    std::printf("# bucketer: wait() took %.2f ms (median, slowest rank) after the backward pass\n", median(waits));
    std::printf("# hidden = (end - bucketer) / comm = %.2f; end / bucketer = %.2f; late / bucketer = %.2f; "
                "bucketer / compute = %.2f\n",
                (med[2] - med[3]) / med[1], med[2] / med[3], med[4] / med[3], med[3] / med[0]);
  }
  braid::destroy_process_group();
  return 0;
}
