// Async collectives and how they are waited for, and where all_gather's list
// form puts its blocks. An unbounded wait runs an
// op that the async runner has not started on the waiting thread
// (src/runtime/async_runner.hpp, Job::claim); a bounded one never does, so
// it returns at its limit. Ops waited out of issue order, with some run by
// the runner and some by the waiter, still meet their peers. The threads
// Braid starts are named (src/common/thread_name.hpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "src/runtime/executor.hpp"
#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::ReduceOp;

TEST_CASE("a bounded wait returns at its limit and leaves the op running", "[async]") {
  // Rank 1 joins the all_reduce only after rank 0's wait_for has returned:
  // a wait_for that ran the op itself would block until the op's timeout.
  int go[2];
  REQUIRE(::pipe(go) == 0);
  auto res = run_ranks(2, [&](int rank, int) {
    init_env();
    std::vector<float> v(1024, static_cast<float>(rank + 1));
    braid::OpOptions o;
    o.timeout = std::chrono::seconds(20);
    if (rank == 0) {
      o.async_op = true;
      braid::Work w = braid::all_reduce(braid::tensor(v), ReduceOp::Sum, o);
      const auto t0 = std::chrono::steady_clock::now();
      RANK_CHECK_MSG(!w.wait_for(std::chrono::milliseconds(100)), "the op completed without rank 1");
      RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
      RANK_CHECK(!w.is_completed());
      const char byte = 1;
      RANK_CHECK(::write(go[1], &byte, 1) == 1);
      w.wait();
    } else {
      char byte = 0;
      RANK_CHECK(::read(go[0], &byte, 1) == 1);
      braid::all_reduce(braid::tensor(v), ReduceOp::Sum, o);
    }
    for (float x : v) RANK_CHECK_MSG(x == 3.0f, "element " << x << ", expected 3");
    braid::destroy_process_group();
  });
  ::close(go[0]);
  ::close(go[1]);
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("async ops waited in reverse order all complete with the right results", "[async]") {
  for (int n : {2, 4}) {
    auto res = run_ranks(n, [](int rank, int world) {
      init_env();
      // Sizes that take fast boxes, one-sided plans and message plans; each
      // op's buffer is its own.
      const std::vector<std::int64_t> counts{2, 300, 4096, 1 << 18, 7, 1 << 16};
      for (int round = 0; round < 3; ++round) {
        std::vector<std::vector<float>> bufs;
        std::vector<braid::Work> works;
        braid::OpOptions o;
        o.async_op = true;
        for (std::size_t k = 0; k < counts.size(); ++k) {
          bufs.emplace_back(static_cast<std::size_t>(counts[k]), static_cast<float>(rank + 1 + round));
          if (k % 2 == 0) works.push_back(braid::all_reduce(braid::tensor(bufs.back()), ReduceOp::Sum, o));
          else works.push_back(braid::broadcast(braid::tensor(bufs.back()), static_cast<int>(k) % world, o));
        }
        for (std::size_t k = works.size(); k-- > 0;) works[k].wait();
        for (std::size_t k = 0; k < counts.size(); ++k) {
          const float want = k % 2 == 0 ? static_cast<float>(world * (world + 1) / 2 + world * round)
                                        : static_cast<float>(static_cast<int>(k) % world + 1 + round);
          for (float x : bufs[k]) RANK_CHECK_MSG(x == want, "op " << k << " round " << round << ": " << x
                                                                   << ", expected " << want);
        }
      }
      braid::destroy_process_group();
    });
    INFO(n << " ranks: " << describe(res));
    REQUIRE(all_ok(res));
  }
}

TEST_CASE("all_gather's list form writes straight into the list where the plan keeps to blocks", "[list]") {
  // Which plans allow it: spans of Output within one rank's block, and no
  // peer reaching this rank's Output.
  auto in_blocks = [](const char* algo, int n, std::int64_t count, bool one_host) {
    braid::plan::PlanArgs a;
    a.coll = braid::plan::Collective::AllGather;
    a.nranks = n;
    a.count = count;
    a.topology.one_host = one_host;
    auto p = std::make_shared<const braid::plan::Plan>(braid::plan::find_algorithm(a.coll, algo)->build(a));
    bool all = true;
    for (int r = 0; r < n; ++r) all = all && braid::compile_plan(p, r)->output_in_blocks;
    return all;
  };
  CHECK(in_blocks("ring", 4, 1000, false));
  CHECK(in_blocks("staged", 2, 1 << 20, true));
  CHECK(in_blocks("peer_read", 4, 1000, true));
  CHECK_FALSE(in_blocks("recursive_doubling", 4, 1000, false));  // sends several blocks in one message
  CHECK_FALSE(in_blocks("bruck", 4, 1000, false));
}

namespace {

// The names of this process's threads, from /proc (what top -H and perf show).
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "comm");
    std::string name;
    if (std::getline(f, name)) names.push_back(name);
  }
  return names;
}

bool has_thread(const char* name) {
  const auto names = thread_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("the threads Braid starts carry names that tell them from the application's", "[async]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    // env:// starts the store server on rank 0.
    RANK_CHECK_MSG(has_thread("braid-store") == (rank == 0), "braid-store on rank " << rank);
    std::vector<float> v(256, 1.0f);
    braid::OpOptions o;
    o.async_op = true;
    braid::all_reduce(braid::tensor(v), ReduceOp::Sum, o).wait();
    RANK_CHECK_MSG(has_thread("braid-async"), "no braid-async thread after an async all_reduce");
    std::vector<float> in(64), out(64, static_cast<float>(rank));
    auto s = braid::isend(braid::tensor(out), 1 - rank);
    braid::irecv(braid::tensor(in), 1 - rank).wait();
    s.wait();
    RANK_CHECK_MSG(has_thread("braid-progress"), "no braid-progress thread after async point-to-point");
    RANK_CHECK(in[0] == static_cast<float>(1 - rank));
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}
