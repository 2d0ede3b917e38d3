// Bad arguments to collectives get clear errors on every rank, not a hang;
// a correct collective still works afterwards.
#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "src/common/error_record.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/positions.hpp"
#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::ErrorCode;
using braid::ReduceOp;

namespace {

// counts.size() ranks all-reduce `counts[rank]` floats with `algorithm`
// (nullptr: the automatic choice) and a long timeout: each must fail within
// seconds with InvalidArgument, its message holding text(rank); with two
// ranks the error names the other. A rank lingers 3 s after its error, so
// that its peers meet the mismatch, not its exit: a peer learns of it
// through the window (a mark, or a "doing" line) or the store's gave-up
// record (GaveUpWatch: 50, 250 and 750 ms into a wait), while the exit of a
// rank of three or more is seen by the engine's watch on its process, which
// fails the group without asking the store why.
void expect_count_mismatch(std::vector<std::size_t> counts, const char* algorithm,
                           std::function<std::string(int)> text) {
  auto res = run_ranks(static_cast<int>(counts.size()), [&](int rank, int world) {
    init_env();
    std::vector<float> v(counts[static_cast<std::size_t>(rank)], 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const braid::Error e = expect_error(
        [&] {
          braid::all_reduce(braid::tensor(v), ReduceOp::Sum,
                            {.timeout = std::chrono::seconds(60), .algorithm = algorithm});
        },
        ErrorCode::InvalidArgument, text(rank));
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    if (world == 2)
      RANK_CHECK_MSG(e.peer() == 1 - rank, "the error names rank " << e.peer() << ", expected the other rank");
    std::this_thread::sleep_for(std::chrono::seconds(3));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

}  // namespace

TEST_CASE("bad collective arguments fail on every rank with a clear message", "[collectives][errors]") {
  auto res = run_ranks(3, [](int rank, int world) {
    init_env();
    std::vector<float> a(6, 1.0f), b(6), big(18);
    std::vector<int> ia(6, 1);
    auto t = braid::tensor(a);
    expect_error([&] { braid::broadcast(t, 3); }, ErrorCode::InvalidArgument, "src = 3 is not a rank of the group");
    expect_error([&] { braid::reduce(t, -1); }, ErrorCode::InvalidArgument, "dst = -1");
    std::vector<braid::Tensor> two{braid::tensor(b), braid::tensor(b)};
    expect_error([&] { braid::all_gather(two, t); }, ErrorCode::InvalidArgument, "outputs has 2 tensors: expected 3");
    expect_error([&] { braid::all_reduce(t, braid::tensor(b.data(), 5)); }, ErrorCode::InvalidArgument,
                 "output has 5 elements: expected 6");
    expect_error([&] { braid::all_gather_into_tensor(braid::tensor(b), t); }, ErrorCode::InvalidArgument,
                 "expected 18 (group size x input)");
    // In place is the input at exactly this rank's block; one element off is refused.
    const std::size_t off = rank == 0 ? 1 : static_cast<std::size_t>(rank) * 6 - 1;
    expect_error([&] { braid::all_gather_into_tensor(braid::tensor(big), braid::tensor(big.data() + off, 6)); },
                 ErrorCode::InvalidArgument, "the input overlaps the output but is not this rank's block of it");
    // The list form: the input may be this rank's own output tensor, no other.
    std::vector<std::vector<float>> blocks(3, std::vector<float>(6));
    std::vector<braid::Tensor> list;
    for (auto& v : blocks) list.push_back(braid::tensor(v));
    const auto other = static_cast<std::size_t>((rank + 1) % world);
    expect_error([&] { braid::all_gather(list, list[other]); }, ErrorCode::InvalidArgument,
                 fmt::format("the input overlaps outputs[{}]; it may only be this rank's own output tensor, outputs[{}]",
                             other, rank));
    // Input and output that overlap without being one tensor.
    std::vector<float> wide(8, 1.0f);
    expect_error([&] { braid::broadcast(braid::tensor(wide.data() + 1, 6), braid::tensor(wide.data(), 6), 0); },
                 ErrorCode::InvalidArgument, "the input overlaps the output without being it (it starts at byte offset 4");
    expect_error([&] { braid::all_reduce(braid::tensor(wide.data(), 6), braid::tensor(wide.data() + 2, 6)); },
                 ErrorCode::InvalidArgument, "the input overlaps the output without being it");
    expect_error([&] { braid::reduce(braid::tensor(wide.data() + 2, 6), braid::tensor(wide.data(), 6), 1); },
                 ErrorCode::InvalidArgument, "the input overlaps the output without being it");
    expect_error([&] { braid::reduce_scatter_tensor(t, braid::tensor(b)); }, ErrorCode::InvalidArgument,
                 "input has 6 elements: expected 18");
    expect_error([&] { braid::all_reduce(t, ReduceOp::BAnd); }, ErrorCode::InvalidArgument, "bitwise");
    expect_error([&] { braid::all_reduce(braid::tensor(ia), ReduceOp::Avg); }, ErrorCode::InvalidArgument, "int32");
    expect_error([&] { braid::all_reduce(t, braid::tensor(ia)); }, ErrorCode::InvalidArgument,
                 "expected the same dtype");
    expect_error([&] { braid::all_reduce(t, ReduceOp::Sum, {.algorithm = "warp_drive"}); },
                 ErrorCode::InvalidArgument, "ring");
    expect_error([&] { braid::all_reduce(t, ReduceOp::Sum, {.algorithm = "bruck"}); },
                 ErrorCode::InvalidArgument, "bruck");
    expect_error([&] { braid::all_to_all_single(braid::tensor(b.data(), 5), braid::tensor(a.data(), 5)); },
                 ErrorCode::InvalidArgument, "do not split evenly");
    expect_error([&] { braid::all_to_all_single(braid::tensor(b), t, {1, 2}, {2, 2, 2}); },
                 ErrorCode::InvalidArgument, "output_splits has 2 entries: expected 3");
    std::vector<braid::Tensor> outs{braid::tensor(b), braid::tensor(b), braid::tensor(b)};
    if (rank != 0)
      expect_error([&] { braid::gather(t, &outs, 0); }, ErrorCode::InvalidArgument, "must be null");
    else
      expect_error([&] { braid::gather(t, nullptr, 0); }, ErrorCode::InvalidArgument, "must pass a list of 3");
    // Everyone is still in step: a correct collective works.
    braid::all_reduce(t);
    for (float x : a) RANK_CHECK(x == static_cast<float>(world));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

// On one host, 1000 floats make a ring plan small enough for the fast boxes
// and 2000 one that is not: one rank runs the call through shared memory,
// the other as messages, and they meet only through their windows, where
// each says which call it runs how. Both must say what is wrong, long
// before the (long) timeout. Over TCP the engine names the size mismatch.
TEST_CASE("ranks that disagree on counts get errors, not a hang", "[collectives][errors]") {
  const std::string text = test_backend() == "tcp" ? "bytes" : "same counts";
  expect_count_mismatch({1000, 2000}, "ring", [&](int) { return text; });
}

// Small messages between ranks of one host go through fast boxes, whose
// flag words carry the message's size: a peer that passed another count is
// caught at once, as the engine catches it over TCP, naming that peer.
TEST_CASE("ranks that disagree on small counts get errors naming the peer", "[collectives][errors]") {
  // Whoever finds the mismatch first may give up before sending: its peer
  // then gets that error, relayed, naming it. On one host a waiting rank
  // may also read the peer's "doing" line first, whose shape differs ("runs
  // this call with other arguments"; seen once in CI under load): every one
  // of these messages names the peer and ends in the same advice.
  expect_count_mismatch({2, 3}, "recursive_doubling",
                        [](int) { return std::string("every rank must pass the same counts"); });
}

// One-sided plans (ranks sharing a host), with long timeouts on purpose:
// - twoshot with 1000 against 2000 floats: the rank that finds the mismatch
//   gives up part-way and says so in its window; its peer, waiting for a
//   signal that will not come, fails at once with that error, naming it --
//   or, as the plans' shapes differ, finds the mismatch itself first from
//   the first rank's "doing" line;
// - plans of different shapes, both on the window: their buffer
//   descriptors, fast-box flags and "doing" lines carry their shapes, so
//   every rank fails at once. Before, with 1, 1, 1 and 300 floats the three
//   small ranks read a prefix of the large one's Scratch and returned
//   without an error; with 2, 2 and 700 (oneshot against a fast-box ring)
//   every rank waited out its timeout.
TEST_CASE("ranks that disagree on the counts of a one-sided call all fail at once", "[collectives][errors][one_sided]") {
  const std::string backend = test_backend();
  if (backend != "auto" && backend != "shm") {
    WARN("one-sided plans need shared memory; backend " << backend << " has none: not checked");
    return;
  }
  const auto text = [](int) { return std::string("every rank must pass the same counts"); };
  expect_count_mismatch({1000, 2000}, "twoshot", text);
  expect_count_mismatch({1, 1, 1, 300}, nullptr, text);
  expect_count_mismatch({2, 2, 700}, nullptr, text);
}

// A broadcast root sends and never receives, so it runs calls ahead of its
// receivers until their fast boxes are full. A receiver that gives up
// meanwhile (here: it passed another count) must fail the waiting root at
// once, naming itself, not at the root's timeout.
TEST_CASE("a root waiting for a receiver to free its boxes learns at once that it gave up",
          "[collectives][errors][one_sided]") {
  const std::string backend = test_backend();
  if (backend != "auto" && backend != "shm") {
    WARN("fast boxes need shared memory; backend " << backend << " has none: not checked");
    return;
  }
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    const auto t0 = std::chrono::steady_clock::now();
    bool failed = false;
    try {
      for (int k = 0; k < 40; ++k) {
        std::vector<float> v(rank == 1 && k == 3 ? 3 : 2, 1.0f);
        braid::broadcast(braid::tensor(v), 0, {.timeout = std::chrono::seconds(60), .algorithm = "ring"});
      }
    } catch (const braid::Error& e) {
      failed = true;
      std::fprintf(stderr, "[rank %d] as expected: %s\n", rank, e.what());
      RANK_CHECK_MSG(e.code() == ErrorCode::InvalidArgument, e.what());
      if (rank == 0) RANK_CHECK_MSG(e.peer() == 1, "the error names rank " << e.peer() << ", expected rank 1");
    }
    RANK_CHECK(failed);
    RANK_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("BRAID_ALGO: unknown names fail init; ranks that disagree are caught at group creation", "[collectives][errors]") {
  auto res = run_ranks(2, [](int, int) {
    ::setenv("BRAID_ALGO", "allreduce:teleport", 1);
    auto e = expect_error([&] { init_env(); }, ErrorCode::InvalidArgument, "teleport");
    RANK_CHECK(std::string(e.what()).find("ring") != std::string::npos);  // lists the valid names
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));

  auto res2 = run_ranks(2, [](int rank, int) {
    ::setenv("BRAID_ALGO", rank == 0 ? "allreduce:ring" : "allreduce:tree", 1);
    // Both ranks are told, whichever defined the world first.
    expect_error([&] { init_env(); }, ErrorCode::InvalidArgument, "does not match across ranks");
  }, {.timeout_s = 30, .env = {}});
  INFO(describe(res2));
  REQUIRE(all_ok(res2));
}

TEST_CASE("BRAID_HANDOFF: a value other than auto, cache or stream fails init", "[collectives][errors]") {
  auto res = run_ranks(2, [](int, int) {
    ::setenv("BRAID_HANDOFF", "dram", 1);
    auto e = expect_error([&] { init_env(); }, ErrorCode::InvalidArgument, "BRAID_HANDOFF='dram'");
    RANK_CHECK(std::string(e.what()).find("auto, cache or stream") != std::string::npos);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

// Same bytes, another dtype: without the dtype on the wire (messages) and in
// the call's shape (one-sided plans, fast boxes) the bytes would simply be
// reinterpreted. Every algorithm and size class: each rank's error names
// both dtypes.
TEST_CASE("ranks that disagree on the dtype at equal byte sizes get errors naming both", "[collectives][errors]") {
  for (std::size_t count : {std::size_t{4}, std::size_t{1} << 16}) {
    for (const char* algo : {static_cast<const char*>(nullptr), "ring", "recursive_doubling"}) {
      auto res = run_ranks(2, [&](int rank, int) {
        init_env();
        std::vector<std::int32_t> i(count, 7);
        std::vector<float> f(count, 1.0f);
        const braid::Tensor t = rank == 0 ? braid::tensor(f) : braid::tensor(i);
        auto e = expect_error([&] { braid::all_reduce(t, ReduceOp::Sum, {.timeout = std::chrono::seconds(20), .algorithm = algo}); },
                              ErrorCode::InvalidArgument, rank == 0 ? "int32" : "float32");
        RANK_CHECK_MSG(std::string(e.what()).find(rank == 0 ? "float32" : "int32") != std::string::npos, e.what());
        RANK_CHECK_MSG(std::string(e.what()).find("all_reduce") != std::string::npos, e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the peer meets the mismatch, not our exit
      });
      INFO("count " << count << " algorithm " << (algo ? algo : "auto") << ": " << describe(res));
      REQUIRE(all_ok(res));
    }
  }
}

TEST_CASE("a timeout names each rank it waited for once", "[collectives][errors]") {
  // Several requests or waits on one peer (a TCP count mismatch left four
  // open) used to read "rank(s) 1, 1, 1, 1".
  CHECK(braid::rank_list({1, 1, 1, 1}) == "1");
  CHECK(braid::rank_list({3, 1, 3, 0}) == "0, 1, 3");
  CHECK(braid::rank_list({}).empty());
}

// The rank a timeout names from the positions: the one furthest behind, and
// among several as far behind (never seen waiting, say: they may not have
// waited long enough to publish) one the caller waited on. A stopped rank 3
// was blamed as rank 0, the first of "ranks 0, 2, 3 have not been seen".
TEST_CASE("a timeout's diagnosis prefers the rank it waited on among those furthest behind", "[collectives][errors]") {
  std::vector<braid::Position> ps(4);
  for (int r = 0; r < 4; ++r) ps[static_cast<std::size_t>(r)].rank = r;
  ps[1].call = 464;
  ps[1].what = "all_gather_into_tensor";
  ps[1].bytes = 64;
  int behind = -2;
  const std::string text = braid::describe_positions(ps, &behind, {3});
  CHECK(behind == 3);
  CHECK(text.find("ranks 0, 2, 3 have not been seen") != std::string::npos);
  braid::describe_positions(ps, &behind);
  CHECK(behind == 0);  // no hint: the first of them
  braid::describe_positions(ps, &behind, {1});
  CHECK(behind == 0);  // the rank waited on is not behind: the first of those that are
  // A rank seen in an earlier call is behind too, though others were never
  // seen: the rank waited on wins there (a root that never waited, since
  // its sends completed at once, was blamed instead).
  ps[0].call = 0;
  ps[1].call = 1;
  ps[2].call = 2;
  ps[3].call = 2;
  braid::describe_positions(ps, &behind, {1});
  CHECK(behind == 1);
  braid::describe_positions(ps, &behind);
  CHECK(behind == 0);  // no hint: the one seen least
  for (auto& p : ps) p.call = 7;
  braid::describe_positions(ps, &behind, {3});
  CHECK(behind == -1);  // all in one call: nobody is behind
}

// The seed document's other mistake: rank 0 in all_reduce while the others
// are in broadcast, at the same byte size. Every message carries its call's
// fingerprint, so the wrong call's data is refused, never reduced or kept,
// and every rank's error names a differing rank and both collectives.
// A rank that gave up records its error in the store for the others (and a
// shared-memory window's first member its failure): what is read back is
// what was written, and nothing else is taken.
TEST_CASE("an error record reads back as written, strictly", "[collectives][errors]") {
  using braid::ErrorCode;
  const braid::ErrorRecord r{ErrorCode::Timeout, 2, 1, "all_reduce #7 timed out after 3000 ms waiting for rank(s) 2"};
  const auto back = braid::parse_error_record(braid::error_record_text(r), 4, {ErrorCode::Timeout});
  REQUIRE(back.has_value());
  CHECK(back->code == ErrorCode::Timeout);
  CHECK(back->named == 2);
  CHECK(back->by == 1);
  CHECK(back->what == r.what);
  CHECK_FALSE(braid::parse_error_record(braid::error_record_text(r), 4, {ErrorCode::PeerFailure}));  // another code
  CHECK_FALSE(braid::parse_error_record(braid::error_record_text(r), 2, {ErrorCode::Timeout}));      // rank 2 of 2
  CHECK_FALSE(braid::parse_error_record("2 2 x why", 4, {ErrorCode::Timeout}));
  CHECK_FALSE(braid::parse_error_record("2 -2 1 why", 4, {ErrorCode::Timeout}));
  CHECK_FALSE(braid::parse_error_record("2 2", 4, {ErrorCode::Timeout}));
  CHECK(braid::parse_error_record("2 2 1 " + std::string(1000, 'x'), 4, {ErrorCode::Timeout})->what.size() == 400);
}

TEST_CASE("all in one call, a timeout follows who waits on whom to the end of the chain", "[collectives][errors]") {
  // Positions carry the ranks each waited on, and parse back.
  const auto p = braid::parse_position(braid::position_value(9, "all_reduce", 64, {3, 5}), 2);
  REQUIRE(p.has_value());
  CHECK(p->call == 9);
  CHECK(p->what == "all_reduce");
  CHECK(p->awaits == std::vector<int>{3, 5});
  CHECK(braid::parse_position("9 64 all_reduce", 2)->awaits.empty());
  CHECK_FALSE(braid::parse_position("9 64 all_reduce 3,x", 2).has_value());  // malformed: not trusted
  // Hosts: ranks 0, 1 on host 0; 2, 3 on host 1. Rank 0 waited on its
  // host-mate 1, which waits on 2 across; 2 waits on nobody it knows of
  // (stopped): the chain ends at 2.
  const std::vector<int> host_of = {0, 0, 1, 1};
  std::vector<braid::Position> ps(4);
  for (int r = 0; r < 4; ++r) ps[static_cast<std::size_t>(r)] = braid::Position{r, 7, "all_reduce", 4, {}};
  ps[1].awaits = {2};
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 2);
  // 2 last seen in an earlier call, waiting there on 3, which has been seen
  // since in a later call: 2's wait is stale (2 stopped after publishing it),
  // so the chain ends at 2.
  ps[2].call = 6;
  ps[2].awaits = {3};
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 2);
  // A host-mate one call behind, alive and waiting there across a cut on a
  // rank not seen since (never, or in that call or before): followed.
  ps[3].call = 0;
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 3);
  ps[3].call = 6;
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 3);
  // ...unless this host sees that rank stopped: its awaits are stale.
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0, {2}) == 2);
  ps[3].call = 7;
  // A cut link: 1 and 2 wait on each other across it. From host 0 the rank
  // across (2) is named; from host 1 (rank 3 waited on 2), the rank across (1).
  ps[2].call = 7;
  ps[2].awaits = {1};
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 2);
  CHECK(braid::follow_waits(ps, 7, 2, 3, host_of, 1) == 1);
  // A loop inside one host: nobody to prefer.
  const std::vector<int> one_host = {0, 0, 0, 0};
  CHECK(braid::follow_waits(ps, 7, 1, 0, one_host, 0) == -1);
  // A rank that waits only on the asking rank ends the chain at itself.
  ps[1].awaits = {0};
  CHECK(braid::follow_waits(ps, 7, 1, 0, host_of, 0) == 1);
  // A point-to-point op waits under the next call's number: in the same
  // call as the collective's waiters, so nobody is behind, and the text
  // says what each does.
  ps[2].what = "recv";
  int behind = 0;
  const std::string text = braid::describe_positions(ps, &behind, {2});
  CHECK(behind == -1);
  CHECK(text.find("wait in all_reduce #7") != std::string::npos);
  CHECK(text.find("rank 2 waits in recv #7") != std::string::npos);
}

TEST_CASE("ranks in different collectives get errors naming both", "[collectives][errors]") {
  for (int n : {2, 3}) {
    for (std::size_t count : {std::size_t{4}, std::size_t{1} << 16}) {
      auto res = run_ranks(n, [&](int rank, int) {
        init_env();
        std::vector<float> v(count, static_cast<float>(rank + 1));
        const auto t0 = std::chrono::steady_clock::now();
        auto e = expect_error([&] {
          const braid::OpOptions o{.timeout = std::chrono::seconds(30)};
          if (rank == 0) braid::all_reduce(braid::tensor(v), ReduceOp::Sum, o);
          else braid::broadcast(braid::tensor(v), 0, o);
        }, ErrorCode::InvalidArgument, "");
        const std::string what = e.what();
        RANK_CHECK_MSG(what.find("allreduce") != std::string::npos && what.find("broadcast") != std::string::npos, what);
        RANK_CHECK_MSG(e.peer() >= 0 && e.peer() != rank, what);
        RANK_CHECK_MSG(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10), what);
        // Nothing of the wrong call landed in a non-root's buffer.
        if (rank != 0) RANK_CHECK(v[0] == static_cast<float>(rank + 1) || v[0] == 1.0f);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the peers meet the mismatch, not our exit
      });
      INFO(n << " ranks, count " << count << ": " << describe(res));
      REQUIRE(all_ok(res));
    }
  }
}
