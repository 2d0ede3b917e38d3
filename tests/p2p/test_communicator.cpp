// Communicators: process groups made by their members alone, from a store
// they share, several in one process and beside the default group.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <numeric>

#include "tests/mp/harness.hpp"

using braid::ErrorCode;
using namespace braid_test;
using namespace std::chrono_literals;

namespace {

braid::CommunicatorOptions opts(const std::string& name, std::chrono::milliseconds timeout = 30s) {
  return {.backend = test_backend(), .timeout = timeout, .name = name, .store_host = "127.0.0.1"};
}

std::shared_ptr<braid::store::Store> store_at(int port, bool serve) {
  return braid::store::tcp_store("127.0.0.1", port, serve, 30s);
}

}  // namespace

TEST_CASE("communicators of subsets run beside the default group") {
  const int port_a = free_port(), port_b = free_port();
  auto res = run_ranks(4, [&](int rank, int) {
    init_env();
    // {0,1} and {2,3}, each made by its two members only; rank order
    // reversed in the second so its ranks differ from the world's.
    const bool low = rank < 2;
    const int my = low ? rank : 3 - rank;
    braid::Communicator comm(store_at(low ? port_a : port_b, my == 0), my, 2, opts(low ? "low" : "high"));
    RANK_CHECK(comm.rank() == my && comm.size() == 2);

    std::vector<float> v(1000, static_cast<float>(rank + 1));
    comm.all_reduce(braid::tensor(v));
    const float want = low ? 1 + 2 : 3 + 4;
    for (float x : v) RANK_CHECK_MSG(x == want, "got " << x << ", expected " << want);

    // The same tag in the world and in the communicator, between the same
    // two processes: each lands in its own message space.
    int in_world = -1, in_comm = -1;
    const int world_peer = rank ^ 1, comm_peer = 1 - my;
    int w_out = 100 + rank, c_out = 200 + rank;
    auto s1 = braid::isend(braid::tensor(&w_out, 1), world_peer, {.tag = 5});
    auto s2 = comm.isend(braid::tensor(&c_out, 1), comm_peer, {.tag = 5});
    RANK_CHECK(comm.recv(braid::tensor(&in_comm, 1), comm_peer, {.tag = 5}) == comm_peer);
    braid::recv(braid::tensor(&in_world, 1), world_peer, {.tag = 5});
    s1.wait();
    s2.wait();
    RANK_CHECK_MSG(in_world == 100 + world_peer, "world message " << in_world);
    RANK_CHECK_MSG(in_comm == 200 + world_peer, "communicator message " << in_comm);

    // A collective on the world between the communicators' collectives.
    int one = 1;
    braid::all_reduce(braid::tensor(&one, 1));
    RANK_CHECK(one == 4);

    // Broadcast from the communicator's rank 1 (a different process in each).
    std::vector<std::int64_t> b(7, my == 1 ? rank : -1);
    comm.broadcast(braid::tensor(b), 1);
    for (auto x : b) RANK_CHECK(x == (low ? 1 : 2));
    comm.destroy();
    braid::destroy_process_group();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("several communicators over one store without init_process_group") {
  const int port = free_port();
  auto res = run_ranks(3, [&](int rank, int) {
    auto st = store_at(port, rank == 0);
    braid::Communicator a(st, rank, 3, opts("a"));
    braid::Communicator b(st, (rank + 1) % 3, 3, opts("b"));
    RANK_CHECK(!braid::is_initialized());
    // Interleaved async collectives on both, waited in the other order.
    std::vector<double> x(5000), y(3000);
    std::iota(x.begin(), x.end(), rank);
    std::fill(y.begin(), y.end(), b.rank() * 10.0);
    auto wx = a.all_reduce(braid::tensor(x), braid::ReduceOp::Sum, {.async_op = true});
    auto wy = b.all_reduce(braid::tensor(y), braid::ReduceOp::Max, {.async_op = true});
    wy.wait();
    wx.wait();
    for (std::size_t i = 0; i < x.size(); ++i) RANK_CHECK(x[i] == 3.0 * static_cast<double>(i) + 3);
    for (double v : y) RANK_CHECK(v == 20.0);
    // A subgroup of b: its ranks are b's.
    braid::Group g = b.new_group({2, 0});
    if (g.rank() >= 0) {
      int mine = b.rank(), got = -1;
      std::vector<int> all(2);
      b.all_gather_into_tensor(braid::tensor(all), braid::tensor(&mine, 1), {.group = &g});
      RANK_CHECK(all[0] == 2 && all[1] == 0);
      (void)got;
    }
    // The training helpers on a communicator's group, with no default group:
    // packing, the all_reduces and the copy back all on b's runner.
    std::vector<float> f(7, static_cast<float>(b.rank()));
    std::vector<std::int64_t> l(3, 1);
    auto wc = braid::all_reduce_coalesced({braid::tensor(f), braid::tensor(l)}, braid::ReduceOp::Sum,
                                          {.group = &b.group(), .async_op = true});
    wc.wait();
    for (float v : f) RANK_CHECK_MSG(v == 3.0f, "coalesced on a communicator: " << v);
    for (auto v : l) RANK_CHECK(v == 3);
    // A group of one process group is refused by another.
    int z = 0;
    expect_error([&] { a.all_reduce(braid::tensor(&z, 1), braid::ReduceOp::Sum, {.group = &b.group()}); },
                 ErrorCode::InvalidArgument, "another process group");
    a.barrier();
    b.barrier();
    braid::Group kept = a.group();
    a.destroy();
    expect_error([&] { braid::all_reduce(braid::tensor(&z, 1), braid::ReduceOp::Sum, {.group = &kept}); },
                 ErrorCode::InvalidState, "destroyed");
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("communicator arguments and a member that never joins") {
  const int port = free_port();
  auto res = run_ranks(1, [&](int, int) {
    expect_error([&] { braid::Communicator c(nullptr, 0, 2); }, ErrorCode::InvalidArgument, "store is null");
    auto st = store_at(port, true);
    expect_error([&] { braid::Communicator c(st, 2, 2); }, ErrorCode::InvalidArgument, "0 <= rank < size");
    expect_error([&] { braid::Communicator c(st, 0, 2, {.backend = "pigeon"}); }, ErrorCode::InvalidArgument,
                 "unknown backend");
    // Rank 1 of 2 never comes: rank 0 fails within the timeout.
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { braid::Communicator c(st, 0, 2, opts("lonely", 1500ms)); }, ErrorCode::Timeout, "");
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < 20s);
    braid::Communicator moved(st, 0, 1, opts("solo"));
    braid::Communicator to(std::move(moved));
    int z = 3;
    to.all_reduce(braid::tensor(&z, 1));
    RANK_CHECK(z == 3);
    expect_error([&] { moved.barrier(); }, ErrorCode::InvalidState, "moved from");
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}
