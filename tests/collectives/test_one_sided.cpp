// The one-sided runtime (src/runtime/one_sided.cpp, transports/shm/window.*)
// under hand-built plans, independent of the algorithm generators: results
// through shared scratch, through process_vm_readv of plain buffers and
// through mappings of braid::mem_alloc buffers; a buffer freed and
// allocated again at the same address is read fresh; a dead peer is named.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "algorithms/builder.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/executor.hpp"
#include "tests/mp/harness.hpp"
#include "transports/shm/shared_alloc.hpp"
#include "transports/shm/window.hpp"

using namespace braid_test;
using namespace braid::plan;

namespace {

// All-reduce through each rank's shared Scratch, reduced in rank order.
Plan oneshot_plan(int n, std::int64_t c) {
  PlanArgs a;
  a.coll = Collective::AllReduce;
  a.nranks = n;
  a.count = c;
  a.topology.one_host = true;
  PlanBuilder b(a, "test_oneshot");
  for (int r = 0; r < n; ++r) {
    b.need_scratch(r, c);
    const int cp = b.copy(r, out(0, c), scratch(0, c));
    for (int q = 0; q < n; ++q)
      if (q != r) b.signal(r, q, {cp});
    std::vector<int> w(static_cast<std::size_t>(n), -1);
    for (int q = 0; q < n; ++q)
      if (q != r) w[static_cast<std::size_t>(q)] = b.wait(r, q);
    int prev = r == 0 ? cp : b.get(r, 0, scratch(0, c), out(0, c), {w[0], cp});
    for (int q = 1; q < n; ++q)
      prev = q == r ? b.reduce(r, scratch(0, c), out(0, c), {prev})
                    : b.get_reduce(r, q, scratch(0, c), out(0, c), out(0, c), {w[static_cast<std::size_t>(q)], prev});
  }
  return b.finish();
}

// All-reduce straight from peers' Input (reads_input): slice owners reduce,
// then everyone copies the slices; an exit round keeps buffers alive.
Plan peer_read_plan(int n, std::int64_t c) {
  PlanArgs a;
  a.coll = Collective::AllReduce;
  a.nranks = n;
  a.count = c;
  a.topology.one_host = true;
  PlanBuilder b(a, "test_twoshot");
  b.reads_input();
  for (int r = 0; r < n; ++r) {
    const Block mine = block(c, n, r);
    std::vector<int> w(static_cast<std::size_t>(n), -1);
    for (int q = 0; q < n; ++q)
      if (q != r) b.signal(r, q);
    for (int q = 0; q < n; ++q)
      if (q != r) w[static_cast<std::size_t>(q)] = b.wait(r, q);
    int prev = b.copy(r, in(mine.offset, mine.count), out(mine.offset, mine.count));
    for (int q = 0; q < n; ++q)
      if (q != r)
        prev = b.get_reduce(r, q, in(mine.offset, mine.count), out(mine.offset, mine.count),
                            out(mine.offset, mine.count), {w[static_cast<std::size_t>(q)], prev});
    std::vector<int> sig;
    for (int q = 0; q < n; ++q)
      if (q != r) sig.push_back(b.signal(r, q, {prev}));
    std::vector<int> gets;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      const Block theirs = block(c, n, q);
      const int wq = b.wait(r, q, {sig.back()});
      gets.push_back(b.get(r, q, out(theirs.offset, theirs.count), out(theirs.offset, theirs.count), {wq}));
    }
    std::vector<int> done;
    for (int q = 0; q < n; ++q)
      if (q != r) done.push_back(b.signal(r, q, gets));
    for (int q = 0; q < n; ++q)
      if (q != r) b.wait(r, q, done);
  }
  return b.finish();
}

// Runs `p` as the runtime would; `fastbox`: as on a group whose ranks share
// a host (a message plan that fits runs over the window's fast boxes).
// Returns whether it did.
bool run_plan(const Plan& p, const void* input, void* output, bool fastbox = false) {
  auto& ctx = braid::context();
  auto g = ctx.world.impl();
  auto compiled = braid::compile_plan(std::make_shared<const Plan>(p), g->my_rank, fastbox);
  braid::ExecCall call;
  call.plan = compiled.get();
  call.group = g.get();
  call.buffers.input = input;
  call.buffers.output = output;
  call.timeout = braid::Millis(20000);
  call.deadline = braid::Deadline::after(call.timeout);
  call.what = "test plan";
  // As the runtime issues calls: a turn for what the one-sided runner runs,
  // a sequence number (message tags) for the rest.
  if (compiled->runs_one_sided()) call.ticket = g->one_sided_issued.fetch_add(1);
  else call.seq = g->collective_seq.fetch_add(1);
  braid::execute(*ctx.engine, call);
  return compiled->fastbox;
}

// A message plan with several messages per pair, of sizes around the fast
// boxes' line boundaries (0 bytes, one element, 56 bytes that fill a line
// with the flag, 60 that spill into a second), sent in the reverse of their
// slot order: each rank adds every peer's Output into its own, through
// RecvReduce into Scratch (one chain, so the plan stays race-free) and a
// plain Recv for the last piece. `extra` elements more go in one message.
Plan messages_plan(int n, std::int64_t extra) {
  const std::vector<std::int64_t> sizes{1, 14, 15, 0, 100, 3, extra};
  std::int64_t c = 0;
  for (auto z : sizes) c += z;
  PlanArgs a;
  a.coll = Collective::AllReduce;
  a.nranks = n;
  a.count = c;
  PlanBuilder b(a, "test_messages");
  for (int r = 0; r < n; ++r) {
    b.need_scratch(r, 2 * c);
    const int cp = b.copy(r, out(0, c), scratch(0, c));
    std::vector<int> sends;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      int prev = -1;
      std::int64_t off = c;
      for (auto k = sizes.size(); k-- > 0;) {
        off -= sizes[k];
        prev = b.send(r, q, out(off, sizes[k]), {prev});
      }
      sends.push_back(prev);
    }
    int chain = cp;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      // Receives are matched by slot, so in the order the peer sent them:
      // last piece first.
      std::int64_t off = c;
      for (auto k = sizes.size(); k-- > 0;) {
        off -= sizes[k];
        if (k + 1 == sizes.size()) {
          const int got = b.recv(r, q, scratch(c + off, sizes[k]), {chain});
          chain = b.reduce(r, scratch(c + off, sizes[k]), scratch(off, sizes[k]), {got});
        } else {
          chain = b.recv_reduce(r, q, scratch(off, sizes[k]), {chain});
        }
      }
    }
    sends.push_back(chain);
    b.copy(r, scratch(0, c), out(0, c), sends);
  }
  return b.finish();
}

float value(int rank, std::int64_t i, int iter) { return static_cast<float>((rank + 1) * 1000 + i % 977 + iter); }

void check_sum(const float* outp, std::int64_t c, int world, int iter) {
  for (std::int64_t i = 0; i < c; ++i) {
    float want = 0;
    for (int q = 0; q < world; ++q) want += value(q, i, iter);
    RANK_CHECK_MSG(outp[i] == want, "element " << i << " is " << outp[i] << ", expected " << want);
  }
}

// One oneshot all-reduce of `c` floats through run_plan, checked.
void oneshot_checked(int rank, int world, std::int64_t c, int iter) {
  std::vector<float> v(static_cast<std::size_t>(c));
  for (std::int64_t i = 0; i < c; ++i) v[static_cast<std::size_t>(i)] = value(rank, i, iter);
  run_plan(oneshot_plan(world, c), nullptr, v.data());
  check_sum(v.data(), c, world, iter);
}

}  // namespace

TEST_CASE("one-sided plans: shared scratch, single copy and zero copy", "[one_sided]") {
  for (int n : {1, 2, 3, 4}) {
    auto res = run_ranks(n, [](int rank, int world) {
      init_env();
      int iter = 0;
      for (std::int64_t c : {0, 1, 7, 1000, 70000, 300001}) {
        // Alternate plans so scratch halves and descriptors flip parity
        // between different shapes.
        for (int rep = 0; rep < 3; ++rep, ++iter) {
          std::vector<float> in(static_cast<std::size_t>(c)), out(static_cast<std::size_t>(c), -1.0f);
          for (std::int64_t i = 0; i < c; ++i) in[static_cast<std::size_t>(i)] = value(rank, i, iter);
          if (!in.empty()) std::memcpy(out.data(), in.data(), in.size() * sizeof(float));
          run_plan(oneshot_plan(world, c), nullptr, out.data());
          check_sum(out.data(), c, world, iter);
          // Plain buffers: peers read them with process_vm_readv.
          std::fill(out.begin(), out.end(), -1.0f);
          run_plan(peer_read_plan(world, c), in.data(), out.data());
          check_sum(out.data(), c, world, iter);
          // In place.
          run_plan(peer_read_plan(world, c), in.data(), in.data());
          check_sum(in.data(), c, world, iter);
          // Shareable buffers: peers map them.
          const std::size_t bytes = std::max<std::size_t>(1, static_cast<std::size_t>(c) * sizeof(float));
          auto* a = static_cast<float*>(braid::mem_alloc(bytes));
          auto* o = static_cast<float*>(braid::mem_alloc(bytes));
          for (std::int64_t i = 0; i < c; ++i) a[i] = value(rank, i, iter);
          run_plan(peer_read_plan(world, c), a, o);
          check_sum(o, c, world, iter);
          braid::mem_free(a);
          braid::mem_free(o);
        }
      }
      braid::destroy_process_group();
    });
    INFO("ranks " << n << "\n" << describe(res));
    REQUIRE(all_ok(res));
  }
}

TEST_CASE("large Scratch is one region: calls on it and right after it wait for their peers", "[one_sided]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    // Above Window::kSplitScratchBytes both parities share one region, so
    // neither a call on it nor the call after it (whose half overlaps it)
    // may write before every peer is done with the call before. Ranks
    // arrive skewed, so a rank that did not wait would overwrite what a
    // slower one still reads.
    const std::int64_t big = static_cast<std::int64_t>(braid::onesided::Ledger::kSplitScratchBytes / sizeof(float)) + 4099;
    const std::int64_t sizes[] = {big, 1000, 20000, big, big, 70, big, 20000};
    for (int iter = 0; iter < 24; ++iter) {
      const std::int64_t c = sizes[iter % 8];
      if ((iter + rank) % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      oneshot_checked(rank, world, c, iter);
    }
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a Scratch allocation that grew is freed once every peer is past it", "[one_sided]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    auto g = braid::context().world.impl();
    // Where this rank's Scratch is now (what it described for its last call).
    auto scratch_now = [&] {
      const std::uint64_t last = g->one_sided_issued.load() - 1;
      return g->window->ledger().peer_desc(g->my_rank, static_cast<int>(last & 1), 2);
    };
    int iter = 0;
    auto run = [&](std::int64_t c) { oneshot_checked(rank, world, c, iter++); };
    run(600000);  // 2.4 MiB: an allocation of its own
    const braid::shm::BufDesc old = scratch_now();
    RANK_CHECK(old.gen != 0);
    run(2400000);  // does not fit: a bigger one, the old retired
    RANK_CHECK(scratch_now().gen != old.gen);
    braid::shm::SharedAllocation a;
    RANK_CHECK(braid::shm::find_shared(reinterpret_cast<const void*>(old.base), 1, &a) && a.gen == old.gen);
    // Calls later, every peer has completed the ones that could read it.
    for (int k = 0; k < 3; ++k) run(1000);
    RANK_CHECK_MSG(!braid::shm::find_shared(reinterpret_cast<const void*>(old.base), 1, &a) || a.gen != old.gen,
                   "the retired allocation is still registered");
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("fast boxes: message plans between ranks of one host run through the window", "[one_sided][fastbox]") {
  for (int n : {2, 3, 4}) {
    auto res = run_ranks(n, [](int rank, int world) {
      init_env();
      int iter = 0;
      // More calls than the boxes have slots, so every slot is reused; with
      // oneshot calls between, so fast-box calls and signalled calls share
      // the group's turns.
      for (int rep = 0; rep < 3 * static_cast<int>(braid::shm::kBoxSlots); ++rep, ++iter) {
        for (std::int64_t extra : {std::int64_t{0}, std::int64_t{1200}}) {
          const Plan p = messages_plan(world, extra);
          const std::int64_t c = p.args.count;
          std::vector<float> v(static_cast<std::size_t>(c));
          for (std::int64_t i = 0; i < c; ++i) v[static_cast<std::size_t>(i)] = value(rank, i, iter);
          const bool boxed = run_plan(p, nullptr, v.data(), true);
          check_sum(v.data(), c, world, iter);
          // 1200 more floats do not fit a box: the engine carries them.
          RANK_CHECK_MSG(boxed == (extra == 0), "extra " << extra << ": ran over fast boxes: " << boxed);
        }
        if (rep % 3 == 0) oneshot_checked(rank, world, 70, iter);
      }
      braid::destroy_process_group();
    });
    INFO("ranks " << n << "\n" << describe(res));
    REQUIRE(all_ok(res));
  }
}

TEST_CASE("fast boxes: a root runs many calls ahead of a slow receiver", "[one_sided][fastbox]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    constexpr int kCalls = 4 * braid::shm::kBoxSlots;
    // Rank 2 starts late: rank 0's broadcasts fill the boxes to it and
    // must wait for it to free them, never overwrite one it has not read.
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int k = 0; k < kCalls; ++k) {
      std::vector<std::int32_t> v(5, rank == 0 ? 0 : -1);
      if (rank == 0)
        for (int i = 0; i < 5; ++i) v[static_cast<std::size_t>(i)] = k * 10 + i;
      braid::broadcast(braid::tensor(v), 0);
      for (int i = 0; i < 5; ++i)
        RANK_CHECK_MSG(v[static_cast<std::size_t>(i)] == k * 10 + i,
                       "call " << k << " element " << i << " is " << v[static_cast<std::size_t>(i)]);
      if (rank == 1 && k % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Small calls between large ones (other plans, other turns) stay in step.
    for (int k = 0; k < 6; ++k) {
      const std::int64_t c = k % 2 ? 3 : 300000;
      std::vector<float> v(static_cast<std::size_t>(c));
      for (std::int64_t i = 0; i < c; ++i) v[static_cast<std::size_t>(i)] = value(rank, i, k);
      braid::all_reduce(braid::tensor(v));
      check_sum(v.data(), c, 3, k);
    }
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

// A reader may look at a box before its writer has filled it for this call:
// it must see an older flag there, never the data of an older call, even
// data shaped like this call's flag word. Phase 1 leaves, in each box slot,
// 16 int64 elements whose last one is the flag word a contiguous layout
// would put there for the phase-2 call on that slot (with this call's size,
// or with another size, which would be taken for a mismatch); phase 2 reads
// those slots before the late peer writes them.
TEST_CASE("fast boxes: an older call's data is never taken for a flag", "[one_sided][fastbox]") {
  for (const bool same_size : {true, false}) {
    auto res = run_ranks(2, [same_size](int rank, int) {
      init_env();
      braid::OpOptions o;
      o.algorithm = "recursive_doubling";
      std::vector<std::int64_t> w(8, 1);
      braid::all_reduce(braid::tensor(w), braid::ReduceOp::Max, o);  // the window exists
      const std::uint64_t t0 = braid::context().world.impl()->one_sided_issued.load();
      for (int k = 0; k < braid::shm::kBoxSlots; ++k) {
        std::vector<std::int64_t> v(16, 1);
        const std::uint64_t later = t0 + static_cast<std::uint64_t>(k) + braid::shm::kBoxSlots;
        v[15] = static_cast<std::int64_t>((later + 1) | (same_size ? std::uint64_t{64} << 40 : 0));
        braid::all_reduce(braid::tensor(v), braid::ReduceOp::Max, o);
      }
      for (int k = 0; k < braid::shm::kBoxSlots; ++k) {
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::vector<std::int64_t> v(8, rank == 1 ? 1000 : 0);
        braid::all_reduce(braid::tensor(v), braid::ReduceOp::Max, o);
        for (std::int64_t x : v) RANK_CHECK_MSG(x == 1000, "call " << k << ": got " << x << ", expected 1000");
      }
      braid::destroy_process_group();
    });
    INFO((same_size ? "flag-shaped data of the same size\n" : "flag-shaped data of another size\n") << describe(res));
    REQUIRE(all_ok(res));
  }
}

// Uneven all-to-all: a rank's plan knows only its own row and column of the
// splits, so ranks must not decide on fast boxes from their plans (rank 0
// would see only small blocks while 1 -> 2 is large).
TEST_CASE("fast boxes: uneven all-to-all with one large block runs alike on every rank", "[one_sided][fastbox]") {
  auto res = run_ranks(3, [](int rank, int n) {
    init_env();
    auto split = [](int i, int j) -> std::int64_t { return i == 1 && j == 2 ? 4000 : 1; };
    std::vector<std::int64_t> in_s, out_s;
    for (int j = 0; j < n; ++j) in_s.push_back(split(rank, j));
    for (int i = 0; i < n; ++i) out_s.push_back(split(i, rank));
    std::vector<float> in(static_cast<std::size_t>(std::accumulate(in_s.begin(), in_s.end(), std::int64_t{0})));
    std::vector<float> out(static_cast<std::size_t>(std::accumulate(out_s.begin(), out_s.end(), std::int64_t{0})));
    std::size_t off = 0;
    for (int j = 0; j < n; ++j)
      for (std::int64_t k = 0; k < in_s[static_cast<std::size_t>(j)]; ++k)
        in[off++] = static_cast<float>(rank * 100 + j * 10 + k % 7);
    braid::all_to_all_single(braid::tensor(out), braid::tensor(in), out_s, in_s, {.timeout = std::chrono::seconds(20)});
    off = 0;
    for (int i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < out_s[static_cast<std::size_t>(i)]; ++k, ++off)
        RANK_CHECK(out[off] == static_cast<float>(i * 100 + rank * 10 + k % 7));
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a shareable buffer freed and allocated again at the same address is read fresh", "[one_sided]") {
  auto res = run_ranks(2, [](int rank, int world) {
    init_env();
    const std::int64_t c = 1 << 16;
    const std::size_t bytes = static_cast<std::size_t>(c) * sizeof(float);
    int reused = 0;
    void* last = nullptr;
    for (int iter = 0; iter < 6; ++iter) {
      auto* a = static_cast<float*>(braid::mem_alloc(bytes));
      if (a == last) ++reused;
      last = a;
      for (std::int64_t i = 0; i < c; ++i) a[i] = value(rank, i, iter);
      std::vector<float> o(static_cast<std::size_t>(c));
      run_plan(peer_read_plan(world, c), a, o.data());
      check_sum(o.data(), c, world, iter);
      braid::mem_free(a);
    }
    // The kernel hands the same range back after a free (the case that
    // matters); say so if it never did, rather than pass vacuously.
    if (reused == 0) std::fprintf(stderr, "note: mem_alloc never reused an address in this run\n");
    RANK_CHECK(reused > 0);
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

// staged all_reduce, all_gather and broadcast with an Output large enough for
// streaming stores (one_sided.cpp, kStreamBytes: 8 MiB), at an Output that
// is not 64-byte aligned, so the copies' ordinary head and tail run too;
// then in place (all_reduce: ordinary stores, the lines were just read;
// all_gather: streaming around the own block); then below the threshold.
// Each hand-off mode (src/runtime/handoff.hpp): the 9 MiB calls stage more
// than the chooser's 1 MiB per rank, so under "stream" their copies into
// Scratch bypass the cache; the 1 MiB ones do not.
TEST_CASE("staged plans are right with streaming stores, misaligned, and in place", "[one_sided]") {
  for (const char* handoff : {"cache", "stream"})
  for (int n : {2, 3}) {
    INFO("BRAID_HANDOFF=" << handoff << ", " << n << " ranks");
    auto res = run_ranks(n, [](int rank, int world) {
      init_env("shm");  // one-sided plans need shared memory, whatever backend the suite runs
      const braid::OpOptions staged{.algorithm = "staged"};
      const auto w = static_cast<std::size_t>(world);
      int iter = 0;
      for (std::int64_t c : {std::int64_t{(9 << 20) / 4 + 13}, std::int64_t{(1 << 20) / 4 + 5}}) {
        const auto uc = static_cast<std::size_t>(c);
        std::vector<float> in(uc), outbuf(uc + 32, -1.0f);
        for (int rep = 0; rep < 2; ++rep, ++iter) {
          for (std::size_t i = 0; i < uc; ++i) in[i] = value(rank, static_cast<std::int64_t>(i), iter);
          float* outp = outbuf.data() + 3;  // 12 bytes past whatever alignment the vector has
          braid::all_reduce(braid::tensor(in.data(), c), braid::tensor(outp, c), braid::ReduceOp::Sum, staged);
          check_sum(outp, c, world, iter);
          RANK_CHECK(outbuf[2] == -1.0f);
          RANK_CHECK(outbuf[uc + 3] == -1.0f);
          braid::all_reduce(braid::tensor(in.data(), c), braid::ReduceOp::Sum, staged);
          check_sum(in.data(), c, world, iter);
        }
        // all_gather of c / world floats per rank: the same Output size.
        const std::int64_t per = c / world;
        const auto up = static_cast<std::size_t>(per);
        std::vector<float> gathered(w * up + 32, -1.0f), mine(up);
        for (std::size_t i = 0; i < up; ++i) mine[i] = value(rank, static_cast<std::int64_t>(i), iter);
        float* g = gathered.data() + 3;
        braid::all_gather_into_tensor(braid::tensor(g, per * world), braid::tensor(mine.data(), per), staged);
        for (int q = 0; q < world; ++q)
          for (std::size_t i = 0; i < up; ++i)
            RANK_CHECK_MSG(g[static_cast<std::size_t>(q) * up + i] == value(q, static_cast<std::int64_t>(i), iter),
                           "all_gather: rank " << q << "'s element " << i);
        RANK_CHECK(gathered[2] == -1.0f && gathered[w * up + 3] == -1.0f);
        std::fill(gathered.begin(), gathered.end(), -1.0f);
        std::copy(mine.begin(), mine.end(), g + static_cast<std::size_t>(rank) * up);  // in place
        braid::all_gather_into_tensor(braid::tensor(g, per * world),
                                      braid::tensor(g + static_cast<std::size_t>(rank) * up, per), staged);
        for (int q = 0; q < world; ++q)
          for (std::size_t i = 0; i < up; ++i)
            RANK_CHECK_MSG(g[static_cast<std::size_t>(q) * up + i] == value(q, static_cast<std::int64_t>(i), iter),
                           "all_gather in place: rank " << q << "'s element " << i);
        RANK_CHECK(gathered[2] == -1.0f && gathered[w * up + 3] == -1.0f);
        // broadcast from the last rank and from rank 0, in place and out of
        // place: the large count refills the root's slots (more chunks than
        // slots), the small one does not.
        for (int root : {world - 1, 0}) {
          std::vector<float> b(uc + 32, -1.0f), src(uc);
          float* bp = b.data() + 3;
          for (std::size_t i = 0; i < uc; ++i) src[i] = value(root, static_cast<std::int64_t>(i), iter);
          if (rank == root) std::copy(src.begin(), src.end(), bp);
          braid::broadcast(braid::tensor(bp, c), root, staged);
          for (std::size_t i = 0; i < uc; ++i)
            RANK_CHECK_MSG(bp[i] == src[i], "broadcast from " << root << ": element " << i);
          RANK_CHECK(b[2] == -1.0f && b[uc + 3] == -1.0f);
          std::fill(b.begin(), b.end(), -1.0f);
          braid::broadcast(braid::tensor(src.data(), c), braid::tensor(bp, c), root, staged);
          for (std::size_t i = 0; i < uc; ++i)
            RANK_CHECK_MSG(bp[i] == src[i], "broadcast out of place from " << root << ": element " << i);
          RANK_CHECK(b[2] == -1.0f && b[uc + 3] == -1.0f);
        }
      }
      braid::destroy_process_group();
    }, {.env = {std::string("BRAID_HANDOFF=") + handoff}});
    INFO(describe(res));
    REQUIRE(all_ok(res));
  }
}

// OpOptions::shareable_buffers changes the choice (push, reading and writing
// peers' buffers), never the result: right on mem_alloc buffers, and on a
// rank whose buffer is not one (read through process_vm_readv instead).
TEST_CASE("shareable_buffers: right with mem_alloc buffers, and with a rank that broke the promise", "[one_sided]") {
  auto res = run_ranks(2, [](int rank, int world) {
    init_env("shm");
    const braid::OpOptions hint{.shareable_buffers = true};
    const std::int64_t c = (4 << 20) / 4 + 3;
    const std::size_t bytes = static_cast<std::size_t>(c) * sizeof(float);
    auto* shared = static_cast<float*>(braid::mem_alloc(bytes));
    std::vector<float> plain(static_cast<std::size_t>(c));
    for (int iter = 0; iter < 3; ++iter) {
      // Iteration 1: rank 1 passes an ordinary buffer with the same promise.
      float* buf = iter == 1 && rank == 1 ? plain.data() : shared;
      for (std::int64_t i = 0; i < c; ++i) buf[i] = value(rank, i, iter);
      braid::all_reduce(braid::tensor(buf, c), braid::ReduceOp::Sum, hint);
      check_sum(buf, c, world, iter);
    }
    braid::mem_free(shared);
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("mem_alloc and mem_free reject bad input", "[one_sided]") {
  REQUIRE_THROWS_WITH(braid::mem_alloc(0), Catch::Contains("0 bytes"));
  int x = 0;
  REQUIRE_THROWS_WITH(braid::mem_free(&x), Catch::Contains("not returned by braid::mem_alloc"));
  void* p = braid::mem_alloc(10);
  braid::mem_free(p);
  REQUIRE_THROWS_WITH(braid::mem_free(p), Catch::Contains("freed already"));
  braid::mem_free(nullptr);
}

TEST_CASE("a peer that dies during a one-sided plan is named, not waited on", "[one_sided][failure]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    std::vector<float> v(100, 1.0f);
    run_plan(oneshot_plan(world, 100), nullptr, v.data());  // the window exists
    if (rank == 2) _exit(0);                                  // dies before the next plan
    const auto t0 = std::chrono::steady_clock::now();
    auto e = expect_error([&] { run_plan(oneshot_plan(world, 100), nullptr, v.data()); },
                          braid::ErrorCode::PeerFailure, "rank 2");
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    RANK_CHECK(e.peer() == 2);
    std::_Exit(0);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a peer that dies before the group's first one-sided call is named within seconds", "[one_sided][failure]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env("shm");  // one-sided plans need shared memory, whatever backend the suite runs
    if (rank == 2) _exit(0);  // never publishes its window block
    std::vector<float> v(16, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    auto e = expect_error([&] { braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.algorithm = "oneshot"}); },
                          braid::ErrorCode::PeerFailure, "rank 2");
    // The op's timeout is 60 s: the death must be found by looking, not by waiting it out.
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    RANK_CHECK(e.peer() == 2);
    // Survivors stay a moment, as a real job's would: one that exited at
    // once could be found gone by the other before rank 2 is (and rank 0
    // hosts the store).
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::_Exit(0);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}
