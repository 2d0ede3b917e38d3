// One rank of a chaos job (tools/chaos): collectives of several sizes and a
// point-to-point ring in a loop, until an op fails. It then prints what it
// caught on one line and returns 3 from main without destroy_process_group,
// as a program that gives up would: that exit must be clean.
//
//   CHAOS error ms=<unix ms> code=<code> peer=<rank> what=<message>
//
// BRAID_BACKEND picks the backend, BRAID_CHAOS_TIMEOUT_MS each op's timeout.
// With BRAID_CHAOS_END_MS (a unix time in ms) the ranks stop looping once
// it has passed (they agree through the small all_reduce, a max of their
// flags), call destroy_process_group and print "CHAOS done": a fault then
// lands in teardown, or after it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <braid/braid.hpp>

namespace {
long long unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int main() {
  try {
    braid::InitOptions o;
    if (const char* b = std::getenv("BRAID_BACKEND")) o.backend = b;
    const char* t = std::getenv("BRAID_CHAOS_TIMEOUT_MS");
    const char* end = std::getenv("BRAID_CHAOS_END_MS");
    const long long end_ms = end ? std::atoll(end) : 0;
    o.timeout = std::chrono::milliseconds(t ? std::atoll(t) : 5000);
    braid::init_process_group(o);
    const int rank = braid::get_rank(), n = braid::get_world_size();
    std::vector<float> small(16, 0.0f), mid(16 * 1024, 1.0f), big(1 << 20, 1.0f);
    std::vector<float> gathered(small.size() * static_cast<std::size_t>(n)), ring(mid.size());
    for (long i = 0;; ++i) {
      switch (i % 5) {
        case 0:
          small.assign(small.size(), 0.0f);
          small[0] = end_ms && unix_ms() >= end_ms ? 1.0f : 0.0f;
          braid::all_reduce(braid::tensor(small), braid::ReduceOp::Max);
          break;
        case 1: braid::all_reduce(braid::tensor(mid)); break;
        case 2: braid::broadcast(braid::tensor(big), static_cast<int>(i / 5 % n)); break;
        case 3: braid::all_gather_into_tensor(braid::tensor(gathered), braid::tensor(small)); break;
        default: braid::sendrecv(braid::tensor(mid), (rank + 1) % n, braid::tensor(ring), (rank + n - 1) % n); break;
      }
      if (i % 5 == 0 && small[0] > 0) break;
    }
    braid::destroy_process_group();
    std::printf("CHAOS done ms=%lld\n", unix_ms());
    std::fflush(stdout);
    return 0;
  } catch (const braid::Error& e) {
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    std::printf("CHAOS error ms=%lld code=%s peer=%d what=%s\n", unix_ms(), braid::error_code_name(e.code()), e.peer(),
                what.c_str());
    std::fflush(stdout);
    return 3;
  }
}
