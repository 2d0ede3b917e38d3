// line-exchange: the floor of a small-message exchange on this host. Two
// processes, each bound to a CPU of its own, write a counter into a cache
// line of their own and wait for the other's; the time per round is one
// cache line crossing between the two cores each way at once -- what a
// 2-rank 8-byte all_reduce cannot go below. The figure moves with where the
// hypervisor places the two vCPUs (0.03-0.06 us in this machine's fast
// phase, 0.26 in its slow one), so RESULTS.md prints it beside comparisons.
//
//   build-*/bench/line-exchange [CPU_A CPU_B]     (default 0 1)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
struct alignas(64) Line {
  std::atomic<unsigned long> v;
};
}  // namespace

int main(int argc, char** argv) {
  const int cpu[2] = {argc > 2 ? std::atoi(argv[1]) : 0, argc > 2 ? std::atoi(argv[2]) : 1};
  constexpr long kRounds = 2000000;
  auto* l = static_cast<Line*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (l == MAP_FAILED) return perror("mmap"), 1;
  new (&l[0]) Line{};
  new (&l[1]) Line{};
  const pid_t child = fork();
  if (child < 0) return perror("fork"), 1;
  const int me = child == 0 ? 1 : 0;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu[me], &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) perror("sched_setaffinity (running unbound)");
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 1; i <= kRounds; ++i) {
    l[me].v.store(static_cast<unsigned long>(i), std::memory_order_release);
    while (l[1 - me].v.load(std::memory_order_acquire) < static_cast<unsigned long>(i)) __builtin_ia32_pause();
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (me == 1) _exit(0);
  waitpid(child, nullptr, 0);
  std::printf("line exchange, CPUs %d and %d: %.3f us per round\n", cpu[0], cpu[1], us / kRounds);
  return 0;
}
