// plan-scale: what building its own plan costs one rank as the world grows,
// without processes (issue 17, item 7). For every message algorithm, on
// worlds of 8 to 8,192 ranks laid out 8 per host, it builds one rank's slice
// (PlanArgs::slice_rank, what the runtime builds for a group across hosts)
// and prints the time, the heap it took at its peak, and the steps it holds;
// with --whole, also the whole plan (every rank's steps), up to --whole-max.
//
//   plan-scale [--max N] [--whole] [--whole-max N] [--coll NAME]
//
// Every size is built until 0.2 s have passed (at least 3 times); the time
// printed is the median. The last column is the growth from the size before:
// log2(time ratio), 1.0 meaning linear in the world's size.
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"

namespace {
// Heap bytes in use and their peak, counted by the operators below.
std::atomic<std::int64_t> in_use{0}, peak{0};
void note_alloc(void* p) {
  if (!p) return;
  const auto now = in_use.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p))) +
                   static_cast<std::int64_t>(malloc_usable_size(p));
  std::int64_t was = peak.load();
  while (now > was && !peak.compare_exchange_weak(was, now)) {
  }
}
}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void operator delete(void* p) noexcept {
  if (p) in_use.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

using namespace braid::plan;

namespace {

struct Cost {
  double seconds;        // median build time
  std::int64_t peak;     // heap peak during one build, bytes
  std::int64_t steps;    // steps the built plan holds
};

Cost measure(const Algorithm& alg, const PlanArgs& args) {
  std::vector<double> times;
  Cost c{0, 0, 0};
  const auto start = std::chrono::steady_clock::now();
  while (times.size() < 3 || std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200)) {
    const std::int64_t before = in_use.load();
    peak.store(before);
    const auto t0 = std::chrono::steady_clock::now();
    Plan p = alg.build(args);
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
    c.peak = peak.load() - before;
    c.steps = 0;
    for (const RankPlan& rp : p.ranks) c.steps += static_cast<std::int64_t>(rp.steps.size());
    if (times.size() >= 50) break;
  }
  std::sort(times.begin(), times.end());
  c.seconds = times[times.size() / 2];
  return c;
}

PlanArgs args_for(Collective coll, int n) {
  PlanArgs a;
  a.coll = coll;
  a.nranks = n;
  a.elem_size = 4;
  // 1 MiB in all: the whole buffer of the rooted and all-reduce calls, a
  // block of it per rank for the others.
  const std::int64_t total = 262144;
  const bool blocks = coll == Collective::AllGather || coll == Collective::ReduceScatter ||
                      coll == Collective::Gather || coll == Collective::Scatter || coll == Collective::AllToAll;
  a.count = coll == Collective::Barrier ? 0 : blocks ? std::max<std::int64_t>(1, total / n) : total;
  a.topology.host_of.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) a.topology.host_of[static_cast<std::size_t>(r)] = r / 8;
  return a;
}

// Plans between hosts are message plans: one-sided ones do not support a
// layout across hosts without RDMA.
bool message_plan(const Algorithm& alg, const PlanArgs& a) { return !alg.supports || alg.supports(a); }

}  // namespace

int main(int argc, char** argv) {
  int max_n = 8192, whole_max = 512;
  bool whole = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max" && i + 1 < argc) max_n = std::atoi(argv[++i]);
    else if (a == "--whole") whole = true;
    else if (a == "--whole-max" && i + 1 < argc) whole_max = std::atoi(argv[++i]);
    else if (a == "--coll" && i + 1 < argc) only = argv[++i];
    else {
      fmt::print(stderr, "usage: plan-scale [--max N] [--whole] [--whole-max N] [--coll NAME]\n");
      return 2;
    }
  }
  fmt::print("# one rank's slice (rank n/2+1), 8 ranks per host, 1 MiB per call (per rank's block for the block collectives)\n");
  fmt::print("# {:<14} {:<20} {:>6} {:>12} {:>12} {:>10} {:>8}\n", "collective", "algorithm", "ranks", "build us",
             "peak KiB", "steps", "growth");
  for (const Algorithm& alg : algorithms()) {
    if (!only.empty() && only != collective_name(alg.coll)) continue;
    if (!message_plan(alg, args_for(alg.coll, 8))) continue;
    for (int pass = 0; pass < (whole ? 2 : 1); ++pass) {
      double before = 0;
      for (int n = 8; n <= (pass ? std::min(max_n, whole_max) : max_n); n *= 2) {
        PlanArgs a = args_for(alg.coll, n);
        if (alg.supports && !alg.supports(a)) continue;
        if (!pass) a.slice_rank = n / 2 + 1 < n ? n / 2 + 1 : 0;
        const Cost c = measure(alg, a);
        const std::string growth = before > 0 ? fmt::format("{:.2f}", std::log2(c.seconds / before)) : "";
        fmt::print("  {:<14} {:<20} {:>6} {:>12.1f} {:>12.1f} {:>10} {:>8}\n", collective_name(alg.coll),
                   fmt::format("{}{}", alg.name, pass ? " (whole)" : ""), n, c.seconds * 1e6,
                   static_cast<double>(c.peak) / 1024.0, c.steps, growth);
        before = c.seconds;
      }
    }
  }
  return 0;
}
