// What MPI users reach for: sendrecv, wait_all and wait_any over several
// Works, split by colour and key, and a program started alone running as a
// world of one.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::ErrorCode;

TEST_CASE("sendrecv shifts a ring without deadlock, blocking and async", "[mpi]") {
  auto res = run_ranks(4, [](int rank, int world) {
    init_env();
    const int right = (rank + 1) % world, left = (rank + world - 1) % world;
    // Large enough for the rendezvous path: plain blocking send-then-recv
    // by every rank at once would deadlock here.
    std::vector<std::int32_t> out(1 << 18, rank), in(1 << 18, -1);
    braid::Work w = braid::sendrecv(braid::tensor(out), right, braid::tensor(in), left, {.tag = 4});
    RANK_CHECK(w.source_rank() == left);
    RANK_CHECK(std::all_of(in.begin(), in.end(), [&](std::int32_t v) { return v == left; }));
    // Async, from any source, and waited for later.
    std::fill(in.begin(), in.end(), -1);
    braid::Work a = braid::sendrecv(braid::tensor(out), left, braid::tensor(in), braid::ANY_SOURCE,
                                    {.async_op = true, .tag = 5});
    a.wait();
    RANK_CHECK(a.is_success());
    RANK_CHECK(a.source_rank() == right);
    RANK_CHECK(in.front() == right && in.back() == right);
    // A failing part fails the whole: a receive too small for the message.
    std::vector<std::int32_t> small(8);
    expect_error([&] { braid::sendrecv(braid::tensor(out), right, braid::tensor(small), left, {.tag = 6}); },
                 ErrorCode::InvalidArgument, "at least as large");
    braid::barrier();
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("wait_all and wait_any over several Works", "[mpi]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    // Rank 0 receives one message from each other rank; rank 2 sends only
    // after rank 0 tells it to, so wait_any must return rank 1's first.
    if (rank == 0) {
      std::vector<std::int64_t> from1(4), from2(4);
      std::vector<braid::Work> ws;
      ws.push_back(braid::irecv(braid::tensor(from2), 2, {.tag = 1}));
      ws.push_back(braid::irecv(braid::tensor(from1), 1, {.tag = 1}));
      const std::size_t first = braid::wait_any(ws);
      RANK_CHECK(first == 1);
      RANK_CHECK(from1[3] == 1);
      std::int64_t go = 1;
      braid::send(braid::tensor(&go, 1), 2, {.tag = 2});
      braid::wait_all(ws);
      RANK_CHECK(from2[0] == 2);
      RANK_CHECK(ws[0].source_rank() == 2);
    } else {
      if (rank == 2) {
        std::int64_t go = 0;
        braid::recv(braid::tensor(&go, 1), 0, {.tag = 2});
      }
      std::vector<std::int64_t> mine(4, rank);
      braid::send(braid::tensor(mine), 0, {.tag = 1});
    }
    // wait_all rethrows a failure after waiting for every Work.
    std::vector<std::int32_t> tiny(1), big(64, rank), sink(64);
    std::vector<braid::Work> ws;
    const int right = (rank + 1) % world, left = (rank + world - 1) % world;
    ws.push_back(braid::irecv(braid::tensor(tiny), left, {.tag = 9}));
    ws.push_back(braid::isend(braid::tensor(big), right, {.tag = 9}));
    expect_error([&] { braid::wait_all(ws); }, ErrorCode::InvalidArgument, "at least as large");
    RANK_CHECK(ws[0].is_completed() && ws[1].is_completed());
    std::vector<braid::Work> none;
    expect_error([&] { braid::wait_any(none); }, ErrorCode::InvalidArgument, "empty");
    braid::barrier();
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("split by colour and key, of the world and of a split group", "[mpi]") {
  auto res = run_ranks(6, [](int rank, int world) {
    init_env();
    // Even and odd ranks; key reverses the order inside each.
    braid::Group g = braid::split(braid::world(), rank % 2, world - rank);
    RANK_CHECK(g.valid());
    RANK_CHECK(g.size() == 3);
    std::vector<int> want;
    for (int r = world - 1; r >= 0; --r)
      if (r % 2 == rank % 2) want.push_back(r);
    RANK_CHECK(g.ranks() == want);
    std::int32_t v = rank;
    braid::all_reduce(braid::tensor(&v, 1), braid::ReduceOp::Sum, {.group = &g});
    RANK_CHECK(v == (rank % 2 ? 1 + 3 + 5 : 0 + 2 + 4));
    // Split the split: rank 0 of each half (by group order) stays out.
    braid::Group h = braid::split(g, g.rank() == 0 ? braid::NO_COLOR : 7, 0);
    RANK_CHECK(h.valid() == (g.rank() != 0));
    if (h.valid()) {
      RANK_CHECK(h.size() == 2);
      RANK_CHECK(h.id() != g.id());
      std::int64_t b = rank;
      braid::broadcast(braid::tensor(&b, 1), h.global_rank(0), {.group = &h});
      RANK_CHECK(b == h.global_rank(0));
    }
    // Groups made by split and by new_group keep distinct ids and traffic.
    braid::Group all = braid::new_group({0, 1, 2, 3, 4, 5});
    std::int32_t one = 1;
    braid::all_reduce(braid::tensor(&one, 1), braid::ReduceOp::Sum, {.group = &all});
    RANK_CHECK(one == world);
    expect_error([&] { braid::split(g, -5); }, ErrorCode::InvalidArgument, "color -5");
    braid::barrier();
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a program started alone runs as a world of one", "[mpi]") {
  // A child with none of the launcher's variables: init_process_group()
  // with its defaults must give rank 0 of 1, and ops must work.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                          "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "PMI_RANK", "PMI_SIZE"})
      ::unsetenv(v);
    try {
      braid::init_process_group({.backend = test_backend()});
      std::vector<float> x{1.5f, 2.5f};
      braid::all_reduce(braid::tensor(x));
      const bool ok = braid::get_rank() == 0 && braid::get_world_size() == 1 && x[1] == 2.5f;
      braid::destroy_process_group();
      ::_exit(ok ? 0 : 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "singleton: %s\n", e.what());
      ::_exit(2);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
