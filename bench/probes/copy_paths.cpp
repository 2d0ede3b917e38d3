// copy-paths: the ways one process can get 64 MiB that another holds, bare,
// to see what a broadcast between two ranks can reach here:
//   cma:   process_vm_readv of the other's buffer, CHUNK bytes a call (the
//          kernel's copy, page pinning included), beside a plain memcpy of
//          the same bytes in one process for scale;
//   relay: the other process copies CHUNK bytes at a time into SLOTS slots
//          of shared memory and this one copies them out, both at once on
//          two CPUs; the slots stay in cache, so DRAM sees each byte read
//          once and written once. STREAMING 1: the producer writes the
//          slots with streaming stores, so the chunk goes through DRAM
//          instead (which the host's slow phase does not slow: RESULTS.md
//          section 33). OUT_STREAMING 1: this process writes its
//          buffer with streaming stores, as Braid's peers write a large
//          Output (RESULTS.md section 42).
// Prints 5 rounds each.
//
//   build-*/bench/copy-paths cma [CHUNK_KIB] [THP 0|1]     (defaults 65536, 0)
//   build-*/bench/copy-paths relay [CHUNK_KIB] [SLOTS] [STREAMING 0|1] [OUT_STREAMING 0|1]   (defaults 256, 4, 0, 0)
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

constexpr std::size_t kBytes = std::size_t{64} << 20;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int cma(std::size_t chunk, bool thp) {
  char* src = static_cast<char*>(std::aligned_alloc(1 << 21, kBytes));
  char* dst = static_cast<char*>(std::aligned_alloc(1 << 21, kBytes));
  if (thp) {
    madvise(src, kBytes, MADV_HUGEPAGE);
    madvise(dst, kBytes, MADV_HUGEPAGE);
  }
  std::memset(src, 1, kBytes);
  std::memset(dst, 2, kBytes);
  const pid_t child = fork();  // holds src (copy on write, unwritten: the same pages)
  if (child == 0) {
    pause();
    _exit(0);
  }
  for (int k = 0; k < 5; ++k) {
    auto t0 = Clock::now();
    for (std::size_t o = 0; o < kBytes; o += chunk) {
      iovec l{dst + o, chunk}, r{src + o, chunk};
      if (process_vm_readv(child, &l, 1, &r, 1, 0) != static_cast<ssize_t>(chunk)) return 1;
    }
    const double s = since(t0);
    t0 = Clock::now();
    std::memcpy(dst, src, kBytes);
    const double m = since(t0);
    std::printf("cma, %zu KiB a call, huge pages %d: %.2f ms (%.1f GB/s); memcpy %.2f ms (%.1f GB/s)\n", chunk >> 10,
                thp ? 1 : 0, s * 1e3, kBytes / s / 1e9, m * 1e3, kBytes / m / 1e9);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}

struct Counters {
  alignas(64) std::atomic<long> produced{0};
  alignas(64) std::atomic<long> consumed{0};
};

// The producer's copy into a slot with streaming stores: the lines go to DRAM
// instead of staying in its cache, so the consumer reads them from memory
// rather than from the other CPU's cache. (The library's is
// reduction::copy_streaming; the probes are built bare, without libbraid.)
__attribute__((target("avx2"))) void stream_copy(char* dst, const char* src, std::size_t n) {
  for (std::size_t o = 0; o < n; o += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + o));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + o + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + o + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + o + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + o), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + o + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + o + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + o + 96), d);
  }
  _mm_sfence();
}

int relay(std::size_t chunk, int slots, bool streaming, bool out_streaming) {
  char* shared = static_cast<char*>(
      mmap(nullptr, 4096 + chunk * static_cast<std::size_t>(slots), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 1;
  auto* c = new (shared) Counters;
  char* slot0 = shared + 4096;
  const pid_t child = fork();
  const bool producer = child == 0;
  char* buf = static_cast<char*>(std::aligned_alloc(4096, kBytes));
  std::memset(buf, producer ? 1 : 2, kBytes);
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(producer ? 0 : 1, &s);
  sched_setaffinity(0, sizeof s, &s);
  const long chunks = static_cast<long>(kBytes / chunk);
  for (int k = 0; k < 5; ++k) {
    const auto t0 = Clock::now();
    for (long i = 0; i < chunks; ++i) {
      const long seq = k * chunks + i;
      char* slot = slot0 + static_cast<std::size_t>(seq % slots) * chunk;
      if (producer) {
        while (seq - c->consumed.load(std::memory_order_acquire) >= slots) __builtin_ia32_pause();
        if (streaming)
          stream_copy(slot, buf + static_cast<std::size_t>(i) * chunk, chunk);
        else
          std::memcpy(slot, buf + static_cast<std::size_t>(i) * chunk, chunk);
        c->produced.store(seq + 1, std::memory_order_release);
      } else {
        while (c->produced.load(std::memory_order_acquire) <= seq) __builtin_ia32_pause();
        if (out_streaming)
          stream_copy(buf + static_cast<std::size_t>(i) * chunk, slot, chunk);
        else
          std::memcpy(buf + static_cast<std::size_t>(i) * chunk, slot, chunk);
        c->consumed.store(seq + 1, std::memory_order_release);
      }
    }
    const double sec = since(t0);
    if (!producer)
      std::printf("relay, %zu KiB x %d slots%s%s: %.2f ms (%.1f GB/s)%s\n", chunk >> 10, slots,
                  streaming ? ", streaming stores" : "", out_streaming ? ", streaming out" : "", sec * 1e3,
                  kBytes / sec / 1e9, buf[kBytes - 1] == 1 ? "" : " (wrong bytes)");
  }
  if (producer) _exit(0);
  waitpid(child, nullptr, 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "cma") return cma((argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 65536) << 10, argc > 3 && argv[3][0] == '1');
  if (mode == "relay") {
    const bool streaming = argc > 4 && argv[4][0] == '1';
    const bool out_streaming = argc > 5 && argv[5][0] == '1';
    if ((streaming || out_streaming) && !__builtin_cpu_supports("avx2")) {
      std::fprintf(stderr, "copy-paths: streaming stores need AVX2, which this CPU lacks\n");
      return 2;
    }
    return relay((argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256) << 10, argc > 3 ? std::atoi(argv[3]) : 4,
                 streaming, out_streaming);
  }
  std::fprintf(stderr,
               "usage: copy-paths cma [CHUNK_KIB] [THP 0|1] | relay [CHUNK_KIB] [SLOTS] [STREAMING 0|1] [OUT_STREAMING 0|1]\n");
  return 2;
}
