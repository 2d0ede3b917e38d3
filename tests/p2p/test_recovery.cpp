// Survivors continue (braid/recovery.hpp): a failure poisons only the groups
// that hold the failed rank; the survivors agree, shrink the group and run
// collectives on it, again after a second death.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "src/runtime/context.hpp"
#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::ErrorCode;
using Clock = std::chrono::steady_clock;

namespace {
// Runs all_reduce (sum of rank + 1 over the group) until one throws, and
// returns that error; every result before it is checked.
braid::Error reduce_until_failure(const braid::Group& g, int expected_sum) {
  std::vector<float> v(4096);
  for (int i = 0; i < 100000; ++i) {
    std::fill(v.begin(), v.end(), static_cast<float>(braid::get_rank() + 1));
    try {
      braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.group = &g});
    } catch (const braid::Error& e) {
      return e;
    }
    RANK_CHECK_MSG(v[0] == static_cast<float>(expected_sum) && v.back() == v[0], "iteration " << i << ": " << v[0]);
  }
  fail_rank("no all_reduce failed");
}

// Dies in the middle of an all_reduce on g, after `rounds` good ones.
[[noreturn]] void die_mid_reduce(const braid::Group& g, int rounds) {
  std::vector<float> v(4096, static_cast<float>(braid::get_rank() + 1));
  for (int i = 0; i < rounds; ++i) {
    braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.group = &g});
    std::fill(v.begin(), v.end(), static_cast<float>(braid::get_rank() + 1));
  }
  auto w = braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.group = &g, .async_op = true});
  ::raise(SIGKILL);
  for (;;) {
  }
}

std::string ranks_text(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += std::to_string(r) + " ";
  return s;
}

// `victim` dies once every other rank has finished its all_reduce (a death
// during it would fail it: the point of other tests, not this one's).
void die_after_reduce(int victim) {
  int x = 1;
  braid::all_reduce(braid::tensor(&x, 1));
  auto& st = *braid::context().store;
  const auto n = braid::get_world_size() - 1;
  if (braid::get_rank() != victim) {
    if (st.add("test/reduced", 1) == n) st.set("test/die", braid::store::to_bytes(std::string("1")));
    return;
  }
  st.wait({"test/die"}, std::chrono::seconds(60));
  ::raise(SIGKILL);
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

TEST_CASE("survivors agree, shrink and go on; then again after a second death", "[recovery]") {
  auto res = run_ranks(4, [](int rank, int) {
    init_env();
    const braid::Group world = braid::world();
    if (rank == 3) die_mid_reduce(world, 7);
    // Loop until the death shows: the error names rank 3, and the failed
    // ranks hold it by then.
    auto e = reduce_until_failure(world, 1 + 2 + 3 + 4);
    RANK_CHECK_MSG(e.code() == ErrorCode::PeerFailure, e.what());
    RANK_CHECK_MSG(e.peer() == 3, e.what());
    RANK_CHECK_MSG(std::string(e.what()).find("rank 3") != std::string::npos, e.what());
    RANK_CHECK(contains(braid::failed_ranks(), 3));
    // The world is poisoned: its ops fail at once, naming rank 3.
    int x = 0;
    expect_error([&] { braid::all_reduce(braid::tensor(&x, 1)); }, ErrorCode::PeerFailure, "rank 3");
    expect_error([&] { braid::barrier(); }, ErrorCode::PeerFailure, "rank 3");

    // Agreement is an AND over the survivors, the same on each.
    RANK_CHECK(braid::agree(true));
    RANK_CHECK(!braid::agree(rank != 1));
    const braid::Group g1 = braid::shrink_group();
    RANK_CHECK(g1.size() == 3);
    RANK_CHECK((g1.ranks() == std::vector<int>{0, 1, 2}));
    RANK_CHECK(g1.rank() == rank);
    // Collectives on the survivors: all_reduce, broadcast, all_gather.
    std::vector<float> v(1000, static_cast<float>(rank + 1));
    braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.group = &g1});
    RANK_CHECK(v[0] == 6.0f && v[999] == 6.0f);
    int root_value = rank == 2 ? 42 : 0;
    braid::broadcast(braid::tensor(&root_value, 1), 2, {.group = &g1});
    RANK_CHECK(root_value == 42);
    std::vector<int> all(3), mine{rank * 10};
    braid::all_gather_into_tensor(braid::tensor(all), braid::tensor(mine), {.group = &g1});
    RANK_CHECK((all == std::vector<int>{0, 10, 20}));

    // A second death, global rank 1, in the middle of the shrunk group's loop.
    if (rank == 1) die_mid_reduce(g1, 5);
    auto e2 = reduce_until_failure(g1, 1 + 2 + 3);
    RANK_CHECK_MSG(e2.code() == ErrorCode::PeerFailure && e2.peer() == 1, e2.what());
    RANK_CHECK((braid::failed_ranks() == std::vector<int>{1, 3}));
    RANK_CHECK(braid::agree(true, {.group = &g1}));
    const braid::Group g2 = braid::shrink_group({.group = &g1});
    RANK_CHECK((g2.ranks() == std::vector<int>{0, 2}));
    std::vector<double> d(100000, rank == 0 ? 1.5 : 2.5);  // large: another algorithm than the small ones above
    braid::all_reduce(braid::tensor(d), braid::ReduceOp::Sum, {.group = &g2});
    RANK_CHECK(d[0] == 4.0 && d.back() == 4.0);
    braid::barrier({.group = &g2});
    braid::destroy_process_group();
  }, {.timeout_s = 120, .env = {}});
  INFO(describe(res));
  REQUIRE(res[0].ok());
  REQUIRE(res[2].ok());
  REQUIRE((!res[1].exited && res[1].code == SIGKILL));
  REQUIRE((!res[3].exited && res[3].code == SIGKILL));
}

TEST_CASE("a failure poisons only the groups that hold the failed rank", "[recovery]") {
  auto res = run_ranks(4, [](int rank, int) {
    init_env();
    const braid::Group low = braid::new_group({0, 1});
    const braid::Group high = braid::new_group({2, 3});
    die_after_reduce(3);
    // Everyone learns of the death through the world.
    expect_error([&] { braid::barrier(); }, ErrorCode::PeerFailure, "rank 3");
    RANK_CHECK_MSG((braid::failed_ranks() == std::vector<int>{3}), ranks_text(braid::failed_ranks()));
    auto& st = *braid::context().store;
    if (rank < 2) {
      // A group without rank 3 goes on, without shrinking.
      for (int i = 0; i < 20; ++i) {
        int y = rank + i;
        braid::all_reduce(braid::tensor(&y, 1), braid::ReduceOp::Sum, {.group = &low});
        RANK_CHECK(y == 1 + 2 * i);
      }
      std::vector<int> p2p(3, rank);
      if (rank == 0) braid::send(braid::tensor(p2p), 1, {.group = &low});
      else braid::recv(braid::tensor(p2p), 0, {.group = &low});
      RANK_CHECK(p2p[2] == 0);
      RANK_CHECK_MSG((braid::failed_ranks() == std::vector<int>{3}), ranks_text(braid::failed_ranks()));
      if (st.add("test/done", 1) == 2) st.set("test/go", braid::store::to_bytes(std::string("1")));
    } else {
      // One that holds it fails at once, naming it.
      const auto t0 = Clock::now();
      int y = 0;
      auto e = expect_error([&] { braid::all_reduce(braid::tensor(&y, 1), braid::ReduceOp::Sum, {.group = &high}); },
                            ErrorCode::PeerFailure, "rank 3");
      RANK_CHECK(e.peer() == 3);
      RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(2));
      // Stays until the others are done: its exit would be a second failure.
      st.wait({"test/go"}, std::chrono::seconds(60));
    }
  });
  INFO(describe(res));
  for (int r = 0; r < 3; ++r) REQUIRE(res[static_cast<std::size_t>(r)].ok());
}

TEST_CASE("agree decides without a member that died before taking part", "[recovery]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    die_after_reduce(2);
    // Nobody tells the others: agree finds rank 2 gone while it waits.
    const auto t0 = Clock::now();
    RANK_CHECK(braid::agree(true, {.timeout = std::chrono::seconds(30)}));
    RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(10));
    RANK_CHECK_MSG((braid::failed_ranks() == std::vector<int>{2}), ranks_text(braid::failed_ranks()));
    const braid::Group g = braid::shrink_group();
    RANK_CHECK_MSG((g.ranks() == std::vector<int>{0, 1}), ranks_text(g.ranks()));
    int y = rank + 1;
    braid::all_reduce(braid::tensor(&y, 1), braid::ReduceOp::Sum, {.group = &g});
    RANK_CHECK(y == 3);
  });
  INFO(describe(res));
  REQUIRE(res[0].ok());
  REQUIRE(res[1].ok());
}

TEST_CASE("agree names a live member that does not take part, at its timeout", "[recovery]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    if (rank == 0) {
      const auto t0 = Clock::now();
      auto e = expect_error([&] { braid::agree(true, {.timeout = std::chrono::milliseconds(500)}); },
                            ErrorCode::Timeout, "rank(s) 1 neither called it nor failed");
      RANK_CHECK(e.peer() == 1);
      RANK_CHECK(Clock::now() - t0 < std::chrono::seconds(5));
      st.set("test/go", braid::store::to_bytes(std::string("1")));
    } else {
      st.wait({"test/go"}, std::chrono::seconds(30));
    }
    RANK_CHECK(braid::failed_ranks().empty());
    braid::barrier();  // the world is not poisoned by a timeout of agree
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("with a store no rank hosts, survivors of rank 0 go on", "[recovery]") {
  // file:// keeps the store out of rank 0's process: its death is a rank's
  // like any other (with env://, rank 0 takes the store with it).
  const std::string file = "/tmp/braid-recovery-" + std::to_string(::getpid());
  std::remove(file.c_str());
  auto res = run_ranks(3, [&file](int rank, int world) {
    braid::InitOptions o;
    o.init_method = "file://" + file;
    o.rank = rank;
    o.world_size = world;
    o.backend = test_backend();
    o.timeout = std::chrono::seconds(60);
    braid::init_process_group(o);
    die_after_reduce(0);
    expect_error([&] { braid::barrier(); }, ErrorCode::PeerFailure, "rank 0");
    const braid::Group g = braid::shrink_group();
    RANK_CHECK((g.ranks() == std::vector<int>{1, 2}));
    int y = rank;
    braid::all_reduce(braid::tensor(&y, 1), braid::ReduceOp::Sum, {.group = &g});
    RANK_CHECK(y == 3);
    RANK_CHECK((braid::failed_ranks() == std::vector<int>{0}));
  });
  std::remove(file.c_str());
  INFO(describe(res));
  REQUIRE(res[1].ok());
  REQUIRE(res[2].ok());
}
