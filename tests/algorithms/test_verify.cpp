// The verifier and the cost model: every registered algorithm verified over
// group sizes 1..64 and awkward counts; hand-broken plans rejected for the
// right reason; the cost model's arithmetic and the algorithm choice.
#include <catch2/catch.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "algorithms/builder.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/plan.hpp"
#include "tests/algorithms/plan_args.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/verify.hpp"

using namespace braid::plan;

namespace {

using verify_test::make_args;
using verify_test::report_failures;
using verify_test::roots_for;

// ---- tiny reference generators, only for these tests --------------------

// AllReduce: everyone sends to rank 0, which folds the contributions in one
// at a time, then sends the result back to everyone.
Plan naive_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "naive");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  int prev = -1;
  for (int r = 1; r < n; ++r) {
    b.send(r, 0, out(0, c));
    prev = b.recv_reduce(0, r, out(0, c), {prev});
  }
  for (int r = 1; r < n; ++r) {
    b.send(0, r, out(0, c), {prev});
    b.recv(r, 0, out(0, c), {0});  // after its own send of out: they touch the same elements
  }
  return b.finish();
}

// AllGather: every rank sends its block straight to every other rank.
Plan naive_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "naive");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  for (int r = 0; r < n && c > 0; ++r)
    for (int p = 0; p < n; ++p)
      if (p != r) {
        b.send(r, p, in(0, c));
        b.recv(p, r, out(static_cast<std::int64_t>(r) * c, c));
      }
  return b.finish();
}

// Barrier: gather zero-element messages at rank 0, then release everyone.
Plan naive_barrier(const PlanArgs& args) {
  PlanBuilder b(args, "naive");
  const int n = args.nranks;
  Deps arrived;
  for (int r = 1; r < n; ++r) {
    b.send(r, 0, out(0, 0));
    arrived.push_back(b.recv(0, r, out(0, 0)));
  }
  for (int r = 1; r < n; ++r) {
    b.send(0, r, out(0, 0), arrived);
    b.recv(r, 0, out(0, 0));
  }
  return b.finish();
}

// Group sizes and the counts the brief asks for: 0, 1, fewer than the
// ranks, odd, and a large one (with 4 KiB elements as well, so algorithms
// that cut messages into ~512 KiB chunks really pipeline).
struct Case {
  std::int64_t count;
  std::size_t elem_size;
};
std::vector<Case> cases_for(int n) {
  std::vector<Case> cs;
  for (std::int64_t c : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1}, std::int64_t{2 * n + 3},
                         std::int64_t{10007}})
    cs.push_back({c, 4});
  cs.push_back({10007, 4096});
  return cs;
}


// Uneven all-to-all splits with empty blocks, one-element blocks and a
// different total per rank.
std::vector<std::vector<std::int64_t>> uneven_splits(int n, std::int64_t count) {
  std::vector<std::vector<std::int64_t>> s(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n)));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      s[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
          (i * 31 + j * 17) % 5 == 0 ? 0 : count + (i + 2 * j) % 3;
  return s;
}

// Verifies `alg` on `args`; returns an empty string or what went wrong.
std::string check_one(const Algorithm& alg, const PlanArgs& args) {
  if (alg.supports && !alg.supports(args)) return {};
  const Plan plan = alg.build(args);
  const VerifyResult v = verify(plan);
  if (v.ok) return {};
  return fmt::format("{} / {} nranks={} root={} count={} elem_size={}{}: {}", collective_name(alg.coll), alg.name,
                     args.nranks, args.root, args.count, args.elem_size, args.splits.empty() ? "" : " (uneven)",
                     v.error);
}

// A two-rank plan skeleton for the hand-broken cases.
Plan empty_plan(Collective coll, int n, std::int64_t count) {
  PlanBuilder b(make_args(coll, n, count), "broken");
  return b.finish();
}

}  // namespace

TEST_CASE("plan names and buffer sizes follow the contract", "[plan]") {
  Collective c;
  REQUIRE(parse_collective("allreduce", &c));
  CHECK(c == Collective::AllReduce);
  REQUIRE(parse_collective("reduce_scatter", &c));
  CHECK(c == Collective::ReduceScatter);
  REQUIRE(parse_collective("All_To_All", &c));
  CHECK(c == Collective::AllToAll);
  CHECK_FALSE(parse_collective("allreduce2", &c));
  CHECK_FALSE(parse_collective("", &c));
  for (int i = 0; i < kNumCollectives; ++i) {
    Collective back;
    REQUIRE(parse_collective(collective_name(static_cast<Collective>(i)), &back));
    CHECK(static_cast<int>(back) == i);
  }
  CHECK(std::string(step_kind_name(StepKind::RecvReduce)) == "recv_reduce");

  auto a = make_args(Collective::AllGather, 4, 3);
  CHECK(input_count(a, 2) == 3);
  CHECK(output_count(a, 2) == 12);
  a = make_args(Collective::Gather, 4, 3, 1);
  CHECK(output_count(a, 1) == 12);
  CHECK(output_count(a, 0) == 0);
  a = make_args(Collective::Scatter, 4, 3, 2);
  CHECK(input_count(a, 2) == 12);
  CHECK(input_count(a, 1) == 0);
  CHECK(output_count(a, 1) == 3);
  a = make_args(Collective::AllToAll, 3, 5);
  a.splits = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  CHECK(input_count(a, 1) == 15);
  CHECK(output_count(a, 1) == 2 + 5 + 8);
  a.splits = {{1, 2}};
  CHECK_THROWS_AS(input_count(a, 0), braid::Error);
  CHECK(is_reduction(Collective::ReduceScatter));
  CHECK_FALSE(is_reduction(Collective::AllGather));
}

TEST_CASE("to_string shows every step with its spans and deps", "[plan]") {
  const Plan p = naive_allreduce(make_args(Collective::AllReduce, 3, 8));
  const std::string text = to_string(p);
  CHECK(text.find("allreduce / naive") != std::string::npos);
  CHECK(text.find("rank 2") != std::string::npos);
  CHECK(text.find("recv_reduce <- 2") != std::string::npos);
  CHECK(text.find("out[0..8)") != std::string::npos);
  CHECK(text.find("after 0") != std::string::npos);
}

TEST_CASE("reference generators verify for every group size", "[verify]") {
  for (int n = 1; n <= 64; ++n) {
    for (const Case& cs : cases_for(n)) {
      using Gen = Plan (*)(const PlanArgs&);
      for (auto [coll, gen] : {std::pair<Collective, Gen>{Collective::AllReduce, naive_allreduce},
                               std::pair<Collective, Gen>{Collective::AllGather, naive_allgather},
                               std::pair<Collective, Gen>{Collective::Barrier, naive_barrier}}) {
        const VerifyResult v = verify(gen(make_args(coll, n, coll == Collective::Barrier ? 0 : cs.count)));
        INFO(fmt::format("{} n={} count={}", collective_name(coll), n, cs.count));
        CHECK(v.error == "");
        CHECK(v.ok);
      }
    }
  }
}

TEST_CASE("every registered algorithm verifies over sizes 1..64, roots and counts", "[verify][registry]") {
  int plans = 0;
  std::vector<std::string> failures;
  for (const Algorithm& alg : algorithms()) {
    for (int n = 1; n <= 64; ++n) {
      for (int root : roots_for(alg.coll, n)) {
        for (const Case& cs : cases_for(n)) {
          PlanArgs args = make_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : cs.count, root, cs.elem_size);
          if (auto e = check_one(alg, args); !e.empty()) failures.push_back(e);
          ++plans;
          if (alg.coll == Collective::AllToAll && cs.elem_size == 4) {
            args.splits = uneven_splits(n, cs.count);
            if (auto e = check_one(alg, args); !e.empty()) failures.push_back(e);
            ++plans;
          }
          if (alg.coll == Collective::Barrier) break;  // one count is enough
        }
      }
    }
  }
  INFO(fmt::format("{} registered algorithms, {} plans", algorithms().size(), plans));
  report_failures(failures);
}

// Drops the message rank r's step i sends: its send and its receive become
// empty local steps, so indices and deps stay valid.
static void drop_message(Plan& m, int r, std::size_t i) {
  auto neuter = [](Step& s) {
    s.kind = StepKind::Copy;
    s.peer = -1;
    s.src = out(0, 0);
    s.dst = out(0, 0);
  };
  const Step s = m.ranks[static_cast<std::size_t>(r)].steps[i];
  neuter(m.ranks[static_cast<std::size_t>(r)].steps[i]);
  for (Step& t : m.ranks[static_cast<std::size_t>(s.peer)].steps)
    if ((t.kind == StepKind::Recv || t.kind == StepKind::RecvReduce) && t.peer == r && t.slot == s.slot) neuter(t);
}

// Host layouts for the host-aware plans: even grids (hosts x ranks per host)
// laid out in blocks and round-robin, uneven grids, up to 64 ranks.
static std::vector<std::vector<int>> host_layouts() {
  std::vector<std::vector<int>> layouts;
  auto blocks = [](std::vector<int> sizes) {
    std::vector<int> of;
    for (std::size_t h = 0; h < sizes.size(); ++h) of.insert(of.end(), static_cast<std::size_t>(sizes[h]), static_cast<int>(h));
    return of;
  };
  for (int hosts : {1, 2, 3, 4, 8})
    for (int per : {1, 2, 3, 4, 8})
      if (hosts * per <= 64) {
        layouts.push_back(blocks(std::vector<int>(static_cast<std::size_t>(hosts), per)));
        std::vector<int> rr;  // round-robin: rank r on host r mod hosts
        for (int r = 0; r < hosts * per; ++r) rr.push_back(r % hosts);
        if (hosts > 1 && per > 1) layouts.push_back(rr);
      }
  layouts.push_back(blocks({16, 16, 16, 16}));
  layouts.push_back(blocks({8, 8, 8, 8, 8, 8, 8, 8}));
  for (std::vector<int> sizes : std::vector<std::vector<int>>{{3, 1}, {1, 4, 2}, {5, 3, 8}, {2, 2, 1, 7}, {7, 1, 1, 1, 2}, {30, 34}})
    layouts.push_back(blocks(sizes));
  layouts.push_back({1, 0, 2, 1, 1, 0, 2});  // hosts named out of order, uneven
  return layouts;
}

TEST_CASE("host-aware algorithms verify on host grids up to 64 ranks, uneven and interleaved ones included",
          "[verify][hosts]") {
  int plans = 0;
  std::vector<std::string> failures;
  for (const Algorithm& alg : algorithms()) {
    if (!std::string(alg.name).starts_with("hierarchical")) continue;
    for (const std::vector<int>& layout : host_layouts()) {
      const int n = static_cast<int>(layout.size());
      for (int root : roots_for(alg.coll, n)) {
        for (const Case& cs : cases_for(n)) {
          PlanArgs args = make_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : cs.count, root, cs.elem_size);
          args.topology.host_of = layout;
          if (auto e = check_one(alg, args); !e.empty())
            failures.push_back(fmt::format("hosts {}: {}", fmt::join(layout, ","), e));
          ++plans;
          if (alg.coll == Collective::Barrier) break;
        }
      }
    }
  }
  INFO(fmt::format("{} hierarchical plans", plans));
  CHECK(plans > 1000);
  report_failures(failures);
  // And the verifier sees what they do across hosts: dropping any one
  // message of a 3-host uneven layout loses data (or, for the barrier,
  // knowledge).
  int mutants = 0;
  for (const Algorithm& alg : algorithms()) {
    if (!std::string(alg.name).starts_with("hierarchical")) continue;
    PlanArgs args = make_args(alg.coll, 6, alg.coll == Collective::Barrier ? 0 : 17, 4);
    args.topology.host_of = {0, 0, 1, 2, 2, 2};
    const Plan plan = alg.build(args);
    REQUIRE(verify(plan).ok);
    for (int r = 0; r < 6; ++r)
      for (std::size_t i = 0; i < plan.ranks[static_cast<std::size_t>(r)].steps.size(); ++i) {
        const Step& s = plan.ranks[static_cast<std::size_t>(r)].steps[i];
        if (s.kind != StepKind::Send || (s.src.count == 0 && alg.coll != Collective::Barrier)) continue;
        Plan m = plan;
        drop_message(m, r, i);
        INFO(fmt::format("{} / hierarchical: dropped rank {} step {}", collective_name(alg.coll), r, i));
        CHECK_FALSE(verify(m).ok);
        ++mutants;
      }
  }
  CHECK(mutants > 100);
}

TEST_CASE("hierarchical_hd crosses the bytes hierarchical does, in 2 log2(H) rounds instead of 2(H-1)", "[verify][hosts]") {
  PlanArgs a = make_args(Collective::AllReduce, 16, 1 << 16, 0, 4);
  for (int r = 0; r < 16; ++r) a.topology.host_of.push_back(r / 2);  // 8 hosts x 2 ranks
  auto crossing = [&](const char* name, std::int64_t* bytes, int* most_messages) {
    const Plan p = find_algorithm(Collective::AllReduce, name)->build(a);
    REQUIRE(verify(p).ok);
    *bytes = 0;
    *most_messages = 0;
    for (int r = 0; r < 16; ++r) {
      int messages = 0;
      for (const Step& s : p.ranks[static_cast<std::size_t>(r)].steps)
        if (s.kind == StepKind::Send && s.peer / 2 != r / 2) {
          *bytes += s.src.count * 4;
          ++messages;
        }
      *most_messages = std::max(*most_messages, messages);
    }
  };
  std::int64_t ring_bytes = 0, hd_bytes = 0;
  int ring_messages = 0, hd_messages = 0;
  crossing("hierarchical", &ring_bytes, &ring_messages);
  crossing("hierarchical_hd", &hd_bytes, &hd_messages);
  CHECK(hd_bytes == ring_bytes);
  CHECK(ring_bytes == 8 * (2 * 7 * (std::int64_t{1} << 18) / 8));  // 2(H-1)/H of S per host
  CHECK(ring_messages == 2 * 7);                                     // per owner, one slice
  CHECK(hd_messages == 2 * 3);
}

TEST_CASE("hierarchical all_reduce crosses hosts with S bytes per host for two hosts, a flat ring with 2S",
          "[verify][hosts]") {
  // Counts what leaves each host: the property the two-level plan exists for.
  PlanArgs a = make_args(Collective::AllReduce, 8, 1 << 20, 0, 4);
  a.topology.host_of = {0, 0, 0, 0, 1, 1, 1, 1};
  auto crossing = [&](const Plan& p) {
    std::vector<std::int64_t> per_host(2, 0);
    for (int r = 0; r < 8; ++r)
      for (const Step& s : p.ranks[static_cast<std::size_t>(r)].steps)
        if (s.kind == StepKind::Send && a.topology.host_of[static_cast<std::size_t>(s.peer)] != a.topology.host_of[static_cast<std::size_t>(r)])
          per_host[static_cast<std::size_t>(a.topology.host_of[static_cast<std::size_t>(r)])] += s.src.count * 4;
    return per_host;
  };
  const std::int64_t S = (1 << 20) * 4;
  const auto hier = crossing(find_algorithm(Collective::AllReduce, "hierarchical")->build(a));
  CHECK(hier[0] == S);
  CHECK(hier[1] == S);
  // And every local rank carries its share: each sends S/4 across.
  const Plan p = find_algorithm(Collective::AllReduce, "hierarchical")->build(a);
  for (int r = 0; r < 8; ++r) {
    std::int64_t out_bytes = 0;
    for (const Step& s : p.ranks[static_cast<std::size_t>(r)].steps)
      if (s.kind == StepKind::Send && a.topology.host_of[static_cast<std::size_t>(s.peer)] != a.topology.host_of[static_cast<std::size_t>(r)])
        out_bytes += s.src.count * 4;
    CHECK(out_bytes == S / 4);
  }
  const auto ring = crossing(find_algorithm(Collective::AllReduce, "ring")->build(a));
  CHECK(ring[0] == S * 7 / 4);  // the flat ring: 2(n-1)/n of S leaves each host, 1.75 S at 8 ranks
  // Offered only where the group spans hosts.
  CHECK(find_algorithm(Collective::AllReduce, "hierarchical")->offered(a));
  a.topology.host_of = {0, 0, 0, 0, 0, 0, 0, 0};
  CHECK_FALSE(find_algorithm(Collective::AllReduce, "hierarchical")->offered(a));
  a.topology.host_of.clear();
  CHECK_FALSE(find_algorithm(Collective::AllReduce, "hierarchical")->offered(a));
}

// Mutation check on the real algorithms: dropping any one message (its send
// and its receive become empty local steps, so indices and deps stay valid)
// must lose data or, for a barrier, knowledge, and the verifier must say so.
TEST_CASE("dropping any one message of a registered algorithm is caught", "[verify][registry]") {
  int mutants = 0;
  for (const Algorithm& alg : algorithms()) {
    for (int n : {5, 8}) {
      const auto args = make_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : 2 * n + 3, 1);
      if (alg.supports && !alg.supports(args)) continue;
      const Plan plan = alg.build(args);
      REQUIRE(verify(plan).ok);
      for (int r = 0; r < n; ++r) {
        const auto& steps = plan.ranks[static_cast<std::size_t>(r)].steps;
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const Step& s = steps[i];
          if (s.kind != StepKind::Send || (s.src.count == 0 && alg.coll != Collective::Barrier)) continue;
          Plan m = plan;
          drop_message(m, r, i);
          INFO(fmt::format("{} / {} nranks={}: dropped the message rank {} step {} sends", collective_name(alg.coll),
                           alg.name, n, r, i));
          CHECK_FALSE(verify(m).ok);
          ++mutants;
        }
      }
    }
  }
  CHECK(mutants >= (algorithms().empty() ? 0 : 1));
}

TEST_CASE("registry lookups", "[registry]") {
  std::set<std::pair<int, std::string>> seen;
  for (const Algorithm& a : algorithms()) {
    INFO(a.name);
    CHECK(seen.insert({static_cast<int>(a.coll), a.name}).second);  // (collective, name) unique
    CHECK(find_algorithm(a.coll, a.name) == &a);
    const auto names = algorithm_names(a.coll);
    CHECK(std::find(names.begin(), names.end(), a.name) != names.end());
  }
  CHECK(find_algorithm(Collective::AllReduce, "no_such_algorithm") == nullptr);
}

// ---- the verifier catches broken plans ------------------------------------

namespace {
std::string rejection(const Plan& p) {
  const VerifyResult v = verify(p);
  CHECK_FALSE(v.ok);
  return v.error;
}
}  // namespace

TEST_CASE("verifier rejects a send nobody receives", "[verify][negative]") {
  PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
  b.send(0, 1, out(0, 4));
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("never receives"));
}

TEST_CASE("verifier rejects a receive with no matching send", "[verify][negative]") {
  PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
  b.recv(0, 1, out(0, 4));
  CHECK_THAT(rejection(b.finish()), Catch::Contains("no send from rank 1"));
}

TEST_CASE("verifier rejects a contribution counted twice", "[verify][negative]") {
  // Rank 1's data reaches rank 0 twice: once directly, once through rank 2.
  PlanBuilder b(make_args(Collective::AllReduce, 3, 4), "broken");
  b.send(1, 0, out(0, 4));
  b.send(1, 2, out(0, 4));
  const int r2 = b.recv_reduce(2, 1, out(0, 4));
  b.send(2, 0, out(0, 4), {r2});
  const int a = b.recv_reduce(0, 1, out(0, 4));
  b.recv_reduce(0, 2, out(0, 4), {a});
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("twice"));
  CHECK_THAT(e, Catch::Contains("{1}"));
}

TEST_CASE("verifier rejects combining values for different elements", "[verify][negative]") {
  PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
  b.send(1, 0, out(0, 2));
  b.recv_reduce(0, 1, out(2, 2));  // rank 1's elements 0..2 into elements 2..4
  CHECK_THAT(rejection(b.finish()), Catch::Contains("different elements"));
}

TEST_CASE("verifier rejects a race between two unordered writes", "[verify][negative]") {
  // Correct data, but rank 0 receives two messages into out[0..4) with no
  // order between them: on a real transport they may land at the same time.
  PlanBuilder b(make_args(Collective::Broadcast, 3, 4), "broken");
  b.send(0, 1, out(0, 4));
  b.send(0, 2, out(0, 4));
  b.send(1, 2, out(0, 4), {b.recv(1, 0, out(0, 4))});
  b.recv(2, 0, out(0, 4));
  b.recv(2, 1, out(0, 4));
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("race on rank 2"));
  CHECK_THAT(e, Catch::Contains("out[0..4)"));
}

TEST_CASE("verifier rejects a send racing a later write of its source", "[verify][negative]") {
  PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
  b.send(0, 1, out(0, 4));
  b.recv_reduce(0, 1, out(0, 4));  // may overwrite out while it is being sent
  b.send(1, 0, out(0, 4));
  b.recv_reduce(1, 0, out(0, 4), {0});
  CHECK_THAT(rejection(b.finish()), Catch::Contains("race on rank 0"));
}

TEST_CASE("verifier rejects forwarding data before it has arrived", "[verify][negative]") {
  // Rank 1 relays rank 0's data to rank 2 but forgot the dependency on its
  // receive: the send may read out[1..3) while the receive is writing it.
  PlanBuilder b(make_args(Collective::Broadcast, 3, 4), "broken");
  b.send(0, 1, out(0, 4));
  b.recv(1, 0, out(0, 4));
  b.send(1, 2, out(1, 2));
  b.recv(2, 1, out(1, 2));
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("race on rank 1"));
  CHECK_THAT(e, Catch::Contains("out[1..3)"));
}

TEST_CASE("a broadcast whose root reads Input verifies both ways, and only if it fills Output", "[verify]") {
  // root_reads_input (every broadcast message plan): the root sends from
  // Input and copies it into Output last. Out of place the copy is what
  // fills the root's Output; in place it is the identity, which no runtime
  // performs, so it races with nothing.
  const Plan p = find_algorithm(Collective::Broadcast, "tree")->build(make_args(Collective::Broadcast, 3, 4));
  REQUIRE(p.reads_input);
  for (const Step& s : p.ranks[0].steps)
    if (s.kind == StepKind::Send) CHECK(s.src.buf == Buf::Input);
  CHECK(p.ranks[0].steps.back().kind == StepKind::Copy);
  CHECK(verify(p).ok);

  SECTION("the root sends from Output, unwritten out of place") {
    PlanBuilder b(make_args(Collective::Broadcast, 2, 4), "broken");
    b.reads_input();
    b.send(0, 1, out(0, 4));
    b.recv(1, 0, out(0, 4));
    b.copy(0, in(0, 4), out(0, 4));  // may overwrite out while it is being sent
    CHECK_THAT(rejection(b.finish()), Catch::Contains("race on rank 0"));
  }
  SECTION("the root's Output is never filled") {
    PlanBuilder b(make_args(Collective::Broadcast, 2, 4), "broken");
    b.reads_input();
    b.send(0, 1, in(0, 4));
    b.recv(1, 0, out(0, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("rank 0 out[0..4) holds nothing"));
  }
}

TEST_CASE("a reduction that combines Input with what arrives copies nothing first, and verifies both ways",
          "[verify]") {
  // These message plans read the contribution from Input (RecvReduce, or
  // recursive doubling's Reduce, with an operand): out of place the executor
  // then copies nothing into Output before the plan (contract_copy), which at
  // 16 MiB over TCP cost a third of a 2-rank all_reduce.
  const std::pair<Collective, const char*> plans[] = {
      {Collective::AllReduce, "recursive_doubling"},
      {Collective::AllReduce, "ring"},         {Collective::AllReduce, "halving_doubling"},
      {Collective::AllReduce, "hierarchical"}, {Collective::AllReduce, "hierarchical_hd"},
      {Collective::AllReduce, "tree"},         {Collective::AllReduce, "double_binary_tree"},
      {Collective::Reduce, "ring"},            {Collective::Reduce, "tree"},
      {Collective::Reduce, "double_binary_tree"}, {Collective::Reduce, "hierarchical"},
      {Collective::Reduce, "hierarchical_tree"}};
  for (const auto& [coll, name] : plans)
    for (int n : {2, 3, 4}) {
      INFO(collective_name(coll) << " / " << name << " on " << n << " ranks");
      const Plan p = find_algorithm(coll, name)->build(make_args(coll, n, 10007));
      CHECK(p.reads_input);
      bool combines_input = false;
      for (const RankPlan& rp : p.ranks)
        for (const Step& s : rp.steps) {
          CHECK(s.kind != StepKind::Copy);  // one host: every block meets a peer's first
          if ((s.kind == StepKind::RecvReduce || s.kind == StepKind::Reduce) && s.acc.buf == Buf::Input &&
              s.acc.count > 0)
            combines_input = true;
        }
      CHECK(combines_input);
      CHECK(verify(p).ok);
    }

  // Halving-doubling on 2 ranks by hand: rank r keeps half r, combining its
  // Input with the peer's copy (`operand` for rank 0), then hands it over.
  auto two_ranks = [](Span operand, bool reduce_in_output) {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "by hand");
    b.reads_input();
    for (int r = 0; r < 2; ++r) {
      const Span keep = out(2 * r, 2), give = out(2 - 2 * r, 2);
      const int sent = b.send(r, 1 - r, in(give.offset, 2));
      const int got = reduce_in_output ? b.recv_reduce(r, 1 - r, keep)
                                       : b.recv_reduce_with(r, 1 - r, r == 0 ? operand : in(keep.offset, 2), keep);
      b.send(r, 1 - r, keep, {got});
      b.recv(r, 1 - r, give, {sent});
    }
    return b.finish();
  };
  CHECK(verify(two_ranks(in(0, 2), false)).ok);
  CHECK_THAT(rejection(two_ranks(in(0, 1), false)), Catch::Contains("operand has 1 elements but destination 2"));
  CHECK_THAT(rejection(two_ranks(out(1, 2), false)), Catch::Contains("operand and destination overlap"));
  CHECK_THAT(rejection(two_ranks(in(2, 2), false)), Catch::Contains("values for different elements"));
  // Without the operand the reduction reads Output, which nothing wrote.
  CHECK_THAT(rejection(two_ranks({}, true)), Catch::Contains("which nothing wrote"));

  // A local Reduce with an operand, as recursive doubling's first round has:
  // out = in op what came into Scratch, written once the send of in is
  // through (in place, in is out).
  auto exchange = [](Span operand, bool after_send) {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "by hand");
    b.reads_input();
    for (int r = 0; r < 2; ++r) {
      b.need_scratch(r, 4);
      const int sent = b.send(r, 1 - r, in(0, 4));
      const int got = b.recv(r, 1 - r, scratch(0, 4));
      b.reduce_with(r, scratch(0, 4), r == 0 ? operand : in(0, 4), out(0, 4),
                    after_send ? Deps{sent, got} : Deps{got});
    }
    return b.finish();
  };
  CHECK(verify(exchange(in(0, 4), true)).ok);
  CHECK_THAT(rejection(exchange(in(0, 3), true)), Catch::Contains("operand has 3 elements but destination 4"));
  // Before its send is through, the reduction writes what the send reads in place.
  CHECK_THAT(rejection(exchange(in(0, 4), false)), Catch::Contains("race on rank 0"));
}

TEST_CASE("verifier rejects reading scratch nobody wrote", "[verify][negative]") {
  PlanBuilder b(make_args(Collective::Broadcast, 2, 4), "broken");
  b.need_scratch(0, 4);
  b.send(0, 1, scratch(0, 4));
  b.recv(1, 0, out(0, 4));
  CHECK_THAT(rejection(b.finish()), Catch::Contains("scratch[0..4) before anything wrote it"));
}

TEST_CASE("verifier rejects a deadlock cycle", "[verify][negative]") {
  // Each rank first waits for the other's message, then sends its own.
  PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
  b.need_scratch(0, 4);
  b.need_scratch(1, 4);
  for (int r = 0; r < 2; ++r) {
    const int got = b.recv(r, 1 - r, scratch(0, 4));
    b.send(r, 1 - r, out(0, 4), {got});
    b.reduce(r, scratch(0, 4), out(0, 4), {got, got + 1});
  }
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("deadlock"));
  CHECK_THAT(e, Catch::Contains("rank 0 step 0"));
}

TEST_CASE("verifier rejects exchanges that only work with unbounded buffering", "[verify][negative]") {
  // Both ranks send, then receive only after their send completed: fine if
  // sends are buffered, a deadlock once messages exceed the socket buffers.
  PlanBuilder b(make_args(Collective::AllGather, 2, 4), "broken");
  for (int r = 0; r < 2; ++r) b.recv(r, 1 - r, out((1 - r) * 4, 4), {b.send(r, 1 - r, in(0, 4))});
  CHECK_THAT(rejection(b.finish()), Catch::Contains("deadlock"));
}

TEST_CASE("verifier rejects a wrong final block", "[verify][negative]") {
  // All-gather where rank 2's block lands in slot 1 on rank 0.
  Plan p = naive_allgather(make_args(Collective::AllGather, 3, 2));
  for (Step& s : p.ranks[0].steps)
    if (s.kind == StepKind::Recv && s.peer == 2) s.dst.offset = 2;
    else if (s.kind == StepKind::Recv && s.peer == 1) s.dst.offset = 4;
  const std::string e = rejection(p);
  CHECK_THAT(e, Catch::Contains("wrong result: rank 0 out[2..4) holds rank 2's"));
  CHECK_THAT(e, Catch::Contains("expected rank 1's"));
}

TEST_CASE("verifier rejects a missing contribution", "[verify][negative]") {
  Plan p = naive_allreduce(make_args(Collective::AllReduce, 3, 5));
  // Drop rank 2's contribution: rank 0's first receive from rank 2 and its send.
  auto& r0 = p.ranks[0].steps;
  auto& r2 = p.ranks[2].steps;
  for (Step& s : r0)
    if (s.kind == StepKind::RecvReduce && s.peer == 2) s.kind = StepKind::Copy, s.src = out(0, 0), s.dst = out(0, 0);
  r2.erase(r2.begin());           // its send to rank 0
  for (Step& s : r2) s.deps.clear();
  const std::string e = rejection(p);
  CHECK_THAT(e, Catch::Contains("ranks {0-1} combined"));
  CHECK_THAT(e, Catch::Contains("expected ranks {0-2} combined"));
}

TEST_CASE("verifier rejects structural mistakes", "[verify][negative]") {
  SECTION("span past the end of the buffer") {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
    b.send(0, 1, out(2, 4));
    b.recv(1, 0, out(0, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("outside the buffer"));
  }
  SECTION("writing the input") {
    PlanBuilder b(make_args(Collective::AllGather, 2, 4), "broken");
    b.copy(0, out(0, 4), in(0, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("read-only input"));
  }
  SECTION("sending to itself") {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
    b.send(0, 0, out(0, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("itself"));
  }
  SECTION("a peer outside the group") {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
    b.send(0, 1, out(0, 4));
    b.recv(1, 0, out(0, 4));
    Plan p = b.finish();
    p.ranks[0].steps[0].peer = 5;
    CHECK_THAT(rejection(p), Catch::Contains("peer 5"));
  }
  SECTION("a dependency on a later step") {
    Plan p = naive_allreduce(make_args(Collective::AllReduce, 2, 4));
    p.ranks[0].steps[0].deps.push_back(1);
    CHECK_THAT(rejection(p), Catch::Contains("earlier steps"));
  }
  SECTION("send and receive counts differ") {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "broken");
    b.send(0, 1, out(0, 4));
    b.recv(1, 0, out(0, 3));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("sends 4 elements"));
  }
  SECTION("a reduction in a data-movement collective") {
    PlanBuilder b(make_args(Collective::AllGather, 2, 4), "broken");
    b.send(1, 0, in(0, 4));
    b.recv_reduce(0, 1, out(4, 4));
    CHECK_THAT(rejection(b.finish()), Catch::Contains("only moves data"));
  }
  SECTION("the wrong number of rank plans") {
    Plan p = empty_plan(Collective::AllReduce, 3, 4);
    p.ranks.pop_back();
    CHECK_THAT(rejection(p), Catch::Contains("2 rank plans"));
  }
}

TEST_CASE("verifier rejects a barrier where a rank can leave early", "[verify][negative]") {
  // Rank 0 hears from everyone, but releases only rank 1: rank 2 never
  // learns that the others arrived.
  PlanBuilder b(make_args(Collective::Barrier, 3, 0), "broken");
  Deps arrived;
  for (int r = 1; r < 3; ++r) {
    b.send(r, 0, out(0, 0));
    arrived.push_back(b.recv(0, r, out(0, 0)));
  }
  b.send(0, 1, out(0, 0), arrived);
  b.recv(1, 0, out(0, 0));
  const std::string e = rejection(b.finish());
  CHECK_THAT(e, Catch::Contains("barrier: rank 2 can finish before ranks {0-1}"));
}

// ---- cost model ----------------------------------------------------------

// A 2-rank all-reduce of 100 floats as one exchange: each rank sends its
// Output, receives the peer's into Scratch and reduces it in.
static Plan exchange_plan() {
  PlanBuilder b(make_args(Collective::AllReduce, 2, 100, 0, 4), "t");
  for (int r = 0; r < 2; ++r) {
    b.need_scratch(r, 100);
    b.send(r, 1 - r, out(0, 100));
    const int got = b.recv(r, 1 - r, scratch(0, 100));
    b.reduce(r, scratch(0, 100), out(0, 100), {0, got});
  }
  return b.finish();
}

TEST_CASE("cost model arithmetic on tiny plans", "[cost]") {
  const CostParams c{1e-6, 1e-9, 0.5e-9, 0.25e-9};
  SECTION("one message: alpha + beta * bytes") {
    PlanBuilder b(make_args(Collective::Broadcast, 2, 100, 0, 4), "t");
    b.send(0, 1, out(0, 100));
    b.recv(1, 0, out(0, 100));
    CHECK(predict_seconds(b.finish(), c) == Approx(1e-6 + 400e-9));
  }
  SECTION("one send port: two messages from one rank serialise") {
    PlanBuilder b(make_args(Collective::Broadcast, 3, 100, 0, 4), "t");
    for (int p = 1; p < 3; ++p) {
      b.send(0, p, out(0, 100));
      b.recv(p, 0, out(0, 100));
    }
    CHECK(predict_seconds(b.finish(), c) == Approx(2 * (1e-6 + 400e-9)));
  }
  SECTION("full duplex: an exchange costs one message, and a reduce adds gamma") {
    // After the executor's copy of the contribution into Output (400 bytes).
    CHECK(predict_seconds(exchange_plan(), c) == Approx(100e-9 + 1e-6 + 400e-9 + 200e-9));
  }
  SECTION("a deadlocked plan never finishes") {
    PlanBuilder b(make_args(Collective::AllReduce, 2, 4), "t");
    for (int r = 0; r < 2; ++r) b.send(r, 1 - r, out(0, 4), {b.recv(r, 1 - r, out(0, 4))});
    CHECK(std::isinf(predict_seconds(b.finish(), c)));
  }
}

TEST_CASE("cost model: the ends' own time, eager messages, and calls back to back", "[cost]") {
  // alpha 10 us, 1 ns a byte; where given, the ends are through with a
  // message after 2 us of it (send_share 0.2) and messages up to 1 KiB
  // leave eagerly.
  CostParams plain{10e-6, 1e-9, 0.5e-9, 0.25e-9};
  CostParams logp = plain;
  logp.send_share = 0.2;
  logp.eager_bytes = 1024;
  auto star = [] {  // rank 0 sends 400 bytes to ranks 1 and 2, one after the other
    PlanBuilder b(make_args(Collective::Broadcast, 3, 100, 0, 4), "t");
    for (int p = 1; p < 3; ++p) {
      b.send(0, p, out(0, 100));
      b.recv(p, 0, out(0, 100));
    }
    return b.finish();
  };
  SECTION("a sender is free for its next message once through with this one, not once it arrives") {
    CHECK(predict_seconds(star(), plain) == Approx(2 * (10e-6 + 400e-9)));
    CHECK(predict_seconds(star(), logp) == Approx(2e-6 + 400e-9 + 10e-6 + 400e-9));
  }
  auto late_recv = [] {  // rank 1 posts its receive after copying 2 MiB (0.52 ms at 0.25 ns a byte)
    PlanBuilder b(make_args(Collective::Broadcast, 2, (1 << 20) + 2, 0, 4), "t");
    b.send(0, 1, out(0, 2));
    const int busy = b.copy(1, out(2, 1 << 19), out((1 << 19) + 2, 1 << 19));
    b.recv(1, 0, out(0, 2), {busy});
    return b.finish();
  };
  SECTION("an eager message waits at the receiver; a rendezvous one leaves when the receive is posted") {
    const double copy = 0.25e-9 * 4 * (1 << 19);
    CHECK(predict_seconds(late_recv(), plain) == Approx(copy + 10e-6 + 8e-9));
    CHECK(predict_seconds(late_recv(), logp) == Approx(copy));
  }
  auto pair = [] {  // a 2-rank broadcast of 8 bytes
    PlanBuilder b(make_args(Collective::Broadcast, 2, 2, 0, 4), "t");
    b.send(0, 1, out(0, 2));
    b.recv(1, 0, out(0, 2));
    return b.finish();
  };
  SECTION("calls back to back: the root runs ahead where messages are eager and its own time is short") {
    const LinkCosts l{logp, logp};
    CHECK(predict_seconds_per_call(pair(), l, 1) == Approx(10e-6 + 8e-9));
    // (calls - 1) x (0.2 alpha + beta b) + alpha + beta b, over the calls.
    CHECK(predict_seconds_per_call(pair(), l, 100) == Approx((99 * (2e-6 + 8e-9) + 10e-6 + 8e-9) / 100));
    // Rendezvous, the port held until arrival: no overlap between calls.
    CHECK(predict_seconds_per_call(pair(), LinkCosts{plain, plain}, 100) == Approx(10e-6 + 8e-9));
  }
  SECTION("a sender's gap longer than the latency paces the calls, not the latency") {
    // The init probe's gap between namespaces of one machine is longer
    // than its one-way latency (6.7 us against 5.8): send_share 1.2.
    CostParams slow_sender = logp;
    slow_sender.send_share = 1.2;
    const LinkCosts l{slow_sender, slow_sender};
    CHECK(predict_seconds_per_call(pair(), l, 1) == Approx(12e-6 + 8e-9));
    CHECK(predict_seconds_per_call(pair(), l, 100) == Approx(12e-6 + 8e-9));
  }
  SECTION("each later call starts with the executor's copy into Output, after the rank's previous call") {
    // Out of place, each call first copies the 400-byte contribution (100
    // ns at 0.25 ns a byte).
    const Plan p = exchange_plan();
    const double one = 100e-9 + 10e-6 + 400e-9 + 200e-9;
    CHECK(predict_seconds_per_call(p, LinkCosts{plain, plain}, 1) == Approx(one));
    CHECK(predict_seconds_per_call(p, LinkCosts{plain, plain}, 4) == Approx(one));
    const Plan four = back_to_back(p, 4, 100);
    CHECK(four.ranks[0].steps.size() == 4 * p.ranks[0].steps.size() + 3);
    CHECK_THROWS_WITH(back_to_back(p, 0, 100), Catch::Contains("expected at least 1"));
  }
}

TEST_CASE("cost model: a call's own cost, and fast boxes priced from the line exchange", "[cost]") {
  SECTION("a call's own cost is added once per call, one call or many back to back") {
    CostParams c{1e-6, 1e-9, 0.5e-9, 0.25e-9};
    const Plan p = exchange_plan();
    const double plain = predict_seconds(p, c);
    c.call_s = 0.3e-6;
    CHECK(predict_seconds(p, c) == Approx(plain + 0.3e-6));
    CHECK(predict_seconds_per_call(p, LinkCosts{c, c}, 4) == Approx(plain + 0.3e-6));
    // The named costs carry it; it moves no choice (the same for every plan).
    CHECK(kSharedMemory.call_s == kCallS);
    CHECK(kTcpLoopback.call_s == kCallS);
  }
  SECTION("the fast boxes follow a cache line's round trip; other costs do not") {
    // The default is the host's usual phase; its slow phase (0.25 us a
    // round trip) prices a message 0.3 us and a byte 0.25 ns.
    const CostParams usual = with_line_exchange(kSharedMemory, kLineExchangeS);
    CHECK(usual.fastbox_alpha_s == Approx(kSharedMemory.fastbox_alpha_s));
    CHECK(usual.fastbox_beta_s_per_byte == Approx(kSharedMemory.fastbox_beta_s_per_byte));
    const CostParams slow = with_line_exchange(kSharedMemory, 0.25e-6);
    CHECK(slow.fastbox_alpha_s == Approx(0.30e-6));
    CHECK(slow.fastbox_beta_s_per_byte == Approx(0.25e-9));
    CHECK(slow.alpha_s == kSharedMemory.alpha_s);
    CHECK(slow.copy_s_per_byte == kSharedMemory.copy_s_per_byte);
    // No fast boxes (TCP), or no figure: unchanged.
    CHECK(with_line_exchange(kTcpLoopback, 0.25e-6).fastbox_alpha_s == 0.0);
    CHECK(with_line_exchange(kSharedMemory, 0.0).fastbox_alpha_s == kSharedMemory.fastbox_alpha_s);
    // A 2-rank all_reduce of 8 bytes through the fast boxes, one exchange:
    // 0.2 us dearer in the slow phase, as measured (0.14-0.18 against
    // 0.33-0.38, bench/RESULTS.md section 49).
    PlanArgs a = make_args(Collective::AllReduce, 2, 2);
    a.topology.one_host = true;
    const Plan p = find_algorithm(Collective::AllReduce, "recursive_doubling")->build(a);
    REQUIRE(fits_fastbox(p));
    const double fast = predict_seconds(p, kSharedMemory), dear = predict_seconds(p, slow);
    CHECK(dear - fast == Approx(0.2e-6).margin(0.01e-6));
    CHECK(fast > 0.14e-6);
    CHECK(fast < 0.18e-6);
  }
}

TEST_CASE("cost model: TCP over loopback follows the line exchange, and its protocol costs", "[cost]") {
  // A 2-rank all_reduce over TCP of `count` floats by recursive_doubling:
  // one exchange of the whole vector.
  auto exchange = [](std::int64_t count) {
    return find_algorithm(Collective::AllReduce, "recursive_doubling")->build(make_args(Collective::AllReduce, 2, count));
  };
  SECTION("the default is the usual phase; the slow one prices messages and bytes dearer") {
    const CostParams usual = with_line_exchange(kTcpLoopback, kLineExchangeS);
    CHECK(usual.alpha_s == Approx(kTcpLoopback.alpha_s));
    CHECK(usual.beta_s_per_byte == Approx(kTcpLoopback.beta_s_per_byte));
    const CostParams slow = with_line_exchange(kTcpLoopback, 0.25e-6);
    // Measured (bench/RESULTS.md section 50): 8 bytes 5.8-6.3 us in the
    // usual phase, 8.1-8.7 in the slow one; 32 KiB 8.8-9.7 and 12.7-13.0.
    const double u8 = predict_seconds(exchange(2), kTcpLoopback), s8 = predict_seconds(exchange(2), slow);
    CHECK(u8 > 5.8e-6);
    CHECK(u8 < 6.3e-6);
    CHECK(s8 > 8.1e-6);
    CHECK(s8 < 8.7e-6);
    // (Its reduction runs in cache, as braid-sim --cache-mib prices it.)
    const double llc = 32.0 * 1024 * 1024;
    const double u32k = predict_seconds(exchange(8192), with_caches(kTcpLoopback, llc, kLineExchangeS));
    const double s32k = predict_seconds(exchange(8192), with_caches(slow, llc, 0.25e-6));
    CHECK(u32k > 8.0e-6);
    CHECK(u32k < 10.0e-6);
    CHECK(s32k > 11.5e-6);
    CHECK(s32k < 13.5e-6);
    // Shared memory's messages are not TCP's: they keep their figures.
    CHECK(with_line_exchange(kSharedMemory, 0.25e-6).alpha_s == kSharedMemory.alpha_s);
  }
  SECTION("a message beyond the eager limit waits for RTS and CTS; each loopback segment past the first costs") {
    const CostParams& c = kTcpLoopback;
    CHECK(protocol_s(c, 8) == 0.0);
    CHECK(protocol_s(c, kLoopbackSegmentBytes) == 0.0);
    CHECK(protocol_s(c, kLoopbackSegmentBytes + 1) == Approx(kLoopbackSegmentS));  // 64 KiB: eager, two segments
    CHECK(protocol_s(c, 65536) == Approx(kLoopbackSegmentS));
    CHECK(protocol_s(c, 131072) == Approx(2 * c.alpha_s + 2 * kLoopbackSegmentS));  // rendezvous, three segments
    // An exchange of 65,428 bytes against 65,436: 11.2-13.1 us and 14.8-18.8.
    const double one = predict_seconds(exchange(16357), c), two = predict_seconds(exchange(16359), c);
    CHECK(two - one == Approx(kLoopbackSegmentS).margin(0.1e-6));
    // A link measured between hosts: its rate has its segments' costs in
    // it, and its handshake is not priced (the grid's choices were
    // measured without it); with a latency alone, the handshake is two of it.
    CHECK(protocol_s(with_link(c, 12e-6, 1e-9), 1 << 20) == 0.0);
    CHECK(protocol_s(with_link(c, 12e-6, 0.0), 1 << 20) == Approx(24e-6 + 16 * kLoopbackSegmentS));
    CHECK(protocol_s(kSharedMemory, 1 << 20) == 0.0);
  }
  SECTION("2 MiB by ring, two exchanges of 1 MiB: the per-byte rate, the handshakes and 32 segments") {
    // Measured 341-385 us in the usual phase, 469 in the slow one.
    const Plan ring = find_algorithm(Collective::AllReduce, "ring")->build(make_args(Collective::AllReduce, 2, 1 << 19));
    const double usual = predict_seconds(ring, kTcpLoopback);
    const double slow = predict_seconds(ring, with_line_exchange(kTcpLoopback, 0.25e-6));
    CHECK(usual > 340e-6);
    CHECK(usual < 430e-6);
    CHECK(slow > 440e-6);
    CHECK(slow < 560e-6);
  }
}

TEST_CASE("cost model: where the bytes are (a host's last-level cache)", "[cost]") {
  const double llc = 32.0 * 1024 * 1024;
  auto plan_of = [](Collective c, const char* algo, int n, std::int64_t count, bool one_host) {
    PlanArgs a = make_args(c, n, count);
    a.topology.one_host = one_host;
    return find_algorithm(c, algo)->build(a);
  };
  SECTION("with_caches sets the terms; without a line exchange, the usual one") {
    const CostParams c = with_caches(kSharedMemory, llc, 0.0);
    CHECK(c.cache_bytes == llc);
    CHECK(c.cache_factor == kCacheFactor);
    CHECK(c.cross_s_per_byte == Approx(kCrossPerLineExchange * kLineExchangeS));
    CHECK(with_caches(kSharedMemory, llc, 0.25e-6).cross_s_per_byte == Approx(kCrossPerLineExchange * 0.25e-6));
    CHECK(kSharedMemory.cache_bytes == 0.0);  // the plain figures leave it out
  }
  SECTION("a staged all_reduce whose buffers fit in half the cache costs a fraction; beyond, less so") {
    // 2 ranks x (Input + Output + Scratch): 1.5 MiB at 256 KiB, 96 MiB at 16 MiB.
    const CostParams c = with_caches(kSharedMemory, llc, 0.0);
    const Plan in_cache = plan_of(Collective::AllReduce, "staged", 2, 65536, true);
    const double plain = predict_seconds(in_cache, kSharedMemory), cached = predict_seconds(in_cache, c);
    CHECK(cached < 0.5 * plain);
    // Measured 9.8-10.8 us in the host's usual phase, 24-28 in its slow
    // one (bench/RESULTS.md section 49); priced 30.4 without the caches.
    CHECK(cached > 9e-6);
    CHECK(cached < 13e-6);
    CHECK(predict_seconds(in_cache, with_caches(kSharedMemory, llc, 0.25e-6)) > 2 * cached);
    // Beyond, its operands in memory price it (the next section).
    const Plan beyond = plan_of(Collective::AllReduce, "staged", 2, 4 << 20, true);
    CHECK(predict_seconds(beyond, c) > 0.6 * predict_seconds(beyond, kSharedMemory));
  }
  SECTION("beyond the cache, by operand: memory's part and the rest overlap") {
    // staged all_reduce of 16 MiB at 2 ranks: Input read and Output written
    // once from memory, its chunks (Scratch) in cache and across CPUs.
    // Measured 1.40-1.50 ms in the usual phase, 2.04-2.15 in the slow one
    // (bench/RESULTS.md section 50); priced 1.94 in both as a sum.
    const Plan staged = plan_of(Collective::AllReduce, "staged", 2, 4 << 20, true);
    const double usual = predict_seconds(staged, with_caches(kSharedMemory, llc, 0.0));
    const double slow = predict_seconds(staged, with_caches(with_line_exchange(kSharedMemory, 0.25e-6), llc, 0.25e-6));
    CHECK(usual > 1.2e-3);
    CHECK(usual < 1.7e-3);
    CHECK(slow > 1.8e-3);
    CHECK(slow < 2.6e-3);
    // A Scratch beyond a quarter of the cache is memory's, as before:
    // oneshot all_gather of 16 MiB (16 MiB of Scratch in all).
    const Plan oneshot = plan_of(Collective::AllGather, "oneshot", 2, 2 << 20, true);
    const CostParams c = with_caches(kSharedMemory, llc, 0.0);
    CHECK(predict_seconds(oneshot, c) == Approx(predict_seconds(oneshot, kSharedMemory)).epsilon(0.01));
    PlanArgs a = make_args(Collective::AllGather, 2, 2 << 20);
    a.topology.one_host = true;
    CHECK(std::string(choose(Collective::AllGather, a, c)->name) == "staged");
  }
  SECTION("over TCP beyond the cache, the transport's two copies pay memory's rate") {
    const CostParams c = with_caches(kTcpLoopback, llc, 0.0);
    const Plan big = plan_of(Collective::AllReduce, "ring", 2, 4 << 20, false);  // 16 MiB: 64 MiB in all
    const double extra = 2 * kTcpLoopback.copy_s_per_byte * (1 - kCacheFactor);
    // Each rank sends and receives half the vector twice (reduce-scatter,
    // all-gather): 16 MiB through each rank's transport, 8 MiB each way.
    CHECK(predict_seconds(big, c) - predict_seconds(big, kTcpLoopback) == Approx(extra * (16 << 20)).epsilon(0.05));
    // In cache, only the local reduction is cheaper.
    const Plan small = plan_of(Collective::AllReduce, "ring", 2, 1 << 16, false);
    CHECK(predict_seconds(small, c) < predict_seconds(small, kTcpLoopback));
  }
  SECTION("whom the runtime prices so: one host, CPUs of their own, unmapped host buffers") {
    PlanArgs a = make_args(Collective::AllReduce, 2, 1024);
    CHECK_FALSE(prices_caches(a));  // not shared memory
    a.topology.one_host = true;
    CHECK(prices_caches(a));
    PlanArgs shared = a, mapped = a, device = a, hosts = a;
    shared.topology.shared_cpus = true;
    mapped.topology.mapped_buffers = true;
    device.topology.device_of = {0, 0};
    hosts.topology.host_of = {0, 1};
    for (const PlanArgs* x : {&shared, &mapped, &device, &hosts}) CHECK_FALSE(prices_caches(*x));
  }
  SECTION("the choice: a 2-rank reduce_scatter of 512 KiB takes oneshot, not peer_read") {
    // Measured oneshot 15.6-16.5 us, peer_read 28.8-38.7 (section 49): the
    // plain figures price oneshot's copies at memory's rate (81 us).
    PlanArgs a = make_args(Collective::ReduceScatter, 2, 131072);
    a.topology.one_host = true;
    CHECK(std::string(choose(Collective::ReduceScatter, a, kSharedMemory)->name) == "peer_read");
    CHECK(std::string(choose(Collective::ReduceScatter, a, with_caches(kSharedMemory, llc, 0.0))->name) == "oneshot");
  }
}

TEST_CASE("cost model: each message is priced by the link it crosses", "[cost]") {
  const CostParams local{1e-6, 1e-9, 0.5e-9, 0.25e-9};
  const CostParams remote{10e-6, 4e-9, 0.5e-9, 0.25e-9};
  auto broadcast_to = [](int peer, std::vector<int> host_of) {
    PlanArgs a = make_args(Collective::Broadcast, 4, 100, 0, 4);
    a.topology.host_of = std::move(host_of);
    PlanBuilder b(a, "t");
    b.send(0, peer, out(0, 100));
    b.recv(peer, 0, out(0, 100));
    return b.finish();
  };
  const LinkCosts links{local, remote};
  SECTION("a pair on one host pays the local link, a pair across hosts the remote one") {
    CHECK(predict_seconds(broadcast_to(1, {0, 0, 1, 1}), links) == Approx(1e-6 + 400e-9));
    CHECK(predict_seconds(broadcast_to(2, {0, 0, 1, 1}), links) == Approx(10e-6 + 1600e-9));
  }
  SECTION("one host, or no layout: the local link prices everything") {
    CHECK(predict_seconds(broadcast_to(2, {0, 0, 0, 0}), links) == Approx(1e-6 + 400e-9));
    CHECK(predict_seconds(broadcast_to(2, {}), links) == Approx(1e-6 + 400e-9));
  }
  SECTION("the choice follows the links: a two-host grid avoids crossing more than it must") {
    // 2 hosts x 4 ranks, all_reduce of 64 MiB, a slow link between hosts:
    // the plan chosen predicts no worse than any other under those links.
    PlanArgs a = make_args(Collective::AllReduce, 8, 16 << 20, 0, 4);
    a.topology.host_of = {0, 0, 0, 0, 1, 1, 1, 1};
    const LinkCosts slow = link_costs(kSharedMemory, kTcpLoopback, a.topology.host_of);
    const Algorithm* best = choose(Collective::AllReduce, a, slow);
    const double t_best = predict_seconds(best->build(a), slow);
    for (const Algorithm& alg : algorithms())
      if (alg.coll == Collective::AllReduce && alg.automatic && (!alg.supports || alg.supports(a)))
        CHECK(t_best <= predict_seconds(alg.build(a), slow));
    CHECK(slow.local.fastbox_alpha_s == 0.0);  // no fast boxes across hosts
  }
  SECTION("a rank's exchanges with a host-mate do not wait behind its crossing") {
    // Rank 0 sends 4000 bytes across (10 us + 16 us) and meanwhile plays
    // ping-pong with its host-mate, ten messages of 40 bytes (1.04 us
    // each). The ranks' ports for crossings are not their ports for
    // host-mates, so the two overlap: 26 us. (With one pair the ping-pong
    // began after the crossing, 36.4 us: hierarchical all_gather on 2x2,
    // which shares one slice inside while the next crosses, was priced
    // 2.3x what it measured.)
    PlanArgs a = make_args(Collective::Broadcast, 4, 1010, 0, 4);
    a.topology.host_of = {0, 0, 1, 1};
    PlanBuilder b(a, "t");
    b.send(0, 2, out(0, 1000));
    b.recv(2, 0, out(0, 1000));
    int at0 = -1, at1 = -1;
    for (int i = 0; i < 5; ++i) {
      b.send(0, 1, out(1000, 10), {at0});
      at1 = b.recv(1, 0, out(1000, 10), {at1});
      b.send(1, 0, out(1000, 10), {at1});
      at0 = b.recv(0, 1, out(1000, 10), {at0});
    }
    CHECK(predict_seconds(b.finish(), links) == Approx(10e-6 + 16000e-9));
  }
}

TEST_CASE("cost model: hosts emulated on one machine share its CPUs", "[cost]") {
  // Two ranks on two hosts swap 1 MB. Between namespaces of one machine
  // the sender's CPU carries a message through the kernel for as long as a
  // stream between namespaces takes (kMachineStreamSPerByte, or the rate
  // measured), and the receiver's copies it out, whatever the link's own
  // rate; host-mates' messages take a copy on each end.
  const CostParams local{1e-6, 1e-12, 0.5e-9, 0.25e-9};
  const CostParams fast_link{10e-6, 1e-12, 0.5e-9, 0.1e-9};  // copies at 0.1 ns a byte
  const double send = kMachineStreamSPerByte * 1e6, copy = 0.1e-9 * 1e6;  // one message's ends
  auto swap = [](int ranks, int machine_cpus, bool one_machine, double stream_s_per_byte = 0) {
    PlanArgs a = make_args(Collective::Broadcast, ranks, 500000, 0, 4);  // no copy before the plan
    a.topology.host_of.clear();
    for (int r = 0; r < ranks; ++r) a.topology.host_of.push_back(r * 2 / ranks);
    if (one_machine) {
      a.topology.machine_of.assign(static_cast<std::size_t>(ranks), 0);
      a.topology.machine_cpus = machine_cpus;
      a.topology.machine_stream_s_per_byte = stream_s_per_byte;
    }
    PlanBuilder b(a, "t");
    const int peer = ranks / 2;  // rank 0's counterpart on the other host
    b.send(0, peer, out(0, 250000));
    b.recv(peer, 0, out(250000, 250000));
    b.send(peer, 0, out(250000, 250000));
    b.recv(0, peer, out(0, 250000));
    return b.finish();
  };
  SECTION("a fast link: the two messages' work shares 2 CPUs, 4 share nothing") {
    const LinkCosts fast{local, fast_link};
    CHECK(predict_seconds(swap(2, 0, false), fast) == Approx(10e-6 + 1e-6));
    // Two senders' streams and two receivers' copies on 2 CPUs.
    CHECK(predict_seconds(swap(2, 2, true), fast) == Approx(send + copy + 10e-6));
    // A CPU each: the sender's stream is the longer end.
    CHECK(predict_seconds(swap(2, 4, true), fast) == Approx(send + 10e-6));
    // The stream's rate as measured (here 64 Gbit/s: 0.125 ns a byte).
    CHECK(predict_seconds(swap(2, 4, true, 0.125e-9), fast) == Approx(0.125e-9 * 1e6 + 10e-6));
  }
  SECTION("a slow link: the CPUs keep up, the link is the bound") {
    const LinkCosts slow{local, CostParams{10e-6, 4e-9, 0.5e-9, 0.1e-9}};
    CHECK(predict_seconds(swap(2, 2, true), slow) == Approx(predict_seconds(swap(2, 0, false), slow)));
  }
  SECTION("more ranks than CPUs: a message waits for its receiver's turn") {
    // 4 ranks on 2 CPUs: every message costs one other rank's turn more,
    // and the two messages' work shares the 2 CPUs.
    const LinkCosts fast{local, fast_link};
    CHECK(predict_seconds(swap(4, 2, true), fast) == Approx(send + copy + 10e-6 + 14e-6));
    // With 4 CPUs: a CPU each.
    CHECK(predict_seconds(swap(4, 4, true), fast) == Approx(send + 10e-6));
  }
  SECTION("host-mates' messages copy on both ends, on the machine's CPUs; over TCP the sender's carries a stream") {
    // 2 hosts x 2 ranks: rank 0 sends 1 MB to its host-mate 1, whose link
    // copies at 0.2 ns a byte.
    const CostParams mates{1e-6, 1e-12, 0.5e-9, 0.2e-9};
    const LinkCosts links{mates, fast_link};
    const double mate_copy = 0.2e-9 * 1e6;
    auto to_mate = [](int cpus, bool shares_memory) {
      PlanArgs a = make_args(Collective::Broadcast, 4, 250000, 0, 4);
      a.topology.host_of = {0, 0, 1, 1};
      a.topology.host_shares_memory = shares_memory;
      if (cpus > 0) {
        a.topology.machine_of = {0, 0, 0, 0};
        a.topology.machine_cpus = cpus;
      }
      PlanBuilder b(a, "t");
      b.send(0, 1, out(0, 250000));
      b.recv(1, 0, out(0, 250000));
      return b.finish();
    };
    CHECK(predict_seconds(to_mate(0, true), links) == Approx(1e-6 + 1e-6));  // each host a machine: no CPUs shared
    // One CPU: the two copies one after the other (and the turns of 4 ranks
    // on a CPU: 3 x 14 us); four: side by side.
    CHECK(predict_seconds(to_mate(1, true), links) == Approx(2 * mate_copy + 1e-6 + 3 * 14e-6));
    CHECK(predict_seconds(to_mate(4, true), links) == Approx(mate_copy + 1e-6));
    // Host-mates over TCP (a backend that forces it): the sender's kernel
    // carries the stream, the receiver copies.
    CHECK(predict_seconds(to_mate(1, false), links) == Approx(send + mate_copy + 1e-6 + 3 * 14e-6));
    CHECK(predict_seconds(to_mate(4, false), links) == Approx(send + 1e-6));
  }
}

namespace {
// n ranks, `per` to a host, in blocks.
std::vector<int> blocks_of(int n, int per) {
  std::vector<int> layout;
  for (int r = 0; r < n; ++r) layout.push_back(r / per);
  return layout;
}
// Between hosts: 8 us and `s_per_byte` (4 Gbit/s: 2 ns a byte); shared
// memory inside.
LinkCosts over_link(const std::vector<int>& layout, double s_per_byte) {
  return link_costs(kSharedMemory, with_link(kTcpLoopback, 8e-6, s_per_byte), layout);
}

// `coll` on 4 hosts x 2 ranks, 1 MiB of float32 per block, over a link of
// `s_per_byte`: the prices of its hierarchical and ring plans, and the
// link's bound, (H-1) x 2 blocks into each host, the least either
// all_gather or reduce_scatter must take across.
struct FourByTwo {
  double bound, hierarchical, ring;
};
FourByTwo four_by_two(Collective coll, double s_per_byte) {
  const int hosts = 4, per = 2;
  const auto layout = blocks_of(hosts * per, per);
  auto args = make_args(coll, hosts * per, 1 << 18);
  args.topology.host_of = layout;
  auto price = [&](const char* name) {
    return predict_seconds(find_algorithm(coll, name)->build(args), over_link(layout, s_per_byte));
  };
  return {(hosts - 1) * per * static_cast<double>(args.count) * 4 * s_per_byte, price("hierarchical"), price("ring")};
}
}  // namespace

// Across hosts a message books its ports and both hosts' links in
// calendars, first fit (cost_model.cpp); a gap as long as the message must
// take it whatever the rounding, or times drop from one size to the next.
TEST_CASE("cost model: more bytes never cost less across hosts either", "[cost]") {
  for (int n : {4, 5, 8, 12, 16}) {
    for (int per : {1, 2, 4}) {
      if (n % per) continue;
      const auto layout = blocks_of(n, per);
      for (const Algorithm& a : algorithms()) {
        for (std::int64_t count : {1000, 100000}) {
          auto args = make_args(a.coll, n, a.coll == Collective::Barrier ? 0 : count, n / 2);
          args.topology.host_of = layout;
          if (a.supports && !a.supports(args)) continue;
          Plan p = a.build(args);
          double prev = 0;
          for (std::size_t elem : {1, 2, 3, 4, 5, 8, 64}) {
            p.args.elem_size = elem;
            const double t = predict_seconds(p, over_link(layout, 2e-9));
            INFO(fmt::format("{} / {} nranks={} per host={} count={} elem_size={}", collective_name(p.coll),
                             p.algorithm, n, per, count, elem));
            CHECK(t >= prev);
            prev = t;
          }
        }
      }
    }
  }
}

// Hierarchical all_gather sends every block straight to every other host
// at once: each host's link takes (H-1) x its ranks' blocks each way, the
// least possible, and the plan is priced near that. When a crossing that
// waited for a busy link booked everything up to its start, it was priced
// at about 4x.
TEST_CASE("cost model: crossings that wait for a link leave its gaps to others", "[cost]") {
  const FourByTwo f = four_by_two(Collective::AllGather, 2e-9);  // 4 Gbit/s
  INFO(fmt::format("link bound {:.3f} ms, hierarchical {:.3f} ms, ring {:.3f} ms", f.bound * 1e3,
                   f.hierarchical * 1e3, f.ring * 1e3));
  CHECK(f.hierarchical >= f.bound);
  CHECK(f.hierarchical <= 1.15 * f.bound);
  CHECK(f.hierarchical < f.ring);  // ring crosses (n-1) blocks per host each way, hierarchical (H-1) x per = 6 of 7
}

// Hierarchical reduce_scatter: each host's partial sum of block d goes
// straight to d, which takes them in turn from the hosts after its own, so
// that at each turn every host sends to one host and receives from one.
// When every d took them from host 0 first (then 1, ...), one link carried
// them all while the others waited, and the plan was priced 1.55x the
// link's bound (measured 1.14x, 4 x 2 at 1 Gbit/s).
TEST_CASE("cost model: hierarchical reduce_scatter crosses near the link's bound", "[cost]") {
  // Over 1 Gbit/s (8 ns a byte), where the link is the bound.
  const FourByTwo f = four_by_two(Collective::ReduceScatter, 8e-9);
  INFO(fmt::format("link bound {:.3f} ms, hierarchical {:.3f} ms", f.bound * 1e3, f.hierarchical * 1e3));
  CHECK(f.hierarchical >= f.bound);
  CHECK(f.hierarchical <= 1.15 * f.bound);
}

// A rank's own share of a block stays in its Input until the first arrival
// is combined with it: no Copy anywhere while every host has company, and a
// host of one rank sends its share from Input, with no Scratch at all.
TEST_CASE("hierarchical reduce_scatter copies nothing first", "[verify][hosts]") {
  for (int per : {1, 2, 3}) {
    const int n = 3 * per;
    auto args = make_args(Collective::ReduceScatter, n, 1000);
    args.topology.host_of = blocks_of(n, per);
    const Plan p = find_algorithm(Collective::ReduceScatter, "hierarchical")->build(args);
    INFO(fmt::format("{} ranks, {} to a host", n, per));
    CHECK(verify(p).ok);
    for (const RankPlan& rp : p.ranks) {
      for (const Step& st : rp.steps) CHECK(st.kind != StepKind::Copy);
      if (per == 1) CHECK(rp.scratch_count == 0);
    }
  }
}

TEST_CASE("cost model: more bytes never cost less for the same plan", "[cost]") {
  std::vector<Plan> plans;
  for (int n : {2, 3, 8, 17}) {
    plans.push_back(naive_allreduce(make_args(Collective::AllReduce, n, 1000)));
    plans.push_back(naive_allgather(make_args(Collective::AllGather, n, 1000)));
    for (const Algorithm& a : algorithms()) {
      const auto args = make_args(a.coll, n, a.coll == Collective::Barrier ? 0 : 1000, n / 2);
      if (!a.supports || a.supports(args)) plans.push_back(a.build(args));
    }
  }
  for (const CostParams& params : {kTcpLoopback, kSharedMemory}) {
    for (Plan& p : plans) {
      double prev = 0;
      for (std::size_t elem : {1, 2, 4, 8, 64, 4096}) {
        p.args.elem_size = elem;
        const double t = predict_seconds(p, params);
        INFO(fmt::format("{} / {} nranks={} elem_size={}", collective_name(p.coll), p.algorithm, p.args.nranks, elem));
        CHECK(std::isfinite(t));
        CHECK(t >= prev);
        prev = t;
      }
    }
  }
}

TEST_CASE("choose: forced names are honoured, unknown names list the valid ones", "[cost]") {
  for (const Algorithm& a : algorithms()) {
    const auto args = make_args(a.coll, 5, 77, 1);
    if (a.supports && !a.supports(args)) continue;
    CHECK(choose(a.coll, args, kTcpLoopback, a.name) == &a);
  }
  for (int i = 0; i < kNumCollectives; ++i) {
    const auto coll = static_cast<Collective>(i);
    const auto names = algorithm_names(coll);
    try {
      choose(coll, make_args(coll, 4, 8), kTcpLoopback, "no_such_algorithm");
      FAIL("unknown algorithm accepted");
    } catch (const braid::Error& e) {
      CHECK(e.code() == braid::ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("no_such_algorithm"));
      for (const auto& n : names) CHECK_THAT(e.what(), Catch::Contains(n));
    }
    if (names.empty()) continue;
    // Unforced: the minimum predicted time among the algorithms offered.
    for (int n : {2, 7, 16}) {
      for (std::int64_t count : {1, 100000}) {
        const auto args = make_args(coll, n, coll == Collective::Barrier ? 0 : count);
        const Algorithm* best = choose(coll, args, kTcpLoopback);
        REQUIRE(best != nullptr);
        CHECK(best->coll == coll);
        const double t_best = predict_seconds(best->build(args), kTcpLoopback);
        for (const Algorithm& a : algorithms())
          if (a.coll == coll && a.automatic && (!a.supports || a.supports(args)) && (!a.offered || a.offered(args)))
            CHECK(t_best <= predict_seconds(a.build(args), kTcpLoopback));
      }
    }
  }
}

TEST_CASE("BRAID_ALGO parsing", "[cost]") {
  CHECK(parse_algo_env("").empty());
  CHECK(parse_algo_env(" ; ").empty());
  CHECK_THROWS_AS(parse_algo_env("allreduce:no_such_algorithm"), braid::Error);
  try {
    parse_algo_env("allreduces:ring");
    FAIL("unknown collective accepted");
  } catch (const braid::Error& e) {
    CHECK(e.code() == braid::ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("allreduces"));
    CHECK_THAT(e.what(), Catch::Contains("reducescatter"));  // lists the valid collectives
  }
  CHECK_THROWS_AS(parse_algo_env("no_such_algorithm"), braid::Error);

  for (const Algorithm& a : algorithms()) {
    INFO(a.name);
    const std::string coll = collective_name(a.coll);
    auto m = parse_algo_env(fmt::format(" {}:{} ", coll, a.name));
    REQUIRE(m.size() == 1);
    CHECK(m.at(a.coll) == a.name);
    // torch spelling, upper case, a trailing separator.
    std::string upper = a.name;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const std::string torch = a.coll == Collective::AllReduce ? "all_reduce" : coll;
    m = parse_algo_env(fmt::format("{}:{};", torch, upper));
    CHECK(m.at(a.coll) == a.name);
    // A bare name covers exactly the collectives that have it.
    m = parse_algo_env(a.name);
    for (int i = 0; i < kNumCollectives; ++i) {
      const auto c = static_cast<Collective>(i);
      CHECK((m.count(c) == 1) == (find_algorithm(c, a.name) != nullptr));
    }
    // An unknown algorithm for this collective lists the valid names.
    try {
      parse_algo_env(coll + ":no_such_algorithm");
      FAIL("unknown algorithm accepted");
    } catch (const braid::Error& e) {
      for (const auto& n : algorithm_names(a.coll)) CHECK_THAT(e.what(), Catch::Contains(n));
    }
  }
  if (algorithms().size() >= 2) {
    const Algorithm& x = algorithms()[0];
    const Algorithm& y = algorithms()[algorithms().size() - 1];
    if (x.coll != y.coll) {
      auto m = parse_algo_env(fmt::format("{}:{};{}:{}", collective_name(x.coll), x.name, collective_name(y.coll), y.name));
      CHECK(m.size() == 2);
      CHECK(m.at(x.coll) == x.name);
      CHECK(m.at(y.coll) == y.name);
    }
  }
}
