// One rank of a chaos job (tools/chaos): every collective at three sizes
// (64 B, 64 KiB and 4 MiB a rank) and a point-to-point ring, blocking and
// async, in a loop, until an op fails. It then prints what it caught on one
// line and returns 3 from main without destroy_process_group, as a program
// that gives up would: that exit must be clean.
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
    const auto un = static_cast<std::size_t>(n);
    // Every op of the loop, each in turn at the three sizes (elements a
    // rank): a fault lands in any of them at any size.
    const std::size_t sizes[] = {16, 16 * 1024, 1 << 20};
    std::vector<float> flag(16), in(un << 20, 1.0f), out(un << 20), ring(1 << 20);
    auto part = [](std::vector<float>& v, std::size_t at, std::size_t count) {
      return braid::tensor(v.data() + at, static_cast<std::int64_t>(count));
    };
    constexpr long kOps = 11;
    long i = 0;
    for (;; ++i) {
      const std::size_t c = sizes[i / kOps % 3];
      const int root = static_cast<int>(i / kOps % un);
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      std::vector<braid::Tensor> blocks;
      for (std::size_t q = 0; q < un; ++q) blocks.push_back(part(out, q * c, c));
      switch (i % kOps) {
        case 0:  // also the loop's end: every rank's flag, a max
          flag.assign(flag.size(), 0.0f);
          flag[0] = end_ms && unix_ms() >= end_ms ? 1.0f : 0.0f;
          braid::all_reduce(braid::tensor(flag), braid::ReduceOp::Max);
          break;
        case 1: braid::all_reduce(part(in, 0, c), part(out, 0, c)); break;
        case 2: braid::broadcast(part(out, 0, c), root); break;
        case 3: braid::reduce(part(in, 0, c), part(out, 0, c), root); break;
        case 4: braid::all_gather_into_tensor(part(out, 0, c * un), part(in, 0, c)); break;
        case 5: braid::reduce_scatter_tensor(part(out, 0, c), part(in, 0, c * un)); break;
        case 6: braid::all_to_all_single(part(out, 0, c * un), part(in, 0, c * un)); break;
        case 7:
          if (i / kOps % 2) braid::gather(part(in, 0, c), rank == root ? &blocks : nullptr, root);
          else braid::scatter(part(in, 0, c), rank == root ? &blocks : nullptr, root);
          break;
        case 8: braid::barrier(); break;
        case 9: braid::sendrecv(part(in, 0, c), next, part(ring, 0, c), prev); break;
        default: {  // async: both posted, then waited on
          // Both, even when the first fails: a receive still streaming in
          // when its buffer is freed (the exception unwinds past `ring`)
          // writes into freed memory. Waiting for only the send once
          // corrupted rank 0's heap (chaos across hosts, 1 job in ~860).
          std::vector<braid::Work> w;
          w.push_back(braid::irecv(part(ring, 0, c), prev));
          w.push_back(braid::isend(part(in, 0, c), next));
          braid::wait_all(w);
        }
      }
      if (i % kOps == 0 && flag[0] > 0) break;
    }
    braid::destroy_process_group();
    std::printf("CHAOS done ms=%lld after op %ld, flag %g\n", unix_ms(), i, static_cast<double>(flag[0]));
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
