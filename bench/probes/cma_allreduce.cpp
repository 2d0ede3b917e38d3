// cma-allreduce: the two ways a 2-rank all_reduce of buffers nobody shares
// can move bytes with cross-memory attach, bare, to see what a runtime could
// gain at 16 MiB. Each rank reduces its half -- process_vm_readv of the
// peer's half in chunks, added to its own into its Output -- and then
//   twoshot: reads the peer's reduced half out of the peer's Output, or
//   push:    writes each reduced chunk into the peer's Output at once, while
//            it is still in cache (one read of each byte fewer).
// Prints the best of 10 calls (after 2 warm-ups), out of place.
//
//   build-*/bench/cma-allreduce twoshot|push [CHUNK_BYTES] [MIB]   (defaults 262144, 16)
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
struct Shared {
  std::atomic<int> gen[2];
  pid_t pid[2];
  float* in[2];
  float* out[2];
};

void barrier(Shared* s, int me, int& gen) {
  ++gen;
  s->gen[me].store(gen);
  while (s->gen[1 - me].load() < gen) __builtin_ia32_pause();
}

void move(bool write, pid_t pid, void* local, void* remote, std::size_t bytes) {
  iovec l{local, bytes}, r{remote, bytes};
  const ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
  if (n != static_cast<ssize_t>(bytes)) {
    std::perror(write ? "process_vm_writev" : "process_vm_readv");
    std::exit(1);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const std::string variant = argc > 1 ? argv[1] : "";
  if (variant != "twoshot" && variant != "push") {
    std::fprintf(stderr, "usage: cma-allreduce twoshot|push [CHUNK_BYTES] [MIB]\n");
    return 2;
  }
  const bool push = variant == "push";
  const std::size_t chunk = (argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 262144) / 4;
  const std::size_t n = (argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 16) * (std::size_t{1} << 20) / 4;
  if (chunk == 0 || n % (2 * chunk) != 0) {
    std::fprintf(stderr, "cma-allreduce: half the buffer must be a multiple of the chunk\n");
    return 2;
  }
  auto* s = static_cast<Shared*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (s == MAP_FAILED) return std::perror("mmap"), 1;
  const pid_t child = fork();
  const int me = child == 0 ? 1 : 0, peer = 1 - me;
  cpu_set_t cs;
  CPU_ZERO(&cs);
  CPU_SET(me, &cs);
  sched_setaffinity(0, sizeof cs, &cs);
  std::vector<float> in(n, static_cast<float>(me + 1)), out(n, 0.0f), bounce(chunk);
  s->pid[me] = getpid();
  s->in[me] = in.data();
  s->out[me] = out.data();
  int gen = 0;
  barrier(s, me, gen);
  const std::size_t half = n / 2, lo = static_cast<std::size_t>(me) * half;
  double best = 1e30;
  for (int it = 0; it < 12; ++it) {
    barrier(s, me, gen);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t o = lo; o < lo + half; o += chunk) {
      move(false, s->pid[peer], bounce.data(), s->in[peer] + o, chunk * 4);
      for (std::size_t i = 0; i < chunk; ++i) out[o + i] = in[o + i] + bounce[i];
      if (push) move(true, s->pid[peer], out.data() + o, s->out[peer] + o, chunk * 4);
    }
    if (!push) {
      barrier(s, me, gen);  // the peer's half is reduced
      const std::size_t plo = static_cast<std::size_t>(peer) * half;
      move(false, s->pid[peer], out.data() + plo, s->out[peer] + plo, half * 4);
    }
    barrier(s, me, gen);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (it >= 2 && ms < best) best = ms;
  }
  const bool right = out[0] == 3 && out[n - 1] == 3;
  if (me == 1) _exit(right ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("cma-allreduce %s, %zu MiB, chunks of %zu bytes: best %.2f ms%s\n", variant.c_str(),
              n * 4 >> 20, chunk * 4, best, right && status == 0 ? "" : " (WRONG RESULT)");
  return right && status == 0 ? 0 : 1;
}
