// One-sided one-host plans: every such registered algorithm verified over
// group sizes, roots and counts with topology.one_host set (and refused
// without it); hand-broken plans rejected for the right reason; the cost
// model's one-sided rules and the choice it makes on one host.
#include <catch2/catch.hpp>

#include <functional>
#include <fmt/core.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/plan.hpp"
#include "tests/algorithms/plan_args.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/verify.hpp"

using namespace braid::plan;

namespace {

using verify_test::host_args;
using verify_test::report_failures;
using verify_test::rooted;

// An algorithm is one-sided if what it builds on one host is.
bool one_sided(const Algorithm& alg) {
  const auto args = host_args(alg.coll, 3, alg.coll == Collective::Barrier ? 0 : 5, 1);
  return (!alg.supports || alg.supports(args)) && alg.build(args).one_sided;
}

std::vector<const Algorithm*> one_sided_algorithms() {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : algorithms())
    if (one_sided(a)) out.push_back(&a);
  return out;
}

std::string rejection(const Plan& p) {
  const VerifyResult v = verify(p);
  CHECK_FALSE(v.ok);
  return v.error;
}

// Turns a step into an empty local copy: indices and deps stay valid.
void neuter(Step& s) {
  s.kind = StepKind::Copy;
  s.peer = -1;
  s.src = out(0, 0);
  s.dst = out(0, 0);
  s.acc = out(0, 0);
}

}  // namespace

TEST_CASE("the one-sided algorithms are registered, and only for one host", "[one_sided][registry]") {
  const auto algs = one_sided_algorithms();
  std::set<std::string> names;
  for (const Algorithm* a : algs) names.insert(fmt::format("{}:{}", collective_name(a->coll), a->name));
  for (const char* want : {"allreduce:oneshot", "allreduce:twoshot", "reducescatter:oneshot",
                           "reducescatter:peer_read", "allgather:oneshot", "allgather:peer_read", "broadcast:oneshot",
                           "broadcast:peer_read", "reduce:oneshot", "reduce:peer_read", "gather:peer_read",
                           "scatter:peer_read", "alltoall:peer_read", "barrier:signal", "allreduce:push",
                           "allreduce:staged", "allgather:staged"}) {
    INFO(want);
    CHECK(names.count(want) == 1);
  }
  for (const Algorithm* a : algs) {
    INFO(fmt::format("{} / {}", collective_name(a->coll), a->name));
    for (int n : {1, 2, 8}) {
      PlanArgs args = host_args(a->coll, n, 16);
      args.topology.one_host = false;
      REQUIRE(a->supports != nullptr);
      CHECK_FALSE(a->supports(args));
    }
  }
  // Message algorithms stay message algorithms on one host.
  for (const Algorithm& a : algorithms()) {
    const auto args = host_args(a.coll, 4, a.coll == Collective::Barrier ? 0 : 9, 1);
    if ((a.supports && !a.supports(args)) || one_sided(a)) continue;
    CHECK_FALSE(a.build(args).one_sided);
  }
}

TEST_CASE("every one-sided algorithm verifies over sizes, roots and counts", "[one_sided][verify]") {
  const auto algs = one_sided_algorithms();
  REQUIRE(algs.size() >= 15);
  std::vector<std::string> failures;
  int plans = 0;
  for (const Algorithm* alg : algs) {
    int nontrivial = 0;  // plans with more than one rank and some data: one-sided steps in them
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 64}) {
      std::set<int> roots = {0};
      if (rooted(alg->coll)) roots = {0, 1 % n, n / 2, n - 1};
      for (int root : roots) {
        for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1}, std::int64_t{2 * n + 3},
                                   std::int64_t{100003}}) {
          const bool barrier = alg->coll == Collective::Barrier;
          PlanArgs args = host_args(alg->coll, n, barrier ? 0 : count, root, count == 100003 ? 4096 : 4);
          std::vector<PlanArgs> variants = {args};
          // Uneven, with empty blocks: not offered (the runtime does not know
          // where a peer's block sits), but the generator must still be right.
          if (alg->coll == Collective::AllToAll) {
            args.splits.assign(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n)));
            for (int i = 0; i < n; ++i)
              for (int j = 0; j < n; ++j)
                args.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
                    (i * 31 + j * 17) % 5 == 0 ? 0 : count % 7 + (i + 2 * j) % 3;
            variants.push_back(args);
          }
          for (const PlanArgs& v : variants) {
            INFO(fmt::format("{} / {} n={} count={} root={}", collective_name(alg->coll), alg->name, n, count, root));
            // Uneven splits are never offered; staged declines shapes whose
            // Scratch would grow past its bound (tested below).
            const bool offered = alg->supports(v);
            if (!v.splits.empty()) REQUIRE_FALSE(offered);
            else if (!offered) REQUIRE(alg->name == std::string("staged"));
            if (!offered) continue;
            const Plan plan = alg->build(v);
            ++plans;
            if (n > 1 && (barrier || count > 0)) {
              ++nontrivial;
              if (!plan.one_sided) failures.push_back(fmt::format("{} / {} n={}: not one-sided", collective_name(alg->coll), alg->name, n));
            }
            const VerifyResult r = verify(plan);
            if (!r.ok) failures.push_back(r.error);
          }
          if (barrier) break;
        }
      }
    }
    INFO(fmt::format("{} / {}", collective_name(alg->coll), alg->name));
    CHECK(nontrivial >= 13);  // every size but 1, at least once
  }
  INFO(fmt::format("{} plans", plans));
  report_failures(failures);
}

// push moves data with Put, the write into a peer: every group size the
// verifier takes, the counts around the block size, both ways (reads_input
// plans are verified out of place and in place).
TEST_CASE("push all-reduce verifies at 1..64 ranks", "[one_sided][verify][push]") {
  const Algorithm* push = find_algorithm(Collective::AllReduce, "push");
  REQUIRE(push != nullptr);
  std::vector<std::string> failures;
  for (int n = 1; n <= 64; ++n)
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1}, std::int64_t{n},
                               std::int64_t{1000}}) {
      const PlanArgs args = host_args(Collective::AllReduce, n, count);
      REQUIRE(push->supports(args));
      const Plan plan = push->build(args);
      REQUIRE(plan.reads_input);
      if (n > 1 && count > 0) {
        REQUIRE(plan.one_sided);
        // Every rank with a block delivers it to every peer with a Put.
        int puts = 0;
        for (const RankPlan& rp : plan.ranks)
          for (const Step& st : rp.steps) puts += st.kind == StepKind::Put;
        CHECK(puts == std::min<std::int64_t>(count, n) * (n - 1));
      }
      const VerifyResult r = verify(plan);
      if (!r.ok) failures.push_back(r.error);
    }
  report_failures(failures);
}

// Ranks sharing a GPU (Topology::device_of): only the first rank on each GPU
// owns blocks, so one process per GPU does all of that GPU's device work. All
// on one GPU, several GPUs of equal and unequal share, interleaved; verified
// both ways like every reads_input plan.
TEST_CASE("push gives the blocks to one rank per GPU", "[one_sided][verify][push]") {
  const Algorithm* push = find_algorithm(Collective::AllReduce, "push");
  REQUIRE(push != nullptr);
  std::vector<std::string> failures;
  for (int n = 2; n <= 9; ++n)
    for (int gpus : {1, 2, 3})
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{n}, std::int64_t{1000}}) {
        PlanArgs args = host_args(Collective::AllReduce, n, count);
        args.topology.device_of.resize(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) args.topology.device_of[static_cast<std::size_t>(r)] = r % gpus;
        const Plan plan = push->build(args);
        // Ranks 0..gpus-1 are each the first on their GPU; nobody else reduces or puts.
        for (int r = 0; r < n; ++r) {
          int data_steps = 0;
          for (const Step& st : plan.ranks[static_cast<std::size_t>(r)].steps)
            data_steps += st.kind == StepKind::Put || st.kind == StepKind::GetReduce;
          if (r >= gpus) CHECK(data_steps == 0);
          else if (count >= gpus) CHECK(data_steps == 2 * (n - 1));
        }
        const VerifyResult v = verify(plan);
        if (!v.ok) failures.push_back(fmt::format("n={} gpus={} count={}: {}", n, gpus, count, v.error));
      }
  report_failures(failures);
}

// Mutations of the real plans: dropping any read of a peer or write into one
// loses data, and dropping any signal (with its wait) loses an ordering the
// plan needs. The verifier must catch every one.
TEST_CASE("dropping any one read, write or signal of a one-sided algorithm is caught", "[one_sided][verify]") {
  int mutants = 0, puts = 0;
  for (const Algorithm* alg : one_sided_algorithms()) {
    for (int n : {2, 5, 8}) {
      const auto args = host_args(alg->coll, n, alg->coll == Collective::Barrier ? 0 : 2 * n + 3, 1 % n);
      const Plan plan = alg->build(args);
      REQUIRE(verify(plan).ok);
      for (int r = 0; r < n; ++r) {
        const auto& steps = plan.ranks[static_cast<std::size_t>(r)].steps;
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const Step& s = steps[i];
          const bool read = (s.kind == StepKind::Get || s.kind == StepKind::GetReduce) && s.src.count > 0;
          const bool write = s.kind == StepKind::Put && s.dst.count > 0;
          if (!read && !write && s.kind != StepKind::Signal) continue;
          puts += write;
          Plan m = plan;
          neuter(m.ranks[static_cast<std::size_t>(r)].steps[i]);
          if (s.kind == StepKind::Signal)
            for (Step& t : m.ranks[static_cast<std::size_t>(s.peer)].steps)
              if (t.kind == StepKind::Wait && t.peer == r && t.slot == s.slot) neuter(t);
          INFO(fmt::format("{} / {} nranks={}: dropped rank {} step {} ({})", collective_name(alg->coll), alg->name,
                           n, r, i, to_string(s)));
          CHECK_FALSE(verify(m).ok);
          ++mutants;
        }
      }
    }
  }
  CHECK(mutants > 100);
  CHECK(puts > 10);
}

// ---- the verifier catches broken one-sided plans ---------------------------

TEST_CASE("one-sided: a Get without a Wait races with the owner's write", "[one_sided][negative]") {
  // Rank 0 publishes in Scratch and signals, but rank 1 reads before waiting.
  PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
  b.need_scratch(0, 4);
  b.signal(0, 1, {b.copy(0, out(0, 4), scratch(0, 4))});
  b.wait(0, 1);
  b.signal(1, 0);
  const int w = b.wait(1, 0);
  b.get(1, 0, scratch(0, 4), out(0, 4));  // forgot {w}
  (void)w;
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("race across ranks"));
  CHECK_THAT(e, Catch::Contains("rank 0's scratch[0..4)"));
}

TEST_CASE("one-sided: a Get of a peer's Output with no exit round", "[one_sided][negative]") {
  // Broadcast straight from the root's Output, but the root may return (and
  // its caller overwrite the buffer) while rank 1 is still reading.
  PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
  b.signal(0, 1);
  b.get(1, 0, out(0, 4), out(0, 4), {b.wait(1, 0)});
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("no step of rank 0 waits for the read"));
  CHECK_THAT(e, Catch::Contains("exit round"));
}

TEST_CASE("one-sided: reading Scratch whose owner never waits on the reader", "[one_sided][negative]") {
  PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
  b.need_scratch(0, 4);
  b.signal(0, 1, {b.copy(0, out(0, 4), scratch(0, 4))});
  b.get(1, 0, scratch(0, 4), out(0, 4), {b.wait(1, 0)});
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("rank 0 never waits on rank 1"));
  CHECK_THAT(e, Catch::Contains("double-buffered"));
}

TEST_CASE("one-sided: a reads_input plan that is only correct out of place", "[one_sided][negative]") {
  // Each rank reduces the whole peer Input into its Output. Out of place
  // that is right; in place a rank's Input is its Output, which it rewrites
  // while the peer is still reading it.
  PlanBuilder b(host_args(Collective::AllReduce, 2, 4), "broken");
  b.reads_input();
  for (int r = 0; r < 2; ++r) {
    const int ready = b.signal(r, 1 - r);
    const int w = b.wait(r, 1 - r);
    const int got = b.get_reduce(r, 1 - r, in(0, 4), in(0, 4), out(0, 4), {w});
    b.signal(r, 1 - r, {got, ready});
    b.wait(r, 1 - r, {w});
  }
  const std::string e = rejection(b.finish());
  // "in place" names the second pass: the out-of-place one succeeded.
  CHECK_THAT(e, Catch::Contains("in place: input and output are the same memory"));
  CHECK_THAT(e, Catch::Contains("race across ranks"));
}

TEST_CASE("one-sided: a plan mixing messages and one-sided steps", "[one_sided][negative]") {
  PlanBuilder b(host_args(Collective::Broadcast, 3, 4), "broken");
  b.send(0, 1, out(0, 4));
  b.recv(1, 0, out(0, 4));
  b.signal(0, 2);
  b.get(2, 0, out(0, 4), out(0, 4), {b.wait(2, 0)});
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("never both"));
}

TEST_CASE("one-sided: unordered signals and waits of one pair", "[one_sided][negative]") {
  SECTION("signals") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
    b.signal(0, 1);
    b.signal(0, 1);  // slot 1, not after slot 0
    b.wait(1, 0, {b.wait(1, 0)});
    b.signal(1, 0);
    b.wait(0, 1);
    const std::string e = rejection(b.finish());
    CHECK_THAT(e, Catch::Contains("signals from rank 0 to rank 1 (slots 0 and 1) are not ordered"));
  }
  SECTION("waits") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
    b.signal(0, 1, {b.signal(0, 1)});
    b.wait(1, 0);
    b.wait(1, 0);
    b.signal(1, 0);
    b.wait(0, 1);
    const std::string e = rejection(b.finish());
    CHECK_THAT(e, Catch::Contains("waits of rank 1 on rank 0 (slots 0 and 1) are not ordered"));
  }
}

TEST_CASE("one-sided: structural mistakes", "[one_sided][negative]") {
  SECTION("a wait with no signal") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
    b.wait(0, 1);
    CHECK_THAT(rejection(b.finish()), Catch::Contains("no signal from rank 1 to rank 0 has slot 0"));
  }
  SECTION("a signal nobody waits for") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
    b.signal(0, 1);
    CHECK_THAT(rejection(b.finish()), Catch::Contains("never waits for this signal"));
  }
  SECTION("one_sided flag disagrees with the steps") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
    b.signal(0, 1);
    b.wait(1, 0);
    Plan p = b.finish();
    p.one_sided = false;
    CHECK_THAT(rejection(p), Catch::Contains("plan.one_sided is false"));
  }
  SECTION("a Get past the end of the peer's buffer") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.signal(0, 1);
    b.get(1, 0, in(2, 4), out(0, 4), {b.wait(1, 0)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("outside the buffer, which has 4 elements on rank 0"));
  }
  SECTION("a Get into the read-only input") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.signal(0, 1);
    b.get(1, 0, in(0, 4), in(0, 4), {b.wait(1, 0)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("read-only input"));
  }
  SECTION("operand and destination shifted against each other") {
    PlanBuilder b(host_args(Collective::AllReduce, 2, 4), "broken");
    b.signal(0, 1);
    b.get_reduce(1, 0, out(0, 2), out(0, 2), out(1, 2), {b.wait(1, 0)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("operand and destination overlap"));
  }
  SECTION("a get_reduce in a data-movement collective") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.signal(0, 1);
    b.get_reduce(1, 0, in(0, 4), in(0, 4), out(0, 4), {b.wait(1, 0)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("only moves data"));
  }
  SECTION("reading itself") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.get(0, 0, in(0, 4), out(4, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("reads from itself"));
  }
  SECTION("reading a peer before it has entered the call") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.signal(1, 0, {b.get(1, 0, in(0, 4), out(0, 4))});
    b.wait(0, 1);
    b.signal(0, 1, {b.get(0, 1, in(0, 4), out(4, 4))});
    b.wait(1, 0);
    CHECK_THAT(rejection(b.finish()), Catch::Contains("reads rank 1's in[0..4) with no signal from rank 1 before it"));
  }
  SECTION("reads_input on a collective without it") {
    PlanBuilder b(host_args(Collective::ReduceScatter, 2, 4), "broken");
    b.reads_input();
    CHECK_THAT(rejection(b.finish()), Catch::Contains("reads_input"));
  }
  SECTION("a reads_input all-gather filling its own block other than straight from Input") {
    // A whole gather, right out of place (it verifies without the rule);
    // in place the own block is the Input, and a copy through Scratch is a
    // second writer of it, which the rule does not allow.
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.reads_input();
    std::vector<int> staged;
    for (int r = 0; r < 2; ++r) {
      b.need_scratch(r, 4);
      staged.push_back(b.copy(r, in(0, 4), scratch(0, 4)));
      b.signal(r, 1 - r, {staged.back()});
    }
    for (int r = 0; r < 2; ++r) {
      b.get(r, 1 - r, scratch(0, 4), out((1 - r) * 4, 4), {b.wait(r, 1 - r)});
      b.copy(r, scratch(0, 4), out(r * 4, 4), {staged[static_cast<std::size_t>(r)]});
    }
    CHECK_THAT(rejection(b.finish()), Catch::Contains("own block of Output, which is its Input in place"));
  }
}

TEST_CASE("one-sided: waits that wait on each other deadlock", "[one_sided][negative]") {
  PlanBuilder b(host_args(Collective::Barrier, 2, 0), "broken");
  for (int r = 0; r < 2; ++r) b.signal(r, 1 - r, {b.wait(r, 1 - r)});
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("deadlock"));
  CHECK_THAT(e, Catch::Contains("a wait completes only once its signal was issued"));
}

TEST_CASE("one-sided: a barrier that lets a rank leave early", "[one_sided][negative]") {
  // Rank 0 hears from everyone but releases only rank 1.
  PlanBuilder b(host_args(Collective::Barrier, 3, 0), "broken");
  Deps arrived;
  for (int r = 1; r < 3; ++r) {
    b.signal(r, 0);
    arrived.push_back(b.wait(0, r));
  }
  b.signal(0, 1, arrived);
  b.wait(1, 0);
  CHECK_THAT(rejection(b.finish()), Catch::Contains("barrier: rank 2 can finish before ranks {0-1}"));
}

TEST_CASE("one-sided: the wrong value is caught by the symbolic run", "[one_sided][negative]") {
  // oneshot all-reduce where rank 1 reads rank 0's Scratch twice and rank
  // 2's never: counts rank 0 twice.
  const Algorithm* oneshot = find_algorithm(Collective::AllReduce, "oneshot");
  REQUIRE(oneshot != nullptr);
  Plan p = oneshot->build(host_args(Collective::AllReduce, 3, 5));
  REQUIRE(verify(p).ok);
  for (Step& s : p.ranks[1].steps)
    if (s.kind == StepKind::GetReduce && s.peer == 2) s.peer = 0;
  const std::string e = rejection(p);
  CHECK_THAT(e, Catch::Contains("twice"));
}

// ---- Put: writes into a peer's memory -------------------------------------

// Broadcast on 2 ranks by Put: the root writes its Output into rank 1's.
// `exit`: rank 1 waits for the root's "written" signal; `copy_after_exit`:
// rank 1 then copies its Output to Scratch, after that wait or (false)
// unordered with the write.
Plan put_broadcast(bool exit, bool copy_after_exit) {
  PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "put");
  b.signal(1, 0);
  const int put = b.put(0, 1, out(0, 4), out(0, 4), {b.wait(0, 1)});
  if (!exit) return b.finish();
  b.signal(0, 1, {put});
  const int landed = b.wait(1, 0);
  b.need_scratch(1, 4);
  b.copy(1, out(0, 4), scratch(0, 4), {copy_after_exit ? landed : -1});
  return b.finish();
}

TEST_CASE("put: a correct plan is accepted and printed with the peer on the destination", "[one_sided][put]") {
  const Plan p = put_broadcast(true, true);
  CHECK(p.one_sided);
  const VerifyResult v = verify(p);
  CHECK(v.error == "");
  CHECK(v.ok);
  CHECK(std::string(step_kind_name(StepKind::Put)) == "put");
  CHECK(is_one_sided(StepKind::Put));
  const std::string text = to_string(p);
  CHECK_THAT(text, Catch::Contains("put         out[0..4) -> out[0..4)@1"));
}

TEST_CASE("put: racing the owner's read of the memory it writes", "[one_sided][put][negative]") {
  const std::string e = rejection(put_broadcast(true, false));
  CHECK_THAT(e, Catch::Contains("race across ranks"));
  CHECK_THAT(e, Catch::Contains("(put out[0..4) -> out[0..4)@1 after 0) writes rank 1's out[0..4)"));
  CHECK_THAT(e, Catch::Contains("(copy out[0..4) -> scratch[0..4)) reads it"));
}

// A 3-rank relay built by `build(relay_after_write)`: with the relay
// ordered after the root's write it must verify; without, it must be
// rejected with `error`.
void relay_case(const std::function<Plan(bool)>& build, const std::string& error) {
  for (bool relay_after_write : {true, false}) {
    const Plan p = build(relay_after_write);
    INFO(to_string(p));
    if (relay_after_write) {
      CHECK(verify(p).error == "");
      continue;
    }
    CHECK_THAT(rejection(p), Catch::Contains(error));
  }
}

TEST_CASE("put: racing another rank's Get of the same memory", "[one_sided][put][negative]") {
  // The root writes rank 1's Output; rank 2 relays it from there. Correct
  // when rank 1 tells rank 2 only once the root's write has landed; broken
  // when its one signal to rank 2 is the entry one.
  relay_case(
      [](bool relay_after_write) {
        PlanBuilder b(host_args(Collective::Broadcast, 3, 4), "put");
        b.signal(1, 0);
        const int put = b.put(0, 1, out(0, 4), out(0, 4), {b.wait(0, 1)});
        b.signal(0, 1, {put});
        const int landed = b.wait(1, 0);
        b.signal(1, 2, {relay_after_write ? landed : -1});
        const int got = b.get(2, 1, out(0, 4), out(0, 4), {b.wait(2, 1)});
        b.signal(2, 1, {got});
        b.wait(1, 2);
        return b.finish();
      },
      "race across ranks: rank 0 step 1 (put out[0..4) -> out[0..4)@1 after 0) writes rank 1's out[0..4) while "
      "rank 2 step 1 (get out[0..4)@1 -> out[0..4) after 0) reads it");
}

TEST_CASE("put: racing the owner's own Put of the memory it writes", "[one_sided][put][negative]") {
  // A relay: the root writes rank 1's Output, rank 1 writes it on into rank
  // 2's. Rank 1's Put reads what the root's writes, so it must wait for the
  // root's "written" signal first.
  relay_case(
      [](bool relay_after_write) {
        PlanBuilder b(host_args(Collective::Broadcast, 3, 4), "put");
        b.signal(1, 0);
        b.signal(0, 1, {b.put(0, 1, out(0, 4), out(0, 4), {b.wait(0, 1)})});
        const int landed = b.wait(1, 0);
        b.signal(2, 1);
        const int relayed = b.put(1, 2, out(0, 4), out(0, 4), {b.wait(1, 2), relay_after_write ? landed : -1});
        b.signal(1, 2, {relayed});
        b.wait(2, 1);
        return b.finish();
      },
      "race across ranks: rank 0 step 1 (put out[0..4) -> out[0..4)@1 after 0) writes rank 1's out[0..4) while "
      "rank 1 step 3 (put out[0..4) -> out[0..4)@2 after 2) reads it");
}

TEST_CASE("put: a write the owner never waits for", "[one_sided][put][negative]") {
  // The result would be right, but rank 1 may return (and its caller read
  // Output) before the write has landed.
  const std::string e = rejection(put_broadcast(false, false));
  CHECK_THAT(e, Catch::Contains("writes rank 1's out[0..4), but no step of rank 1 waits for the write"));
  CHECK_THAT(e, Catch::Contains("exit round"));
  // Into Scratch as well: rank 1 waits on rank 0, but only on a signal
  // issued before the write.
  PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "put");
  b.need_scratch(1, 4);
  b.signal(1, 0);
  b.wait(1, 0);
  b.signal(0, 1);
  b.put(0, 1, out(0, 4), scratch(0, 4), {b.wait(0, 1)});
  CHECK_THAT(rejection(b.finish()), Catch::Contains("writes rank 1's scratch[0..4), but no step of rank 1 waits for the write"));
}

TEST_CASE("put: writing a peer's Scratch without that peer waiting on the writer", "[one_sided][put][negative]") {
  // The root writes rank 1's Scratch and tells it through rank 2: the data
  // arrives in order, but rank 1 never waits on rank 0, so rank 0 could be
  // two calls ahead, writing the Scratch buffer rank 1 is reading.
  for (bool waits_on_writer : {true, false}) {
    PlanBuilder b(host_args(Collective::Broadcast, 3, 4), "put");
    b.need_scratch(1, 4);
    const int entered1 = b.wait(0, 1), entered2 = b.wait(0, 2);
    const int to1 = b.put(0, 1, out(0, 4), scratch(0, 4), {entered1});
    const int to2 = b.put(0, 2, out(0, 4), out(0, 4), {entered2});
    b.signal(0, 2, {to1, to2});
    b.signal(1, 0);
    b.signal(2, 0);
    b.signal(2, 1, {b.wait(2, 0)});
    int relayed = b.wait(1, 2);
    if (waits_on_writer) {
      b.signal(0, 1, {to1});
      relayed = b.wait(1, 0, {relayed});
    }
    b.copy(1, scratch(0, 4), out(0, 4), {relayed});
    const Plan p = b.finish();
    INFO(to_string(p));
    if (waits_on_writer) {
      CHECK(verify(p).error == "");
      continue;
    }
    const std::string e = rejection(p);
    CHECK_THAT(e, Catch::Contains("writes rank 1's scratch[0..4), but rank 1 never waits on rank 0"));
    CHECK_THAT(e, Catch::Contains("double-buffered"));
  }
}

TEST_CASE("put: a race that exists only in place", "[one_sided][put][negative]") {
  // All-reduce on 2 ranks reading Input: rank 0 reduces both contributions
  // and Puts the sum into rank 1's Output, while rank 1 keeps a copy of its
  // Input. Out of place Input and Output are apart; in place the Put
  // overwrites the Input rank 1 is copying.
  PlanBuilder b(host_args(Collective::AllReduce, 2, 4), "put");
  b.reads_input();
  b.need_scratch(1, 4);
  b.signal(1, 0);
  b.copy(1, in(0, 4), scratch(0, 4));
  const int sum = b.get_reduce(0, 1, in(0, 4), in(0, 4), out(0, 4), {b.wait(0, 1)});
  b.signal(0, 1, {b.put(0, 1, out(0, 4), out(0, 4), {sum})});
  b.wait(1, 0);
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("in place: input and output are the same memory"));
  CHECK_THAT(e, Catch::Contains("race across ranks"));
  CHECK_THAT(e, Catch::Contains("writes rank 1's out[0..4) while rank 1 step 1 (copy in[0..4) -> scratch[0..4)) reads it"));
}

TEST_CASE("put: structural mistakes", "[one_sided][put][negative]") {
  SECTION("into a peer's Input") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.signal(1, 0);
    b.put(0, 1, in(0, 4), in(0, 4), {b.wait(0, 1)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("a Put may not write a peer's Input"));
  }
  SECTION("past the end of the peer's Output, which is smaller than the writer's") {
    PlanBuilder b(host_args(Collective::Gather, 2, 4), "broken");  // only the root has an Output
    b.signal(1, 0);
    b.put(0, 1, out(0, 4), out(0, 4), {b.wait(0, 1)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("outside the buffer, which has 0 elements on rank 1"));
  }
  SECTION("past the end of the peer's Scratch") {
    PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
    b.need_scratch(0, 4);
    b.need_scratch(1, 2);
    b.signal(1, 0);
    b.put(0, 1, out(0, 4), scratch(0, 4), {b.wait(0, 1)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("outside the buffer, which has 2 elements on rank 1"));
  }
  SECTION("a source outside the writer's buffers") {
    PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
    b.signal(1, 0);
    b.put(0, 1, out(2, 4), out(0, 4), {b.wait(0, 1)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("outside the buffer, which has 4 elements on rank 0"));
  }
  SECTION("counts differ") {
    PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
    b.signal(1, 0);
    b.put(0, 1, out(0, 4), out(0, 2), {b.wait(0, 1)});
    CHECK_THAT(rejection(b.finish()), Catch::Contains("writes 4 elements into rank 1's 2 elements"));
  }
  SECTION("writing itself") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 4), "broken");
    b.put(0, 0, in(0, 4), out(4, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("writes to itself"));
  }
  SECTION("writing a peer before it has entered the call") {
    PlanBuilder b(host_args(Collective::Broadcast, 2, 4), "broken");
    b.signal(0, 1, {b.put(0, 1, out(0, 4), out(0, 4))});
    b.wait(1, 0);
    CHECK_THAT(rejection(b.finish()),
               Catch::Contains("writes rank 1's out[0..4) with no signal from rank 1 before it"));
  }
}

TEST_CASE("put: push with a Put into the wrong block is caught", "[one_sided][put][negative]") {
  const Algorithm* push = find_algorithm(Collective::AllReduce, "push");
  REQUIRE(push != nullptr);
  Plan p = push->build(host_args(Collective::AllReduce, 3, 6));
  REQUIRE(verify(p).ok);
  for (Step& s : p.ranks[0].steps)
    if (s.kind == StepKind::Put && s.peer == 1) s.dst.offset = 2;  // rank 1's own block
  const std::string e = rejection(p);
  CHECK_THAT(e, Catch::Contains("race across ranks"));
  CHECK_THAT(e, Catch::Contains("writes rank 1's out[2..4)"));
}

// ---- cost model ------------------------------------------------------------

TEST_CASE("cost model: one-sided steps", "[one_sided][cost]") {
  CostParams c{1e-6, 1e-9, 0.5e-9, 0.25e-9, 0.2e-6};
  SECTION("a wait completes signal_s after its signal") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "t");
    b.signal(0, 1);
    b.wait(1, 0);
    CHECK(predict_seconds(b.finish(), c) == Approx(0.2e-6));
  }
  SECTION("a get costs copy per byte after the wait; a get_reduce gamma") {
    PlanBuilder b(host_args(Collective::AllReduce, 2, 100, 0, 4), "t");
    b.signal(0, 1);
    const int got = b.get_reduce(1, 0, out(0, 100), out(0, 100), out(0, 100), {b.wait(1, 0)});
    b.signal(1, 0, {got});
    b.wait(0, 1);
    // Each rank first waits for the executor's copy of its contribution
    // into Output (400 bytes at copy_s_per_byte), then signal, get_reduce,
    // signal.
    CHECK(predict_seconds(b.finish(), c) == Approx(400 * 0.25e-9 + 0.2e-6 + 400 * 0.5e-9 + 0.2e-6));
  }
  SECTION("a plan that reads its Input itself pays no copy before it") {
    PlanBuilder b(host_args(Collective::AllGather, 2, 100, 0, 4), "t");
    b.reads_input();
    for (int r = 0; r < 2; ++r) b.copy(r, in(0, 100), out(r * 100, 100));
    const Plan own = b.finish();
    CHECK(predict_seconds(own, c) == Approx(400 * 0.25e-9));
    Plan contract = own;  // the same steps, with the executor's copy of the own block first
    contract.reads_input = false;
    CHECK(predict_seconds(contract, c) == Approx(2 * 400 * 0.25e-9));
  }
  SECTION("one CPU per rank: its local and one-sided work runs one at a time") {
    PlanBuilder b(host_args(Collective::AllGather, 3, 100, 0, 4), "t");
    b.signal(1, 0);
    b.signal(2, 0);
    b.get(0, 1, in(0, 100), out(100, 100), {b.wait(0, 1)});
    b.get(0, 2, in(0, 100), out(200, 100), {b.wait(0, 2)});
    b.copy(0, in(0, 100), out(0, 100));
    // The executor's copy of the own block (400 bytes) comes first on every
    // rank; rank 0's own Copy runs while its waits are pending (they end
    // 0.2 us after the peers' signals), then its two gets, one at a time.
    CHECK(predict_seconds(b.finish(), c) == Approx(400 * 0.25e-9 + 0.2e-6 + 2 * 400 * 0.25e-9));
  }
  SECTION("a wait whose signal is never issued never finishes") {
    PlanBuilder b(host_args(Collective::Barrier, 2, 0), "t");
    for (int r = 0; r < 2; ++r) b.signal(r, 1 - r, {b.wait(r, 1 - r)});
    CHECK(std::isinf(predict_seconds(b.finish(), c)));
  }
}

TEST_CASE("cost model: a Put costs what a Get of the same bytes does", "[one_sided][cost][put]") {
  CostParams c{1e-6, 1e-9, 0.5e-9, 0.25e-9, 0.2e-6, 3e-6, 0.125e-9, 0.5};
  // Rank 0 moves 100 floats between its Output and rank 1's `theirs`, by
  // Get (`pull`) or Put; the same signals either way.
  auto moved = [&](bool pull, Buf theirs, std::int64_t count) {
    PlanBuilder b(host_args(Collective::Broadcast, 2, 1000, 0, 4), "t");
    b.need_scratch(1, 1000);
    b.signal(1, 0);
    const Span peer{theirs, 0, count};
    const int w = b.wait(0, 1);
    const int moved_step = pull ? b.get(0, 1, peer, out(0, count), {w}) : b.put(0, 1, out(0, count), peer, {w});
    b.signal(0, 1, {moved_step});
    b.wait(1, 0);
    return predict_seconds(b.finish(), c);
  };
  for (Buf theirs : {Buf::Output, Buf::Scratch}) {
    INFO((theirs == Buf::Output ? "output" : "scratch"));
    CHECK(moved(false, theirs, 100) == Approx(moved(true, theirs, 100)));
    CHECK(moved(false, theirs, 1000) == Approx(moved(true, theirs, 1000)));
  }
  // The numbers themselves: two signals, and the copy plus the peer access.
  CHECK(moved(false, Buf::Output, 100) == Approx(2 * 0.2e-6 + 400 * 0.25e-9 + 3e-6 + 400 * 0.125e-9));
  CHECK(moved(false, Buf::Scratch, 100) == Approx(2 * 0.2e-6 + 400 * 0.25e-9 * 0.5));  // hot: in cache
}

TEST_CASE("cost model: one-sided plans never cost less for more bytes", "[one_sided][cost]") {
  for (const Algorithm* a : one_sided_algorithms()) {
    for (int n : {2, 3, 8}) {
      Plan p = a->build(host_args(a->coll, n, a->coll == Collective::Barrier ? 0 : 1000, n / 2));
      double prev = 0;
      for (std::size_t elem : {1, 2, 4, 64, 4096}) {
        p.args.elem_size = elem;
        const double t = predict_seconds(p, kSharedMemory);
        INFO(fmt::format("{} / {} nranks={} elem_size={}", collective_name(p.coll), p.algorithm, n, elem));
        CHECK(std::isfinite(t));
        CHECK(t >= prev);
        prev = t;
      }
    }
  }
}

// push does twoshot's work (Put priced as the Get it replaces) in one signal
// round fewer. On device memory (whole blocks) that is all; on host memory
// its blocks go out in chunks of at most 1 MiB, each Put right after the
// reduction that wrote it, and such a Put reads from cache: only its write
// costs. That is what makes it the choice where twoshot was.
TEST_CASE("cost model: push is twoshot less one signal round, and on host memory less its cache-hot Puts",
          "[one_sided][cost][push]") {
  for (int n : {2, 4, 8})
    for (std::int64_t bytes : {std::int64_t{16} << 20, std::int64_t{256} << 20}) {
      auto args = host_args(Collective::AllReduce, n, bytes / 4);
      auto price = [&](const char* name) {
        return predict_seconds(find_algorithm(Collective::AllReduce, name)->build(args), kSharedMemory);
      };
      const double host_push = price("push"), host_twoshot = price("twoshot");
      args.topology.device_of.clear();
      for (int r = 0; r < n; ++r) args.topology.device_of.push_back(r);  // a GPU each: whole blocks
      const double dev_push = price("push"), dev_twoshot = price("twoshot");
      INFO(fmt::format("n={} bytes={}: host push {} us, twoshot {} us; device push {} us, twoshot {} us", n, bytes,
                       host_push * 1e6, host_twoshot * 1e6, dev_push * 1e6, dev_twoshot * 1e6));
      CHECK(dev_twoshot - dev_push == Approx(kSharedMemory.signal_s).epsilon(0.01));
      // Half the copy of every byte a rank Puts (n-1 peers, 1/n of the data
      // each), less the calls of its chunks: at least a tenth of that here.
      const double hot = 0.5 * kSharedMemory.copy_s_per_byte * static_cast<double>(bytes) * (n - 1) / n;
      CHECK(host_twoshot - host_push > kSharedMemory.signal_s + 0.1 * hot);
      CHECK(host_push < dev_push);
    }
}

TEST_CASE("staged keeps its Scratch bounded, and declines shapes that would pass the bound", "[one_sided][verify]") {
  int declined = 0;
  for (Collective coll : {Collective::AllReduce, Collective::AllGather})
    for (int n : {2, 8, 32, 64})
      for (std::int64_t mib : {1, 64, 1024}) {
        const PlanArgs a = host_args(coll, n, (mib << 20) / 4);
        const Algorithm* staged = find_algorithm(coll, "staged");
        INFO(fmt::format("{} n={} {} MiB", collective_name(coll), n, mib));
        if (!staged->supports(a)) {
          ++declined;
          continue;
        }
        for (const RankPlan& rp : staged->build(a).ranks) CHECK(rp.scratch_count * 4 <= (std::int64_t{16} << 20));
      }
  CHECK(declined > 0);  // 1 GiB on 64 ranks would need 1 GiB of Scratch per rank
  CHECK(find_algorithm(Collective::AllReduce, "staged")->supports(host_args(Collective::AllReduce, 2, std::int64_t{1} << 28)));
}

TEST_CASE("choose on one host with shareable buffers: plans that use peers' buffers in place", "[one_sided][cost]") {
  // 2 ranks, mem_alloc buffers, measured: push 96 and 1135-1264 us at 4 and
  // 16 MiB, staged 200-211 and 1536-1570 (RESULTS section 9; README).
  for (std::int64_t mib : {4, 16}) {
    PlanArgs a = host_args(Collective::AllReduce, 2, (mib << 20) / 4);
    CHECK(std::string(choose(Collective::AllReduce, a, kSharedMemory)->name) == "staged");
    a.topology.mapped_buffers = true;
    CHECK(std::string(choose(Collective::AllReduce, a, kSharedMemory)->name) == "push");
  }
  // A plan that reads no peer's buffer costs the same either way.
  PlanArgs a = host_args(Collective::AllReduce, 2, (std::int64_t{16} << 20) / 4);
  const Plan staged = find_algorithm(Collective::AllReduce, "staged")->build(a);
  Plan flagged = staged;
  flagged.args.topology.mapped_buffers = true;
  CHECK(predict_seconds(flagged, kSharedMemory) == predict_seconds(staged, kSharedMemory));
}

TEST_CASE("choose on one host whose ranks share CPUs: fewer signal rounds until the data is large", "[one_sided][cost]") {
  // 8 ranks on 2 CPUs, measured: oneshot (one round of signals) 14 and 22
  // us at 4 and 16 KiB, staged (three per chunk) 21-29 and 27-31; staged
  // from 64 KiB (37-46 against 60).
  for (std::int64_t bytes : {std::int64_t{4096}, std::int64_t{16384}}) {
    PlanArgs a = host_args(Collective::AllReduce, 8, bytes / 4);
    CHECK(std::string(choose(Collective::AllReduce, a, kSharedMemory)->name) == "staged");
    a.topology.shared_cpus = true;
    CHECK(std::string(choose(Collective::AllReduce, a, kSharedMemory)->name) == "oneshot");
  }
  PlanArgs big = host_args(Collective::AllReduce, 8, 65536 / 4);
  big.topology.shared_cpus = true;
  CHECK(std::string(choose(Collective::AllReduce, big, kSharedMemory)->name) == "staged");
  // Not one host: the flag means nothing.
  PlanArgs remote = host_args(Collective::AllReduce, 8, 16384 / 4);
  remote.topology.one_host = false;
  const Plan ring = find_algorithm(Collective::AllReduce, "ring")->build(remote);
  const double plain = predict_seconds(ring, kSharedMemory);
  Plan flagged = ring;
  flagged.args.topology.shared_cpus = true;
  CHECK(predict_seconds(flagged, kSharedMemory) == plain);
}

TEST_CASE("choose on one host: fast-box messages for the smallest, staged for large data, oneshot not on many ranks",
          "[one_sided][cost]") {
  const auto small = host_args(Collective::AllReduce, 2, 2);                    // 8 bytes
  const auto mid = host_args(Collective::AllReduce, 2, (std::int64_t{4} << 20) / 4);     // 4 MiB
  const auto large8 = host_args(Collective::AllReduce, 8, (std::int64_t{128} << 20) / 4);  // 128 MiB
  // 8 bytes: one message each way through the fast boxes beats a signal
  // plus a read of the peer's Scratch.
  const Algorithm* tiny = choose(Collective::AllReduce, small, kSharedMemory);
  CHECK_FALSE(tiny->build(small).one_sided);
  CHECK(fits_fastbox(tiny->build(small)));
  // Without fast boxes (fastbox_alpha_s = 0) the same choice is oneshot.
  CostParams no_boxes = kSharedMemory;
  no_boxes.fastbox_alpha_s = 0;
  CHECK(std::string(choose(Collective::AllReduce, small, no_boxes)->name) == "oneshot");
  // 2 ranks, 4 MiB, measured: staged 0.23 ms, oneshot 0.40, push 0.63
  // (bench/RESULTS.md, section 9).
  CHECK(std::string(choose(Collective::AllReduce, mid, kSharedMemory)->name) == "staged");
  // Device memory: no Scratch, so not staged.
  PlanArgs on_gpu = mid;
  on_gpu.topology.device_of = {0, 1};
  CHECK(std::string(choose(Collective::AllReduce, on_gpu, kSharedMemory)->name) != "staged");
  // Each rank would read 7 peers' whole buffers, out of cache.
  CHECK(std::string(choose(Collective::AllReduce, large8, kSharedMemory)->name) != "oneshot");
  // Without one host the one-sided algorithms are not candidates.
  PlanArgs remote = small;
  remote.topology.one_host = false;
  CHECK_FALSE(choose(Collective::AllReduce, remote, kSharedMemory)->build(remote).one_sided);
}
