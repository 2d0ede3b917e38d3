// dram-ceiling: what one core, and each of N cores at once, move through
// memory here: memcpy of 64 MiB (bytes read + written) and c = a + b over
// float arrays (2 reads + 1 write), 3 times each, on buffers far larger than
// the L3. The figures bound what a memory-bound collective can reach.
//
//   build-*/bench/dram-ceiling [N]     (processes, one per CPU 0..N-1; default 1)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const int procs = argc > 1 ? std::atoi(argv[1]) : 1;
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  for (int p = 0; p < procs; ++p) {
    if (fork() != 0) continue;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(p, &s);
    sched_setaffinity(0, sizeof s, &s);
    std::vector<char> a(kBytes, 1), b(kBytes, 2);
    std::vector<float> x(kBytes / 4, 1), y(kBytes / 4, 2), z(kBytes / 4, 0);
    using Clock = std::chrono::steady_clock;
    for (int k = 0; k < 3; ++k) {
      auto t0 = Clock::now();
      std::memcpy(b.data(), a.data(), kBytes);
      const double copy_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
      for (std::size_t i = 0; i < z.size(); ++i) z[i] = x[i] + y[i];
      const double add_s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::printf("process %d (CPU %d): memcpy %.1f GB/s (read + write), c = a + b %.1f GB/s (2 reads + 1 write)%s\n",
                  p, p, 2.0 * kBytes / copy_s / 1e9, 3.0 * kBytes / add_s / 1e9, z[k] == 3 ? "" : " (wrong sum)");
    }
    std::fflush(stdout);
    _exit(0);
  }
  while (wait(nullptr) > 0) {
  }
  return 0;
}
